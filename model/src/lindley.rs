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
//!    d_m = u_{-m} + sum_{i>=1} a_i d_{i+m} (m >= 0). Small walks iterate these from zero
//!    (Grassmann and Jain, 1989): both increase to the solution; the mass d still lacks,
//!    1 - sum d (the descending ladder is proper when the queue is stable), is reported as
//!    the gap, and the iteration stops below 1e-12 or at a fixed budget of work. That
//!    costs the product of the largest steps up and down per sweep, and heavy-tailed
//!    services make the steps up long, so large walks are factored on the unit circle
//!    instead, in n log n (Ackroyd's cepstral method: the Fourier coefficients of log(1 -
//!    U(z)) / (1 - 1/z) split into those of the two factors); there the gap is the largest
//!    coefficient either factor has outside its support (below 1e-10, else the transform
//!    is lengthened, and past 2^18 points the iteration takes over).
//! 4. P(W = 0) = 1 - sum a and P(W = n) = sum_i a_i P(W = n - i): the renewal recursion
//!    (or, for long ladders, W(z) = P(W = 0) / (1 - A(z)) divided out on the unit circle,
//!    with the wrapped-around tail below 1e-9) runs until the tail left is below 1e-12.
//! 5. The lattice error is estimated by solving again on a lattice twice as coarse: with
//!    O(h^2) rounding the fine solution is off by about a third of the difference
//!    (Richardson), which is reported as the discretisation error of the mean.
//!
//! Heavy-tailed services (lognormal) are cut where their tail falls below 1e-9, the cut
//! mass kept in the last cell; the report's error does not include that cut.

use crate::error::{ModelError, Result};
use crate::fft::{Complex, Fft};
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
    /// See [`LindleyGrid::iteration_gap`].
    iteration_gap: f64,
    /// Estimated discretisation error of the mean, seconds.
    mean_error_s: f64,
}

/// Most cells in the wait grid.
const MAX_CELLS: usize = 1 << 16;
/// Most lattice points of the increment U.
pub(crate) const MAX_KERNEL: usize = 1 << 14;
/// Cells per mean service time on the fine lattice.
const CELLS_PER_SERVICE: f64 = 50.0;
/// Multiply-adds allowed per solve (bounds the time whatever the load).
const WORK_BUDGET: f64 = 4e9;
/// Tail mass below which a distribution is cut (and the wait grid ends).
const CUT: f64 = 1e-12;
/// Mass a full wait grid may hold in its last cell (the tail it could not reach) before
/// the solution is refused: a thousand times [`CUT`], far below any quantile read.
const FOLDED_LIMIT: f64 = 1e-9;
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
        Self::solve_with(arrivals, service, &|h| pmf(service, h))
    }

    /// [`LindleyGrid::solve`] with the service's lattice distribution at any step given by
    /// `service_on` (for services known only as lattice distributions, such as a burst's
    /// total); `service` has its mean and SCV and sets the step.
    pub(crate) fn solve_with(
        arrivals: &Service,
        service: &Service,
        service_on: &dyn Fn(f64) -> Option<Pmf>,
    ) -> Result<Self> {
        let rho = service.mean_s() / arrivals.mean_s();
        if rho >= 1.0 {
            return Err(ModelError::unstable(rho, 1));
        }
        let h = step(service, arrivals);
        let fine = Lattice::solve(arrivals, service_on, h)?;
        let coarse = Lattice::solve(arrivals, service_on, 2.0 * fine.h)?;
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

    /// What the factorisation leaves unexplained (0 when exact): the descending ladder's
    /// missing mass when iterated, the largest stray coefficient when transformed.
    pub fn iteration_gap(&self) -> f64 {
        self.iteration_gap
    }

    /// Lattice step, seconds.
    pub fn step_s(&self) -> f64 {
        self.h
    }

    /// P(W = i h) for each lattice point i (the lattice's own masses).
    pub(crate) fn masses(&self) -> Vec<f64> {
        let mut last = 0.0;
        self.cdf
            .iter()
            .map(|c| {
                let m = (c - last).max(0.0);
                last = *c;
                m
            })
            .collect()
    }
}

/// The lattice step: a fiftieth of the shorter of the two means, or, when waits are long
/// (heavy traffic, variable service), up to a thousandth of the wait Kingman's formula
/// expects (at most a fifth of that mean): the rounding error of the mean is O(h^2) in
/// absolute terms, so it stays small against long waits while the work falls by the
/// square of the step. When that wait is short against the means (smooth arrivals and
/// service: E_100/D/1 at rho 0.8 waits about 20 ms per second of service), the step is a
/// twentieth of it instead (down to a thousandth of the shorter mean), or the wait would
/// span a cell or two and its quantiles be off by a fraction of one.
fn step(service: &Service, arrivals: &Service) -> f64 {
    let base = service.mean_s().min(arrivals.mean_s());
    let rho = service.mean_s() / arrivals.mean_s();
    let kingman = rho / (1.0 - rho) * (arrivals.scv() + service.scv()) / 2.0 * service.mean_s();
    let h = (base / CELLS_PER_SERVICE).max((kingman / 1000.0).min(base / 5.0));
    h.min((kingman / 20.0).max(base / 1000.0))
}

struct Lattice {
    h: f64,
    cdf_upper: Vec<f64>,
    mean_s: f64,
    gap: f64,
}

impl Lattice {
    fn solve(arrivals: &Service, service: &dyn Fn(f64) -> Option<Pmf>, h0: f64) -> Result<Self> {
        let mut h = h0;
        // Coarsen until both distributions and the increment fit their caps.
        let (s, a) = loop {
            if let (Some(s), Some(a)) = (service(h), pmf(arrivals, h))
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
        if reaches_past_the_grid(u_lo, &u, &a) {
            return Err(past_the_grid());
        }
        let (w, gap) = integer_lindley(u_lo, &u);
        // A grid that filled up before its tail fell below the cut holds the rest of the
        // wait's distribution in its last cell: every mean and quantile read from it would
        // be capped at the grid's end. That is refused, not reported.
        if w.len() >= MAX_CELLS && w.last().copied().unwrap_or(0.0) > FOLDED_LIMIT {
            return Err(past_the_grid());
        }
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

fn past_the_grid() -> ModelError {
    ModelError::invalid(
        "utilisation",
        "near 1",
        "is too close to 1 for the lattice: the wait's distribution reaches past its \
         65,536 cells, so its mean and quantiles would be capped at their end",
    )
}

/// Utilisation from which [`reaches_past_the_grid`] may refuse a walk before solving it.
const HEAVY_TRAFFIC: f64 = 0.999;
/// The mean wait, in cells, by Kingman's bound, from which a heavy-traffic walk is refused
/// before solving it.
const KINGMAN_CELLS: f64 = (MAX_CELLS / 8) as f64;

/// Whether the walk with steps U (from `u_lo`) waits so long that its solution would fill
/// the grid and be refused after all its work: a near-saturated queue, where the factoring
/// converges slowest, would otherwise spend its whole work budget (seconds) to be refused.
///
/// The grid refuses a wait whose tail past its last cell holds more than [`FOLDED_LIMIT`];
/// for a tail shaped like an exponential of mean m that is m above about
/// `MAX_CELLS / ln(1 / FOLDED_LIMIT)`, some 3,200 cells. Kingman's bound,
/// Var U / (2 |E U|), is the heavy-traffic limit of the mean, short of it by the idle
/// period's E\[I^2\] / (2 E\[I\]), which stays within a few interarrival times while the bound
/// grows as 1 / (1 - rho). So at utilisation 0.999 or more, a bound of 8,192 cells leaves
/// a mean of thousands of cells: refused either way. The test checks the rule against
/// M/G/1's exact mean.
fn reaches_past_the_grid(u_lo: i64, u: &[f64], a: &Pmf) -> bool {
    let (mut m1, mut m2) = (0.0, 0.0);
    for (i, p) in u.iter().enumerate() {
        let x = (u_lo + i as i64) as f64;
        m1 += p * x;
        m2 += p * x * x;
    }
    let gap_mean: f64 =
        a.1.iter()
            .enumerate()
            .map(|(i, p)| p * (a.0 + i as i64) as f64)
            .sum();
    // rho = E[S] / E[A] = 1 + E[U] / E[A].
    let rho = 1.0 + m1 / gap_mean.max(f64::MIN_POSITIVE);
    let kingman = (m2 - m1 * m1) / (2.0 * (-m1).max(f64::MIN_POSITIVE));
    rho >= HEAVY_TRAFFIC && kingman >= KINGMAN_CELLS
}

/// A distribution on the lattice h Z: (index of the first point, masses).
pub(crate) type Pmf = (i64, Vec<f64>);

/// `d` on the lattice by linear rounding: a value x between points j and j + 1 goes to
/// both, in the proportions that keep it at x on average. The masses are
/// p_j = E\[(1 - |X / h - j|)+\] = (G((j+1)h) - 2 G(jh) + G((j-1)h)) / h with G the integral
/// of the CDF (computed through the integral of the tail, in closed form by the
/// equilibrium CDF), so every distribution keeps its mean exactly, up to its cut tail (see
/// [`TAIL_MASS`]), whose mass the last point keeps.
/// `None` when the cut would need more than [`MAX_KERNEL`] points: the step is too fine.
fn pmf(d: &Service, h: f64) -> Option<Pmf> {
    pmf_capped(d, h, MAX_KERNEL)
}

/// [`pmf`] with at most `max_points` points.
pub(crate) fn pmf_capped(d: &Service, h: f64, max_points: usize) -> Option<Pmf> {
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
        if hi / h > max_points as f64 {
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
    let last = ((hi / h).ceil() as usize).clamp(1, max_points);
    // The second differences of G(x) = int_0^x F are those of H(x) = int_x^inf (1 - F) =
    // E[X] (1 - F_e(x)) (`Service::equilibrium_tail`), since G = x - E[X] + H and a line
    // has none. H is used: it is small where the tail is, while G is about x there and its
    // differences would lose everything below x's last digit (at 2,000 mean costs, steps
    // of 1/32, the masses of a lognormal's far tail came out with 9 % too much variance).
    // For x < 0, H(x) = E[X] - x.
    let mean = d.mean_s();
    let tail_integral: Vec<f64> = (0..=last + 1)
        .map(|j| mean * d.equilibrium_tail(j as f64 * h))
        .collect();
    let h_at = |j: i64| {
        if j < 0 {
            mean - j as f64 * h
        } else {
            tail_integral[j as usize]
        }
    };
    let mut masses: Vec<f64> = (0..=last as i64)
        .map(|j| ((h_at(j + 1) - 2.0 * h_at(j) + h_at(j - 1)) / h).max(0.0))
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
    let length = transform_length(u_lo, u);
    let (a, gap) = ladder(u_lo, u, length);
    (renewal(&a, length), gap)
}

/// A first length for transforms on the unit circle: four times the walk's span, and
/// room for forty times the mean wait Kingman's bound allows (E\[W\] <= Var U / (2 |E U|)),
/// where an exponential tail has fallen below 1e-10 of the mass. Heavier tails fail the
/// transforms' checks, which double the length.
fn transform_length(u_lo: i64, u: &[f64]) -> usize {
    let (mut m1, mut m2) = (0.0, 0.0);
    for (i, p) in u.iter().enumerate() {
        let x = (u_lo + i as i64) as f64;
        m1 += p * x;
        m2 += p * x * x;
    }
    let bound = (m2 - m1 * m1) / (2.0 * m1.abs().max(f64::MIN_POSITIVE));
    let room = (40.0 * bound).min(MAX_TRANSFORM as f64) as usize;
    (4 * (u.len() + 1))
        .max(room)
        .max(1 << 12)
        .next_power_of_two()
}

/// The strict ascending ladder height distribution (index i holds height i + 1) of the walk
/// with steps U (U's first point at `u_lo`), and what its factorisation leaves unexplained
/// (the gap).
///
/// Small walks are factored by Gauss-Seidel ([`ladder_by_iteration`]), whose work is the
/// product of the largest steps up and down times its sweeps; large ones on the unit
/// circle ([`ladder_by_transform`]), whose work grows as n log n, and by iteration
/// again when the transform's own check fails.
fn ladder(u_lo: i64, u: &[f64], length: usize) -> (Vec<f64>, f64) {
    let up = (u_lo + u.len() as i64 - 1).max(0) as usize;
    let down = (-u_lo).max(0) as usize;
    if (up + 1) * (down + 1) > ITERATE_UP_TO
        && let Some(solved) = ladder_by_transform(u_lo, u, length)
    {
        return solved;
    }
    ladder_by_iteration(u_lo, u)
}

/// The largest product of the steps up and down that [`ladder`] factors by iteration.
const ITERATE_UP_TO: usize = 1 << 14;
/// The transform's check: coefficients its factors must not have (beyond their supports)
/// stay below this.
const TRANSFORM_RESIDUAL: f64 = 1e-10;
/// The longest transform [`ladder_by_transform`] tries before giving up.
const MAX_TRANSFORM: usize = 1 << 18;

/// The ladder heights by the Wiener-Hopf factorisation computed on the unit circle
/// (the cepstral method of signal processing, as Ackroyd applied it to GI/G/1).
///
/// 1 - U(z) vanishes at z = 1, and so does 1 - D(z): dividing both by 1 - 1/z leaves
/// G(z) = (1 - A(z)) Q(z), where G's coefficients are g_n = P(U < n) for n <= 0 and
/// -P(U >= n) for n >= 1, and Q(z) = sum_m P(H > m) z^-m with H the weak descending
/// ladder height. Neither factor vanishes on or (on its side) off the circle, so log G
/// has a continuous argument with no winding, and its Fourier coefficients split: those
/// of positive index belong to log(1 - A), the rest to log Q. Exponentiating the positive
/// part and reading coefficients gives A.
///
/// The check: A must have no coefficient above the largest step up, and Q none at or
/// beyond the largest step down (|coefficient| < [`TRANSFORM_RESIDUAL`]); a transform too
/// short for the walk (its cepstrum wrapped around) fails it and is doubled. The largest
/// such coefficient is returned as the gap. `None` when the walk's generating function
/// has zeros on the circle (a periodic lattice) or the check still fails at
/// [`MAX_TRANSFORM`] points.
fn ladder_by_transform(u_lo: i64, u: &[f64], length: usize) -> Option<(Vec<f64>, f64)> {
    let hi = u_lo + u.len() as i64 - 1;
    let (up, down) = (hi.max(0) as usize, (-u_lo).max(0) as usize);
    if up == 0 || down == 0 {
        return None;
    }
    // g_n for n = u_lo + 1 ..= hi; tails summed from their small end.
    let mut g = vec![0.0; (hi - u_lo) as usize];
    let mut below = 0.0;
    for n in u_lo + 1..=0 {
        below += u[(n - 1 - u_lo) as usize];
        g[(n - u_lo - 1) as usize] = below;
    }
    let mut above = 0.0;
    for n in (1..=hi).rev() {
        above += u[(n - u_lo) as usize];
        g[(n - u_lo - 1) as usize] = -above;
    }
    let mut m = length;
    while m <= MAX_TRANSFORM {
        if let Some(solved) = factor_on_circle(&Fft::new(m), u_lo + 1, &g, up, down) {
            return Some(solved);
        }
        m *= 2;
    }
    None
}

/// One attempt of [`ladder_by_transform`] with `fft`'s length; `g` starts at index `g_lo`.
fn factor_on_circle(
    fft: &Fft,
    g_lo: i64,
    g: &[f64],
    up: usize,
    down: usize,
) -> Option<(Vec<f64>, f64)> {
    let m = fft.len();
    let mut x = vec![Complex::default(); m];
    for (i, gi) in g.iter().enumerate() {
        x[(g_lo + i as i64).rem_euclid(m as i64) as usize] = Complex::new(*gi, 0.0);
    }
    fft.evaluate(&mut x);
    // log G with its argument followed continuously round the circle; a step of more
    // than a quarter turn between neighbouring points means the circle is sampled too
    // coarsely to follow it.
    let start = x[0].arg();
    let (mut previous, mut argument) = (start, start);
    for v in x.iter_mut() {
        let r = v.norm();
        if !(r > 0.0 && r.is_finite()) {
            return None;
        }
        let angle = v.arg();
        let turn = wrap_angle(angle - previous);
        if turn.abs() > std::f64::consts::FRAC_PI_2 {
            return None;
        }
        previous = angle;
        argument += turn;
        *v = Complex::new(r.ln(), argument);
    }
    if (argument + wrap_angle(start - previous) - start).abs() > 1e-6 {
        return None; // G winds round zero: no canonical factorisation
    }
    fft.coefficients(&mut x);
    // A cepstrum still far from zero half way round has wrapped: the transform is too
    // short (checked here, before four more transforms are spent on it).
    if x[3 * m / 8..5 * m / 8]
        .iter()
        .any(|c| c.norm() > 0.1 * TRANSFORM_RESIDUAL)
    {
        return None;
    }
    // Split the cepstrum: indices 1 .. m/2 are positive powers, m/2 .. m negative ones.
    // Both parts are real series, so one transform carries the two (the second as the
    // imaginary part) and conjugate symmetry separates their values; the coefficients
    // of their exponentials, real again, come back together the same way.
    let mut both: Vec<Complex> = x
        .iter()
        .enumerate()
        .map(|(n, c)| {
            if (1..m / 2).contains(&n) {
                Complex::new(c.re, 0.0)
            } else {
                Complex::new(0.0, c.re)
            }
        })
        .collect();
    fft.evaluate(&mut both);
    let values: Vec<Complex> = (0..m)
        .map(|j| {
            let (z, w) = (both[j], both[(m - j) % m]);
            // P = (z + conj w) / 2 and N = (z - conj w) / 2i at this root.
            let p = Complex::new(0.5 * (z.re + w.re), 0.5 * (z.im - w.im));
            let n = Complex::new(0.5 * (z.im + w.im), -0.5 * (z.re - w.re));
            let (e, f) = (p.exp(), n.exp());
            Complex::new(e.re - f.im, e.im + f.re)
        })
        .collect();
    both = values;
    fft.coefficients(&mut both);
    let one_minus_a: Vec<f64> = both.iter().map(|v| v.re).collect();
    let q: Vec<f64> = both.iter().map(|v| v.im).collect();
    // Coefficients the factors must not have: A above `up` (and 1 - A's constant is 1);
    // Q at positive powers and at or beyond the power -down.
    let stray_a = one_minus_a[up + 1..]
        .iter()
        .map(|v| v.abs())
        .fold((one_minus_a[0] - 1.0).abs(), f64::max);
    let stray_q = q[1..m - down + 1]
        .iter()
        .map(|v| v.abs())
        .fold(0.0, f64::max);
    let residual = stray_a.max(stray_q);
    if residual.is_nan() || residual >= TRANSFORM_RESIDUAL {
        return None;
    }
    let a = one_minus_a[1..=up].iter().map(|v| (-v).max(0.0)).collect();
    Some((a, residual))
}

/// `x` wrapped into (-pi, pi].
fn wrap_angle(x: f64) -> f64 {
    x - std::f64::consts::TAU * (x / std::f64::consts::TAU).round()
}

/// [`ladder`] by Gauss-Seidel on the factorisation's coefficient equations, with the
/// descending ladder's missing mass as the gap.
fn ladder_by_iteration(u_lo: i64, u: &[f64]) -> (Vec<f64>, f64) {
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
///
/// Short ladders run the recursion; long ones divide on the unit circle, W(z) = (1 - p) /
/// (1 - A(z)), on a transform long enough that the wrapped-around tail (the mass its top
/// half still holds) is below [`WRAPPED_TAIL`].
fn renewal(a: &[f64], length: usize) -> Vec<f64> {
    if a.len() <= RECURSE_UP_TO {
        return renewal_by_recursion(a);
    }
    let p: f64 = a.iter().sum();
    let mut m = length.max((4 * (a.len() + 1)).next_power_of_two());
    loop {
        let fft = Fft::new(m);
        let mut x = vec![Complex::default(); m];
        x[0] = Complex::new(1.0, 0.0);
        for (v, ai) in x[1..].iter_mut().zip(a) {
            *v = Complex::new(-ai, 0.0);
        }
        fft.evaluate(&mut x);
        x.iter_mut().for_each(|v| *v = v.recip().scale(1.0 - p));
        fft.coefficients(&mut x);
        let wrapped: f64 = x[m / 2..].iter().map(|v| v.re).sum();
        if wrapped.abs() < WRAPPED_TAIL || m >= 2 * MAX_CELLS {
            return cut_tail(x.iter().map(|v| v.re.max(0.0)));
        }
        m *= 2;
    }
}

/// The longest ladder whose wait [`renewal`] computes by the recursion itself.
const RECURSE_UP_TO: usize = 256;
/// Mass a transform's top half may hold (see [`renewal`]): far below the tails the
/// quantiles read (1e-3 at p99.9).
const WRAPPED_TAIL: f64 = 1e-9;

fn renewal_by_recursion(a: &[f64]) -> Vec<f64> {
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
    }
    if let Some(last) = w.last_mut() {
        *last += (1.0 - total).max(0.0);
    }
    w
}

/// The masses up to where the tail left is below [`CUT`] (or [`MAX_CELLS`]), the rest
/// held in the last cell.
fn cut_tail(masses: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut w = Vec::new();
    let mut total = 0.0;
    for x in masses {
        w.push(x);
        total += x;
        if total >= 1.0 - CUT || w.len() == MAX_CELLS {
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

    /// E4/M/1 at rho 0.9999: the mean wait (about 6,250 service times by Kingman's
    /// heavy-traffic limit) puts much of the distribution past what the grid holds, so the
    /// solve is refused instead of returning a mean capped near the grid's end. Just
    /// below, at rho 0.99, it is still solved, and matches GI/M/1.
    #[test]
    fn a_wait_longer_than_the_grid_is_refused_not_capped() {
        let (mu, k) = (1.0, 4);
        // The fixed point converges slowly this near 1; after its 10,000 steps it is
        // still thousands of service times.
        let (sigma, theta) = ek_m1(k, 0.9999, mu);
        assert!(
            sigma / theta > 3000.0,
            "the truth is long: {}",
            sigma / theta
        );
        let e = LindleyGrid::solve(
            &erlang(k, 1.0 / 0.9999),
            &Service::exponential(1.0 / mu).unwrap(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("too close to 1 for the lattice"),
            "{e}"
        );
        let (sigma, theta) = ek_m1(k, 0.99, mu);
        let g = LindleyGrid::solve(
            &erlang(k, 1.0 / 0.99),
            &Service::exponential(1.0 / mu).unwrap(),
        )
        .unwrap();
        assert!(
            rel(g.mean_s(), sigma / theta) < 3e-3,
            "{} vs {}",
            g.mean_s(),
            sigma / theta
        );
    }

    /// The early refusal near saturation against M/G/1's exact mean (Pollaczek-Khinchine):
    /// wherever the rule refuses, the true mean wait is past the ~3,200 cells from which the
    /// grid's own check refuses; and the refusal is the solve's answer.
    #[test]
    fn a_heavy_traffic_walk_is_refused_before_it_is_solved_only_when_the_grid_would_be() {
        let arrivals_scv_one = |rho: f64| Service::exponential(1.0 / rho).unwrap();
        let mut refused = 0;
        for scv in [0.01, 0.5, 1.0, 4.0] {
            let service = Service::gamma(1.0, scv).unwrap();
            for one_less in [1e-2, 1e-3, 3e-4, 1e-4, 1e-5, 1e-7, 1e-10] {
                let rho = 1.0 - one_less;
                let arrivals = arrivals_scv_one(rho);
                let h = step(&service, &arrivals);
                let (s, a) = (pmf(&service, h).unwrap(), pmf(&arrivals, h).unwrap());
                let (u_lo, u) = increment(&s, &a);
                if !reaches_past_the_grid(u_lo, &u, &a) {
                    continue;
                }
                refused += 1;
                let exact = rho * (1.0 + scv) / (2.0 * (1.0 - rho));
                let cells = exact / h;
                let reach = MAX_CELLS as f64 / (1.0 / FOLDED_LIMIT).ln();
                assert!(
                    cells > reach,
                    "scv {scv}, rho {rho}: refused with a mean of {cells} cells"
                );
                let e = LindleyGrid::solve(&arrivals, &service).unwrap_err();
                assert!(
                    e.to_string().contains("too close to 1 for the lattice"),
                    "{e}"
                );
            }
        }
        assert!(refused >= 12, "the rule refused only {refused} cases");
        // Short of heavy traffic it never answers: M/M/1 at rho 0.99 is solved.
        let g = LindleyGrid::solve(&arrivals_scv_one(0.99), &Service::exponential(1.0).unwrap())
            .unwrap();
        assert!(rel(g.mean_s(), 99.0) < 3e-3, "{}", g.mean_s());
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

    /// A walk with a heavy right tail: lognormal services, Erlang-2 gaps, rho 0.9.
    fn heavy_walk(h: f64) -> Pmf {
        let s = pmf(&Service::lognormal(1.0, 4.0).unwrap(), h).unwrap();
        let a = pmf(&erlang(2, 1.0 / 0.9), h).unwrap();
        increment(&s, &a)
    }

    /// The two factorisations are independent methods (one iterates the coefficient
    /// equations, the other takes logarithms on the unit circle): they agree on the
    /// ladder heights, and the wait by division on the circle agrees with the recursion.
    #[test]
    fn transform_and_iteration_agree() {
        for h in [0.4, 0.2] {
            let (u_lo, u) = heavy_walk(h);
            let length = transform_length(u_lo, &u);
            let (by_transform, residual) = ladder_by_transform(u_lo, &u, length).unwrap();
            let (by_iteration, gap) = ladder_by_iteration(u_lo, &u);
            assert!(
                residual < TRANSFORM_RESIDUAL && gap < 1e-11,
                "{residual} {gap}"
            );
            assert_eq!(by_transform.len(), by_iteration.len());
            let worst = by_transform
                .iter()
                .zip(&by_iteration)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-10, "h {h}: ladders differ by {worst}");
            let (fast, slow) = (
                renewal(&by_transform, length),
                renewal_by_recursion(&by_transform),
            );
            let (mut cf, mut cs, mut worst) = (0.0, 0.0, 0.0f64);
            for i in 0..fast.len().max(slow.len()) {
                cf += fast.get(i).copied().unwrap_or(0.0);
                cs += slow.get(i).copied().unwrap_or(0.0);
                worst = worst.max((cf - cs).abs());
            }
            assert!(worst < 1e-10, "h {h}: wait CDFs differ by {worst}");
        }
    }

    /// A walk on the even integers has 1 - U(-1) = 0: no factorisation on the circle
    /// exists, the transform says so, and the iteration answers instead. Here the exact
    /// answer is the gambler's ruin: from steps +-2 with P(up) = 0.3 the walk's maximum
    /// is 2 M, M geometric with P(M >= j) = (3/7)^j.
    #[test]
    fn a_periodic_walk_falls_back_to_iteration() {
        let (u_lo, u) = (-2, vec![0.7, 0.0, 0.0, 0.0, 0.3]);
        assert!(ladder_by_transform(u_lo, &u, 1 << 12).is_none());
        let (w, _) = integer_lindley(u_lo, &u);
        let r: f64 = 3.0 / 7.0;
        for j in 0..10 {
            let exact = (1.0 - r) * r.powi(j);
            assert!(
                (w[2 * j as usize] - exact).abs() < 1e-10,
                "P(W = {}) {}",
                2 * j,
                w[2 * j as usize]
            );
            assert!(w[2 * j as usize + 1].abs() < 1e-12);
        }
    }
}
