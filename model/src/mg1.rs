//! M/G/1: Poisson arrivals, one FIFO server, independent general service times.
//!
//! The paper's model of a single event loop: token events arrive at rate lambda, the loop
//! spends S on each. Pollaczek-Khinchine gives the mean wait from two moments,
//! Takacs the second moment from three; the tail depends on the distribution:
//!
//! | service | tail method |
//! |---|---|
//! | exponential (M/M/1) | exact: P(Wq > t) = rho e^{-(mu - lambda) t} |
//! | deterministic (M/D/1) | exact Erlang series where trusted, Cramer-Lundberg beyond |
//! | gamma, empirical, rho >= 0.5 | Cramer-Lundberg |
//! | gamma, empirical, rho < 0.5 | renewal grid |
//! | lognormal | renewal grid (no exponential moments exist) |
//!
//! Cramer-Lundberg's accuracy, measured against the renewal grid's midpoint (and the
//! exact M/D/1 series): relative error of the p99 and p99.9 below 1e-3 for rho >= 0.5,
//! but 1-3 % at rho = 0.1 and up to 20 % for gamma with SCV 2 at rho = 0.1, where the
//! quantile is a few service times and the other roots of the Lundberg equation still
//! matter. Hence the switch at rho = 0.5, where the grid's bounds are within 0.4 %.

use statrs::function::gamma::ln_gamma;

use crate::error::{ModelError, Result};
use crate::queue::{TailMethod, WaitModel};
use crate::service::Service;
use crate::tail::{CramerLundberg, RenewalGrid};
use crate::units::Quantile;

/// An M/G/1 queue.
///
/// Assumes Poisson arrivals of single customers, one FIFO server, service times
/// independent of each other and of arrivals, and rho = lambda E\[S\] < 1.
#[derive(Debug, Clone)]
pub struct Mg1 {
    lambda: f64,
    service: Service,
    tail: Mg1Tail,
}

#[derive(Debug, Clone)]
enum Mg1Tail {
    Exact {
        decay: f64,
    },
    Deterministic {
        cl: CramerLundberg,
    },
    CramerLundberg(CramerLundberg),
    Grid(Box<RenewalGrid>),
    /// Past [`HEAVY_TRAFFIC_RHO`] without a Cramer-Lundberg tail: the heavy-traffic limit.
    HeavyTraffic,
}

/// Above this utilisation a heavy-tailed M/G/1 takes the heavy-traffic limit instead of the
/// renewal grid, whose cells cannot span waits of 1 / (1 - rho) services any more. Kingman's
/// heavy-traffic theorem (finite E\[S^2\]): W (1 - rho) tends to an exponential, so
/// P(W > t) = rho e^{-rho t / E\[W\]} (P(wait) and the mean exact). At rho 0.995 it is within
/// 2 % of the grid's p50 for lognormal SCV 1 to 4.
pub const HEAVY_TRAFFIC_RHO: f64 = 0.995;

impl Mg1 {
    /// An M/G/1 queue with arrival rate `lambda_per_s` and the given service.
    ///
    /// # Errors
    /// [`ModelError::Invalid`] for a non-positive rate, [`ModelError::Unstable`] when
    /// rho >= 1.
    pub fn new(lambda_per_s: f64, service: Service) -> Result<Self> {
        if !(lambda_per_s.is_finite() && lambda_per_s > 0.0) {
            return Err(ModelError::invalid(
                "arrival rate",
                lambda_per_s,
                "must be > 0 per second",
            ));
        }
        let rho = lambda_per_s * service.mean_s();
        if rho >= 1.0 {
            return Err(ModelError::unstable(rho, 1));
        }
        let tail = match &service {
            Service::Exponential { mean_s } => Mg1Tail::Exact {
                decay: 1.0 / mean_s - lambda_per_s,
            },
            s => match CramerLundberg::solve(lambda_per_s, s) {
                Some(cl) if matches!(s, Service::Deterministic { .. }) => {
                    Mg1Tail::Deterministic { cl }
                }
                Some(cl) if rho >= CL_MIN_RHO => Mg1Tail::CramerLundberg(cl),
                _ if rho > HEAVY_TRAFFIC_RHO => Mg1Tail::HeavyTraffic,
                _ => {
                    let wq = pk_mean(lambda_per_s, &service);
                    Mg1Tail::Grid(Box::new(RenewalGrid::solve(rho, s, wq)))
                }
            },
        };
        Ok(Self {
            lambda: lambda_per_s,
            service,
            tail,
        })
    }

    /// M/M/1 with rates lambda and mu.
    pub fn mm1(lambda_per_s: f64, mu_per_s: f64) -> Result<Self> {
        Self::new(
            lambda_per_s,
            Service::exponential(1.0 / positive("service rate", mu_per_s)?)?,
        )
    }

    /// M/D/1 with rate lambda and constant service `d_s`.
    pub fn md1(lambda_per_s: f64, d_s: f64) -> Result<Self> {
        Self::new(lambda_per_s, Service::deterministic(d_s)?)
    }

    /// The Cramer-Lundberg tail, where the service is light-tailed.
    pub fn cramer_lundberg(&self) -> Option<CramerLundberg> {
        CramerLundberg::solve(self.lambda, &self.service)
    }

    /// The renewal-grid bounds for this queue (computed on demand; O(n^2)).
    pub fn renewal_grid(&self) -> RenewalGrid {
        RenewalGrid::solve(self.rho(), &self.service, self.wait_mean_s())
    }
}

/// Pollaczek-Khinchine: E\[Wq\] = lambda E\[S^2\] / (2 (1 - rho)).
pub fn pk_mean(lambda: f64, service: &Service) -> f64 {
    let m = service.moments();
    let rho = lambda * m.mean_s;
    lambda * m.m2 / (2.0 * (1.0 - rho))
}

fn positive(name: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ModelError::invalid(name, v, "must be > 0"))
    }
}

impl WaitModel for Mg1 {
    fn name(&self) -> &'static str {
        match self.service {
            Service::Exponential { .. } => "M/M/1",
            Service::Deterministic { .. } => "M/D/1",
            _ => "M/G/1",
        }
    }

    fn assumptions(&self) -> &'static str {
        "Poisson arrivals of single events, one FIFO loop, i.i.d. service, rho < 1"
    }

    fn arrival_rate_per_s(&self) -> f64 {
        self.lambda
    }

    fn service(&self) -> &Service {
        &self.service
    }

    /// P-K: lambda E\[S^2\] / (2 (1 - rho)) = rho (1 + Cs^2) E\[S\] / (2 (1 - rho)).
    fn wait_mean_s(&self) -> f64 {
        pk_mean(self.lambda, &self.service)
    }

    /// Takacs: E\[Wq^2\] = 2 E\[Wq\]^2 + lambda E\[S^3\] / (3 (1 - rho)).
    fn wait_m2(&self) -> Option<f64> {
        let wq = self.wait_mean_s();
        Some(2.0 * wq * wq + self.lambda * self.service.moments().m3 / (3.0 * (1.0 - self.rho())))
    }

    /// PASTA: an arrival waits iff the server is busy, P = rho.
    fn p_wait(&self) -> f64 {
        self.rho()
    }

    fn wait_tail(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 1.0;
        }
        match &self.tail {
            Mg1Tail::Exact { decay } => self.rho() * (-decay * t).exp(),
            Mg1Tail::Deterministic { cl } => {
                let d = self.service.mean_s();
                match md1_wait_cdf(self.lambda, d, t) {
                    Some(cdf) => (1.0 - cdf).max(0.0),
                    None => cl.tail(t),
                }
            }
            Mg1Tail::CramerLundberg(cl) => cl.tail(t),
            Mg1Tail::Grid(g) => g.tail(t).min(self.rho()),
            Mg1Tail::HeavyTraffic => {
                let rho = self.rho();
                rho * (-rho * t / self.wait_mean_s()).exp()
            }
        }
    }

    fn tail_method(&self) -> TailMethod {
        match &self.tail {
            Mg1Tail::Exact { .. } => TailMethod::Exact,
            Mg1Tail::Deterministic { .. } => {
                let t = self.wait_quantile_s(Quantile::P999);
                if md1_wait_cdf(self.lambda, self.service.mean_s(), t).is_some() {
                    TailMethod::ErlangSeries
                } else {
                    TailMethod::ErlangSeriesThenCramerLundberg
                }
            }
            Mg1Tail::CramerLundberg(_) => TailMethod::CramerLundberg,
            Mg1Tail::Grid(_) => TailMethod::RenewalGrid,
            Mg1Tail::HeavyTraffic => TailMethod::HeavyTraffic,
        }
    }

    fn wait_quantile_s(&self, q: Quantile) -> f64 {
        match &self.tail {
            Mg1Tail::Exact { decay } => {
                let rho = self.rho();
                if q.tail() >= rho {
                    0.0
                } else {
                    (rho / q.tail()).ln() / decay
                }
            }
            Mg1Tail::CramerLundberg(cl) => cl.quantile(q),
            Mg1Tail::HeavyTraffic => {
                let rho = self.rho();
                if q.tail() >= rho {
                    0.0
                } else {
                    (rho / q.tail()).ln() * self.wait_mean_s() / rho
                }
            }
            _ => {
                let scale = self.wait_mean_s().max(self.service.mean_s());
                crate::tail::quantile_by_bisection(|t| self.wait_tail(t), q, scale)
            }
        }
    }
}

/// Below this utilisation Cramer-Lundberg is not accurate enough for quantiles.
const CL_MIN_RHO: f64 = 0.5;

/// Largest accepted ratio of the series' rounding-error bound to the tail 1 - F(t).
const MD1_TRUST: f64 = 1e-4;

/// The exact M/D/1 waiting-time CDF (Erlang, 1909; Crommelin, 1932), with D = `d_s`:
///
/// P(Wq <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} e^{lambda (t - kD)} (-lambda (t - kD))^k / k!
///
/// The terms alternate in sign and grow like e^{lambda t}, so the sum cancels
/// catastrophically as lambda t grows. Each term is computed in log space, the sum is
/// compensated, and the rounding error is bounded by eps (lambda t + k + 4) sum |term_k|
/// (the relative error of e^x for x carrying relative error eps is x eps). When that bound
/// exceeds 1e-4 of the tail 1 - F(t) the result is not trusted and `None` is returned.
/// In practice the series is trusted up to lambda t of about 25.
pub fn md1_wait_cdf(lambda: f64, d_s: f64, t: f64) -> Option<f64> {
    if t < 0.0 {
        return Some(0.0);
    }
    // Past lambda t of about 25 the cancellation error exceeds the trust bound below; at
    // 60 it always does, so the terms (one per D up to t) need not be summed to find out.
    if lambda * t > 60.0 {
        return None;
    }
    let rho = lambda * d_s;
    let n = (t / d_s).floor() as u64;
    let (mut sum, mut comp, mut abs_sum) = (0.0f64, 0.0f64, 0.0f64);
    for k in 0..=n {
        let x = lambda * (t - k as f64 * d_s);
        let term = if k == 0 {
            x.exp()
        } else if x <= 0.0 {
            0.0
        } else {
            let kf = k as f64;
            let mag = (x + kf * x.ln() - ln_gamma(kf + 1.0)).exp();
            if k % 2 == 0 { mag } else { -mag }
        };
        abs_sum += term.abs();
        // Neumaier summation.
        let s = sum + term;
        comp += if sum.abs() >= term.abs() {
            (sum - s) + term
        } else {
            (term - s) + sum
        };
        sum = s;
    }
    let cdf = ((1.0 - rho) * (sum + comp)).clamp(0.0, 1.0);
    let err = (1.0 - rho) * abs_sum * f64::EPSILON * (lambda * t + n as f64 + 4.0);
    (err <= MD1_TRUST * (1.0 - cdf)).then_some(cdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn textbook_mm1() {
        // E[S] = 1, rho = 0.8: Wq = rho/(mu - lambda) = 4; p99 = ln(0.8/0.01)/0.2 = 21.91.
        let q = Mg1::mm1(0.8, 1.0).unwrap();
        let r = q.report();
        assert!(close(r.wq_mean_s, 4.0, 1e-12));
        assert!(close(r.wq_p99_s, (80.0f64).ln() / 0.2, 1e-12));
        assert!(close(r.wq_p99_s, 21.91, 2e-4));
        // Takacs for M/M/1: E[Wq^2] = 2 rho / (mu - lambda)^2 = 40, sd = sqrt(40 - 16).
        assert!(close(r.wq_sd_s.unwrap(), 24f64.sqrt(), 1e-12));
        assert_eq!(q.tail_method(), TailMethod::Exact);
    }

    #[test]
    fn textbook_md1() {
        // E[S] = 1, rho = 0.9: Wq = rho / (2 (1 - rho)) = 4.5; p99 = 21.90 (textbook).
        let q = Mg1::md1(0.9, 1.0).unwrap();
        let r = q.report();
        assert!(close(r.wq_mean_s, 4.5, 1e-12));
        assert!(close(r.wq_p99_s, 21.90, 5e-4), "p99 {}", r.wq_p99_s);
    }

    #[test]
    fn md1_series_matches_cramer_lundberg_where_both_hold() {
        // Exact series vs the asymptote deep enough in the tail that the other roots'
        // terms have died out but shallow enough that the series is trusted.
        for rho in [0.5, 0.7, 0.9, 0.95] {
            let cl = CramerLundberg::solve(rho, &Service::deterministic(1.0).unwrap()).unwrap();
            for q in [Quantile::P99, Quantile::P999] {
                let t = cl.quantile(q);
                if let Some(cdf) = md1_wait_cdf(rho, 1.0, t) {
                    let exact_tail = 1.0 - cdf;
                    assert!(
                        close(exact_tail, q.tail(), 2e-3),
                        "rho {rho} {q}: {exact_tail}"
                    );
                }
            }
        }
    }

    #[test]
    fn md1_series_known_small_values() {
        // For t < D only the k = 0 term: P(W <= t) = (1 - rho) e^{lambda t}.
        let cdf = md1_wait_cdf(0.5, 1.0, 0.5).unwrap();
        assert!(close(cdf, 0.5 * (0.25f64).exp(), 1e-14));
        // At t = 0 the atom: 1 - rho.
        assert!(close(md1_wait_cdf(0.3, 2.0, 0.0).unwrap(), 0.4, 1e-14));
    }

    #[test]
    fn md1_series_refuses_where_cancellation_wins() {
        assert!(md1_wait_cdf(0.99, 1.0, 400.0).is_none());
    }

    #[test]
    fn unstable_is_an_error_naming_the_fix() {
        let e = Mg1::md1(1000.0, 0.002).unwrap_err();
        match e {
            ModelError::Unstable {
                rho,
                servers_needed,
                ..
            } => {
                assert!(close(rho, 2.0, 1e-12));
                assert_eq!(servers_needed, 3);
            }
            other => panic!("{other:?}"),
        }
        assert!(Mg1::md1(1.0, 1.0).is_err());
    }

    #[test]
    fn gamma_cramer_lundberg_agrees_with_renewal_grid() {
        for (rho, scv) in [(0.5, 0.5), (0.8, 2.0), (0.9, 0.25)] {
            let q = Mg1::new(rho, Service::gamma(1.0, scv).unwrap()).unwrap();
            let grid = q.renewal_grid();
            for level in [Quantile::P99, Quantile::P999] {
                let t = q.wait_quantile_s(level);
                let (lo, up) = grid.tail_bounds(t);
                // The true tail lies in [lo, up]; CL must too, up to its own 1e-3.
                assert!(
                    lo * 0.999 <= level.tail() && level.tail() <= up * 1.001,
                    "rho {rho} scv {scv} {level}: CL {} not in [{lo}, {up}]",
                    level.tail()
                );
            }
        }
    }
}
