//! M^X/G/1: Poisson arrivals of bursts of N events, one FIFO loop.
//!
//! The token-burst case. When the server's inter-token latency is near zero, the N chunks
//! of a response reach the client together; the loop sees a batch, not N Poisson events.
//! At low load the wait behind the other events of one's own burst, (N - 1) E\[S\] / 2 on
//! average, dominates: plain M/G/1 misses it entirely.

use crate::burst::Within;
use crate::error::Result;
use crate::mg1::Mg1;
use crate::queue::{TailMethod, WaitModel};
use crate::service::Service;
use crate::tail::CramerLundberg;

/// An M^X/G/1 queue with a fixed burst size.
///
/// Assumes bursts arrive as a Poisson process, every burst holds exactly `burst` events,
/// events are served FIFO (a burst in its arrival order) with i.i.d. service, and
/// rho = lambda_b N E\[S\] < 1. With `burst` = 1 it is exactly M/G/1.
///
/// Mean wait (exact): E\[Wq\] = lambda_b E\[B^2\] / (2 (1 - rho)) + (N - 1) E\[S\] / 2,
/// B = S_1 + ... + S_N. The tail mixes the burst's M/G/1 wait (service B) over the
/// positions inside the burst (see `burst`): exact series or Cramer-Lundberg for the
/// burst wait, closed-form gamma sums inside it. Lognormal and empirical service enter
/// the tail (not the mean) through their two-moment gamma fit.
#[derive(Debug, Clone)]
pub struct BatchMg1 {
    burst_rate: f64,
    burst: u32,
    service: Service,
    /// The queue of whole bursts (service B).
    bursts: Mg1,
    within: Within,
    exact_family: bool,
}

impl BatchMg1 {
    /// Bursts of `burst` events arriving at `burst_rate_per_s`, each event costing `service`.
    pub fn new(burst_rate_per_s: f64, burst: u32, service: Service) -> Result<Self> {
        crate::burst::check_single_server(burst_rate_per_s, burst, &service)?;
        let (within, exact_family) = Within::of(&service);
        let burst_service = if burst == 1 {
            service.clone()
        } else {
            match within {
                Within::Constant { mean_s } => Service::Deterministic {
                    mean_s: mean_s * f64::from(burst),
                },
                Within::Gamma { shape, scale_s } => Service::Gamma {
                    mean_s: f64::from(burst) * shape * scale_s,
                    scv: 1.0 / (f64::from(burst) * shape),
                },
            }
        };
        let bursts = Mg1::new(burst_rate_per_s, burst_service)?;
        Ok(Self {
            burst_rate: burst_rate_per_s,
            burst,
            service,
            bursts,
            within,
            exact_family,
        })
    }

    /// Events per burst.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Bursts per second.
    pub fn burst_rate_per_s(&self) -> f64 {
        self.burst_rate
    }

    /// Whether the tail used the service's own family (false: its gamma fit).
    pub fn tail_is_exact_family(&self) -> bool {
        self.exact_family
    }

    /// The mean wait behind earlier events of one's own burst, (N - 1) E\[S\] / 2.
    pub fn within_burst_mean_s(&self) -> f64 {
        f64::from(self.burst - 1) * self.service.mean_s() / 2.0
    }
}

impl WaitModel for BatchMg1 {
    fn name(&self) -> &'static str {
        if self.burst == 1 {
            self.bursts.name()
        } else {
            "M^X/G/1"
        }
    }

    fn assumptions(&self) -> &'static str {
        "Poisson bursts of a fixed number of events, one FIFO loop, i.i.d. service, rho < 1"
    }

    fn arrival_rate_per_s(&self) -> f64 {
        self.burst_rate * f64::from(self.burst)
    }

    fn service(&self) -> &Service {
        &self.service
    }

    fn wait_mean_s(&self) -> f64 {
        if self.burst == 1 {
            return self.bursts.wait_mean_s();
        }
        let b = self.service.moments().sum_of(self.burst);
        let rho = self.rho();
        self.burst_rate * b.m2 / (2.0 * (1.0 - rho)) + self.within_burst_mean_s()
    }

    fn wait_m2(&self) -> Option<f64> {
        (self.burst == 1).then(|| self.bursts.wait_m2()).flatten()
    }

    /// An event waits unless its burst finds the loop idle and it is first in the burst.
    fn p_wait(&self) -> f64 {
        if self.burst == 1 {
            return self.bursts.p_wait();
        }
        1.0 - (1.0 - self.rho()) / f64::from(self.burst)
    }

    fn wait_tail(&self, t: f64) -> f64 {
        if self.burst == 1 {
            return self.bursts.wait_tail(t);
        }
        match (self.within, self.bursts.cramer_lundberg()) {
            (Within::Constant { mean_s }, _) => {
                Within::mix_shifted(self.burst, mean_s, t, |x| self.bursts.wait_tail(x))
            }
            (w, Some(CramerLundberg { theta, c, rho })) => {
                w.mix_exponential(self.burst, t, c, theta, rho)
            }
            // No Cramer-Lundberg tail (within 1e-6 of saturation): the burst's wait is then
            // a million services or more and the few inside the burst do not show.
            (_, None) => self.bursts.wait_tail(t),
        }
    }

    fn tail_method(&self) -> TailMethod {
        self.bursts.tail_method()
    }

    fn wait_quantile_s(&self, q: crate::units::Quantile) -> f64 {
        if self.burst == 1 {
            return self.bursts.wait_quantile_s(q);
        }
        let scale = self.wait_mean_s().max(self.service.mean_s());
        crate::tail::quantile_by_bisection(|t| self.wait_tail(t), q, scale)
    }
}
