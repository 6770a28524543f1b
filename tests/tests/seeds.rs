//! One scenario, one seed: a file that names no seed gets the same one in `sim` and `run`,
//! and so the same schedule; a trace that carries lengths gives them to both.

use heisenbench_live::generator::config::{RunConfig, RunOverrides};
use heisenbench_model::scenario::DEFAULT_SEED;
use heisenbench_model::schedule::Schedule;
use heisenbench_sim::scenario::SimScenario;

const NO_SEED: &str = r#"{"name": "s",
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 50},
        "stop": {"kind": "count", "requests": 20},
        "input_tokens": {"kind": "fixed", "tokens": 4},
        "output_tokens": {"kind": "fixed", "tokens": 5}},
    "client": {"workers": 1, "costs": {"chunk": {"kind": "deterministic", "mean_s": 0.0}}}}"#;

#[test]
fn a_file_without_a_seed_plans_the_same_schedule_in_sim_and_run() {
    let sim: SimScenario = serde_json::from_str(NO_SEED).unwrap();
    let (run, _) = RunConfig::resolve(Some(NO_SEED), &RunOverrides::default()).unwrap();
    assert_eq!((sim.seed, run.seed), (DEFAULT_SEED, DEFAULT_SEED));
    let times = |seed| {
        Schedule::new(&sim.workload, seed)
            .unwrap()
            .stripe(0, 1)
            .map(|p| p.at_ns)
            .collect::<Vec<_>>()
    };
    assert_eq!(times(sim.seed), times(run.seed));
    assert_ne!(
        times(sim.seed),
        times(0),
        "the seed must matter for this check to mean anything"
    );
}

/// A mooncake-format trace (send times and each request's lengths) run live against the
/// embedded mock and simulated: each request the mock served had the trace's prompt and
/// output tokens (its usage, which counts words, says so), and the simulator's server,
/// under a law of fixed TTFT and inter-token latency, spent the time the trace's output
/// lengths imply.
#[test]
fn a_trace_with_lengths_gives_them_to_sim_and_run() {
    use heisenbench_live::generator::{RunOptions, run};
    use heisenbench_live::mock::MockServer;
    use heisenbench_live::mock::config::MockConfig;
    use heisenbench_model::scenario::{
        Arrivals, ClientModel, Lengths, Stop, Workload, WorkloadFlags, parse_trace,
    };
    let lengths: [[u32; 2]; 6] = [[12, 3], [40, 9], [7, 1], [25, 6], [3, 14], [60, 2]];
    let text: String = lengths
        .iter()
        .enumerate()
        .map(|(i, [input, output])| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": [{i}]}}\n",
                5000 + 20 * i
            )
        })
        .collect();
    let trace = parse_trace(&text).unwrap();
    let mut workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: 1.0 },
        stop: Stop::Count { requests: 1 },
        input_tokens: Lengths::Fixed { tokens: 1 },
        output_tokens: Lengths::Fixed { tokens: 1 },
        prefix: None,
        dataset: None,
    };
    workload
        .apply(&WorkloadFlags {
            trace: Some(trace),
            ..WorkloadFlags::default()
        })
        .unwrap();

    let m = MockServer::start(MockConfig {
        port: 0,
        ..MockConfig::default()
    })
    .unwrap();
    let cfg = RunConfig {
        seed: 3,
        csv: true,
        timeout_s: Some(10.0),
        ..RunConfig::streaming("trace", workload.clone(), &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let live = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    assert_eq!(live.accounting.completed, 6);
    let mut rows = live.merged.rows.clone();
    rows.sort_by_key(|r| r.index);
    for (r, [_, output]) in rows.iter().zip(lengths) {
        assert_eq!(r.tokens_usage, Some(output), "request {}", r.index);
        // Sent 20 ms apart from time zero (the trace moved to start at 0).
        assert_eq!(r.intended_ns, r.index * 20_000_000);
    }
    let inputs: u64 = lengths.iter().map(|l| u64::from(l[0])).sum();
    assert_eq!(live.throughput.input_tokens, inputs);
    assert_eq!(live.prompt_tokens.checked, 6, "{:?}", live.prompt_tokens);
    assert_eq!(live.prompt_tokens.mismatches, 0, "{:?}", live.prompt_tokens);
    assert_eq!(
        live.prompt_tokens.usual_overhead,
        Some(0),
        "the mock counts words"
    );

    let (ttft, itl) = (2e-3, 1e-3);
    let sc = SimScenario {
        name: "trace".into(),
        seed: 3,
        workload,
        client: serde_json::from_str::<ClientModel>(r#"{"workers": 1, "costs": {}}"#).unwrap(),
        server: heisenbench_model::server::ServerModel {
            time_to_first_token_s: ttft,
            inter_token_latency_s: itl,
            ..Default::default()
        },
        slo: None,
    };
    sc.validate().unwrap();
    let sim = heisenbench_sim::engine::Simulation::new(sc).run();
    assert_eq!(sim.counts.completed, 6);
    let outputs: u32 = lengths.iter().map(|l| l[1]).sum();
    let expected = ttft + itl * f64::from(outputs - 6) / 6.0;
    assert!(
        (sim.e2e.server.mean_s - expected).abs() < 1e-8,
        "{} against {expected}",
        sim.e2e.server.mean_s
    );
}
