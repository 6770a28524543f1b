//! Token throughput, the time series, goodput and the warm-up of one live run, each
//! checked against an independent account: the mock's journal of what it served, and a
//! recomputation request by request from the `requests.csv` the run wrote.

use std::time::Duration;

use heisenbench_live::generator::config::{RunConfig, Warmup};
use heisenbench_live::generator::result::RunReport;
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::{FailureType, MockConfig};
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};
use heisenbench_model::slo::{Constraint, Slo};

const REQUESTS: u64 = 600;
const WARMUP: u64 = 60;
const OUTPUT: u32 = 12;

/// One run against a mock whose TTFT varies about the SLO's bound (so some requests meet
/// it and some do not) and that fails 5 % of requests: the report, its directory and the
/// mock's journal.
fn measured() -> (RunReport, tempdir::Dir, Vec<heisenbench_live::mock::Served>) {
    let mock = MockConfig {
        port: 0,
        time_to_first_token: Duration::from_millis(4),
        time_to_first_token_std_dev: Duration::from_millis(2),
        inter_token_latency: Duration::from_micros(500),
        max_num_seqs: 10_000,
        failure_injection_rate: 5.0,
        failure_types: vec![FailureType::ServerError],
        ..MockConfig::default()
    };
    let (m, journal) = MockServer::start_recorded(mock).unwrap();
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: 300.0 },
        stop: Stop::Count { requests: REQUESTS },
        input_tokens: Lengths::Uniform { min: 8, max: 64 },
        output_tokens: Lengths::Fixed { tokens: OUTPUT },
        prefix: None,
        dataset: None,
    };
    let cfg = RunConfig {
        seed: 5,
        timeout_s: Some(10.0),
        csv: true,
        slo: Some("ttft=5ms,tpot=2ms,e2e=20ms".parse().unwrap()),
        warmup: Some(Warmup::Requests { requests: WARMUP }),
        ..RunConfig::streaming("goodput", workload, &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let report = run(&cfg, &RunOptions::default()).unwrap();
    let dir = tempdir::Dir::new("goodput");
    report.write_files(dir.path(), true).unwrap();
    let served = journal.snapshot();
    m.shutdown();
    (report, dir, served)
}

/// A scratch directory removed at the end of the test.
mod tempdir {
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!("heisenbench-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One row of requests.csv, the columns this test reads.
struct CsvRow {
    index: u64,
    outcome: String,
    intended: u64,
    sent: u64,
    first: Option<u64>,
    end: Option<u64>,
    tokens: u32,
    max_itl: Option<u64>,
    warmup: bool,
}

fn read_csv(dir: &std::path::Path) -> Vec<CsvRow> {
    let text = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (index, outcome, intended, sent, first, end, tokens, itl, warm) = (
        col("index"),
        col("outcome"),
        col("intended_ns"),
        col("sent_ns"),
        col("first_token_ns"),
        col("end_ns"),
        col("tokens_stream"),
        col("max_itl_ns"),
        col("warmup"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let opt = |i: usize| f[i].parse::<u64>().ok();
            CsvRow {
                index: f[index].parse().unwrap(),
                outcome: f[outcome].to_string(),
                intended: f[intended].parse().unwrap(),
                sent: f[sent].parse().unwrap(),
                first: opt(first),
                end: opt(end),
                tokens: f[tokens].parse().unwrap(),
                max_itl: opt(itl),
                warmup: f[warm] == "1",
            }
        })
        .collect()
}

/// Whether a row is good against `slo` with its clock starting at `origin`, recomputed
/// from the CSV's nanoseconds alone.
fn good(slo: &Slo, r: &CsvRow, origin: u64) -> bool {
    let (Some(first), Some(end)) = (r.first, r.end) else {
        return false;
    };
    if r.outcome != "completed" {
        return false;
    }
    let s = |ns: u64| ns as f64 * 1e-9;
    let ttft = s(first - origin);
    let e2e = s(end - origin);
    let tpot = (r.tokens > 1).then(|| s(end - first) / f64::from(r.tokens - 1));
    let holds = |b: Option<f64>, v: Option<f64>| match (b, v) {
        (Some(b), Some(v)) => v <= b,
        _ => true,
    };
    holds(slo.ttft_s, Some(ttft))
        && holds(slo.tpot_s, tpot)
        && holds(slo.e2e_s, Some(e2e))
        && holds(slo.ntpot_s, Some(e2e / f64::from(r.tokens.max(1))))
        && holds(slo.itl_s, r.max_itl.map(s))
}

#[test]
fn throughput_series_goodput_and_warmup_hold_against_independent_accounts() {
    let (report, dir, served) = measured();
    let rows = read_csv(dir.path());
    let a = &report.accounting;
    assert!(a.balanced);
    assert_eq!(rows.len() as u64, REQUESTS);

    // The warm-up: the first WARMUP indices, accounted for, out of the statistics.
    let w = report.warmup.unwrap();
    assert_eq!(w.requests, WARMUP);
    assert!(rows.iter().all(|r| r.warmup == (r.index < WARMUP)));
    let measured: Vec<&CsvRow> = rows.iter().filter(|r| !r.warmup).collect();
    let completed: Vec<&&CsvRow> = measured
        .iter()
        .filter(|r| r.outcome == "completed")
        .collect();
    assert_eq!(
        report.ttft.from_intended.count,
        completed.len() as u64,
        "TTFT counts only requests past the warm-up"
    );
    assert!(a.completed > completed.len() as u64);

    // Tokens against the mock's journal: every whole 200 response it served is a completed
    // request, warm-up or not, of OUTPUT tokens; the measured ones are the report's.
    let whole: Vec<_> = served
        .iter()
        .filter(|s| s.status == 200 && s.complete)
        .collect();
    assert_eq!(whole.len() as u64, a.completed);
    assert!(whole.iter().all(|s| s.tokens == OUTPUT));
    let t = report.throughput;
    assert_eq!(t.output_tokens, completed.len() as u64 * u64::from(OUTPUT));
    assert!((t.output_tokens_per_s * report.duration_s - t.output_tokens as f64).abs() < 1e-6);
    assert_eq!(t.tokens_per_chunk, Some(1.0));
    // The prompts' tokens as the mock counted them (words), over every whole response,
    // against the report's measured input plus the warm-up's (which the series does not
    // split): the measured part alone is bounded by the total.
    let served_prompt: u64 = whole.iter().map(|s| u64::from(s.prompt_tokens)).sum();
    assert!(t.input_tokens < served_prompt && t.input_tokens > served_prompt * 8 / 10);

    // The series: its windows add up to the run's counts, and the tokens that arrived add
    // up to what the journal says it sent in whole responses (failed ones carry none).
    let sum = |f: fn(&heisenbench_live::generator::series::SeriesPoint) -> f64| {
        report.series.iter().map(f).sum::<f64>() as u64
    };
    assert_eq!(sum(|p| p.offered_per_s), REQUESTS);
    assert_eq!(sum(|p| p.sent_per_s), REQUESTS);
    assert_eq!(sum(|p| p.completed_per_s), a.completed);
    assert_eq!(sum(|p| p.failed_per_s), REQUESTS - a.completed);
    let journal_tokens: u64 = served.iter().map(|s| u64::from(s.tokens)).sum();
    assert_eq!(sum(|p| p.output_tokens_per_s), journal_tokens);
    assert!(t.peak_output_tokens_per_s <= journal_tokens as f64);

    // Little's law over the whole run: the time-weighted mean in flight is the arrival
    // rate times the mean time in the system. Every request starts and ends inside the
    // windows, so the areas agree up to the read's return after the end stamp (under a
    // millisecond a request, against lives of about 10 ms): within 10 %.
    let area: f64 = report.series.iter().map(|p| p.in_flight_mean).sum();
    let lives: f64 = rows
        .iter()
        .filter_map(|r| r.end.map(|e| (e - r.sent) as f64 * 1e-9))
        .sum();
    let failed_lives = rows.iter().filter(|r| r.end.is_none()).count();
    assert_eq!(failed_lives as u64, REQUESTS - a.completed);
    assert!(
        (area - lives).abs() <= 0.1 * lives + failed_lives as f64 * 0.02,
        "in flight {area:.3} request-seconds against {lives:.3}"
    );

    // Goodput, recomputed from the CSV: the same good requests from each origin; failures
    // count against it; the client's share is the difference.
    let g = report.goodput.as_ref().unwrap();
    let slo = g.slo;
    let judged = measured.len() as u64;
    assert_eq!(g.judged, judged);
    let good_intended = measured
        .iter()
        .filter(|r| good(&slo, r, r.intended))
        .count() as u64;
    let good_actual = measured.iter().filter(|r| good(&slo, r, r.sent)).count() as u64;
    assert!(
        good_intended.abs_diff(g.from_intended.good) <= 1,
        "{good_intended} {g:?}"
    );
    assert!(
        good_actual.abs_diff(g.from_actual.good) <= 1,
        "{good_actual} {g:?}"
    );
    // The bound sits in the middle of the mock's TTFT: neither all nor none are good.
    assert!(g.from_intended.good_fraction > 0.2 && g.from_intended.good_fraction < 0.9);
    assert!(g.from_actual.good >= g.from_intended.good);
    let failures = measured.iter().filter(|r| r.outcome != "completed").count() as f64;
    assert!(failures > 0.0, "the mock failed nothing");
    assert!(g.from_intended.good_fraction <= 1.0 - failures / judged as f64 + 1e-12);
    let ttft_met = g.from_intended.attainment[&Constraint::Ttft];
    assert!(g.from_intended.good_fraction <= ttft_met);
    assert!(
        (g.client_share - (g.from_actual.good - g.from_intended.good) as f64 / judged as f64).abs()
            < 1e-12
    );
    assert!(
        (g.from_intended.requests_per_s * report.duration_s - g.from_intended.good as f64).abs()
            < 1e-6
    );
    assert!(
        (g.from_intended.output_tokens_per_s / f64::from(OUTPUT) - g.from_intended.requests_per_s)
            .abs()
            < 1e-9
    );
}

/// A client made slow on purpose: every event costs 100 us of busy work on the shard's one
/// loop, so a send due while the loop works on a response waits. Goodput from the actual
/// send hides that wait; from the intended send it counts. The difference, the client's
/// share, against the model's prediction of the wait: responses reach the loop as bursts
/// (a zero-latency decode, one read each), whose work is the loop's measured CPU per
/// request; a due send goes ahead of the queued bursts (the shard's chunk handlers step
/// aside), so it waits only for the burst in service: P(L > t) = rho (1 - t / B)
/// (`model::priority`). A request good from the actual send (TTFT_a <= b) and not from the
/// intended one waited longer than b - TTFT_a: the predicted share is the mean over
/// requests of 1{TTFT_a <= b} P(L > b - TTFT_a). The bound sits 0.4 ms above the mock's
/// 5 ms, within a burst's work, so about a fifth of the requests are the client's misses.
/// (A FIFO loop's send would wait for the whole queue, M/D/1: that prediction is printed
/// too.)
#[test]
fn the_clients_share_of_goodput_matches_the_models_wait() {
    use heisenbench_model::mg1::Mg1;
    use heisenbench_model::priority::ahead_of_queue_tail;
    use heisenbench_model::queue::WaitModel;
    use heisenbench_model::service::Service;
    let m = MockServer::start(MockConfig {
        port: 0,
        time_to_first_token: Duration::from_millis(5),
        max_num_seqs: 10_000,
        ..MockConfig::default()
    })
    .unwrap();
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: 800.0 },
        stop: Stop::Duration { seconds: 6.0 },
        input_tokens: Lengths::Fixed { tokens: 8 },
        output_tokens: Lengths::Fixed { tokens: 4 },
        prefix: None,
        dataset: None,
    };
    let bound = 5.4e-3;
    let cfg = RunConfig {
        seed: 3,
        client_cost_s: 100e-6,
        csv: true,
        slo: Some(Slo {
            ttft_s: Some(bound),
            ..Slo::default()
        }),
        warmup: Some(Warmup::Seconds { seconds: 1.0 }),
        ..RunConfig::streaming("slow client", workload, &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let r = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    let g = r.goodput.as_ref().unwrap();
    assert!(g.from_actual.good > g.from_intended.good, "{g:?}");
    let measured = g.client_share;
    // The loop's work per request, measured: its CPU over the requests it handled.
    let burst_s = r.merged.cpu_ns as f64 * 1e-9 / r.accounting.completed as f64;
    let rho = r.achieved_qps * burst_s;
    let burst = Service::deterministic(burst_s).unwrap();
    let fifo = Mg1::md1(r.achieved_qps, burst_s).unwrap();
    let share = |tail: &dyn Fn(f64) -> f64| {
        r.merged
            .rows
            .iter()
            .filter(|x| !x.warmup && x.outcome == "completed")
            .map(|x| {
                let ttft_a = (x.first_token_ns.unwrap() - x.sent_ns) as f64 * 1e-9;
                if ttft_a <= bound {
                    tail(bound - ttft_a)
                } else {
                    0.0
                }
            })
            .sum::<f64>()
            / g.judged as f64
    };
    let predicted = share(&|t| ahead_of_queue_tail(rho, &burst, t));
    let predicted_fifo = share(&|t| fifo.wait_tail(t));
    eprintln!(
        "utilisation {rho:.3} (a burst {:.1} us): the client's share measured {measured:.4}, \
         predicted {predicted:.4} (a FIFO send: {predicted_fifo:.4})",
        burst_s * 1e6
    );
    assert!(measured > 0.01, "too few misses to compare: {measured}");
    // Measured here (three runs): 0.208, 0.205 and 0.206 against 0.240, 0.236 and 0.238
    // predicted, 13 % below; a FIFO send's M/D/1 says 0.31, 50 % above. The share is about
    // 800 requests of 4,000, so its own noise is about 3.5 %; the bound is the 25 % asked
    // for.
    assert!(
        (measured - predicted).abs() <= 0.25 * predicted,
        "measured {measured:.4} against predicted {predicted:.4}"
    );
}
