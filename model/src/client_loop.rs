//! A benchmark client's loop as an audit sees it: what its CPU costs per request and per
//! streamed chunk, where its TTFT clock starts, and what a simulation of that loop says it
//! reports (the simulation itself is `heisenbench_sim::client_loop`).
//!
//! One number, the CPU per chunk, spreads a request's fixed path (building it, the HTTP
//! library's send, task scheduling) over its chunks and misses where that path falls: a
//! Python client pays it before its first chunk. Two audits that differ only in output
//! length separate the two parts: a request of n chunks costs `a + n b`. A third at
//! another rate separates what the client spends per second whatever the load (timers,
//! heartbeats, an idle loop's wake-ups), which one rate would read as a cost per request:
//! the client's CPU per second is `c + r (a + n b)` at r requests per second.

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};
use crate::scenario::Stamp;
use crate::stats::Recorder;

/// The client's CPU per request at one output length and rate, as one audit measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostSample {
    /// Requests per second served (0 where unknown).
    #[serde(default)]
    pub rate_per_s: f64,
    /// Chunks per request (the tokens the server streamed per request).
    pub chunks_per_request: f64,
    /// The client's CPU per request served, seconds.
    pub cpu_per_request_s: f64,
}

/// A client loop's CPU: a part per second whatever the load, a fixed part per request and
/// a part per streamed chunk.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoopCosts {
    /// CPU spent per second whatever the load, in cores (0 when one rate was measured).
    #[serde(default)]
    pub per_second: f64,
    /// The fixed part of a request: building, sending, finishing it, seconds.
    pub per_request_s: f64,
    /// Reading one streamed chunk, seconds.
    pub per_chunk_s: f64,
    /// The squared coefficient of variation of a request's whole work (0: constant), as
    /// the spread of the client's CPU over time shows it.
    #[serde(default)]
    pub request_scv: f64,
}

impl LoopCosts {
    /// The line through two audits' CPU per request against their chunks per request:
    /// its slope is the cost of a chunk, its intercept the cost of a request. Refused when
    /// the lengths are too close to tell apart (less than twice the shorter), or when the
    /// line says a part costs less than nothing, which means the two audits did not measure
    /// the same client (noise larger than a part, or a client whose costs change with load).
    pub fn split(a: CostSample, b: CostSample) -> Result<Self> {
        let (short, long) = if a.chunks_per_request <= b.chunks_per_request {
            (a, b)
        } else {
            (b, a)
        };
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if ![
            short.chunks_per_request,
            long.chunks_per_request,
            short.cpu_per_request_s,
            long.cpu_per_request_s,
        ]
        .into_iter()
        .all(positive)
        {
            return Err(ModelError::invalid(
                "cost split",
                format!("{short:?} {long:?}"),
                "needs two audits that served requests and measured CPU",
            ));
        }
        if long.chunks_per_request < 2.0 * short.chunks_per_request {
            return Err(ModelError::invalid(
                "cost split",
                format!(
                    "{} and {} chunks",
                    short.chunks_per_request, long.chunks_per_request
                ),
                "the output lengths must differ by a factor of two or more",
            ));
        }
        let per_chunk_s = (long.cpu_per_request_s - short.cpu_per_request_s)
            / (long.chunks_per_request - short.chunks_per_request);
        let per_request_s = short.cpu_per_request_s - short.chunks_per_request * per_chunk_s;
        if per_chunk_s <= 0.0 || per_request_s < 0.0 {
            return Err(ModelError::invalid(
                "cost split",
                format!(
                    "{:.3e} s a request at {} chunks, {:.3e} s at {}",
                    short.cpu_per_request_s,
                    short.chunks_per_request,
                    long.cpu_per_request_s,
                    long.chunks_per_request
                ),
                "the longer requests did not cost more per chunk: the audits disagree",
            ));
        }
        Ok(Self {
            per_second: 0.0,
            per_request_s,
            per_chunk_s,
            request_scv: 0.0,
        })
    }

    /// The plane through three or more audits' CPU per second against their rates and
    /// chunks a second: `c + r a + r n b`, by least squares. The audits must span two
    /// rates (the faster at least 1.5 times the slower) and two lengths (a factor of two).
    /// Where the plane puts the part per second below zero (noise larger than it), the
    /// line through the origin is fitted instead (`c` = 0); where it puts a request's or a
    /// chunk's part below zero, the audits are refused as in [`LoopCosts::split`].
    pub fn fit(samples: &[CostSample]) -> Result<Self> {
        let valid = |s: &CostSample| {
            [s.rate_per_s, s.chunks_per_request, s.cpu_per_request_s]
                .iter()
                .all(|x| x.is_finite() && *x > 0.0)
        };
        if samples.len() < 3 || !samples.iter().all(valid) {
            return Err(ModelError::invalid(
                "cost fit",
                format!("{samples:?}"),
                "needs three or more audits that served requests and measured CPU",
            ));
        }
        let spread = |f: fn(&CostSample) -> f64| {
            let lo = samples.iter().map(f).fold(f64::INFINITY, f64::min);
            let hi = samples.iter().map(f).fold(0.0, f64::max);
            hi / lo
        };
        if spread(|s| s.rate_per_s) < 1.5 || spread(|s| s.chunks_per_request) < 2.0 {
            return Err(ModelError::invalid(
                "cost fit",
                format!("{samples:?}"),
                "the audits must differ in rate by 1.5 times and in length by two",
            ));
        }
        // Rows (1, r, r n) against the CPU per second r x (CPU per request).
        let rows: Vec<([f64; 3], f64)> = samples
            .iter()
            .map(|s| {
                let r = s.rate_per_s;
                ([1.0, r, r * s.chunks_per_request], r * s.cpu_per_request_s)
            })
            .collect();
        let plane = least_squares(&rows, 3);
        let (per_second, per_request_s, per_chunk_s) = match plane {
            Some([c, a, b]) if c >= 0.0 => (c, a, b),
            _ => {
                let through_origin: Vec<([f64; 3], f64)> =
                    rows.iter().map(|(x, y)| ([x[1], x[2], 0.0], *y)).collect();
                let [a, b, _] = least_squares(&through_origin, 2).ok_or_else(|| {
                    ModelError::invalid(
                        "cost fit",
                        format!("{samples:?}"),
                        "the audits are degenerate",
                    )
                })?;
                (0.0, a, b)
            }
        };
        if !(per_chunk_s > 0.0 && per_request_s >= 0.0) {
            return Err(ModelError::invalid(
                "cost fit",
                format!("{per_request_s:.3e} s a request, {per_chunk_s:.3e} s a chunk"),
                "a part came out below zero: the audits disagree",
            ));
        }
        Ok(Self {
            per_second,
            per_request_s,
            per_chunk_s,
            request_scv: 0.0,
        })
    }

    /// The CPU of one request of `chunks` chunks, seconds.
    pub fn request_s(&self, chunks: f64) -> f64 {
        self.per_request_s + chunks * self.per_chunk_s
    }

    /// How fast the client ran in one audit against these costs: its CPU a request over
    /// what they put on a request at its rate and length (1: as fitted, below 1: faster).
    /// From one run of a client to the next its CPU a request moves by a tenth or more at
    /// the same load, and the TTFT it adds moves with it, the latency beyond its CPU too
    /// (see bench/audit/RESULTS.md). None where the audit served nothing or measured no
    /// CPU.
    pub fn speed_of(&self, audit: CostSample) -> Option<f64> {
        let k = audit.cpu_per_request_s
            / (self.per_second / audit.rate_per_s + self.request_s(audit.chunks_per_request));
        (k.is_finite() && k > 0.0).then_some(k)
    }

    /// The same costs `k` times as long, each part (its spread kept).
    pub fn scaled(&self, k: f64) -> Self {
        Self {
            per_second: self.per_second * k,
            per_request_s: self.per_request_s * k,
            per_chunk_s: self.per_chunk_s * k,
            ..*self
        }
    }

    /// The most requests per second `loops` loops carry at `chunks` chunks a request: the
    /// cores left after the part per second, over a request's cost.
    pub fn saturation_per_s(&self, chunks: f64, loops: u32) -> f64 {
        (f64::from(loops) - self.per_second).max(0.0) / self.request_s(chunks)
    }
}

/// A client's CPU a request as its cores fill: a request whose work finds them idle costs
/// `idle_s` more than one that finds them busy. An idle loop sleeps and wakes for each
/// piece of work, and starts it on a core the server and the other processes have run
/// on meanwhile; a busy one goes from one callback to the next. With Poisson arrivals the
/// share of requests that find the cores idle is one minus their utilisation (arrivals see
/// time averages), so the CPU a second on `cores` is `U = r (a + n b) + r idle_s (1 - U /
/// cores)`: the CPU a request falls in a line with the utilisation, and at saturation
/// (`U = cores`) it is `a + n b`. A part per second ([`LoopCosts::per_second`]) extrapolates
/// the same two rates as a fall with `1 / r`, which flattens where this one keeps falling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FillingCosts {
    /// A request's fixed part on busy cores, seconds.
    pub per_request_s: f64,
    /// A chunk, seconds.
    pub per_chunk_s: f64,
    /// What a request costs more when it finds the cores idle, seconds.
    pub idle_s: f64,
    /// The cores the CPU is counted against (a process's one, or the machine's).
    pub cores: u32,
}

impl FillingCosts {
    /// Least squares of each audit's CPU a second on its rate, its chunks a second and its
    /// rate times the idle share it measured. Refused as [`LoopCosts::fit`] refuses, and
    /// where a part comes out below zero (a client whose CPU a request rises with the load
    /// does not fill this way).
    pub fn fit(samples: &[CostSample], cores: u32) -> Result<Self> {
        let bad =
            |why: &'static str| ModelError::invalid("filling fit", format!("{samples:?}"), why);
        let valid = |s: &CostSample| {
            s.rate_per_s > 0.0 && s.chunks_per_request > 0.0 && s.cpu_per_request_s > 0.0
        };
        if cores == 0 || samples.len() < 3 || !samples.iter().all(valid) {
            return Err(bad(
                "needs three or more audits that served requests and measured CPU",
            ));
        }
        let spread = |f: fn(&CostSample) -> f64| {
            let lo = samples.iter().map(f).fold(f64::INFINITY, f64::min);
            let hi = samples.iter().map(f).fold(0.0, f64::max);
            hi / lo
        };
        if spread(|s| s.rate_per_s) < 1.5 || spread(|s| s.chunks_per_request) < 2.0 {
            return Err(bad(
                "the audits must differ in rate by 1.5 times and in length by two",
            ));
        }
        let k = f64::from(cores);
        let rows: Vec<([f64; 3], f64)> = samples
            .iter()
            .map(|s| {
                let (r, u) = (s.rate_per_s, s.rate_per_s * s.cpu_per_request_s);
                ([r, r * s.chunks_per_request, r * (1.0 - u / k)], u)
            })
            .collect();
        match least_squares(&rows, 3) {
            Some([a, b, idle]) if a >= 0.0 && b > 0.0 && idle >= 0.0 => Ok(Self {
                per_request_s: a,
                per_chunk_s: b,
                idle_s: idle,
                cores,
            }),
            Some(_) => Err(bad(
                "a part came out below zero: the CPU a request does not fall as the cores fill",
            )),
            None => Err(bad("the audits are degenerate")),
        }
    }

    /// The CPU a request at `rate` and `chunks`: the law solved for the utilisation.
    pub fn request_s(&self, chunks: f64, rate: f64) -> f64 {
        let whole = self.per_request_s + chunks * self.per_chunk_s;
        (whole + self.idle_s) / (1.0 + rate * self.idle_s / f64::from(self.cores))
    }

    /// The most requests a second the cores carry at `chunks` a request: where they are
    /// never idle, so no request pays for finding them so.
    pub fn saturation_per_s(&self, chunks: f64) -> f64 {
        f64::from(self.cores) / (self.per_request_s + chunks * self.per_chunk_s)
    }
}

/// A client's CPU a request when its loop meets its work in batches: read from an audit
/// whose server releases the responses together on a period (`mock --release-every`), so
/// that each release hands the loop many responses at once, as a loop past its knee meets
/// them. Such a loop goes from one callback to the next with its caches warm and its
/// selector's pass shared, and the CPU a request falls well below what the calibration
/// audits, whose work arrives one request at a time, measure: this is where the
/// throughput a loop holds is bounded, beyond the point its core first fills.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchedBound {
    /// The rate of the audit it was read from, per second.
    pub rate_per_s: f64,
    /// The server's release period in that audit, seconds.
    pub release_every_s: f64,
    /// The loops' threads' CPU a request there, seconds.
    pub loops_cpu_per_request_s: f64,
    /// The loops.
    pub loops: u32,
    /// The busiest process's CPU a request there, all its threads, seconds, where it was
    /// read. An interpreter runs one thread at a time, so a process's threads share one
    /// core's worth of work between them: vLLM's bench spends 15 % of its process's CPU
    /// outside its loop's thread, and at its knee the process, not the thread, is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_cpu_per_request_s: Option<f64>,
    /// The whole machine's CPU a request there (the client, the server and the audit) and
    /// its cores, where it was read.
    pub machine: Option<(f64, u32)>,
    /// The machine's part a second (cores busy whatever the rate: idle processes' timers
    /// and polls, the audit's sampling), fitted on the calibration audits, where it was.
    /// The batched audit's CPU a request carries it spread over that audit's rate; at the
    /// knee it is spread over more, so it is taken out of the CPU a request and out of the
    /// cores, as the CPU bound takes it ([`LoopCosts::saturation_per_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_per_second: Option<f64>,
}

impl BatchedBound {
    /// The rate at which the loops' threads, each on a core of its own, are full.
    pub fn loops_per_s(&self) -> f64 {
        f64::from(self.loops.max(1)) / self.loops_cpu_per_request_s
    }

    /// The rate at which the busiest process has one core's work.
    pub fn process_per_s(&self) -> Option<f64> {
        self.busiest_cpu_per_request_s.map(|cpu| 1.0 / cpu)
    }

    /// The machine's part a second and its CPU a request without it, where the part is
    /// taken out: above zero, below the cores, and leaving the batched audit some CPU a
    /// request.
    pub fn machine_apart(&self) -> Option<(f64, f64)> {
        let ((cpu, cores), c) = self.machine.zip(self.machine_per_second)?;
        let rest = cpu - c / self.rate_per_s;
        (c > 0.0 && c < f64::from(cores) && rest > 0.0).then_some((c, rest))
    }

    /// The rate at which the machine's cores are full: the cores left after its part a
    /// second ([`Self::machine_apart`]) over the CPU a request without it.
    pub fn machine_per_s(&self) -> Option<f64> {
        let (c, rest) = self.machine_apart().unwrap_or((0.0, self.machine?.0));
        self.machine.map(|(_, cores)| (f64::from(cores) - c) / rest)
    }

    /// The throughput the client holds at most: the lowest of the three, the loops'
    /// threads, the busiest process and the machine (the same three limits as
    /// [`LoopPrediction::saturation_per_s`] takes from the calibration audits).
    pub fn saturation_per_s(&self) -> f64 {
        [self.process_per_s(), self.machine_per_s()]
            .into_iter()
            .flatten()
            .fold(self.loops_per_s(), f64::min)
    }
}

/// The shape of the latency a fit finds beyond a client's CPU (its path through its
/// libraries and wake-ups), chosen per tool on audits held out of the fit
/// (bench/audit/RESULTS.md, r62-r64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyShape {
    /// The same for every request; the slice is fitted on the p99s alone.
    #[default]
    Constant,
    /// A share of it, fitted with the slice on the p50s, p90s and p99s, drawn for each
    /// request from an exponential (the mean kept).
    Drawn,
}

/// How a tool paces its requests, from its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacing {
    /// Each request at its place on a schedule counted from the start: a late send leaves
    /// the next one where it was (vLLM's bench, inference-perf, AIPerf, GuideLLM,
    /// heisenbench).
    Schedule,
    /// Each gap slept from the wake that ended the last one: whatever the sleep comes late
    /// by (the loop busy when it falls due, a selector that waits in whole milliseconds)
    /// is added to every gap, and the rate sent falls short of the rate asked for at any
    /// load (SGLang's bench_serving).
    EachGap,
}

/// One audit's rates as a tool that sleeps each gap set them: what it was asked for, what
/// the server saw, and over how many gaps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapReading {
    /// The rate asked of the tool, per second.
    pub offered_per_s: f64,
    /// The rate the server saw (gaps between the first and the last arrival), per second.
    pub achieved_per_s: f64,
    /// The gaps the achieved rate was read over.
    pub gaps: u64,
    /// The mean of the gaps the tool's seed drew for the run, where they were replayed
    /// apart from it, seconds.
    pub drawn_mean_gap_s: Option<f64>,
}

/// How late each gap comes to a tool that sleeps each gap from its last wake
/// ([`Pacing::EachGap`]): its mean gap is the one asked for plus `late_s`, so it sends
/// `1 / (1 / r + late_s)` when asked for `r`.
///
/// Each audit reads the lateness as its mean gap less the one asked for. The tool draws
/// its gaps at random, and the draws' own mean strays from the one asked for by about one
/// gap over the square root of their count, so the readings are weighed by the inverse of
/// that variance: an audit of a few hundred gaps at a low rate tells little, one of
/// thousands at a high rate much. (A tool that draws from a fixed seed draws the same gaps
/// at the same rate and length in every sitting, so that stray repeats too.)
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GapLateness {
    /// The mean lateness of a gap, seconds.
    pub late_s: f64,
    /// Its standard error from the draws' spread (exponential gaps), seconds.
    pub stderr_s: f64,
    /// The audits it was read from.
    pub audits: u32,
    /// Whether it was read net of each audit's replayed draws ([`GapReading::drawn_mean_gap_s`]),
    /// its error then from the readings' own scatter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub net_of_draws: bool,
}

impl GapLateness {
    /// The weighted mean of the readings' lateness. Refused without a reading that sent
    /// requests at a rate asked for.
    ///
    /// Where two or more readings each have their draws replayed, the lateness is read net
    /// of them: each reading's mean gap less the mean its seed drew, which leaves the
    /// tool's own lateness with none of the draws' stray. What varies then is the tool's
    /// timing from run to run, which no formula gives, so the error is the readings'
    /// scatter over the square root of their count, widened by Student's t over 1.96 (so
    /// that a range of 1.96 errors is Student's 95 % for so few readings).
    pub fn fit(readings: &[GapReading]) -> Result<Self> {
        let usable: Vec<&GapReading> = readings
            .iter()
            .filter(|g| g.offered_per_s > 0.0 && g.achieved_per_s > 0.0 && g.gaps > 0)
            .collect();
        if usable.is_empty() {
            return Err(ModelError::invalid(
                "gap lateness",
                format!("{readings:?}"),
                "needs an audit with a rate asked for and requests served",
            ));
        }
        let net: Option<Vec<f64>> = usable
            .iter()
            .map(|g| {
                g.drawn_mean_gap_s
                    .filter(|m| *m > 0.0 && m.is_finite())
                    .map(|m| 1.0 / g.achieved_per_s - m)
            })
            .collect();
        if let Some(net) = net.filter(|n| n.len() >= 2) {
            let k = net.len() as f64;
            let mean = net.iter().sum::<f64>() / k;
            let scatter = (net.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
            return Ok(Self {
                late_s: mean,
                stderr_s: scatter / k.sqrt() * crate::interval::student_t_975(net.len() - 1)
                    / crate::interval::Z_975,
                audits: usable.len() as u32,
                net_of_draws: true,
            });
        }
        let (mut sum_w, mut sum_wx) = (0.0, 0.0);
        for g in &usable {
            let asked = 1.0 / g.offered_per_s;
            // The variance of the mean of n exponential draws of mean `asked`: asked^2 / n
            // (the lateness adds to each gap but, constant, none to their spread).
            let w = g.gaps as f64 / (asked * asked);
            sum_w += w;
            sum_wx += w * (1.0 / g.achieved_per_s - asked);
        }
        Ok(Self {
            late_s: sum_wx / sum_w,
            stderr_s: sum_w.sqrt().recip(),
            audits: usable.len() as u32,
            net_of_draws: false,
        })
    }

    /// Whether the lateness is told from the draws' own spread (two standard errors).
    pub fn is_measured(&self) -> bool {
        self.late_s > 2.0 * self.stderr_s
    }

    /// The rate sent when `offered_per_s` is asked for.
    pub fn achieved_per_s(&self, offered_per_s: f64) -> f64 {
        self.achieved_given_draws_per_s(1.0 / offered_per_s)
    }

    /// The rate sent by a run whose draws' mean gap is `drawn_mean_gap_s` (replayed).
    pub fn achieved_given_draws_per_s(&self, drawn_mean_gap_s: f64) -> f64 {
        1.0 / (drawn_mean_gap_s + self.late_s.max(0.0))
    }

    /// The highest rate of which the tool sends at least `share` (0 to 1): beyond it the
    /// lateness costs more than `1 - share` of every gap. None where the lateness is not
    /// measured.
    pub fn held_per_s(&self, share: f64) -> Option<f64> {
        self.is_measured()
            .then(|| (1.0 / share - 1.0) / self.late_s)
    }

    /// The chance that a run of `gaps` gaps asked at `offered_per_s` sends at least `share`
    /// of that rate, over the draws a seed may give. The draws' sum `S` is a gamma of shape
    /// `gaps` and rate `offered_per_s`; the run sends `gaps / (S + gaps * late)` a second,
    /// so it holds where `S <= gaps * (1 / (share * offered) - late)`. A short run below the
    /// held limit can fall short on its draws alone, and one above it can hold: at the
    /// limit itself the chance is about a half whatever the length. (A seed fixes the
    /// draws, so one seed's runs hold or not alike in every sitting.)
    pub fn held_chance(&self, offered_per_s: f64, gaps: u64, share: f64) -> f64 {
        let n = gaps as f64;
        let most = n * (1.0 / (share * offered_per_s) - self.late_s.max(0.0));
        if gaps == 0 || !(offered_per_s > 0.0 && most > 0.0) {
            return 0.0;
        }
        // Refused only for arguments outside its domain (an infinite bound): then nothing
        // is read.
        statrs::function::gamma::checked_gamma_lr(n, offered_per_s * most)
            .ok()
            .filter(|p| p.is_finite())
            .unwrap_or(0.0)
    }

    /// The largest lateness at which a run asked at `offered_per_s` whose draws' mean gap
    /// is `drawn_mean_gap_s` (replayed) still sends `share` of it: `1 / (share r) - m`.
    fn held_threshold_s(offered_per_s: f64, drawn_mean_gap_s: f64, share: f64) -> f64 {
        1.0 / (share * offered_per_s) - drawn_mean_gap_s
    }

    /// The chance that a run asked at `offered_per_s`, whose draws' mean gap is
    /// `drawn_mean_gap_s` (replayed, so known), sends at least `share` of that rate: its
    /// draws no longer vary, so only the lateness's own error is left. The run holds while
    /// the lateness (taken as no less than zero) is at most its threshold; the chance is
    /// the lateness's normal below it, and 1 or 0 where the lateness has no error.
    pub fn held_chance_given_draws(
        &self,
        offered_per_s: f64,
        drawn_mean_gap_s: f64,
        share: f64,
    ) -> f64 {
        let t = Self::held_threshold_s(offered_per_s, drawn_mean_gap_s, share);
        if t < 0.0 {
            return 0.0;
        }
        if !(self.stderr_s > 0.0 && self.stderr_s.is_finite()) {
            return f64::from(u8::from(self.late_s.max(0.0) <= t));
        }
        crate::service::normal_cdf((t - self.late_s) / self.stderr_s)
    }

    /// The fewest gaps for which a run asked at `offered_per_s` sends `share` of it with
    /// chance `sure` or more ([`Self::held_chance`]): how long a step must be for the
    /// held rule to read the tool's lateness and not its draws. None at or above the held
    /// limit (for `sure` above a half, which no length makes), or where more than `2^40`
    /// gaps would be needed.
    pub fn gaps_to_hold(&self, offered_per_s: f64, share: f64, sure: f64) -> Option<u64> {
        // At the limit the draws' mean decides, and it errs either way alike.
        if offered_per_s * self.late_s.max(0.0) >= 1.0 / share - 1.0 && sure > 0.5 {
            return None;
        }
        let holds = |n: u64| self.held_chance(offered_per_s, n, share) >= sure;
        // Doubling to a length that holds, then halving the bracket; the chance grows
        // with the length below the limit (the draws' mean settles on the one asked for).
        let mut high = 1u64;
        while !holds(high) {
            high = high.checked_mul(2).filter(|h| *h <= 1 << 40)?;
        }
        let mut low = high / 2;
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if holds(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }

    /// What a walk up `steps` (each a rate asked and its gaps, in the order walked) reads
    /// as its knee: the highest step that sends `share` of its rate, walking on until
    /// `stop_after` steps in a row fall short ([`KneeWalk::of_chances`]). Each step holds
    /// with its own [`Self::held_chance`], the steps' draws apart from one another (a tool
    /// that draws its prompts from the seed before its gaps, as SGLang's bench does, starts
    /// each length's gaps elsewhere in the stream).
    pub fn knee_walk(&self, steps: &[(f64, u64)], share: f64, stop_after: usize) -> KneeWalk {
        let chances: Vec<f64> = steps
            .iter()
            .map(|&(rate, gaps)| self.held_chance(rate, gaps, share))
            .collect();
        KneeWalk::of_chances(&chances, stop_after)
    }

    /// [`Self::knee_walk`] over the lateness's own error as well as the draws: the lateness
    /// is known only within [`Self::stderr_s`], and every step of one walk meets the same
    /// lateness, so the walks (not each step's chance) are averaged over it. The lateness
    /// is taken as a normal of that error, on a grid of points a tenth of an error apart
    /// over six errors either side of the mean, each weighed by its density; a lateness
    /// below zero sends as none. With no error this is [`Self::knee_walk`].
    pub fn knee_walk_over_error(
        &self,
        steps: &[(f64, u64)],
        share: f64,
        stop_after: usize,
    ) -> KneeWalk {
        if !(self.stderr_s > 0.0 && self.stderr_s.is_finite()) {
            return self.knee_walk(steps, share, stop_after);
        }
        let nodes = -ERROR_GRID..=ERROR_GRID;
        let density = |i: i32| (-0.5 * (f64::from(i) / 10.0).powi(2)).exp();
        let total: f64 = nodes.clone().map(density).sum();
        KneeWalk::mixed(nodes.map(|i| {
            let at = Self {
                late_s: self.late_s + f64::from(i) / 10.0 * self.stderr_s,
                ..*self
            };
            (density(i) / total, at.knee_walk(steps, share, stop_after))
        }))
    }

    /// What a walk up `steps` reads when each step's draws are known: each a rate asked
    /// and the mean of the gaps the tool's seed drew for it (replayed), in the order
    /// walked. Such a step sends `1 / (drawn + late)`, so it holds `share` of its rate
    /// exactly while the lateness is at most `1 / (share x rate) - drawn`, its threshold;
    /// the one uncertain thing left is the lateness, within its error. The normal of that
    /// error is cut at the steps' thresholds, and between two cuts every step holds or not
    /// alike, so each reading's chance is exact: the normal's share of the lateness that
    /// makes it. With no error, the one reading the lateness read makes.
    pub fn knee_walk_given_draws(
        &self,
        steps: &[(f64, f64)],
        share: f64,
        stop_after: usize,
    ) -> KneeWalk {
        let thresholds: Vec<f64> = steps
            .iter()
            .map(|&(rate, drawn)| Self::held_threshold_s(rate, drawn, share))
            .collect();
        let walk_at = |late: f64| {
            let held: Vec<f64> = thresholds
                .iter()
                .map(|t| f64::from(u8::from(late.max(0.0) <= *t)))
                .collect();
            KneeWalk::of_chances(&held, stop_after)
        };
        if !(self.stderr_s > 0.0 && self.stderr_s.is_finite()) {
            return walk_at(self.late_s);
        }
        // The cuts at or above zero (a lateness below zero sends as none late), in order;
        // each stretch from one cut up to the next (its top end in it) is walked at its top.
        let mut cuts: Vec<f64> = thresholds
            .iter()
            .copied()
            .filter(|t| *t >= 0.0 && t.is_finite())
            .collect();
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let below = |late: f64| crate::service::normal_cdf((late - self.late_s) / self.stderr_s);
        let mut stretches = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0.0;
        for &cut in &cuts {
            let upto = below(cut);
            stretches.push((upto - from, walk_at(cut)));
            from = upto;
        }
        let beyond = cuts.last().map_or(self.late_s, |c| c + 1.0);
        stretches.push((1.0 - from, walk_at(beyond)));
        KneeWalk::mixed(stretches)
    }

    /// The held limit ([`Self::held_per_s`]) at the lateness `z` standard errors above and
    /// below its mean: the lower end, and the upper where the lateness `z` errors below the
    /// mean is still above zero (else the upper end is open). None where the lateness is
    /// not measured.
    pub fn held_range_per_s(&self, share: f64, z: f64) -> Option<(f64, Option<f64>)> {
        let room = 1.0 / share - 1.0;
        let low_late = self.late_s - z * self.stderr_s;
        self.is_measured().then(|| {
            (
                room / (self.late_s + z * self.stderr_s),
                (low_late > 0.0).then(|| room / low_late),
            )
        })
    }
}

/// The lateness grid of [`GapLateness::knee_walk_over_error`] runs this many tenths of a
/// standard error either side of the mean: six errors, past which the normal holds less
/// than one in 10^8.
const ERROR_GRID: i32 = 60;

/// What a walk up a tool's rates reads as its knee, over the draws a seed may give
/// ([`GapLateness::knee_walk`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KneeWalk {
    /// The chance that no step holds before the walk stops.
    pub none: f64,
    /// For each step, in the order walked: the chance it is the highest held.
    pub highest: Vec<f64>,
    /// The chance the walk has not stopped by the last step (it would read that step's
    /// reading or higher, had it gone on).
    pub walking_on: f64,
}

impl KneeWalk {
    /// The walk that is each of `walks` with its weight (the weights summing to 1).
    fn mixed(walks: impl IntoIterator<Item = (f64, KneeWalk)>) -> Self {
        let mut mean = Self {
            none: 0.0,
            highest: Vec::new(),
            walking_on: 0.0,
        };
        for (weight, walk) in walks {
            mean.highest.resize(walk.highest.len(), 0.0);
            mean.none += weight * walk.none;
            mean.walking_on += weight * walk.walking_on;
            for (m, h) in mean.highest.iter_mut().zip(&walk.highest) {
                *m += weight * h;
            }
        }
        mean
    }

    /// A walk up steps that hold with the chances given, one apart from another, in the
    /// order walked: the highest held before `stop_after` steps in a row fall short. A walk
    /// that has not stopped by the last step reads the highest held so far, and is counted
    /// in [`Self::walking_on`] too. Chances of 0 and 1 give the one reading a walk of known
    /// steps makes, with chance 1.
    pub fn of_chances(chances: &[f64], stop_after: usize) -> Self {
        let stop_after = stop_after.max(1);
        // The chance of each walk still going: indexed by the highest step held so far
        // (0 for none, k + 1 for step k) and the steps short since it.
        let mut going = vec![vec![0.0f64; stop_after]; chances.len() + 1];
        going[0][0] = 1.0;
        let mut stopped = vec![0.0f64; chances.len() + 1];
        for (k, &p) in chances.iter().enumerate() {
            let mut next = vec![vec![0.0f64; stop_after]; chances.len() + 1];
            for (best, shorts) in going.iter().enumerate() {
                for (s, &mass) in shorts.iter().enumerate() {
                    if mass == 0.0 {
                        continue;
                    }
                    next[k + 1][0] += mass * p;
                    if s + 1 >= stop_after {
                        stopped[best] += mass * (1.0 - p);
                    } else {
                        next[best][s + 1] += mass * (1.0 - p);
                    }
                }
            }
            going = next;
        }
        let walking_on: f64 = going.iter().flatten().sum();
        let mut reads: Vec<f64> = stopped
            .iter()
            .zip(&going)
            .map(|(s, g)| s + g.iter().sum::<f64>())
            .collect();
        let none = reads.remove(0);
        Self {
            none,
            highest: reads,
            walking_on,
        }
    }

    /// The step most likely read (None: no step held); for a walk of known steps, the one
    /// it reads.
    pub fn likeliest(&self) -> Option<usize> {
        let (k, p) = self
            .highest
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))?;
        (*p > self.none).then_some(k)
    }

    /// The chance the walk reads a step (of `rates`, in the order walked) whose rate the
    /// rate `limit_per_s` is within `band` of: `|limit / rate - 1| <= band`, the error of
    /// a predicted limit against the rate a tool held.
    pub fn chance_within(&self, rates: &[f64], limit_per_s: f64, band: f64) -> f64 {
        self.highest
            .iter()
            .zip(rates)
            .filter(|(_, r)| (limit_per_s / **r - 1.0).abs() <= band)
            // From +0, so that no step in the band reads 0, not -0 (an empty float sum).
            .fold(0.0, |sum, (p, _)| sum + p)
    }

    /// The chance the walk reads no higher than step `k` (None: no step held).
    pub fn at_most(&self, k: Option<usize>) -> f64 {
        self.none + k.map_or(0.0, |k| self.highest.iter().take(k + 1).sum())
    }
}

/// Least squares of `y` on the first `k` (1 to 3) columns of `x`, by the normal equations
/// (Gaussian elimination with partial pivoting). None when they are singular.
fn least_squares(rows: &[([f64; 3], f64)], k: usize) -> Option<[f64; 3]> {
    let mut m = [[0.0f64; 4]; 3];
    for (x, y) in rows {
        for i in 0..k {
            for j in 0..k {
                m[i][j] += x[i] * x[j];
            }
            m[i][3] += x[i] * y;
        }
    }
    // Scale each row so that pivots compare fairly across units.
    for row in m.iter_mut().take(k) {
        let s = row[..k].iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if s == 0.0 {
            return None;
        }
        row.iter_mut().for_each(|v| *v /= s);
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|a, b| m[*a][col].abs().total_cmp(&m[*b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let p = m[col];
        for (r, row) in m.iter_mut().enumerate().take(k) {
            if r != col {
                let f = row[col] / p[col];
                row.iter_mut().zip(p).for_each(|(v, pv)| *v -= f * pv);
            }
        }
    }
    let mut out = [0.0; 3];
    for i in 0..k {
        out[i] = m[i][3] / m[i][i];
    }
    Some(out)
}

/// Where a client starts its TTFT clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockStart {
    /// At the request's intended send (its schedule's time): the loop's backlog is inside
    /// every TTFT (heisenbench).
    Intended,
    /// When the client's loop begins the request (its coroutine or dispatch starts): the
    /// backlog before that is left out (reported apart as lateness, or not at all), the
    /// request's own path before it leaves is in (vLLM's and SGLang's benches,
    /// inference-perf, GuideLLM, AIPerf).
    OwnSend,
}

impl std::fmt::Display for ClockStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Intended => "intended",
            Self::OwnSend => "own-send",
        })
    }
}

impl std::str::FromStr for ClockStart {
    type Err = ModelError;

    /// `intended` or `own-send`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "intended" => Ok(Self::Intended),
            "own-send" => Ok(Self::OwnSend),
            _ => Err(ModelError::invalid("clock", s, "use intended or own-send")),
        }
    }
}

impl LatencyShape {
    /// Whether it is the constant one (the default).
    pub fn is_constant(&self) -> bool {
        *self == Self::Constant
    }
}

impl std::fmt::Display for LatencyShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Constant => "constant",
            Self::Drawn => "drawn",
        })
    }
}

impl std::str::FromStr for LatencyShape {
    type Err = ModelError;

    /// `constant` or `drawn`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "constant" => Ok(Self::Constant),
            "drawn" => Ok(Self::Drawn),
            _ => Err(ModelError::invalid(
                "latency shape",
                s,
                "use constant or drawn",
            )),
        }
    }
}

/// What one audit measured of a client's loop: its load, its CPU and the TTFT it added.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AuditedLoad {
    /// The rate the server saw, per second.
    pub rate_per_s: f64,
    /// Chunks per request.
    pub chunks_per_request: f64,
    /// The loops' CPU per request served, seconds.
    pub cpu_per_request_s: f64,
    /// The busiest process's CPU per request served, seconds (the one that runs out of its
    /// core first).
    pub busiest_cpu_per_request_s: f64,
    /// The client's loops.
    pub loops: u32,
    /// When the client stamps a chunk: at its arrival (heisenbench, from the kernel's
    /// receive stamp) or after its loop processed it.
    #[serde(default)]
    pub stamp: Stamp,
    /// How the busiest process's CPU spread over equal intervals (None where it was not
    /// read).
    pub cpu_spread: Option<CpuSpread>,
    /// The TTFT the client added: its reported minus the server's true mean, p50, p90 and
    /// p99, seconds (None where it reports no such figure).
    pub excess_s: [Option<f64>; 4],
    /// How long the busiest process's main thread waited for a core each time it was put
    /// on one, seconds (None where it was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_wait_s: Option<f64>,
    /// How often that thread lost its core while it could still run, times a second of its
    /// CPU (None where it was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_per_cpu_s: Option<f64>,
    /// The squared coefficient of variation of the gaps between the requests the server
    /// saw (1: Poisson; None where too few were seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_scv: Option<f64>,
    /// The CPU per request the audit put on the machine (the client's tree, the server
    /// and the audit's own sampling) and the machine's cores, where they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<(f64, u32)>,
    /// The machine's speed during the load: the median CPU time of the fixed unit of work
    /// the audit's gauge timed beside the client, seconds (None where it was not gauged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gauge_s: Option<f64>,
    /// The median CPU time of the gauge's walk through memory in the load window, seconds
    /// (None where the audit's gauge did not walk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_s: Option<f64>,
}

impl AuditedLoad {
    /// Its CPU per request at its length.
    pub fn sample(&self) -> CostSample {
        CostSample {
            rate_per_s: self.rate_per_s,
            chunks_per_request: self.chunks_per_request,
            cpu_per_request_s: self.cpu_per_request_s,
        }
    }

    /// The CPU its loops spent per second, cores.
    pub fn cores(&self) -> f64 {
        self.rate_per_s * self.cpu_per_request_s
    }

    /// Its busiest process's CPU per request.
    pub fn busiest_sample(&self) -> CostSample {
        CostSample {
            cpu_per_request_s: self.busiest_cpu_per_request_s,
            ..self.sample()
        }
    }

    /// The CPU per request the audit put on the machine (None where it was not read).
    pub fn machine_sample(&self) -> Option<CostSample> {
        self.machine.map(|(cpu, _)| CostSample {
            cpu_per_request_s: cpu,
            ..self.sample()
        })
    }
}

/// How long a client's loop, woken by work, waits for a core before it runs, as a line in
/// the CPU the client's loops spend per second: `base + per_core x cores` seconds, at
/// least 0.
///
/// On a machine the client shares with the server and its own other processes, a loop
/// that wakes finds the cores taken more often, and for longer, as the client's own load
/// grows. A loop with work queued does not sleep and does not wait to wake, so the wait
/// falls on the work that finds it idle (a setup time), never on a backlog. What a loop
/// waits to wake on a quiet machine (the kernel's wake-up path) is `base`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoreWait {
    /// The wait with no load, extrapolated, seconds.
    pub base: f64,
    /// What each core of the client's loops' CPU adds to it, seconds.
    pub per_core: f64,
}

impl CoreWait {
    /// The line through `(cores, wait)` readings by least squares. Readings whose loads
    /// span less than a factor of 1.5, or a line that falls as the load rises (a wait the
    /// load does not drive), give their mean as a constant. None without readings.
    pub fn fit(readings: &[(f64, f64)]) -> Option<Self> {
        let kept: Vec<(f64, f64)> = readings
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && *x >= 0.0 && y.is_finite() && *y >= 0.0)
            .collect();
        if kept.is_empty() {
            return None;
        }
        let n = kept.len() as f64;
        let mean_x = kept.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = kept.iter().map(|p| p.1).sum::<f64>() / n;
        let constant = Self {
            base: mean_y,
            per_core: 0.0,
        };
        let lo = kept.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let hi = kept.iter().map(|p| p.0).fold(0.0, f64::max);
        if !(lo > 0.0 && hi >= 1.5 * lo) {
            return Some(constant);
        }
        let sxx: f64 = kept.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        let sxy: f64 = kept.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let per_core = sxy / sxx;
        Some(if per_core > 0.0 {
            Self {
                base: mean_y - per_core * mean_x,
                per_core,
            }
        } else {
            constant
        })
    }

    /// The wait to wake at `cores` of the loops' CPU a second, seconds.
    pub fn at(&self, cores: f64) -> f64 {
        (self.base + self.per_core * cores).max(0.0)
    }
}

/// How a process's CPU varied over equal intervals of an audit's load window.
///
/// With Poisson arrivals the CPU an interval of length W holds is a compound Poisson sum of
/// the work S of the requests in it, whose variance is `rate x W x E[S^2]`; a part per
/// second that does not vary adds none. So the interval's variance gives E[S^2], and with
/// the mean work of a request its squared coefficient of variation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuSpread {
    /// The interval, seconds.
    pub interval_s: f64,
    /// The variance of the CPU per interval, seconds squared.
    pub variance_s2: f64,
}

impl CpuSpread {
    /// The SCV of one request's work on the process, when it takes `rate_per_s` requests a
    /// second costing `work_s` each on average (the marginal cost: CPU spent per second
    /// whatever the load is not a request's), at least 0. None without a rate or a cost.
    pub fn work_scv(&self, rate_per_s: f64, work_s: f64) -> Option<f64> {
        let per_interval = rate_per_s * self.interval_s;
        if !(per_interval > 0.0 && work_s > 0.0 && self.variance_s2.is_finite()) {
            return None;
        }
        Some((self.variance_s2 / (per_interval * work_s * work_s) - 1.0).max(0.0))
    }
}

/// What a simulation of the client's loop predicts it reports, at one audit's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopPrediction {
    /// The costs simulated.
    pub costs: LoopCosts,
    /// The share of a request's fixed cost spent before it leaves (the rest when it
    /// finishes).
    pub before_send: f64,
    /// Where the share came from: fitted on which audit, or given.
    pub before_send_from: String,
    /// Latency in a request's path that takes none of the loop's CPU (its connection set
    /// up, the loop's own wake-ups between the request's steps), seconds: fitted where the
    /// whole fixed cost before the send does not make the measured mean, else 0. It is in
    /// every TTFT the prediction reports.
    #[serde(default)]
    pub delay_s: f64,
    /// The share of [`Self::delay_s`] drawn afresh for each request from an exponential
    /// (the rest is the same for every request): fitted with the slice on the audits' p50,
    /// p90 and p99. 0: every request pays the same latency.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_spread: f64,
    /// The shape [`Self::delay_s`] was fitted with: drawn where a share of it was fitted
    /// (even a share of 0), constant where it was not tried.
    #[serde(default, skip_serializing_if = "LatencyShape::is_constant")]
    pub latency_shape: LatencyShape,
    /// The simulated TTFT the client reports, before the latency beyond the CPU: what the
    /// latency's spread is added to. Only in memory.
    #[serde(skip)]
    pub loop_part: Option<Recorder>,
    /// The longest a request's send or finish work runs on the loop before the jobs queued
    /// meanwhile get a turn, seconds (`None`: each runs whole). An asyncio client runs a
    /// request's own path as many callbacks, one between two awaits each; fitted on the
    /// audit's p99, where a whole job in the way shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_s: Option<f64>,
    /// The clock simulated.
    pub clock: ClockStart,
    /// When the simulated client stamps a chunk.
    #[serde(default)]
    pub stamp: Stamp,
    /// Loops simulated (requests dealt at random).
    pub loops: u32,
    /// The load simulated: requests per second and chunks per request.
    pub rate_per_s: f64,
    /// Chunks per request.
    pub chunks_per_request: f64,
    /// The reported TTFT the simulation predicts against a zero-latency server: mean,
    /// p50, p90 and p99, seconds (what the client adds to a server's TTFT).
    pub reported_s: [f64; 4],
    /// The rate the simulated loops achieved.
    pub achieved_per_s: f64,
    /// The most requests per second the loops carry at these costs: the fewest of what the
    /// loops' cores carry, what the busiest process's one core carries and what the
    /// machine's cores carry of the whole machine's work.
    pub saturation_per_s: f64,
    /// The costs as the cores fill ([`FillingCosts`]) of each bound (the loops, the
    /// busiest process, the machine) the calibration audits could be fitted so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filling: Vec<FillingCosts>,
    /// The saturation those costs give: the rate at which the CPU a request, falling as
    /// the cores fill, fills them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filled_saturation_per_s: Option<f64>,
    /// The whole machine's costs (the client's tree, the server and the audit) and its
    /// cores, where they were fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<(LoopCosts, u32)>,
    /// The busiest process's own costs, where they were fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest: Option<LoopCosts>,
    /// The mean wait for a core of the loop woken by work, simulated (exponential), seconds
    /// (None: none simulated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_wait_s: Option<f64>,
    /// Where that wait came from: the audit's own reading, or the law fitted on the
    /// calibration audits at this load.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wake_wait_from: String,
    /// The law of the wait in the load, fitted on the audits that read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_wait_law: Option<CoreWait>,
    /// How often the simulated loop lost its core while it had work, times a second of its
    /// CPU, each time waiting as long as to wake (None: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_per_cpu_s: Option<f64>,
    /// The SCV of the gaps between the simulated requests (gamma renewal arrivals, as the
    /// server saw the audit's; None: Poisson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_scv: Option<f64>,
    /// How late each gap came, for a tool that sleeps each gap from its last wake, read
    /// from the calibration audits (None: the tool keeps a schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_lateness: Option<GapLateness>,
    /// The highest rate such a tool holds ([`HELD_SHARE`] of it sent), whatever its CPU:
    /// where the lateness was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_held_per_s: Option<f64>,
    /// The CPU a request with the work met in batches, and the throughput it bounds,
    /// where the series ran such an audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batched: Option<BatchedBound>,
    /// The throughput [`Self::batched`] bounds ([`BatchedBound::saturation_per_s`]), kept
    /// beside its inputs so that a reader of the series need not work it out again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batched_saturation_per_s: Option<f64>,
}

/// A field at 0 is left out of a file.
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The share of the rate asked for that a client must send for the rate to count as held.
pub const HELD_SHARE: f64 = 0.95;

impl LoopPrediction {
    /// The same prediction with how late each gap comes to a tool that sleeps each gap,
    /// and the highest rate that lateness lets it hold.
    pub fn with_pacing(mut self, lateness: Option<GapLateness>) -> Self {
        self.gap_lateness = lateness;
        self.paced_held_per_s = lateness.and_then(|g| g.held_per_s(HELD_SHARE));
        self
    }

    /// The same prediction with the CPU a request read with the work met in batches, and
    /// the machine's part a second fitted here ([`BatchedBound::machine_per_second`]).
    pub fn with_batched(mut self, batched: Option<BatchedBound>) -> Self {
        let per_second = self.machine.map(|(m, _)| m.per_second);
        self.batched = batched.map(|b| BatchedBound {
            machine_per_second: per_second,
            ..b
        });
        self.batched_saturation_per_s = self.batched.map(|b| b.saturation_per_s());
        self
    }

    /// The same prediction with the busiest process's costs, and the saturation they
    /// bound: a process runs one loop, so it carries at most one core of work.
    pub fn with_busiest(mut self, busiest: Option<LoopCosts>) -> Self {
        self.busiest = busiest;
        if let Some(b) = busiest {
            self.saturation_per_s = self
                .saturation_per_s
                .min(b.saturation_per_s(self.chunks_per_request, 1));
        }
        self
    }

    /// The same prediction with the costs as the cores fill, and the saturation they give
    /// at its length (the lowest of the bounds fitted).
    pub fn with_filling(mut self, bounds: &[FillingCosts]) -> Self {
        let chunks = self.chunks_per_request;
        self.filling = bounds.to_vec();
        self.filled_saturation_per_s = bounds
            .iter()
            .map(|f| f.saturation_per_s(chunks))
            .min_by(f64::total_cmp);
        self
    }

    /// The rate at which the machine's `cores` would all be busy with work costing
    /// `machine` (the client's processes, the server and the audit together).
    pub fn machine_saturation_per_s(&self) -> Option<f64> {
        self.machine
            .map(|(m, cores)| m.saturation_per_s(self.chunks_per_request, cores))
    }

    /// The same prediction with the whole machine's costs, and the saturation its cores
    /// bound: a client whose work is spread over many processes runs out of cores before
    /// any one process runs out of its own.
    pub fn with_machine(mut self, machine: Option<(LoopCosts, u32)>) -> Self {
        self.machine = machine;
        if let Some(m) = self.machine_saturation_per_s() {
            self.saturation_per_s = self.saturation_per_s.min(m);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readings on a line give the line back; a wait that falls with the load, or loads
    /// too close to tell a slope, give the mean; nothing gives nothing.
    #[test]
    fn the_wait_to_wake_is_a_line_in_the_load_or_a_constant() {
        let line = CoreWait::fit(&[(0.2, 1.2e-4), (0.4, 1.4e-4), (0.8, 1.8e-4)]).unwrap();
        assert!((line.base - 1e-4).abs() < 1e-12, "{line:?}");
        assert!((line.per_core - 1e-4).abs() < 1e-12, "{line:?}");
        assert!((line.at(1.0) - 2e-4).abs() < 1e-12);
        let falling = CoreWait::fit(&[(0.2, 3e-4), (0.8, 1e-4)]).unwrap();
        assert_eq!(falling.per_core, 0.0);
        assert!((falling.base - 2e-4).abs() < 1e-12);
        let close = CoreWait::fit(&[(0.5, 1e-4), (0.6, 3e-4)]).unwrap();
        assert_eq!(close.per_core, 0.0);
        assert!((close.at(5.0) - 2e-4).abs() < 1e-12);
        assert_eq!(CoreWait::fit(&[]), None);
        assert_eq!(CoreWait::fit(&[(f64::NAN, 1.0)]), None);
        // A steep line extrapolated below zero load stays at zero.
        let steep = CoreWait::fit(&[(0.5, 0.0), (1.0, 1e-3)]).unwrap();
        assert_eq!(steep.at(0.1), 0.0);
    }

    /// The batched bound is each core count over its CPU a request, and the lowest of the
    /// three: 2 loops at 4 ms a request hold 500 req/s, their busiest process's one core at
    /// 2.2 ms 455, a 2-core machine at 5 ms 400.
    #[test]
    fn the_batched_bound_is_the_lowest_of_the_loops_the_process_and_the_machine() {
        let b = BatchedBound {
            rate_per_s: 100.0,
            release_every_s: 1.0,
            loops_cpu_per_request_s: 4e-3,
            loops: 2,
            busiest_cpu_per_request_s: Some(2.2e-3),
            machine: Some((5e-3, 2)),
            machine_per_second: None,
        };
        assert!((b.loops_per_s() - 500.0).abs() < 1e-9);
        assert!((b.process_per_s().unwrap() - 1.0 / 2.2e-3).abs() < 1e-9);
        assert!((b.machine_per_s().unwrap() - 400.0).abs() < 1e-9);
        assert!((b.saturation_per_s() - 400.0).abs() < 1e-9);
        let roomy = BatchedBound {
            machine: Some((1e-3, 2)),
            ..b
        };
        assert!((roomy.saturation_per_s() - 1.0 / 2.2e-3).abs() < 1e-9);
        // One loop in a process whose other threads take their share of its core.
        let one = BatchedBound {
            loops: 1,
            loops_cpu_per_request_s: 2.4e-3,
            busiest_cpu_per_request_s: Some(2.8e-3),
            machine: None,
            ..b
        };
        assert!((one.saturation_per_s() - 1.0 / 2.8e-3).abs() < 1e-9);
        let unread = BatchedBound {
            machine: None,
            busiest_cpu_per_request_s: None,
            ..roomy
        };
        assert!((unread.saturation_per_s() - 500.0).abs() < 1e-9);
    }

    /// Costs of 0.1 core a second, 1 ms a request and 10 us a chunk put 5 ms a request on
    /// a run at 50 req/s x 200 chunks (2 ms of it the part a second): a run that spent
    /// 5.5 ms ran at 1.1 times them, and the costs scaled by 1.1 put 5.5 ms on it. A run
    /// that measured no CPU has no speed.
    #[test]
    fn a_runs_speed_is_its_cpu_against_the_costs() {
        let costs = LoopCosts {
            per_second: 0.1,
            per_request_s: 1e-3,
            per_chunk_s: 10e-6,
            request_scv: 0.3,
        };
        let run = CostSample {
            rate_per_s: 50.0,
            chunks_per_request: 200.0,
            cpu_per_request_s: 5.5e-3,
        };
        let k = costs.speed_of(run).expect("a speed");
        assert!((k - 1.1).abs() < 1e-12, "{k}");
        let slower = costs.scaled(k);
        assert!((slower.per_second / 50.0 + slower.request_s(200.0) - 5.5e-3).abs() < 1e-15);
        assert_eq!(slower.request_scv, 0.3);
        let idle = CostSample {
            cpu_per_request_s: 0.0,
            ..run
        };
        assert_eq!(costs.speed_of(idle), None);
    }

    /// A machine busy 0.2 cores whatever the rate, and 4 ms a request besides: the batched
    /// audit at 100 req/s reads 0.6 cores, 6 ms a request, which puts the full machine at
    /// 333 req/s; taken apart, 1.8 cores left over 4 ms hold 450. A part a second that
    /// leaves the audit no CPU a request is not taken out.
    #[test]
    fn the_machines_part_a_second_is_taken_out_of_the_batched_bound() {
        let b = BatchedBound {
            rate_per_s: 100.0,
            release_every_s: 1.0,
            loops_cpu_per_request_s: 1e-3,
            loops: 1,
            busiest_cpu_per_request_s: None,
            machine: Some((6e-3, 2)),
            machine_per_second: None,
        };
        assert!((b.saturation_per_s() - 2.0 / 6e-3).abs() < 1e-9);
        let floored = BatchedBound {
            machine_per_second: Some(0.2),
            ..b
        };
        assert!((floored.machine_per_s().unwrap() - 450.0).abs() < 1e-9);
        assert!((floored.saturation_per_s() - 450.0).abs() < 1e-9);
        for c in [0.6, 2.5, 0.0, -0.1] {
            let odd = BatchedBound {
                machine_per_second: Some(c),
                ..b
            };
            assert!(
                (odd.machine_per_s().unwrap() - 2.0 / 6e-3).abs() < 1e-9,
                "{c}"
            );
        }
        // A prediction whose machine was fitted with a part a second hands it on.
        let machine = LoopCosts {
            per_second: 0.2,
            per_request_s: 4e-3,
            per_chunk_s: 1e-9,
            request_scv: 0.0,
        };
        let p = LoopPrediction {
            machine: Some((machine, 2)),
            ..prediction_for_tests()
        }
        .with_batched(Some(b));
        assert_eq!(p.batched.unwrap().machine_per_second, Some(0.2));
        assert!((p.batched_saturation_per_s.unwrap() - 450.0).abs() < 1e-9);
        let unfitted = prediction_for_tests().with_batched(Some(b));
        assert_eq!(unfitted.batched.unwrap().machine_per_second, None);
        assert!((unfitted.batched_saturation_per_s.unwrap() - 2.0 / 6e-3).abs() < 1e-9);
        assert_eq!(p.with_batched(None).batched_saturation_per_s, None);
    }

    /// A prediction with nothing fitted beyond its loop's costs.
    fn prediction_for_tests() -> LoopPrediction {
        let costs = LoopCosts {
            per_second: 0.0,
            per_request_s: 1e-3,
            per_chunk_s: 1e-5,
            request_scv: 0.0,
        };
        LoopPrediction {
            costs,
            before_send: 0.5,
            before_send_from: String::new(),
            delay_s: 0.0,
            delay_spread: 0.0,
            latency_shape: LatencyShape::Constant,
            loop_part: None,
            slice_s: None,
            clock: ClockStart::OwnSend,
            stamp: Stamp::default(),
            loops: 1,
            rate_per_s: 100.0,
            chunks_per_request: 200.0,
            reported_s: [0.0; 4],
            achieved_per_s: 100.0,
            saturation_per_s: costs.saturation_per_s(200.0, 1),
            filling: Vec::new(),
            filled_saturation_per_s: None,
            machine: None,
            busiest: None,
            wake_wait_s: None,
            wake_wait_from: String::new(),
            wake_wait_law: None,
            preempt_per_cpu_s: None,
            arrival_scv: None,
            gap_lateness: None,
            paced_held_per_s: None,
            batched: None,
            batched_saturation_per_s: None,
        }
    }

    fn sample(n: f64, cpu: f64) -> CostSample {
        CostSample {
            rate_per_s: 50.0,
            chunks_per_request: n,
            cpu_per_request_s: cpu,
        }
    }

    /// An audit at `rate` of a client spending `c` cores a second, `a` a request and `b` a
    /// chunk.
    fn at(rate: f64, n: f64, (c, a, b): (f64, f64, f64)) -> CostSample {
        CostSample {
            rate_per_s: rate,
            chunks_per_request: n,
            cpu_per_request_s: c / rate + a + n * b,
        }
    }

    /// An audit of a client that fills as [`FillingCosts`] says: `a` a request and `b` a
    /// chunk on busy cores, `idle` more where its work finds them idle. Its utilisation is
    /// that of an M/G/1 queue with an exceptional first service (a busy period's first
    /// job takes `idle` longer): idle with probability `(1 - r s) / (1 + r idle)`, Welch's
    /// result, written here as the busy share.
    fn filling_at(rate: f64, n: f64, (a, b, idle): (f64, f64, f64), cores: u32) -> CostSample {
        let k = f64::from(cores);
        let s = a + n * b;
        // Per core: requests at rate / k, each `s`, the first of a busy period `s + idle`.
        let idle_share = (1.0 - rate / k * s) / (1.0 + rate / k * idle);
        CostSample {
            rate_per_s: rate,
            chunks_per_request: n,
            cpu_per_request_s: k * (1.0 - idle_share) / rate,
        }
    }

    #[test]
    fn a_client_that_fills_gives_its_costs_and_saturation_back() {
        let truth = (1.2e-3, 5e-6, 1.0e-3);
        let s = [
            filling_at(50.0, 20.0, truth, 1),
            filling_at(100.0, 20.0, truth, 1),
            filling_at(50.0, 200.0, truth, 1),
            filling_at(100.0, 200.0, truth, 1),
        ];
        // The CPU a request falls with the load: 3.2 ms a request on idle cores.
        assert!(s[3].cpu_per_request_s < s[2].cpu_per_request_s);
        let f = FillingCosts::fit(&s, 1).unwrap();
        assert!((f.per_request_s - 1.2e-3).abs() < 1e-9, "{f:?}");
        assert!((f.per_chunk_s - 5e-6).abs() < 1e-12, "{f:?}");
        assert!((f.idle_s - 1.0e-3).abs() < 1e-9, "{f:?}");
        // The law solved for the load gives each audit back.
        for x in &s {
            let back = f.request_s(x.chunks_per_request, x.rate_per_s);
            assert!((back - x.cpu_per_request_s).abs() < 1e-12, "{back} {x:?}");
        }
        // Never idle: one core over 2.2 ms a request.
        assert!((f.saturation_per_s(200.0) - 1.0 / 2.2e-3).abs() < 1e-6);
        // The plane with a part per second reads the same two rates as a fall with 1 / r,
        // and puts the saturation lower: the cores left after that part, over the cost the
        // audits measured with most of their requests finding the cores idle.
        let plane = LoopCosts::fit(&s).unwrap();
        assert!(
            plane.saturation_per_s(200.0, 1) < 0.85 * f.saturation_per_s(200.0),
            "{plane:?}"
        );
        // On two cores, a process of them each (the machine's bound) likewise.
        let two = [50.0, 100.0, 150.0].map(|r| filling_at(r, 200.0, truth, 2));
        let short = filling_at(100.0, 20.0, truth, 2);
        let f2 = FillingCosts::fit(&[short, two[0], two[1], two[2]], 2).unwrap();
        assert!(
            (f2.saturation_per_s(200.0) - 2.0 / 2.2e-3).abs() < 1e-6,
            "{f2:?}"
        );
    }

    #[test]
    fn a_client_whose_cost_rises_with_the_load_does_not_fill() {
        // 10 % more a request at twice the rate: no idle part below zero is taken.
        let s = [
            sample_at(50.0, 20.0, 1.5e-3),
            sample_at(100.0, 20.0, 1.65e-3),
            sample_at(50.0, 200.0, 3.0e-3),
            sample_at(100.0, 200.0, 3.3e-3),
        ];
        let e = FillingCosts::fit(&s, 1).unwrap_err().to_string();
        assert!(e.contains("does not fall as the cores fill"), "{e}");
        // One rate cannot tell a fall with the load from none.
        let e = FillingCosts::fit(&[s[0], s[2], s[2]], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("differ in rate"), "{e}");
    }

    fn sample_at(rate: f64, n: f64, cpu: f64) -> CostSample {
        CostSample {
            rate_per_s: rate,
            chunks_per_request: n,
            cpu_per_request_s: cpu,
        }
    }

    #[test]
    fn three_audits_give_the_plane_back() {
        let truth = (0.05, 1.2e-3, 10e-6);
        let s = [
            at(50.0, 20.0, truth),
            at(100.0, 20.0, truth),
            at(50.0, 200.0, truth),
        ];
        let c = LoopCosts::fit(&s).unwrap();
        assert!((c.per_second - 0.05).abs() < 1e-9, "{c:?}");
        assert!((c.per_request_s - 1.2e-3).abs() < 1e-9, "{c:?}");
        assert!((c.per_chunk_s - 10e-6).abs() < 1e-12, "{c:?}");
        // One rate would have read the 1 ms a request the part per second costs at 50 req/s
        // as a cost of each request.
        let one_rate = LoopCosts::split(s[0], s[2]).unwrap();
        assert!(
            (one_rate.per_request_s - 2.2e-3).abs() < 1e-9,
            "{one_rate:?}"
        );
        // What is left of two cores after 0.05, over 3.2 ms a request.
        assert!((c.saturation_per_s(200.0, 2) - 1.95 / 3.2e-3).abs() < 1e-6);
        // Four audits, least squares: an exact plane stays exact.
        let mut four = s.to_vec();
        four.push(at(100.0, 200.0, truth));
        let c4 = LoopCosts::fit(&four).unwrap();
        assert!((c4.per_request_s - 1.2e-3).abs() < 1e-9, "{c4:?}");
    }

    #[test]
    fn a_plane_below_zero_per_second_falls_back_to_the_origin() {
        // A client whose CPU a request falls with the rate (it batches) has a negative
        // part per second: the fit leaves it at zero.
        let s = [
            at(50.0, 20.0, (-0.02, 1e-3, 10e-6)),
            at(100.0, 20.0, (-0.02, 1e-3, 10e-6)),
            at(50.0, 200.0, (-0.02, 1e-3, 10e-6)),
        ];
        let c = LoopCosts::fit(&s).unwrap();
        assert_eq!(c.per_second, 0.0);
        assert!(c.per_request_s > 0.0 && c.per_chunk_s > 0.0, "{c:?}");
    }

    #[test]
    fn audits_that_cannot_be_fitted_are_refused() {
        let truth = (0.05, 1.2e-3, 10e-6);
        // One rate only, or one length only.
        assert!(
            LoopCosts::fit(&[
                at(50.0, 20.0, truth),
                at(60.0, 20.0, truth),
                at(50.0, 200.0, truth)
            ])
            .is_err()
        );
        assert!(
            LoopCosts::fit(&[
                at(50.0, 20.0, truth),
                at(100.0, 20.0, truth),
                at(50.0, 30.0, truth)
            ])
            .is_err()
        );
        // Two audits, or one that measured nothing.
        assert!(LoopCosts::fit(&[at(50.0, 20.0, truth), at(100.0, 200.0, truth)]).is_err());
        let mut none = at(50.0, 200.0, truth);
        none.cpu_per_request_s = 0.0;
        assert!(LoopCosts::fit(&[at(50.0, 20.0, truth), at(100.0, 20.0, truth), none]).is_err());
        // Longer requests that cost less.
        assert!(
            LoopCosts::fit(&[
                at(50.0, 20.0, truth),
                at(100.0, 20.0, truth),
                at(50.0, 200.0, (0.05, 1.2e-3, -1e-6))
            ])
            .is_err()
        );
    }

    #[test]
    fn two_lengths_give_the_line_back() {
        // a = 1.94 ms, b = 11.6 us: 20 chunks cost 2.172 ms, 200 cost 4.26 ms.
        let (a, b) = (1.94e-3, 11.6e-6);
        let c = LoopCosts::split(sample(200.0, a + 200.0 * b), sample(20.0, a + 20.0 * b)).unwrap();
        assert!((c.per_request_s - a).abs() < 1e-12, "{c:?}");
        assert!((c.per_chunk_s - b).abs() < 1e-15, "{c:?}");
        assert!((c.request_s(100.0) - (a + 100.0 * b)).abs() < 1e-12);
        assert!((c.saturation_per_s(200.0, 2) - 2.0 / (a + 200.0 * b)).abs() < 1e-9);
    }

    #[test]
    fn audits_that_cannot_be_split_are_refused() {
        // Too close in length.
        assert!(LoopCosts::split(sample(150.0, 3e-3), sample(200.0, 4e-3)).is_err());
        // The longer requests cost less: the audits disagree.
        assert!(LoopCosts::split(sample(20.0, 3e-3), sample(200.0, 2e-3)).is_err());
        // A negative fixed part.
        assert!(LoopCosts::split(sample(20.0, 0.1e-3), sample(200.0, 4e-3)).is_err());
        // Nothing measured.
        assert!(LoopCosts::split(sample(20.0, 0.0), sample(200.0, 4e-3)).is_err());
        assert!(LoopCosts::split(sample(20.0, f64::NAN), sample(200.0, 4e-3)).is_err());
    }

    /// Readings made with one lateness give it back, however many gaps each had; the rate
    /// sent and the rate held follow from it.
    #[test]
    fn a_lateness_each_gap_is_read_back_from_the_rates() {
        let late = 1e-3;
        let reading = |offered: f64, gaps: u64| GapReading {
            offered_per_s: offered,
            achieved_per_s: 1.0 / (1.0 / offered + late),
            gaps,
            drawn_mean_gap_s: None,
        };
        let g = GapLateness::fit(&[
            reading(50.0, 999),
            reading(200.0, 3_999),
            reading(100.0, 10),
        ])
        .unwrap();
        assert!((g.late_s - late).abs() < 1e-12, "{g:?}");
        assert_eq!(g.audits, 3);
        // Asked for 200 a second (5 ms gaps), it sends one every 6 ms.
        assert!((g.achieved_per_s(200.0) - 1.0 / 6e-3).abs() < 1e-9);
        // 95 % sent where the lateness is 1/19 of the gap asked for: 1000 / 19 a second.
        assert!((g.held_per_s(0.95).unwrap() - 1000.0 / 19.0).abs() < 1e-9);
        // Check: at that rate exactly 95 % is sent.
        assert!((g.achieved_per_s(1000.0 / 19.0) / (1000.0 / 19.0) - 0.95).abs() < 1e-12);
        // Nothing to read from: refused; a lateness within the draws' spread holds no limit.
        assert!(GapLateness::fit(&[]).is_err());
        assert!(
            GapLateness::fit(&[GapReading {
                gaps: 0,
                ..reading(50.0, 1)
            }])
            .is_err()
        );
        let early = GapLateness::fit(&[GapReading {
            offered_per_s: 50.0,
            achieved_per_s: 51.0,
            gaps: 999,
            drawn_mean_gap_s: None,
        }])
        .unwrap();
        assert!(early.late_s < 0.0 && !early.is_measured());
        assert_eq!(early.held_per_s(0.95), None);
        assert_eq!(early.achieved_per_s(50.0), 50.0);
    }

    /// Read net of the draws replayed: r49's series, whose four audits drew mean gaps of
    /// 20.876 ms (at 50 req/s, twice) and 9.816 ms (100 req/s, twice) and sent 45.8, 93.7,
    /// 45.8 and 92.6 req/s. Net of the draws each is late 0.955, 0.853, 0.960 and 0.983 ms;
    /// the lateness is their mean, 0.938 ms, and its error their scatter (0.0578 ms) over
    /// the square root of four, times Student's 3.182 for three degrees of freedom over
    /// 1.96: 0.0469 ms, against 0.15 ms from the draws' spread. With the draws of one
    /// audit only, or none, the lateness is read as before.
    #[test]
    fn a_lateness_net_of_replayed_draws_is_their_mean_and_scatter() {
        let nets = [0.955e-3, 0.853e-3, 0.960e-3, 0.983e-3];
        let drawn = [20.876e-3, 9.816e-3, 20.876e-3, 9.816e-3];
        let rates = [50.0, 100.0, 50.0, 100.0];
        let readings: Vec<GapReading> = (0..4)
            .map(|i| GapReading {
                offered_per_s: rates[i],
                achieved_per_s: 1.0 / (drawn[i] + nets[i]),
                gaps: (rates[i] * 20.0) as u64 - 1,
                drawn_mean_gap_s: Some(drawn[i]),
            })
            .collect();
        let g = GapLateness::fit(&readings).unwrap();
        assert!(g.net_of_draws && g.audits == 4, "{g:?}");
        let mean = nets.iter().sum::<f64>() / 4.0;
        let scatter = (nets.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert!((g.late_s - mean).abs() < 1e-12, "{g:?}");
        assert!((g.late_s - 0.93775e-3).abs() < 1e-9);
        let error = scatter / 2.0 * 3.182446 / 1.96;
        assert!((g.stderr_s - error).abs() < 1e-6 * error, "{g:?} {error}");
        assert!((g.stderr_s - 0.0469e-3).abs() < 0.0001e-3, "{g:?}");
        // One reading without its draws: read from the draws' spread, as before.
        let mut some = readings.clone();
        some[1].drawn_mean_gap_s = None;
        let plain = GapLateness::fit(&some).unwrap();
        let none: Vec<GapReading> = readings
            .iter()
            .map(|r| GapReading {
                drawn_mean_gap_s: None,
                ..*r
            })
            .collect();
        assert_eq!(plain, GapLateness::fit(&none).unwrap());
        assert!(
            !plain.net_of_draws && plain.stderr_s > 2.0 * g.stderr_s,
            "{plain:?}"
        );
        // One audit's draws alone give no scatter: as before too.
        let one = GapLateness::fit(&readings[..1]).unwrap();
        assert!(!one.net_of_draws, "{one:?}");
    }

    /// A second method: a tool's gaps drawn as SGLang's bench draws them (exponential, each
    /// late by a fixed part) over audits of different lengths. The fit lands within three of
    /// its standard errors of the lateness drawn, and its standard error is the spread of
    /// the fits over many such sittings (within a fifth: 200 sittings read it to about 5 %).
    #[test]
    fn the_lateness_read_from_drawn_gaps_is_within_its_standard_error() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Exp};
        let late = 1e-3;
        let mut rng = crate::sample::SimRng::seed_from_u64(7);
        let mut fits = Vec::new();
        for _ in 0..200 {
            let readings: Vec<GapReading> = [(50.0, 1_000u64), (100.0, 2_000), (200.0, 4_000)]
                .iter()
                .map(|&(rate, gaps)| {
                    let exp = Exp::new(rate).unwrap();
                    let span: f64 = (0..gaps).map(|_| exp.sample(&mut rng) + late).sum();
                    GapReading {
                        offered_per_s: rate,
                        achieved_per_s: gaps as f64 / span,
                        gaps,
                        drawn_mean_gap_s: None,
                    }
                })
                .collect();
            fits.push(GapLateness::fit(&readings).unwrap());
        }
        let n = fits.len() as f64;
        let mean = fits.iter().map(|g| g.late_s).sum::<f64>() / n;
        let sd = (fits.iter().map(|g| (g.late_s - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let stderr = fits.iter().map(|g| g.stderr_s).sum::<f64>() / n;
        assert!(
            (mean - late).abs() < 3.0 * stderr / n.sqrt(),
            "{mean} {stderr}"
        );
        assert!(
            (sd / stderr - 1.0).abs() < 0.2,
            "spread {sd}, stderr {stderr}"
        );
        assert!(fits.iter().all(GapLateness::is_measured));
    }

    /// The chance a run holds 95 %, against sittings drawn as SGLang's bench draws them,
    /// and the length it takes against the normal approximation of the draws' mean.
    #[test]
    fn whether_a_short_run_holds_is_a_chance_over_its_draws() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Exp};
        // 1.22 ms a gap: 95 % held up to 43.1 req/s.
        let g = GapLateness {
            late_s: 1.22e-3,
            stderr_s: 0.1e-3,
            audits: 4,
            net_of_draws: false,
        };
        let limit = g.held_per_s(0.95).unwrap();
        assert!((limit - 43.14).abs() < 0.01, "{limit}");
        let mut rng = crate::sample::SimRng::seed_from_u64(11);
        let sittings = 4_000;
        for (rate, gaps) in [(34.0, 339u64), (39.0, 389), (25.0, 2_000), (60.0, 599)] {
            let exp = Exp::new(rate).unwrap();
            let held = (0..sittings)
                .filter(|_| {
                    let span: f64 = (0..gaps).map(|_| exp.sample(&mut rng) + g.late_s).sum();
                    gaps as f64 / span >= 0.95 * rate
                })
                .count() as f64
                / f64::from(sittings);
            let p = g.held_chance(rate, gaps, 0.95);
            assert_share_drawn(p, held, f64::from(sittings), &format!("{rate}/s x {gaps}"));
        }
        // Ten seconds a step is a coin toss near the limit: 34 and 39 req/s hold with
        // chance 0.5-0.65, and a run just below the limit barely more than a half.
        assert!((0.5..0.65).contains(&g.held_chance(34.0, 339, 0.95)));
        assert!((0.5..0.6).contains(&g.held_chance(39.0, 389, 0.95)));
        assert!((g.held_chance(limit, 1_000_000, 0.95) - 0.5).abs() < 0.01);
        assert!(g.held_chance(200.0, 2_000, 0.95) < 1e-9);
        // The length that makes 0.85 of the limit 95 % sure. The draws' mean is normal
        // to a good approximation this long: relative spread 1 / sqrt(n) against the
        // margin 1/0.95 - 1 - rate * late, so n near (1.645 / margin)^2.
        let rate = 0.85 * limit;
        let n = g.gaps_to_hold(rate, 0.95, 0.95).unwrap();
        let margin = 1.0 / 0.95 - 1.0 - rate * g.late_s;
        let normal = (1.644_853_6 / margin).powi(2);
        assert!(
            (n as f64 / normal - 1.0).abs() < 0.05,
            "{n} against {normal}"
        );
        assert!(g.held_chance(rate, n, 0.95) >= 0.95);
        assert!(g.held_chance(rate, n - 1, 0.95) < 0.95);
        // At the limit and above no length makes it sure.
        assert_eq!(g.gaps_to_hold(limit * 1.01, 0.95, 0.95), None);
        // No rate asked, or none sensible: no chance, and nothing panics.
        for rate in [0.0, -1.0, f64::NAN, f64::MIN_POSITIVE / 4.0] {
            assert_eq!(g.held_chance(rate, 100, 0.95), 0.0, "{rate}");
        }
    }

    /// One walk up `steps` steps by the rule, each step holding where `holds(k)` says: the
    /// reading (0 for none, k + 1 for step k) and whether it stopped (two short in a row).
    /// The tests' own walk, written apart from [`KneeWalk::of_chances`].
    fn walk_once(steps: usize, mut holds: impl FnMut(usize) -> bool) -> (usize, bool) {
        let (mut best, mut shorts) = (0usize, 0);
        for k in 0..steps {
            if holds(k) {
                (best, shorts) = (k + 1, 0);
            } else {
                shorts += 1;
                if shorts == 2 {
                    return (best, true);
                }
            }
        }
        (best, false)
    }

    /// Every outcome of `walk` (none, each step, walking on) against the shares of
    /// `sittings` walks drawn, each within four binomial standard errors.
    fn assert_walks_drawn(walk: &KneeWalk, drawn: &[(usize, bool)]) {
        let sittings = drawn.len() as f64;
        let mut counts = vec![0u32; walk.highest.len() + 1];
        for (best, _) in drawn {
            counts[*best] += 1;
        }
        let went_on = drawn.iter().filter(|(_, stopped)| !stopped).count() as f64;
        let computed = std::iter::once(walk.none).chain(walk.highest.iter().copied());
        let shares = counts.iter().map(|c| f64::from(*c) / sittings);
        for (k, (p, share)) in computed
            .chain([walk.walking_on])
            .zip(shares.chain([went_on / sittings]))
            .enumerate()
        {
            assert_share_drawn(p, share, sittings, &format!("outcome {k}"));
        }
    }

    /// A chance `p` computed against the share of `draws` draws that came out so: within
    /// four binomial standard errors, and a hair more for chances of 0 and 1.
    fn assert_share_drawn(p: f64, share: f64, draws: f64, what: &str) {
        let tolerance = 4.0 * (p * (1.0 - p) / draws).sqrt() + 1e-9;
        assert!(
            (p - share).abs() <= tolerance,
            "{what}: computed {p}, drawn {share}"
        );
    }

    #[test]
    fn a_walk_up_short_steps_reads_its_draws_as_much_as_the_limit() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Gamma};
        let g = GapLateness {
            late_s: 1.22e-3,
            stderr_s: 0.1e-3,
            audits: 4,
            net_of_draws: false,
        };
        // Ten-second steps at 0.8 to 1.5 of the 43 req/s limit, as `run.sh` walks them.
        let steps: Vec<(f64, u64)> = [34.0, 39.0, 43.0, 47.0, 52.0, 58.0, 64.0]
            .iter()
            .map(|&r| (r, (r * 10.0) as u64 - 1))
            .collect();
        let walk = g.knee_walk(&steps, 0.95, 2);
        let total = walk.none + walk.highest.iter().sum::<f64>();
        assert!((total - 1.0).abs() < 1e-12, "{walk:?}");
        // A second method: the walk drawn, each step's gaps a gamma sum of its own.
        let mut rng = crate::sample::SimRng::seed_from_u64(5);
        let drawn: Vec<(usize, bool)> = (0..20_000)
            .map(|_| {
                walk_once(steps.len(), |k| {
                    let (rate, gaps) = steps[k];
                    let sum = Gamma::new(gaps as f64, 1.0 / rate)
                        .unwrap()
                        .sample(&mut rng);
                    gaps as f64 / (sum + gaps as f64 * g.late_s) >= 0.95 * rate
                })
            })
            .collect();
        assert_walks_drawn(&walk, &drawn);
        // What it shows: no reading is likely. Every outcome from none to the top step has
        // a chance between 5 and 30 %, and 1.5 times the limit is read about as often as
        // the limit itself.
        for p in std::iter::once(walk.none).chain(walk.highest.iter().copied()) {
            assert!((0.05..0.3).contains(&p), "{walk:?}");
        }
        // Closed cases. One step: its own chance. Steps far below the limit all hold, and
        // the walk goes on; far above, none holds and it stops after two.
        let one = g.knee_walk(&steps[..1], 0.95, 2);
        let p = g.held_chance(34.0, 339, 0.95);
        assert!((one.highest[0] - p).abs() < 1e-12 && (one.none - (1.0 - p)).abs() < 1e-12);
        assert!((one.walking_on - 1.0).abs() < 1e-12);
        let low = g.knee_walk(&[(5.0, 5_000), (6.0, 6_000), (7.0, 7_000)], 0.95, 2);
        assert!(low.highest[2] > 0.999 && low.walking_on > 0.999, "{low:?}");
        let high = g.knee_walk(&[(200.0, 2_000), (300.0, 3_000), (5.0, 5_000)], 0.95, 2);
        assert!(high.none > 0.999 && high.walking_on < 1e-6, "{high:?}");
        // Steps known to hold or not: the one reading, with chance 1. Held, short, held,
        // short, short (stopped), held: the third step, and not the sixth past the stop.
        let known = KneeWalk::of_chances(&[1.0, 0.0, 1.0, 0.0, 0.0, 1.0], 2);
        assert_eq!(known.highest[2], 1.0, "{known:?}");
        assert_eq!((known.likeliest(), known.walking_on), (Some(2), 0.0));
        let none = KneeWalk::of_chances(&[0.0, 0.0, 1.0], 2);
        assert_eq!((none.none, none.likeliest()), (1.0, None));
        assert!((walk.at_most(None) - walk.none).abs() < 1e-12);
        assert!((walk.at_most(Some(steps.len() - 1)) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_walk_over_the_latenesss_error_is_the_walk_drawn_at_a_drawn_lateness() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Gamma, Normal};
        // r48's SGLang series: 0.79 ms late, within 0.15 ms; its steps 0.8 to 1.5 of the
        // 67 req/s limit, ten seconds each.
        let g = GapLateness {
            late_s: 0.79e-3,
            stderr_s: 0.15e-3,
            audits: 2,
            net_of_draws: false,
        };
        let steps: Vec<(f64, u64)> = [54.0, 60.0, 67.0, 74.0, 80.0, 90.0, 100.0]
            .iter()
            .map(|&r| (r, (r * 10.0) as u64 - 1))
            .collect();
        let walk = g.knee_walk_over_error(&steps, 0.95, 2);
        let total = walk.none + walk.highest.iter().sum::<f64>();
        assert!((total - 1.0).abs() < 1e-12, "{walk:?}");
        // A second method: each walk draws its lateness, then each step's gaps.
        let mut rng = crate::sample::SimRng::seed_from_u64(11);
        let lateness = Normal::new(g.late_s, g.stderr_s).unwrap();
        let drawn: Vec<(usize, bool)> = (0..20_000)
            .map(|_| {
                let late = lateness.sample(&mut rng).max(0.0);
                walk_once(steps.len(), |k| {
                    let (rate, gaps) = steps[k];
                    let sum = Gamma::new(gaps as f64, 1.0 / rate)
                        .unwrap()
                        .sample(&mut rng);
                    gaps as f64 / (sum + gaps as f64 * late) >= 0.95 * rate
                })
            })
            .collect();
        assert_walks_drawn(&walk, &drawn);
        // What it shows: at ten-second steps the draws, not the lateness's error, make the
        // spread. The error moves a little mass to the ends (no step held, the walk still
        // going past the last step: 17.9 and 14.5 % with the lateness known, 18.6 and
        // 18.1 % over its error), and none of the readings by more than four points.
        let known = g.knee_walk(&steps, 0.95, 2);
        assert!(walk.none > known.none, "{walk:?} {known:?}");
        assert!(
            walk.walking_on > known.walking_on + 0.02,
            "{walk:?} {known:?}"
        );
        for (a, b) in walk.highest.iter().zip(&known.highest) {
            assert!((a - b).abs() < 0.04, "{walk:?} {known:?}");
        }
        // Within 15 % of the 66.6 req/s limit: the steps at 60, 67 and 74 req/s (+11, -1
        // and -10 %; 54 and 80 are +23 and -17 %).
        let rates: Vec<f64> = steps.iter().map(|s| s.0).collect();
        let limit = g.held_per_s(0.95).unwrap();
        let within = walk.chance_within(&rates, limit, 0.15);
        assert!((within - walk.highest[1..4].iter().sum::<f64>()).abs() < 1e-12);
        // A limit no step is near: no chance, written as 0 (not an empty sum's -0).
        let none = walk.chance_within(&rates, 500.0, 0.15);
        assert!(none == 0.0 && none.is_sign_positive(), "{none}");
        // Longer steps shrink the draws' part but not the lateness's error. With the
        // lateness known, steps a thousand times as long read within the band surely; over
        // its error the walk becomes a step in the lateness, reading within the band where
        // the true limit lies in [60, 80) req/s: the lateness in (0.658, 0.877] ms,
        // Phi(0.581) - Phi(-0.881) = 0.530 of the normal. The grid of tenths of an error
        // places each of that step's two edges within half a point, 0.05 x phi(z) of
        // chance at most (0.017 and 0.014), so 0.031 either way.
        let longer = |times: u64| -> Vec<(f64, u64)> {
            steps.iter().map(|&(r, n)| (r, n * times)).collect()
        };
        let sure = g.knee_walk(&longer(1_000), 0.95, 2);
        assert!(sure.chance_within(&rates, limit, 0.15) > 0.999, "{sure:?}");
        let capped = g
            .knee_walk_over_error(&longer(10_000), 0.95, 2)
            .chance_within(&rates, limit, 0.15);
        assert!((capped - 0.530).abs() < 0.031, "{capped}");
        // No error: the walk at the lateness read.
        let exact = GapLateness { stderr_s: 0.0, ..g };
        assert_eq!(
            exact.knee_walk_over_error(&steps, 0.95, 2),
            exact.knee_walk(&steps, 0.95, 2)
        );
        // The limit's range: (1 / 0.95 - 1) / (0.79 ms +- 1.96 x 0.15 ms) = 48.3 and 106.2.
        let (low, high) = g.held_range_per_s(0.95, 1.96).expect("measured");
        let room = 1.0 / 0.95 - 1.0;
        assert!((low - room / 1.084e-3).abs() < 1e-9, "{low}");
        assert!(
            (high.expect("bounded") - room / 0.496e-3).abs() < 1e-9,
            "{high:?}"
        );
        assert!(low < limit && limit < high.unwrap());
        // An error above a third of the lateness leaves the upper end open at three errors
        // (at two, a lateness measured at all has a bounded range).
        let loose = GapLateness {
            stderr_s: 0.3e-3,
            ..g
        };
        assert_eq!(loose.held_range_per_s(0.95, 3.0).map(|r| r.1), Some(None));
        assert_eq!(
            GapLateness { late_s: 0.0, ..g }.held_range_per_s(0.95, 1.96),
            None
        );
    }

    #[test]
    fn a_walk_given_its_draws_is_the_lateness_cut_at_each_steps_threshold() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let g = GapLateness {
            late_s: 0.86e-3,
            stderr_s: 0.15e-3,
            audits: 4,
            net_of_draws: false,
        };
        // Two steps: 50 req/s drawing 19.6 ms a gap, 60 drawing 16.5 ms. At 95 % they hold
        // while the lateness is at most 1 / 47.5 - 0.0196 = 1.453 ms and 1 / 57 - 0.0165 =
        // 1.044 ms. So the walk reads 60 where the lateness is at most 1.044 ms, 50 from
        // there to 1.453, and none above: Phi(1.227), Phi(3.953) - Phi(1.227), the rest.
        let two = g.knee_walk_given_draws(&[(50.0, 0.0196), (60.0, 0.0165)], 0.95, 2);
        let t60 = 1.0 / 57.0 - 0.0165;
        let t50 = 1.0 / 47.5 - 0.0196;
        let phi = |t: f64| crate::service::normal_cdf((t - g.late_s) / g.stderr_s);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(two.highest[1], phi(t60)), "{two:?}");
        assert!(close(two.highest[0], phi(t50) - phi(t60)), "{two:?}");
        assert!(close(two.none, 1.0 - phi(t50)), "{two:?}");
        // It stops only where both fall short (two in a row), that is where none held.
        assert!(close(two.walking_on, 1.0 - two.none), "{two:?}");
        // Each step alone holds with the lateness's normal below its threshold.
        assert!(close(
            g.held_chance_given_draws(60.0, 0.0165, 0.95),
            phi(t60)
        ));
        assert!(close(
            g.held_chance_given_draws(50.0, 0.0196, 0.95),
            phi(t50)
        ));
        // Draws already slower than the rate asked leave no lateness it could hold at.
        assert_eq!(g.held_chance_given_draws(60.0, 0.018, 0.95), 0.0);
        // No error: the one reading the lateness makes.
        let exact = GapLateness { stderr_s: 0.0, ..g };
        let one = exact.knee_walk_given_draws(&[(50.0, 0.0196), (60.0, 0.0165)], 0.95, 2);
        assert_eq!((one.likeliest(), one.highest[1]), (Some(1), 1.0));
        assert_eq!(exact.held_chance_given_draws(60.0, 0.0165, 0.95), 1.0);
        let later = GapLateness {
            late_s: 1.1e-3,
            ..exact
        };
        assert_eq!(later.held_chance_given_draws(60.0, 0.0165, 0.95), 0.0);
        // A second method: lateness drawn, each walk by the rule, for r49's seven steps
        // (their draws as a seed might give them: 2 % either side of the mean asked).
        let steps: Vec<(f64, f64)> = [49.0, 55.0, 61.0, 67.0, 73.0, 82.0, 92.0]
            .iter()
            .zip([1.02, 0.99, 0.98, 1.01, 0.985, 1.0, 0.995])
            .map(|(&r, stray)| (r, stray / r))
            .collect();
        let walk = g.knee_walk_given_draws(&steps, 0.95, 2);
        let total = walk.none + walk.highest.iter().sum::<f64>();
        assert!((total - 1.0).abs() < 1e-12, "{walk:?}");
        let mut rng = crate::sample::SimRng::seed_from_u64(3);
        let lateness = Normal::new(g.late_s, g.stderr_s).unwrap();
        let drawn: Vec<(usize, bool)> = (0..100_000)
            .map(|_| {
                let late = lateness.sample(&mut rng).max(0.0);
                walk_once(steps.len(), |k| {
                    let (rate, drawn) = steps[k];
                    1.0 / (drawn + late) >= 0.95 * rate
                })
            })
            .collect();
        assert_walks_drawn(&walk, &drawn);
        // Each step's chance given its draws against the share of drawn latenesses at
        // which it sends 95 % (4 binomial standard errors).
        let latenesses: Vec<f64> = (0..100_000)
            .map(|_| lateness.sample(&mut rng).max(0.0))
            .collect();
        for &(rate, mean) in &steps {
            let p = g.held_chance_given_draws(rate, mean, 0.95);
            let n = latenesses.len() as f64;
            let held = latenesses
                .iter()
                .filter(|&&late| 1.0 / (mean + late) >= 0.95 * rate)
                .count() as f64
                / n;
            assert_share_drawn(p, held, n, &format!("{rate} req/s"));
        }
        // The draws known, the reading is far surer than over the draws a seed may give:
        // its likeliest reading carries more than a third of the chance.
        let likeliest = walk.likeliest().map_or(walk.none, |k| walk.highest[k]);
        assert!(likeliest > 0.35, "{walk:?}");
    }

    #[test]
    fn the_clock_and_the_latency_shape_read_as_they_print() {
        for c in [ClockStart::Intended, ClockStart::OwnSend] {
            assert_eq!(c.to_string().parse::<ClockStart>().unwrap(), c);
        }
        assert!("send".parse::<ClockStart>().is_err());
        for l in [LatencyShape::Constant, LatencyShape::Drawn] {
            assert_eq!(l.to_string().parse::<LatencyShape>().unwrap(), l);
        }
        assert!("exponential".parse::<LatencyShape>().is_err());
    }
}
