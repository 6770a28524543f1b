//! M/M/c and M/G/c: one shared queue in front of c loops (a pooled design).
//!
//! A pooled design lets any idle loop take the next event; it waits less than c
//! independent loops at the same utilisation (Erlang C versus M/M/1), but needs a shared
//! queue that a benchmark client's independent processes do not have.

use crate::batch::BatchMg1;
use crate::error::{ModelError, Result};
use crate::queue::{TailMethod, WaitModel};
use crate::service::Service;
use crate::units::Quantile;

/// M/M/c (exact, exponential service) or M/G/c (two-moment approximation).
///
/// Assumes Poisson arrivals, c identical servers fed by one FIFO queue, i.i.d. service,
/// rho = lambda E\[S\] / c < 1. Erlang C comes from the Erlang B recursion
/// B_0 = 1, B_n = a B_{n-1} / (n + a B_{n-1}) (no factorials, stable for any c), then
/// C = c B_c / (c - a (1 - B_c)). M/M/c: E\[Wq\] = C / (c mu - lambda),
/// P(Wq > t) = C e^{-(c mu - lambda) t}, exact. M/G/c: the Lee-Longton approximation
/// E\[Wq\] ~ (1 + Cs^2) / 2 * E\[Wq(M/M/c)\], exact for c = 1, with an exponential tail of
/// mass C and that mean. M/D/c: exact, the mean by Crommelin's formula
/// ([`md_c_mean_wait`]) and P(wait) and the whole waiting-time distribution from the queue's
/// embedded chain ([`MdcWaits`]) up to [`MDC_EXACT_MAX_SERVERS`] servers; beyond, the
/// exponential fit with the exact mean.
#[derive(Debug, Clone)]
pub struct Mgc {
    lambda: f64,
    servers: u32,
    service: Service,
    /// M/D/c's exact waiting-time distribution, when the service is deterministic.
    mdc: Option<MdcWaits>,
}

/// Most servers for which M/D/c's waiting-time distribution is computed exactly (the work
/// grows as c^2 per iteration of the ladder solution).
pub const MDC_EXACT_MAX_SERVERS: u32 = 128;

/// M/D/c's exact waiting-time distribution (c servers, Poisson arrivals at lambda, every
/// service exactly D).
///
/// Method. Every customer in service at time t has left by t + D, so the number in system
/// obeys L(t + D) = (L(t) - c)^+ + A, A the Poisson(a = lambda D) arrivals in between,
/// for every t; the number waiting V = (L - c)^+ then follows Lindley's recursion
/// V' = max(0, V + A - c) on the integers, solved exactly by its ladder heights
/// ([`crate::lindley`]; no lattice rounding: the steps are whole customers). A customer
/// arriving at t starts service when the one kc places ahead of it has started plus kD
/// (FIFO, deterministic service), which gives, for (k - 1) D <= x < k D and
/// s = t - (k D - x),
///
/// W <= x  if and only if  V(s) + A(s, t) <= k c - 1,
///
/// with A(s, t) ~ Poisson(lambda (k D - x)) independent of V(s) (Franx, 2001). So
/// P(W <= x) = sum_j P(V = j) P(Poisson(lambda (k D - x)) <= k c - 1 - j), exact up to
/// the cut of V's tail below 1e-12 and the iteration gap, both reported.
#[derive(Debug, Clone)]
pub struct MdcWaits {
    lambda: f64,
    d_s: f64,
    servers: u32,
    /// P(V = j): the number waiting, at an arbitrary time.
    waiting: Vec<f64>,
    /// P(V <= j).
    waiting_cdf: Vec<f64>,
    /// The ladder iteration's missing mass.
    gap: f64,
}

impl MdcWaits {
    /// Solves M/D/c; None beyond [`MDC_EXACT_MAX_SERVERS`] or when the chain's step
    /// distribution is too wide to hold.
    pub fn new(lambda_per_s: f64, servers: u32, d_s: f64) -> Option<Self> {
        if servers > MDC_EXACT_MAX_SERVERS {
            return None;
        }
        let a = lambda_per_s * d_s;
        let c = i64::from(servers);
        // Poisson(a) up to where its tail holds less than 1e-15.
        let pois = poisson_pmf(a, poisson_span(a));
        let (waiting, gap) = crate::lindley::integer_lindley(-c, &pois);
        let mut total = 0.0;
        let waiting_cdf = waiting
            .iter()
            .map(|p| {
                total += p;
                total.min(1.0)
            })
            .collect();
        Some(Self {
            lambda: lambda_per_s,
            d_s,
            servers,
            waiting,
            waiting_cdf,
            gap,
        })
    }

    /// P(W <= x).
    pub fn cdf(&self, x: f64) -> f64 {
        if x < 0.0 {
            return 0.0;
        }
        let k = (x / self.d_s).floor() + 1.0;
        let mu = (self.lambda * (k * self.d_s - x)).max(0.0);
        let limit = k * f64::from(self.servers) - 1.0; // V + A <= k c - 1
        if limit >= self.waiting.len() as f64 + poisson_span(mu) as f64 {
            return 1.0;
        }
        let limit = limit as usize;
        // Terms with j <= limit - span have the Poisson CDF at 1.
        let span = poisson_span(mu).min(limit + 1);
        let pmf = poisson_pmf(mu, span);
        let sure = limit + 1 - span; // j < sure: F(limit - j) = 1 (to 1e-15)
        let mut p = if sure > 0 {
            self.waiting_cdf[(sure - 1).min(self.waiting_cdf.len() - 1)]
        } else {
            0.0
        };
        // j from sure to limit: F(limit - j; mu), built up from the top.
        let mut f = 0.0;
        let mut by_n = vec![0.0; span];
        for (n, q) in pmf.iter().enumerate().take(span) {
            f += q;
            by_n[n] = f;
        }
        for j in sure..=limit.min(self.waiting.len().saturating_sub(1)) {
            p += self.waiting[j] * by_n[limit - j];
        }
        p.min(1.0)
    }

    /// P(W > 0): the probability that an arrival finds every server busy.
    pub fn p_wait(&self) -> f64 {
        (1.0 - self.cdf(0.0)).max(0.0)
    }

    /// The mean number waiting at an arbitrary time, E\[(L - c)^+\] with L = V + A: by
    /// Little's law lambda times the mean wait (a check on Crommelin's formula).
    pub fn mean_waiting(&self) -> f64 {
        let a = self.lambda * self.d_s;
        let pois = poisson_pmf(a, poisson_span(a));
        let c = self.servers as usize;
        let mut sum = 0.0;
        for (j, v) in self.waiting.iter().enumerate() {
            for (n, q) in pois.iter().enumerate() {
                sum += v * q * (j + n).saturating_sub(c) as f64;
            }
        }
        sum
    }

    /// The ladder iteration's missing mass (how far from converged; below 1e-12 normally).
    pub fn iteration_gap(&self) -> f64 {
        self.gap
    }
}

/// Points of Poisson(mu) that hold all but 1e-15 of it: mu + 12 sqrt(mu) + 40.
fn poisson_span(mu: f64) -> usize {
    (mu + 12.0 * mu.sqrt() + 40.0).ceil() as usize
}

/// P(N = n) for n < `len`, N ~ Poisson(mu), by the ratio recursion from P(N = 0) (mu is at
/// most [`MDC_EXACT_MAX_SERVERS`] here, so e^{-mu} does not underflow).
fn poisson_pmf(mu: f64, len: usize) -> Vec<f64> {
    let mut p = Vec::with_capacity(len);
    let mut x = (-mu).exp();
    for n in 0..len {
        if n > 0 {
            x *= mu / n as f64;
        }
        p.push(x);
    }
    p
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
        let mdc = match service {
            Service::Deterministic { mean_s } => MdcWaits::new(lambda_per_s, servers, mean_s),
            _ => None,
        };
        Ok(Self {
            lambda: lambda_per_s,
            servers,
            service,
            mdc,
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

/// M^X/G/c: Poisson bursts of N events into one FIFO queue shared by c loops (a pool of
/// workers taking a response's chunks as they come), approximated by one loop c times as
/// fast: M^X/G/1 with each event costing S / c, at the same utilisation.
///
/// Why this and how good: whenever events queue, all c loops are busy and the pool
/// drains work at c / E\[S\], as the fast loop does, so the two agree to first order in
/// heavy traffic. At light load the fast loop makes the j-th event of a burst wait
/// (j - 1) E\[S\] / c where the pool starts the first c at once, so it overstates the wait
/// (by at most (c - 1) E\[S\] / c on an event, for exponential service). The error is not
/// bounded analytically in between: `plan --check` measures it against the exact
/// Kiefer-Wolfowitz simulation of the pool (sim's `textbook::pooled_bursts`), and the
/// model tests hold it inside the ranges they state. For bursts of one use [`Mgc`].
#[derive(Debug, Clone)]
pub struct PooledBursts {
    fast: BatchMg1,
    servers: u32,
    service: Service,
}

impl PooledBursts {
    /// Bursts of `burst` events at `burst_rate_per_s` into `servers` pooled loops, each
    /// event costing `service` on one loop.
    pub fn new(burst_rate_per_s: f64, burst: u32, servers: u32, service: Service) -> Result<Self> {
        if servers == 0 || servers > crate::limits::MAX_SERVERS {
            return Err(ModelError::invalid(
                "servers",
                servers,
                "must be between 1 and 1,000,000",
            ));
        }
        let a = burst_rate_per_s * f64::from(burst) * service.mean_s();
        if a >= f64::from(servers) {
            return Err(ModelError::unstable(a, servers));
        }
        let fast = BatchMg1::new(
            burst_rate_per_s,
            burst,
            service.scaled(1.0 / f64::from(servers)),
        )?;
        Ok(Self {
            fast,
            servers,
            service,
        })
    }
}

impl WaitModel for PooledBursts {
    fn name(&self) -> &'static str {
        "M^X/G/c"
    }

    fn assumptions(&self) -> &'static str {
        "Poisson bursts into one FIFO queue shared by c identical loops, approximated by one loop c times as fast (first-order exact in heavy traffic, high at light load)"
    }

    fn arrival_rate_per_s(&self) -> f64 {
        self.fast.arrival_rate_per_s()
    }

    fn servers(&self) -> u32 {
        self.servers
    }

    fn service(&self) -> &Service {
        &self.service
    }

    fn wait_mean_s(&self) -> f64 {
        self.fast.wait_mean_s()
    }

    fn p_wait(&self) -> f64 {
        self.fast.p_wait()
    }

    fn wait_tail(&self, t_s: f64) -> f64 {
        self.fast.wait_tail(t_s)
    }

    fn tail_method(&self) -> TailMethod {
        TailMethod::FastServer
    }

    fn wait_quantile_s(&self, q: Quantile) -> f64 {
        self.fast.wait_quantile_s(q)
    }
}

/// The exact mean wait of M/D/c with c = `servers`, offered load `a` = lambda D erlangs
/// (< c) and service `d_s` (Crommelin, 1932):
///
/// E\[Lq\] = (a^2 - c (c - 1)) / (2 (c - a)) + sum_{k=1}^{c-1} 1 / (1 - z_k),
///
/// where z_k are the c - 1 roots other than 1 inside the unit disk of z^c = e^{a (z - 1)},
/// one for each c-th root of unity w_k: z_k = w_k e^{a (z_k - 1) / c}, found by Newton's
/// method from 0 (the map is a contraction there, |a z / c| < 1). E\[Wq\] = E\[Lq\] / lambda.
/// For c = 1 it is P-K's a D / (2 (1 - a)); for c = 10, a = 9, D = 1 it gives 0.34458 (the
/// published value is 0.3446).
pub fn md_c_mean_wait(servers: u32, a: f64, d_s: f64) -> f64 {
    let c = f64::from(servers);
    let mut sum = 0.0;
    for k in 1..servers {
        let phase = 2.0 * std::f64::consts::PI * f64::from(k) / c;
        let w = (phase.cos(), phase.sin());
        // Newton on f(z) = z - w e^{a (z - 1) / c}; f'(z) = 1 - (a / c) w e^{...}.
        let mut z = (0.0f64, 0.0f64);
        for _ in 0..100 {
            let e = cexp(((z.0 - 1.0) * a / c, z.1 * a / c));
            let we = cmul(w, e);
            let f = (z.0 - we.0, z.1 - we.1);
            let df = (1.0 - a / c * we.0, -a / c * we.1);
            let step = cdiv(f, df);
            z = (z.0 - step.0, z.1 - step.1);
            if step.0.abs() + step.1.abs() < 1e-15 {
                break;
            }
        }
        // Re [1 / (1 - z) - 1 / (1 - w)] = Re [(z - w) / ((1 - z)(1 - w))]: small where the
        // load is, without the cancellation of the two large terms (the imaginary parts of
        // conjugate roots cancel).
        let den = cmul((1.0 - z.0, -z.1), (1.0 - w.0, -w.1));
        sum += cdiv((z.0 - w.0, z.1 - w.1), den).0;
    }
    // sum_k 1 / (1 - w_k) over the c - 1 roots of unity is (c - 1) / 2 exactly, which
    // folds into the first term: (a^2 - c (c - 1)) / (2 (c - a)) + (c - 1) / 2
    // = a (a - c + 1) / (2 (c - a)).
    let lq = a * (a - c + 1.0) / (2.0 * (c - a)) + sum;
    (lq * d_s / a).max(0.0)
}

fn cmul(x: (f64, f64), y: (f64, f64)) -> (f64, f64) {
    (x.0 * y.0 - x.1 * y.1, x.0 * y.1 + x.1 * y.0)
}

fn cdiv(x: (f64, f64), y: (f64, f64)) -> (f64, f64) {
    let d = y.0 * y.0 + y.1 * y.1;
    ((x.0 * y.0 + x.1 * y.1) / d, (x.1 * y.0 - x.0 * y.1) / d)
}

fn cexp(x: (f64, f64)) -> (f64, f64) {
    let m = x.0.exp();
    (m * x.1.cos(), m * x.1.sin())
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
        } else if matches!(self.service, Service::Deterministic { .. }) {
            "M/D/c"
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
        if let Service::Deterministic { mean_s } = self.service {
            return md_c_mean_wait(self.servers, self.lambda * mean_s, mean_s);
        }
        let c = f64::from(self.servers);
        let mmc = self.erlang_c() / (c / self.service.mean_s() - self.lambda);
        mmc * (1.0 + self.service.scv()) / 2.0
    }

    fn p_wait(&self) -> f64 {
        match &self.mdc {
            Some(m) => m.p_wait(),
            None => self.erlang_c(),
        }
    }

    fn wait_tail(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 1.0;
        }
        if let Some(m) = &self.mdc {
            return (1.0 - m.cdf(t)).max(0.0);
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
        } else if self.mdc.is_some() {
            TailMethod::EmbeddedChain
        } else {
            TailMethod::ExponentialFit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md_c_with_one_server_is_erlangs_m_d_1() {
        // c = 1: the chain's answer against Erlang's exact M/D/1 distribution.
        for rho in [0.3, 0.7, 0.9] {
            let m = MdcWaits::new(rho, 1, 1.0).unwrap();
            for t in [0.0, 0.25, 0.5, 1.0, 1.7, 2.0, 3.3, 5.0] {
                let exact = crate::mg1::md1_wait_cdf(rho, 1.0, t).unwrap();
                assert!(
                    (m.cdf(t) - exact).abs() < 1e-9,
                    "rho {rho}, t {t}: {} vs {exact}",
                    m.cdf(t)
                );
            }
        }
    }

    #[test]
    fn md_c_distribution_agrees_with_crommelins_mean() {
        // Two exact routes to the mean: Crommelin's roots, and Little's law over the
        // chain's number waiting; and the mean integrated from the distribution.
        for c in [2u32, 4, 10, 21] {
            for rho in [0.5, 0.8, 0.95] {
                let lambda = rho * f64::from(c);
                let m = MdcWaits::new(lambda, c, 1.0).unwrap();
                assert!(
                    m.iteration_gap() < 1e-10,
                    "c {c} rho {rho}: {}",
                    m.iteration_gap()
                );
                let crommelin = md_c_mean_wait(c, lambda, 1.0);
                let little = m.mean_waiting() / lambda;
                assert!(
                    (little - crommelin).abs() < 1e-8 * crommelin.max(1e-3),
                    "c {c} rho {rho}: {little} vs {crommelin}"
                );
                // E[W] = integral of P(W > x), by the trapezoid rule on a fine grid.
                let (h, mut x, mut integral) = (1e-3, 0.0, 0.0);
                let mut prev = 1.0 - m.cdf(0.0);
                while prev > 1e-12 {
                    x += h;
                    let next = 1.0 - m.cdf(x);
                    integral += 0.5 * h * (prev + next);
                    prev = next;
                }
                assert!(
                    (integral - crommelin).abs() < 1e-4 * crommelin.max(1e-3),
                    "c {c} rho {rho}: {integral} vs {crommelin}"
                );
            }
        }
    }

    #[test]
    fn md_c_waits_less_often_than_m_m_c_and_quantiles_are_consistent() {
        let q = Mgc::new(9.0, 10, Service::deterministic(1.0).unwrap()).unwrap();
        assert_eq!(q.tail_method(), TailMethod::EmbeddedChain);
        let pw = q.p_wait();
        // Deterministic service empties servers on a schedule: fewer arrivals find all
        // busy than Erlang C says for exponential service at the same load.
        assert!(pw > 0.3 && pw < q.erlang_c(), "{pw} vs {}", q.erlang_c());
        let mut last = 0.0;
        for level in [0.5, 0.9, 0.99, 0.999] {
            let x = q.wait_quantile_s(Quantile::new(level).unwrap());
            assert!(x >= last, "monotone");
            if 1.0 - pw >= level {
                assert_eq!(x, 0.0);
            } else {
                assert!((q.wait_tail(x) - (1.0 - level)).abs() < 1e-6, "{level}");
            }
            last = x;
        }
    }
}
