//! The GI/G/1 lattice solution (`heisenbench_model::gig1`) against the simulator's Lindley
//! recursion over the exact-models grid: Erlang k in {1, 2, 4, 21, 100}, rho in {0.5, 0.8,
//! 0.9, 0.95}, six services. Prints one row per case (model, simulation with its 95 %
//! interval, whether the model is inside 3 half-widths plus its lattice error) and the
//! lattice's time per evaluation.
//!
//! `cargo run --release -p heisenbench-sim --example lattice_grid [customers]`

use std::time::Instant;

use heisenbench_model::gig1::Gig1;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::service::Service;
use heisenbench_model::units::Quantile;
use heisenbench_sim::textbook::{Gaps, QueueSpec, lindley};

fn main() {
    let customers: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let services = [
        ("D", Service::deterministic(1.0).unwrap()),
        ("M", Service::exponential(1.0).unwrap()),
        ("G0.5", Service::gamma(1.0, 0.5).unwrap()),
        ("G4", Service::gamma(1.0, 4.0).unwrap()),
        ("LN1", Service::lognormal(1.0, 1.0).unwrap()),
        ("LN4", Service::lognormal(1.0, 4.0).unwrap()),
    ];
    println!("case | mean: lattice / sim +- ci | p99: lattice / sim +- ci | inside | lattice ms");
    let (mut inside, mut total, mut times) = (0, 0, Vec::new());
    for k in [1u32, 2, 4, 21, 100] {
        for rho in [0.5, 0.8, 0.9, 0.95] {
            for (name, s) in &services {
                let t0 = Instant::now();
                let m = Gig1::erlang(k, rho, 1, s.clone()).unwrap();
                let (mean, p99) = (m.wait_mean_s(), m.wait_quantile_s(Quantile::P99));
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                times.push(ms);
                let sim = lindley(&QueueSpec {
                    rate_per_s: rho,
                    gaps: Gaps::Gamma {
                        shape: f64::from(k),
                    },
                    service: s.clone(),
                    customers,
                    warmup: customers / 10,
                    batches: 32,
                    seed: 5,
                });
                let err = m.wait_mean_error_s().unwrap_or(0.0);
                let sp99 = sim.wait_quantiles_s[2].1;
                let ok = sim.wait_mean_s.covers(mean, 3.0, err + 1e-9)
                    && sp99.covers(p99, 3.0, 0.002 * p99 + err + 1e-9);
                inside += usize::from(ok);
                total += 1;
                println!(
                    "E_{k}/{name}/1 rho {rho} | {mean:.4} / {:.4} +- {:.4} | {p99:.3} / {:.3} +- {:.3} | {} | {ms:.1}",
                    sim.wait_mean_s.value,
                    sim.wait_mean_s.ci95,
                    sp99.value,
                    sp99.ci95,
                    if ok { "yes" } else { "NO" }
                );
            }
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{inside} of {total} inside; lattice time per case: median {:.1} ms, max {:.1} ms",
        times[times.len() / 2],
        times[times.len() - 1]
    );
}
