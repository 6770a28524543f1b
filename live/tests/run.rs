//! The load generator against the mock and against a deliberately broken server, on
//! loopback, bounded in requests and time.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use heisenbench_live::generator::config::{ApiKind, RunConfig};
use heisenbench_live::generator::result::{Outcome, RunReport};
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::{FailureType, MockConfig};
use heisenbench_live::openai::prompt::Prompts;
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};

fn cfg(url: &str, shards: u32, requests: u64) -> RunConfig {
    RunConfig {
        seed: 5,
        timeout_s: Some(5.0),
        shards,
        ..RunConfig::streaming(
            "test",
            Workload {
                arrivals: Arrivals::Poisson { rate_per_s: 400.0 },
                stop: Stop::Count { requests },
                input_tokens: Lengths::Uniform { min: 1, max: 40 },
                output_tokens: Lengths::Uniform { min: 1, max: 30 },
                prefix: None,
                dataset: None,
            },
            url,
            "heisenbench-mock",
        )
    }
}

fn go(c: &RunConfig) -> RunReport {
    let c = c.clone().checked().expect("the config is valid");
    let r = run(&c, &RunOptions::default()).expect("the run is made");
    assert!(r.accounting.balanced, "{:?}", r.accounting);
    r
}

fn mock() -> MockServer {
    MockServer::start(MockConfig {
        port: 0,
        max_num_seqs: 1000,
        ..MockConfig::default()
    })
    .unwrap()
}

#[test]
fn one_shard_and_four_shards_give_the_same_totals() {
    let m = mock();
    let one = go(&cfg(&m.url(), 1, 200));
    let four = go(&cfg(&m.url(), 4, 200));
    for r in [&one, &four] {
        assert_eq!(r.accounting.scheduled, 200);
        assert_eq!(r.accounting.completed, 200);
        assert_eq!(r.tokens_stream, r.tokens_usage);
        assert_eq!(r.token_mismatches, 0);
        // The send lag's stages cover every request and add up to it request by request,
        // so their means add up to its mean (sums are kept exactly).
        let st = &r.send_stages;
        for d in [&st.timer, &st.loop_wake, &st.start] {
            assert_eq!(d.count, r.send_lag.count);
        }
        let sum = st.timer.mean_s + st.loop_wake.mean_s + st.start.mean_s;
        assert!(
            (sum - r.send_lag.mean_s).abs() < 1e-9,
            "{sum} vs {}",
            r.send_lag.mean_s
        );
    }
    // The same plan: the same requests, so the same tokens and events, whatever the sharding.
    assert_eq!(one.tokens_stream, four.tokens_stream);
    assert_eq!(one.events, four.events);
    assert_eq!(four.shards.iter().map(|s| s.scheduled).sum::<u64>(), 200);
    assert!(four.shards.iter().all(|s| s.ok && s.scheduled == 50));
    assert_ne!(
        one.plan_hash, four.plan_hash,
        "the shard count is part of the plan"
    );
    // The mock stamps every chunk, so the observer overhead is measured for each event.
    assert_eq!(
        one.observer_overhead.count,
        one.events - 200,
        "all but the [DONE] events"
    );
}

#[test]
fn chat_and_non_streaming_work() {
    let m = mock();
    let mut c = cfg(&m.url(), 2, 40);
    c.api = ApiKind::Chat;
    let r = go(&c);
    assert_eq!(r.accounting.completed, 40);
    assert_eq!(r.tokens_stream, r.tokens_usage);
    c.stream = false;
    c.api = ApiKind::Completions;
    let r = go(&c);
    assert_eq!(r.accounting.completed, 40);
    assert!(r.tokens_usage > 0);
}

#[test]
fn server_not_listening_is_connect_failed() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = go(&cfg(&format!("http://127.0.0.1:{port}"), 2, 20));
    assert_eq!(r.accounting.failed.get(&Outcome::ConnectFailed), Some(&20));
}

#[test]
fn injected_errors_are_classified_by_status() {
    let m = MockServer::start(MockConfig {
        port: 0,
        failure_injection_rate: 100.0,
        failure_types: vec![FailureType::RateLimit, FailureType::ServerError],
        ..MockConfig::default()
    })
    .unwrap();
    let r = go(&cfg(&m.url(), 2, 60));
    let f = &r.accounting.failed;
    assert_eq!(
        f.get(&Outcome::HttpStatus(429)).unwrap_or(&0)
            + f.get(&Outcome::HttpStatus(503)).unwrap_or(&0),
        60,
        "{f:?}"
    );
    assert!(f.contains_key(&Outcome::HttpStatus(429)) && f.contains_key(&Outcome::HttpStatus(503)));
    assert_eq!(r.accounting.completed, 0);
}

#[test]
fn slow_server_times_out() {
    let m = MockServer::start(MockConfig {
        port: 0,
        inter_token_latency: Duration::from_millis(100),
        max_num_seqs: 100,
        ..MockConfig::default()
    })
    .unwrap();
    let mut c = cfg(&m.url(), 1, 10);
    c.workload.output_tokens = Lengths::Fixed { tokens: 20 };
    c.timeout_s = Some(0.3);
    let r = go(&c);
    assert_eq!(r.accounting.timed_out, 10);
}

/// Reads one request's head and body (by its content-length); false if the connection
/// ended or failed first.
fn read_request(s: &mut impl Read) -> bool {
    let mut buf = [0u8; 4096];
    let mut req = Vec::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&req).to_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if req.len() >= end + 4 + len {
                return true;
            }
        }
    }
}

/// A server that answers every request with `reply`, then (if `hold`) keeps the
/// connection open without another byte.
fn broken_server(reply: &'static [u8], hold: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in l.incoming().take(64) {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                if !read_request(&mut s) {
                    return;
                }
                let _ = s.write_all(reply);
                if hold {
                    std::thread::sleep(Duration::from_secs(3));
                }
            });
        }
    });
    format!("http://{addr}")
}

/// The head of every raw server's stream. It says the connection closes after the
/// response, so the client never reuses a connection the server is closing.
const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

/// A server that streams several tokens a chunk and no usage: with `--tokenizer`, the run
/// counts the tokens of the streamed text (held against the tokenizer's own count of the
/// whole text) and says so; without one, a chunk counts as one token.
#[test]
fn without_usage_a_tokenizer_counts_the_tokens_a_chunk_carried() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tokenizer/tiny-llama.json");
    let prompts = Prompts::from_tokenizer(
        &path,
        40,
        heisenbench_live::openai::prompt::PromptContent::Unique,
    )
    .unwrap();
    // Three chunks of two of the tokenizer's whole words each, then the finish.
    let words = &prompts.vocabulary;
    let pieces: Vec<String> = (0..3)
        .map(|i| format!(" {} {}", words[2 * i], words[2 * i + 1]))
        .collect();
    let mut body = String::new();
    for p in &pieces {
        body.push_str(&format!("data: {{\"choices\":[{{\"text\":\"{p}\"}}]}}\n\n"));
    }
    body.push_str(
        "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    let reply: &'static [u8] = Box::leak(
        format!("{SSE_HEAD}{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
            .into_bytes()
            .into_boxed_slice(),
    );
    let url = broken_server(reply, false);
    let truth = heisenbench_live::openai::prompt::load_tokenizer(&path)
        .unwrap()
        .encode(pieces.concat(), false)
        .unwrap()
        .len() as f64;
    assert!(truth >= 6.0, "{truth} tokens in {pieces:?}");

    let mut c = cfg(&url, 1, 4);
    c.prompts = prompts;
    let r = go(&c);
    assert_eq!(r.accounting.completed, 4, "{:?}", r.accounting);
    let t = &r.throughput;
    assert_eq!(
        t.tokens_per_chunk_by,
        Some(heisenbench_live::generator::result::TokenCounter::Tokenizer)
    );
    assert_eq!(t.tokens_per_chunk, Some(truth / 3.0));
    assert_eq!(t.output_tokens, 4 * truth as u64);

    let r = go(&cfg(&url, 1, 4));
    assert_eq!(r.throughput.tokens_per_chunk, None);
    assert_eq!(
        r.throughput.output_tokens,
        4 * 3,
        "a chunk counts as one token"
    );
}

#[test]
fn broken_streams_are_classified() {
    // Cut mid-stream: one event, then the connection closes without the final chunk.
    let cut: &'static [u8] = Box::leak(
        format!(
            "{SSE_HEAD}{:x}\r\ndata: {{\"choices\":[{{\"text\":\"a\"}}]}}\n\n\r\n",
            37
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let r = go(&cfg(&broken_server(cut, false), 1, 5));
    assert_eq!(
        r.accounting.failed.get(&Outcome::StreamBroken),
        Some(&5),
        "{:?}",
        r.accounting
    );
    // ... and the cause is said, not only counted.
    assert!(
        r.merged
            .server_messages
            .keys()
            .any(|m| m.starts_with("stream_broken: ")),
        "{:?}",
        r.merged.server_messages
    );

    // Answers of 200 that are no event stream: each is malformed, with what it was.
    for (reply, says) in [
        (
            &b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 27\r\nconnection: close\r\n\r\n<html>Login required</html>"[..],
            "of type text/html, not an event stream: <html>Login required</html>",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ncontent-length: 3\r\nconnection: close\r\n\r\n\x1f\x8b\x08",
            "the answer is encoded (gzip)",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 32\r\nconnection: close\r\n\r\n{\"choices\":[{\"text\":\"whole\"}]}  ",
            "the server ignored \"stream\": true",
        ),
    ] {
        let r = go(&cfg(&broken_server(reply, false), 1, 2));
        assert_eq!(
            r.accounting.failed.get(&Outcome::Malformed),
            Some(&2),
            "{says}: {:?}",
            r.accounting
        );
        assert!(
            r.merged.server_messages.keys().any(|m| m.contains(says)),
            "{says}: {:?}",
            r.merged.server_messages
        );
    }

    // Events that are not JSON objects.
    let body = "data: this is not json\n\ndata: [DONE]\n\n";
    let bad: &'static [u8] = Box::leak(
        format!("{SSE_HEAD}{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
            .into_bytes()
            .into_boxed_slice(),
    );
    let r = go(&cfg(&broken_server(bad, false), 1, 5));
    assert_eq!(
        r.accounting.failed.get(&Outcome::Malformed),
        Some(&5),
        "{:?}",
        r.accounting
    );
    // ... and each says which event it was.
    assert!(
        r.merged
            .server_messages
            .keys()
            .any(|m| m == "malformed: an event that is not a completion chunk: this is not json"),
        "{:?}",
        r.merged.server_messages
    );

    // A stream that never ends: the timeout fires.
    let hang: &'static [u8] = Box::leak(
        format!(
            "{SSE_HEAD}{:x}\r\ndata: {{\"choices\":[{{\"text\":\"a\"}}]}}\n\n\r\n",
            37
        )
        .into_bytes()
        .into_boxed_slice(),
    );
    let mut c = cfg(&broken_server(hang, true), 1, 3);
    c.timeout_s = Some(0.3);
    let r = go(&c);
    assert_eq!(r.accounting.timed_out, 3, "{:?}", r.accounting);

    // A non-streamed body that is not JSON.
    let junk: &'static [u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 5\r\n\r\n{oops";
    let mut c = cfg(&broken_server(junk, false), 1, 3);
    c.stream = false;
    let r = go(&c);
    assert_eq!(
        r.accounting.failed.get(&Outcome::Malformed),
        Some(&3),
        "{:?}",
        r.accounting
    );
}

/// A server that streams `body` (one chunk of a chunked response) to every request, then
/// closes.
fn streaming_server(body: &[u8]) -> String {
    let mut reply = format!("{SSE_HEAD}{:x}\r\n", body.len()).into_bytes();
    reply.extend_from_slice(body);
    reply.extend_from_slice(b"\r\n0\r\n\r\n");
    broken_server(Box::leak(reply.into_boxed_slice()), false)
}

#[test]
fn real_servers_dialects_are_read_and_classed() {
    let fixture = |name: &str| {
        std::fs::read(format!(
            "{}/tests/fixtures/sse/{name}.sse",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    // (fixture, outcome key, tokens counted per completed request)
    for (name, key, tokens) in [
        ("llamacpp-python", "completed", 3),
        ("starlette-crlf", "completed", 5),
        ("vllm-chat-reasoning", "completed", 4),
        ("llamacpp-python-interrupted", "truncated", 0),
        ("tgi-chat-error", "server_error", 0),
        ("garbage", "malformed", 0),
        ("cut-mid-event", "truncated", 0),
    ] {
        let r = go(&cfg(&streaming_server(&fixture(name)), 1, 4));
        let got = if key == "completed" {
            r.accounting.completed
        } else {
            r.accounting
                .failed
                .get(&Outcome::from_key(key).unwrap())
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(got, 4, "{name}: {:?}", r.accounting);
        assert_eq!(r.tokens_stream, 4 * tokens, "{name}");
        if key == "completed" {
            assert!(r.ttft.from_intended.p50_s > 0.0, "{name}");
        }
    }
    // The server's own message is kept, once per distinct text.
    let r = go(&cfg(&streaming_server(&fixture("tgi-chat-error")), 1, 3));
    assert_eq!(
        r.merged
            .server_messages
            .get("Request failed during generation: Server error: CUDA out of memory"),
        Some(&3)
    );
    // llama.cpp's server on an interrupted stream: [DONE] without a finish reason, then
    // the connection drops before the body's last chunk. Truncated, not broken.
    let body = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: [DONE]\n\n";
    let dropped: &'static [u8] = Box::leak(
        format!("{SSE_HEAD}{:x}\r\n{body}\r\n", body.len())
            .into_bytes()
            .into_boxed_slice(),
    );
    let r = go(&cfg(&broken_server(dropped, false), 1, 3));
    assert_eq!(
        r.accounting.failed.get(&Outcome::Truncated),
        Some(&3),
        "{:?}",
        r.accounting
    );
    // Only [DONE]: nothing was generated and nothing said it finished.
    let r = go(&cfg(&streaming_server(b"data: [DONE]\n\n"), 1, 3));
    assert_eq!(r.accounting.failed.get(&Outcome::Truncated), Some(&3));
    // A finish reason on the first chunk: completed, zero tokens, no TTFT of 0 s.
    let r = go(&cfg(&streaming_server(&fixture("zero-tokens")), 1, 3));
    assert_eq!(r.accounting.completed, 3);
    assert_eq!(r.merged.zero_token_completions, 3);
    assert_eq!(r.merged.recorders.ttft_intended.count(), 0);
}

#[test]
fn emulated_client_cost_shows_up_as_bias() {
    let m = mock();
    let mut c = cfg(&m.url(), 1, 100);
    c.workload.output_tokens = Lengths::Fixed { tokens: 50 };
    c.client_cost_s = 50e-6;
    let r = go(&c);
    // 50 chunks at 50 us each on one loop: stamping after parsing adds at least the first
    // chunk's 50 us to TTFT; the arrival stamps do not carry it. Means, because they are
    // exact: on a loaded machine TTFTs reach 100 ms, where the histogram's 0.1 % buckets are
    // wider than 50 us.
    assert!(
        r.ttft_after_processing.mean_s >= r.ttft.from_intended.mean_s + 45e-6,
        "{:?} vs {:?}",
        r.ttft_after_processing,
        r.ttft.from_intended
    );
    assert!(r.processing.p50_s >= 50e-6);
}

#[test]
fn closed_loop_and_in_flight_cap() {
    let m = mock();
    let mut c = cfg(&m.url(), 2, 60);
    c.workload.arrivals = Arrivals::Closed {
        users: 4,
        think_s: 0.0,
        turns: 1,
    };
    let r = go(&c);
    assert_eq!(r.accounting.scheduled, 60);
    assert_eq!(r.accounting.completed, 60);
    assert!(
        r.merged.max_in_flight <= 2,
        "two users per shard, one request each"
    );
    let mut c = cfg(&m.url(), 1, 50);
    c.max_in_flight_per_shard = Some(1);
    let r = go(&c);
    assert_eq!(r.accounting.completed, 50);
    assert_eq!(r.merged.max_in_flight, 1);
}

/// A TLS server on loopback with a certificate for 127.0.0.1 made here, answering every
/// request with `body` as an SSE stream. Returns its URL and the certificate (PEM).
fn tls_server(body: &'static [u8]) -> (String, String) {
    use std::sync::Arc;
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let pem = cert.pem();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = Arc::new(
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in l.incoming().take(32) {
            let Ok(tcp) = stream else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                if !read_request(&mut tls) {
                    return;
                }
                let mut reply = format!("{SSE_HEAD}{:x}\r\n", body.len()).into_bytes();
                reply.extend_from_slice(body);
                reply.extend_from_slice(b"\r\n0\r\n\r\n");
                let _ = tls.write_all(&reply);
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (format!("https://{addr}"), pem)
}

#[test]
fn https_is_verified_and_a_private_ca_or_insecure_gets_through() {
    let body = b"data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
    let (url, pem) = tls_server(body);
    // Not trusted: every request fails to connect, none completes.
    let r = go(&cfg(&url, 1, 3));
    assert_eq!(r.accounting.completed, 0, "{:?}", r.accounting);
    let said: Vec<_> = r.merged.server_messages.keys().collect();
    assert!(said.iter().any(|m| m.contains("certificate")), "{said:?}");
    // Trusted through --ca-cert.
    let dir = std::env::temp_dir().join(format!("heisenbench-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let mut c = cfg(&url, 1, 3);
    c.ca_cert = Some(ca.clone());
    let r = go(&c);
    assert_eq!(r.accounting.completed, 3, "{:?}", r.accounting);
    assert_eq!(r.tokens_stream, 6);
    // Verification off.
    let mut c = cfg(&url, 1, 3);
    c.insecure = true;
    let r = go(&c);
    assert_eq!(r.accounting.completed, 3, "{:?}", r.accounting);
    assert!(r.config.insecure);
    // A CA file that holds no certificate is refused before anything is sent.
    std::fs::write(&ca, "not a certificate").unwrap();
    let mut c = cfg(&url, 1, 1);
    c.ca_cert = Some(ca);
    assert!(run(&c.checked().unwrap(), &RunOptions::default()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The model field is taken from `/v1/models` only when the server lists exactly one:
/// none or several is the user's to settle, and each says so.
#[test]
fn the_served_model_is_the_only_one_listed() {
    use heisenbench_live::net::client::{ModelChoiceError, served_model};
    let list = |body: &str| -> &'static [u8] {
        Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
            .into_boxed_slice(),
        )
    };
    let m = mock();
    assert_eq!(
        served_model(cfg(&m.url(), 1, 1).server()).unwrap(),
        MockConfig::default().model
    );
    let none = broken_server(list(r#"{"object":"list","data":[]}"#), false);
    assert!(matches!(
        served_model(cfg(&none, 1, 1).server()),
        Err(ModelChoiceError::NoModel)
    ));
    let two = broken_server(
        list(
            r#"{"object":"list","data":[{"id":"a","object":"model"},{"id":"b","object":"model"}]}"#,
        ),
        false,
    );
    let e = served_model(cfg(&two, 1, 1).server()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the server serves 2 models; choose one with --model: a, b"
    );
    let gone = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = served_model(cfg(&format!("http://{gone}"), 1, 1).server()).unwrap_err();
    assert!(matches!(e, ModelChoiceError::Unreachable(_)), "{e}");
}

/// The default prompts are unique: against the mock with its prefix cache on, no request
/// finds a block another left, and the server's usage says so. The repeated prompts of old
/// hit on every request after the first: all of a prompt's blocks but the one holding its
/// last token (63 words in blocks of 16: 48 tokens). The mock's /metrics counts the same.
#[test]
fn unique_prompts_miss_the_prefix_cache_and_repeated_ones_hit() {
    use heisenbench_live::openai::prompt::{PromptContent, Prompts};
    let requests = 30;
    for (content, cached_per_request) in [(PromptContent::Unique, 0), (PromptContent::Repeated, 48)]
    {
        let m = MockServer::start(MockConfig {
            port: 0,
            max_num_seqs: 1000,
            enable_kvcache: true,
            kv_cache_size: 100_000,
            block_size: 16,
            ..MockConfig::default()
        })
        .unwrap();
        let c = RunConfig {
            workload: Workload {
                input_tokens: Lengths::Fixed { tokens: 63 },
                ..cfg(&m.url(), 1, requests).workload
            },
            prompts: Prompts::words().with_content(content),
            ..cfg(&m.url(), 1, requests)
        };
        let r = go(&c);
        assert_eq!(r.accounting.completed, requests);
        let pc = r.prefix_cache;
        assert_eq!(
            (pc.requests, pc.prompt_tokens),
            (requests, requests * 63),
            "{content:?}"
        );
        assert_eq!(
            pc.cached_tokens,
            (requests - 1) * cached_per_request,
            "{content:?}"
        );
        let metrics = get(m.addr(), "/metrics");
        assert!(
            metrics.contains(&format!(
                "vllm:prefix_cache_hits_total{{model_name=\"heisenbench-mock\"}} {}",
                pc.cached_tokens
            )),
            "{metrics}"
        );
    }
}

/// A GET's whole answer, over a connection of its own.
fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Shared prefixes against the mock's cache. When every prefix fits, each request finds
/// its prefix except the first of its group: exactly. When they do not, the hit rate is
/// Che's prediction for LRU (`heisenbench_model::prefix_cache::predict`): within 0.03, the
/// two-sided 95 % band of 4,000 requests' mean (its standard error is under 0.008) plus
/// the cold start the steady-state prediction leaves out.
#[test]
fn shared_prefixes_hit_as_the_cache_law_and_che_say() {
    use heisenbench_model::prefix_cache::{PrefixCacheLaw, predict};
    use heisenbench_model::scenario::{Popularity, SharedPrefix};
    let run_with = |requests: u64, prefix: SharedPrefix, capacity: u32| {
        let m = MockServer::start(MockConfig {
            port: 0,
            max_num_seqs: 100_000,
            max_waiting_queue_length: 100_000,
            enable_kvcache: true,
            kv_cache_size: capacity,
            block_size: 16,
            ..MockConfig::default()
        })
        .unwrap();
        let base = cfg(&m.url(), 1, requests);
        let c = RunConfig {
            workload: Workload {
                arrivals: Arrivals::Poisson { rate_per_s: 2000.0 },
                input_tokens: Lengths::Fixed { tokens: 32 },
                output_tokens: Lengths::Fixed { tokens: 2 },
                prefix: Some(prefix),
                ..base.workload.clone()
            },
            ..base
        };
        let r = go(&c);
        assert_eq!(r.accounting.completed, requests);
        assert_eq!(
            r.prefix_cache.prompt_tokens,
            requests * u64::from(prefix.tokens + 32)
        );
        r.prefix_cache
    };
    // Everything fits: 8 groups, each prefix of 128 tokens (8 blocks) found by all but the
    // first request of its group.
    let all = SharedPrefix {
        groups: 8,
        tokens: 128,
        popularity: Popularity::Uniform,
    };
    let pc = run_with(200, all, 100_000);
    let seen: std::collections::BTreeSet<u32> =
        (0..200).map(|i| all.sampler().group_of(5, i)).collect();
    assert_eq!(pc.cached_tokens, (200 - seen.len() as u64) * 128);
    // Not everything fits: 100 Zipf(1) groups, 400 blocks.
    let some = SharedPrefix {
        groups: 100,
        tokens: 128,
        popularity: Popularity::Zipf { s: 1.0 },
    };
    let law = PrefixCacheLaw {
        block_tokens: 16,
        capacity_blocks: 400,
    };
    let predicted = predict(law, &some.probabilities(), 128, 32)
        .unwrap()
        .token_hit_rate;
    let measured = run_with(4000, some, 400).hit_rate().unwrap();
    assert!(
        (predicted - measured).abs() < 0.03,
        "Che {predicted:.4}, the mock {measured:.4}"
    );
}

/// A server that answers every request with `head`, then writes `piece` again and again
/// until the client goes away (or 20 s pass): an endless line, body or list.
fn endless_server(head: &'static str, piece: &'static [u8]) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in l.incoming().take(16) {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(head.as_bytes());
                let until = std::time::Instant::now() + Duration::from_secs(20);
                while std::time::Instant::now() < until && s.write_all(piece).is_ok() {}
            });
        }
    });
    format!("http://{addr}")
}

/// Endless answers end within bounds, each request with its cause: a stream with no line
/// end, a whole body that never ends, and a model list that never ends. (Each fills the
/// client's limit in well under a second on loopback; the 5 s timeout is not what stops
/// them.)
#[test]
fn endless_answers_end_at_the_stated_limits() {
    let a: &'static [u8] = Box::leak(vec![b'a'; 64 * 1024].into_boxed_slice());
    let line = endless_server(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: ",
        a,
    );
    let t0 = std::time::Instant::now();
    let r = go(&cfg(&line, 1, 2));
    assert_eq!(
        r.accounting.failed.get(&Outcome::Malformed),
        Some(&2),
        "{:?}",
        r.accounting
    );
    assert!(
        r.merged
            .server_messages
            .keys()
            .any(|m| m.contains("line longer than 1 MiB")),
        "{:?}",
        r.merged.server_messages
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "ended by the limit, not the timeout"
    );

    let body = endless_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"x\":\"",
        a,
    );
    let mut c = cfg(&body, 1, 2);
    c.stream = false;
    let r = go(&c);
    assert_eq!(
        r.accounting.failed.get(&Outcome::Malformed),
        Some(&2),
        "{:?}",
        r.accounting
    );
    assert!(
        r.merged
            .server_messages
            .keys()
            .any(|m| m.contains("body is longer than 16 MiB")),
        "{:?}",
        r.merged.server_messages
    );

    let list = endless_server(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"data\":[",
        b"{\"id\":\"m\"},",
    );
    let c = cfg(&list, 1, 1);
    let e = heisenbench_live::net::client::served_models(c.server()).unwrap_err();
    assert!(e.to_string().contains("longer than 16 MiB"), "{e}");
}

/// Sending and completing are reported apart: every scheduled request was sent, at the
/// schedule's rate (100 requests over the 0.25 s a count at 400/s lasts), and the share on
/// time is a share.
#[test]
fn the_sending_side_is_reported_apart_from_completions() {
    let m = mock();
    let r = go(&cfg(&m.url(), 1, 100));
    let s = r.sending.expect("measured");
    assert_eq!(s.sent, 100);
    assert_eq!(s.sent_qps, Some(400.0));
    assert!(s.on_time.is_some_and(|f| (0.0..=1.0).contains(&f)), "{s:?}");
    let mut text = Vec::new();
    r.write_summary(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("sent 400.0 req/s ("), "{text}");
    assert!(text.contains("; completed "), "{text}");
}

/// A mock that falls behind says so in the run's summary: with no time between tokens,
/// every token after a stream's first is due before the one ahead of it is out, and the
/// summary counts them from the mock's own metrics; a mock on time gets no such line.
#[test]
fn a_mock_behind_its_schedule_is_named_in_the_summary() {
    use heisenbench_live::generator::config::ServerMetrics;
    use heisenbench_live::scrape::{Targets, metrics_url};
    let summary = |itl: std::time::Duration| {
        let m = MockServer::start(MockConfig {
            port: 0,
            max_num_seqs: 1000,
            time_to_first_token: std::time::Duration::from_millis(1),
            inter_token_latency: itl,
            ..MockConfig::default()
        })
        .unwrap();
        let mut c = cfg(&m.url(), 1, 20);
        c.workload.output_tokens = Lengths::Fixed { tokens: 5 };
        c.server_metrics = ServerMetrics {
            targets: Targets::Urls(vec![metrics_url(&m.url())]),
            interval_s: 0.05,
        };
        let r = go(&c);
        let mut text = Vec::new();
        r.write_summary(&mut text).unwrap();
        String::from_utf8(text).unwrap()
    };
    let behind = summary(std::time::Duration::ZERO);
    assert!(
        behind.contains("the mock fell behind: 80 of its 100 timed tokens"),
        "{behind}"
    );
    // 100 ms apart: only a stall of that length would put two tokens together.
    let on_time = summary(std::time::Duration::from_millis(100));
    assert!(on_time.contains("server: vLLM"), "{on_time}");
    assert!(!on_time.contains("fell behind"), "{on_time}");
}
