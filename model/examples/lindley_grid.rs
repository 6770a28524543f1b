//! Times the GI/G/1 lattice solver on the cases of the exact-models grid and prints its
//! numbers next to the closed forms where they exist.
//!
//! `cargo run --release -p heisenbench-model --example lindley_grid`

use std::time::Instant;

use heisenbench_model::lindley::LindleyGrid;
use heisenbench_model::service::Service;

fn main() {
    let cases: Vec<(String, Service, Service)> = vec![
        (
            "E_21/D/1 rho 0.952".into(),
            Service::gamma(21.0 / 20.0, 1.0 / 21.0).unwrap(),
            Service::deterministic(1.0).unwrap(),
        ),
        (
            "E_4/D/1 rho 0.9".into(),
            Service::gamma(1.0 / 0.9, 0.25).unwrap(),
            Service::deterministic(1.0).unwrap(),
        ),
        (
            "M/D/1 rho 0.9".into(),
            Service::exponential(1.0 / 0.9).unwrap(),
            Service::deterministic(1.0).unwrap(),
        ),
        (
            "M/M/1 rho 0.95".into(),
            Service::exponential(1.0 / 0.95).unwrap(),
            Service::exponential(1.0).unwrap(),
        ),
        (
            "E_2/LN4/1 rho 0.8".into(),
            Service::gamma(1.25, 0.5).unwrap(),
            Service::lognormal(1.0, 4.0).unwrap(),
        ),
        (
            "E_100/G0.5/1 rho 0.95".into(),
            Service::gamma(1.0 / 0.95, 0.01).unwrap(),
            Service::gamma(1.0, 0.5).unwrap(),
        ),
    ];
    for (name, a, s) in cases {
        let t0 = Instant::now();
        let g = LindleyGrid::solve(&a, &s).unwrap();
        let dt = t0.elapsed();
        let q = |p: f64| {
            let (mut lo, mut hi) = (0.0, 1.0);
            while g.tail(hi) > 1.0 - p {
                hi *= 2.0;
            }
            for _ in 0..100 {
                let m = 0.5 * (lo + hi);
                if g.tail(m) > 1.0 - p { lo = m } else { hi = m }
            }
            hi
        };
        println!(
            "{name:<24} mean {:.4} (+-{:.1e}) P(wait) {:.4} p99 {:.3} p99.9 {:.3}  gap {:.1e} h {:.4}  {:.1} ms",
            g.mean_s(),
            g.mean_error_s(),
            g.p_wait(),
            q(0.99),
            q(0.999),
            g.iteration_gap(),
            g.step_s(),
            dt.as_secs_f64() * 1e3
        );
    }
}
