//! One scenario, one seed: a file that names no seed gets the same one in `sim` and `run`,
//! and so the same schedule.

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
