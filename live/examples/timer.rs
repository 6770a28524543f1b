//! How late the timers fire on this machine, the real-time behaviour the unit tests no
//! longer assert (they run on tokio's paused clock):
//!
//! - the microsecond pacer ([`Pacer`]) against tokio's millisecond wheel, for
//!   deadlines 250 us apart;
//! - the mock through HTTP: the spread of its chunks' own stamps at 300 us between tokens.
//!
//! `cargo run --release -p heisenbench-live --example timer [ROUNDS]`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::api::sent_stamps;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::time::timer::Pacer;

fn quantiles(label: &str, mut v: Vec<f64>) {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{label:<44} n {:>6}  p50 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us",
        v.len(),
        q(0.5),
        q(0.99),
        v[v.len() - 1]
    );
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(2_000, |a| a.parse().expect("ROUNDS: a whole number"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let step = Duration::from_micros(250);
    let (precise, wheel) = rt.block_on(async {
        let timer = Pacer::new();
        let (mut precise, mut wheel) = (Vec::new(), Vec::new());
        let mut deadline = Instant::now();
        for _ in 0..rounds {
            deadline += step;
            timer.sleep_until(deadline).await;
            precise.push((Instant::now() - deadline).as_secs_f64() * 1e6);
        }
        let mut deadline = Instant::now();
        for _ in 0..rounds / 10 {
            deadline += step;
            tokio::time::sleep_until(deadline.into()).await;
            wheel.push((Instant::now() - deadline).as_secs_f64() * 1e6);
        }
        (precise, wheel)
    });
    quantiles("pacer, lateness at 250 us steps", precise);
    quantiles("tokio sleep_until, lateness at 250 us steps", wheel);

    // The mock: 41 tokens 300 us apart; token 40 is stamped 12 ms after token 0 when no
    // deadline is missed.
    let m = MockServer::start(MockConfig {
        inter_token_latency: Duration::from_micros(300),
        port: 0,
        ..MockConfig::default()
    })
    .expect("mock starts");
    let spans: Vec<f64> = (0..50).map(|_| stamps_span_us(m.addr())).collect();
    quantiles("mock, token 0 to 40 at 300 us (due 12,000)", spans);
}

/// Token 0's to token 40's stamp, microseconds, for one streamed request.
fn stamps_span_us(addr: std::net::SocketAddr) -> f64 {
    let body = r#"{"prompt":"a","max_tokens":41,"stream":true,"ignore_eos":true}"#;
    let mut s = TcpStream::connect(addr).expect("connect to the mock");
    write!(
        s,
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read");
    let stamps = sent_stamps(&reply);
    assert_eq!(stamps.len(), 41, "one stamp per token");
    (stamps[40] - stamps[0]) as f64 / 1e3
}
