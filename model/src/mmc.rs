//! M/M/c and M/G/c: one shared queue in front of c loops (a pooled design).
//!
//! A pooled design lets any idle loop take the next event; it waits less than c
//! independent loops at the same utilisation (Erlang C versus M/M/1), but needs a shared
//! queue that a benchmark client's independent processes do not have.

use crate::error::{ModelError, Result};
use crate::queue::{TailMethod, WaitModel};
use crate::service::Service;

/// M/M/c (exact, exponential service) or M/G/c (two-moment approximation).
///
/// Assumes Poisson arrivals, c identical servers fed by one FIFO queue, i.i.d. service,
/// rho = lambda E\[S\] / c < 1. Erlang C comes from the Erlang B recursion
/// B_0 = 1, B_n = a B_{n-1} / (n + a B_{n-1}) (no factorials, stable for any c), then
/// C = c B_c / (c - a (1 - B_c)). M/M/c: E\[Wq\] = C / (c mu - lambda),
/// P(Wq > t) = C e^{-(c mu - lambda) t}, exact. M/G/c: the Lee-Longton approximation
/// E\[Wq\] ~ (1 + Cs^2) / 2 * E\[Wq(M/M/c)\], exact for c = 1, with an exponential tail of
/// mass C and that mean.
#[derive(Debug, Clone)]
pub struct Mgc {
    lambda: f64,
    servers: u32,
    service: Service,
}

impl Mgc {
    /// `servers` pooled loops fed at `lambda_per_s`.
    pub fn new(lambda_per_s: f64, servers: u32, service: Service) -> Result<Self> {
        if servers == 0 || servers > crate::limits::MAX_SERVERS {
            return Err(ModelError::invalid(
                "servers",
                servers,
                "must be between 1 and 1,000,000",
            ));
        }
        if !(lambda_per_s.is_finite() && lambda_per_s > 0.0) {
            return Err(ModelError::invalid(
                "arrival rate",
                lambda_per_s,
                "must be > 0 per second",
            ));
        }
        let a = lambda_per_s * service.mean_s();
        if a >= f64::from(servers) {
            return Err(ModelError::unstable(a, servers));
        }
        Ok(Self {
            lambda: lambda_per_s,
            servers,
            service,
        })
    }

    /// M/M/c with rates lambda and mu.
    pub fn mmc(lambda_per_s: f64, mu_per_s: f64, servers: u32) -> Result<Self> {
        if !(mu_per_s.is_finite() && mu_per_s > 0.0) {
            return Err(ModelError::invalid(
                "service rate",
                mu_per_s,
                "must be > 0 per second",
            ));
        }
        Self::new(lambda_per_s, servers, Service::exponential(1.0 / mu_per_s)?)
    }

    /// Erlang C: the probability that an arrival waits in M/M/c.
    pub fn erlang_c(&self) -> f64 {
        erlang_c(self.servers, self.lambda * self.service.mean_s())
    }

    fn is_exponential(&self) -> bool {
        matches!(self.service, Service::Exponential { .. })
    }
}

/// Erlang B for c servers and offered load `a` erlangs, by the stable recursion.
pub fn erlang_b(servers: u32, a: f64) -> f64 {
    (1..=servers).fold(1.0, |b, n| a * b / (f64::from(n) + a * b))
}

/// Erlang C for c servers and offered load `a` < c erlangs.
pub fn erlang_c(servers: u32, a: f64) -> f64 {
    let b = erlang_b(servers, a);
    let c = f64::from(servers);
    c * b / (c - a * (1.0 - b))
}

impl WaitModel for Mgc {
    fn name(&self) -> &'static str {
        if self.is_exponential() {
            "M/M/c"
        } else {
            "M/G/c"
        }
    }

    fn assumptions(&self) -> &'static str {
        "Poisson arrivals, one FIFO queue shared by c identical loops, i.i.d. service, rho < 1"
    }

    fn arrival_rate_per_s(&self) -> f64 {
        self.lambda
    }

    fn servers(&self) -> u32 {
        self.servers
    }

    fn service(&self) -> &Service {
        &self.service
    }

    fn wait_mean_s(&self) -> f64 {
        let c = f64::from(self.servers);
        let mmc = self.erlang_c() / (c / self.service.mean_s() - self.lambda);
        mmc * (1.0 + self.service.scv()) / 2.0
    }

    fn p_wait(&self) -> f64 {
        self.erlang_c()
    }

    fn wait_tail(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 1.0;
        }
        let pc = self.erlang_c();
        let mean = self.wait_mean_s();
        if mean <= 0.0 {
            return 0.0;
        }
        // Exponential with mass C and mean E[Wq]: decay C / E[Wq] (= c mu - lambda for M/M/c).
        pc * (-t * pc / mean).exp()
    }

    fn tail_method(&self) -> TailMethod {
        if self.is_exponential() {
            TailMethod::Exact
        } else {
            TailMethod::ExponentialFit
        }
    }
}
