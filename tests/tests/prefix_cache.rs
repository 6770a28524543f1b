//! One prefix-cache law, three views: the same shared-prefix workload under one seed, run
//! live against the mock's cache, simulated against the simulator's server with the same
//! law, and predicted by Che's approximation.

use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_model::prefix_cache::predict;
use heisenbench_model::scenario::{
    Arrivals, ClientModel, Lengths, Popularity, SharedPrefix, Stop, Workload,
};
use heisenbench_sim::engine::Simulation;
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
    }
}

#[test]
fn the_mock_the_simulator_and_che_agree_on_the_hit_rate() {
    let mock_cfg = MockConfig {
        port: 0,
        max_num_seqs: 10_000,
        enable_kvcache: true,
        kv_cache_size: 400,
        block_size: 16,
        ..MockConfig::default()
    };
    let law = mock_cfg.law();
    let m = MockServer::start(mock_cfg).unwrap();
    let cfg = RunConfig {
        seed: 11,
        timeout_s: Some(10.0),
        ..RunConfig::streaming("prefix", workload(), &m.url(), "heisenbench-mock")
    };
    let live = run(&cfg, &RunOptions::default()).unwrap();
    assert_eq!(live.accounting.completed, REQUESTS);
    let measured = live.prefix_cache;

    let sc = SimScenario {
        name: "prefix".into(),
        seed: 11,
        workload: workload(),
        client: serde_json::from_str::<ClientModel>(r#"{"workers": 1, "costs": {}}"#).unwrap(),
        server: law.clone(),
        slo: None,
    };
    sc.validate().unwrap();
    let sim = Simulation::new(sc).run();
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
    let p = workload().prefix.unwrap();
    let che = predict(law.prefix_cache.unwrap(), &p.probabilities(), 128, 32)
        .unwrap()
        .token_hit_rate;
    let simulated = cached as f64 / queried as f64;
    assert!(
        (che - simulated).abs() < 0.03,
        "Che {che:.4}, simulated {simulated:.4}"
    );
}
