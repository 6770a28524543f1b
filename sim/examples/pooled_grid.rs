//! Pooled loops (one FIFO queue, c servers): the model `plan --policy pooled` uses against
//! the simulator's Kiefer-Wolfowitz recursion. Spread events (bursts of one): M/G/c (M/M/c
//! and M/D/c exact, otherwise Lee-Longton with an exponential tail); bursts of 20:
//! M^X/G/c as one loop c times as fast. Prints the relative error of the mean and p99 per
//! case and, per model, the range of errors.
//!
//! `cargo run --release -p heisenbench-sim --example pooled_grid [customers [SERVICE [BURST]]]`
//! (SERVICE one of D, M, G0.5, G4, LN1, LN4 to run only that service; BURST 1 or 20)

use heisenbench_model::mmc::{Mgc, PooledBursts};
use heisenbench_model::queue::WaitModel;
use heisenbench_model::service::Service;
use heisenbench_model::units::Quantile;
use heisenbench_sim::textbook::{BurstSpec, Gaps, pooled_bursts};

fn main() {
    let customers: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    let services = [
        ("D", Service::deterministic(1.0).unwrap()),
        ("M", Service::exponential(1.0).unwrap()),
        ("G0.5", Service::gamma(1.0, 0.5).unwrap()),
        ("G4", Service::gamma(1.0, 4.0).unwrap()),
        ("LN1", Service::lognormal(1.0, 1.0).unwrap()),
        ("LN4", Service::lognormal(1.0, 4.0).unwrap()),
    ];
    let only = std::env::args().nth(2);
    let only_burst: Option<u32> = std::env::args().nth(3).and_then(|a| a.parse().ok());
    println!("case | mean: model / sim +- ci (error) | p99: model / sim +- ci (error)");
    for burst in [1u32, 20] {
        if only_burst.is_some_and(|b| b != burst) {
            continue;
        }
        let mut errs: Vec<(f64, f64)> = Vec::new();
        for c in [2u32, 4, 10, 21] {
            for rho in [0.5, 0.8, 0.9, 0.95] {
                for (name, s) in &services {
                    if only.as_deref().is_some_and(|o| o != *name) {
                        continue;
                    }
                    let burst_rate = rho * f64::from(c) / f64::from(burst);
                    let m: Box<dyn WaitModel> = if burst == 1 {
                        Box::new(Mgc::new(burst_rate, c, s.clone()).unwrap())
                    } else {
                        Box::new(PooledBursts::new(burst_rate, burst, c, s.clone()).unwrap())
                    };
                    let sim = pooled_bursts(
                        &BurstSpec {
                            burst_rate_per_s: burst_rate,
                            gaps: Gaps::Poisson,
                            burst,
                            service: s.clone(),
                            bursts: customers / u64::from(burst),
                            seed: 3,
                        },
                        c,
                    );
                    let (mean, p99) = (m.wait_mean_s(), m.wait_quantile_s(Quantile::P99));
                    let (sm, sp) = (sim.wait_mean_s, sim.wait_quantiles_s[2].1);
                    let (em, ep) = (mean / sm.value - 1.0, p99 / sp.value - 1.0);
                    errs.push((em, ep));
                    println!(
                        "{}/{name}/{c} rho {rho} | {mean:.4} / {:.4} +- {:.4} ({:+.1} %) | {p99:.3} / {:.3} +- {:.3} ({:+.1} %)",
                        m.name(),
                        sm.value,
                        sm.ci95,
                        em * 100.0,
                        sp.value,
                        sp.ci95,
                        ep * 100.0
                    );
                }
            }
        }
        let range = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<f64> = errs.iter().map(f).filter(|e| e.is_finite()).collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (lo * 100.0, hi * 100.0)
        };
        let (ml, mh) = range(|e| e.0);
        let (pl, ph) = range(|e| e.1);
        println!(
            "bursts of {burst}: mean error {ml:+.1} % .. {mh:+.1} %, p99 error {pl:+.1} % .. {ph:+.1} % over {} cases",
            errs.len()
        );
    }
}
