//! Runs beyond one machine: one shard per process anywhere (a Kubernetes Indexed Job's
//! pod, say), each writing its result, and an exact merge of the results.
//!
//! Every shard of an N-shard run replays its stripe of the same seeded schedule. Their
//! clocks are aligned by an absolute UTC start time: each shard converts it to its own
//! monotonic clock and waits. On NTP-synchronised nodes that aligns the shards' schedules
//! to within the nodes' offset (typically well under a millisecond, at worst a few ms);
//! it moves when each shard's requests are offered, not the latencies it measures, which
//! are intervals on one host's monotonic clock.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use heisenbench_model::ModelError;
use serde::{Deserialize, Serialize};

use super::config::RunConfig;
use super::result::{RunReport, ShardResult};
use super::shard::{ShardTask, run_shard, slice_len};
use super::stop::StopSignal;
use super::{RunOptions, report};
use crate::time::mono_ns;

/// One shard of an N-shard run: `I/N`, I from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    /// This shard's index.
    pub index: u32,
    /// Shards in the run.
    pub of: u32,
}

impl std::str::FromStr for ShardSpec {
    type Err = ModelError;

    /// `I/N` with 0 <= I < N.
    fn from_str(spec: &str) -> Result<Self, ModelError> {
        let bad = || ModelError::invalid("shard", spec, "expected I/N with 0 <= I < N");
        let (i, n) = spec.split_once('/').ok_or_else(bad)?;
        let (index, of): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if of == 0 || index >= of {
            return Err(bad());
        }
        Ok(Self { index, of })
    }
}

/// A UTC time as seconds since the epoch: a number of seconds, or
/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (the proleptic Gregorian calendar, no leap seconds).
pub fn parse_utc(s: &str) -> Result<f64, ModelError> {
    let bad = || {
        ModelError::invalid(
            "start time",
            s,
            "use 2026-11-30T10:00:00Z or seconds since the epoch",
        )
    };
    if let Ok(v) = s.trim().parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(bad())
        };
    }
    let t = s.trim().strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = t.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (hms, frac) = time.split_once('.').map_or((time, "0"), |(a, b)| (a, b));
    let h: Vec<i64> = hms
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3
        || h.len() != 3
        || !(1..=12).contains(&d[1])
        || !(1..=31).contains(&d[2])
        || !(0..=23).contains(&h[0])
        || !(0..=59).contains(&h[1])
        || !(0..=60).contains(&h[2])
    {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let frac: f64 = format!("0.{frac}").parse().map_err(|_| bad())?;
    Ok((days * 86_400 + h[0] * 3600 + h[1] * 60 + h[2]) as f64 + frac)
}

/// The line before a shard's result in a log (a pod's log, say).
pub const RESULT_BEGIN: &str = "=== heisenbench shard result begin ===";
/// The line after it.
pub const RESULT_END: &str = "=== heisenbench shard result end ===";

/// One shard's result, self-describing so results from many machines can be merged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardReport {
    /// Always "shard".
    pub kind: String,
    /// Fingerprint of the plan: results merge only within one plan.
    pub plan_hash: String,
    /// This shard's index.
    pub shard: u32,
    /// Shards in the plan.
    pub shards: u32,
    /// The run (the API key's variable name, never the key).
    pub config: RunConfig,
    /// The planned start, UTC seconds since the epoch.
    pub planned_start_utc_s: f64,
    /// When this shard's host thought the start was, by its own UTC clock, at the start.
    pub local_start_utc_s: f64,
    /// The measurements.
    pub result: ShardResult,
}

/// Runs shard `shard` of the checked `cfg` (whose `shards` is the shard count) in this process,
/// starting at `start_utc_s` (seconds since the epoch, this host's clock) or now, until
/// its slice is done or `stop` is thrown.
pub fn run_one_shard(
    cfg: &super::config::Checked,
    shard: u32,
    start_utc_s: Option<f64>,
    stop: &StopSignal,
) -> std::io::Result<ShardReport> {
    let now_utc = utc_now_s();
    let start = start_utc_s.unwrap_or(now_utc + 0.05);
    check_start(start, now_utc)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    // The host's UTC start expressed on its monotonic clock; a start a moment past is kept
    // (its first sends are then late, and the start slip says by how much).
    let ahead_s = start - now_utc;
    let start_mono_ns = if ahead_s >= 0.0 {
        mono_ns() + (ahead_s * 1e9) as u64
    } else {
        mono_ns().saturating_sub((-ahead_s * 1e9) as u64)
    };
    // One shard on this host: its bound is what this host allows one process.
    let mut config = RunConfig::clone(cfg);
    if config.in_flight_bound.is_none() {
        let descriptors = super::shards::raise_descriptor_limit();
        config.in_flight_bound =
            Some(super::shards::in_flight_bound(1, false, false, descriptors).0);
    }
    let task = ShardTask {
        config,
        shard,
        start_mono_ns,
        crash_halfway: false,
    };
    let result = run_shard(&task, stop)?;
    Ok(ShardReport {
        kind: "shard".into(),
        plan_hash: cfg.plan_hash(),
        shard,
        shards: cfg.shards,
        config: cfg.redacted(),
        planned_start_utc_s: start,
        local_start_utc_s: now_utc + ahead_s,
        result,
    })
}

/// How far ahead a shard's `--start-at` may be (a day: the shard waits for it).
pub const MAX_START_AHEAD_S: f64 = 86_400.0;
/// How long past a shard's `--start-at` may be when it starts (a host that was slow to
/// launch it): within this the shard keeps the planned start and its first sends are late,
/// as its start slip then says; later, it would shift its slice against the other shards'.
pub const MAX_START_LATE_S: f64 = 1.0;

/// Whether a shard may start at `start_utc_s` when it is `now_utc_s`: at most
/// [`MAX_START_AHEAD_S`] ahead and [`MAX_START_LATE_S`] past.
pub fn check_start(start_utc_s: f64, now_utc_s: f64) -> Result<(), ModelError> {
    let ahead = start_utc_s - now_utc_s;
    if ahead > MAX_START_AHEAD_S {
        Err(ModelError::invalid(
            "start time",
            format!("{ahead:.0} s from now"),
            "is more than a day ahead",
        ))
    } else if -ahead > MAX_START_LATE_S {
        Err(ModelError::invalid(
            "start time",
            format!("{:.1} s ago", -ahead),
            "has passed: a shard started this late would shift its slice against the \
             others'; give a time ahead",
        ))
    } else {
        Ok(())
    }
}

/// This host's UTC clock, seconds since the epoch.
pub fn utc_now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// The shard results in `text`: a whole JSON document, or one or more documents between
/// [`RESULT_BEGIN`] and [`RESULT_END`] lines (as in a pod's log).
pub fn parse_results(text: &str) -> Result<Vec<ShardReport>, String> {
    documents(text)?.into_iter().map(parse_document).collect()
}

/// The shard result documents `text` holds, unparsed: the whole text, or each one between
/// [`RESULT_BEGIN`] and [`RESULT_END`] lines (trimmed).
pub fn documents(text: &str) -> Result<Vec<&str>, String> {
    if !text.contains(RESULT_BEGIN) {
        return Ok(vec![text]);
    }
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(b) = rest.find(RESULT_BEGIN) {
        let after = &rest[b + RESULT_BEGIN.len()..];
        let e = after
            .find(RESULT_END)
            .ok_or("a result begins but never ends")?;
        out.push(after[..e].trim());
        rest = &after[e + RESULT_END.len()..];
    }
    Ok(out)
}

/// One shard result document (from [`documents`]) read.
pub fn parse_document(doc: &str) -> Result<ShardReport, String> {
    serde_json::from_str(doc).map_err(|e| format!("not a shard result: {e}"))
}

/// Why results cannot be merged.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no shard results")]
    Empty,
    /// Results of different plans.
    #[error(
        "results come from different plans: {first} (shard {first_shard}) and {other} (shard {other_shard})"
    )]
    PlanMismatch {
        /// The first plan hash.
        first: String,
        /// A shard of it.
        first_shard: u32,
        /// Another plan hash.
        other: String,
        /// A shard of that.
        other_shard: u32,
    },
    /// A result that cannot belong to its plan.
    #[error(transparent)]
    Bad(#[from] BadShard),
}

/// A shard result that cannot belong to the plan it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shard result {shard} of {shards}: {reason}")]
pub struct BadShard {
    /// The shard index it claims.
    pub shard: u32,
    /// The shard count it claims.
    pub shards: u32,
    /// What is wrong.
    pub reason: String,
}

/// What the merge noticed besides the numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeNotes {
    /// Shards with no result (their slices are counted as lost).
    pub missing: Vec<u32>,
    /// Shards with more than one result (the first is kept).
    pub duplicated: Vec<u32>,
}

impl MergeNotes {
    /// The merge of `report` as text for a terminal: the shards merged, what is missing or
    /// duplicated, each shard's start slip and server clock offset, then the merged run's
    /// own summary (the one `run` prints: accounting with every failure and its cause,
    /// rates, tokens and quantiles).
    pub fn write_summary(
        &self,
        report: &RunReport,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        writeln!(
            out,
            "merged {} of {} shard(s) of plan {}",
            report.shards.iter().filter(|s| s.ok).count(),
            report.config.shards,
            report.plan_hash,
        )?;
        if !self.missing.is_empty() {
            writeln!(
                out,
                "missing shards (their requests are counted as lost): {:?}",
                self.missing
            )?;
        }
        if !self.duplicated.is_empty() {
            writeln!(
                out,
                "duplicated shards (the first result of each was kept): {:?}",
                self.duplicated
            )?;
        }
        for s in &report.shards {
            writeln!(
                out,
                "  shard {}: {} requests, start slip {}, server clock offset {}",
                s.index,
                s.scheduled,
                s.start_slip_s
                    .map_or("-".into(), |v| format!("{:.3} ms", v * 1e3)),
                s.clock_offset_estimate_s
                    .map_or("-".into(), |v| format!("{v:+.1} s (+-0.5 s)"))
            )?;
        }
        report.write_summary(out)
    }
}

/// Merges shard results of one plan exactly, with the same code a local run uses.
pub fn merge(results: Vec<ShardReport>) -> Result<(RunReport, MergeNotes), MergeError> {
    let mut m = Merger::default();
    for r in results {
        m.add(r, None)?;
    }
    m.finish()
}

/// A merge fed one shard result at a time ([`merge`] on a list). A result given with its
/// document text is kept as that text until the end, not as the parsed result (whose
/// histograms take about a megabyte in memory against a few kilobytes of text): a
/// thousand shards merge in the memory of their files.
#[derive(Default)]
pub struct Merger {
    /// The first result's plan, shard and config: every other must match its plan.
    first: Option<(String, u32, RunConfig)>,
    by_shard: BTreeMap<u32, Kept>,
    notes: MergeNotes,
}

/// A result kept for the merge: parsed, or its document to be read again in its turn.
enum Kept {
    Parsed(Box<ShardResult>),
    Text(String),
}

impl Merger {
    /// Checks `r` against the plan and keeps it (the first result of each shard; a later
    /// one is noted as duplicated). With `doc`, the text `r` was read from, the text is
    /// kept instead of `r`.
    pub fn add(&mut self, r: ShardReport, doc: Option<&str>) -> Result<(), MergeError> {
        let bad = |reason: String| {
            Err(MergeError::Bad(BadShard {
                shard: r.shard,
                shards: r.shards,
                reason,
            }))
        };
        if let Some((hash, shard, _)) = &self.first
            && *hash != r.plan_hash
        {
            return Err(MergeError::PlanMismatch {
                first: hash.clone(),
                first_shard: *shard,
                other: r.plan_hash.clone(),
                other_shard: r.shard,
            });
        }
        if r.shards == 0 || r.shards != r.config.shards {
            return bad(format!(
                "the shard count must be at least 1 and match the config's {} shards",
                r.config.shards
            ));
        }
        if r.shard >= r.shards {
            return bad("the index must be below the shard count".into());
        }
        if r.config.plan_hash() != r.plan_hash {
            return bad(format!(
                "its plan hash {} is not its config's {}: the file was edited or is damaged",
                r.plan_hash,
                r.config.plan_hash()
            ));
        }
        if let Err(e) = r.config.validate() {
            return bad(format!("its config is invalid: {e}"));
        }
        if let Some(n) = slice_len(&r.config, r.shard)
            && r.result.scheduled != n
        {
            return bad(format!(
                "it scheduled {} request(s), but its slice of the plan holds {n}",
                r.result.scheduled
            ));
        }
        if self.first.is_none() {
            self.first = Some((r.plan_hash.clone(), r.shard, r.config.clone()));
        }
        match self.by_shard.entry(r.shard) {
            std::collections::btree_map::Entry::Occupied(_) => self.notes.duplicated.push(r.shard),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(match doc {
                    Some(text) => Kept::Text(text.to_string()),
                    None => Kept::Parsed(Box::new(r.result)),
                });
            }
        }
        Ok(())
    }

    /// The merged report: the kept results folded in shard order (each document read again
    /// in its turn, so one parsed result is held at a time), missing shards counted lost.
    pub fn finish(mut self) -> Result<(RunReport, MergeNotes), MergeError> {
        let (_, _, cfg) = self.first.take().ok_or(MergeError::Empty)?;
        let mut notes = self.notes;
        let mut by_shard = self.by_shard;
        let mut missing = Vec::new();
        let outcomes = (0..cfg.shards).map(|i| match by_shard.remove(&i) {
            Some(Kept::Parsed(r)) => Ok(*r),
            Some(Kept::Text(t)) => serde_json::from_str::<ShardReport>(&t)
                .map(|r| r.result)
                .map_err(super::ShardError::Unreadable),
            None => {
                missing.push(i);
                Err(super::ShardError::Missing)
            }
        });
        let mut opts = RunOptions::default();
        opts.shards_reasoning.push(format!(
            "merged from shard results of plan {}",
            cfg.plan_hash()
        ));
        let report = report(&cfg, &opts, outcomes);
        notes.missing = missing;
        Ok((report, notes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_a_moment_past_at_most_and_a_day_ahead_at_most() {
        let now = 1.8e9;
        assert!(check_start(now + 10.0, now).is_ok());
        assert!(check_start(now - 0.5, now).is_ok());
        let late = check_start(now - 24.0, now).unwrap_err().to_string();
        assert!(
            late.contains("24.0 s ago") && late.contains("has passed"),
            "{late}"
        );
        let far = check_start(1e300, now).unwrap_err().to_string();
        assert!(far.contains("more than a day ahead"), "{far}");
    }

    #[test]
    fn utc_times_and_shard_specs_parse() {
        assert_eq!(parse_utc("1970-01-01T00:00:00Z").unwrap(), 0.0);
        assert_eq!(parse_utc("2000-03-01T00:00:00Z").unwrap(), 951_868_800.0);
        assert_eq!(
            parse_utc("2026-11-30T10:00:00.5Z").unwrap(),
            1_796_032_800.5
        );
        assert_eq!(parse_utc("12.5").unwrap(), 12.5);
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-11-30 10:00:00",
            "yesterday",
            "-5",
        ] {
            assert!(parse_utc(bad).is_err(), "{bad}");
        }
        assert_eq!(
            "2/5".parse::<ShardSpec>().unwrap(),
            ShardSpec { index: 2, of: 5 }
        );
        for bad in ["5/5", "1/0", "x"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
    }
}
