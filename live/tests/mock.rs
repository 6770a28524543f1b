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

/// Sends one request with `Connection: close` and reads the reply incrementally, decoding
/// chunked transfer encoding and splitting SSE events as they complete.
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let sent = Instant::now();
    s.write_all(req.as_bytes()).unwrap();
    let (mut raw, mut decoded, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let mut head: Option<(u16, bool)> = None;
    let mut buf = [0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap();
        let now = Instant::now();
        raw.extend_from_slice(&buf[..n]);
        if head.is_none()
            && let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let text = String::from_utf8_lossy(&raw[..end]).to_lowercase();
            let status = text[9..12].parse().unwrap();
            head = Some((status, text.contains("transfer-encoding: chunked")));
            raw.drain(..end + 4);
        }
        if let Some((_, chunked)) = head {
            if chunked {
                // Decode every complete chunk in `raw`.
                while let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") {
                    let size = usize::from_str_radix(
                        std::str::from_utf8(&raw[..line_end]).unwrap().trim(),
                        16,
                    )
                    .unwrap();
                    if raw.len() < line_end + 2 + size + 2 {
                        break;
                    }
                    decoded.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
                    raw.drain(..line_end + 2 + size + 2);
                }
            } else {
                decoded.append(&mut raw);
            }
            while let Some(p) = decoded.windows(2).position(|w| w == b"\n\n") {
                events.push((
                    now,
                    String::from_utf8(decoded.drain(..p + 2).collect()).unwrap(),
                ));
            }
        }
        if n == 0 {
            break;
        }
    }
    if !decoded.is_empty() {
        events.push((Instant::now(), String::from_utf8(decoded).unwrap()));
    }
    Reply {
        status: head.expect("a response head").0,
        sent,
        events,
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
fn latencies_are_honoured() {
    // Token k is due at TTFT + k x ITL after the request started (absolute deadlines, so a
    // late chunk does not delay the next). The timer never fires early and is late by well
    // under a millisecond on an idle machine; a loaded 2-core CI box can add several
    // milliseconds of scheduling delay to any one read. So chunk k must arrive in
    // [due - 1 ms, due + 15 ms] (the 1 ms covers the request's own trip and the clocks'
    // read order), and the median gap between chunks stays near 20 ms.
    let cfg = MockConfig {
        time_to_first_token: Duration::from_millis(20),
        inter_token_latency: Duration::from_millis(20),
        ..MockConfig::default()
    };
    let m = start(cfg);
    let before = heisenbench_live::clock::mono_ns();
    let r = post(
        m.addr(),
        "/v1/completions",
        r#"{"prompt":"a","max_tokens":6,"stream":true,"ignore_eos":true}"#,
    );
    let sse = r.sse();
    for (k, (t, _)) in sse[..6].iter().enumerate() {
        let due = Duration::from_millis(20 * (k as u64 + 1));
        let at = *t - r.sent;
        assert!(
            at + Duration::from_millis(1) >= due && at <= due + Duration::from_millis(15),
            "token {k} at {at:?}, due {due:?}"
        );
    }
    let mut gaps: Vec<Duration> = sse[..6].windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort();
    assert!(
        gaps[2] >= Duration::from_millis(15) && gaps[2] <= Duration::from_millis(25),
        "median gap {:?}",
        gaps[2]
    );
    // The server's own stamps: the mock sleeps until each token is due and stamps it
    // after, and its clock started after `before`, so token k is stamped at least
    // (k + 1) x 20 ms after `before`, however loaded the machine (a bound, not a window).
    let stamps: Vec<u64> = payloads(&r)
        .iter()
        .map(|c| c["heisenbench_sent_ns"].as_u64().unwrap())
        .collect();
    for (k, st) in stamps[..6].iter().enumerate() {
        let since = st - before;
        assert!(
            since >= 20_000_000 * (k as u64 + 1),
            "token {k} stamped {since} ns after the request"
        );
    }
}

#[test]
fn sub_millisecond_latencies_stay_sub_millisecond() {
    let m = start(MockConfig {
        inter_token_latency: Duration::from_micros(300),
        ..MockConfig::default()
    });
    let before = heisenbench_live::clock::mono_ns();
    let r = post(
        m.addr(),
        "/v1/completions",
        r#"{"prompt":"a","max_tokens":41,"stream":true,"ignore_eos":true}"#,
    );
    let stamps: Vec<u64> = payloads(&r)
        .iter()
        .map(|c| c["heisenbench_sent_ns"].as_u64().unwrap())
        .collect();
    // The last of 41 tokens is due 40 x 300 us = 12 ms after the request starts (deadlines
    // are absolute) and stamped after it is due; the mock's start follows `before`.
    // Rounding 300 us down to whole milliseconds would put it at 0, rounding up at 40 ms:
    // the window between tells them apart with 28 ms to spare for a loaded machine.
    let since = stamps[40] - before;
    assert!((12_000_000..40_000_000).contains(&since), "{since} ns");
}

#[test]
fn slots_queue_and_429() {
    let cfg = MockConfig {
        max_num_seqs: 2,
        max_waiting_queue_length: 1,
        time_to_first_token: Duration::from_millis(400),
        ..MockConfig::default()
    };
    let m = start(cfg);
    let addr = m.addr();
    let body = r#"{"prompt":"a","max_tokens":1,"stream":true,"ignore_eos":true}"#;
    let spawn = || std::thread::spawn(move || post(addr, "/v1/completions", body));
    let (a, b) = (spawn(), spawn());
    std::thread::sleep(Duration::from_millis(100));
    let c = spawn();
    std::thread::sleep(Duration::from_millis(100));
    let metrics = request(addr, "GET", "/metrics", "").body();
    assert!(
        metrics.contains("vllm:num_requests_running{model_name=\"heisenbench-mock\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("vllm:num_requests_waiting{model_name=\"heisenbench-mock\"} 1"),
        "{metrics}"
    );
    let d = post(addr, "/v1/completions", body);
    assert_eq!(d.status, 429);
    assert_eq!(d.json()["error"]["code"], "rate_limit_exceeded");
    let (a, b, c) = (a.join().unwrap(), b.join().unwrap(), c.join().unwrap());
    assert!([a.status, b.status, c.status].iter().all(|s| *s == 200));
    // The queued request waited for a slot: its first token came a whole TTFT later.
    let first = |r: &Reply| r.sse()[0].0;
    assert!(first(&c) >= first(&a).max(first(&b)) + Duration::from_millis(300));
    let metrics = request(addr, "GET", "/metrics", "").body();
    assert!(
        metrics.contains("heisenbench:requests_rejected_total{model_name=\"heisenbench-mock\"} 1")
    );
    assert!(
        metrics
            .contains("vllm:request_queue_time_seconds_count{model_name=\"heisenbench-mock\"} 3")
    );
    assert!(metrics.contains(
        "vllm:request_success_total{model_name=\"heisenbench-mock\",finished_reason=\"length\"} 3"
    ));
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

#[test]
fn shutdown_lets_an_open_stream_finish() {
    let m = start(MockConfig {
        inter_token_latency: Duration::from_millis(20),
        ..MockConfig::default()
    });
    let addr = m.addr();
    let t = std::thread::spawn(move || {
        post(
            addr,
            "/v1/completions",
            r#"{"prompt":"a","max_tokens":10,"stream":true,"ignore_eos":true}"#,
        )
    });
    std::thread::sleep(Duration::from_millis(50));
    m.shutdown();
    let r = t.join().unwrap();
    assert_eq!(r.sse().last().unwrap().1, "[DONE]");
    assert!(TcpStream::connect(addr).is_err(), "no longer accepting");
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
    for opening in [&b""[..], b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n"] {
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
