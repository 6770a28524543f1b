//! The wait of a job that goes ahead of the queue: non-preemptive priority on one loop.
//!
//! heisenbench's shard lets a due send go before the chunk work already queued (a chunk
//! handler steps aside when it sees a send due), so a send waits only for the job in
//! service when it is due, never for the queue behind it. That is the high class of a
//! non-preemptive priority M/G/1 queue whose own load is negligible: with Poisson due
//! times (PASTA) the loop is busy with probability rho, and the work left of the job in
//! service is its service's equilibrium residual R,
//!
//! ```text
//! P(W > t) = rho P(R > t),   P(R > t) = (1 / E[S]) * integral_t^inf P(S > u) du.
//! ```
//!
//! For a deterministic job D, P(R > t) = max(0, 1 - t / D); for an exponential one it is
//! the service's own tail. A FIFO loop's send would instead wait for the whole queue (the
//! M/G/1 wait of [`crate::mg1`]), which is what a client without this priority sees.

use crate::service::Service;

/// P(W > t) for a job that waits only for the job in service, on a loop busy `rho` of the
/// time with jobs of `service`.
pub fn ahead_of_queue_tail(rho: f64, service: &Service, t: f64) -> f64 {
    if t <= 0.0 {
        return rho.clamp(0.0, 1.0);
    }
    let mean = service.mean_s();
    if mean <= 0.0 {
        return 0.0;
    }
    if service.scv() == 0.0 {
        // Deterministic: the residual is uniform on [0, D].
        return rho.clamp(0.0, 1.0) * (1.0 - t / mean).max(0.0);
    }
    // The residual's tail by the trapezoid rule over the service's survival function,
    // out to where it is negligible (50 means: every service here has a finite variance).
    let end = t.max(mean * 50.0);
    let steps = 4_000;
    let h = (end - t) / f64::from(steps);
    let survival = |u: f64| 1.0 - service.cdf(u);
    let mut area = 0.5 * (survival(t) + survival(end));
    for i in 1..steps {
        area += survival(t + h * f64::from(i));
    }
    rho.clamp(0.0, 1.0) * (area * h / mean).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed forms: a deterministic job's residual is uniform, an exponential one's
    /// is the service itself.
    #[test]
    fn closed_forms_of_the_residual() {
        let d = Service::deterministic(1e-3).unwrap();
        for t in [0.0, 0.25e-3, 0.5e-3, 0.9e-3, 1.5e-3] {
            let exact = 0.6 * (1.0f64 - t / 1e-3).max(0.0);
            let got = ahead_of_queue_tail(0.6, &d, t);
            assert!((got - exact).abs() < 2e-3, "t {t}: {got} against {exact}");
        }
        let e = Service::exponential(2e-3).unwrap();
        for t in [0.5e-3, 2e-3, 6e-3] {
            let exact = 0.5 * (-t / 2e-3f64).exp();
            let got = ahead_of_queue_tail(0.5, &e, t);
            assert!(
                (got - exact).abs() < 1e-3 * exact.max(1e-3) + 1e-5,
                "t {t}: {got} against {exact}"
            );
        }
    }
}
