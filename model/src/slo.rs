//! Service-level objectives on one request's latencies, and goodput.
//!
//! An [`Slo`] bounds any subset of TTFT, TPOT, ITL, NTPOT and E2E. A request is *good*
//! when it completed and every bound it sets holds (vLLM's rule: all constraints at once);
//! a request that failed or timed out is never good. Goodput is the rate of good requests
//! (and of their output tokens).
//!
//! TTFT, NTPOT and E2E depend on where the clock starts ([`crate::metrics::Origin`]);
//! TPOT and ITL do not. Judged from the intended send, a request that waited in the
//! client's queue can miss its TTFT bound although the server answered in time; judged
//! from the actual send, the same request is good. The difference between the two
//! goodputs is the client's share of the misses.
//!
//! The ITL bound holds when every gap between a request's chunks holds it (its largest
//! gap is within it), so one stall fails the request, as a user watching the stream
//! would see it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};
use crate::metrics::Scalars;
use crate::units::{Seconds, format_seconds};

/// One latency an SLO can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// Time to first token.
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// The largest gap between two chunks of the request.
    Itl,
    /// End to end over output tokens.
    Ntpot,
    /// End to end.
    E2e,
}

impl Constraint {
    /// Every constraint, in the order reports list them.
    pub const ALL: [Constraint; 5] = [Self::Ttft, Self::Tpot, Self::Itl, Self::Ntpot, Self::E2e];

    /// The name used on the command line and in reports.
    pub fn key(self) -> &'static str {
        match self {
            Self::Ttft => "ttft",
            Self::Tpot => "tpot",
            Self::Itl => "itl",
            Self::Ntpot => "ntpot",
            Self::E2e => "e2e",
        }
    }

    /// Whether the latency depends on the clock's origin (intended or actual send).
    pub fn depends_on_origin(self) -> bool {
        matches!(self, Self::Ttft | Self::Ntpot | Self::E2e)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Bounds on a request's latencies, seconds; `None` bounds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    /// Time per output token after the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<f64>,
    /// Every gap between chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_s: Option<f64>,
    /// End to end over output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntpot_s: Option<f64>,
    /// End to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_s: Option<f64>,
}

/// One completed request's latencies as an SLO judges them, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// Time to first token.
    pub ttft_s: f64,
    /// Time per output token after the first (None for one token: nothing to bound).
    pub tpot_s: Option<f64>,
    /// The largest gap between chunks (None for one chunk).
    pub max_itl_s: Option<f64>,
    /// End to end over output tokens.
    pub ntpot_s: f64,
    /// End to end.
    pub e2e_s: f64,
}

impl Judged {
    /// A request's scalars and its largest chunk gap.
    pub fn new(s: &Scalars, max_itl_s: Option<f64>) -> Self {
        Self {
            ttft_s: s.ttft_s,
            tpot_s: s.tpot_s,
            max_itl_s,
            ntpot_s: s.ntpot_s,
            e2e_s: s.e2e_s,
        }
    }
}

/// Which bounds one request met: one bit per [`Constraint`] (set: met or not bounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict(u8);

impl Verdict {
    /// A request that did not complete: it meets nothing.
    pub const FAILED: Verdict = Verdict(0);

    /// Whether `c` held.
    pub fn met(self, c: Constraint) -> bool {
        self.0 & (1 << c.index()) != 0
    }

    /// Whether every bound held.
    pub fn good(self) -> bool {
        self.0 == (1 << Constraint::ALL.len()) - 1
    }
}

impl Slo {
    /// The bound on `c`, if any.
    pub fn bound(&self, c: Constraint) -> Option<f64> {
        match c {
            Constraint::Ttft => self.ttft_s,
            Constraint::Tpot => self.tpot_s,
            Constraint::Itl => self.itl_s,
            Constraint::Ntpot => self.ntpot_s,
            Constraint::E2e => self.e2e_s,
        }
    }

    fn bound_mut(&mut self, c: Constraint) -> &mut Option<f64> {
        match c {
            Constraint::Ttft => &mut self.ttft_s,
            Constraint::Tpot => &mut self.tpot_s,
            Constraint::Itl => &mut self.itl_s,
            Constraint::Ntpot => &mut self.ntpot_s,
            Constraint::E2e => &mut self.e2e_s,
        }
    }

    /// The constraints this SLO bounds.
    pub fn bounded(&self) -> impl Iterator<Item = Constraint> + '_ {
        Constraint::ALL
            .into_iter()
            .filter(|c| self.bound(*c).is_some())
    }

    /// Judges one completed request. A latency it cannot have (TPOT of one token, ITL of
    /// one chunk) meets its bound: there is nothing to miss.
    pub fn judge(&self, j: &Judged) -> Verdict {
        let mut bits = 0u8;
        for c in Constraint::ALL {
            let value = match c {
                Constraint::Ttft => Some(j.ttft_s),
                Constraint::Tpot => j.tpot_s,
                Constraint::Itl => j.max_itl_s,
                Constraint::Ntpot => Some(j.ntpot_s),
                Constraint::E2e => Some(j.e2e_s),
            };
            let holds = match (self.bound(c), value) {
                (Some(b), Some(v)) => v <= b,
                _ => true,
            };
            if holds {
                bits |= 1 << c.index();
            }
        }
        Verdict(bits)
    }

    /// Checks every bound: positive, finite, within what the clock can hold; at least one.
    pub fn validate(&self) -> Result<()> {
        if self.bounded().next().is_none() {
            return Err(ModelError::invalid(
                "slo",
                "",
                "bounds nothing: give at least one of ttft, tpot, itl, ntpot, e2e",
            ));
        }
        for c in self.bounded() {
            let b = self.bound(c).unwrap_or(0.0);
            if b <= 0.0 {
                return Err(ModelError::invalid(c.key(), b, "must be greater than zero"));
            }
            if let Some(reason) = crate::limits::duration_problem(b) {
                return Err(ModelError::invalid(c.key(), b, reason));
            }
        }
        Ok(())
    }
}

/// Goodput's counts from one origin: the good requests, their output tokens, and the
/// requests that met each bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attained {
    /// Requests that met every bound.
    pub good: u64,
    /// Their output tokens.
    pub good_output_tokens: u64,
    /// Requests that met each bound (only bounded constraints appear).
    pub met: BTreeMap<Constraint, u64>,
}

impl Attained {
    /// Counts one judged request's verdict and its output tokens.
    pub fn note(&mut self, slo: &Slo, v: Verdict, tokens: u64) {
        if v.good() {
            self.good = self.good.saturating_add(1);
            self.good_output_tokens = self.good_output_tokens.saturating_add(tokens);
        }
        for c in slo.bounded() {
            let n = self.met.entry(c).or_default();
            if v.met(c) {
                *n = n.saturating_add(1);
            }
        }
    }

    /// Adds another tally's counts (another shard's).
    pub fn add(&mut self, o: &Attained) {
        self.good = self.good.saturating_add(o.good);
        self.good_output_tokens = self.good_output_tokens.saturating_add(o.good_output_tokens);
        for (c, n) in &o.met {
            let m = self.met.entry(*c).or_default();
            *m = m.saturating_add(*n);
        }
    }
}

/// Requests judged against an SLO (every request past the warm-up that was sent and not
/// cancelled: a failure or a timeout counts, and is never good), from both origins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SloCounts {
    /// Requests judged.
    pub judged: u64,
    /// Latencies from the intended send.
    pub from_intended: Attained,
    /// Latencies from the actual send.
    pub from_actual: Attained,
}

impl SloCounts {
    /// Counts one judged request: its verdicts from the intended and the actual send, and
    /// its output tokens.
    pub fn note(&mut self, slo: &Slo, intended: Verdict, actual: Verdict, tokens: u64) {
        self.judged = self.judged.saturating_add(1);
        self.from_intended.note(slo, intended, tokens);
        self.from_actual.note(slo, actual, tokens);
    }

    /// Adds another tally's counts (another shard's).
    pub fn add(&mut self, o: &SloCounts) {
        self.judged = self.judged.saturating_add(o.judged);
        self.from_intended.add(&o.from_intended);
        self.from_actual.add(&o.from_actual);
    }
}

/// Goodput from one origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputView {
    /// Requests that met every bound.
    pub good: u64,
    /// Their share of the judged requests.
    pub good_fraction: f64,
    /// Good requests per second of the run.
    pub requests_per_s: f64,
    /// Their output tokens per second.
    pub output_tokens_per_s: f64,
    /// The share of judged requests that met each bound.
    pub attainment: BTreeMap<Constraint, f64>,
}

/// Goodput against an SLO, from the intended send and from the actual send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// The bounds.
    pub slo: Slo,
    /// Requests judged: every request past the warm-up that was sent and not cancelled
    /// (failures and timeouts count, and are never good).
    pub judged: u64,
    /// Latencies from the intended send: what the users who asked at the schedule's times
    /// got.
    pub from_intended: GoodputView,
    /// Latencies from the actual send, as peers measure them.
    pub from_actual: GoodputView,
    /// The share of judged requests good from the actual send but not from the intended
    /// one: the misses the client's own delay caused.
    pub client_share: f64,
    /// The server's own latencies, as a perfect observer would judge them: known in a
    /// simulation only (None live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<GoodputView>,
}

impl Goodput {
    /// Goodput from the counts of judged requests (and, in a simulation, the server's own
    /// verdicts), rates by `per_s` over the measured span.
    pub fn from_counts(
        slo: &Slo,
        c: &SloCounts,
        server: Option<&Attained>,
        per_s: impl Fn(u64) -> f64,
    ) -> Goodput {
        let share = |n: u64| {
            if c.judged == 0 {
                0.0
            } else {
                n as f64 / c.judged as f64
            }
        };
        let view = |a: &Attained| GoodputView {
            good: a.good,
            good_fraction: share(a.good),
            requests_per_s: per_s(a.good),
            output_tokens_per_s: per_s(a.good_output_tokens),
            attainment: slo
                .bounded()
                .map(|k| (k, share(a.met.get(&k).copied().unwrap_or(0))))
                .collect(),
        };
        Goodput {
            slo: *slo,
            judged: c.judged,
            from_intended: view(&c.from_intended),
            from_actual: view(&c.from_actual),
            client_share: share(c.from_actual.good.saturating_sub(c.from_intended.good)),
            server: server.map(view),
        }
    }
}

impl FromStr for Slo {
    type Err = ModelError;

    /// `ttft=200ms,tpot=50ms` (any subset of ttft, tpot, itl, ntpot, e2e, each once, each
    /// a duration with its unit).
    fn from_str(s: &str) -> Result<Self> {
        let mut slo = Slo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| {
                ModelError::invalid("slo", part, "write name=duration, e.g. ttft=200ms")
            })?;
            let name = name.trim();
            let c = Constraint::ALL
                .into_iter()
                .find(|c| c.key() == name)
                .ok_or_else(|| {
                    ModelError::invalid("slo", name, "use ttft, tpot, itl, ntpot or e2e")
                })?;
            let bound = Seconds::parse_positive(value).map_err(|e| match e {
                ModelError::Invalid { reason, .. } => ModelError::invalid(c.key(), value, reason),
                other => other,
            })?;
            let slot = slo.bound_mut(c);
            if slot.is_some() {
                return Err(ModelError::invalid("slo", name, "is given twice"));
            }
            *slot = Some(bound.get());
        }
        slo.validate()?;
        Ok(slo)
    }
}

impl fmt::Display for Slo {
    /// The command line's form: `ttft=200ms,tpot=50ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .bounded()
            .map(|c| format!("{}={}", c.key(), short(self.bound(c).unwrap_or(0.0))))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// A duration as [`format_seconds`] writes it, without trailing zeros: `200ms`.
fn short(s: f64) -> String {
    let text = format_seconds(s);
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let num = if num.contains('.') {
        num.trim_end_matches('0').trim_end_matches('.')
    } else {
        num
    };
    format!("{num}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(ttft: f64, tpot: Option<f64>, itl: Option<f64>, e2e: f64) -> Judged {
        Judged {
            ttft_s: ttft,
            tpot_s: tpot,
            max_itl_s: itl,
            ntpot_s: e2e / 10.0,
            e2e_s: e2e,
        }
    }

    #[test]
    fn parses_any_subset_and_prints_it_back() {
        let slo: Slo = "ttft=200ms, tpot=50ms".parse().unwrap();
        assert_eq!(slo.ttft_s, Some(0.2));
        assert_eq!(slo.tpot_s, Some(0.05));
        assert_eq!((slo.itl_s, slo.ntpot_s, slo.e2e_s), (None, None, None));
        assert_eq!(slo.to_string(), "ttft=200ms,tpot=50ms");
        let all: Slo = "e2e=2s,ntpot=20ms,itl=100ms,tpot=30ms,ttft=1s"
            .parse()
            .unwrap();
        assert_eq!(all.bounded().count(), 5);
        assert_eq!(all.to_string().parse::<Slo>().unwrap(), all);
    }

    #[test]
    fn refuses_what_it_cannot_judge() {
        for bad in [
            "",
            "ttft",
            "ttft=",
            "ttft=200",
            "ttft=0ms",
            "ttft=-1ms",
            "latency=1s",
            "ttft=1s,ttft=2s",
            "ttft=1e300s",
        ] {
            assert!(bad.parse::<Slo>().is_err(), "{bad:?} was accepted");
        }
    }

    /// Every bound must hold; a latency the request cannot have holds; a failure meets
    /// nothing.
    #[test]
    fn a_request_is_good_when_every_bound_holds() {
        let slo: Slo = "ttft=100ms,tpot=10ms,itl=50ms".parse().unwrap();
        assert!(slo.judge(&judged(0.1, Some(0.01), Some(0.05), 9.0)).good());
        let late = slo.judge(&judged(0.1001, Some(0.01), Some(0.05), 9.0));
        assert!(!late.good() && !late.met(Constraint::Ttft) && late.met(Constraint::Tpot));
        let stalled = slo.judge(&judged(0.05, Some(0.01), Some(0.2), 9.0));
        assert!(!stalled.good() && !stalled.met(Constraint::Itl));
        assert!(slo.judge(&judged(0.05, None, None, 9.0)).good());
        assert!(!Verdict::FAILED.good());
        assert!(Constraint::ALL.iter().all(|c| !Verdict::FAILED.met(*c)));
        // Unbounded constraints are always met.
        assert!(
            slo.judge(&judged(0.05, Some(0.01), None, 1e6))
                .met(Constraint::E2e)
        );
    }
}
