//! Newtypes that refuse bad values at construction, and the duration syntax.
//!
//! Parse, don't validate: once a [`Rate`], [`Quantile`] or [`Seconds`] exists, it is
//! finite and in its domain, so the queue code never re-checks it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};

/// A strictly positive, finite rate in events (or requests) per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Rate(f64);

impl Rate {
    /// A rate of `per_s` per second; refuses zero, negatives, NaN, infinity and rates
    /// above [`crate::limits::MAX_RATE_PER_S`] or below [`crate::limits::MIN_RATE_PER_S`].
    pub fn per_s(per_s: f64) -> Result<Self> {
        use crate::limits::{MAX_RATE_PER_S, MIN_RATE_PER_S};
        if per_s.is_finite() && (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&per_s) {
            Ok(Self(per_s))
        } else {
            Err(ModelError::invalid(
                "rate",
                per_s,
                "must be between 1e-9 and 1e9 per second",
            ))
        }
    }

    /// The value in events per second.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Rate {
    type Error = ModelError;
    fn try_from(v: f64) -> Result<Self> {
        Self::per_s(v)
    }
}

impl FromStr for Rate {
    type Err = ModelError;
    /// A plain number of events per second, such as `5000` or `2.5e3`.
    fn from_str(s: &str) -> Result<Self> {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| ModelError::invalid("rate", s, "must be a number"))?;
        Self::per_s(v)
    }
}

impl From<Rate> for f64 {
    fn from(r: Rate) -> f64 {
        r.0
    }
}

/// A probability level strictly inside (0, 1), such as 0.99 for the 99th percentile.
///
/// APIs take quantiles; percentiles (`p99`) appear only on display and in the parser.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Quantile(f64);

impl Quantile {
    /// The median.
    pub const P50: Quantile = Quantile(0.5);
    /// The 90th percentile.
    pub const P90: Quantile = Quantile(0.9);
    /// The 99th percentile.
    pub const P99: Quantile = Quantile(0.99);
    /// The 99.9th percentile.
    pub const P999: Quantile = Quantile(0.999);
    /// The four levels every report carries.
    pub const STANDARD: [Quantile; 4] = [Self::P50, Self::P90, Self::P99, Self::P999];

    /// A quantile level `q` with 0 < q < 1.
    pub fn new(q: f64) -> Result<Self> {
        if q > 0.0 && q < 1.0 {
            Ok(Self(q))
        } else {
            Err(ModelError::invalid(
                "quantile",
                q,
                "must lie strictly between 0 and 1",
            ))
        }
    }

    /// The level in (0, 1).
    pub fn get(self) -> f64 {
        self.0
    }

    /// The exceedance probability 1 - q.
    pub fn tail(self) -> f64 {
        1.0 - self.0
    }

    /// The display name: `p50`, `p99`, `p99.9`.
    pub fn label(self) -> String {
        let pct = self.0 * 100.0;
        let s = format!("{pct:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("p{s}")
    }

    /// The JSON key fragment: `p50`, `p99`, `p999` (the dot dropped).
    pub fn key(self) -> String {
        self.label().replace('.', "")
    }
}

impl TryFrom<f64> for Quantile {
    type Error = ModelError;
    fn try_from(v: f64) -> Result<Self> {
        Self::new(v)
    }
}

impl From<Quantile> for f64 {
    fn from(q: Quantile) -> f64 {
        q.0
    }
}

impl FromStr for Quantile {
    type Err = ModelError;

    /// Accepts `p99`, `p99.9`, `P50` (percentiles) or a bare level such as `0.99`.
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        let bad = || {
            ModelError::invalid(
                "quantile",
                s,
                "expected p50, p99, p99.9 or a level in (0, 1)",
            )
        };
        if let Some(pct) = t.strip_prefix(['p', 'P']) {
            let v: f64 = pct.parse().map_err(|_| bad())?;
            Quantile::new(v / 100.0)
        } else {
            let v: f64 = t.parse().map_err(|_| bad())?;
            Quantile::new(v)
        }
    }
}

impl fmt::Display for Quantile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// A non-negative, finite duration in seconds.
///
/// Parsed from `250ns`, `20us` (or `20µs`), `1.5ms`, `2s`, `1m`; a bare number is
/// refused, so that a unit is never guessed. Displayed with the unit that keeps
/// between one and three integer digits.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Seconds(f64);

impl Seconds {
    /// Zero seconds.
    pub const ZERO: Seconds = Seconds(0.0);

    /// `s` seconds; refuses negatives, NaN, infinity and what the nanosecond clock
    /// cannot hold (see [`crate::limits::duration_problem`]).
    pub fn new(s: f64) -> Result<Self> {
        match crate::limits::duration_problem(s) {
            None => Ok(Self(s)),
            Some(reason) => Err(ModelError::invalid("duration", s, reason)),
        }
    }

    /// The value in seconds.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Parses a duration with a mandatory unit (`ns`, `us`, `µs`, `ms`, `s`, `m`).
    pub fn parse(s: &str) -> Result<Self> {
        let t = s.trim();
        let bad = |reason| ModelError::invalid("duration", s, reason);
        let split = t
            .find(|c: char| {
                !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')
            })
            .ok_or_else(|| bad("missing unit: write e.g. 20us, 1.5ms or 2s"))?;
        // An exponent such as 1e-3 must not swallow the unit's first letter.
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| bad("not a number followed by a unit"))?;
        // Divide by powers of ten rather than multiply by their (inexact) inverses, so
        // that 20us is the double nearest 2e-5.
        let seconds = match unit.trim() {
            "ns" => value / 1e9,
            "us" | "µs" | "μs" => value / 1e6,
            "ms" => value / 1e3,
            "s" => value,
            "m" | "min" => value * 60.0,
            _ => return Err(bad("unknown unit: use ns, us, ms, s or m")),
        };
        if value < 0.0 {
            return Err(bad("must not be negative"));
        }
        Self::new(seconds)
    }

    /// [`Seconds::parse`], refusing zero: a length, timeout or bound that must pass.
    pub fn parse_positive(s: &str) -> Result<Self> {
        let d = Self::parse(s)?;
        if d.get() > 0.0 {
            Ok(d)
        } else {
            Err(ModelError::invalid(
                "duration",
                s,
                "must be greater than zero",
            ))
        }
    }
}

impl FromStr for Seconds {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl TryFrom<f64> for Seconds {
    type Error = ModelError;
    fn try_from(v: f64) -> Result<Self> {
        Self::new(v)
    }
}

impl From<Seconds> for f64 {
    fn from(s: Seconds) -> f64 {
        s.0
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_seconds(self.0))
    }
}

/// Formats seconds with an adaptive unit and four significant digits: `945.3us`.
pub fn format_seconds(s: f64) -> String {
    if !s.is_finite() {
        return format!("{s}");
    }
    let a = s.abs();
    let (v, unit) = if a == 0.0 {
        return "0s".to_string();
    } else if a < 1e-6 {
        (s * 1e9, "ns")
    } else if a < 1e-3 {
        (s * 1e6, "us")
    } else if a < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    let digits = if v.abs() >= 100.0 {
        1
    } else if v.abs() >= 10.0 {
        2
    } else {
        3
    };
    format!("{v:.digits$}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(Seconds::parse("20us").unwrap().get(), 20e-6);
        assert!((Seconds::parse("1.5ms").unwrap().get() - 1.5e-3).abs() < 1e-18);
        assert_eq!(Seconds::parse("2s").unwrap().get(), 2.0);
        assert_eq!(Seconds::parse("250ns").unwrap().get(), 250e-9);
        assert_eq!(Seconds::parse("1e3us").unwrap().get(), 1e-3);
        assert_eq!(Seconds::parse("0s").unwrap().get(), 0.0);
        assert!(Seconds::parse_positive("0s").is_err());
        assert!(Seconds::parse_positive("-1ms").is_err());
        assert_eq!(Seconds::parse_positive("1ns").unwrap().get(), 1e-9);
    }

    #[test]
    fn durations_refuse_garbage() {
        for bad in ["", "20", "-1ms", "1.5", "ms", "1 parsec", "NaNs", "1e999s"] {
            assert!(Seconds::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn quantiles_parse_and_label() {
        assert_eq!("p99".parse::<Quantile>().unwrap().get(), 0.99);
        assert!(("p99.9".parse::<Quantile>().unwrap().get() - 0.999).abs() < 1e-15);
        assert_eq!("0.5".parse::<Quantile>().unwrap(), Quantile::P50);
        assert_eq!(Quantile::P999.label(), "p99.9");
        assert_eq!(Quantile::P999.key(), "p999");
        assert_eq!(Quantile::P50.key(), "p50");
        for bad in ["p100", "p0", "1", "0", "-0.5", "pxx"] {
            assert!(bad.parse::<Quantile>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn rates_refuse_non_positive() {
        assert!(Rate::per_s(0.0).is_err());
        assert!(Rate::per_s(-3.0).is_err());
        assert!(Rate::per_s(f64::NAN).is_err());
        assert!(Rate::per_s(f64::INFINITY).is_err());
        assert_eq!(Rate::per_s(5.0).unwrap().get(), 5.0);
    }

    #[test]
    fn seconds_display_picks_a_unit() {
        assert_eq!(format_seconds(945.3e-6), "945.3us");
        assert_eq!(format_seconds(1.5e-3), "1.500ms");
        assert_eq!(format_seconds(21.91), "21.91s");
        assert_eq!(format_seconds(0.0), "0s");
    }
}
