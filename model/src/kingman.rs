//! GI^X/G/1 by Kingman / Allen-Cunneen: renewal arrivals of bursts, one FIFO loop.
//!
//! Round-robin assignment of requests to k loops thins a Poisson stream deterministically:
//! each loop sees every k-th request, so its inter-arrival times are Erlang-k (SCV 1/k),
//! smoother than the Poisson stream random assignment gives. E_k/G/1 waits less than
//! M/G/1 at the same utilisation, which is why round robin needs fewer workers.

use crate::burst::Within;
use crate::error::{ModelError, Result};
use crate::queue::{TailMethod, WaitModel};
use crate::service::Service;

/// A GI^X/G/1 queue evaluated with the Kingman (Allen-Cunneen for one server) two-moment
/// approximation and the Kramer-Langenbach-Belz correction.
///
/// Assumes renewal arrivals of bursts with inter-arrival SCV `ca2`, fixed burst size N,
/// FIFO, i.i.d. service, rho < 1. Burst wait:
/// E[W_b] ~ g E[B] rho / (1 - rho) (ca^2 + cB^2) / 2 with cB^2 = Cs^2 / N, and
/// g = exp(-2 (1 - rho)(1 - ca^2)^2 / (3 rho (ca^2 + cB^2))) for ca^2 < 1,
/// g = exp(-(1 - rho)(ca^2 - 1) / (ca^2 + 4 cB^2)) for ca^2 > 1. Exact for Poisson
/// (ca^2 = 1, g = 1: Pollaczek-Khinchine) and in heavy traffic; without g, Kingman
/// overstates the wait of smooth arrivals (Erlang-k, the round-robin case) several-fold
/// at moderate load. The event wait adds (N - 1) E[S] / 2 inside the burst. The tail is the
/// exponential with P(W_b > 0) = rho and the same mean, mixed over burst positions.
#[derive(Debug, Clone)]
pub struct Kingman {
    burst_rate: f64,
    ca2: f64,
    burst: u32,
    service: Service,
    erlang_k: Option<u32>,
}

impl Kingman {
    /// Bursts at `burst_rate_per_s` with inter-arrival SCV `ca2`.
    pub fn new(burst_rate_per_s: f64, ca2: f64, burst: u32, service: Service) -> Result<Self> {
        if !(ca2.is_finite() && ca2 >= 0.0) {
            return Err(ModelError::invalid(
                "arrival scv",
                ca2,
                "must be a finite number >= 0",
            ));
        }
        crate::burst::check_single_server(burst_rate_per_s, burst, &service)?;
        Ok(Self {
            burst_rate: burst_rate_per_s,
            ca2,
            burst,
            service,
            erlang_k: None,
        })
    }

    /// E_k arrivals: the stream one of k round-robin workers sees from a Poisson source
    /// (inter-arrival SCV 1/k).
    pub fn erlang(k: u32, burst_rate_per_s: f64, burst: u32, service: Service) -> Result<Self> {
        if k == 0 {
            return Err(ModelError::invalid("erlang k", 0, "must be >= 1"));
        }
        let mut q = Self::new(burst_rate_per_s, 1.0 / f64::from(k), burst, service)?;
        q.erlang_k = Some(k);
        Ok(q)
    }

    /// The mean wait of a whole burst behind earlier bursts.
    pub fn burst_wait_mean_s(&self) -> f64 {
        let n = f64::from(self.burst);
        let eb = n * self.service.mean_s();
        let cb2 = self.service.scv() / n;
        let rho = self.rho();
        let variability = self.ca2 + cb2;
        if variability <= 0.0 {
            return 0.0;
        }
        let g = if self.ca2 < 1.0 {
            (-2.0 * (1.0 - rho) * (1.0 - self.ca2).powi(2) / (3.0 * rho * variability)).exp()
        } else {
            (-(1.0 - rho) * (self.ca2 - 1.0) / (self.ca2 + 4.0 * cb2)).exp()
        };
        g * eb * rho / (1.0 - rho) * variability / 2.0
    }
}

impl WaitModel for Kingman {
    fn name(&self) -> &'static str {
        match (self.erlang_k.is_some(), self.burst > 1) {
            (true, false) => "E_k/G/1",
            (true, true) => "E_k^X/G/1",
            (false, false) => "GI/G/1",
            (false, true) => "GI^X/G/1",
        }
    }

    fn assumptions(&self) -> &'static str {
        "renewal arrivals of fixed bursts, one FIFO loop, i.i.d. service; Kingman two-moment approximation"
    }

    fn arrival_rate_per_s(&self) -> f64 {
        self.burst_rate * f64::from(self.burst)
    }

    fn service(&self) -> &Service {
        &self.service
    }

    fn wait_mean_s(&self) -> f64 {
        self.burst_wait_mean_s() + f64::from(self.burst - 1) * self.service.mean_s() / 2.0
    }

    fn p_wait(&self) -> f64 {
        1.0 - (1.0 - self.rho()) / f64::from(self.burst)
    }

    fn wait_tail(&self, t: f64) -> f64 {
        let wb = self.burst_wait_mean_s();
        let rho = self.rho();
        let (within, _) = Within::of(&self.service);
        if wb <= 0.0 {
            // D/D/1-like: bursts never wait for each other.
            return within.mix_exponential(self.burst, t, 0.0, 1.0, 0.0);
        }
        // P(W_b > x) = rho e^{-x rho / E[W_b]}: mass rho, conditional mean E[W_b] / rho.
        within.mix_exponential(self.burst, t, rho, rho / wb, rho)
    }

    fn tail_method(&self) -> TailMethod {
        TailMethod::ExponentialFit
    }
}
