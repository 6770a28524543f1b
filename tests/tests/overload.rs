//! Past the in-flight bound: requests due while a shard holds its bound are dropped at
//! their due time, counted as a class of their own, judged against the SLO, and never
//! queued; the run ends on its schedule.

use std::time::{Duration, Instant};

use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::result::Outcome;
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};

#[test]
fn requests_past_the_bound_are_dropped_at_their_due_time() {
    // Each response takes 100 ms; at 400 req/s about 40 would be in flight. The bound
    // holds 4: the rest are dropped.
    let m = MockServer::start(MockConfig {
        port: 0,
        time_to_first_token: Duration::from_millis(100),
        max_num_seqs: 10_000,
        ..MockConfig::default()
    })
    .unwrap();
    let workload = Workload {
        arrivals: Arrivals::Constant { rate_per_s: 400.0 },
        stop: Stop::Count { requests: 400 },
        input_tokens: Lengths::Fixed { tokens: 4 },
        output_tokens: Lengths::Fixed { tokens: 2 },
        prefix: None,
        dataset: None,
    };
    let cfg = RunConfig {
        in_flight_bound: Some(4),
        slo: Some("ttft=1s".parse().unwrap()),
        csv: true,
        ..RunConfig::streaming("bound", workload, &m.url(), "heisenbench-mock")
    };
    let t0 = Instant::now();
    let cfg = cfg.checked().unwrap();
    let r = run(&cfg, &RunOptions::default()).unwrap();
    let took = t0.elapsed();
    let a = &r.accounting;
    assert!(a.balanced, "{a:?}");
    let dropped = a.failed.get(&Outcome::Dropped).copied().unwrap_or(0);
    assert_eq!(a.completed + dropped, 400, "{a:?}");
    // A slot frees every 100 ms / 4 = 25 ms, against a request every 2.5 ms: about one in
    // ten is sent.
    assert!((25..=80).contains(&a.completed), "{a:?}");
    assert!(r.merged.max_in_flight <= 4);
    // Dropped at the due time, never queued: the schedule's second plus one response.
    assert!(took < Duration::from_secs(5), "{took:?}");
    let rows = &r.merged.rows;
    assert_eq!(
        rows.iter().filter(|x| x.outcome == "dropped").count() as u64,
        dropped
    );
    assert!(
        rows.iter()
            .filter(|x| x.outcome == "dropped")
            .all(|x| x.first_token_ns.is_none())
    );
    // Every request is judged; a dropped one is never good.
    let g = r.goodput.unwrap();
    assert_eq!(g.judged, 400);
    assert_eq!(g.from_intended.good, a.completed);
    // The series counts them as failed in the second they were due.
    let failed: f64 = r.series.iter().map(|p| p.failed_per_s).sum();
    assert_eq!(failed as u64, dropped);
    m.shutdown();
}
