//! The GI/G/1 lattice solution (`heisenbench_model::gig1`) against the simulator's Lindley
//! recursion over the exact-models grid: Erlang k in {1, 2, 4, 21, 100}, rho in {0.5, 0.8,
//! 0.9, 0.95}, six services. Prints one row per case (model, simulation with its 95 %
//! interval, whether the model is inside 3 half-widths plus its lattice error) and the
//! lattice's time per evaluation.
//!
//! `cargo run --release -p heisenbench-sim --example lattice_grid [customers] [--precise]
//! [--burst N] [--k K,K...] [--rho R,R...] [--cap EVENTS]`
//!
//! With `--burst N`, each arrival brings N events at once (E_k^N/G/1, rho counted in
//! events), against the simulator's Lindley recursion over bursts; waits are per event.
//!
//! With `--precise`, a case whose interval is wider than 1 % of the simulated mean or 2 %
//! of its p99 is simulated again with as many more customers as the square of the excess
//! asks (times 1.3; at most `--cap`, default 2e9), until both are that narrow; each row
//! says how many it took. `--k` and `--rho` run part of the grid (to spread it over cores).

use std::time::Instant;

use heisenbench_model::gig1::Gig1;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::service::Service;
use heisenbench_model::units::Quantile;
use heisenbench_sim::textbook::{BurstSpec, Gaps, QueueSpec, lindley, lindley_bursts};

fn main() {
    let customers: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let args: Vec<String> = std::env::args().collect();
    let precise = args.iter().any(|a| a == "--precise");
    let list = |flag: &str| -> Option<Vec<f64>> {
        let i = args.iter().position(|a| a == flag)?;
        args.get(i + 1)?
            .split(',')
            .map(|x| x.parse().ok())
            .collect()
    };
    let ks: Vec<u32> = list("--k").map_or(vec![1, 2, 4, 21, 100], |v| {
        v.into_iter().map(|k| k as u32).collect()
    });
    let rhos = list("--rho").unwrap_or(vec![0.5, 0.8, 0.9, 0.95]);
    let cap = list("--cap").map_or(2e9, |v| v[0]) as u64;
    let burst: u32 = args
        .iter()
        .position(|a| a == "--burst")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let services = [
        ("D", Service::deterministic(1.0).unwrap()),
        ("M", Service::exponential(1.0).unwrap()),
        ("G0.5", Service::gamma(1.0, 0.5).unwrap()),
        ("G4", Service::gamma(1.0, 4.0).unwrap()),
        ("LN1", Service::lognormal(1.0, 1.0).unwrap()),
        ("LN4", Service::lognormal(1.0, 4.0).unwrap()),
    ];
    println!(
        "case | mean: lattice / sim +- ci | p99: lattice / sim +- ci | inside | lattice ms | customers"
    );
    let (mut inside, mut total, mut times) = (0, 0, Vec::new());
    for &k in &ks {
        for &rho in &rhos {
            for (name, s) in &services {
                let t0 = Instant::now();
                let bursts_per_s = rho / f64::from(burst);
                let m = Gig1::erlang(k, bursts_per_s, burst, s.clone()).unwrap();
                let (mean, p99) = (m.wait_mean_s(), m.wait_quantile_s(Quantile::P99));
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                times.push(ms);
                let mut n = customers;
                let sim = loop {
                    let sim = if burst == 1 {
                        lindley(&QueueSpec {
                            rate_per_s: rho,
                            gaps: Gaps::Gamma {
                                shape: f64::from(k),
                            },
                            service: s.clone(),
                            customers: n,
                            warmup: n / 10,
                            batches: 32,
                            seed: 5,
                        })
                    } else {
                        lindley_bursts(&BurstSpec {
                            burst_rate_per_s: bursts_per_s,
                            gaps: Gaps::Gamma {
                                shape: f64::from(k),
                            },
                            burst,
                            service: s.clone(),
                            bursts: n / u64::from(burst),
                            seed: 5,
                        })
                    };
                    let (mean, p99) = (sim.wait_mean_s, sim.wait_quantiles_s[2].1);
                    let excess = (mean.ci95 / (0.01 * mean.value))
                        .max(p99.ci95 / (0.02 * p99.value))
                        .max(0.0);
                    if !precise || excess <= 1.0 || n >= cap {
                        break sim;
                    }
                    n = ((n as f64 * excess * excess * 1.3) as u64).min(cap);
                };
                let err = m.wait_mean_error_s().unwrap_or(0.0);
                let sp99 = sim.wait_quantiles_s[2].1;
                let ok = sim.wait_mean_s.covers(mean, 3.0, err + 1e-9)
                    && sp99.covers(p99, 3.0, 0.002 * p99 + err + 1e-9);
                inside += usize::from(ok);
                total += 1;
                println!(
                    "E_{k}{}/{name}/1 rho {rho} | {mean:.4} / {:.4} +- {:.4} | {p99:.3} / {:.3} +- {:.3} | {} | {ms:.1} | {n}",
                    if burst == 1 {
                        String::new()
                    } else {
                        format!("^{burst}")
                    },
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
