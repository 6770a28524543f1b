//! Seeded random streams and samplers.
//!
//! Every run has one root seed. Each purpose (arrivals, lengths, server jitter, client
//! costs, assignment) draws from its own PCG stream derived from it, so changing, say,
//! the cost distribution leaves the arrival times of the same seed untouched.

use crate::scenario::Lengths;
use crate::service::Service;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::{Distribution, Exp1, Gamma, LogNormal, Normal, StandardNormal};
use rand_pcg::Pcg64Mcg;

/// Seconds to whole nanoseconds, rounded to nearest; negatives and NaN become 0.
#[inline]
pub fn ns_from_secs(s: f64) -> u64 {
    if s.is_nan() || s <= 0.0 {
        0
    } else if s >= u64::MAX as f64 * 1e-9 {
        u64::MAX
    } else {
        // Round half up by hand: f64::round is a libm call on hot paths.
        (s * 1e9 + 0.5) as u64
    }
}

/// The generator every stream uses: PCG-64 MCG (128-bit multiplicative congruential
/// state, XSL-RR output), fast and statistically strong, never seeded from the OS.
pub type SimRng = Pcg64Mcg;

/// The stream of `purpose` under `seed`: the two are mixed by SplitMix64 so neighbouring
/// seeds and purposes give unrelated streams.
pub fn stream(seed: u64, purpose: u64) -> SimRng {
    let mut z = seed ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    SimRng::seed_from_u64(z ^ (z >> 31))
}

/// Purposes of the streams.
pub mod purpose {
    /// Arrival gaps.
    pub const ARRIVALS: u64 = 1;
    /// Input and output lengths.
    pub const LENGTHS: u64 = 2;
    /// Server latency jitter.
    pub const SERVER: u64 = 3;
    /// Client per-event costs.
    pub const CLIENT: u64 = 4;
    /// Random assignment.
    pub const POLICY: u64 = 5;
}

/// A service-time distribution prepared for fast sampling, in nanoseconds.
#[derive(Debug, Clone)]
pub enum Sampler {
    /// Always the same.
    Const(u64),
    /// Exponential with this mean (seconds).
    Exp(f64),
    /// Gamma.
    Gamma(Gamma<f64>),
    /// Lognormal.
    LogNormal(LogNormal<f64>),
    /// Uniform over measured samples (nanoseconds).
    Empirical(Vec<u64>),
}

impl Sampler {
    /// A sampler for `service`, which must be valid.
    pub fn new(service: &Service) -> Self {
        match service {
            Service::Deterministic { mean_s } => Self::Const(ns_from_secs(*mean_s)),
            Service::Exponential { mean_s } => Self::Exp(*mean_s),
            Service::Gamma { mean_s, scv } => Self::Gamma(
                Gamma::new(1.0 / scv, mean_s * scv).expect("validated gamma parameters"),
            ),
            Service::Lognormal { mean_s, scv } => {
                let s2 = (1.0 + scv).ln();
                Self::LogNormal(
                    LogNormal::new(mean_s.ln() - s2 / 2.0, s2.sqrt()).expect("validated lognormal"),
                )
            }
            Service::Empirical { samples_s } => {
                Self::Empirical(samples_s.iter().map(|s| ns_from_secs(*s)).collect())
            }
            // Service is non-exhaustive for other crates; every variant is handled above.
            #[allow(unreachable_patterns)]
            other => Self::Const(ns_from_secs(other.mean_s())),
        }
    }

    /// One draw, nanoseconds.
    #[inline]
    pub fn sample_ns<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Self::Const(ns) => *ns,
            Self::Exp(mean) => {
                let e: f64 = Exp1.sample(rng);
                ns_from_secs(e * mean)
            }
            Self::Gamma(g) => ns_from_secs(g.sample(rng)),
            Self::LogNormal(l) => ns_from_secs(l.sample(rng)),
            Self::Empirical(v) => v[rng.random_range(0..v.len())],
        }
    }

    /// One draw, seconds (full precision, for the textbook fast path).
    #[inline]
    pub fn sample_s<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Self::Const(ns) => *ns as f64 * 1e-9,
            Self::Exp(mean) => {
                let e: f64 = Exp1.sample(rng);
                e * mean
            }
            Self::Gamma(g) => g.sample(rng),
            Self::LogNormal(l) => l.sample(rng),
            Self::Empirical(v) => v[rng.random_range(0..v.len())] as f64 * 1e-9,
        }
    }
}

/// Draws token counts.
#[derive(Debug, Clone)]
pub enum LengthSampler {
    /// Always this many.
    Fixed(u32),
    /// Uniform on [min, max].
    Uniform(u32, u32),
    /// Normal, rounded, at least 1.
    Normal(Normal<f64>),
    /// Lognormal, rounded, at least 1.
    LogNormal(LogNormal<f64>),
}

impl LengthSampler {
    /// A sampler for `lengths`, which must be valid.
    pub fn new(lengths: &Lengths) -> Self {
        match *lengths {
            Lengths::Fixed { tokens } => Self::Fixed(tokens),
            Lengths::Uniform { min, max } => Self::Uniform(min, max),
            Lengths::Normal { mean, sd } => {
                Self::Normal(Normal::new(mean, sd).expect("validated normal"))
            }
            Lengths::Lognormal { mean, scv } => {
                let s2 = (1.0 + scv).ln();
                Self::LogNormal(
                    LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt()).expect("validated lognormal"),
                )
            }
        }
    }

    /// One draw.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let clamp = |x: f64| x.round().clamp(1.0, f64::from(u32::MAX)) as u32;
        match self {
            Self::Fixed(n) => *n,
            Self::Uniform(lo, hi) => rng.random_range(*lo..=*hi),
            Self::Normal(n) => clamp(n.sample(rng)),
            Self::LogNormal(l) => clamp(l.sample(rng)),
        }
    }
}

/// A standard normal draw (for latency jitter).
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    StandardNormal.sample(rng)
}
