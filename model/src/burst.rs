//! The wait a customer adds inside its own burst, mixed with the wait of its burst.
//!
//! A burst of N events reaches a FIFO server together. The event at position j (0-based,
//! uniform over 0..N) waits W_b + U_j, where W_b is the burst's wait behind earlier bursts
//! and U_j = S_1 + ... + S_j the service of the j events ahead of it in the burst.
//! So P(W > t) = (1/N) sum_j E\[P(W_b > t - U_j)\].

use crate::error::{ModelError, Result};
use crate::service::{Service, gamma_p};

/// The checks every one-server burst queue makes: a burst holds an event, the burst rate
/// is positive, and the load lambda_b N E\[S\] is below one.
/// Positions of a burst summed one by one; more are summed in this many blocks.
pub(crate) const EXACT_POSITIONS: u32 = 4_096;

/// The sum of `f(j)` for j in `from..to`, where `f` is monotone in j with values in [0, 1].
///
/// Up to [`EXACT_POSITIONS`] terms are summed one by one. Beyond, the range is cut into that
/// many equal blocks, each counted as its length times `f` at its midpoint: `f` being
/// monotone, a block's true sum lies between its length times `f` at its two ends, so the
/// total is off by at most (block length) x (the total change of `f`) <= block length.
/// Divided by a burst of n, that is an error of at most n / 4096 / n in probability
/// (2.4e-4), whatever the burst, and the work stays bounded.
fn sum_monotone(from: u32, to: u32, f: impl Fn(f64) -> f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let count = u64::from(to - from);
    if count <= u64::from(EXACT_POSITIONS) {
        return (from..to).map(|j| f(f64::from(j))).sum();
    }
    let blocks = u64::from(EXACT_POSITIONS);
    (0..blocks)
        .map(|b| {
            let lo = u64::from(from) + count * b / blocks;
            let hi = u64::from(from) + count * (b + 1) / blocks;
            (hi - lo) as f64 * f((lo + hi - 1) as f64 / 2.0)
        })
        .sum()
}

pub(crate) fn check_single_server(
    burst_rate_per_s: f64,
    burst: u32,
    service: &Service,
) -> Result<()> {
    if burst == 0 || burst > crate::limits::MAX_TOKENS {
        return Err(ModelError::invalid(
            "burst",
            burst,
            "a burst holds between 1 and 10,000,000 events",
        ));
    }
    if !(burst_rate_per_s.is_finite() && burst_rate_per_s > 0.0) {
        return Err(ModelError::invalid(
            "burst rate",
            burst_rate_per_s,
            "must be > 0 per second",
        ));
    }
    let load = burst_rate_per_s * f64::from(burst) * service.mean_s();
    if load >= 1.0 {
        return Err(ModelError::unstable(load, 1));
    }
    Ok(())
}

/// Within-burst service sums in closed form: U_j = j m (deterministic) or
/// Gamma(j k, sigma) (gamma with shape k and scale sigma, exponential with k = 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Within {
    /// Every event costs exactly `mean_s`.
    Constant { mean_s: f64 },
    /// Gamma(shape, scale) per event.
    Gamma { shape: f64, scale_s: f64 },
}

impl Within {
    /// The closed-form family for `service`: exact for deterministic, exponential and gamma;
    /// the two-moment gamma fit otherwise (the bool says whether it is exact).
    pub(crate) fn of(service: &Service) -> (Self, bool) {
        let exact = matches!(
            service,
            Service::Deterministic { .. } | Service::Exponential { .. } | Service::Gamma { .. }
        );
        let w = match service.gamma_fit() {
            Service::Deterministic { mean_s } => Self::Constant { mean_s },
            Service::Gamma { mean_s, scv } => Self::Gamma {
                shape: 1.0 / scv,
                scale_s: mean_s * scv,
            },
            // gamma_fit only returns the two variants above.
            other => Self::Constant {
                mean_s: other.mean_s(),
            },
        };
        (w, exact)
    }

    /// P(W > t) for a burst of `n` when P(W_b > x) = `tail_b(x)` (1 for x < 0), summed over
    /// positions. Used when U_j is a constant shift.
    ///
    /// Positions shifted past t count 1 each without evaluation. Up to [`EXACT_POSITIONS`]
    /// remaining positions are summed one by one; beyond, they are summed in that many
    /// equal blocks by their midpoints. `tail_b` is non-increasing, so a block's true sum
    /// lies between its count times `tail_b` at its two ends, and the result is off by at
    /// most m / n for blocks of m positions (for bursts of 10^6 events, 2.4e-4 in
    /// probability), while the work per evaluation stays bounded.
    pub(crate) fn mix_shifted(n: u32, mean_s: f64, t: f64, tail_b: impl Fn(f64) -> f64) -> f64 {
        // Positions 0..live have x = t - j E[S] >= 0.
        let live = if t < 0.0 {
            0
        } else {
            ((t / mean_s).floor() + 1.0).min(f64::from(n)) as u32
        };
        let sum =
            f64::from(n - live) + sum_monotone(0, live, |j| tail_b((t - j * mean_s).max(0.0)));
        sum / f64::from(n)
    }

    /// P(W > t) for a burst of `n` when the burst wait has the exponential tail
    /// P(W_b > x) = min(cap, c e^{-theta x}) for x >= 0.
    ///
    /// For gamma U_j the expectation is closed: E\[c e^{-theta (t - U)}; U <= t\] =
    /// c e^{-theta t} (1 - theta sigma)^{-jk} P(U* <= t), where U* is U exponentially tilted,
    /// Gamma(jk, sigma / (1 - theta sigma)); the cap is applied to the j = 0 term only.
    /// When theta sigma >= 1 that expectation diverges (the within-burst tail is heavier
    /// than the burst wait's) and U_j is replaced by its mean.
    pub(crate) fn mix_exponential(self, n: u32, t: f64, c: f64, theta: f64, cap: f64) -> f64 {
        let tail_b = |x: f64| {
            if x < 0.0 {
                1.0
            } else {
                (c * (-theta * x).exp()).min(cap)
            }
        };
        match self {
            Self::Constant { mean_s } => Self::mix_shifted(n, mean_s, t, tail_b),
            Self::Gamma { shape, scale_s } if theta * scale_s < 1.0 => {
                let tilted = scale_s / (1.0 - theta * scale_s);
                let log_1m = (1.0 - theta * scale_s).ln();
                // P(W_j > t) grows with j (U_j grows stochastically), so the positions may
                // be summed in blocks with the bound of `sum_monotone`.
                let sum = tail_b(t)
                    + sum_monotone(1, n, |j| {
                        let a = j * shape;
                        let p_beyond = 1.0 - gamma_p(a, t / scale_s);
                        let inside = c * (-theta * t - a * log_1m).exp() * gamma_p(a, t / tilted);
                        (p_beyond + inside).min(1.0)
                    });
                sum / f64::from(n)
            }
            Self::Gamma { shape, scale_s } => Self::mix_shifted(n, shape * scale_s, t, tail_b),
        }
    }
}
