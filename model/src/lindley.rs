//! GI/G/1 by numerics: the stationary solution of Lindley's equation W = max(0, W + U), U =
//! S - A, on a lattice.
//!
//! The method, for any interarrival distribution A and service S the project knows:
//!
//! 1. A and S are put on the lattice h Z by linear rounding: each value is split between
//!    its two neighbouring points in the proportions that keep its mean, so both
//!    distributions keep their means exactly and the load rho is the true one; the
//!    variance grows by at most h^2 / 4.
//! 2. U's lattice distribution is the convolution of S's with A's mirrored.
//! 3. The stationary W is the all-time maximum of the random walk with steps U, a
//!    geometric sum of its strict ascending ladder heights. The ladder height distribution
//!    a and the weak descending one d solve the Wiener-Hopf factorisation
//!    1 - U(z) = (1 - A(z)) (1 - D(z)) coefficient by coefficient:
//!    a_k (1 - d_0) = u_k + sum_{j>=1} a_{k+j} d_j (k >= 1) and
//!    d_m = u_{-m} + sum_{i>=1} a_i d_{i+m} (m >= 0). Iterated from zero (Grassmann and
//!    Jain, 1989) both increase to the solution; the mass d still lacks, 1 - sum d (the
//!    descending ladder is proper when the queue is stable), is reported as the iteration
//!    gap, and the iteration stops below 1e-12 or at a fixed budget of work.
//! 4. P(W = 0) = 1 - sum a and P(W = n) = sum_i a_i P(W = n - i): the renewal recursion
//!    runs until the tail left is below 1e-12.
//! 5. The lattice error is estimated by solving again on a lattice twice as coarse: with
//!    O(h^2) rounding the fine solution is off by about a third of the difference
//!    (Richardson), which is reported as the discretisation error of the mean.
//!
//! Heavy-tailed services (lognormal) are cut where their tail falls below 1e-9, the cut
//! mass kept in the last cell; the report's error does not include that cut.

use crate::error::{ModelError, Result};
use crate::service::Service;

/// The stationary waiting-time distribution of one GI/G/1 queue on a lattice.
#[derive(Debug, Clone)]
pub struct LindleyGrid {
    /// Lattice step, seconds.
    h: f64,
    /// P(W <= i h) for each lattice point i.
    cdf: Vec<f64>,
    /// Mean wait, seconds (from the two iterates' average).
    mean_s: f64,
    /// The iteration gap left.
    iteration_gap: f64,
    /// Estimated discretisation error of the mean, seconds.
    mean_error_s: f64,
}

/// Most cells in the wait grid.
const MAX_CELLS: usize = 1 << 16;
/// Most lattice points of the increment U.
const MAX_KERNEL: usize = 1 << 14;
/// Cells per mean service time on the fine lattice.
const CELLS_PER_SERVICE: f64 = 50.0;
/// Multiply-adds allowed per solve (bounds the time whatever the load).
const WORK_BUDGET: f64 = 4e9;
/// Tail mass below which a distribution is cut (and the wait grid ends).
const CUT: f64 = 1e-12;
/// A service or gap distribution is cut where its tail holds less than [`TAIL_MASS`] of
/// the probability and x^2 P(X > x) is below [`TAIL_M2`] of E\[X^2\]: heavy tails carry much
/// of the second moment, which the mean wait depends on.
const TAIL_MASS: f64 = 1e-9;
/// See [`TAIL_MASS`].
const TAIL_M2: f64 = 1e-5;

impl LindleyGrid {
    /// Solves the queue with interarrival times `arrivals` (seconds between arrivals) and
    /// service times `service`; refuses an unstable one.
    pub fn solve(arrivals: &Service, service: &Service) -> Result<Self> {
        let rho = service.mean_s() / arrivals.mean_s();
        if rho >= 1.0 {
            return Err(ModelError::unstable(rho, 1));
        }
        let h = step(service, arrivals);
        let fine = Lattice::solve(arrivals, service, h)?;
        let coarse = Lattice::solve(arrivals, service, 2.0 * fine.h)?;
        let mean_error_s = (fine.mean_s - coarse.mean_s).abs() / 3.0;
        Ok(Self {
            h: fine.h,
            mean_s: fine.mean_s,
            iteration_gap: fine.gap,
            mean_error_s,
            cdf: fine.cdf_upper,
        })
    }

    /// Mean wait, seconds.
    pub fn mean_s(&self) -> f64 {
        self.mean_s
    }

    /// P(W > 0). Lattice point 0 stands for waits in [0, h/2); the atom at zero is that
    /// mass less its continuous part, estimated from the density just above
    /// ((F_1 - F_0) / h over h / 2), an O(h^2) correction.
    pub fn p_wait(&self) -> f64 {
        1.0 - self.atom()
    }

    fn atom(&self) -> f64 {
        let f0 = self.cdf.first().copied().unwrap_or(1.0);
        let f1 = self.cdf.get(1).copied().unwrap_or(f0);
        (f0 - 0.5 * (f1 - f0)).clamp(0.0, f0)
    }

    /// P(W > t). Lattice point i stands for waits within h/2 of i h, so its cumulative
    /// mass is P(W <= (i + 1/2) h); between those points the CDF is interpolated
    /// linearly (from the atom at 0 to the first).
    pub fn tail(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 1.0;
        }
        let x = t / self.h - 0.5;
        let c = if x < 0.0 {
            let f0 = self.cdf.first().copied().unwrap_or(1.0);
            let a = self.atom();
            a + (f0 - a) * (t / (0.5 * self.h))
        } else {
            let i = x.floor() as usize;
            if i + 1 >= self.cdf.len() {
                self.cdf.last().copied().unwrap_or(1.0)
            } else {
                let f = x - i as f64;
                self.cdf[i] * (1.0 - f) + self.cdf[i + 1] * f
            }
        };
        (1.0 - c).clamp(0.0, 1.0)
    }

    /// The estimated discretisation error of the mean, seconds.
    pub fn mean_error_s(&self) -> f64 {
        self.mean_error_s
    }

    /// The iteration gap left: the descending ladder mass still missing (0 when converged).
    pub fn iteration_gap(&self) -> f64 {
        self.iteration_gap
    }

    /// Lattice step, seconds.
    pub fn step_s(&self) -> f64 {
        self.h
    }
}

/// The lattice step: a fiftieth of the shorter of the two means, or, when waits are long
/// (heavy traffic, variable service), up to a thousandth of the wait Kingman's formula
/// expects (at most a fifth of that mean): the rounding error of the mean is O(h^2) in
/// absolute terms, so it stays small against long waits while the work falls by the
/// square of the step.
fn step(service: &Service, arrivals: &Service) -> f64 {
    let base = service.mean_s().min(arrivals.mean_s());
    let rho = service.mean_s() / arrivals.mean_s();
    let kingman = rho / (1.0 - rho) * (arrivals.scv() + service.scv()) / 2.0 * service.mean_s();
    (base / CELLS_PER_SERVICE).max((kingman / 1000.0).min(base / 5.0))
}

struct Lattice {
    h: f64,
    cdf_upper: Vec<f64>,
    mean_s: f64,
    gap: f64,
}

impl Lattice {
    fn solve(arrivals: &Service, service: &Service, h0: f64) -> Result<Self> {
        let mut h = h0;
        // Coarsen until both distributions and the increment fit their caps.
        let (s, a) = loop {
            if let (Some(s), Some(a)) = (pmf(service, h), pmf(arrivals, h))
                && s.1.len() + a.1.len() <= MAX_KERNEL
            {
                break (s, a);
            }
            h *= 2.0;
        };
        let (u_lo, u) = increment(&s, &a);
        let drift: f64 = u
            .iter()
            .enumerate()
            .map(|(i, p)| p * (u_lo + i as i64) as f64)
            .sum();
        if drift >= 0.0 {
            return Err(ModelError::invalid(
                "utilisation",
                "near 1",
                "is too close to 1 for the lattice (the rounded increment does not drift down)",
            ));
        }
        let (ascending, gap) = ladder(u_lo, &u);
        let w = renewal(&ascending);
        let mean_s = w.iter().enumerate().map(|(i, p)| i as f64 * p).sum::<f64>() * h;
        let mut acc = 0.0;
        let cdf_upper = w
            .iter()
            .map(|p| {
                acc += p;
                acc.min(1.0)
            })
            .collect();
        Ok(Self {
            h,
            cdf_upper,
            mean_s,
            gap,
        })
    }
}

/// A distribution on the lattice h Z: (index of the first point, masses).
type Pmf = (i64, Vec<f64>);

/// `d` on the lattice by linear rounding: a value x between points j and j + 1 goes to
/// both, in the proportions that keep it at x on average. The masses are
/// p_j = E\[(1 - |X / h - j|)+\] = (G((j+1)h) - 2 G(jh) + G((j-1)h)) / h with G the integral
/// of the CDF (in closed form through the equilibrium CDF), so every distribution keeps its
/// mean exactly, up to its cut tail (see [`TAIL_MASS`]), whose mass the last point keeps.
/// `None` when the cut would need more than [`MAX_KERNEL`] points: the step is too fine.
fn pmf(d: &Service, h: f64) -> Option<Pmf> {
    if let Service::Deterministic { mean_s } = d {
        let x = mean_s / h;
        let lo = x.floor();
        let frac = x - lo;
        return Some(if frac < 1e-9 {
            (lo as i64, vec![1.0])
        } else {
            (lo as i64, vec![1.0 - frac, frac])
        });
    }
    // The last point holding mass.
    let m2 = d.moments().m2;
    let heavy = |x: f64| {
        let tail = 1.0 - d.cdf(x);
        tail > TAIL_MASS || x * x * tail > TAIL_M2 * m2
    };
    let mut hi = d.mean_s().max(h);
    while heavy(hi) {
        if hi / h > MAX_KERNEL as f64 {
            return None;
        }
        hi *= 2.0;
    }
    // The cut lies between hi / 2 and hi: narrow it to within 1/16 of that octave, so
    // the lattice is not up to twice as wide as the tail needs.
    let (mut lo, mut top) = (hi / 2.0, hi);
    for _ in 0..4 {
        let mid = 0.5 * (lo + top);
        if heavy(mid) {
            lo = mid;
        } else {
            top = mid;
        }
    }
    let hi = top;
    let last = ((hi / h).ceil() as usize).clamp(1, MAX_KERNEL);
    // G at the lattice points 0..=last+1, in closed form:
    // G(x) = int_0^x F = x - int_0^x (1 - F) = x - E[X] F_e(x).
    let mean = d.mean_s();
    let g: Vec<f64> = (0..=last + 1)
        .map(|j| {
            let x = j as f64 * h;
            (x - mean * d.equilibrium_cdf(x)).max(0.0)
        })
        .collect();
    let g_at = |j: i64| if j < 0 { 0.0 } else { g[j as usize] };
    let mut masses: Vec<f64> = (0..=last as i64)
        .map(|j| ((g_at(j + 1) - 2.0 * g_at(j) + g_at(j - 1)) / h).max(0.0))
        .collect();
    // The cut tail joins the last point.
    let total: f64 = masses.iter().sum();
    if let Some(m) = masses.last_mut() {
        *m += (1.0 - total).max(0.0);
    }
    let total: f64 = masses.iter().sum();
    masses.iter_mut().for_each(|m| *m /= total);
    // Leading points without mass are dropped.
    let first = masses.iter().position(|m| *m > 0.0).unwrap_or(0);
    Some((first as i64, masses.split_off(first)))
}

/// U = S - A on the lattice: (index of U's first point, masses).
fn increment(s: &Pmf, a: &Pmf) -> Pmf {
    let (s0, sp) = s;
    let (a0, ap) = a;
    let lo = s0 - (a0 + ap.len() as i64 - 1);
    let mut u = vec![0.0; sp.len() + ap.len() - 1];
    for (i, ps) in sp.iter().enumerate() {
        if *ps == 0.0 {
            continue;
        }
        for (j, pa) in ap.iter().enumerate() {
            // S at s0 + i, A at a0 + j: U = s0 + i - a0 - j = lo + i + (|a| - 1 - j).
            u[i + ap.len() - 1 - j] += ps * pa;
        }
    }
    (lo, u)
}

/// The stationary solution of Lindley's recursion V' = max(0, V + U) for integer steps U
/// (U's first point at `u_lo`, probabilities `u`): P(V = n) for n = 0, 1, ..., the tail
/// below [`CUT`] held in the last cell, and the descending ladder's missing mass (the
/// iteration gap). Exact on the integers: no lattice rounding is involved.
pub(crate) fn integer_lindley(u_lo: i64, u: &[f64]) -> (Vec<f64>, f64) {
    let (a, gap) = ladder(u_lo, u);
    (renewal(&a), gap)
}

/// The strict ascending ladder height distribution (index i holds height i + 1) of the walk
/// with steps U (U's first point at `u_lo`), and the descending ladder's missing mass.
fn ladder(u_lo: i64, u: &[f64]) -> (Vec<f64>, f64) {
    let up = (u_lo + u.len() as i64 - 1).max(0) as usize; // largest step up
    let down = (-u_lo).max(0) as usize; // largest step down
    let at = |k: i64| -> f64 {
        let i = k - u_lo;
        if i < 0 || i >= u.len() as i64 {
            0.0
        } else {
            u[i as usize]
        }
    };
    // a[k] for k in 1..=up (a[0] unused); d[m] for m in 0..=down.
    let mut a = vec![0.0; up + 1];
    let mut d = vec![0.0; down + 1];
    let per_iteration = ((up + 1) * (down + 1)).max(1) as f64 * 2.0;
    let max_iterations = (WORK_BUDGET / per_iteration).clamp(10.0, 1e7) as usize;
    let mut gap = 1.0;
    for _ in 0..max_iterations {
        // Gauss-Seidel: each sum uses the entries of higher index, already updated.
        for k in (1..=up).rev() {
            let n = down.min(up - k);
            let sum = at(k as i64) + dot(&a[k + 1..=k + n], &d[1..=n]);
            a[k] = sum / (1.0 - d[0]).max(f64::MIN_POSITIVE);
        }
        for m in (0..=down).rev() {
            let n = up.min(down - m);
            d[m] = at(-(m as i64)) + dot(&a[1..=n], &d[m + 1..=m + n]);
        }
        let missing = 1.0 - d.iter().sum::<f64>();
        if (missing - gap).abs() < 1e-15 || missing < 1e-12 {
            gap = missing.max(0.0);
            break;
        }
        gap = missing.max(0.0);
    }
    a.remove(0);
    (a, gap)
}

/// The dot product of two equally long slices, in four independent sums (which the
/// compiler keeps in vector registers; one running sum would serialise every addition).
fn dot(x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    let mut acc = [0.0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(p, q)| p * q)
        .sum();
    for (p, q) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += p[l] * q[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// P(W = n) for n = 0, 1, ...: w_0 = 1 - sum a, w_n = sum_i a_i w_{n-i}, until the mass
/// left is below [`CUT`] or the grid is full (the rest then held in the last cell).
fn renewal(a: &[f64]) -> Vec<f64> {
    let p: f64 = a.iter().sum();
    let mut w = vec![(1.0 - p).max(0.0)];
    let mut total = w[0];
    while total < 1.0 - CUT && w.len() < MAX_CELLS {
        let n = w.len();
        let mut x = 0.0;
        for (i, ai) in a.iter().enumerate().take(n) {
            // a[i] is the height i + 1.
            x += ai * w[n - 1 - i];
        }
        w.push(x);
        total += x;
        if x == 0.0 && n > a.len() {
            break;
        }
    }
    if let Some(last) = w.last_mut() {
        *last += (1.0 - total).max(0.0);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erlang(k: u32, mean: f64) -> Service {
        Service::gamma(mean, 1.0 / f64::from(k)).unwrap()
    }

    /// GI/M/1: P(W > t) = sigma e^{-mu (1 - sigma) t}, sigma = A*(mu (1 - sigma)), and
    /// E\[W\] = sigma / (mu (1 - sigma)). For Erlang-k gaps of mean 1/lambda,
    /// A*(s) = (k lambda / (k lambda + s))^k.
    fn ek_m1(k: u32, lambda: f64, mu: f64) -> (f64, f64) {
        let kl = f64::from(k) * lambda;
        let mut sigma = 0.5;
        for _ in 0..10_000 {
            sigma = (kl / (kl + mu * (1.0 - sigma))).powi(k as i32);
        }
        (sigma, mu * (1.0 - sigma))
    }

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    fn quantile(g: &LindleyGrid, q: f64) -> f64 {
        let q = crate::units::Quantile::new(q).unwrap();
        crate::tail::quantile_by_bisection(|t| g.tail(t), q, g.mean_s())
    }

    #[test]
    fn linear_rounding_keeps_means() {
        for d in [
            Service::exponential(1.0).unwrap(),
            Service::gamma(1.0, 0.5).unwrap(),
            Service::gamma(1.0, 4.0).unwrap(),
            Service::lognormal(1.0, 1.0).unwrap(),
            Service::lognormal(1.0, 4.0).unwrap(),
            Service::deterministic(1.03).unwrap(),
        ] {
            for h in [0.01, 0.1, 0.5] {
                let Some((first, p)) = pmf(&d, h) else {
                    continue;
                };
                let mean: f64 = p
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (first + i as i64) as f64 * h * m)
                    .sum();
                let total: f64 = p.iter().sum();
                assert!((total - 1.0).abs() < 1e-9);
                // Exact but for the cut tail (below 1e-9 of the mass).
                assert!((mean - d.mean_s()).abs() < 1e-4, "{d:?} h {h}: mean {mean}");
            }
        }
    }

    #[test]
    fn erlang_arrivals_exponential_service_match_gi_m_1() {
        for (k, rho) in [(1u32, 0.5), (2, 0.8), (4, 0.9), (21, 0.95)] {
            let g = LindleyGrid::solve(&erlang(k, 1.0 / rho), &Service::exponential(1.0).unwrap())
                .unwrap();
            let (sigma, decay) = ek_m1(k, rho, 1.0);
            let mean = sigma / decay;
            assert!(
                rel(g.mean_s(), mean) < 0.005,
                "E_{k}/M/1 rho {rho}: mean {} vs {mean}",
                g.mean_s()
            );
            for q in [0.99, 0.999] {
                let exact = (sigma / (1.0 - q)).ln() / decay;
                let got = quantile(&g, q);
                assert!(
                    rel(got, exact) < 0.01,
                    "E_{k}/M/1 rho {rho} p{q}: {got} vs {exact}"
                );
            }
            assert!(
                rel(g.p_wait(), sigma) < 0.01,
                "P(wait) {} vs {sigma}",
                g.p_wait()
            );
        }
    }
}
