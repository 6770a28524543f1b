//! Service-time descriptions: the per-event cost of a client's event loop.
//!
//! A mean wait needs two moments of the service time; a third gives the wait's second
//! moment (Takacs); quantiles need the distribution itself. [`Service`] is a named
//! distribution with exact moments, moment generating function where it exists, and the
//! equilibrium (residual-life) CDF that the numerical tail method integrates.

use std::fmt;

use serde::{Deserialize, Serialize};
use statrs::function::erf::erfc;
use statrs::function::gamma::{gamma_lr, gamma_ur};

use crate::error::{ModelError, Result};

/// The first three raw moments of a non-negative random variable, in seconds, s^2, s^3.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// E\[S\], seconds.
    pub mean_s: f64,
    /// E\[S^2\], seconds squared.
    pub m2: f64,
    /// E\[S^3\], seconds cubed.
    pub m3: f64,
}

impl Moments {
    /// Squared coefficient of variation Var\[S\] / E\[S\]^2.
    pub fn scv(&self) -> f64 {
        (self.m2 / (self.mean_s * self.mean_s) - 1.0).max(0.0)
    }

    /// Moments of the sum of `n` independent copies (cumulants add).
    pub fn sum_of(&self, n: u32) -> Moments {
        let n = f64::from(n);
        let m = self.mean_s;
        let var = self.m2 - m * m;
        let k3 = self.m3 - 3.0 * m * self.m2 + 2.0 * m * m * m;
        let (mm, vv, kk) = (n * m, n * var, n * k3);
        Moments {
            mean_s: mm,
            m2: vv + mm * mm,
            m3: kk + 3.0 * mm * vv + mm * mm * mm,
        }
    }
}

/// A service-time distribution with its parameters.
///
/// Every variant is fixed by its mean and, where it has one, its squared coefficient of
/// variation (SCV = variance / mean^2): the two numbers a user can measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Service {
    /// Always exactly `mean_s` (SCV 0).
    Deterministic {
        /// The constant service time, seconds.
        mean_s: f64,
    },
    /// Exponential with the given mean (SCV 1).
    Exponential {
        /// Mean, seconds.
        mean_s: f64,
    },
    /// Gamma with shape 1/scv and scale mean*scv. SCV 1 is exponential.
    Gamma {
        /// Mean, seconds.
        mean_s: f64,
        /// Squared coefficient of variation, > 0.
        scv: f64,
    },
    /// Lognormal with sigma^2 = ln(1 + scv). Heavy-tailed: no moment generating function.
    Lognormal {
        /// Mean, seconds.
        mean_s: f64,
        /// Squared coefficient of variation, > 0.
        scv: f64,
    },
    /// The empirical distribution of measured samples (each with probability 1/n).
    Empirical {
        /// The samples in seconds, sorted ascending.
        samples_s: Vec<f64>,
    },
}

impl std::str::FromStr for Service {
    type Err = ModelError;

    /// `KIND:mean=DURATION[,scv=X]`: `deterministic` (or `det`) and `exponential` (or
    /// `exp`) take the mean alone, `gamma` and `lognormal` also the SCV; e.g.
    /// `gamma:mean=20us,scv=0.5`.
    fn from_str(spec: &str) -> Result<Self> {
        let (kind, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let mut kv = Vec::new();
        for part in rest.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                ModelError::invalid("service", spec, "expected KIND:key=value,...")
            })?;
            kv.push((k.trim(), v.trim()));
        }
        let get = |key: &str| {
            kv.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    ModelError::invalid(
                        "service",
                        spec,
                        "needs mean=..., and scv=... for gamma and lognormal",
                    )
                })
        };
        let mean = crate::units::Seconds::parse(get("mean")?)?.get();
        let scv = || -> Result<f64> {
            get("scv")?
                .parse()
                .map_err(|_| ModelError::invalid("service", spec, "scv is not a number"))
        };
        match kind.trim() {
            "deterministic" | "det" => Self::deterministic(mean),
            "exponential" | "exp" => Self::exponential(mean),
            "gamma" => Self::gamma(mean, scv()?),
            "lognormal" => Self::lognormal(mean, scv()?),
            _ => Err(ModelError::invalid(
                "service",
                spec,
                "use deterministic, exponential, gamma or lognormal",
            )),
        }
    }
}

impl Service {
    /// A constant service time.
    pub fn deterministic(mean_s: f64) -> Result<Self> {
        check_mean(mean_s)?;
        Ok(Self::Deterministic { mean_s })
    }

    /// Exponential service.
    pub fn exponential(mean_s: f64) -> Result<Self> {
        check_mean(mean_s)?;
        Ok(Self::Exponential { mean_s })
    }

    /// Gamma service with the given mean and SCV; SCV 0 gives the deterministic limit.
    pub fn gamma(mean_s: f64, scv: f64) -> Result<Self> {
        check_mean(mean_s)?;
        check_scv(scv)?;
        Ok(if scv == 0.0 {
            Self::Deterministic { mean_s }
        } else {
            Self::Gamma { mean_s, scv }
        })
    }

    /// The gamma fit of a derived time (a sum of n costs, say), whose SCV may fall below
    /// [`crate::limits::MIN_RANDOM_SCV`] by arithmetic rather than by a user's choice: such
    /// an SCV is deterministic to every printed digit, and the fit is then deterministic.
    pub fn gamma_fitted(mean_s: f64, scv: f64) -> Result<Self> {
        let scv = if scv < crate::limits::MIN_RANDOM_SCV {
            0.0
        } else {
            scv
        };
        Self::gamma(mean_s, scv)
    }

    /// Lognormal service with the given mean and SCV (> 0).
    pub fn lognormal(mean_s: f64, scv: f64) -> Result<Self> {
        check_mean(mean_s)?;
        check_scv(scv)?;
        if scv == 0.0 {
            return Err(ModelError::invalid(
                "service scv",
                scv,
                "a lognormal needs scv > 0",
            ));
        }
        Ok(Self::Lognormal { mean_s, scv })
    }

    /// The empirical distribution of `samples_s` (seconds, each >= 0, mean > 0).
    pub fn empirical(mut samples_s: Vec<f64>) -> Result<Self> {
        if samples_s.is_empty() {
            return Err(ModelError::invalid(
                "service samples",
                "[]",
                "need at least one sample",
            ));
        }
        if let Some(bad) = samples_s.iter().find(|s| !(s.is_finite() && **s >= 0.0)) {
            return Err(ModelError::invalid(
                "service sample",
                bad,
                "must be finite and >= 0",
            ));
        }
        samples_s.sort_by(f64::total_cmp);
        let mean = samples_s.iter().sum::<f64>() / samples_s.len() as f64;
        check_mean(mean)?;
        Ok(Self::Empirical { samples_s })
    }

    /// A distribution by name: `deterministic`, `exponential`, `gamma`, `lognormal`.
    ///
    /// `exponential` ignores `scv` (it is 1); `gamma` with SCV 0 is deterministic.
    pub fn named(kind: ServiceKind, mean_s: f64, scv: f64) -> Result<Self> {
        match kind {
            ServiceKind::Deterministic => Self::deterministic(mean_s),
            ServiceKind::Exponential => Self::exponential(mean_s),
            ServiceKind::Gamma => Self::gamma(mean_s, scv),
            ServiceKind::Lognormal => Self::lognormal(mean_s, scv),
        }
    }

    /// Re-checks the parameters of a value that did not come through a constructor (for
    /// example one deserialised from a file).
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Deterministic { mean_s } | Self::Exponential { mean_s } => check_mean(*mean_s),
            Self::Gamma { mean_s, scv } => {
                check_mean(*mean_s)?;
                check_scv(*scv)?;
                if *scv == 0.0 {
                    return Err(ModelError::invalid(
                        "service scv",
                        scv,
                        "a gamma needs scv > 0 (use deterministic)",
                    ));
                }
                Ok(())
            }
            Self::Lognormal { mean_s, scv } => Self::lognormal(*mean_s, *scv).map(|_| ()),
            Self::Empirical { samples_s } => {
                if samples_s.windows(2).any(|w| w[1] < w[0]) {
                    return Err(ModelError::invalid(
                        "service samples",
                        "unsorted",
                        "must be ascending",
                    ));
                }
                Self::empirical(samples_s.clone()).map(|_| ())
            }
        }
    }

    /// E\[S\] in seconds.
    pub fn mean_s(&self) -> f64 {
        self.moments().mean_s
    }

    /// Squared coefficient of variation.
    pub fn scv(&self) -> f64 {
        match self {
            Self::Deterministic { .. } => 0.0,
            Self::Exponential { .. } => 1.0,
            Self::Gamma { scv, .. } | Self::Lognormal { scv, .. } => *scv,
            Self::Empirical { .. } => self.moments().scv(),
        }
    }

    /// Exact first three raw moments.
    ///
    /// Gamma(shape k = 1/c, scale m c): E\[S^2\] = m^2 (1 + c), E\[S^3\] = m^3 (1 + c)(1 + 2c).
    /// Lognormal: E\[S^n\] = exp(n mu + n^2 sigma^2 / 2), so E\[S^2\] = m^2 (1 + c) and
    /// E\[S^3\] = m^3 (1 + c)^3.
    pub fn moments(&self) -> Moments {
        match self {
            Self::Deterministic { mean_s: m } => Moments {
                mean_s: *m,
                m2: m * m,
                m3: m * m * m,
            },
            Self::Exponential { mean_s: m } => Moments {
                mean_s: *m,
                m2: 2.0 * m * m,
                m3: 6.0 * m * m * m,
            },
            Self::Gamma { mean_s: m, scv: c } => Moments {
                mean_s: *m,
                m2: m * m * (1.0 + c),
                m3: m * m * m * (1.0 + c) * (1.0 + 2.0 * c),
            },
            Self::Lognormal { mean_s: m, scv: c } => Moments {
                mean_s: *m,
                m2: m * m * (1.0 + c),
                m3: m * m * m * (1.0 + c).powi(3),
            },
            Self::Empirical { samples_s } => {
                let n = samples_s.len() as f64;
                let (mut s1, mut s2, mut s3) = (0.0, 0.0, 0.0);
                for &x in samples_s {
                    s1 += x;
                    s2 += x * x;
                    s3 += x * x * x;
                }
                Moments {
                    mean_s: s1 / n,
                    m2: s2 / n,
                    m3: s3 / n,
                }
            }
        }
    }

    /// Whether the moment generating function E\[e^{theta S}\] exists for some theta > 0
    /// (light tail). The lognormal has none: its tail is heavier than any exponential.
    pub fn is_light_tailed(&self) -> bool {
        !matches!(self, Self::Lognormal { .. })
    }

    /// Supremum of the thetas where the MGF is finite: infinity for bounded support,
    /// 1/scale for gamma and exponential, 0 for the lognormal.
    pub fn mgf_abscissa(&self) -> f64 {
        match self {
            Self::Deterministic { .. } | Self::Empirical { .. } => f64::INFINITY,
            Self::Exponential { mean_s } => 1.0 / mean_s,
            Self::Gamma { mean_s, scv } => 1.0 / (mean_s * scv),
            Self::Lognormal { .. } => 0.0,
        }
    }

    /// E\[e^{theta S}\] and its derivative E\[S e^{theta S}\], for theta below the abscissa.
    /// Returns `None` where the MGF does not exist.
    pub fn mgf(&self, theta: f64) -> Option<(f64, f64)> {
        if theta >= self.mgf_abscissa() {
            return None;
        }
        Some(match self {
            Self::Deterministic { mean_s: m } => {
                let e = (theta * m).exp();
                (e, m * e)
            }
            Self::Exponential { mean_s: m } => {
                let d = 1.0 - theta * m;
                (1.0 / d, m / (d * d))
            }
            Self::Gamma { mean_s: m, scv: c } => {
                let (k, s) = (1.0 / c, m * c);
                let d = 1.0 - theta * s;
                (d.powf(-k), k * s * d.powf(-k - 1.0))
            }
            Self::Empirical { samples_s } => {
                let n = samples_s.len() as f64;
                let (mut a, mut b) = (0.0, 0.0);
                for &x in samples_s {
                    let e = (theta * x).exp();
                    a += e;
                    b += x * e;
                }
                (a / n, b / n)
            }
            Self::Lognormal { .. } => return None,
        })
    }

    /// The CDF P(S <= x).
    pub fn cdf(&self, x: f64) -> f64 {
        if x < 0.0 {
            return 0.0;
        }
        match self {
            Self::Deterministic { mean_s } => f64::from(u8::from(x >= *mean_s)),
            Self::Exponential { mean_s } => 1.0 - (-x / mean_s).exp(),
            Self::Gamma { mean_s, scv } => gamma_p(1.0 / scv, x / (mean_s * scv)),
            Self::Lognormal { mean_s, scv } => {
                let (mu, sigma) = lognormal_params(*mean_s, *scv);
                normal_cdf((x.ln() - mu) / sigma)
            }
            Self::Empirical { samples_s } => {
                samples_s.partition_point(|s| *s <= x) as f64 / samples_s.len() as f64
            }
        }
    }

    /// The equilibrium (stationary-excess) CDF F_e(x) = (1/E\[S\]) * int_0^x (1 - F(u)) du:
    /// the distribution of the residual service an arrival finds. The P-K waiting time is
    /// a geometric sum of such residuals, which is what the numerical tail integrates.
    ///
    /// Uses int_0^x (1 - F(u)) du = x (1 - F(x)) + E\[S; S <= x\], with the partial
    /// expectation in closed form: gamma m P(k + 1, x/s); lognormal m Phi((ln x - mu -
    /// sigma^2)/sigma).
    pub fn equilibrium_cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        let m = self.mean_s();
        let partial = match self {
            Self::Deterministic { mean_s } => return (x / mean_s).min(1.0),
            Self::Exponential { .. } => return self.cdf(x),
            Self::Gamma { mean_s, scv } => {
                let (k, s) = (1.0 / scv, mean_s * scv);
                mean_s * gamma_p(k + 1.0, x / s)
            }
            Self::Lognormal { mean_s, scv } => {
                let (mu, sigma) = lognormal_params(*mean_s, *scv);
                mean_s * normal_cdf((x.ln() - mu - sigma * sigma) / sigma)
            }
            Self::Empirical { samples_s } => {
                let n = samples_s.len() as f64;
                return (samples_s.iter().map(|s| s.min(x)).sum::<f64>() / n / m).min(1.0);
            }
        };
        ((x * (1.0 - self.cdf(x)) + partial) / m).clamp(0.0, 1.0)
    }

    /// 1 - [`Service::equilibrium_cdf`], computed without subtracting from 1 where the
    /// family allows (exponential, gamma, lognormal: from upper tails directly), so that
    /// far in the tail it keeps its relative precision instead of an absolute 1e-16.
    pub fn equilibrium_tail(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 1.0;
        }
        let m = self.mean_s();
        let t = match self {
            Self::Exponential { mean_s } => (-x / mean_s).exp(),
            // int_x^inf (1 - F) = m Q(k + 1, x / s) - x Q(k, x / s).
            Self::Gamma { mean_s, scv } => {
                let (k, sc) = (1.0 / scv, mean_s * scv);
                (mean_s * gamma_q(k + 1.0, x / sc) - x * gamma_q(k, x / sc)) / m
            }
            // int_x^inf (1 - F) = m Phi_c(z - sigma) - x Phi_c(z), z = (ln x - mu) / sigma.
            Self::Lognormal { mean_s, scv } => {
                let (mu, sigma) = lognormal_params(*mean_s, *scv);
                let z = (x.ln() - mu) / sigma;
                (mean_s * normal_tail(z - sigma) - x * normal_tail(z)) / m
            }
            _ => 1.0 - self.equilibrium_cdf(x),
        };
        t.clamp(0.0, 1.0)
    }

    /// The two-moment gamma (or deterministic, for SCV 0) with the same mean and SCV.
    pub fn gamma_fit(&self) -> Service {
        let m = self.moments();
        let scv = m.scv();
        if scv < 1e-12 {
            Self::Deterministic { mean_s: m.mean_s }
        } else {
            Self::Gamma {
                mean_s: m.mean_s,
                scv,
            }
        }
    }

    /// The distribution of the sum of `n` independent copies, where it is in the same
    /// family (deterministic, exponential and gamma); otherwise its two-moment gamma fit.
    /// The second value says whether the result is exact.
    pub fn sum_of(&self, n: u32) -> (Service, bool) {
        let nf = f64::from(n);
        match self {
            Self::Deterministic { mean_s } => (
                Self::Deterministic {
                    mean_s: nf * mean_s,
                },
                true,
            ),
            Self::Exponential { mean_s } => (
                Self::Gamma {
                    mean_s: nf * mean_s,
                    scv: 1.0 / nf,
                },
                true,
            ),
            Self::Gamma { mean_s, scv } => (
                Self::Gamma {
                    mean_s: nf * mean_s,
                    scv: scv / nf,
                },
                true,
            ),
            _ if n == 1 => (self.clone(), true),
            _ => {
                let m = self.moments().sum_of(n);
                (
                    Service::Gamma {
                        mean_s: m.mean_s,
                        scv: m.scv(),
                    }
                    .gamma_fit(),
                    false,
                )
            }
        }
    }

    /// The same distribution with every service time multiplied by `factor` (> 0).
    pub fn scaled(&self, factor: f64) -> Service {
        match self {
            Self::Deterministic { mean_s } => Self::Deterministic {
                mean_s: mean_s * factor,
            },
            Self::Exponential { mean_s } => Self::Exponential {
                mean_s: mean_s * factor,
            },
            Self::Gamma { mean_s, scv } => Self::Gamma {
                mean_s: mean_s * factor,
                scv: *scv,
            },
            Self::Lognormal { mean_s, scv } => Self::Lognormal {
                mean_s: mean_s * factor,
                scv: *scv,
            },
            Self::Empirical { samples_s } => Self::Empirical {
                samples_s: samples_s.iter().map(|s| s * factor).collect(),
            },
        }
    }

    /// The distribution's family.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Deterministic { .. } => "deterministic",
            Self::Exponential { .. } => "exponential",
            Self::Gamma { .. } => "gamma",
            Self::Lognormal { .. } => "lognormal",
            Self::Empirical { .. } => "empirical",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = crate::units::format_seconds(self.mean_s());
        match self {
            Self::Empirical { samples_s } => {
                write!(
                    f,
                    "empirical(n={}, mean={m}, scv={:.3})",
                    samples_s.len(),
                    self.scv()
                )
            }
            _ => write!(f, "{}(mean={m}, scv={:.3})", self.kind_name(), self.scv()),
        }
    }
}

/// The named families a user can pick on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    /// Constant.
    Deterministic,
    /// Exponential (SCV 1).
    Exponential,
    /// Gamma with a given SCV.
    Gamma,
    /// Lognormal with a given SCV (heavy tail).
    Lognormal,
}

impl std::str::FromStr for ServiceKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "deterministic" | "det" | "constant" => Ok(Self::Deterministic),
            "exponential" | "exp" => Ok(Self::Exponential),
            "gamma" => Ok(Self::Gamma),
            "lognormal" => Ok(Self::Lognormal),
            _ => Err(ModelError::invalid(
                "service distribution",
                s,
                "expected deterministic, exponential, gamma or lognormal",
            )),
        }
    }
}

fn check_mean(mean_s: f64) -> Result<()> {
    if mean_s == 0.0 {
        return Err(ModelError::invalid(
            "service mean",
            mean_s,
            "must be a finite duration > 0",
        ));
    }
    match crate::limits::duration_problem(mean_s) {
        None => Ok(()),
        Some(reason) => Err(ModelError::invalid("service mean", mean_s, reason)),
    }
}

fn check_scv(scv: f64) -> Result<()> {
    use crate::limits::{MAX_SCV, MIN_RANDOM_SCV};
    if !(scv.is_finite() && scv >= 0.0) {
        Err(ModelError::invalid(
            "service scv",
            scv,
            "must be a finite number >= 0",
        ))
    } else if scv > 0.0 && scv < MIN_RANDOM_SCV {
        Err(ModelError::invalid(
            "service scv",
            scv,
            "is below 1e-6: the service is deterministic to every printed digit (use 0)",
        ))
    } else if scv > MAX_SCV {
        Err(ModelError::invalid(
            "service scv",
            scv,
            "must be at most 1e6",
        ))
    } else {
        Ok(())
    }
}

/// (mu, sigma) of the lognormal with the given mean and SCV.
pub(crate) fn lognormal_params(mean_s: f64, scv: f64) -> (f64, f64) {
    let s2 = (1.0 + scv).ln();
    (mean_s.ln() - s2 / 2.0, s2.sqrt())
}

/// Standard normal CDF.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal upper tail 1 - Phi(z), accurate far out.
pub(crate) fn normal_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Regularised upper incomplete gamma Q(a, x) = 1 - P(a, x), accurate far out.
pub(crate) fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        1.0
    } else if x.is_infinite() {
        0.0
    } else {
        gamma_ur(a, x)
    }
}

/// Regularised lower incomplete gamma P(a, x), total on x in [0, inf].
pub(crate) fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        0.0
    } else if x.is_infinite() {
        1.0
    } else {
        gamma_lr(a, x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The equilibrium tail agrees with 1 - the equilibrium CDF where both are precise,
    /// falls, and stays positive far out (where 1 - CDF would be 0 or noise).
    #[test]
    fn equilibrium_tail_is_the_complement_and_keeps_precision() {
        for d in [
            Service::exponential(2.0).unwrap(),
            Service::gamma(1.0, 0.5).unwrap(),
            Service::gamma(1.0, 4.0).unwrap(),
            Service::lognormal(1.0, 1.0).unwrap(),
            Service::lognormal(1.0, 4.0).unwrap(),
        ] {
            let mut last = 1.0;
            for x in [0.1, 0.5, 1.0, 3.0, 10.0] {
                let t = d.equilibrium_tail(x);
                assert!(
                    (t - (1.0 - d.equilibrium_cdf(x))).abs() < 1e-12,
                    "{d:?} at {x}"
                );
                assert!(t < last, "{d:?} at {x}");
                last = t;
            }
            let far = d.equilibrium_tail(100.0 * d.mean_s());
            assert!(far > 0.0 && far < last, "{d:?}: {far}");
        }
    }

    #[test]
    fn service_grammar() {
        assert_eq!(
            "gamma:mean=20us,scv=0.5".parse::<Service>().unwrap(),
            Service::gamma(20e-6, 0.5).unwrap()
        );
        assert_eq!(
            "det:mean=1s".parse::<Service>().unwrap(),
            Service::deterministic(1.0).unwrap()
        );
        for bad in [
            "gamma:mean=1s",
            "exp",
            "uniform:mean=1s",
            "exp:mean=-1s",
            "exp:mean",
        ] {
            assert!(bad.parse::<Service>().is_err(), "{bad}");
        }
    }

    /// Midpoint-rule integral of (1 - F) as an independent check of the closed forms.
    fn equilibrium_by_quadrature(s: &Service, x: f64) -> f64 {
        let n = 200_000;
        let h = x / n as f64;
        (0..n)
            .map(|i| 1.0 - s.cdf((i as f64 + 0.5) * h))
            .sum::<f64>()
            * h
            / s.mean_s()
    }

    #[test]
    fn equilibrium_cdf_matches_quadrature() {
        let cases = [
            Service::gamma(2.0, 0.5).unwrap(),
            Service::gamma(1.0, 3.0).unwrap(),
            Service::lognormal(1.0, 1.5).unwrap(),
            Service::exponential(0.5).unwrap(),
            Service::deterministic(1.0).unwrap(),
            Service::empirical(vec![0.5, 1.0, 3.0]).unwrap(),
        ];
        for s in &cases {
            for x in [0.1, 0.7, 1.3, 4.0] {
                let exact = s.equilibrium_cdf(x);
                let quad = equilibrium_by_quadrature(s, x);
                // Midpoint rule error is O(h^2 f''), far below 1e-6 at h = x / 2e5,
                // except at the jumps of the deterministic/empirical CDF, where it is O(h).
                assert!(
                    (exact - quad).abs() < 1e-4,
                    "{s}: Fe({x}) {exact} vs {quad}"
                );
            }
        }
    }

    #[test]
    fn moments_are_exact() {
        let g = Service::gamma(2.0, 0.25).unwrap().moments();
        // Gamma shape 4, scale 0.5: E[S^2] = k(k+1)s^2 = 5, E[S^3] = k(k+1)(k+2)s^3 = 15.
        assert!((g.m2 - 5.0).abs() < 1e-12 && (g.m3 - 15.0).abs() < 1e-12);
        let l = Service::lognormal(1.0, 1.0).unwrap().moments();
        // sigma^2 = ln 2, mu = -ln2/2: E[S^3] = exp(3mu + 4.5 sigma^2) = 2^3 = 8.
        assert!((l.m3 - 8.0).abs() < 1e-12);
        let e = Service::empirical(vec![1.0, 3.0]).unwrap().moments();
        assert_eq!((e.mean_s, e.m2, e.m3), (2.0, 5.0, 14.0));
    }

    #[test]
    fn sums_keep_moments() {
        let s = Service::lognormal(1.0, 2.0).unwrap();
        let direct = s.moments().sum_of(5);
        let (fit, exact) = s.sum_of(5);
        assert!(!exact);
        assert!((fit.mean_s() - direct.mean_s).abs() < 1e-12);
        assert!((fit.scv() - direct.scv()).abs() < 1e-12);
        let (g, exact) = Service::exponential(1.0).unwrap().sum_of(4);
        assert!(exact);
        assert!((g.moments().m2 - 20.0).abs() < 1e-12); // Erlang-4: k(k+1) = 20
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Service::gamma(0.0, 1.0).is_err());
        assert!(Service::gamma(1.0, -1.0).is_err());
        assert!(Service::lognormal(1.0, 0.0).is_err());
        assert!(Service::empirical(vec![]).is_err());
        assert!(Service::empirical(vec![0.0, 0.0]).is_err());
        assert!(Service::empirical(vec![1.0, f64::NAN]).is_err());
    }
}
