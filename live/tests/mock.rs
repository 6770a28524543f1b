//! The mock server over real loopback HTTP, with a small independent HTTP/1.1 client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::{FailureType, MockConfig, Mode};
use serde_json::Value;

fn start(cfg: MockConfig) -> MockServer {
    MockServer::start(MockConfig { port: 0, ..cfg }).expect("mock starts")
}

/// A response: status, and each body piece (an SSE event, or the whole body) with the
/// instant it was complete.
struct Reply {
    status: u16,
    sent: Instant,
    events: Vec<(Instant, String)>,
}

impl Reply {
    fn body(&self) -> String {
        self.events.iter().map(|(_, e)| e.as_str()).collect()
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body()).unwrap_or_else(|e| panic!("{e}: {}", self.body()))
    }
    /// The SSE data payloads, checking the framing of every event on the way.
    fn sse(&self) -> Vec<(Instant, String)> {
        self.events
            .iter()
            .map(|(t, e)| {
                assert!(
                    e.starts_with("data: ") && e.ends_with("\n\n"),
                    "bad framing: {e:?}"
                );
                (*t, e["data: ".len()..e.len() - 2].to_string())
            })
            .collect()
    }
}

/// A reply being read: the head, then the body decoded from chunked transfer encoding and
/// split into SSE events as they complete, each stamped with the read that completed it.
#[derive(Default)]
struct Reading {
    raw: Vec<u8>,
    decoded: Vec<u8>,
    head: Option<(u16, bool)>,
    events: Vec<(Instant, String)>,
}

impl Reading {
    fn feed(&mut self, bytes: &[u8], now: Instant) {
        self.raw.extend_from_slice(bytes);
        if self.head.is_none()
            && let Some(end) = self.raw.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let text = String::from_utf8_lossy(&self.raw[..end]).to_lowercase();
            let status = text[9..12].parse().unwrap();
            self.head = Some((status, text.contains("transfer-encoding: chunked")));
            self.raw.drain(..end + 4);
        }
        let Some((_, chunked)) = self.head else {
            return;
        };
        if chunked {
            // Decode every complete chunk in `raw`.
            while let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") {
                let size = usize::from_str_radix(
                    std::str::from_utf8(&self.raw[..line_end]).unwrap().trim(),
                    16,
                )
                .unwrap();
                if self.raw.len() < line_end + 2 + size + 2 {
                    break;
                }
                let data = line_end + 2..line_end + 2 + size;
                self.decoded.extend_from_slice(&self.raw[data]);
                self.raw.drain(..line_end + 2 + size + 2);
            }
        } else {
            self.decoded.append(&mut self.raw);
        }
        while let Some(p) = self.decoded.windows(2).position(|w| w == b"\n\n") {
            let event = String::from_utf8(self.decoded.drain(..p + 2).collect()).unwrap();
            self.events.push((now, event));
        }
    }

    fn end(mut self, sent: Instant, now: Instant) -> Reply {
        if !self.decoded.is_empty() {
            let rest = String::from_utf8(std::mem::take(&mut self.decoded)).unwrap();
            self.events.push((now, rest));
        }
        Reply {
            status: self.head.expect("a response head").0,
            sent,
            events: self.events,
        }
    }
}

fn request_text(method: &str, path: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Sends one request with `Connection: close` and reads the reply incrementally.
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let sent = Instant::now();
    s.write_all(request_text(method, path, body).as_bytes())
        .unwrap();
    let mut reading = Reading::default();
    let mut buf = [0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap();
        reading.feed(&buf[..n], Instant::now());
        if n == 0 {
            return reading.end(sent, Instant::now());
        }
    }
}

fn post(addr: SocketAddr, path: &str, body: &str) -> Reply {
    request(addr, "POST", path, body)
}

fn payloads(r: &Reply) -> Vec<Value> {
    r.sse()
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

#[test]
fn completions_stream_framing_counts_and_usage() {
    let m = start(MockConfig::default());
    let r = post(
        m.addr(),
        "/v1/completions",
        r#"{"model":"heisenbench-mock","prompt":"a b c","max_tokens":7,"stream":true,"ignore_eos":true,"stream_options":{"include_usage":true}}"#,
    );
    assert_eq!(r.status, 200);
    let sse = r.sse();
    assert_eq!(sse.last().unwrap().1, "[DONE]");
    let chunks = payloads(&r);
    let tokens: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(tokens.len(), 7, "one chunk per token with ignore_eos");
    assert!(
        tokens[..6]
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );
    assert_eq!(tokens[6]["choices"][0]["finish_reason"], "length");
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["completion_tokens"].as_u64(),
            usage["total_tokens"].as_u64()
        ),
        (Some(3), Some(7), Some(10))
    );
    let stamps: Vec<u64> = chunks
        .iter()
        .map(|c| c["heisenbench_sent_ns"].as_u64().unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]));
    // Without include_usage: no usage chunk.
    let r = post(
        m.addr(),
        "/v1/completions",
        r#"{"prompt":"a","max_tokens":3,"stream":true,"ignore_eos":true}"#,
    );
    let chunks = payloads(&r);
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
}

#[test]
fn chat_stream_opens_with_the_role() {
    let m = start(MockConfig::default());
    let r = post(
        m.addr(),
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"hi there"}],"max_tokens":5,"stream":true,"ignore_eos":true}"#,
    );
    let chunks = payloads(&r);
    assert_eq!(chunks.len(), 6);
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks[1..]
            .iter()
            .all(|c| c["choices"][0]["delta"]["content"].is_string())
    );
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "length");
}

#[test]
fn echo_mode_and_non_streaming_usage() {
    let m = start(MockConfig {
        mode: Mode::Echo,
        ..MockConfig::default()
    });
    let r = post(
        m.addr(),
        "/v1/completions",
        r#"{"prompt":"the quick  fox","max_tokens":10}"#,
    );
    let v = r.json();
    assert_eq!(v["choices"][0]["text"], "the quick fox ");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let r = post(
        m.addr(),
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"x y"}],"max_tokens":5,"ignore_eos":true}"#,
    );
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "x y x y x ");
    assert_eq!(v["usage"]["completion_tokens"], 5);
    assert_eq!(v["usage"]["total_tokens"], 7);
}

#[test]
fn failure_injection_all_or_nothing() {
    let types = vec![
        FailureType::RateLimit,
        FailureType::ServerError,
        FailureType::ModelNotFound,
    ];
    let m = start(MockConfig {
        failure_injection_rate: 100.0,
        failure_types: types,
        ..MockConfig::default()
    });
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let r = post(
            m.addr(),
            "/v1/completions",
            r#"{"prompt":"a","max_tokens":2}"#,
        );
        assert!([429, 503, 404].contains(&r.status), "{}", r.status);
        let e = &r.json()["error"];
        assert!(
            e["message"].is_string() && e["type"].is_string() && e["code"].is_string(),
            "{e}"
        );
        seen.insert(r.status);
    }
    assert_eq!(seen.len(), 3, "every configured type appears in 30 draws");
    let m = start(MockConfig {
        failure_injection_rate: 0.0,
        ..MockConfig::default()
    });
    for _ in 0..30 {
        assert_eq!(
            post(
                m.addr(),
                "/v1/completions",
                r#"{"prompt":"a","max_tokens":2}"#
            )
            .status,
            200
        );
    }
}

#[test]
fn request_errors_and_other_endpoints() {
    let m = start(MockConfig {
        max_model_len: 10,
        ..MockConfig::default()
    });
    let a = m.addr();
    let r = post(a, "/v1/completions", r#"{"model":"other","prompt":"a"}"#);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let r = post(a, "/v1/completions", r#"{"prompt":"a b c","max_tokens":8}"#);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (400, Some("context_length_exceeded"))
    );
    assert_eq!(post(a, "/v1/completions", "{not json").status, 400);
    assert_eq!(post(a, "/v1/nothing", "{}").status, 404);
    assert_eq!(request(a, "GET", "/health", "").status, 200);
    let models = request(a, "GET", "/v1/models", "").json();
    assert_eq!(models["data"][0]["id"], "heisenbench-mock");
    let metrics = request(a, "GET", "/metrics", "").body();
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:request_success_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:request_queue_time_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "{name} missing");
    }
}

/// Idle, silent and half-sent connections are closed after the header timeout instead of
/// being held forever. The guard (10 s) only catches a connection that is never closed.
#[test]
fn idle_and_partial_connections_are_closed() {
    let m = start(MockConfig {
        header_timeout: Duration::from_millis(300),
        ..MockConfig::default()
    });
    let addr: SocketAddr = m.url().trim_start_matches("http://").parse().unwrap();
    for opening in [
        &b""[..],
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n",
        // A body shorter than promised, and a chunked body never finished.
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"prompt\"",
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n9\r\n{\"prompt\"\r\n",
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(opening).unwrap();
        let mut buf = [0u8; 256];
        // Closed: EOF (or a 408 then EOF); a read timeout means it was held open.
        let mut total = Vec::new();
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total.extend_from_slice(&buf[..n]),
                Err(e) => panic!("connection held open ({e}) after {opening:?}"),
            }
        }
        let text = String::from_utf8_lossy(&total);
        assert!(
            total.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text}"
        );
        if opening.ends_with(b"\"") || opening.ends_with(b"\r\n\"prompt\"\r\n") {
            assert!(text.contains("did not arrive within 0.3 s"), "{text}");
        }
    }
    // The flags' own limits.
    for bad in [
        MockConfig {
            max_model_len: 0,
            ..MockConfig::default()
        },
        MockConfig {
            threads: 100_000,
            ..MockConfig::default()
        },
    ] {
        assert!(bad.validate().is_err());
    }
}

/// The mock on the test's own runtime with tokio's clock paused: every latency is exact
/// virtual time, whatever else the machine is doing, so these tests assert equalities.
/// (tokio's sleeps end on whole milliseconds: a deadline between two is met at the next.)
mod on_virtual_time {
    use super::*;
    use std::sync::Arc;

    use heisenbench_live::mock::{Journal, serve_with};
    use heisenbench_live::time::clock::Clock;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::watch;

    struct Virtual {
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        served: tokio::task::JoinHandle<()>,
        journal: Arc<Journal>,
    }

    fn start(cfg: MockConfig) -> Virtual {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = watch::channel(false);
        let journal = Arc::new(Journal::default());
        let j = journal.clone();
        let served = tokio::spawn(async move {
            serve_with(cfg, listener, Clock::tokio(), Some(j), rx)
                .await
                .expect("valid config")
        });
        Virtual {
            addr,
            stop,
            served,
            journal,
        }
    }

    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let sent = now();
        s.write_all(request_text(method, path, body).as_bytes())
            .await
            .unwrap();
        let mut reading = Reading::default();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            reading.feed(&buf[..n], now());
            if n == 0 {
                return reading.end(sent, now());
            }
        }
    }

    async fn post(addr: SocketAddr, body: &'static str) -> Reply {
        request(addr, "POST", "/v1/completions", body).await
    }

    /// Each token's arrival after the request was sent, and the stamps it carried.
    fn arrivals(r: &Reply) -> (Vec<Duration>, Vec<u64>) {
        let at = r.sse()[..r.sse().len() - 1]
            .iter()
            .map(|(t, _)| *t - r.sent)
            .collect();
        let stamps = payloads(r)
            .iter()
            .map(|c| c["heisenbench_sent_ns"].as_u64().unwrap())
            .collect();
        (at, stamps)
    }

    /// The value of the first exposition line that starts with `name`.
    fn metric(exposition: &str, name: &str) -> Option<String> {
        exposition
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn latencies_are_exact() {
        let m = start(MockConfig {
            time_to_first_token: Duration::from_millis(20),
            inter_token_latency: Duration::from_millis(20),
            ..MockConfig::default()
        });
        let r = post(
            m.addr,
            r#"{"prompt":"a","max_tokens":6,"stream":true,"ignore_eos":true}"#,
        )
        .await;
        let (at, stamps) = arrivals(&r);
        let due: Vec<Duration> = (1..=6).map(|k| Duration::from_millis(20 * k)).collect();
        assert_eq!(at, due);
        // The chunk's own stamp is when it was handed over: 20 ms apart exactly.
        let gaps: Vec<u64> = stamps.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, vec![20_000_000; 5]);
        // On time by its own account: six tokens, none late.
        let metrics = request(m.addr, "GET", "/metrics", "").await.body();
        let line = |name: &str| metric(&metrics, name);
        assert_eq!(
            line("heisenbench:mock_token_lateness_seconds_count").as_deref(),
            Some("6"),
            "{metrics}"
        );
        assert_eq!(
            line("heisenbench:mock_token_lateness_seconds_sum").as_deref(),
            Some("0")
        );
        assert_eq!(
            line("heisenbench:mock_tokens_due_together_total").as_deref(),
            Some("0"),
            "20 ms apart, no token is due before the one before it is out"
        );
    }

    /// Tokens due at one instant (no time between them) are counted as due together: each
    /// was due when the one before it was handed over, and the connection may write them in
    /// one piece.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn tokens_due_at_once_are_counted_as_due_together() {
        let m = start(MockConfig {
            time_to_first_token: Duration::from_millis(20),
            inter_token_latency: Duration::ZERO,
            ..MockConfig::default()
        });
        let r = post(
            m.addr,
            r#"{"prompt":"a","max_tokens":6,"stream":true,"ignore_eos":true}"#,
        )
        .await;
        let (at, _) = arrivals(&r);
        assert_eq!(at, vec![Duration::from_millis(20); 6]);
        let metrics = request(m.addr, "GET", "/metrics", "").await.body();
        assert_eq!(
            metric(&metrics, "heisenbench:mock_tokens_due_together_total").as_deref(),
            Some("5"),
            "{metrics}"
        );
    }

    /// With the prefix cache on, a prompt's cached blocks skip the prefill time per token:
    /// 9 words at 1 ms each cost 9 ms the first time; again, 8 of them (two blocks of 4; the
    /// block holding the last word is computed) come from the cache and 1 ms is left. The
    /// usage says so, and without the cache there are no details.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn cached_blocks_skip_their_prefill() {
        let body = r#"{"prompt":"a b c d e f g h i","max_tokens":2,"stream":true,"ignore_eos":true,"stream_options":{"include_usage":true}}"#;
        let cache = |on: bool| MockConfig {
            prefill_time_per_token: Duration::from_millis(1),
            enable_kvcache: on,
            block_size: 4,
            ..MockConfig::default()
        };
        let m = start(cache(true));
        let cached = |r: &Reply| {
            payloads(r).last().unwrap()["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64()
        };
        let first = post(m.addr, body).await;
        assert_eq!(arrivals(&first).0[0], Duration::from_millis(9));
        assert_eq!(cached(&first), Some(0));
        let again = post(m.addr, body).await;
        assert_eq!(arrivals(&again).0[0], Duration::from_millis(1));
        assert_eq!(cached(&again), Some(8));
        let off = start(cache(false));
        let r = post(off.addr, body).await;
        assert_eq!(arrivals(&r).0[0], Duration::from_millis(9));
        assert_eq!(cached(&r), None);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn deadlines_are_absolute() {
        // Token k is due at k x 2.5 ms from the start, met at the next millisecond. A
        // deadline counted from the previous token's (late) wake-up would drift to k x 3 ms.
        let m = start(MockConfig {
            inter_token_latency: Duration::from_micros(2_500),
            ..MockConfig::default()
        });
        let r = post(
            m.addr,
            r#"{"prompt":"a","max_tokens":9,"stream":true,"ignore_eos":true}"#,
        )
        .await;
        let ms: Vec<u64> = arrivals(&r)
            .0
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(ms, vec![0, 3, 5, 8, 10, 13, 15, 18, 20]);
        // The server's own record agrees: first and last token handed over at 0 and 20 ms.
        let j = m.journal.snapshot();
        assert_eq!(j.len(), 1);
        assert_eq!(j[0].first_token_ns, Some(j[0].arrival_ns));
        assert_eq!(j[0].last_token_ns, Some(j[0].arrival_ns + 20_000_000));
        assert_eq!((j[0].tokens, j[0].complete), (9, true));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn slots_queue_and_429() {
        let m = start(MockConfig {
            max_num_seqs: 2,
            max_waiting_queue_length: 1,
            time_to_first_token: Duration::from_millis(400),
            ..MockConfig::default()
        });
        let addr = m.addr;
        let body = r#"{"prompt":"a","max_tokens":1,"stream":true,"ignore_eos":true}"#;
        let t0 = now();
        let (a, b) = (
            tokio::spawn(post(addr, body)),
            tokio::spawn(post(addr, body)),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let c = tokio::spawn(post(addr, body));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let metrics = request(addr, "GET", "/metrics", "").await.body();
        for line in [
            "vllm:num_requests_running{model_name=\"heisenbench-mock\"} 2",
            "vllm:num_requests_waiting{model_name=\"heisenbench-mock\"} 1",
        ] {
            assert!(metrics.contains(line), "{line} in {metrics}");
        }
        let d = post(addr, body).await;
        assert_eq!(d.status, 429);
        assert_eq!(d.json()["error"]["code"], "rate_limit_exceeded");
        let (a, b, c) = (a.await.unwrap(), b.await.unwrap(), c.await.unwrap());
        assert!([a.status, b.status, c.status].iter().all(|s| *s == 200));
        // a and b answer at 400 ms; c, queued at 100 ms, starts when a slot frees at
        // 400 ms and answers a whole TTFT later.
        let first = |r: &Reply| r.sse()[0].0 - t0;
        assert_eq!(first(&a), Duration::from_millis(400));
        assert_eq!(first(&b), Duration::from_millis(400));
        assert_eq!(first(&c), Duration::from_millis(800));
        let metrics = request(addr, "GET", "/metrics", "").await.body();
        for line in [
            "heisenbench:requests_rejected_total{model_name=\"heisenbench-mock\"} 1",
            "vllm:request_queue_time_seconds_count{model_name=\"heisenbench-mock\"} 3",
            "vllm:request_queue_time_seconds_sum{model_name=\"heisenbench-mock\"} 0.3",
            "vllm:request_success_total{model_name=\"heisenbench-mock\",finished_reason=\"length\"} 3",
        ] {
            assert!(metrics.contains(line), "{line} in {metrics}");
        }
        let statuses: Vec<u16> = m.journal.snapshot().iter().map(|s| s.status).collect();
        assert_eq!(statuses, vec![200, 200, 200, 429]);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn shutdown_lets_an_open_stream_finish() {
        let m = start(MockConfig {
            inter_token_latency: Duration::from_millis(20),
            ..MockConfig::default()
        });
        let addr = m.addr;
        let t = tokio::spawn(post(
            addr,
            r#"{"prompt":"a","max_tokens":10,"stream":true,"ignore_eos":true}"#,
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        m.stop.send(true).unwrap();
        let r = t.await.unwrap();
        assert_eq!(r.sse().last().unwrap().1, "[DONE]");
        // Tokens at 0, 20, ..., 180 ms: the stream ran to its end after the stop at 50 ms.
        assert_eq!(arrivals(&r).0.last(), Some(&Duration::from_millis(180)));
        m.served.await.unwrap();
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "no longer accepting"
        );
    }
}
