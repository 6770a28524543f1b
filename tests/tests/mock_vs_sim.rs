//! One server latency law, two servers: the embedded mock over HTTP (on tokio's paused
//! clock, so its latencies are exact virtual time) and the simulator's server, given the
//! same law, seed and send times, must give every request the same token times.
//!
//! tokio's sleeps end on whole milliseconds, so the mock hands token k over at the first
//! millisecond tick at or after the simulator's exact emission time (requests are sent
//! on ticks, and the mock's deadlines are absolute). Requests do not overlap, so both
//! servers draw their jitter in the same order from the same stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use heisenbench_live::mock::api::sent_stamps;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::mock::{Journal, serve_with};
use heisenbench_live::time::clock::Clock;
use heisenbench_model::scenario::{
    Arrivals, ClientModel, EventCosts, Lengths, Policy, Stamp, Stop, Workload,
};
use heisenbench_model::service::Service;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::scenario::SimScenario;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MS: u64 = 1_000_000;
const REQUESTS: u64 = 30;
const OUTPUT: u32 = 12;
const PROMPT_WORDS: u32 = 40;

/// Send times: request i at i x 100 ms plus a whole number of milliseconds (0-9).
fn send_times_ms() -> Vec<u64> {
    (0..REQUESTS).map(|i| i * 100 + (i * 7) % 10).collect()
}

/// Token emission times per request, nanoseconds after the request's send, from the
/// simulator.
fn simulated(cfg: &MockConfig) -> Vec<Vec<u64>> {
    let sends = send_times_ms();
    let sc = SimScenario {
        name: "mock-vs-sim".into(),
        seed: cfg.seed,
        workload: Workload {
            arrivals: Arrivals::Trace {
                send_times_s: sends.iter().map(|t| *t as f64 / 1e3).collect(),
                lengths: Vec::new(),
                blocks: None,
            },
            stop: Stop::Count { requests: REQUESTS },
            input_tokens: Lengths::Fixed {
                tokens: PROMPT_WORDS,
            },
            output_tokens: Lengths::Fixed { tokens: OUTPUT },
            prefix: None,
            dataset: None,
        },
        client: ClientModel {
            workers: 1,
            policy: Policy::RoundRobin,
            // A 1 ns chunk cost, so that every chunk is traced at its arrival; sends
            // are free, so each request reaches the server at its send time.
            costs: EventCosts {
                chunk: Some(Service::deterministic(1e-9).unwrap()),
                ..EventCosts::default()
            },
            stamp: Stamp::default(),
            max_in_flight_per_worker: None,
            timeout_s: None,
            send_shares_loop: true,
        },
        server: cfg.law(),
        slo: None,
    };
    sc.validate().unwrap();
    let mut sim = Simulation::new(sc).with_trace(100_000);
    while sim.step() {}
    let mut tokens = vec![Vec::new(); REQUESTS as usize];
    for j in sim.trace().iter().filter(|j| j.kind == "chunk") {
        // Serial numbers count from 1.
        let i = j.request as usize - 1;
        tokens[i].push(j.arrive_ns - sends[i] * MS);
    }
    tokens
}

/// The same requests against the mock; per request, each token's stamp after the
/// request's arrival (nanoseconds of virtual time).
async fn served(cfg: MockConfig) -> Vec<Vec<u64>> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let journal = Arc::new(Journal::default());
    let server = tokio::spawn(serve_with(
        cfg,
        listener,
        Clock::tokio(),
        Some(journal.clone()),
        rx,
    ));
    let t0 = tokio::time::Instant::now();
    let prompt = vec!["w"; PROMPT_WORDS as usize].join(" ");
    let body =
        format!(r#"{{"prompt":"{prompt}","max_tokens":{OUTPUT},"stream":true,"ignore_eos":true}}"#);
    let mut stamps = Vec::new();
    for t in send_times_ms() {
        tokio::time::sleep_until(t0 + Duration::from_millis(t)).await;
        stamps.push(token_stamps(addr, &body).await);
    }
    stop.send(true).unwrap();
    server.await.unwrap().unwrap();
    let arrivals: Vec<u64> = journal.snapshot().iter().map(|s| s.arrival_ns).collect();
    assert_eq!(arrivals.len(), REQUESTS as usize);
    stamps
        .into_iter()
        .zip(arrivals)
        .map(|(s, a)| s.into_iter().map(|t| t - a).collect())
        .collect()
}

/// The `heisenbench_sent_ns` stamp of every token chunk of one streamed completion.
async fn token_stamps(addr: SocketAddr, body: &str) -> Vec<u64> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    sent_stamps(&reply)
}

/// Every token of every request: the mock's time is the simulator's rounded up to the
/// millisecond. The simulator keeps times in whole nanoseconds and the mock sums
/// durations truncated to nanoseconds, so near a tick the two may fall on either side;
/// both neighbouring ticks are accepted within 100 ns of one.
fn assert_same_law(cfg: MockConfig, sim: &[Vec<u64>], mock: &[Vec<u64>]) {
    let ceil = |ns: u64| ns.div_ceil(MS) * MS;
    assert_eq!(sim.len(), mock.len());
    let mut checked = 0;
    for (i, (s, m)) in sim.iter().zip(mock).enumerate() {
        assert_eq!(s.len(), OUTPUT as usize, "request {i}: simulated tokens");
        assert_eq!(m.len(), OUTPUT as usize, "request {i}: served tokens");
        for (k, (s, m)) in s.iter().zip(m).enumerate() {
            let near = [ceil(s.saturating_sub(100)), ceil(s + 100)];
            assert!(
                near.contains(m),
                "{cfg:?}\nrequest {i} token {k}: simulated {s} ns, served {m} ns"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, REQUESTS * u64::from(OUTPUT));
}

fn jittered() -> MockConfig {
    MockConfig {
        seed: 17,
        time_to_first_token: Duration::from_micros(12_300),
        time_to_first_token_std_dev: Duration::from_micros(4_000),
        inter_token_latency: Duration::from_micros(3_100),
        inter_token_latency_std_dev: Duration::from_micros(1_500),
        ..MockConfig::default()
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn jittered_latencies_agree_request_by_request() {
    let cfg = jittered();
    let sim = simulated(&cfg);
    let mock = served(cfg.clone()).await;
    assert_same_law(cfg, &sim, &mock);
    // The jitter is real: first-token times spread over more than 5 ms.
    let firsts: Vec<u64> = sim.iter().map(|r| r[0]).collect();
    let spread = firsts.iter().max().unwrap() - firsts.iter().min().unwrap();
    assert!(spread > 5 * MS, "{firsts:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_different_seed_gives_different_latencies() {
    // The comparison can fail: the mock under another seed misses the simulator's times.
    let sim = simulated(&jittered());
    let mock = served(MockConfig {
        seed: 18,
        ..jittered()
    })
    .await;
    let ceil = |ns: u64| ns.div_ceil(MS) * MS;
    let same = sim
        .iter()
        .flatten()
        .zip(mock.iter().flatten())
        .filter(|(s, m)| ceil(**s) == **m)
        .count();
    assert!(same < sim.len() * OUTPUT as usize / 2, "{same} equal");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn prefill_latencies_agree_request_by_request() {
    // Prefill replaces the fixed first-token time: 2 ms + 0.15 ms per prompt word.
    let cfg = MockConfig {
        seed: 5,
        prefill_overhead: Duration::from_micros(2_000),
        prefill_time_per_token: Duration::from_micros(150),
        inter_token_latency: Duration::from_micros(2_700),
        inter_token_latency_std_dev: Duration::from_micros(700),
        ..MockConfig::default()
    };
    let sim = simulated(&cfg);
    let mock = served(cfg.clone()).await;
    assert_same_law(cfg, &sim, &mock);
    assert!(sim.iter().all(|r| r[0] == 8 * MS), "2 + 40 x 0.15 ms");
}
