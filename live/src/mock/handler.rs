//! Answering one request: routing, admission and the dispatch of a generation.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use rand::RngExt;
use tokio::sync::{mpsc, watch};

use super::api::{self, Api, GenRequest, Words};
use super::body::{Kind, MockBody, Track};
use super::config::Mode;
use super::job::Job;
use super::journal::{RequestTag, Served};
use super::state::ServerState;
use super::{MAX_BODY_BYTES, VOCABULARY};
use crate::net::server::{Arrived, LatestRead};
use crate::time::clock::Clock;

/// Serves on `listener` until `shutdown` turns true, then lets open responses finish.
pub(super) async fn serve(
    state: Arc<ServerState>,
    listener: std::net::TcpListener,
    shutdown: watch::Receiver<bool>,
) {
    let header_timeout = state.cfg.header_timeout;
    // Whole responses at once: the next work is another request, and the client it
    // woke should read first. Timed streams: the next work is other streams' tokens,
    // due now.
    let hand_off = state.cfg.is_instant();
    // A journal's requests count from the kernel's arrival stamp of their heads: the truth
    // an audit holds a client against is the server's latency from the moment the request
    // reached it, its own wake-up included.
    let stamp_arrivals = state.journal.is_some() && matches!(state.clock, Clock::Host(_));
    let handler = move |req| handle(req, state.clone());
    crate::net::server::serve(
        listener,
        header_timeout,
        crate::net::server::DRAIN,
        hand_off,
        stamp_arrivals,
        handler,
        shutdown,
    )
    .await;
}

pub(super) fn response(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<MockBody> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(MockBody::full(body))
        .expect("static response parts are valid")
}

pub(super) fn error(
    status: StatusCode,
    message: &str,
    kind: &str,
    code: &str,
) -> Response<MockBody> {
    response(
        status,
        "application/json",
        api::error_body(message, kind, code),
    )
}

pub(super) async fn handle(
    req: Request<Incoming>,
    state: Arc<ServerState>,
) -> Result<Response<MockBody>, Infallible> {
    let now_ns = state.clock.stamp_ns();
    let arrival_ns = match req.extensions().get::<Arrived>() {
        Some(Arrived(ns)) => (*ns).min(now_ns),
        None => now_ns,
    };
    let generation = req.method() == Method::POST
        && matches!(req.uri().path(), "/v1/completions" | "/v1/chat/completions");
    let latest_read = req.extensions().get::<LatestRead>().cloned();
    let request_tag = state
        .journal
        .as_ref()
        .and_then(|_| req.headers().get("x-request-id")?.to_str().ok())
        .map(RequestTag::of);
    let mut r = route(req, &state).await;
    if let Some(journal) = &state.journal
        && generation
    {
        // The body has been collected: the connection's latest read brought its end (a
        // client sends nothing more before the answer), else it came with the head.
        let now_ns = state.clock.stamp_ns();
        let received_ns = latest_read
            .map_or(arrival_ns, |l| l.ns())
            .clamp(arrival_ns, now_ns.max(arrival_ns));
        let status = r.status().as_u16();
        r.body_mut().track = Some(Track {
            journal: journal.clone(),
            clock: state.clock.clone(),
            served: Served {
                arrival_ns,
                received_ns,
                status,
                first_token_ns: None,
                last_token_ns: None,
                tokens: 0,
                prompt_tokens: 0,
                bytes: 0,
                complete: false,
                id: None,
                request_tag,
            },
            frames: 0,
        });
    }
    Ok(r)
}

pub(super) async fn route(req: Request<Incoming>, state: &Arc<ServerState>) -> Response<MockBody> {
    let api = match (req.method(), req.uri().path()) {
        (&Method::GET, "/health") => return response(StatusCode::OK, "text/plain", "OK"),
        (&Method::GET, "/metrics") => {
            return response(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                state.metrics.render(&state.cfg.model),
            );
        }
        (&Method::GET, "/v1/models") => {
            let body = serde_json::json!({
                "object": "list",
                "data": [{ "id": state.cfg.model, "object": "model", "created": 0, "owned_by": "heisenbench" }],
            });
            return response(StatusCode::OK, "application/json", body.to_string());
        }
        (&Method::POST, "/v1/completions") => Api::Completions,
        (&Method::POST, "/v1/chat/completions") => Api::Chat,
        (_, "/v1/completions" | "/v1/chat/completions" | "/v1/models" | "/health" | "/metrics") => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                "invalid_request_error",
                "method_not_allowed",
            );
        }
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "no such endpoint",
                "invalid_request_error",
                "not_found",
            );
        }
    };
    // The body gets as long as a head does: a client that promises more than it sends
    // (a short content-length, an unfinished chunked body) is answered 408 and closed,
    // not held.
    let patience = state.cfg.header_timeout;
    let body = match tokio::time::timeout(
        patience,
        Limited::new(req.into_body(), MAX_BODY_BYTES).collect(),
    )
    .await
    {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read body: {e}"),
                "invalid_request_error",
                "invalid_request_error",
            );
        }
        Err(_) => {
            let mut r = error(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the request body did not arrive within {:.1} s",
                    patience.as_secs_f64()
                ),
                "invalid_request_error",
                "request_timeout",
            );
            r.headers_mut().insert(
                hyper::header::CONNECTION,
                hyper::header::HeaderValue::from_static("close"),
            );
            return r;
        }
    };
    generate(api, &body, state.clone()).await
}

pub(super) async fn generate(api: Api, body: &[u8], state: Arc<ServerState>) -> Response<MockBody> {
    let cfg = &state.cfg;
    // Injected failures come first, as if the server had failed before doing any work.
    if cfg.failure_injection_rate > 0.0 {
        let mut rng = state.rng.lock().expect("rng lock");
        if rng.random::<f64>() * 100.0 < cfg.failure_injection_rate {
            let f = cfg.failure_types[rng.random_range(0..cfg.failure_types.len())];
            drop(rng);
            state.metrics.injected.fetch_add(1, Relaxed);
            let status = StatusCode::from_u16(f.status()).expect("known statuses");
            return response(status, "application/json", api::failure_body(f));
        }
    }
    let g = match api::parse(api, body) {
        Ok(g) => g,
        Err(m) => {
            return error(
                StatusCode::BAD_REQUEST,
                &m.to_string(),
                "invalid_request_error",
                "invalid_request_error",
            );
        }
    };
    if let Some(m) = &g.model
        && m != &cfg.model
    {
        return error(
            StatusCode::NOT_FOUND,
            &format!("The model '{m}' does not exist"),
            "invalid_request_error",
            "model_not_found",
        );
    }
    let prompt_tokens = u32::try_from(g.prompt_words.len()).unwrap_or(u32::MAX);
    if u64::from(prompt_tokens) + u64::from(g.max_tokens) > u64::from(cfg.max_model_len) {
        let m = format!(
            "This model's maximum context length is {} tokens; the request asks for {} ({} in the prompt, {} to generate)",
            cfg.max_model_len,
            u64::from(prompt_tokens) + u64::from(g.max_tokens),
            prompt_tokens,
            g.max_tokens
        );
        return error(
            StatusCode::BAD_REQUEST,
            &m,
            "invalid_request_error",
            "context_length_exceeded",
        );
    }
    // Admission: a free slot, else a place in the waiting line, else 429.
    let arrived = state.clock.now();
    let permit = match state.slots.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => {
            let waiting = state.metrics.waiting.fetch_add(1, Relaxed);
            if waiting >= u64::from(cfg.max_waiting_queue_length) {
                state.metrics.waiting.fetch_sub(1, Relaxed);
                state.metrics.rejected.fetch_add(1, Relaxed);
                return error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "the waiting queue is full",
                    "rate_limit_exceeded",
                    "rate_limit_exceeded",
                );
            }
            let p = state
                .slots
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            state.metrics.waiting.fetch_sub(1, Relaxed);
            p
        }
    };
    let start = state.clock.now();
    state
        .metrics
        .queue
        .observe_ns((start - arrived).as_nanos() as u64);
    state.metrics.running.fetch_add(1, Relaxed);
    let cached_tokens = state.cached_tokens(&g.prompt_words);
    state
        .metrics
        .prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Relaxed);
    let (tokens, finish) = text(&g, &state);
    let id = state.next_id.fetch_add(1, Relaxed);
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let job = Job {
        state: state.clone(),
        g,
        tokens,
        finish,
        prompt_tokens,
        cached_tokens,
        id,
        created,
        arrived,
        start,
        _permit: permit,
    };
    let n = u32::try_from(job.tokens.len()).unwrap_or(u32::MAX);
    if !job.g.stream {
        let mut r = response(StatusCode::OK, "application/json", job.whole().await);
        r.body_mut().tokens = n;
        r.body_mut().prompt_tokens = prompt_tokens;
        r.body_mut().id = Some(id);
        return r;
    }
    if cfg.is_instant() {
        if !cfg.release_every.is_zero() {
            let clock = &state.clock;
            clock.sleep_until(state.released(clock.now())).await;
        }
        let mut body = MockBody::of(Kind::Instant(Some(job)));
        body.tokens = n;
        body.prompt_tokens = prompt_tokens;
        body.id = Some(id);
        return sse(body);
    }
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(job.timed_stream(tx));
    let mut body = MockBody::of(Kind::Stream(rx));
    body.lead = u32::from(api == Api::Chat);
    body.prompt_tokens = prompt_tokens;
    body.id = Some(id);
    sse(body)
}

pub(super) fn sse(body: MockBody) -> Response<MockBody> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .expect("static response parts are valid")
}

/// The tokens of the response (each with its trailing space) and the finish reason.
pub(super) fn text(g: &GenRequest, state: &ServerState) -> (Words, &'static str) {
    let n_max = g.max_tokens as usize;
    let mut tokens = Words::default();
    match state.cfg.mode {
        Mode::Echo => {
            // An empty prompt echoes one empty word.
            let words = g.prompt_words.len().max(1);
            let n = if g.ignore_eos {
                n_max
            } else {
                n_max.min(words)
            };
            let finish = if g.ignore_eos || words > n_max {
                "length"
            } else {
                "stop"
            };
            for i in 0..n {
                tokens.push_spaced(if g.prompt_words.is_empty() {
                    ""
                } else {
                    g.prompt_words.get(i % words)
                });
            }
            (tokens, finish)
        }
        Mode::Random => {
            let mut rng = state.rng.lock().expect("rng lock");
            let n = if g.ignore_eos {
                n_max
            } else {
                rng.random_range(1..=n_max)
            };
            let finish = if n == n_max { "length" } else { "stop" };
            for _ in 0..n {
                tokens.push_spaced(VOCABULARY[rng.random_range(0..VOCABULARY.len())]);
            }
            (tokens, finish)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use crate::mock::MockServer;
    use crate::mock::config::MockConfig;

    /// A client that writes its request's head, then its body 80 ms later: the server's
    /// truth starts when the body is in (the stamp of the read that brought it), and the
    /// 80 ms are counted apart as the client's. Without the body's stamp the truth would
    /// count the 80 ms as the server's, and the upload would read zero.
    #[test]
    fn a_body_written_late_is_the_clients_time() {
        let (m, journal) = MockServer::start_recorded(MockConfig {
            port: 0,
            ..MockConfig::default()
        })
        .unwrap();
        let body = r#"{"model":"heisenbench-mock","prompt":"a b c","max_tokens":4,"stream":true}"#;
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let mut s = TcpStream::connect(m.addr()).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(80));
        s.write_all(body.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let served = journal.snapshot();
        assert_eq!(served.len(), 1);
        let s = served[0];
        let upload_ms = s.upload_ns() as f64 * 1e-6;
        // The sleep is at least 80 ms; a loaded machine may add to it, never take from it.
        assert!(
            (79.0..2_000.0).contains(&upload_ms),
            "upload {upload_ms} ms"
        );
        let ttft_ms = (s.first_token_ns.unwrap() - s.received()) as f64 * 1e-6;
        assert!(
            ttft_ms < 79.0,
            "the server's time to first token {ttft_ms} ms"
        );
    }

    /// With `release_every`, a response written at once still waits for the next whole
    /// period: two requests sent one after the other, the second as soon as the first is
    /// answered, get their first tokens a period apart, and the second's truth counts the
    /// wait. Without it they would be a few milliseconds apart.
    #[test]
    fn responses_leave_on_the_release_period() {
        let period = Duration::from_millis(200);
        let (m, journal) = MockServer::start_recorded(MockConfig {
            port: 0,
            release_every: period,
            ..MockConfig::default()
        })
        .unwrap();
        let body = r#"{"model":"heisenbench-mock","prompt":"a b c","max_tokens":4,"stream":true}"#;
        let request = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        for _ in 0..2 {
            let mut s = TcpStream::connect(m.addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(request.as_bytes()).unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
        let served = journal.snapshot();
        assert_eq!(served.len(), 2);
        let first = |i: usize| served[i].first_token_ns.unwrap();
        let apart_ms = (first(1) - first(0)) as f64 * 1e-6;
        // A period apart, less what the first release came later than the second (a wake
        // is never early, and a loaded machine may make one of them late).
        assert!((150.0..400.0).contains(&apart_ms), "{apart_ms} ms apart");
        let waited_ms = (first(1) - served[1].received()) as f64 * 1e-6;
        assert!((100.0..400.0).contains(&waited_ms), "waited {waited_ms} ms");
    }
}
