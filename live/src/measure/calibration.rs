//! The generator's per-event cost on this machine, as a curve over load, and where it is
//! stored.
//!
//! The cost falls as the load rises (more events per wake-up and per read), so it is
//! measured at several loads ([`LOADS_QPS`]) and a plan reads it at the rate one shard will
//! carry ([`Calibration::cost_at`], [`Calibration::plan`]): a cost measured at a light load
//! would ask for shards a heavy one does not need. The measurement itself runs the generator
//! (`crate::generator::calibrate`); the default shard count reads the curve
//! (`crate::generator::shards`). The machine's loopback floor ([`super::floor`]) is stored
//! with it.

use std::path::{Path, PathBuf};

use heisenbench_model::error::ModelError;
use heisenbench_model::plan::{Budget, Hardware, Load, WorkerPlan, plan_workers};
use heisenbench_model::service::Service;
use heisenbench_model::stats::Dist;
use serde::{Deserialize, Serialize};

/// The loads a calibration measures by default, requests per second of 200-token streams
/// (about 20,000, 100,000 and 400,000 events per second).
pub const LOADS_QPS: [f64; 3] = [100.0, 500.0, 2000.0];

/// The build that measures: a calibration made by a debug build says nothing about a
/// release build's costs, and the reverse.
pub const BUILD: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// The per-event cost at one load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostPoint {
    /// Events per second the shard handled.
    pub events_per_s: f64,
    /// Mean CPU cost of one event, seconds.
    pub cost_mean_s: f64,
    /// Squared coefficient of variation of the per-event processing time.
    pub cost_scv: f64,
}

impl CostPoint {
    /// `load` with this point's per-event cost.
    pub fn applied_to(&self, load: &Load) -> Result<Load, ModelError> {
        with_cost(load, self.cost_mean_s, self.cost_scv)
    }
}

/// `load` with a gamma per-event cost of this mean and SCV (a negative SCV, from a noisy
/// fit, counts as zero).
fn with_cost(load: &Load, mean_s: f64, scv: f64) -> Result<Load, ModelError> {
    Ok(Load {
        event_cost: Service::gamma(mean_s, scv.max(0.0))?,
        ..load.clone()
    })
}

impl std::fmt::Display for CostPoint {
    /// "per-event cost 1.7us (SCV 0.37) at 22000 events/s per loop".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "per-event cost {} (SCV {:.2}) at {:.0} events/s per loop",
            heisenbench_model::units::format_seconds(self.cost_mean_s),
            self.cost_scv,
            self.events_per_s
        )
    }
}

/// A stored calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Mean CPU cost of one event on a shard's loop, seconds.
    pub event_cost_mean_s: f64,
    /// Squared coefficient of variation of the per-event processing time.
    pub event_cost_scv: f64,
    /// Events measured.
    pub events: u64,
    /// CPU seconds of the shard thread.
    pub cpu_s: f64,
    /// Load during the measurement, requests per second.
    pub qps: f64,
    /// Length of the measurement, seconds.
    pub duration_s: f64,
    /// Cores this machine reports.
    pub cores: usize,
    /// This machine's loopback floor, idle and at the measurement's chunk rate.
    #[serde(default)]
    pub floor: Option<crate::measure::floor::Floor>,
    /// The cost at each load measured, by rising rate (the fields above are the first).
    #[serde(default)]
    pub points: Vec<CostPoint>,
    /// The build that measured it ([`BUILD`]; empty in files from before it was kept).
    #[serde(default)]
    pub build: String,
}

impl Calibration {
    /// The calibration in lines of text: the cost by load, what one shard carries, and the
    /// loopback floor when one was measured; `path` is where it is stored.
    pub fn write_summary(&self, out: &mut dyn std::io::Write, path: &Path) -> std::io::Result<()> {
        use heisenbench_model::units::format_seconds;
        writeln!(
            out,
            "per-event cost on this machine, by load (200-token streams); stored in {}",
            path.display()
        )?;
        for p in &self.points {
            writeln!(
                out,
                "  {:>9.0} events/s: mean {} (SCV {:.2})",
                p.events_per_s,
                format_seconds(p.cost_mean_s),
                p.cost_scv
            )?;
        }
        let (events_per_s, requests_per_s) = self.loop_capacity();
        writeln!(
            out,
            "one shard loop tops out near {events_per_s:.0} events/s, i.e. {requests_per_s:.0} req/s of 200-token streams"
        )?;
        if let Some(f) = &self.floor {
            let pair = |idle: &Dist, loaded: &Dist| {
                format!(
                    "idle p50 {} p99 {}; at {:.0} msg/s p50 {} p99 {}",
                    format_seconds(idle.p50_s),
                    format_seconds(idle.p99_s),
                    f.loaded_rate_per_s,
                    format_seconds(loaded.p50_s),
                    format_seconds(loaded.p99_s)
                )
            };
            writeln!(
                out,
                "loopback floor (one-way, write stamp to the kernel's arrival stamp): {}",
                pair(&f.idle, &f.loaded)
            )?;
            writeln!(
                out,
                "the floor's reader after an arrival (read lag): {}",
                pair(&f.idle_read_lag, &f.loaded_read_lag)
            )?;
        }
        Ok(())
    }

    /// What one shard loop carries at most: events per second at the cost of the heaviest
    /// load measured (a loop near saturation pays that one), and requests per second of
    /// 200-token streams (202 events each: the tokens, the opening and the closing event).
    pub fn loop_capacity(&self) -> (f64, f64) {
        let busy = self
            .points
            .last()
            .map_or(self.event_cost_mean_s, |p| p.cost_mean_s);
        (1.0 / busy, 1.0 / (busy * 202.0))
    }

    /// Whether a build like this one measured it.
    pub fn fits_this_build(&self) -> bool {
        self.build.is_empty() || self.build == BUILD
    }

    /// The per-event cost (mean seconds, SCV) of a shard handling `events_per_s`:
    /// interpolated linearly in log rate between the loads measured, the nearest one's
    /// beyond them (never extrapolated).
    pub fn cost_at(&self, events_per_s: f64) -> (f64, f64) {
        let p = &self.points;
        let (Some(first), Some(last)) = (p.first(), p.last()) else {
            return (self.event_cost_mean_s, self.event_cost_scv);
        };
        if events_per_s.is_nan() || events_per_s <= first.events_per_s {
            return (first.cost_mean_s, first.cost_scv);
        }
        if events_per_s >= last.events_per_s {
            return (last.cost_mean_s, last.cost_scv);
        }
        let i = p
            .windows(2)
            .position(|w| events_per_s < w[1].events_per_s)
            .unwrap_or(0);
        let (a, b) = (p[i], p[i + 1]);
        let t = (events_per_s / a.events_per_s).ln() / (b.events_per_s / a.events_per_s).ln();
        (
            a.cost_mean_s + t * (b.cost_mean_s - a.cost_mean_s),
            a.cost_scv + t * (b.cost_scv - a.cost_scv),
        )
    }

    /// The shard count for `qps` requests per second of `output_tokens` tokens on average
    /// (one event each, plus the opening and closing events): the plan that keeps the p99
    /// wait for its shard's loop under `budget_s`, at the cost each shard pays at its own
    /// rate, capped at `cores`; with the reasons, one a line (`source` says where this
    /// calibration came from).
    ///
    /// What waits depends on how the server streams. Spread out (a real server's
    /// inter-token latency), each event waits on its own: the plan bounds an event's wait.
    /// All at once (`whole_responses`: a zero-latency server such as the embedded mock), a
    /// response's events arrive together and the loop works through them in one go, so
    /// the next send and the next response's first chunk wait behind the whole response:
    /// the plan bounds the wait of that one job, whose work is the sum of its events'
    /// (mean n E\[S\], SCV SCV(S) / n). The wait inside a response is the same for any
    /// count and is not what more shards can fix.
    pub fn default_shards(
        &self,
        qps: f64,
        output_tokens: f64,
        whole_responses: bool,
        cores: u32,
        budget_s: f64,
        source: &str,
    ) -> Result<(u32, Vec<String>), ModelError> {
        use heisenbench_model::plan::Assignment;
        use heisenbench_model::units::{Quantile, Rate, Seconds, format_seconds};
        let events = (output_tokens.round() as u32).max(1) + 2;
        let budget = Budget::Quantile {
            q: Quantile::P99,
            limit_s: Seconds::new(budget_s)?,
        };
        let hw = Hardware {
            cores: Some(cores),
            cores_per_machine: None,
        };
        let qps_rate = Rate::per_s(qps)?;
        let (plan, used, what) = if whole_responses {
            // Each response one job: n events' work, SCV(S) / n (a sum of n i.i.d. costs).
            let n = f64::from(events);
            let (plan, used) = self.plan_at_shard_rates(qps * n, &budget, hw, |mean, scv| {
                let job = Service::gamma_fitted(n * mean, scv / n)?;
                Load::new(qps_rate, 1, 1, job, Assignment::RoundRobin)
            })?;
            (
                plan,
                used,
                "a response's events arrive at once (zero-latency server): the p99 wait of the next send or first chunk behind whole responses",
            )
        } else {
            let cost = Service::gamma(self.event_cost_mean_s, self.event_cost_scv.max(0.0))?;
            let load = Load::new(qps_rate, events, 1, cost, Assignment::RoundRobin)?;
            let (plan, used) = self.plan(&load, &budget, hw)?;
            (plan, used, "the p99 wait of an event")
        };
        let mut why = vec![
            format!("{used}, {source}"),
            format!(
                "{qps} req/s x {events} events = {:.3} cores of event handling; {what}: {} shard(s) keep it under {} (utilisation {:.3})",
                plan.offered_erlangs,
                plan.workers,
                format_seconds(budget_s),
                plan.utilization
            ),
        ];
        if whole_responses {
            why.push(embedded_mock_line(plan.offered_erlangs, cores));
        }
        let k = plan.workers.min(cores).max(1);
        if k < plan.workers {
            why.push(format!(
                "this machine has {cores} core(s): using {k}; more shards than cores would only share them"
            ));
        }
        Ok((k, why))
    }

    /// Plans `load` with the cost this calibration gives at the rate each shard carries:
    /// k shards each handle 1/k of the events, so the cost depends on the answer. Starting
    /// from the cost at the whole rate (the lowest), k is replanned with the cost at rate /
    /// k until it stops changing (the cost rises as k does, so k only grows; at most 16
    /// rounds). Returns the plan and the cost it used.
    pub fn plan(
        &self,
        load: &Load,
        budget: &Budget,
        hw: Hardware,
    ) -> Result<(WorkerPlan, CostPoint), ModelError> {
        self.plan_at_shard_rates(load.event_rate_per_s(), budget, hw, |mean, scv| {
            with_cost(load, mean, scv)
        })
    }

    /// [`Calibration::plan`]'s fixed point for any load made from the per-event cost:
    /// `events_per_s` events a second over all shards, `load_at(mean, scv)` the load to
    /// plan when one event costs that.
    fn plan_at_shard_rates(
        &self,
        events_per_s: f64,
        budget: &Budget,
        hw: Hardware,
        load_at: impl Fn(f64, f64) -> Result<Load, ModelError>,
    ) -> Result<(WorkerPlan, CostPoint), ModelError> {
        let mut k = 1u32;
        let mut last = None;
        for _ in 0..16 {
            let rate = events_per_s / f64::from(k);
            let (mean, scv) = self.cost_at(rate);
            let plan = plan_workers(&load_at(mean, scv.max(0.0))?, budget, hw)?;
            let point = CostPoint {
                events_per_s: rate,
                cost_mean_s: mean,
                cost_scv: scv,
            };
            let next = plan.workers;
            last = Some((plan, point));
            if next <= k {
                break;
            }
            k = next;
        }
        Ok(last.expect("at least one round"))
    }
}

/// Why a stored calibration could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file could not be written (the error names the file).
    #[error("{0}")]
    Write(std::io::Error),
    /// The file is not a calibration.
    #[error("{path}: not a calibration file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// `$HEISENBENCH_CALIBRATION`, else `$XDG_CACHE_HOME/heisenbench/calibration.json`, else
/// `~/.cache/heisenbench/calibration.json`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HEISENBENCH_CALIBRATION") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("heisenbench").join("calibration.json"))
}

/// Reads a stored calibration; `Ok(None)` when the file does not exist.
pub fn load(path: &Path) -> Result<Option<Calibration>, CalibrationError> {
    match crate::files::read_bounded(path, crate::files::FileKind::Calibration) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CalibrationError::Format {
                    path: path.into(),
                    reason: e.to_string(),
                })
        }
        Err(e) if e.error_kind == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CalibrationError::Io {
            path: path.into(),
            source: std::io::Error::new(e.error_kind, e.reason),
        }),
    }
}

/// Writes `c` to `path` atomically, creating the directory.
pub fn store(path: &Path, c: &Calibration) -> Result<(), CalibrationError> {
    let io = |source| CalibrationError::Io {
        path: path.into(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    crate::files::write_atomic(path, &serde_json::to_vec_pretty(c).unwrap_or_default())
        .map_err(CalibrationError::Write)
}

/// The embedded mock's CPU per event over the generator's, rounded up from what
/// bench/RESULTS.md records under "Past the knee" (8,000-10,000 req/s x 200 tokens).
pub const EMBEDDED_MOCK_COST_RATIO: f64 = 0.4;

/// What the embedded mock adds to `generator_cores` of event handling on a machine of
/// `cores` cores, in one line, warning when the two together would keep it 90 % busy.
pub fn embedded_mock_line(generator_cores: f64, cores: u32) -> String {
    let mock = generator_cores * EMBEDDED_MOCK_COST_RATIO;
    let total = generator_cores + mock;
    let mut line = format!(
        "the embedded mock serves on the same cores: about {mock:.2} more ({EMBEDDED_MOCK_COST_RATIO} of the generator's cost per event, as measured); {total:.2} of {cores} together"
    );
    if total >= 0.9 * f64::from(cores) {
        line += "; WARNING: this machine cannot serve and generate this load at once, so the run will measure the machine's saturation (give --url a server elsewhere)";
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> Calibration {
        let pt = |r: f64, c: f64| CostPoint {
            events_per_s: r,
            cost_mean_s: c,
            cost_scv: 1.0,
        };
        Calibration {
            event_cost_mean_s: 2e-6,
            event_cost_scv: 1.0,
            events: 1,
            cpu_s: 1.0,
            qps: 100.0,
            duration_s: 1.0,
            cores: 2,
            floor: None,
            points: vec![pt(2e4, 2e-6), pt(1e5, 1e-6), pt(4e5, 0.5e-6)],
            build: BUILD.into(),
        }
    }

    /// The embedded mock's share is added to the generator's, and past 90 % of the cores
    /// the line warns.
    #[test]
    fn the_embedded_mock_is_counted_with_the_generator() {
        let calm = embedded_mock_line(1.0, 2);
        assert!(
            calm.contains("0.40 more") && calm.contains("1.40 of 2") && !calm.contains("WARNING"),
            "{calm}"
        );
        let busy = embedded_mock_line(1.573, 2);
        assert!(
            busy.contains("2.20 of 2") && busy.contains("WARNING"),
            "{busy}"
        );
    }

    #[test]
    fn cost_is_interpolated_in_log_rate_and_never_extrapolated() {
        let c = curve();
        assert_eq!(c.cost_at(1e3).0, 2e-6);
        assert_eq!(c.cost_at(1e7).0, 0.5e-6);
        assert!((c.cost_at(1e5).0 - 1e-6).abs() < 1e-18);
        // Halfway in log rate between 1e5 and 4e5 (2e5): halfway in cost.
        assert!((c.cost_at(2e5).0 - 0.75e-6).abs() < 1e-12);
        let old = Calibration {
            points: Vec::new(),
            ..curve()
        };
        assert_eq!(old.cost_at(5e5), (2e-6, 1.0));
    }

    /// The cost at the rate each shard carries: a fixed point where the plan's count and
    /// the cost at 1/count of the load agree.
    #[test]
    fn the_plan_uses_the_cost_at_its_own_shard_rate() {
        use heisenbench_model::plan::Assignment;
        use heisenbench_model::units::{Quantile, Rate, Seconds};
        let c = curve();
        let load = Load::new(
            Rate::per_s(5000.0).unwrap(),
            200,
            1,
            Service::exponential(1e-6).unwrap(),
            Assignment::RoundRobin,
        )
        .unwrap();
        let budget = Budget::Quantile {
            q: Quantile::P99,
            limit_s: Seconds::new(100e-6).unwrap(),
        };
        let (plan, used) = c.plan(&load, &budget, Hardware::default()).unwrap();
        let k = plan.workers;
        assert!(
            (used.events_per_s - 1e6 / f64::from(k)).abs() < 1e-6,
            "{used:?}"
        );
        assert_eq!(used.cost_mean_s, c.cost_at(1e6 / f64::from(k)).0);
        // One shard fewer does not meet the budget at its own (lower) per-event cost.
        if k > 1 {
            let rate = 1e6 / f64::from(k - 1);
            let fewer = Load {
                event_cost: Service::gamma(c.cost_at(rate).0, 1.0).unwrap(),
                ..load.clone()
            };
            let meets = fewer
                .worker_queue(k - 1, 1.0)
                .is_ok_and(|q| budget.is_met_by(q.as_ref()));
            assert!(!meets, "{k} - 1 shards would do at their own cost");
        }
    }
}
