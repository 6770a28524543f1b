//! The simulator against the model, against itself, and against its invariants.

use heisenbench_model::batch::BatchMg1;
use heisenbench_model::compare::Verdict;
use heisenbench_model::mg1::Mg1;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::scenario::{
    Arrivals, ClientModel, EventCosts, Lengths, Policy, Stamp, Stop, Workload,
};
use heisenbench_model::service::Service;
use heisenbench_model::slo::Slo;
use heisenbench_model::units::{Quantile, format_seconds};
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::scenario::{PRESET_BUDGET_S, ServerModel, SimScenario, preset};
use heisenbench_sim::textbook::{Gaps, QueueSpec, events, lindley};

/// Tolerance in confidence half-widths. Each check is one of about 50 comparisons; two
/// 95 % half-widths are about four standard errors, so the family-wise chance of a false
/// alarm is well under 1 %. The seeds are fixed, so a pass is reproducible.
const K_CI: f64 = 2.0;

fn spec(rho: f64, service: Service, customers: u64) -> QueueSpec {
    QueueSpec {
        rate_per_s: rho / service.mean_s(),
        gaps: Gaps::Poisson,
        service,
        customers,
        warmup: customers / 10,
        batches: 32,
        seed: 11,
    }
}

#[test]
fn textbook_engines_agree_with_the_model() {
    let cases = [
        (0.8, Service::exponential(1.0).unwrap()),
        (0.9, Service::deterministic(1.0).unwrap()),
        (0.7, Service::gamma(1.0, 0.5).unwrap()),
        (0.6, Service::lognormal(1.0, 1.0).unwrap()),
    ];
    for (rho, service) in cases {
        let s = spec(rho, service.clone(), 1_000_000);
        let model = Mg1::new(s.rate_per_s, service.clone()).unwrap();
        let runs = [lindley(&s), events(&s)];
        for r in &runs {
            let what = format!("{} {} rho {rho}", r.engine, service);
            assert!(
                r.wait_mean_s.covers(model.wait_mean_s(), K_CI, 0.0),
                "{what}: mean {:?} vs {}",
                r.wait_mean_s,
                model.wait_mean_s()
            );
            assert!(
                r.p_wait.covers(rho, K_CI, 0.0),
                "{what}: P(wait) {:?} vs {rho}",
                r.p_wait
            );
            for (q, est) in &r.wait_quantiles_s {
                if *q == Quantile::P999 {
                    continue; // checked separately: per-batch p99.9 rests on ~30 samples
                }
                let truth = model.wait_quantile_s(*q);
                // The histogram rounds to 3 significant digits: allow 1e-3 of the value.
                assert!(
                    est.covers(truth, K_CI, 1e-3 * truth),
                    "{what}: {q} {est:?} vs {truth}"
                );
            }
        }
        // Same streams, same customers: the engines differ only by nanosecond rounding.
        let (a, b) = (&runs[0], &runs[1]);
        assert!(
            (a.wait_mean_s.value - b.wait_mean_s.value).abs() < 1e-6 * a.wait_mean_s.value.max(1.0)
        );
        let little = b.little.unwrap();
        assert!(
            (little.lq_time_average - little.lambda_times_wq).abs() < 1e-6 * little.lq_time_average
        );
    }
}

#[test]
fn textbook_p999_within_a_wider_band() {
    // The p99.9 of 3e6 customers at rho 0.8 (M/M/1): about 3,000 exceedances, a relative
    // standard error near 3 %: 10 % is over three of them.
    let s = spec(0.8, Service::exponential(1.0).unwrap(), 3_000_000);
    let truth = Mg1::mm1(0.8, 1.0).unwrap().wait_quantile_s(Quantile::P999);
    let r = lindley(&s);
    let got = r.wait_quantiles_s[3].1.value;
    assert!((got / truth - 1.0).abs() < 0.10, "{got} vs {truth}");
}

fn single_event_client(
    rho: f64,
    cost: Service,
    tokens: u32,
    burst_server: bool,
    requests: u64,
) -> SimScenario {
    let per_request = f64::from(tokens) * cost.mean_s();
    SimScenario {
        name: "check".into(),
        seed: 3,
        workload: Workload {
            arrivals: Arrivals::Poisson {
                rate_per_s: rho / per_request,
            },
            stop: Stop::Count { requests },
            input_tokens: Lengths::Fixed { tokens: 10 },
            output_tokens: Lengths::Fixed { tokens },
            prefix: None,
            dataset: None,
        },
        client: ClientModel {
            workers: 1,
            policy: Policy::Random,
            costs: EventCosts {
                send: None,
                chunk: Some(cost),
                finish: None,
                slice_s: None,
                wake: None,
                preempt_per_cpu_s: None,
            },
            stamp: Stamp::AfterProcessing,
            max_in_flight_per_worker: None,
            timeout_s: None,
            send_shares_loop: false,
        },
        server: ServerModel {
            max_num_seqs: 1_000_000,
            // Tokens spread far apart make every chunk its own Poisson-like event.
            inter_token_latency_s: if burst_server { 0.0 } else { 1.0 },
            ..ServerModel::default()
        },
        slo: None,
    }
}

#[test]
fn poisson_single_events_match_mg1() {
    // One chunk per request at Poisson times: exactly M/G/1. With 4e5 customers at rho 0.7
    // the textbook run's batch-means interval on the mean is about 1.5 %; 4 % is over two
    // of them.
    let cost = Service::gamma(20e-6, 0.5).unwrap();
    let r = Simulation::new(single_event_client(0.7, cost.clone(), 1, true, 400_000)).run();
    let model = Mg1::new(0.7 / 20e-6, cost).unwrap();
    let got = r.client_wait.mean_s;
    assert!(
        (got / model.wait_mean_s() - 1.0).abs() < 0.04,
        "{got} vs {}",
        model.wait_mean_s()
    );
    let p = r.prediction.as_ref().unwrap();
    assert_eq!(p.comparison.model, "M/G/1");
    assert_eq!(p.comparison.verdict, Verdict::ClientBias);
    assert!(r.is_balanced());
}

#[test]
fn token_bursts_need_the_batch_model() {
    // A zero-latency server hands the client all 50 chunks at once: M^X/G/1 with bursts of
    // 50. Plain M/G/1 on the same event rate misses the wait inside the burst.
    let cost = Service::gamma(20e-6, 0.5).unwrap();
    let rho = 0.5;
    let r = Simulation::new(single_event_client(rho, cost.clone(), 50, true, 40_000)).run();
    let burst_rate = rho / (50.0 * 20e-6);
    let batch = BatchMg1::new(burst_rate, 50, cost.clone()).unwrap();
    let plain = Mg1::new(burst_rate * 50.0, cost).unwrap();
    let got = r.client_wait.mean_s;
    // 4e4 bursts: the burst-level wait is the noisy part (a third of the total here);
    // its relative standard error is under 2 %, so 4 % on the total is generous.
    assert!(
        (got / batch.wait_mean_s() - 1.0).abs() < 0.04,
        "sim {got} vs M^X/G/1 {}",
        batch.wait_mean_s()
    );
    assert!(
        plain.wait_mean_s() < got / 5.0,
        "M/G/1 {} should miss most of {got}",
        plain.wait_mean_s()
    );
    let p = r.prediction.as_ref().unwrap();
    assert_eq!(p.burst, 50);
    assert_eq!(p.comparison.model, "M^X/G/1");
    assert_eq!(p.comparison.verdict, Verdict::ClientBias);
    assert!(p.comparison.plain_mg1.as_ref().unwrap().wq_mean_s < got / 5.0);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let mut sc = preset("paper-1000", 0.5, 9).unwrap().remove(1);
    sc.server.inter_token_latency_s = 1e-3;
    sc.server.inter_token_latency_std_dev_s = 3e-4;
    sc.workload.output_tokens = Lengths::Uniform { min: 10, max: 50 };
    let a = serde_json::to_string(&Simulation::new(sc.clone()).run()).unwrap();
    let b = serde_json::to_string(&Simulation::new(sc.clone()).run()).unwrap();
    assert_eq!(a, b);
    sc.seed = 10;
    let c = serde_json::to_string(&Simulation::new(sc).run()).unwrap();
    assert_ne!(a, c);
}

#[test]
fn event_times_never_decrease() {
    let mut sc = preset("paper-1000", 0.2, 2).unwrap().remove(1);
    sc.server.inter_token_latency_s = 2e-4;
    sc.server.inter_token_latency_std_dev_s = 1e-4;
    sc.server.time_to_first_token_s = 1e-3;
    let mut sim = Simulation::new(sc);
    let mut last = sim.now();
    while sim.step() {
        assert!(sim.now() >= last);
        last = sim.now();
    }
    assert!(sim.report().is_balanced());
}

/// Goodput in the simulator: exact where the latencies are known (a client that costs
/// nothing before a server of fixed TTFT and ITL), each origin's good share equal to its
/// own latency distribution at the bound (a second way to count), and every rejected or
/// timed-out request judged and never good.
#[test]
fn goodput_is_judged_from_the_server_and_both_sends() {
    let slo = |s: &str| Some(s.parse::<Slo>().unwrap());
    // A free client; TTFT 20 ms, then 9 tokens 1 ms apart: E2E 29 ms, every gap 1 ms.
    let mut sc = single_event_client(0.5, Service::deterministic(1e-3).unwrap(), 10, true, 500);
    sc.client.costs = EventCosts {
        send: None,
        chunk: None,
        finish: None,
        slice_s: None,
        wake: None,
        preempt_per_cpu_s: None,
    };
    sc.server = ServerModel {
        max_num_seqs: 1_000_000,
        time_to_first_token_s: 0.02,
        inter_token_latency_s: 1e-3,
        ..ServerModel::default()
    };
    for (bounds, good) in [
        ("ttft=25ms", 1.0),
        ("ttft=15ms", 0.0),
        ("itl=2ms", 1.0),
        ("itl=0.5ms", 0.0),
        ("e2e=30ms", 1.0),
        ("e2e=28ms,ttft=1s", 0.0),
    ] {
        sc.slo = slo(bounds);
        let r = Simulation::new(sc.clone()).run();
        let g = r.goodput.unwrap();
        assert_eq!(g.judged, 500, "{bounds}");
        for (view, v) in [
            ("server", g.server.as_ref().unwrap()),
            ("intended", &g.from_intended),
            ("actual", &g.from_actual),
        ] {
            assert_eq!(v.good_fraction, good, "{bounds}, {view}");
        }
    }

    // A loaded loop (utilisation 0.7, responses in one burst): from the intended send, the
    // share good under a TTFT bound is the TTFT distribution at that bound.
    let mut sc = single_event_client(0.7, Service::gamma(20e-6, 0.5).unwrap(), 20, true, 20_000);
    sc.slo = None;
    let cdf = Simulation::new(sc.clone()).run().ttft_cdf_from_intended;
    let &(bound, p) = cdf
        .iter()
        .min_by(|a, b| (a.1 - 0.5).abs().total_cmp(&(b.1 - 0.5).abs()))
        .unwrap();
    sc.slo = slo(&format!("ttft={}us", bound * 1e6));
    let g = Simulation::new(sc).run().goodput.unwrap();
    assert!(
        (g.from_intended.good_fraction - p).abs() < 0.02,
        "good {} vs the distribution's {p} at {bound} s",
        g.from_intended.good_fraction
    );
    assert!(g.from_actual.good_fraction >= g.from_intended.good_fraction);
    assert_eq!(
        g.server.unwrap().good_fraction,
        1.0,
        "the server's TTFT is 0"
    );

    // Rejections and timeouts are judged and fail.
    let mut sc = preset("paper-1000", 1.0, 4).unwrap().remove(1);
    sc.workload.output_tokens = Lengths::Fixed { tokens: 20 };
    sc.server = ServerModel {
        max_num_seqs: 4,
        max_waiting_queue_length: 8,
        time_to_first_token_s: 2e-3,
        inter_token_latency_s: 1e-4,
        ..ServerModel::default()
    };
    sc.client.timeout_s = Some(0.01);
    sc.slo = slo("e2e=1s");
    let r = Simulation::new(sc).run();
    let (c, g) = (r.counts, r.goodput.unwrap());
    assert!(c.rejected > 0 && c.timed_out > 0, "{c:?}");
    assert_eq!(g.judged, c.completed + c.rejected + c.timed_out);
    assert_eq!(
        g.server.unwrap().good,
        c.completed,
        "every completion is within 1 s"
    );
}

#[test]
fn rejections_and_timeouts_are_accounted_for() {
    // 20-token responses of 2 ms + 19 x 0.1 ms, slowed up to 2x, on 4 slots: about
    // 500 requests/s of capacity against 1,000 offered, so the line fills (429s) and
    // requests that wait too long time out.
    let mut sc = preset("paper-1000", 1.0, 4).unwrap().remove(1);
    sc.workload.output_tokens = Lengths::Fixed { tokens: 20 };
    sc.server = ServerModel {
        max_num_seqs: 4,
        max_waiting_queue_length: 8,
        time_to_first_token_s: 2e-3,
        inter_token_latency_s: 1e-4,
        time_factor_under_load: 2.0,
        ..ServerModel::default()
    };
    sc.client.timeout_s = Some(0.01);
    sc.client.max_in_flight_per_worker = Some(20);
    let r = Simulation::new(sc).run();
    let c = r.counts;
    assert!(c.rejected > 0, "{c:?}");
    assert!(c.timed_out > 0, "{c:?}");
    assert!(c.completed > 0, "{c:?}");
    assert_eq!(c.in_system_at_end, 0);
    assert!(r.is_balanced(), "{c:?}");
}

#[test]
fn closed_loop_users_each_have_one_request_in_flight() {
    let mut sc = preset("paper-1000", 1.0, 4).unwrap().remove(1);
    sc.workload.arrivals = Arrivals::Closed {
        users: 5,
        think_s: 0.001,
        turns: 1,
    };
    sc.workload.stop = Stop::Count { requests: 300 };
    sc.server.inter_token_latency_s = 1e-4;
    let r = Simulation::new(sc).run();
    assert_eq!(r.counts.scheduled, 300);
    assert_eq!(r.counts.completed, 300);
    let in_flight: u32 = r.workers.iter().map(|w| w.max_in_flight).sum();
    assert!(in_flight <= 5 * r.workers.len() as u32);
    assert!(r.prediction.is_none());
}

/// A closed loop's users draw their request shapes from their own streams
/// (`user_shapes`), as the live generator's users do: with one request per user, the
/// responses' lengths are each user's first draw, whatever order the users send in.
#[test]
fn closed_loop_users_draw_the_live_generators_shapes() {
    use heisenbench_model::scenario::Lengths;
    use heisenbench_model::schedule::user_shapes;
    let mut sc = preset("paper-1000", 1.0, 4).unwrap().remove(0);
    let users = 4;
    sc.workload.arrivals = Arrivals::Closed {
        users,
        think_s: 0.0,
        turns: 1,
    };
    sc.workload.stop = Stop::Count {
        requests: u64::from(users),
    };
    sc.workload.output_tokens = Lengths::Uniform { min: 5, max: 400 };
    let mut expected: Vec<u64> = (0..users)
        .map(|u| u64::from(user_shapes(&sc.workload, sc.seed, u).next().unwrap().1))
        .collect();
    let sim = Simulation::new(sc).with_trace(100_000);
    let mut chunks = std::collections::BTreeMap::<u64, u64>::new();
    let mut sim = sim;
    while sim.step() {}
    for j in sim.trace().iter().filter(|j| j.kind == "chunk") {
        *chunks.entry(j.request).or_default() += 1;
    }
    let mut got: Vec<u64> = chunks.into_values().collect();
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected);
}

#[test]
fn network_stamping_removes_the_observer_bias() {
    let mut sc = preset("paper-1000", 0.5, 5).unwrap().remove(0);
    sc.client.stamp = Stamp::NetworkArrival;
    sc.client.send_shares_loop = false;
    let r = Simulation::new(sc).run();
    // Chunks still queue on the saturated loop, but their stamps are taken on arrival.
    assert_eq!(r.first_chunk_delay.max_s, 0.0);
    assert!(r.ttft.from_actual.max_s <= 1e-9);
}

#[test]
fn paper_preset_collapses_and_the_plan_cures_it() {
    let runs = preset("paper-1000", 5.0, 1).unwrap();
    let single = Simulation::new(runs[0].clone()).run();
    let sharded = Simulation::new(runs[1].clone()).run();
    // One Python-like loop carries ~190 of the 1,000 requests/s offered.
    assert!(
        single.achieved_qps < 0.3 * single.offered_qps,
        "{}",
        single.achieved_qps
    );
    // Its TTFT from the intended send runs to seconds although the server's is zero.
    assert_eq!(single.ttft.server.max_s, 0.0);
    assert!(
        single.ttft.from_intended.p50_s > 1.0,
        "{}",
        single.ttft.from_intended.p50_s
    );
    assert_eq!(
        single.prediction.as_ref().unwrap().comparison.verdict,
        Verdict::ClientSaturated
    );
    // The planned loop count holds the rate, with the client's share of TTFT in budget.
    assert!(
        sharded.achieved_qps > 0.98 * sharded.offered_qps,
        "{}",
        sharded.achieved_qps
    );
    assert!(
        sharded.first_chunk_delay.p99_s <= PRESET_BUDGET_S,
        "{}",
        sharded.first_chunk_delay.p99_s
    );
    assert!(single.is_balanced() && sharded.is_balanced());
    // The verdict line says the same in words, with the runs' own figures.
    let verdict = heisenbench_sim::report::SimReport::preset_verdict(&single, &sharded);
    let single_pct = format!(
        "one loop achieved {:.0}% ",
        100.0 * single.achieved_qps / single.offered_qps
    );
    let loops = format!("; {} loops achieved ", runs[1].client.workers);
    assert!(
        verdict.contains(&single_pct) && verdict.contains(&loops),
        "{verdict}"
    );
    assert!(
        verdict.ends_with(&format_seconds(sharded.send_lag.p99_s)),
        "{verdict}"
    );
}

#[test]
fn bad_scenarios_name_the_field() {
    let good = serde_json::to_string(&preset("paper-1000", 1.0, 1).unwrap()[0]).unwrap();
    let bad_rate = good.replace("\"rate_per_s\":1000.0", "\"rate_per_s\":-5.0");
    let e = SimScenario::from_json(&bad_rate).unwrap_err().to_string();
    assert!(e.contains("workload.arrivals.rate_per_s"), "{e}");
    let bad_workers = good.replace("\"workers\":1", "\"workers\":0");
    assert!(
        SimScenario::from_json(&bad_workers)
            .unwrap_err()
            .to_string()
            .contains("client.workers")
    );
    let bad_len = good.replace("\"tokens\":200", "\"tokens\":0");
    assert!(
        SimScenario::from_json(&bad_len)
            .unwrap_err()
            .to_string()
            .contains("workload.output_tokens")
    );
    assert!(SimScenario::from_json("{").is_err());
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Every scheduled request ends completed, rejected or timed out, whatever the
        /// server limits, timeouts, caps, policies and latencies.
        #[test]
        fn requests_are_conserved(
            seed in 0u64..1000,
            workers in 1u32..5,
            policy in prop_oneof![Just(Policy::RoundRobin), Just(Policy::Random), Just(Policy::LeastLoaded)],
            slots in 1u32..6,
            queue in 0u32..6,
            itl_us in 0u64..300,
            ttft_us in 0u64..3000,
            timeout_ms in proptest::option::of(1u64..20),
            cap in proptest::option::of(1u32..4),
            tokens in 1u32..30,
            shares in any::<bool>(),
        ) {
            let mut sc = preset("paper-1000", 0.05, seed).unwrap().remove(0);
            sc.client.workers = workers;
            sc.client.policy = policy;
            sc.client.timeout_s = timeout_ms.map(|ms| ms as f64 * 1e-3);
            sc.client.max_in_flight_per_worker = cap;
            sc.client.send_shares_loop = shares;
            sc.workload.output_tokens = Lengths::Uniform { min: 1, max: tokens };
            sc.server = ServerModel {
                max_num_seqs: slots,
                max_waiting_queue_length: queue,
                inter_token_latency_s: itl_us as f64 * 1e-6,
                inter_token_latency_std_dev_s: itl_us as f64 * 0.3e-6,
                time_to_first_token_s: ttft_us as f64 * 1e-6,
                time_factor_under_load: 1.5,
                ..ServerModel::default()
            };
            let r = Simulation::new(sc).run();
            prop_assert!(r.is_balanced(), "{:?}", r.counts);
            prop_assert_eq!(r.counts.in_system_at_end, 0);
            prop_assert!(r.counts.scheduled > 0);
        }
    }
}

mod pooled {
    //! The pool's simulation (Kiefer-Wolfowitz) against what is known exactly: one server
    //! is Lindley's recursion on the same draws, M/M/c is Erlang C, and M/D/c's mean is
    //! Crommelin's.

    use heisenbench_model::mmc::Mgc;
    use heisenbench_model::queue::WaitModel;
    use heisenbench_model::service::Service;
    use heisenbench_model::units::Quantile;
    use heisenbench_sim::textbook::{BurstSpec, Gaps, lindley_bursts, pooled_bursts};

    fn spec(rate: f64, burst: u32, service: Service, bursts: u64) -> BurstSpec {
        BurstSpec {
            burst_rate_per_s: rate,
            gaps: Gaps::Poisson,
            burst,
            service,
            bursts,
            seed: 11,
        }
    }

    #[test]
    fn one_server_is_lindleys_recursion_on_the_same_draws() {
        for (burst, service) in [
            (1, Service::exponential(1.0).unwrap()),
            (20, Service::gamma(1.0, 4.0).unwrap()),
        ] {
            let s = spec(0.8 / f64::from(burst), burst, service, 100_000);
            let (a, b) = (pooled_bursts(&s, 1), lindley_bursts(&s));
            assert_eq!(a.customers, b.customers);
            let rel = (a.wait_mean_s.value - b.wait_mean_s.value).abs() / b.wait_mean_s.value;
            assert!(
                rel < 1e-9,
                "mean {} vs {}",
                a.wait_mean_s.value,
                b.wait_mean_s.value
            );
            for (x, y) in a.wait_quantiles_s.iter().zip(&b.wait_quantiles_s) {
                assert!((x.1.value - y.1.value).abs() <= 1e-9 * y.1.value.max(1.0));
            }
        }
    }

    /// M/M/c is exact in closed form (Erlang C); the simulation must cover it. 4 million
    /// customers keep the mean's interval near 2 %.
    #[test]
    fn mmc_matches_erlang_c() {
        for (c, rho) in [(4u32, 0.8), (10, 0.9)] {
            let lambda = rho * f64::from(c);
            let exact = Mgc::mmc(lambda, 1.0, c).unwrap();
            let sim = pooled_bursts(
                &spec(lambda, 1, Service::exponential(1.0).unwrap(), 4_000_000),
                c,
            );
            assert!(
                sim.wait_mean_s.covers(exact.wait_mean_s(), 3.0, 0.0),
                "c {c}: mean {} vs {:?}",
                exact.wait_mean_s(),
                sim.wait_mean_s
            );
            let p99 = exact.wait_quantile_s(Quantile::P99);
            let est = sim.wait_quantiles_s[2].1;
            assert!(
                est.covers(p99, 3.0, 0.005 * p99),
                "c {c}: p99 {p99} vs {est:?}"
            );
        }
    }

    /// M/D/10 at rho 0.9: mean wait 0.3446 (Crommelin's exact value), and M/D/c's exact
    /// waiting-time distribution (the embedded chain) at p90 and p99 for c = 2, 4, 10 and
    /// 21 at rho 0.9: inside the interval of 2 million simulated customers each, with
    /// 0.5 % of the value for the simulation's histogram buckets.
    #[test]
    fn md_c_mean_and_quantiles_are_exact() {
        let sim = pooled_bursts(
            &spec(9.0, 1, Service::deterministic(1.0).unwrap(), 4_000_000),
            10,
        );
        assert!(
            sim.wait_mean_s.covers(0.3446, 3.0, 0.0),
            "{:?}",
            sim.wait_mean_s
        );
        for c in [2u32, 4, 10, 21] {
            let lambda = 0.9 * f64::from(c);
            let d = Service::deterministic(1.0).unwrap();
            let exact = Mgc::new(lambda, c, d.clone()).unwrap();
            let sim = pooled_bursts(&spec(lambda, 1, d, 2_000_000), c);
            assert!(
                sim.p_wait.covers(exact.p_wait(), 3.0, 0.0),
                "c {c}: P(wait) {} vs {:?}",
                exact.p_wait(),
                sim.p_wait
            );
            for (i, q) in [(1, Quantile::P90), (2, Quantile::P99)] {
                let x = exact.wait_quantile_s(q);
                let est = sim.wait_quantiles_s[i].1;
                assert!(est.covers(x, 3.0, 0.005 * x), "c {c} {q}: {x} vs {est:?}");
            }
        }
    }
}
