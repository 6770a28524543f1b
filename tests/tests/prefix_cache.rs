//! One prefix-cache law, three views: the same shared-prefix workload under one seed, run
//! live against the mock's cache, simulated against the simulator's server with the same
//! law, and predicted by Che's approximation.

use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::result::RunReport;
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_model::prefix_cache::{CachePrediction, predict};
use heisenbench_model::scenario::{
    Arrivals, ClientModel, Lengths, Popularity, SharedPrefix, Stop, Workload,
};
use heisenbench_model::server::ServerModel;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::report::SimReport;
use heisenbench_sim::scenario::SimScenario;

const REQUESTS: u64 = 2000;

fn workload() -> Workload {
    Workload {
        // 2 ms apart and answered at once: requests reach the server one at a time, in
        // the schedule's order, in both views.
        arrivals: Arrivals::Constant { rate_per_s: 500.0 },
        stop: Stop::Count { requests: REQUESTS },
        input_tokens: Lengths::Fixed { tokens: 32 },
        output_tokens: Lengths::Fixed { tokens: 2 },
        prefix: Some(SharedPrefix {
            groups: 100,
            tokens: 128,
            popularity: Popularity::Zipf { s: 1.0 },
        }),
        dataset: None,
    }
}

/// The workload run live against a mock of `mock_cfg` (every request completed) and
/// simulated against a server of the mock's law, under one seed; and the law.
fn live_and_simulated(name: &str, mock_cfg: MockConfig) -> (RunReport, SimReport, ServerModel) {
    let (live, sim) = views(name, workload(), 11, mock_cfg, |_| {});
    let law = sim.scenario.server.clone();
    (live, sim, law)
}

/// `workload` under `seed` run live against a mock of `mock_cfg` (its config first changed
/// by `adjust`; every scheduled request must complete) and simulated against a server of
/// the mock's law.
fn views(
    name: &str,
    workload: Workload,
    seed: u64,
    mock_cfg: MockConfig,
    adjust: impl FnOnce(&mut RunConfig),
) -> (RunReport, SimReport) {
    let law = mock_cfg.law();
    let m = MockServer::start(mock_cfg).unwrap();
    let mut cfg = RunConfig {
        seed,
        timeout_s: Some(10.0),
        ..RunConfig::streaming(name, workload.clone(), &m.url(), "heisenbench-mock")
    };
    adjust(&mut cfg);
    let cfg = cfg.checked().unwrap();
    let live = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    assert_eq!(
        live.accounting.completed,
        workload.expected_requests().unwrap() as u64,
        "{:?}",
        live.accounting
    );
    let sc = SimScenario {
        name: name.into(),
        seed,
        workload,
        client: serde_json::from_str::<ClientModel>(r#"{"workers": 1, "costs": {}}"#).unwrap(),
        server: law,
        slo: None,
    };
    sc.validate().unwrap();
    (live, Simulation::new(sc).run())
}

/// A mock whose prefix cache of 16-token blocks is too large to evict anything here.
fn large_cache() -> MockConfig {
    MockConfig {
        port: 0,
        max_num_seqs: 10_000,
        enable_kvcache: true,
        kv_cache_size: 10_000,
        block_size: 16,
        max_model_len: 4096,
        ..MockConfig::default()
    }
}

/// Che's prediction for the workload's prefixes (128 tokens, 32 of each request's own) in
/// the law's cache.
fn che(law: &ServerModel) -> CachePrediction {
    let p = workload().prefix.unwrap();
    predict(law.prefix_cache.unwrap(), &p.probabilities(), 128, 32).unwrap()
}

#[test]
fn the_mock_the_simulator_and_che_agree_on_the_hit_rate() {
    let (live, sim, law) = live_and_simulated(
        "prefix",
        MockConfig {
            port: 0,
            max_num_seqs: 10_000,
            enable_kvcache: true,
            kv_cache_size: 400,
            block_size: 16,
            ..MockConfig::default()
        },
    );
    let measured = live.prefix_cache;
    let (queried, cached) = (
        sim.counts.prefix_cache_queried_tokens,
        sim.counts.prefix_cache_cached_tokens,
    );
    assert_eq!(queried, REQUESTS * 160);
    assert_eq!(measured.prompt_tokens, queried);
    // The same groups for the same request indices, the same law, the same order: the
    // same hits, up to requests the mock happened to take out of order (none at 2 ms
    // apart; a swap moves at most a few prefixes' 128 tokens).
    let diff = measured.cached_tokens.abs_diff(cached);
    assert!(
        diff <= 4 * 128,
        "mock {} against sim {cached}",
        measured.cached_tokens
    );
    // Che's steady state, against a run that starts cold: within 0.03 (the run's own
    // noise over 2,000 requests is about 0.011, one standard error).
    let che = che(&law).token_hit_rate;
    let simulated = cached as f64 / queried as f64;
    assert!(
        (che - simulated).abs() < 0.03,
        "Che {che:.4}, simulated {simulated:.4}"
    );
}

/// The TTFT the cache gives, three ways, when prefill is paid per token the cache did not
/// serve (1 ms + 20 us a token, so a 160-token prompt costs 4.2 ms uncached): the
/// simulator's mean is the law applied to its own uncached tokens (exact), Che's
/// prediction of the hit rate gives it within 5 %, and the mock's, measured from the
/// actual send, lies above it by the wire and the mock's timer (late, never early: within
/// 0 and 1.5 ms, as in the server-view tests).
#[test]
fn the_ttft_under_the_cache_agrees_in_the_three_views() {
    let (overhead, per_token) = (1e-3, 20e-6);
    let (live, sim, law) = live_and_simulated(
        "prefix ttft",
        MockConfig {
            port: 0,
            max_num_seqs: 10_000,
            enable_kvcache: true,
            kv_cache_size: 400,
            block_size: 16,
            prefill_overhead: std::time::Duration::from_secs_f64(overhead),
            prefill_time_per_token: std::time::Duration::from_secs_f64(per_token),
            ..MockConfig::default()
        },
    );
    let uncached = (sim.counts.prefix_cache_queried_tokens - sim.counts.prefix_cache_cached_tokens)
        as f64
        / REQUESTS as f64;
    let simulated = sim.ttft.server.mean_s;
    assert!(
        (simulated - (overhead + per_token * uncached)).abs() < 1e-8,
        "simulated {simulated} against the law's {}",
        overhead + per_token * uncached
    );

    let predicted = che(&law).prefill_ttft_mean_s(160, overhead, per_token);
    assert!(
        (predicted - simulated).abs() <= 0.05 * simulated,
        "predicted {predicted} against simulated {simulated}"
    );
    assert!(
        simulated < overhead + per_token * 160.0 - 1e-3,
        "the cache saves time"
    );

    let measured = live.ttft.from_actual.mean_s;
    assert!(
        measured >= simulated - 1e-4 && measured <= simulated + 1.5e-3,
        "measured {measured} against simulated {simulated}"
    );
    eprintln!(
        "TTFT: predicted {:.3} ms, simulated {:.3} ms, measured {:.3} ms",
        predicted * 1e3,
        simulated * 1e3,
        measured * 1e3
    );
}

/// A mooncake trace's prefix blocks, replayed live against the mock's cache and simulated
/// against the same law, against a count made by hand. Every request begins with block 0,
/// then one of three blocks (by its index modulo 3), then a block of its own: with a cache
/// too large to evict, request i finds block 0 if i >= 1 and its second block if i >= 3,
/// 512 tokens each, and never its own.
#[test]
fn a_traces_prefix_blocks_are_shared_in_the_mock_and_the_simulator() {
    use heisenbench_model::scenario::{WorkloadFlags, parse_trace};
    const N: u64 = 30;
    let text: String = (0..N)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 1300, \"output_length\": 2, \"hash_ids\": [0, {}, {}]}}\n",
                1000 + 5 * i,
                1 + i % 3,
                10 + i
            )
        })
        .collect();
    let mut workload = workload();
    workload.prefix = None;
    workload
        .apply(&WorkloadFlags {
            trace: Some(parse_trace(&text).unwrap()),
            ..WorkloadFlags::default()
        })
        .unwrap();
    let (live, sim) = views("blocks", workload, 5, large_cache(), |_| {});

    let by_hand = 512 * (N - 1) + 512 * (N - 3);
    assert_eq!(live.prefix_cache.prompt_tokens, 1300 * N);
    assert_eq!(sim.counts.prefix_cache_queried_tokens, 1300 * N);
    assert_eq!(live.prefix_cache.cached_tokens, by_hand);
    assert_eq!(sim.counts.prefix_cache_cached_tokens, by_hand);
}

/// Conversations: two users, three turns each, twice over. Turn t re-sends the turns before
/// it with the server's replies, so its prompt is 20, 48 and 76 tokens (20 a message, 8 a
/// reply) and a prefix cache of 16-token blocks finds the previous turn's prompt: 16 tokens
/// at turn 2, 48 at turn 3; 64 a conversation, 256 in all. The mock's cache (the replies as
/// it wrote them) and the simulator's (the history named by position) find exactly that,
/// and both give the TTFT of every turn.
#[test]
fn conversations_reuse_their_history_in_the_mock_and_the_simulator() {
    let mut workload = workload();
    workload.prefix = None;
    workload.arrivals = Arrivals::Closed {
        users: 2,
        think_s: 0.0,
        turns: 3,
    };
    workload.stop = Stop::Count { requests: 12 };
    workload.input_tokens = Lengths::Fixed { tokens: 20 };
    workload.output_tokens = Lengths::Fixed { tokens: 8 };
    let (live, sim) = views("turns", workload, 2, large_cache(), |_| {});

    let prompts = 4 * (20 + 48 + 76);
    assert_eq!(live.throughput.input_tokens, prompts);
    assert_eq!(sim.counts.prefix_cache_queried_tokens, prompts);
    assert_eq!(
        live.prefix_cache.prompt_tokens, prompts,
        "the mock counted each turn's history"
    );
    assert_eq!(live.prompt_tokens.mismatches, 0, "{:?}", live.prompt_tokens);
    assert_eq!(sim.counts.prefix_cache_cached_tokens, 256);
    assert_eq!(live.prefix_cache.cached_tokens, 256);
    assert_eq!(live.ttft_by_turn.len(), 3);
    assert!(live.ttft_by_turn.iter().all(|d| d.count == 4));
    assert_eq!(sim.ttft_by_turn.len(), 3);
    assert!(sim.ttft_by_turn.iter().all(|t| t.from_intended.count == 4));
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
    use heisenbench_live::openai::dataset::read_dataset;
    use heisenbench_model::dataset::{Dataset, DatasetFormat};

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
    let entries = ds.entries.clone();
    let sent_inputs: u64 = (0..100u64)
        .map(|i| u64::from(ds.entries[(i % 40) as usize][0]))
        .sum();
    let sent_outputs: u64 = (0..100u64)
        .map(|i| u64::from(ds.entries[(i % 40) as usize][1]))
        .sum();

    let (live, sim) = views("dataset", workload, seed, large_cache(), |cfg| {
        cfg.prompts.dataset = prompts;
    });
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(live.throughput.input_tokens, sent_inputs);
    assert_eq!(live.throughput.output_tokens, sent_outputs);
    assert_eq!(live.prompt_tokens.mismatches, 0, "{:?}", live.prompt_tokens);
    assert_eq!(sim.counts.prefix_cache_queried_tokens, sent_inputs);
    // The second round's 60 requests take entries 0..40 and 0..20 of the pool; each finds
    // floor((n - 1) / 16) blocks of its n-token prompt.
    let by_hand: u64 = (40..100u64)
        .map(|i| u64::from((entries[(i % 40) as usize][0] - 1) / 16 * 16))
        .sum();
    assert_eq!(sim.counts.prefix_cache_cached_tokens, by_hand);
    assert_eq!(live.prefix_cache.cached_tokens, by_hand);
}
