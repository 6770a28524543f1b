//! An audit's report: what `audit --out` and `--json` write, read back for figures, and
//! printed for a terminal.

use std::io::{self, Write};
use std::path::Path;

use heisenbench_model::scenario::Stamp;
use heisenbench_model::units::format_seconds;
use serde::{Deserialize, Serialize};

use heisenbench_model::client_loop::{
    AuditedLoad, BatchedBound, ClockStart, CostSample, GapLateness, HELD_SHARE, KneeWalk,
    LoopPrediction,
};

use super::adapters::Reported;
use super::predict::Prediction;
use super::{Observed, PairedExcess, PairedFigure, Wire};
use heisenbench_model::interval::{SampleInterval, Statistic};

/// One audit.
#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct AuditReport {
    /// Format version (1).
    pub version: u32,
    /// "audit".
    pub kind: String,
    /// The client's name.
    #[serde(default)]
    pub label: Option<String>,
    /// What was seen.
    pub observed: Observed,
    /// What the model makes of it.
    pub prediction: Option<Prediction>,
    /// What the mock was told (its latencies are the truth's floor).
    pub server: String,
    /// The client's loop simulated as it runs, with per-request and per-chunk costs (an
    /// audit with `--cost-split`; the simulation is made by the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
}

/// The mean TTFT excess taken apart: the wire a request and its first chunk cross
/// ([`super::Wire`], measured after the client), the client's own lateness where its TTFT
/// counts it, and what is left.
///
/// A client that starts its clock at the intended send and stamps chunks at their arrival
/// adds to the server's true TTFT its own lateness, the request's way to the server and the
/// first chunk's way back. Each way is the wire's one-way delay (stamped as the audit's
/// truth is: at the write, and at the kernel's arrival stamp). The mean of a sum is the
/// sum of the means, so the account holds at the mean, with no assumption on how the
/// parts are distributed, and at the mean only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WireAccount {
    /// The client's mean TTFT excess (its reported minus the true mean), seconds.
    pub excess_s: f64,
    /// One way over the wire, its mean, seconds.
    pub one_way_s: f64,
    /// The rate the wire was measured at, messages per second.
    pub rate_per_s: f64,
    /// The client's own mean lateness, where its TTFT holds it (None otherwise).
    pub lateness_s: Option<f64>,
}

impl WireAccount {
    /// The mean TTFT a client added (`excess_s`) against the wire. Its lateness counts only
    /// where its TTFT starts at the intended send; a tool that starts at its own send
    /// leaves it out of its TTFT.
    pub fn of(reported: &Reported, excess_s: f64, wire: &Wire) -> Self {
        let lateness_s = match reported.clock() {
            ClockStart::Intended => reported.send_lag.and_then(|l| l.mean_s),
            ClockStart::OwnSend => None,
        };
        Self {
            excess_s,
            one_way_s: wire.one_way.mean_s,
            rate_per_s: wire.rate_per_s,
            lateness_s,
        }
    }

    /// The request's way and the first chunk's, seconds.
    pub fn wire_s(&self) -> f64 {
        2.0 * self.one_way_s
    }

    /// What the client adds beyond the wire and the lateness it reports, seconds.
    pub fn beyond_s(&self) -> f64 {
        self.excess_s - self.wire_s() - self.lateness_s.unwrap_or(0.0)
    }

    /// The account in one line for a terminal.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let f = format_seconds;
        let own = self.lateness_s.map_or(String::new(), |l| {
            format!(" and its own lateness ({}, inside its TTFT)", f(l))
        });
        writeln!(
            out,
            "  the wire (this machine's loopback, measured after the client): one way {} at the mean, lone \
             messages at {:.0} a second; the request and its first chunk cross it once each, {} of the {} \
             mean TTFT excess; beyond the wire{own} the client adds {} ({:+.0}% of its excess)",
            f(self.one_way_s),
            self.rate_per_s,
            f(self.wire_s()),
            f(self.excess_s),
            f(self.beyond_s()),
            100.0 * self.beyond_s() / self.excess_s
        )
    }
}

/// The client's loop simulated as it runs ([`LoopPrediction`]), held against what this
/// audit measured.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct Simulated {
    /// The two audits the costs were split from: the short one's rate, and each one's
    /// chunks and CPU per request.
    pub split_from: SplitFrom,
    /// What the simulation predicts at this audit's load.
    pub prediction: LoopPrediction,
    /// What this audit measured of the TTFT the client adds: its reported minus the
    /// server's true mean, p50, p90 and p99 (None where the tool reports no such figure).
    pub measured_excess_s: [Option<f64>; 4],
    /// Whether the loop was fitted on this audit (false: a prediction held out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fitted_here: bool,
    /// For an audit held out: the same loop with all of its path at this audit's own
    /// speed, read from its CPU a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_its_speed: Option<GivenSpeed>,
    /// For an audit held out: the same loop at the speed the machine's gauge during this
    /// run puts it, where the run and every calibration audit were gauged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_the_machine: Option<GivenMachine>,
    /// For an audit held out: the same loop at the speed the gauge's walk through memory
    /// during this run puts it, where the run and every calibration audit were so gauged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_the_walk: Option<GivenMachine>,
    /// For an audit held out: the loop at the fastest and the slowest speed its
    /// calibration audits ran, where they ran at more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_speeds: Option<SpeedBand>,
    /// For an audit held out: the forecast as a range, where the band was read and the
    /// calibration's audits carry their sampling noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast_range: Option<ForecastRange>,
    /// For a tool that sleeps each gap, where its lateness was told from the draws' spread:
    /// the chance that this audit's gaps, at the rate asked, send [`HELD_SHARE`] of it
    /// over the draws a seed may give ([`GapLateness::held_chance`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_chance: Option<f64>,
    /// For a tool that sleeps each gap, where this audit's draws were replayed
    /// ([`DrawnGaps`]): the rate it sends with them at the lateness read, per second
    /// ([`GapLateness::achieved_given_draws_per_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_sent_per_s: Option<f64>,
    /// For a tool that sleeps each gap, where this audit's draws were replayed: the chance
    /// that it sends [`HELD_SHARE`] of the rate asked with them, over the lateness's own
    /// error alone ([`GapLateness::held_chance_given_draws`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_held_chance: Option<f64>,
}

/// A held-out audit's forecast at the fastest and the slowest speed the calibration saw
/// (`heisenbench_sim::client_loop::predict_across_speeds`): each calibration audit's CPU
/// a request against the costs fitted on them all, its least and greatest, and the TTFT
/// the client adds with all of its path at each.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
pub struct SpeedBand {
    /// The fastest and the slowest speed, as factors on the fitted costs.
    pub speeds: [f64; 2],
    /// The calibration audits they were read from.
    pub audits: usize,
    /// The TTFT the client adds at each (mean, p50, p90, p99), seconds.
    pub reported_s: [[f64; 4]; 2],
}

/// Where a measured figure lies against a band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Below its lower edge.
    Below,
    /// Between its edges.
    Inside,
    /// Above its upper edge.
    Above,
}

impl Place {
    /// Where `x` lies against the band of `a` and `b` (in either order).
    pub fn of(x: f64, a: f64, b: f64) -> Self {
        if x < a.min(b) {
            Self::Below
        } else if x > a.max(b) {
            Self::Above
        } else {
            Self::Inside
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Below => "below",
            Self::Inside => "inside",
            Self::Above => "above",
        }
    }
}

impl SpeedBand {
    /// Where the measured statistic `i` (0 mean, 1 p50, 2 p90, 3 p99) lies against the
    /// band at it.
    pub fn place(&self, i: usize, measured: f64) -> Place {
        Place::of(measured, self.reported_s[0][i], self.reported_s[1][i])
    }
}

/// The loop of a held-out audit simulated at its run's speed: the queue's model once the
/// client's speed in that run is known, not a forecast of the run
/// ([`heisenbench_model::client_loop::LoopCosts::speed_of`]).
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
pub struct GivenSpeed {
    /// This audit's CPU a request over what the fitted costs put on it at its load.
    pub speed: f64,
    /// The TTFT the client adds so simulated: mean, p50, p90 and p99, seconds.
    pub reported_s: [f64; 4],
}

/// The loop of a held-out audit forecast from the machine's speed during its run: the
/// audit's gauge (a fixed unit of work, or a fixed walk through memory, timed beside the
/// client) against the calibration audits' gauges and speeds
/// (`heisenbench_sim::client_loop::predict_given_machine` and `predict_given_walk`).
/// Nothing of the run's client is read: a forecast, unlike [`GivenSpeed`].
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
pub struct GivenMachine {
    /// The gauge's median in this run (its unit's or its walk's), seconds.
    pub unit_s: f64,
    /// The calibration audits' gauges, their geometric mean, seconds a unit.
    pub calibration_unit_s: f64,
    /// Their speeds against the fitted costs, the geometric mean.
    pub calibration_speed: f64,
    /// The calibration audits read.
    pub audits: usize,
    /// The power of the gauge's ratio the client's speed goes as.
    pub power: f64,
    /// The speed the gauge puts this run at, a factor on the fitted costs.
    pub speed: f64,
    /// The TTFT the client adds so simulated: mean, p50, p90 and p99, seconds.
    pub reported_s: [f64; 4],
}

/// Where a cost split came from.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct SplitFrom {
    /// The rate both audits were offered.
    pub rate_per_s: f64,
    /// The shorter audit.
    pub short: CostSample,
    /// The longer audit.
    pub long: CostSample,
    /// The shorter audit's measured excess and the simulation's prediction for it (with
    /// the share fitted on the longer one): the held-out check at another length.
    pub short_measured_excess_s: [Option<f64>; 4],
    /// The prediction for the shorter audit.
    pub short_predicted_s: [f64; 4],
    /// The shorter length audited again at another rate, which separates the CPU spent per
    /// second from the CPU spent per request (absent: one rate, no part per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_at_other_rate: Option<HeldOut>,
    /// The sampling noise of the audits the loop was fitted on: the median, over those
    /// whose records paired, of their mean excess's 95 % half-width over that mean (None
    /// where none paired, and in series written before it was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_noise: Option<f64>,
}

impl SplitFrom {
    /// [`SplitFrom::mean_noise`] of the audits `fitted_on`.
    pub fn noise_of<'a>(fitted_on: impl IntoIterator<Item = &'a AuditReport>) -> Option<f64> {
        let mut relative: Vec<f64> = fitted_on
            .into_iter()
            .filter_map(|a| {
                let p = a.observed.paired_excess?;
                let i = p.interval?;
                (p.mean_s > 0.0).then(|| (i.mean[1] - i.mean[0]) / 2.0 / p.mean_s)
            })
            .collect();
        relative.sort_by(f64::total_cmp);
        relative.get(relative.len() / 2).copied()
    }
}

/// A held-out audit's forecast as a range: the band of the calibration's speeds (the
/// forecast itself included), each end widened by the calibration's own sampling noise of
/// the mean, `[low / (1 + h), high * (1 + h)]`. What it covers is measured, not assumed:
/// see docs/audit.md.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
pub struct ForecastRange {
    /// The widening, `h`: [`SplitFrom::mean_noise`].
    pub widened_by: f64,
    /// The mean excess's range, seconds.
    pub mean_s: [f64; 2],
    /// The p99's, seconds.
    pub p99_s: [f64; 2],
}

impl ForecastRange {
    /// The range of `forecast` (mean, p50, p90, p99) across `band`, widened by `h`.
    pub fn of(forecast: &[f64; 4], band: &SpeedBand, h: f64) -> Self {
        let range = |i: usize| {
            let ends = [forecast[i], band.reported_s[0][i], band.reported_s[1][i]];
            let low = ends.iter().copied().fold(f64::INFINITY, f64::min);
            let high = ends.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            [low / (1.0 + h), high * (1.0 + h)]
        };
        Self {
            widened_by: h,
            mean_s: range(0),
            p99_s: range(3),
        }
    }

    /// Whether the measured statistic `i` (0 the mean, 3 the p99) lies inside.
    pub fn holds(&self, i: usize, measured: f64) -> bool {
        let [low, high] = if i == 0 { self.mean_s } else { self.p99_s };
        (low..=high).contains(&measured)
    }
}

/// A calibration audit held against what the fitted loop predicts for it.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct HeldOut {
    /// Its rate, length and CPU per request.
    pub sample: CostSample,
    /// The TTFT the client added, measured: mean, p50, p90, p99.
    pub measured_excess_s: [Option<f64>; 4],
    /// The same, predicted.
    pub predicted_s: [f64; 4],
}

impl HeldOut {
    /// The relative error of the predicted mean.
    pub fn mean_error(&self) -> Option<f64> {
        let m = self.measured_excess_s[0].filter(|m| *m > 0.0)?;
        Some((self.predicted_s[0] - m) / m)
    }
}

impl Simulated {
    /// [`Simulated::held_chance`] of the audit `observed` under the lateness `g`.
    pub fn held_chance_of(g: &GapLateness, observed: &Observed) -> Option<f64> {
        g.is_measured().then(|| {
            g.held_chance(
                observed.offered.rate_per_s,
                observed.truth.gaps(),
                HELD_SHARE,
            )
        })
    }

    /// The relative error of the predicted mean excess against the measured one.
    pub fn mean_error(&self) -> Option<f64> {
        let m = self.measured_excess_s[0]?;
        (m > 0.0).then(|| (self.prediction.reported_s[0] - m) / m)
    }

    /// The relative errors of the mean and the p99 given the audit's own speed against the
    /// measured ones (None where either is missing).
    pub fn given_speed_errors(&self) -> Option<[Option<f64>; 2]> {
        Some(self.errors_of(&self.given_its_speed?.reported_s))
    }

    /// The relative errors of the mean and the p99 of `reported` against the measured ones
    /// (None where either is missing).
    fn errors_of(&self, reported: &[f64; 4]) -> [Option<f64>; 2] {
        [self.error_at(reported, 0), self.error_at(reported, 3)]
    }

    /// The relative error of `reported`'s statistic `i` (mean, p50, p90, p99) against the
    /// measured one (None where that is missing or not positive).
    fn error_at(&self, reported: &[f64; 4], i: usize) -> Option<f64> {
        let m = self.measured_excess_s[i].filter(|m| *m > 0.0)?;
        Some((reported[i] - m) / m)
    }

    /// Prints the simulation against what was measured in `observed`, for a terminal (its
    /// machine's cores nearly all busy put the audit outside the model's range).
    pub fn write(&self, out: &mut dyn Write, observed: &Observed) -> io::Result<()> {
        let machine = observed.client.machine;
        let f = format_seconds;
        let p = &self.prediction;
        let s = &self.split_from;
        let cells = |xs: [Option<f64>; 4]| {
            xs.map(|x| x.map_or("-".into(), f))
                .iter()
                .zip(["mean", "p50", "p90", "p99"])
                .map(|(v, k)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let per_second = match &s.short_at_other_rate {
            Some(h) => format!(
                " and {:.2} core(s) a second whatever the load (with the audit at {:.0} req/s x {:.0})",
                p.costs.per_second, h.sample.rate_per_s, h.sample.chunks_per_request
            ),
            None => String::new(),
        };
        let delay = if p.delay_s > 0.0 {
            format!(
                "; {} of latency a request that takes no CPU of the loop (fitted with the share{})",
                f(p.delay_s),
                if p.delay_spread > 0.0 || !p.latency_shape.is_constant() {
                    format!(
                        "; {:.0} % of it drawn for each request from an exponential, fitted with the slice on the quantiles",
                        100.0 * p.delay_spread
                    )
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        let slice = match p.slice_s {
            Some(q) => format!(
                "; a request's send and finish work runs in slices of {} with the jobs queued meanwhile between them (fitted on the p99)",
                f(q)
            ),
            None => String::new(),
        };
        let spread = if p.costs.request_scv > 0.0 {
            format!(
                "; a request's work varies with SCV {:.2} (the spread of the busiest process's CPU over time)",
                p.costs.request_scv
            )
        } else {
            String::new()
        };
        writeln!(
            out,
            "simulated loop: {} a request + {} a chunk{per_second}{spread}{slice}{delay}, from the audits at {} req/s x {:.0} and x {:.0} tokens \
             ({} and {} of CPU a request); {} loop(s); clock from {} to {}; {:.2} of a request's fixed cost \
             before it leaves ({})",
            f(p.costs.per_request_s),
            f(p.costs.per_chunk_s),
            s.rate_per_s,
            s.short.chunks_per_request,
            s.long.chunks_per_request,
            f(s.short.cpu_per_request_s),
            f(s.long.cpu_per_request_s),
            p.loops,
            match p.clock {
                ClockStart::Intended => "the intended send",
                ClockStart::OwnSend => "the client's own send (its loop's backlog left out)",
            },
            match p.stamp {
                Stamp::NetworkArrival => "the first chunk's arrival (its loop's reading left out)",
                Stamp::AfterProcessing => "the first chunk read by its loop",
            },
            p.before_send,
            p.before_send_from
        )?;
        writeln!(
            out,
            "  TTFT the client adds, predicted: {}{}",
            cells(p.reported_s.map(Some)),
            if p.delay_s > 0.0 {
                format!(
                    "; its loop's queue and CPU {} of the mean, the latency beyond the CPU the rest",
                    f((p.reported_s[0] - p.delay_s).max(0.0))
                )
            } else {
                String::new()
            }
        )?;
        writeln!(
            out,
            "  TTFT the client adds, measured:  {}{}",
            cells(self.measured_excess_s),
            self.mean_error().map_or(String::new(), |e| format!(
                "; the mean {:+.0}% ({})",
                e * 100.0,
                if self.fitted_here {
                    "fitted on this audit"
                } else {
                    "held out"
                }
            ))
        )?;
        if let Some(i) = observed.paired_excess.and_then(|p| p.interval) {
            let inside = |holds: bool| if holds { "inside" } else { "outside" };
            writeln!(
                out,
                "  this run's own sampling noise (95 %, its {} paired requests in {} batches in the order they arrived, \
                 counting as {:.0} independent ones): the mean {} to {}, the p99 {} to {}{}; the forecast's mean {}, its p99 {}",
                i.samples,
                i.batches,
                i.samples as f64 / i.inflation,
                f(i.mean[0]),
                f(i.mean[1]),
                f(i.quantile[0]),
                f(i.quantile[1]),
                if i.open_above { " or more" } else { "" },
                inside(i.holds_mean(p.reported_s[0])),
                inside(i.holds_quantile(p.reported_s[3]))
            )?;
        }
        if let Some(g) = self.given_its_speed {
            let errors = self.given_speed_errors().unwrap_or([None, None]);
            writeln!(
                out,
                "  given its own speed:             {}; the mean {}, the p99 {} (its CPU a request {:.2} of the fitted costs' \
                 at its load, and all of its path so, the latency beyond the CPU too: the loop given this run's speed, \
                 not a forecast of it)",
                cells(g.reported_s.map(Some)),
                signed_percent(errors[0]),
                signed_percent(errors[1]),
                g.speed
            )?;
        }
        let gauges = [
            (
                self.given_the_machine,
                "given the machine's speed: ",
                "a unit of work",
                "unit's",
            ),
            (
                self.given_the_walk,
                "given the memory's speed:  ",
                "a walk through memory",
                "walk's",
            ),
        ];
        for (g, label, work, ratio) in gauges {
            let Some(g) = g else { continue };
            let errors = self.errors_of(&g.reported_s);
            writeln!(
                out,
                "  {label}      {}; the mean {}, the p99 {} ({work} beside the client took {} \
                 against {} over the calibration's {} audits, which ran at {:.2} of the fitted costs: this run's path put at \
                 {:.2}, as the {ratio} ratio to the power {}; read from the machine, not from this run's client)",
                cells(g.reported_s.map(Some)),
                signed_percent(errors[0]),
                signed_percent(errors[1]),
                f(g.unit_s),
                f(g.calibration_unit_s),
                g.audits,
                g.calibration_speed,
                g.speed,
                g.power
            )?;
        }
        if let Some(b) = self.across_speeds {
            let band = |i: usize| {
                let (lo, hi) = (b.reported_s[0][i], b.reported_s[1][i]);
                format!("{} to {}", f(lo.min(hi)), f(lo.max(hi)))
            };
            let place = |i: usize| self.measured_excess_s[i].map_or("-", |m| b.place(i, m).word());
            let run = self.given_its_speed.map_or(String::new(), |g| {
                format!(
                    "; this run's {:.2}: {}",
                    g.speed,
                    Place::of(g.speed, b.speeds[0], b.speeds[1]).word()
                )
            });
            writeln!(
                out,
                "  across the calibration's speeds: the mean {}, the p99 {}; measured: the mean {}, the p99 {} \
                 (its {} audits ran at {:.2} to {:.2} of the fitted costs{run})",
                band(0),
                band(3),
                place(0),
                place(3),
                b.audits,
                b.speeds[0],
                b.speeds[1]
            )?;
        }
        if let Some(r) = self.forecast_range {
            let inside = |i: usize| {
                self.measured_excess_s[i]
                    .map_or("-", |m| if r.holds(i, m) { "inside" } else { "outside" })
            };
            writeln!(
                out,
                "  the forecast's range (those speeds, each end widened by the calibration's own sampling noise of the mean, \
                 {:.0} %): the mean {} to {}, the p99 {} to {}; measured: the mean {}, the p99 {}",
                100.0 * r.widened_by,
                f(r.mean_s[0]),
                f(r.mean_s[1]),
                f(r.p99_s[0]),
                f(r.p99_s[1]),
                inside(0),
                inside(3)
            )?;
        }
        if let Some(scv) = p.arrival_scv {
            writeln!(
                out,
                "  requests reach the loop at the gaps the server saw: gamma, SCV {scv:.2} (Poisson: 1)"
            )?;
        }
        if let Some(m) = machine.filter(super::MachineLoad::crowded) {
            writeln!(
                out,
                "  the machine's cores were {:.0}% busy in this audit: the client's runnable work waited for cores, \
                 which the simulated loop holds at wake-ups only; this audit is outside its range",
                m.share() * 100.0
            )?;
        }
        if let Some(w) = p.wake_wait_s {
            writeln!(
                out,
                "  the loop woken by work waits {} for a core on average before it runs ({})",
                f(w),
                if p.wake_wait_from.is_empty() {
                    "given"
                } else {
                    &p.wake_wait_from
                }
            )?;
            if let Some(r) = p.preempt_per_cpu_s {
                writeln!(
                    out,
                    "  and loses its core {r:.0} times a second of its CPU while it has work, waiting as long again each time (--preemptions: the calibration audits' mean)"
                )?;
            }
        }
        let first = HeldOut {
            sample: s.short,
            measured_excess_s: s.short_measured_excess_s,
            predicted_s: s.short_predicted_s,
        };
        for h in std::iter::once(&first).chain(&s.short_at_other_rate) {
            writeln!(
                out,
                "  at {:.0} req/s x {:.0} tokens: predicted mean {}, measured {}{}",
                h.sample.rate_per_s,
                h.sample.chunks_per_request,
                f(h.predicted_s[0]),
                h.measured_excess_s[0].map_or("-".into(), f),
                h.mean_error()
                    .map_or(String::new(), |e| format!(" ({:+.0}%)", e * 100.0))
            )?;
        }
        let busiest = match p.busiest {
            Some(b) => format!(
                "; its busiest process {} a request ({:.2} core(s) a second besides) on one core",
                f(b.request_s(p.chunks_per_request)),
                b.per_second
            ),
            None => String::new(),
        };
        let machine = match (p.machine, p.machine_saturation_per_s()) {
            (Some((m, cores)), Some(rate)) => format!(
                "; the machine's {cores} cores full at {rate:.0} req/s (the client, the mock and the audit: {} a request, {:.2} core(s) a second besides)",
                f(m.request_s(p.chunks_per_request)),
                m.per_second
            ),
            _ => String::new(),
        };
        writeln!(
            out,
            "  saturates at {:.0} req/s x {:.0} tokens ({} loop(s) at {} a request{busiest}{machine}); this audit: {:.0} req/s",
            p.saturation_per_s,
            p.chunks_per_request,
            p.loops,
            f(p.costs.request_s(p.chunks_per_request)),
            p.rate_per_s
        )?;
        let binding = p.filling.iter().min_by(|a, b| {
            a.saturation_per_s(p.chunks_per_request)
                .total_cmp(&b.saturation_per_s(p.chunks_per_request))
        });
        match (binding, p.filled_saturation_per_s) {
            (Some(fc), Some(rate)) => writeln!(
                out,
                "  as its cores fill: {rate:.0} req/s, where {} core(s) run {} a request ({} more a request that finds them idle; {} at this audit's load)",
                fc.cores,
                f(fc.per_request_s + p.chunks_per_request * fc.per_chunk_s),
                f(fc.idle_s),
                f(fc.request_s(p.chunks_per_request, p.rate_per_s))
            ),
            _ => Ok(()),
        }?;
        if let Some(b) = p.batched {
            let machine = match (b.machine, b.machine_per_s()) {
                (Some((cpu, cores)), Some(rate)) => {
                    let apart = b.machine_apart().map_or(String::new(), |(c, rest)| {
                        format!(
                            ", {} without its {c:.2} core(s) a second (spread over more requests at the knee)",
                            f(rest)
                        )
                    });
                    format!(
                        "; the machine's {cores} cores {} a request{apart}, full at {rate:.0} req/s",
                        f(cpu)
                    )
                }
                _ => String::new(),
            };
            let process = match (b.busiest_cpu_per_request_s, b.process_per_s()) {
                (Some(cpu), Some(rate)) => format!(
                    "; its busiest process, all its threads, {} a request, one core full at {rate:.0} req/s",
                    f(cpu)
                ),
                _ => String::new(),
            };
            writeln!(
                out,
                "  with its work met in batches (an audit at {:.0} req/s, the responses released together every {}): \
                 {} loop(s) at {} a request, full at {:.0} req/s{process}{machine}; it holds at most {:.0} req/s",
                b.rate_per_s,
                f(b.release_every_s),
                b.loops,
                f(b.loops_cpu_per_request_s),
                b.loops_per_s(),
                b.saturation_per_s()
            )?;
        }
        if let Some(g) = p.gap_lateness {
            let offered = observed.offered.rate_per_s;
            writeln!(
                out,
                "  its pacing: each gap slept from the last wake, {} late on average (\u{b1} {}, from {} calibration audit(s){}): \
                 asked for {offered:.0} req/s it sends {:.0} (the server saw {:.1}{}); {}",
                f(g.late_s),
                f(g.stderr_s),
                g.audits,
                if g.net_of_draws {
                    ", net of their replayed draws"
                } else {
                    ""
                },
                g.achieved_per_s(offered),
                p.rate_per_s,
                match (self.drawn_sent_per_s, self.drawn_held_chance) {
                    (Some(r), Some(c)) => format!(
                        "; with its own draws replayed it sends {r:.1}, {:.0}% of the rate with chance {:.0}%",
                        HELD_SHARE * 100.0,
                        c * 100.0
                    ),
                    (Some(r), None) => format!("; with its own draws replayed it sends {r:.1}"),
                    _ => String::new(),
                },
                match p.paced_held_per_s {
                    Some(h) => format!(
                        "it sends {:.0}% of no rate above {h:.0} req/s, whatever its CPU",
                        HELD_SHARE * 100.0
                    ),
                    None => "the lateness is within the draws' own spread".into(),
                }
            )?;
            if let Some(chance) = self.held_chance {
                write_held_chance(out, &g, chance, observed)?;
            }
        }
        Ok(())
    }
}

/// How far a run's length lets the held rule read a tool that sleeps each gap: the chance
/// this audit's gaps at its rate sent [`HELD_SHARE`] of it over the draws a seed may give
/// ([`Simulated::held_chance`]), and how many requests make a run at 0.85 of the held
/// limit sure of it to 95 % ([`GapLateness::gaps_to_hold`]).
fn write_held_chance(
    out: &mut dyn Write,
    g: &GapLateness,
    chance: f64,
    observed: &Observed,
) -> io::Result<()> {
    let offered = observed.offered.rate_per_s;
    let gaps = observed.truth.gaps();
    let sent = observed.truth.achieved_rate_per_s / offered;
    let near = g.held_per_s(HELD_SHARE).map(|h| 0.85 * h);
    let sure = near.and_then(|r| Some((r, g.gaps_to_hold(r, HELD_SHARE, 0.95)?)));
    writeln!(
        out,
        "  whether a run holds {:.0}% is its draws' too: this audit's {gaps} gaps asked at {offered:.0} req/s \
         (it sent {:.1}%) hold with chance {:.0}% over the draws a seed may give{}",
        HELD_SHARE * 100.0,
        sent * 100.0,
        chance * 100.0,
        match sure {
            Some((r, n)) => format!(
                "; at 0.85 of its limit ({r:.0} req/s) 95% sure takes {n} requests ({:.1} min)",
                n as f64 / r / 60.0
            ),
            None => String::new(),
        }
    )
}

/// `audit --rates`: one report per rate (without the per-request records).
#[derive(Debug, Serialize, Deserialize)]
pub struct AuditSeries {
    /// Format version (1).
    pub version: u32,
    /// "audit-series".
    pub kind: String,
    /// One audit per rate, in the order run.
    pub points: Vec<AuditReport>,
    /// The cost split's calibration audits at the shorter length (`--cost-split`), from
    /// which `audit --from` reads the client's loop again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<AuditReport>,
    /// The audit with the server's responses released together (`--batched`), from which
    /// the throughput the client holds is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batched: Option<BatchedAudit>,
    /// The held-out audits of a tool that sleeps each gap, read as a walk up their rates
    /// (`audit --from --held-out` with two or more, each at its own rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_walk: Option<WalkRead>,
}

/// One step of a knee walk: an audit at a rate, and whether it sent [`HELD_SHARE`] of it.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct WalkStep {
    /// The rate asked, per second.
    pub rate_per_s: f64,
    /// The gaps between its arrivals at the server.
    pub gaps: u64,
    /// The share of the rate the server saw.
    pub sent: f64,
    /// The mean of the gaps the tool's seed drew for this run, where they were replayed
    /// ([`DrawnGaps`]), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_mean_gap_s: Option<f64>,
}

/// The gaps a paced tool's seed drew for one run, replayed apart from it
/// (`bench/audit/sglang-gaps.sh` runs SGLang's bench with its sleeps cut to zero and keeps
/// every exponential it draws): the run's rate asked, its requests, and the mean of the
/// gaps between its first and last, seconds.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
pub struct DrawnGaps {
    /// The rate asked, per second.
    pub rate_per_s: f64,
    /// The requests the run sent.
    pub requests: u64,
    /// The mean of the `requests - 1` gaps drawn, seconds.
    pub mean_gap_s: f64,
}

impl DrawnGaps {
    /// The draws of the run `audit` made, among `drawn`: at its rate and of its requests.
    pub fn of<'d>(drawn: &'d [Self], audit: &AuditReport) -> Option<&'d Self> {
        let o = &audit.observed;
        drawn.iter().find(|d| {
            d.requests == o.truth.requests
                && (d.rate_per_s - o.offered.rate_per_s).abs() <= 1e-9 * d.rate_per_s.abs()
        })
    }
}

impl WalkStep {
    /// Whether it sent [`HELD_SHARE`] of its rate.
    pub fn held(&self) -> bool {
        self.sent >= HELD_SHARE
    }
}

/// Audits of a tool that sleeps each gap, at rising rates, read as a walk up them until
/// two in a row send less than [`HELD_SHARE`] (as `bench/audit/run.sh` walks to a knee), by
/// the rate sent alone: what such a walk reads over the draws a seed may give
/// ([`GapLateness::knee_walk`]), against what these steps read.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct WalkRead {
    /// The steps, by rate.
    pub steps: Vec<WalkStep>,
    /// The walk's reading over the draws.
    pub predicted: KneeWalk,
    /// The highest step these audits held before two in a row fell short (an index into
    /// `steps`), None where none did.
    pub read: Option<usize>,
    /// The chance a walk reads no higher than they did.
    pub at_most: f64,
    /// The highest rate of which the tool sends [`HELD_SHARE`], for draws of the mean
    /// asked.
    pub limit_per_s: Option<f64>,
    /// The walk's reading over the draws and the lateness's own error
    /// ([`GapLateness::knee_walk_over_error`]; absent from files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_error: Option<KneeWalk>,
    /// The chance a walk reads no higher than these steps did, over the lateness's error
    /// too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most_over_error: Option<f64>,
    /// The limit at the lateness 1.96 standard errors above and below its mean (95 %): the
    /// lower end, and the upper (None: open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_range_per_s: Option<(f64, Option<f64>)>,
    /// The chance a walk reads a step within [`KNEE_BAND`] of the limit, over the draws and
    /// the lateness's error, by the steps' length: at these steps' lengths (1), and at 10
    /// and 100 times them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub within_band: Vec<(f64, f64)>,
    /// Where every step's draws were replayed: the walk's reading given them, over the
    /// lateness's error alone ([`GapLateness::knee_walk_given_draws`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_draws: Option<DrawnWalk>,
}

/// A knee walk's reading given the draws each step's seed made: what is left uncertain is
/// the lateness.
#[derive(Debug, Serialize, Deserialize, Clone, PartialEq)]
pub struct DrawnWalk {
    /// The reading's chances over the lateness's error.
    pub walk: KneeWalk,
    /// The reading the lateness as read makes (an index into the steps; None: no step).
    pub at_lateness: Option<usize>,
    /// The chance a walk with these draws reads no higher than the steps did.
    pub at_most: f64,
    /// The chance it reads a step within [`KNEE_BAND`] of the limit.
    pub within_band: f64,
}

/// Steps short in a row that end a walk.
const WALK_STOPS_AFTER: usize = 2;

/// How far a predicted knee may lie from the rate read, as a share of it: the audit's goal.
pub const KNEE_BAND: f64 = 0.15;

/// The steps' lengths, as multiples of those walked, at which [`WalkRead::within_band`]
/// is read: longer steps shrink the draws' part, never the lateness's error.
const LONGER: [f64; 3] = [1.0, 10.0, 100.0];

impl WalkRead {
    /// The walk up `audits` under the lateness `g` ([`Self::of_steps`]), each with its
    /// draws where `drawn` has them.
    pub fn of(g: &GapLateness, audits: &[&AuditReport], drawn: &[DrawnGaps]) -> Option<Self> {
        let steps = audits
            .iter()
            .map(|a| {
                let t = &a.observed.truth;
                let rate = a.observed.offered.rate_per_s;
                WalkStep {
                    rate_per_s: rate,
                    gaps: t.gaps(),
                    sent: t.achieved_rate_per_s / rate,
                    drawn_mean_gap_s: DrawnGaps::of(drawn, a).map(|d| d.mean_gap_s),
                }
            })
            .collect();
        Self::of_steps(g, steps)
    }

    /// The walk up `steps`, taken by rate, under the lateness `g`. None for fewer than two
    /// steps, for two at one rate (audits repeated at a rate, as `run.sh`'s `REPEAT` makes,
    /// are not a walk up the rates), or where the lateness is within the draws' own spread.
    pub fn of_steps(g: &GapLateness, mut steps: Vec<WalkStep>) -> Option<Self> {
        steps.sort_by(|a, b| a.rate_per_s.total_cmp(&b.rate_per_s));
        let rising = steps.windows(2).all(|w| w[0].rate_per_s < w[1].rate_per_s);
        if steps.len() < 2 || !rising || !g.is_measured() {
            return None;
        }
        let asked: Vec<(f64, u64)> = steps.iter().map(|s| (s.rate_per_s, s.gaps)).collect();
        let predicted = g.knee_walk(&asked, HELD_SHARE, WALK_STOPS_AFTER);
        // What these steps read: the same walk with each step's outcome known.
        let known: Vec<f64> = steps
            .iter()
            .map(|s| f64::from(u8::from(s.held())))
            .collect();
        let read = KneeWalk::of_chances(&known, WALK_STOPS_AFTER).likeliest();
        let over_error = g.knee_walk_over_error(&asked, HELD_SHARE, WALK_STOPS_AFTER);
        let rates: Vec<f64> = steps.iter().map(|s| s.rate_per_s).collect();
        let limit_per_s = g.held_per_s(HELD_SHARE);
        let within_band = limit_per_s
            .map(|limit| {
                LONGER
                    .iter()
                    .map(|&times| {
                        let longer: Vec<(f64, u64)> = asked
                            .iter()
                            .map(|&(rate, gaps)| (rate, (gaps as f64 * times).round() as u64))
                            .collect();
                        let walk = g.knee_walk_over_error(&longer, HELD_SHARE, WALK_STOPS_AFTER);
                        (times, walk.chance_within(&rates, limit, KNEE_BAND))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let given_draws = steps
            .iter()
            .map(|s| s.drawn_mean_gap_s.map(|m| (s.rate_per_s, m)))
            .collect::<Option<Vec<(f64, f64)>>>()
            .map(|drawn| {
                let walk = g.knee_walk_given_draws(&drawn, HELD_SHARE, WALK_STOPS_AFTER);
                let exact = GapLateness {
                    stderr_s: 0.0,
                    ..*g
                };
                DrawnWalk {
                    at_lateness: exact
                        .knee_walk_given_draws(&drawn, HELD_SHARE, WALK_STOPS_AFTER)
                        .likeliest(),
                    at_most: walk.at_most(read),
                    within_band: limit_per_s
                        .map_or(0.0, |l| walk.chance_within(&rates, l, KNEE_BAND)),
                    walk,
                }
            });
        Some(Self {
            given_draws,
            at_most: predicted.at_most(read),
            at_most_over_error: Some(over_error.at_most(read)),
            over_error: Some(over_error),
            steps,
            predicted,
            read,
            limit_per_s,
            within_band,
            limit_range_per_s: g.held_range_per_s(HELD_SHARE, heisenbench_model::interval::Z_975),
        })
    }

    /// The reading, its chances, and where these steps' reading falls among them.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let chances = |walk: &KneeWalk| -> String {
            std::iter::once(format!("none {:.0}%", walk.none * 100.0))
                .chain(
                    self.steps
                        .iter()
                        .zip(&walk.highest)
                        .map(|(s, p)| format!("{:.0} req/s {:.0}%", s.rate_per_s, p * 100.0)),
                )
                .collect::<Vec<_>>()
                .join(", ")
        };
        let read = match self.read {
            Some(k) => format!("{:.0} req/s", self.steps[k].rate_per_s),
            None => "none".into(),
        };
        let sent: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{:.0} {:.1}%", s.rate_per_s, s.sent * 100.0))
            .collect();
        writeln!(
            out,
            "== the held-out audits as a knee walk (up the rates until {WALK_STOPS_AFTER} in a row send \
             under {:.0}%, by the pacing alone, each step's draws its own): the highest step held is, \
             with the lateness as read: {}; the walk goes on past the last step with chance {:.0}%",
            HELD_SHARE * 100.0,
            chances(&self.predicted),
            self.predicted.walking_on * 100.0
        )?;
        if let Some(w) = &self.over_error {
            writeln!(
                out,
                "  over the lateness's own error as well: {}; on past the last {:.0}%",
                chances(w),
                w.walking_on * 100.0
            )?;
        }
        let or_lower = match self.at_most_over_error {
            Some(p) => format!(
                "{:.0}% ({:.0}% over the lateness's error)",
                self.at_most * 100.0,
                p * 100.0
            ),
            None => format!("{:.0}%", self.at_most * 100.0),
        };
        let limit = match (self.limit_per_s, self.limit_range_per_s) {
            (Some(l), Some((low, high))) => format!(
                "; the limit, for draws of the mean asked, is {l:.0} req/s (95 %: {low:.0} to {})",
                high.map_or("open".into(), |h| format!("{h:.0}"))
            ),
            (Some(l), None) => format!("; the limit, for draws of the mean asked, is {l:.0} req/s"),
            _ => String::new(),
        };
        writeln!(
            out,
            "  these steps (req/s and the share sent: {}) read {read}; a walk reads that or lower with chance {or_lower}{limit}",
            sent.join(", "),
        )?;
        if let Some(d) = &self.given_draws {
            let at = match d.at_lateness {
                Some(k) => format!("{:.0} req/s", self.steps[k].rate_per_s),
                None => "none".into(),
            };
            writeln!(
                out,
                "  given each step's draws (replayed), over the lateness's error alone: {}; at the lateness read it reads {at}; \
                 these steps' reading or lower with chance {:.0}%, a step within {:.0} % of the limit {:.0}%",
                chances(&d.walk),
                d.at_most * 100.0,
                KNEE_BAND * 100.0,
                d.within_band * 100.0
            )?;
        }
        if self.within_band.is_empty() {
            return Ok(());
        }
        let by_length: Vec<String> = self
            .within_band
            .iter()
            .map(|(times, p)| match times {
                1.0 => format!("{:.0}% at these steps' lengths", p * 100.0),
                t => format!("{:.0}% at {t:.0} times them", p * 100.0),
            })
            .collect();
        writeln!(
            out,
            "  a walk up these rates reads a step within {:.0} % of the limit (over the draws and the lateness's error) with chance {}",
            KNEE_BAND * 100.0,
            by_length.join(", ")
        )
    }
}

/// An audit whose server released its responses together on a period
/// (`audit --batched`): the client's loop meets its work in batches.
#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct BatchedAudit {
    /// The server's release period, seconds.
    pub release_every_s: f64,
    /// The audit.
    pub audit: AuditReport,
}

impl BatchedAudit {
    /// The CPU a request it read, and the throughput that bounds (None without CPU figures
    /// or a completed request).
    pub fn bound(&self) -> Option<BatchedBound> {
        let l = self.audit.audited_load()?;
        Some(BatchedBound {
            rate_per_s: l.rate_per_s,
            release_every_s: self.release_every_s,
            loops_cpu_per_request_s: l.cpu_per_request_s,
            loops: l.loops,
            busiest_cpu_per_request_s: Some(l.busiest_cpu_per_request_s),
            machine: l.machine,
            machine_per_second: None,
        })
    }
}

/// What a client whose TTFT counts from the intended send added beyond its own lateness
/// (its excess counted from its own send), beyond the wire where that was measured, and on
/// which way, where its stamps share the server's clock: each with the run's 95 % interval
/// of its mean, and whether any remains beyond the wire.
fn write_beyond_lateness(
    out: &mut dyn Write,
    paired: &PairedExcess,
    wire: Option<&Wire>,
) -> io::Result<()> {
    let f = format_seconds;
    let Some(own) = &paired.from_own_send else {
        return Ok(());
    };
    // The figure's mean less `shift`, with its interval; where a shift is given, whether
    // any of it remains beyond that.
    let shown = |figure: &PairedFigure, shift: Option<f64>| {
        let by = shift.unwrap_or(0.0);
        let Some(i) = figure.interval else {
            return f(figure.mean_s - by);
        };
        let [low, high] = i.mean.map(|end| end - by);
        let verdict = match shift {
            None => "",
            Some(_) if low > 0.0 => ": more, beyond this run's sampling noise",
            Some(_) if high < 0.0 => {
                ": less, beyond this run's sampling noise (it crossed faster than lone messages)"
            }
            Some(_) => ": none that this run's sampling noise can tell",
        };
        format!(
            "{} (95 % {} to {}{verdict})",
            f(figure.mean_s - by),
            f(low),
            f(high)
        )
    };
    writeln!(
        out,
        "  from its own send instead (its lateness left out): the excess's mean {}, p99 {}",
        shown(own, None),
        f(own.p99_s)
    )?;
    let one_way = wire.map(|w| w.one_way.mean_s);
    if let Some(one) = one_way {
        writeln!(
            out,
            "  beyond the wire both ways ({} by lone messages at its rate): {}",
            f(2.0 * one),
            shown(own, Some(2.0 * one))
        )?;
    }
    let Some(legs) = &paired.legs else {
        return Ok(());
    };
    let beyond = if one_way.is_some() {
        ", beyond the wire one way"
    } else {
        " (the wire not measured: --wire)"
    };
    writeln!(
        out,
        "  on the clock it shares with the server{beyond}: its send to the server's having the request {}; \
         the server's first token to its stamp of it {}",
        shown(&legs.request, one_way),
        shown(&legs.response, one_way)
    )?;
    if let (Some(before), Some(after)) = (&legs.before_write, &legs.after_write) {
        writeln!(
            out,
            "  the request's way at the start of its write: its own path before it {}; the write to the server's having it{} {}",
            shown(before, Some(0.0)),
            if one_way.is_some() {
                ", beyond the wire one way,"
            } else {
                ""
            },
            shown(after, one_way)
        )?;
    }
    Ok(())
}

/// A relative error as a signed whole percentage, or "-" where there is none.
fn signed_percent(e: Option<f64>) -> String {
    e.map_or("-".into(), |e| format!("{:+.0}%", e * 100.0))
}

/// The tally's phrase for one kind of check: ", {what} in X of N" where X of the N checks
/// held, or nothing where none was made.
fn held_in(what: &str, checks: &[bool]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    let held = checks.iter().filter(|h| **h).count();
    format!(", {what} in {held} of {}", checks.len())
}

/// The tally's words on the held-out audits' own sampling noise at statistic `i` (0 the
/// mean, 3 the p99): in how many the forecast lay inside the run's 95 % interval, in how
/// many the loop given the run's own speed did, and how wide those intervals were at the
/// median, as the farther end's distance from the measured figure. Empty where no audit has
/// an interval.
fn sampling_noise(held: &[(&Simulated, Option<SampleInterval>)], i: usize) -> String {
    let which = if i == 0 {
        Statistic::Mean
    } else {
        Statistic::Quantile
    };
    let read: Vec<(bool, Option<bool>, f64)> = held
        .iter()
        .filter_map(|(s, interval)| {
            let interval = interval.as_ref().filter(|_| i == 0 || i == 3)?;
            let m = s.measured_excess_s[i].filter(|m| *m > 0.0)?;
            let ends = interval.ends(which);
            let reach = (m - ends[0]).abs().max((ends[1] - m).abs()) / m;
            Some((
                interval.holds(which, s.prediction.reported_s[i]),
                s.given_its_speed
                    .map(|g| interval.holds(which, g.reported_s[i])),
                reach,
            ))
        })
        .collect();
    if read.is_empty() {
        return String::new();
    }
    let mut reaches: Vec<f64> = read.iter().map(|r| r.2).collect();
    reaches.sort_by(f64::total_cmp);
    let inside: Vec<bool> = read.iter().map(|r| r.0).collect();
    let given: Vec<bool> = read.iter().filter_map(|r| r.1).collect();
    format!(
        "{}{} (those intervals reach {:.0} % from the measured {} at the median)",
        held_in("inside the run's own 95 % sampling interval", &inside),
        held_in("given its own speed", &given),
        100.0 * reaches[reaches.len() / 2],
        if i == 0 { "mean" } else { "p99" }
    )
}

/// [`AuditReport::client_name`] from its parts: the label, the tool read, the program.
fn name_of(label: Option<String>, tool: Option<String>, program: Option<&String>) -> String {
    label.or(tool).unwrap_or_else(|| match program {
        Some(p) => std::path::Path::new(p)
            .file_name()
            .map_or(p.clone(), |f| f.to_string_lossy().into_owned()),
        None => "client".into(),
    })
}

impl AuditReport {
    /// Prints how the forecasts of the held-out audits among `reports` fared, if any was
    /// held out: their means and p99s within 25 % of what was measured, inside the band of
    /// the calibration's speeds or outside it, and the runs whose own speed lay outside
    /// the calibration's.
    pub fn write_held_out_tally(reports: &[AuditReport], out: &mut dyn Write) -> io::Result<()> {
        let with_noise: Vec<(&Simulated, Option<SampleInterval>)> = reports
            .iter()
            .filter_map(|r| {
                let s = r.simulated.as_ref().filter(|s| !s.fitted_here)?;
                Some((s, r.observed.paired_excess.and_then(|p| p.interval)))
            })
            .collect();
        let held: Vec<&Simulated> = with_noise.iter().map(|(s, _)| *s).collect();
        if held.is_empty() {
            return Ok(());
        }
        let stat = |i: usize, name: &str| {
            let measured: Vec<(&Simulated, f64)> = held
                .iter()
                .filter_map(|s| Some((*s, s.measured_excess_s[i].filter(|m| *m > 0.0)?)))
                .collect();
            let within = measured
                .iter()
                .filter(|(s, m)| ((s.prediction.reported_s[i] - m) / m).abs() <= 0.25)
                .count();
            let given = |line: fn(&Simulated) -> Option<GivenMachine>| -> Vec<bool> {
                measured
                    .iter()
                    .filter_map(|(s, _)| Some(s.error_at(&line(s)?.reported_s, i)?.abs() <= 0.25))
                    .collect()
            };
            let gauged = held_in("given the machine's speed", &given(|s| s.given_the_machine))
                + &held_in("given the memory's speed", &given(|s| s.given_the_walk));
            let noise = sampling_noise(&with_noise, i);
            let places: Vec<Place> = measured
                .iter()
                .filter_map(|(s, m)| Some(s.across_speeds?.place(i, *m)))
                .collect();
            let count = |p: Place| places.iter().filter(|&&q| q == p).count();
            let band = if places.is_empty() {
                String::new()
            } else {
                format!(
                    ", inside the calibration's speeds in {} of {} ({} below, {} above)",
                    count(Place::Inside),
                    places.len(),
                    count(Place::Below),
                    count(Place::Above)
                )
            };
            let ranged: Vec<bool> = measured
                .iter()
                .filter_map(|(s, m)| Some(s.forecast_range?.holds(i, *m)))
                .collect();
            let band = band + &held_in("inside the forecast's range", &ranged);
            format!(
                "the {name} within 25 % of the forecast in {within} of {}{gauged}{band}{noise}",
                measured.len()
            )
        };
        let outside = held
            .iter()
            .filter_map(|s| {
                let (g, b) = (s.given_its_speed?, s.across_speeds?);
                Some(Place::of(g.speed, b.speeds[0], b.speeds[1]))
            })
            .filter(|p| *p != Place::Inside)
            .count();
        let speeds = if held.iter().any(|s| s.across_speeds.is_some()) {
            format!("; {outside} ran faster or slower than every calibration audit")
        } else {
            String::new()
        };
        writeln!(
            out,
            "== held out: {} audit(s); {}; {}{speeds}",
            held.len(),
            stat(0, "mean"),
            stat(3, "p99")
        )
    }

    /// The name a client goes by in reports and on the figure: the `--label` given, else
    /// the tool whose results were read, else the file name of its command.
    pub fn client_name(reports: &[AuditReport]) -> String {
        name_of(
            reports.iter().find_map(|r| r.label.clone()),
            reports
                .iter()
                .find_map(|r| r.observed.reported.as_ref().map(|x| x.tool.clone())),
            reports
                .first()
                .and_then(|r| r.observed.client.command.first()),
        )
    }

    /// A report of version 1.
    pub fn new(
        label: Option<String>,
        observed: Observed,
        prediction: Option<Prediction>,
        server: String,
    ) -> Self {
        Self {
            version: 1,
            kind: "audit".into(),
            label,
            observed,
            prediction,
            server,
            simulated: None,
        }
    }

    /// What this audit measured of the client's loop, for a simulation of it: the rate
    /// the server saw, the chunks and the loops' CPU per request, the loops, and the TTFT
    /// the client added (its reported minus the true, by statistic). None without a
    /// prediction (no completed requests or no CPU figures).
    pub fn audited_load(&self) -> Option<AuditedLoad> {
        let p = self.prediction.as_ref()?;
        let t = &self.observed.truth;
        let excess_s = self.observed.ttft_excess_s();
        let c = &self.observed.client;
        // The loops are the processes holding the connections where the prediction took
        // them: their busiest one, their spread and their wait to wake.
        let holders = c.connected.as_ref().filter(|_| p.loops_hold_connections);
        let busiest = match holders {
            Some(h) => h.window_cpu_per_process_s.first()?,
            None => c.window_cpu_per_process_s.first()?,
        };
        let busiest_per_request = busiest / t.completed.max(1) as f64;
        Some(AuditedLoad {
            rate_per_s: t.achieved_rate_per_s,
            chunks_per_request: p.chunks_per_request,
            cpu_per_request_s: p.cpu_per_request_s,
            busiest_cpu_per_request_s: busiest_per_request,
            cpu_spread: match holders {
                Some(h) => h.spread,
                None => c.busiest_spread,
            }
            .map(|s| s.cpu_spread()),
            loops: p.loops,
            stamp: self
                .observed
                .reported
                .as_ref()
                .map_or(Stamp::AfterProcessing, |r| r.stamp()),
            excess_s,
            wake_wait_s: holders
                .and_then(|h| h.wait_per_turn_s)
                .or(c.busiest_wait_per_turn_s),
            // Turns a second of CPU (the wait a second of CPU over the wait a turn), the
            // share of them after a preemption.
            preempt_per_cpu_s: match holders {
                Some(h) => h.preempted_share.zip(h.core_wait).zip(h.wait_per_turn_s),
                None => c
                    .busiest_preempted_share
                    .zip(c.busiest_core_wait)
                    .zip(c.busiest_wait_per_turn_s),
            }
            .filter(|(_, turn)| *turn > 0.0)
            .map(|((share, wait), turn)| share * wait / turn),
            arrival_scv: t.arrival_gap_scv,
            // The work this audit put on the machine: the client's tree, the mock and the
            // sampler (not whatever else the machine ran meanwhile).
            machine: match (c.machine, c.window_cpu_s, c.audit_cores) {
                (Some(m), Some(tree), Some(audit)) if t.completed > 0 => {
                    Some(((tree + audit * c.window_s) / t.completed as f64, m.cores))
                }
                _ => None,
            },
            gauge_s: c.gauge.map(|g| g.unit_s),
            walk_s: c.gauge.and_then(|g| g.walk_s),
        })
    }

    /// The mean TTFT excess taken apart by the wire (None where the wire was not
    /// measured or the client reports no mean TTFT).
    pub fn wire_account(&self) -> Option<WireAccount> {
        let o = &self.observed;
        let excess_s = o.ttft_excess_s()[0]?;
        Some(WireAccount::of(
            o.reported.as_ref()?,
            excess_s,
            o.wire.as_ref()?,
        ))
    }

    /// The same report without its per-request records.
    pub fn summary(&self) -> Self {
        Self {
            observed: Observed {
                served: Vec::new(),
                ..self.observed.clone()
            },
            ..self.clone()
        }
    }

    /// The audits in a file written by `audit --out`: one, or a series' points. The error
    /// names the file.
    pub fn read(path: &Path) -> Result<Vec<Self>, String> {
        Ok(AuditSeries::read(path)?.points)
    }

    /// Why the client's run does not count, if it does not: stopped at the timeout, a
    /// non-zero exit, or no request reached the server.
    pub fn failure(&self) -> Option<String> {
        let (c, t) = (&self.observed.client, &self.observed.truth);
        if c.timed_out {
            return Some(format!(
                "the client did not finish within the timeout; it was stopped (see {})",
                c.logs[1].display()
            ));
        }
        if !c.succeeded() {
            return Some(format!(
                "the client {} (its output: {})",
                c.ending(),
                c.logs[1].display()
            ));
        }
        if t.requests == 0 {
            return Some(
                "the server saw no requests: does the command use {url} (or {host} and {port})?"
                    .into(),
            );
        }
        None
    }

    /// The audit as text for a terminal: the client's process tree and CPU, the server's
    /// truth, the client's own report beside it, and the model's reading.
    pub fn write_summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let (o, p, server) = (&self.observed, self.prediction.as_ref(), &self.server);
        let c = &o.client;
        let t = &o.truth;
        let f = format_seconds;
        writeln!(out, "client: {}", c.command.join(" "))?;
        writeln!(
            out,
            "  {} after {:.1}s; {} process(es) seen, at most {} at once with {} threads",
            c.ending(),
            c.wall_s,
            c.processes_seen,
            c.max_processes,
            c.max_threads
        )?;
        if c.left_running > 0 {
            writeln!(
                out,
                "  {} process(es) it left running were stopped",
                c.left_running
            )?;
        }
        match c.cpu_s {
            Some(cpu) => writeln!(
                out,
                "  CPU {cpu:.2}s over the tree; {:.2}s in the {:.1}s load window ({:.0}% of one core), \
                 by process {}; the audit's own sampling: {:.3}s ({:.2}% of one core)",
                c.window_cpu_s.unwrap_or(0.0),
                c.window_s,
                100.0 * c.window_cpu_s.unwrap_or(0.0) / c.window_s.max(1e-9),
                by_process(&c.window_cpu_per_process_s),
                c.sampler_cpu_s,
                100.0 * c.sampler_cpu_s / c.wall_s.max(1e-9)
            )?,
            None => writeln!(
                out,
                "  CPU: not measurable here (no /proc process accounting)"
            )?,
        }
        if let Some(w) = c.busiest_core_wait {
            let per_turn = c.busiest_wait_per_turn_s.map_or(String::new(), |t| {
                format!(", {} each time it was put on one", format_seconds(t))
            });
            let main = c.busiest_main_cores.map_or(String::new(), |m| {
                format!(
                    " ran {m:.2} cores of the process's {:.2} and",
                    c.window_cpu_per_process_s.first().copied().unwrap_or(0.0)
                        / c.window_s.max(1e-9)
                )
            });
            let preempted = c.busiest_preempted_share.map_or(String::new(), |p| {
                format!(" ({:.0}% of those times after it lost its core while it could run, the rest after a sleep)", p * 100.0)
            });
            writeln!(
                out,
                "  its busiest process's main thread{main} waited {:.0} ms for a core per second of its CPU in the load \
                 window{per_turn}{preempted}, runnable but not running (its wake-ups, and cores shared with the mock and the audit)",
                w * 1e3
            )?;
        }
        if let Some(h) = &c.connected {
            let cores = h.window_cpu_s() / c.window_s.max(1e-9);
            let busiest = if h.holds_busiest {
                "the busiest among them"
            } else {
                "not the busiest: that one held none"
            };
            let main = h.wait_per_turn_s.map_or(String::new(), |w| {
                format!(
                    "; their main threads ran {} cores and waited {} for a core each time they were put on one{}",
                    h.main_cores.map_or("-".into(), |m| format!("{m:.2}")),
                    format_seconds(w),
                    h.core_wait.map_or(String::new(), |r| format!(
                        " ({} a second of their CPU{})",
                        format_seconds(r),
                        h.preempted_share.map_or(String::new(), |p| format!(
                            ", {:.0}% of their turns after a preemption",
                            p * 100.0
                        ))
                    ))
                )
            });
            let turns = h.turns_per_s.map_or(String::new(), |n| {
                let rate = t.achieved_rate_per_s;
                format!(
                    "; put on a core {n:.0} times a second{}",
                    if rate > 0.0 {
                        format!(", {:.2} a request", n / rate)
                    } else {
                        String::new()
                    }
                )
            });
            writeln!(
                out,
                "  {} process(es) held its {} connection(s) to the server and read its answers ({busiest}): {cores:.2} cores, by process {}{main}{turns}",
                h.processes,
                h.connections,
                by_process(&h.window_cpu_per_process_s),
            )?;
        }
        if let Some(m) = c.machine {
            writeln!(
                out,
                "  the machine: {:.2} of its {} cores busy in the load window ({:.0}%: the client's tree, the mock, \
                 this audit and anything else){}",
                m.busy_cores,
                m.cores,
                m.share() * 100.0,
                if m.crowded() {
                    "; nearly all: the client's runnable work waited for cores, beyond what a loop's model holds"
                } else {
                    ""
                }
            )?;
        }
        if let Some(g) = c.gauge {
            let walk = g.walk_s.map_or(String::new(), |w| {
                format!(", and a fixed walk through memory {} at the median", f(w))
            });
            writeln!(
                out,
                "  the machine's speed: a fixed unit of work beside the client took {} of CPU at the median \
                 (10-90%: {} to {}, {} units in the load window){walk}; a slower machine takes longer, and a Python \
                 client's CPU a request grows with it",
                f(g.unit_s),
                f(g.spread_s[0]),
                f(g.spread_s[1]),
                g.units
            )?;
        }
        writeln!(out, "server ({server}):")?;
        writeln!(
            out,
            "  {} requests, {} completed{}; achieved {:.1} req/s of {} offered; arrival gaps SCV {}",
            t.requests,
            t.completed,
            if t.errors.is_empty() {
                String::new()
            } else {
                format!(
                    ", errors {}",
                    t.errors
                        .iter()
                        .map(|(s, n)| format!("{n} x {s}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            t.achieved_rate_per_s,
            o.offered.rate_per_s,
            t.arrival_gap_scv
                .map_or("-".into(), |v| format!("{v:.2} (Poisson: 1)"))
        )?;
        writeln!(
            out,
            "  {:.1} tokens and {:.1} prompt words per request (asked: {} and {})",
            t.tokens_per_request,
            t.prompt_tokens_per_request,
            o.offered.output_tokens,
            o.offered.prompt_tokens
        )?;
        writeln!(
            out,
            "  true TTFT p50 {} p99 {}; E2E p50 {} p99 {}",
            f(t.ttft.p50_s),
            f(t.ttft.p99_s),
            f(t.e2e.p50_s),
            f(t.e2e.p99_s)
        )?;
        // Bodies that trailed their heads by more than a packet's way: the client wrote
        // them apart and late, time in its TTFT that the truth leaves out.
        if t.upload.count > 0 && t.upload.p99_s >= 1e-4 {
            writeln!(
                out,
                "  the client's bodies trailed their heads (its own time, in its TTFT, not in the truth): mean {}  p99 {}  max {}",
                f(t.upload.mean_s),
                f(t.upload.p99_s),
                f(t.upload.max_s)
            )?;
        }
        match &o.reported {
            Some(r) => {
                writeln!(
                    out,
                    "client's own report ({}, {}):",
                    r.tool,
                    r.file.display()
                )?;
                if let Some(rate) = r.requests_per_s {
                    writeln!(
                        out,
                        "  throughput {rate:.1} req/s reported, {:.1} seen by the server",
                        t.achieved_rate_per_s
                    )?;
                }
                let line = |name: &str,
                            rep: Option<super::adapters::Summary>,
                            truth: &heisenbench_model::stats::Dist|
                 -> String {
                    let Some(rep) = rep else {
                        return format!("  {name:<5} not reported");
                    };
                    let cell = |r: Option<f64>, t: f64| {
                        r.map_or("-".to_string(), |r| format!("{} (true {})", f(r), f(t)))
                    };
                    format!(
                        "  {name:<5} mean {}  p50 {}  p99 {}",
                        cell(rep.mean_s, truth.mean_s),
                        cell(rep.p50_s, truth.p50_s),
                        cell(rep.p99_s, truth.p99_s)
                    )
                };
                writeln!(out, "{}", line("TTFT", r.ttft, &t.ttft))?;
                writeln!(out, "{}", line("ITL", r.itl, &t.itl))?;
                writeln!(out, "{}", line("E2E", r.e2e, &t.e2e))?;
                if let Some(lag) = r.send_lag {
                    let whose = match r.clock() {
                        ClockStart::Intended => {
                            "inside its TTFT, which counts from the intended send"
                        }
                        ClockStart::OwnSend => "not in its TTFT",
                    };
                    writeln!(
                        out,
                        "  its own lateness against its schedule ({whose}): mean {}  p99 {}",
                        lag.mean_s.map_or("-".into(), f),
                        lag.p99_s.map_or("-".into(), f)
                    )?;
                }
            }
            None => writeln!(
                out,
                "client's own report: no result file of a known format in {} (known: {})",
                c.logs[0]
                    .parent()
                    .map_or("-".into(), |d| d.join("client-out").display().to_string()),
                super::adapters::FORMATS.join(", ")
            )?,
        }
        if let Some(w) = self.wire_account() {
            w.write(out)?;
        }
        let Some(p) = p else {
            writeln!(
                out,
                "model: no prediction (no completed requests, or no CPU figures)"
            )?;
            return Ok(());
        };
        writeln!(out, "model: {}", p.model)?;
        writeln!(
            out,
            "  CPU per chunk {}, per request {}; utilisation per loop {:.2} at the rate achieved, {:.2} at the rate offered",
            f(p.cpu_per_chunk_s),
            f(p.cpu_per_request_s),
            p.rho,
            p.rho_offered
        )?;
        if let Some(w) = p.wait_s {
            writeln!(
                out,
                "  predicted wait before the first chunk: mean {}  p50 {}  p90 {}  p99 {}",
                f(w[0]),
                f(w[1]),
                f(w[2]),
                f(w[3])
            )?;
        }
        if let Some(pe) = &o.paired_excess {
            writeln!(
                out,
                "  the excess request by request: {} of the {} requests it recorded paired with the server's {}",
                pe.paired,
                pe.recorded,
                if pe.by_order {
                    "in the order it sent them and the server saw them (nothing else names them)"
                } else {
                    "by the ids both kept"
                }
            )?;
            if let Some(c) = &pe.order_check {
                writeln!(
                    out,
                    "  paired by order alone instead: {} of them out of place at the server, the excess's mean {} and p99 {}",
                    c.displaced,
                    f(c.mean_s),
                    f(c.p99_s)
                )?;
            }
            write_beyond_lateness(out, pe, o.wire.as_ref())?;
        }
        // With the requests paired, the excess is not the difference of the two figures.
        let how = if o.paired_excess.is_some() {
            "paired; reported"
        } else {
            "reported"
        };
        for r in &p.rows {
            writeln!(
                out,
                "  TTFT {:<4} excess {} ({how} {} - true {}), predicted {}{}",
                r.statistic,
                f(r.excess_s),
                f(r.reported_s),
                f(r.true_s),
                r.predicted_s.map_or("-".into(), f),
                r.relative_error
                    .map_or(String::new(), |e| format!(", error {:+.1}%", e * 100.0))
            )?;
        }
        writeln!(out, "  verdict: {}", p.verdict_text)?;
        match p.loops_needed {
            Some(k) => writeln!(
                out,
                "plan: {k} process(es) for {} req/s with {} ({})",
                o.offered.rate_per_s, p.budget, p.plan_reason
            )?,
            None => writeln!(out, "plan: {}", p.plan_reason)?,
        }
        if let Some(sim) = &self.simulated {
            sim.write(out, o)?;
            // Both as (predicted - measured) / measured.
            let closed = p
                .rows
                .iter()
                .find(|r| r.statistic == "mean")
                .and_then(|r| Some((r.predicted_s? - r.excess_s) / r.excess_s))
                .filter(|e| e.is_finite());
            if let (Some(s), Some(c)) = (sim.mean_error(), closed) {
                writeln!(
                    out,
                    "  answered by {}: the simulated mean excess is {:+.0}% off the measured (the closed form's {:+.0}%)",
                    if s.abs() <= c.abs() {
                        "the simulated loop"
                    } else {
                        "the closed form"
                    },
                    s * 100.0,
                    c * 100.0
                )?;
            }
        }
        Ok(())
    }
}

impl AuditSeries {
    /// A series of version 1.
    pub fn new(points: Vec<AuditReport>) -> Self {
        Self {
            version: 1,
            kind: "audit-series".into(),
            points,
            calibration: Vec::new(),
            batched: None,
            knee_walk: None,
        }
    }

    /// The series in a file written by `audit --out` (a single audit is a series of one).
    pub fn read(path: &Path) -> Result<Self, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let text = crate::files::read_bounded(path, crate::files::FileKind::Report)
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| at(&e))?;
        match v.get("kind").and_then(serde_json::Value::as_str) {
            Some("audit") => Ok(Self::new(vec![
                serde_json::from_value(v).map_err(|e| at(&e))?,
            ])),
            Some("audit-series") => serde_json::from_value(v).map_err(|e| at(&e)),
            _ => Err(at(&"not an `audit --out` file")),
        }
    }
}

/// The first four processes' CPU, seconds, as a list.
fn by_process(cpu_s: &[f64]) -> String {
    cpu_s
        .iter()
        .take(4)
        .map(|s| format!("{s:.2}s"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::{GapLateness, WalkRead, WalkStep, WireAccount, name_of};
    use crate::audit::adapters::{Reported, Summary};
    use crate::audit::{Truth, Wire};
    use crate::mock::Served;
    use heisenbench_model::stats::Dist;

    /// A figure read from an audit's file and written again is the same figure:
    /// 123.11385642452747 (an achieved rate one series held) is parsed to the nearest
    /// double, not one a unit in the last place off, so a series read and written again
    /// keeps its bytes and tables can match audits across readings exactly.
    #[test]
    fn a_figure_read_and_written_again_keeps_its_digits() {
        for text in [
            "123.11385642452747",
            "0.0007728836649544146",
            "45.72575432196071",
        ] {
            let x: f64 = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&x).unwrap(), text);
            assert_eq!(x, text.parse::<f64>().unwrap());
        }
    }

    /// The excess is taken apart at the mean: a request served in 100 us and reported at
    /// 180 us (mean) by a client 30 us late against its schedule, over a wire of 20 us one
    /// way, leaves 10 us; a tool whose clock starts at its own send keeps its lateness out
    /// of its TTFT, so none is taken off its excess.
    #[test]
    fn the_excess_is_the_wire_the_lateness_and_the_rest() {
        let served: Vec<Served> = (0..4)
            .map(|i| Served {
                arrival_ns: 1_000_000 * i,
                received_ns: 1_000_000 * i,
                status: 200,
                first_token_ns: Some(1_000_000 * i + 100_000),
                last_token_ns: Some(1_000_000 * i + 100_000),
                tokens: 1,
                prompt_tokens: 1,
                bytes: 10,
                complete: true,
                id: None,
                request_tag: None,
            })
            .collect();
        let truth = Truth::of(&served);
        let wire = Wire {
            rate_per_s: 1000.0,
            one_way: Dist {
                mean_s: 20e-6,
                ..Dist::default()
            },
        };
        let reported = |tool: &str| Reported {
            tool: tool.into(),
            ttft: Some(Summary {
                mean_s: Some(180e-6),
                ..Summary::default()
            }),
            send_lag: Some(Summary {
                mean_s: Some(30e-6),
                ..Summary::default()
            }),
            ..Reported::default()
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // 180 us reported against 100 us true.
        let excess = reported("x").ttft.and_then(|t| t.mean_s).unwrap() - truth.ttft.mean_s;
        let own = WireAccount::of(&reported("heisenbench run"), excess, &wire);
        assert!(close(own.excess_s, 80e-6), "{own:?}");
        assert!(close(own.wire_s(), 40e-6));
        assert_eq!(own.lateness_s, Some(30e-6));
        assert!(close(own.beyond_s(), 10e-6), "{own:?}");
        let other = WireAccount::of(&reported("inference-perf"), excess, &wire);
        assert_eq!(other.lateness_s, None);
        assert!(close(other.beyond_s(), 40e-6), "{other:?}");
    }

    /// Steps at rising rates are a walk; audits repeated at one rate, a single step, or a
    /// lateness within the draws' spread are not.
    #[test]
    fn only_steps_at_rising_rates_are_read_as_a_walk() {
        let g = GapLateness {
            late_s: 1e-3,
            stderr_s: 0.1e-3,
            audits: 2,
            net_of_draws: false,
        };
        let step = |rate_per_s: f64| WalkStep {
            rate_per_s,
            gaps: (rate_per_s * 10.0) as u64,
            sent: 0.97,
            drawn_mean_gap_s: None,
        };
        let walk = WalkRead::of_steps(&g, vec![step(60.0), step(40.0), step(50.0)]).unwrap();
        let rates: Vec<f64> = walk.steps.iter().map(|s| s.rate_per_s).collect();
        assert_eq!(rates, [40.0, 50.0, 60.0]);
        assert_eq!(walk.read, Some(2));
        assert!(WalkRead::of_steps(&g, vec![step(40.0), step(50.0), step(40.0)]).is_none());
        assert!(WalkRead::of_steps(&g, vec![step(40.0)]).is_none());
        let unread = GapLateness {
            stderr_s: 0.6e-3,
            ..g
        };
        assert!(WalkRead::of_steps(&unread, vec![step(40.0), step(50.0)]).is_none());
    }

    #[test]
    fn a_client_is_named_by_its_label_then_its_tool_then_its_program() {
        let prog = "/opt/venv/bin/vllm".to_string();
        let (l, t) = (
            Some("mine".to_string()),
            Some("vllm bench serve".to_string()),
        );
        assert_eq!(name_of(l, t.clone(), Some(&prog)), "mine");
        assert_eq!(name_of(None, t, Some(&prog)), "vllm bench serve");
        assert_eq!(name_of(None, None, Some(&prog)), "vllm");
        assert_eq!(name_of(None, None, None), "client");
    }
}
