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

/// A dataset drawn in `run` and in `sim` under one seed: the same requests get the same
/// entries. A JSONL of 40 prompts of distinct random words (entry e has 20 + e words and
/// asks for 1 + e % 5 tokens) serves 100 requests, so the pool of 40 is taken whole and
/// then again: the mock's prefix cache finds the second round's prompts (every full block
/// but the one holding the last token), and the simulator's cache, naming a request's
/// tokens by its entry, finds the same; the prompt and output tokens sent match the
/// simulator's, and the mock's usage confirms each request's prompt.
#[test]
fn a_dataset_gives_the_same_requests_to_sim_and_run() {
    use heisenbench_live::generator::{RunOptions, run};
    use heisenbench_live::mock::MockServer;
    use heisenbench_live::mock::config::MockConfig;
    use heisenbench_live::openai::dataset::read_dataset;
    use heisenbench_model::dataset::{Dataset, DatasetFormat};
    use heisenbench_model::scenario::{Arrivals, ClientModel, Lengths, Stop, Workload};

    let dir = std::env::temp_dir().join(format!("hb-seeds-dataset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("prompts.jsonl");
    let text: String = (0..40u32)
        .map(|e| {
            let words: Vec<String> = (0..20 + e).map(|k| format!("w{e}x{k}")).collect();
            format!(
                "{{\"prompt\": \"{}\", \"output_tokens\": {}}}\n",
                words.join(" "),
                1 + e % 5
            )
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    let mut workload = Workload {
        arrivals: Arrivals::Constant { rate_per_s: 500.0 },
        stop: Stop::Count { requests: 100 },
        input_tokens: Lengths::Fixed { tokens: 1 },
        output_tokens: Lengths::Fixed { tokens: 1 },
        prefix: None,
        dataset: Some(Dataset::new(path.clone(), DatasetFormat::Auto)),
    };
    let seed = 9;
    let ds = workload.dataset.as_mut().unwrap();
    let prompts = read_dataset(ds, None, seed, Some(100.0)).unwrap();
    assert_eq!(ds.entries.len(), 40, "every entry, then again");
    let sent_inputs: u64 = (0..100u64)
        .map(|i| u64::from(ds.entries[(i % 40) as usize][0]))
        .sum();
    let sent_outputs: u64 = (0..100u64)
        .map(|i| u64::from(ds.entries[(i % 40) as usize][1]))
        .sum();

    let mock_cfg = MockConfig {
        port: 0,
        max_num_seqs: 10_000,
        enable_kvcache: true,
        kv_cache_size: 10_000,
        block_size: 16,
        ..MockConfig::default()
    };
    let law = mock_cfg.law();
    let m = MockServer::start(mock_cfg).unwrap();
    let mut cfg = RunConfig {
        seed,
        timeout_s: Some(10.0),
        ..RunConfig::streaming("dataset", workload.clone(), &m.url(), "heisenbench-mock")
    };
    cfg.prompts.dataset = prompts;
    cfg.validate().unwrap();
    cfg.check_read().unwrap();
    let live = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(live.accounting.completed, 100, "{:?}", live.accounting);
    assert_eq!(live.throughput.input_tokens, sent_inputs);
    assert_eq!(live.throughput.output_tokens, sent_outputs);
    assert_eq!(live.prompt_tokens.mismatches, 0, "{:?}", live.prompt_tokens);

    let sc = SimScenario {
        name: "dataset".into(),
        seed,
        workload,
        client: serde_json::from_str::<ClientModel>(r#"{"workers": 1, "costs": {}}"#).unwrap(),
        server: law,
        slo: None,
    };
    sc.validate().unwrap();
    let sim = heisenbench_sim::engine::Simulation::new(sc).run();
    assert_eq!(sim.counts.prefix_cache_queried_tokens, sent_inputs);
    // The second round's 60 requests take entries 0..40 and 0..20 of the pool; each finds
    // floor((n - 1) / 16) blocks of its n-token prompt.
    let cfg_entries = &cfg.workload.dataset.as_ref().unwrap().entries;
    let by_hand: u64 = (40..100u64)
        .map(|i| u64::from((cfg_entries[(i % 40) as usize][0] - 1) / 16 * 16))
        .sum();
    assert_eq!(sim.counts.prefix_cache_cached_tokens, by_hand);
    assert_eq!(live.prefix_cache.cached_tokens, by_hand);
}
