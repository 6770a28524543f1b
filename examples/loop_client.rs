//! A deliberately simple benchmark client, for auditing: one thread that handles one
//! request at a time, with a known CPU cost per streamed chunk.
//!
//! Requests are due at Poisson times. The thread takes them in order: it waits for the
//! due time if it is early, spends `--request-cost-us` of CPU on the request (its fixed
//! path: none by default), sends, reads the whole response, spends `--cost-us` of CPU on
//! every token event, and stamps the TTFT when it handles the first token event,
//! measured from the request's due time. With a zero-latency server that makes the
//! client a single FIFO queue of whole requests (M/D/1), whose wait is exactly what it
//! adds to every TTFT it reports: the audit should predict it. It writes its results in
//! the format of `vllm bench serve --save-result` (milliseconds), so an audit reads them
//! like vLLM's.
//!
//! ```text
//! heisenbench audit --rate 100 --output-tokens 20 -- \
//!     target/release/examples/loop_client --url {url} --model {model} --rate {rate} \
//!     --duration {duration} --tokens {output_tokens} --cost-us 200 --out {out}
//! ```
//!
//! It also plays the broken clients the audit must survive: `--exit-code N` exits with
//! that status after the run, `--no-results` writes nothing, `--ignore-url` never
//! contacts the server.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Args {
    url: String,
    model: String,
    rate: f64,
    duration: f64,
    tokens: u32,
    cost: Duration,
    request_cost: Duration,
    out: Option<String>,
    seed: u64,
    exit_code: i32,
    no_results: bool,
    ignore_url: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        url: String::new(),
        model: "heisenbench-mock".into(),
        rate: 10.0,
        duration: 2.0,
        tokens: 20,
        cost: Duration::ZERO,
        request_cost: Duration::ZERO,
        out: None,
        seed: 1,
        exit_code: 0,
        no_results: false,
        ignore_url: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        let num = |s: String| s.parse::<f64>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "--url" => a.url = v()?,
            "--model" => a.model = v()?,
            "--rate" => a.rate = num(v()?)?,
            "--duration" => a.duration = num(v()?)?,
            "--tokens" => a.tokens = num(v()?)? as u32,
            "--cost-us" => a.cost = Duration::from_secs_f64(num(v()?)? * 1e-6),
            "--request-cost-us" => a.request_cost = Duration::from_secs_f64(num(v()?)? * 1e-6),
            "--out" => a.out = Some(v()?),
            "--seed" => a.seed = num(v()?)? as u64,
            "--exit-code" => a.exit_code = num(v()?)? as i32,
            "--no-results" => a.no_results = true,
            "--ignore-url" => a.ignore_url = true,
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if a.url.is_empty() && !a.ignore_url {
        return Err("--url is required".into());
    }
    Ok(a)
}

/// Spends `d` of this thread's CPU time (not wall time: a preempted spin still costs `d`).
fn spin(d: Duration) {
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let end = cpu() + d;
    while cpu() < end {
        std::hint::spin_loop();
    }
}

/// A small PCG-style generator: the client needs no dependency for its Poisson times.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

#[derive(Default)]
struct Results {
    ttft_s: Vec<f64>,
    e2e_s: Vec<f64>,
    failed: u64,
}

/// The CPU one request costs: a fixed part before it is sent, and a part per token event.
#[derive(Clone, Copy)]
struct Costs {
    request: Duration,
    token: Duration,
}

/// One request, from its due time: its fixed cost, send, read the whole stream, handle
/// every event.
fn one(addr: &str, body: &str, due: Instant, cost: Costs, r: &mut Results) {
    let ok = (|| -> std::io::Result<Option<f64>> {
        spin(cost.request);
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes())?;
        // Read until the stream's end marker (not the connection's close).
        let mut all = Vec::new();
        let mut buf = [0u8; 16 << 10];
        while !all.ends_with(b"data: [DONE]\n\n") {
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&all);
        let mut ttft = None;
        let mut done = false;
        for event in text.split("\n\n") {
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            if data.starts_with("[DONE]") {
                done = true;
            } else if data.contains("\"text\":") {
                if ttft.is_none() {
                    ttft = Some(due.elapsed().as_secs_f64());
                }
                spin(cost.token);
            }
        }
        Ok(ttft.filter(|_| done))
    })();
    match ok {
        Ok(Some(t)) => {
            r.ttft_s.push(t);
            r.e2e_s.push(due.elapsed().as_secs_f64());
        }
        _ => r.failed += 1,
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loop_client: {e}");
            std::process::exit(2);
        }
    };
    let mut r = Results::default();
    let began = Instant::now();
    if !a.ignore_url {
        let addr = a
            .url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let body = format!(
            "{{\"model\":\"{}\",\"prompt\":\"hello world\",\"max_tokens\":{},\"stream\":true,\"ignore_eos\":true}}",
            a.model, a.tokens
        );
        let mut rng = Rng(a.seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
        let mut t = 0.0;
        loop {
            t += -rng.uniform().ln() / a.rate;
            if t >= a.duration {
                break;
            }
            let due = began + Duration::from_secs_f64(t);
            if let Some(early) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(early);
            }
            let cost = Costs {
                request: a.request_cost,
                token: a.cost,
            };
            one(&addr, &body, due, cost, &mut r);
        }
    } else {
        std::thread::sleep(Duration::from_secs_f64(a.duration));
    }
    let elapsed = began.elapsed().as_secs_f64();
    let mut ttft = r.ttft_s.clone();
    ttft.sort_by(f64::total_cmp);
    let mut e2e = r.e2e_s.clone();
    e2e.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    if let (Some(dir), false) = (&a.out, a.no_results) {
        let json = format!(
            "{{\"backend\":\"loop_client\",\"completed\":{},\"failed\":{},\"duration\":{elapsed},\
             \"request_throughput\":{},\"mean_ttft_ms\":{},\"median_ttft_ms\":{},\"p90_ttft_ms\":{},\
             \"p99_ttft_ms\":{},\"mean_e2el_ms\":{},\"median_e2el_ms\":{},\"p99_e2el_ms\":{}}}\n",
            ttft.len(),
            r.failed,
            ttft.len() as f64 / elapsed,
            mean(&ttft) * 1e3,
            quantile(&ttft, 0.5) * 1e3,
            quantile(&ttft, 0.9) * 1e3,
            quantile(&ttft, 0.99) * 1e3,
            mean(&e2e) * 1e3,
            quantile(&e2e, 0.5) * 1e3,
            quantile(&e2e, 0.99) * 1e3,
        );
        if let Err(e) = std::fs::write(format!("{dir}/loop_client.json"), json) {
            eprintln!("loop_client: cannot write results: {e}");
            std::process::exit(1);
        }
    }
    println!(
        "loop_client: {} completed, {} failed in {elapsed:.2}s",
        ttft.len(),
        r.failed
    );
    std::process::exit(a.exit_code);
}
