//! Throughput of the two engines on this machine, single-threaded:
//! `cargo run --release -p heisenbench-sim --example throughput`.
//! The numbers go into bench/RESULTS.md by hand, with the date and the machine.

use std::time::Instant;

use heisenbench_model::service::Service;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::scenario::preset;
use heisenbench_sim::textbook::{Gaps, QueueSpec, lindley};

fn best_of<T>(runs: usize, mut f: impl FnMut() -> (u64, T)) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            let (n, out) = f();
            std::hint::black_box(out);
            n as f64 / t.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

fn main() {
    for name in ["paper-1000", "paper-5000"] {
        for sc in preset(name, 20.0, 1).expect("presets are valid") {
            let label = sc.name.clone();
            let rate = best_of(3, || {
                let r = Simulation::new(sc.clone()).run();
                (r.counts.client_events, r.counts.completed)
            });
            println!("engine  {label:<28} {:>7.1} M client events/s", rate / 1e6);
        }
    }
    let cases = [
        ("M/D/1", Gaps::Poisson, Service::deterministic(1.0).unwrap()),
        ("M/M/1", Gaps::Poisson, Service::exponential(1.0).unwrap()),
        (
            "M/G/1 gamma scv 0.5",
            Gaps::Poisson,
            Service::gamma(1.0, 0.5).unwrap(),
        ),
        (
            "M/G/1 lognormal scv 1",
            Gaps::Poisson,
            Service::lognormal(1.0, 1.0).unwrap(),
        ),
        (
            "D/D/1",
            Gaps::Constant,
            Service::deterministic(1.0).unwrap(),
        ),
    ];
    for (label, gaps, service) in cases {
        let spec = QueueSpec {
            rate_per_s: 0.8,
            gaps,
            service,
            customers: 20_000_000,
            warmup: 0,
            batches: 32,
            seed: 1,
        };
        let rate = best_of(3, || (spec.customers, lindley(&spec).wait_mean_s.value));
        println!("lindley {label:<28} {:>7.1} M customers/s", rate / 1e6);
    }
}
