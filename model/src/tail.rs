//! Methods for the tail P(Wq > t) of a single-server waiting time, and quantiles from it.
//!
//! * [`CramerLundberg`]: P(Wq > t) ~ C e^{-theta t}, where theta > 0 solves
//!   lambda (M_S(theta) - 1) = theta and C = (1 - rho) / (lambda M_S'(theta) - 1). Exact for
//!   exponential service, asymptotically exact for every light-tailed service, and at the
//!   p99 of exponential, deterministic and gamma service within 1e-4 relative of the exact
//!   quantile (checked against the exact M/D/1 series and the numerical method in tests).
//! * [`RenewalGrid`]: the P-K waiting time is a geometric sum of equilibrium residuals,
//!   Wq = Se_1 + ... + Se_N with P(N = n) = (1 - rho) rho^n. Discretising Se on a grid of
//!   step h, once rounded up and once rounded down, and solving the renewal equation
//!   w_j = rho sum_i a_i w_{j-i} gives two distributions that bound the true one from
//!   above and below. Works for any service distribution with an equilibrium CDF, so it is
//!   the method for heavy tails (lognormal), where theta does not exist, and the
//!   independent check of Cramer-Lundberg elsewhere. Cost O(n^2) for n grid points.

use crate::service::Service;
use crate::units::Quantile;

/// The Cramer-Lundberg exponential tail of an M/G/1 waiting time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CramerLundberg {
    /// Decay rate theta, per second.
    pub theta: f64,
    /// Prefactor C (dimensionless).
    pub c: f64,
    /// Utilisation, the exact P(Wq > 0); the tail is capped by it.
    pub rho: f64,
}

/// Nearer 1 than this, the utilisation leaves the root's equation lost in rounding (g is
/// about theta (rho - 1), a difference of numbers near theta): at 1 - rho = 1e-16 the root
/// came out so large that an M/G/1 p99 read 0. Callers use the heavy-traffic limit there,
/// exact to O(1 - rho).
pub const ROOT_LOST_BELOW: f64 = 1e-6;

impl CramerLundberg {
    /// Solves for theta and C. `None` if the service has no MGF (heavy tail) or the queue
    /// is unstable.
    pub fn solve(lambda: f64, service: &Service) -> Option<Self> {
        let rho = lambda * service.mean_s();
        if rho.is_nan() || rho >= 1.0 - ROOT_LOST_BELOW || !service.is_light_tailed() {
            return None;
        }
        // g(theta) = lambda (M(theta) - 1) - theta is convex with g(0) = 0 and
        // g'(0) = rho - 1 < 0, so it has exactly one positive root below the abscissa.
        let g = |th: f64| service.mgf(th).map(|(m, _)| lambda * (m - 1.0) - th);
        let abscissa = service.mgf_abscissa();
        let mut hi = (2.0 * (1.0 - rho) / (service.moments().m2 * lambda)).min(abscissa * 0.5);
        let mut lo = 0.0;
        // Grow hi until g(hi) > 0 (or up to the abscissa, where M blows up).
        for _ in 0..2000 {
            match g(hi) {
                Some(v) if v > 0.0 => break,
                Some(_) => {
                    lo = hi;
                    hi = if abscissa.is_finite() {
                        (hi + abscissa) / 2.0
                    } else {
                        hi * 2.0
                    };
                }
                None => hi = (lo + hi) / 2.0,
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            match g(mid) {
                Some(v) if v > 0.0 => hi = mid,
                _ => lo = mid,
            }
        }
        let theta = 0.5 * (lo + hi);
        let (_, dm) = service.mgf(theta)?;
        let c = (1.0 - rho) / (lambda * dm - 1.0);
        (theta > 0.0 && c.is_finite() && c > 0.0).then_some(Self { theta, c, rho })
    }

    /// P(Wq > t), capped by rho (the exact probability of waiting at all).
    pub fn tail(&self, t: f64) -> f64 {
        if t < 0.0 {
            1.0
        } else {
            (self.c * (-self.theta * t).exp()).min(self.rho)
        }
    }

    /// The q-quantile: zero when 1 - q >= rho, else ln(C / (1 - q)) / theta.
    pub fn quantile(&self, q: Quantile) -> f64 {
        if q.tail() >= self.rho {
            return 0.0;
        }
        ((self.c / q.tail()).ln() / self.theta).max(0.0)
    }
}

/// Bounds on the M/G/1 waiting-time distribution from a discretised renewal equation.
#[derive(Debug, Clone)]
pub struct RenewalGrid {
    /// Grid step, seconds.
    pub h: f64,
    /// P(W_up <= j h): the distribution with every residual rounded up (stochastically
    /// larger than the true wait).
    upper: Vec<f64>,
    /// P(W_low <= j h): residuals rounded down (stochastically smaller).
    lower: Vec<f64>,
}

/// Grid points per solve: 4096 makes one solve about 17 million multiply-adds.
const GRID_POINTS: usize = 4096;
/// The grid's horizon must push the upper tail below this, a tenth of p99.9's 1e-3.
const HORIZON_TAIL: f64 = 1e-4;

impl RenewalGrid {
    /// Solves the renewal equation for an M/G/1 queue with utilisation `rho` < 1, growing
    /// the horizon until the upper bound's tail at the horizon is below 1e-4.
    pub fn solve(rho: f64, service: &Service, wait_mean_s: f64) -> Self {
        let mut horizon = (8.0 * wait_mean_s).max(4.0 * service.mean_s());
        loop {
            let grid = Self::solve_on(rho, service, horizon / GRID_POINTS as f64, GRID_POINTS);
            if 1.0 - grid.upper[GRID_POINTS - 1] < HORIZON_TAIL || horizon > 1e6 * wait_mean_s {
                return grid;
            }
            horizon *= 2.0;
        }
    }

    /// One solve with step `h` and `n` points.
    pub fn solve_on(rho: f64, service: &Service, h: f64, n: usize) -> Self {
        let fe: Vec<f64> = (0..=n)
            .map(|i| service.equilibrium_cdf(i as f64 * h))
            .collect();
        // Rounded up: mass of (x_{i-1}, x_i] sits at x_i, so a_0 = 0.
        let up: Vec<f64> = (0..n)
            .map(|i| if i == 0 { 0.0 } else { fe[i] - fe[i - 1] })
            .collect();
        // Rounded down: mass of [x_i, x_{i+1}) sits at x_i, so b_0 = Fe(h) > 0.
        let down: Vec<f64> = (0..n).map(|i| fe[i + 1] - fe[i]).collect();
        Self {
            h,
            upper: compound_geometric(rho, &up),
            lower: compound_geometric(rho, &down),
        }
    }

    /// (lower, upper) bounds on P(Wq > t).
    pub fn tail_bounds(&self, t: f64) -> (f64, f64) {
        if t < 0.0 {
            return (1.0, 1.0);
        }
        let n = self.upper.len();
        let pos = t / self.h;
        if pos >= (n - 1) as f64 {
            // Past the horizon: extend each bound by the exponential decay of its last
            // quarter, which is where the geometric sum's tail is already exponential.
            let ext = |cdf: &[f64]| {
                let (a, b) = (1.0 - cdf[3 * n / 4], 1.0 - cdf[n - 1]);
                if a <= 0.0 || b <= 0.0 {
                    return 0.0;
                }
                let rate = (a / b).ln() / ((n - 1 - 3 * n / 4) as f64 * self.h);
                b * (-(t - (n - 1) as f64 * self.h) * rate).exp()
            };
            return (ext(&self.lower), ext(&self.upper));
        }
        // W_up lives on the grid points and is >= W; P(W_up > t) = 1 - F_up(floor(t/h) h).
        let j = pos.floor() as usize;
        // W_low lives on grid points too; a point x_j <= t counts as not exceeding t.
        (
            (1.0 - self.lower[j]).max(0.0),
            (1.0 - self.upper[j]).max(0.0),
        )
    }

    /// The midpoint of the bounds on P(Wq > t).
    pub fn tail(&self, t: f64) -> f64 {
        let (lo, up) = self.tail_bounds(t);
        0.5 * (lo + up)
    }
}

/// CDF on the grid of a geometric sum with P(N = n) = (1 - rho) rho^n of iid summands with
/// pmf `a` (a[0] may be positive): w_j = ((1 - rho)[j = 0] + rho sum_{i>=1} a_i w_{j-i}) /
/// (1 - rho a_0).
fn compound_geometric(rho: f64, a: &[f64]) -> Vec<f64> {
    let n = a.len();
    let norm = 1.0 - rho * a[0];
    let mut w = vec![0.0; n];
    w[0] = (1.0 - rho) / norm;
    for j in 1..n {
        let s: f64 = a[1..=j]
            .iter()
            .zip(w[..j].iter().rev())
            .map(|(x, y)| x * y)
            .sum();
        w[j] = rho * s / norm;
    }
    let mut acc = 0.0;
    for v in &mut w {
        acc += *v;
        *v = acc.min(1.0);
    }
    w
}

/// The q-quantile of a waiting time from its tail function by bisection.
///
/// `tail` must be non-increasing with `tail(t) -> 0`; `scale_s` is a rough size of the
/// answer used to bracket it. Returns 0 when P(W > 0) <= 1 - q (the atom at zero covers
/// the level). Relative precision 1e-10.
pub fn quantile_by_bisection(tail: impl Fn(f64) -> f64, q: Quantile, scale_s: f64) -> f64 {
    let target = q.tail();
    if tail(0.0) <= target {
        return 0.0;
    }
    let mut lo = 0.0;
    let mut hi = scale_s.max(f64::MIN_POSITIVE);
    let mut grow = 0;
    while tail(hi) > target {
        lo = hi;
        hi *= 2.0;
        grow += 1;
        if grow > 200 {
            return hi;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-10 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}
