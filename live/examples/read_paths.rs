//! Where the observer overhead goes at light load. One message a millisecond, stamped
//! just before it is written, and stamped again as the read that holds it returns; the
//! difference is taken per message, for each pairing of
//!
//! - a writer: a plain socket writing one HTTP chunk per message (`raw`), or the embedded
//!   mock streaming one token a millisecond (`mock`: hyper's server, the mock's channel to
//!   its connection);
//! - a reader, on a current-thread runtime of its own as a shard is: a plain socket read
//!   (`raw`, which is how a shard reads a plain http:// server since it has a reader of its
//!   own), or reqwest's streamed body (`reqwest`, how a shard reads an https:// server).
//!
//! raw/raw is the floor's method over HTTP framing; the other three add one stack each.
//!
//! `cargo run --release -p heisenbench-live --example read_paths [MESSAGES]`

use std::time::Duration;

use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::api::sent_stamps;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::time::mono_ns;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The stamps of every whole SSE event in `carry` (events end with a blank line); what
/// is left of an unfinished event stays in `carry`.
fn take_stamps(carry: &mut String) -> Vec<u64> {
    let Some(end) = carry.rfind("\n\n") else {
        return Vec::new();
    };
    let whole: String = carry.drain(..end + 2).collect();
    let mut out = sent_stamps(&whole);
    // The raw writer's events are `data: STAMP`.
    out.extend(
        whole
            .split("data: ")
            .skip(1)
            .filter_map(|e| e.split('\n').next()?.trim().parse::<u64>().ok()),
    );
    out
}

/// A plain HTTP/1.1 server on its own thread: answers one request with `n` chunks, one a
/// millisecond, each written by its own call right after its stamp.
fn raw_writer(n: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            listener.set_nonblocking(true).expect("nonblocking");
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let (mut s, _) = listener.accept().await.expect("accept");
            s.set_nodelay(true).expect("nodelay");
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let k = s.read(&mut buf).await.expect("request");
                head.extend_from_slice(&buf[..k]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                .await
                .expect("head");
            for _ in 0..n {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let body = format!("data: {}\n\n", mono_ns());
                let chunk = format!("{:x}\r\n{body}\r\n", body.len());
                s.write_all(chunk.as_bytes()).await.expect("chunk");
            }
            s.write_all(b"0\r\n\r\n").await.expect("end");
        });
    });
    format!("http://{addr}/")
}

/// The mock with one token a millisecond; the request that streams `n` of them.
fn mock_writer() -> MockServer {
    MockServer::start(MockConfig {
        port: 0,
        inter_token_latency: Duration::from_millis(1),
        max_model_len: 1_000_000,
        ..MockConfig::default()
    })
    .expect("the mock starts")
}

fn request_body(n: usize) -> String {
    format!(
        r#"{{"model":"{}","prompt":"a","max_tokens":{n},"ignore_eos":true,"stream":true}}"#,
        MockConfig::default().model
    )
}

/// Reads with a plain socket; the delay of every message, in microseconds.
async fn raw_read(url: &str, body: Option<String>) -> Vec<f64> {
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = tokio::net::TcpStream::connect(host).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let request = match &body {
        Some(b) => format!(
            "POST /v1/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
            b.len()
        ),
        None => format!("GET / HTTP/1.1\r\nhost: {host}\r\n\r\n"),
    };
    s.write_all(request.as_bytes()).await.expect("request");
    let (mut buf, mut carry, mut out) = (vec![0u8; 16 << 10], String::new(), Vec::new());
    loop {
        let k = s.read(&mut buf).await.expect("read");
        let at = mono_ns();
        if k == 0 {
            break;
        }
        carry.push_str(&String::from_utf8_lossy(&buf[..k]));
        out.extend(
            take_stamps(&mut carry)
                .into_iter()
                .map(|t| (at - t) as f64 / 1e3),
        );
        // The chunked body's last chunk (raw writer) or the stream's end (mock).
        if carry.ends_with("0\r\n\r\n") || carry.contains("[DONE]") {
            break;
        }
    }
    out
}

/// Reads through reqwest as a shard does over https; the delay of every message, in microseconds.
async fn reqwest_read(url: &str, body: Option<String>) -> Vec<f64> {
    // As the shard's client does: rustls wants one process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .expect("client");
    let req = match body {
        Some(b) => client
            .post(format!("{}/v1/completions", url.trim_end_matches('/')))
            .header("content-type", "application/json")
            .body(b),
        None => client.get(url),
    };
    let mut resp = req.send().await.expect("response");
    let (mut carry, mut out) = (String::new(), Vec::new());
    while let Some(bytes) = resp.chunk().await.expect("chunk") {
        let at = mono_ns();
        carry.push_str(&String::from_utf8_lossy(&bytes));
        out.extend(
            take_stamps(&mut carry)
                .into_iter()
                .map(|t| (at - t) as f64 / 1e3),
        );
    }
    out
}

fn on_own_thread<F: std::future::Future<Output = Vec<f64>> + Send + 'static>(f: F) -> Vec<f64> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    })
    .join()
    .expect("reader thread")
}

fn print(label: &str, mut v: Vec<f64>) {
    // The first messages pay for connecting and warming up.
    let skip = v.len() / 20;
    v.drain(..skip);
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{label:<16} n {:>5}  p50 {:>7.1} us  p90 {:>7.1} us  p99 {:>7.1} us",
        v.len(),
        q(0.5),
        q(0.9),
        q(0.99)
    );
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(2_000, |a| a.parse().expect("MESSAGES: a whole number"));
    let url = raw_writer(n);
    print(
        "raw -> raw",
        on_own_thread(async move { raw_read(&url, None).await }),
    );
    let url = raw_writer(n);
    print(
        "raw -> reqwest",
        on_own_thread(async move { reqwest_read(&url, None).await }),
    );
    let mock = mock_writer();
    let url = mock.url();
    print(
        "mock -> raw",
        on_own_thread(async move { raw_read(&url, Some(request_body(n))).await }),
    );
    let url = mock.url();
    print(
        "mock -> reqwest",
        on_own_thread(async move { reqwest_read(&url, Some(request_body(n))).await }),
    );
}
