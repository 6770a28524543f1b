//! The server's side of a run, against a mock whose split is known: a fixed prefill
//! (its configured TTFT), two slots and a waiting line. Below the knee the queue is short
//! and the split is mostly prefill; above it the queue dominates. Each part is checked
//! against an account the split does not use: the configured prefill, and the mock's
//! journal (arrival and first-token stamps of every request it served).

use std::time::Duration;

use heisenbench_live::generator::config::{RunConfig, ServerMetrics};
use heisenbench_live::generator::result::RunReport;
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::scrape::view::Attribution;
use heisenbench_live::scrape::{Targets, metrics_url};
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};

const PREFILL: Duration = Duration::from_millis(20);

/// The tests of this file take turns: each measures its own client's delay, which the
/// others' load on the same cores would add to.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A run at `rate` for 3 s against a fresh mock with two slots (about 69 req/s of
/// capacity: 20 ms to the first token and 9 more at 1 ms); the report and the journal's
/// mean time from arrival to the first token, less the configured prefill.
fn measured(rate: f64) -> (RunReport, f64) {
    let mock = MockConfig {
        port: 0,
        time_to_first_token: PREFILL,
        inter_token_latency: Duration::from_millis(1),
        max_num_seqs: 2,
        max_waiting_queue_length: 10_000,
        ..MockConfig::default()
    };
    let (m, journal) = MockServer::start_recorded(mock).unwrap();
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: rate },
        stop: Stop::Duration { seconds: 3.0 },
        input_tokens: Lengths::Fixed { tokens: 16 },
        output_tokens: Lengths::Fixed { tokens: 10 },
        prefix: None,
        dataset: None,
    };
    let cfg = RunConfig {
        seed: 11,
        timeout_s: Some(30.0),
        server_metrics: ServerMetrics {
            targets: Targets::Urls(vec![metrics_url(&m.url())]),
            interval_s: 0.1,
        },
        ..RunConfig::streaming("server-view", workload, &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let report = run(&cfg, &RunOptions::default()).unwrap();
    let served = journal.snapshot();
    m.shutdown();
    let waits: Vec<f64> = served
        .iter()
        .filter_map(|s| Some((s.first_token_ns? - s.arrival_ns) as f64 * 1e-9))
        .collect();
    let journal_queue = waits.iter().sum::<f64>() / waits.len() as f64 - PREFILL.as_secs_f64();
    (report, journal_queue)
}

fn part(a: &Attribution, name: &str) -> f64 {
    a.parts.iter().find(|p| p.name == name).unwrap().mean_s
}

/// The parts add up to the client's mean TTFT; the prefill is the configured one (the
/// mock's timers wake a little late, never early: within 0 and 1.5 ms); the queue is what
/// the journal's stamps say (within 2 ms plus 5 %: the timer's lateness and the journal
/// stamping at the hand-over); the rest is loopback's (under 2 ms); the client's part is
/// the run's own send lag.
fn check(report: &RunReport, journal_queue: f64) -> Attribution {
    assert!(report.accounting.balanced);
    let view = report
        .server
        .as_ref()
        .expect("the mock's metrics were scraped");
    assert_eq!(view.targets[0].engine.as_deref(), Some("vLLM"));
    assert_eq!(view.targets[0].failures, 0);
    let a = view
        .attribution
        .clone()
        .expect("queue and prefill histograms");
    let sum: f64 = a.parts.iter().map(|p| p.mean_s).sum();
    assert!((sum - a.ttft_mean_s).abs() < 1e-9, "{a:?}");
    assert!((a.ttft_mean_s - report.ttft.from_intended.mean_s).abs() < 1e-12);
    let prefill = part(&a, "prefill");
    let p = PREFILL.as_secs_f64();
    assert!(
        prefill >= p - 1e-4 && prefill <= p + 1.5e-3,
        "prefill {prefill} against {p}"
    );
    let queue = part(&a, "queue");
    assert!(
        (queue - journal_queue).abs() <= 2e-3 + 0.05 * journal_queue,
        "queue {queue} against the journal's {journal_queue}"
    );
    let rest = part(&a, "rest");
    assert!(rest.abs() < 2e-3, "rest {rest}: {a:?}");
    let client = part(&a, "client");
    let lag = report.ttft.from_intended.mean_s - report.ttft.from_actual.mean_s;
    assert!((client - lag).abs() < 1e-12);
    a
}

#[test]
fn below_the_knee_the_split_is_mostly_prefill() {
    let _turn = turn();
    let (report, journal_queue) = measured(25.0);
    let a = check(&report, journal_queue);
    assert!(part(&a, "prefill") > part(&a, "queue"), "{}", a.verdict);
}

#[test]
fn above_the_knee_the_queue_dominates_and_the_verdict_says_so() {
    let _turn = turn();
    let (report, journal_queue) = measured(100.0);
    let a = check(&report, journal_queue);
    let share = a.parts.iter().find(|p| p.name == "queue").unwrap().share;
    assert!(share > 0.8, "{}", a.verdict);
    assert!(a.verdict.contains("the server's queue"), "{}", a.verdict);
    // The queue grew through the run, and the windows show it.
    let q: Vec<f64> = a.windows.iter().filter_map(|w| w.queue_s).collect();
    assert!(q.len() >= 3 && q[q.len() - 1] > 3.0 * q[0], "{q:?}");
}

/// A client made slow on purpose (100 us of busy work per event on the shard's one loop):
/// the split's client part is the run's mean send lag, and the queue stays empty. The
/// model's wait is printed beside it (not asserted, see below). Responses reach the loop as bursts (4 tokens at once after a
/// 5 ms TTFT), whose work is the loop's measured CPU per request; a due send goes ahead of
/// the bursts queued (`model::priority`), so it waits for the burst in service only:
/// P(W > t) = rho (1 - t / D), `ahead_of_queue_tail`. The TTFT is stamped on the
/// kernel's arrival, so the loop's backlog of reads is not the server's: the queue stays
/// empty and the rest is the wire's.
#[test]
fn a_slow_clients_part_of_the_split_is_its_send_lag() {
    use heisenbench_live::generator::config::Warmup;
    use heisenbench_model::priority::ahead_of_queue_tail;
    use heisenbench_model::service::Service;
    let _turn = turn();
    let (m, _journal) = MockServer::start_recorded(MockConfig {
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
    let cfg = RunConfig {
        seed: 3,
        client_cost_s: 100e-6,
        warmup: Some(Warmup::Seconds { seconds: 1.0 }),
        server_metrics: ServerMetrics {
            targets: Targets::Urls(vec![metrics_url(&m.url())]),
            interval_s: 0.1,
        },
        ..RunConfig::streaming("slow client", workload, &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let r = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    assert!(r.accounting.balanced);
    let a = r.server.as_ref().unwrap().attribution.clone().unwrap();
    let client = part(&a, "client");
    assert!(
        (client - r.send_lag.mean_s).abs() < 1e-9,
        "{client} vs {:?}",
        r.send_lag
    );
    assert!(part(&a, "queue") < 1e-3, "{a:?}");
    // The loop's work per request, measured: its CPU over the requests it handled.
    let burst_s = r.merged.cpu_ns as f64 * 1e-9 / r.accounting.completed as f64;
    let rho = r.achieved_qps * burst_s;
    let burst = Service::deterministic(burst_s).unwrap();
    let steps = 1_000;
    let h = burst_s / f64::from(steps);
    let predicted: f64 = (0..steps)
        .map(|i| ahead_of_queue_tail(rho, &burst, (f64::from(i) + 0.5) * h) * h)
        .sum();
    // The model's 90th percentile of the wait: where its tail falls to 0.1.
    let p90 = (0..=steps)
        .map(|i| f64::from(i) * h)
        .find(|t| ahead_of_queue_tail(rho, &burst, *t) <= 0.1)
        .unwrap_or(burst_s);
    eprintln!(
        "utilisation {rho:.3} (a burst {:.0} us): the client's part {:.1} us, predicted {:.1} us; send lag p90 {:.1} us, predicted {:.1} us",
        burst_s * 1e6,
        client * 1e6,
        predicted * 1e6,
        r.send_lag.p90_s * 1e6,
        p90 * 1e6
    );
    // Not asserted: on this VM both the mean and the p90 of a 6 s run move by a factor of
    // two when a run falls in one of its stalls (seen: means of 141-178 us against 138-149
    // predicted in most runs, and 330, 375 and 553 us in others; p90 412-469 against
    // 464-487 us, and once 888 against 525 us). The printed line carries the comparison.
}
