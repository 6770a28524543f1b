//! What a benchmark client reports when its own loop is the only delay, found by running
//! that loop: the simulator's client with a send job, a job per streamed chunk and a
//! finish job, in front of a server that answers at once. The costs come from an audit
//! ([`LoopCosts`]); the clock starts where the tool starts it ([`ClockStart`]) and stops
//! where it stamps a chunk (after its loop processed it, or at its arrival).
//!
//! A request's fixed cost is split between its send job (the part before it leaves) and
//! its finish job; the share before the send is the one thing an audit cannot see from
//! the CPU alone, so [`fit_before_send`] finds it on one audit, and the others are
//! predicted with it. The send and finish jobs may run in slices, with the jobs queued
//! meanwhile between them, as an asyncio loop runs a request's callbacks; [`fit_loop`]
//! fits the slice on the audit's p99 with the share.

use heisenbench_model::ModelError;
use heisenbench_model::client_loop::{
    AuditedLoad, ClockStart, CoreWait, CostSample, FillingCosts, LatencyShape, LoopCosts,
    LoopPrediction,
};
use heisenbench_model::scenario::{
    Arrivals, ClientModel, EventCosts, Lengths, Policy, Stamp, Stop, Workload,
};
use heisenbench_model::server::ServerModel;
use heisenbench_model::service::Service;
use heisenbench_model::stats::Recorder;

use crate::engine::Simulation;
use crate::scenario::SimScenario;

/// Requests simulated per prediction: enough that the p99 rests on 200 of them, few enough
/// that a fit of 21 shares takes seconds.
const REQUESTS: u64 = 20_000;
/// Events one prediction may take (requests times chunks).
const EVENTS: u64 = 6_000_000;

/// The load an audit put on the client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopLoad {
    /// Requests per second (the rate the server saw).
    pub rate_per_s: f64,
    /// Chunks per request.
    pub chunks_per_request: u32,
    /// The client's loops; requests are dealt to them at random.
    pub loops: u32,
    /// When the client stamps a chunk.
    pub stamp: Stamp,
    /// The mean wait for a core of the loop woken by work, seconds (exponential; 0: a core
    /// at once).
    pub wake_wait_s: f64,
    /// How often the loop loses its core while it has work, times a second of its CPU,
    /// each time waiting `wake_wait_s` on average (0: never).
    pub preempt_per_cpu_s: f64,
    /// The squared coefficient of variation of the gaps between requests: gamma renewal
    /// arrivals with it (None: Poisson). A tool's pacing is what it is, and the server's
    /// view of it is what the loop was given.
    pub arrival_scv: Option<f64>,
    /// The seed of the arrivals.
    pub seed: u64,
}

/// The scenario of `costs` at `load`, `before_send` of a request's fixed cost in its send
/// job and the rest in its finish job.
///
/// A request's work varies as `costs.request_scv` says; the variance sits in its fixed part
/// (the send and finish jobs, lognormal: a request's own path, where a Python client
/// allocates, collects garbage and builds JSON), shared between them in proportion to
/// their squared means so that both have one SCV. The chunk jobs are constant.
fn scenario(
    costs: &LoopCosts,
    before_send: f64,
    slice_s: Option<f64>,
    load: &LoopLoad,
) -> SimScenario {
    let chunks = load.chunks_per_request.max(1);
    let a = costs.per_request_s;
    let whole = costs.request_s(f64::from(chunks));
    let squares = before_send.powi(2) + (1.0 - before_send).powi(2);
    let fixed_scv = if a > 0.0 && costs.request_scv > 0.0 {
        costs.request_scv * whole * whole / (a * a * squares)
    } else {
        0.0
    };
    let job = |s: f64, scv: f64| {
        (s > 0.0).then_some(if scv > 0.0 {
            Service::Lognormal { mean_s: s, scv }
        } else {
            Service::Deterministic { mean_s: s }
        })
    };
    let requests = REQUESTS.min(EVENTS / (u64::from(chunks) + 2)).max(1_000);
    SimScenario {
        name: "a client's loop".into(),
        seed: load.seed,
        workload: Workload {
            arrivals: match load.arrival_scv {
                // The shape's bounds, 1e-6 to 1e6, hold whatever gaps were read.
                Some(scv) if scv.is_finite() && scv > 0.0 => Arrivals::Gamma {
                    rate_per_s: load.rate_per_s,
                    shape: (1.0 / scv).clamp(1e-3, 1e3),
                },
                _ => Arrivals::Poisson {
                    rate_per_s: load.rate_per_s,
                },
            },
            stop: Stop::Count { requests },
            input_tokens: Lengths::Fixed { tokens: 16 },
            output_tokens: Lengths::Fixed { tokens: chunks },
            prefix: None,
            dataset: None,
        },
        client: ClientModel {
            workers: load.loops.max(1),
            policy: Policy::Random,
            costs: EventCosts {
                send: job(a * before_send, fixed_scv),
                chunk: job(costs.per_chunk_s, 0.0),
                finish: job(a * (1.0 - before_send), fixed_scv),
                slice_s,
                wake: (load.wake_wait_s > 0.0).then_some(Service::Exponential {
                    mean_s: load.wake_wait_s,
                }),
                preempt_per_cpu_s: (load.preempt_per_cpu_s > 0.0).then_some(load.preempt_per_cpu_s),
            },
            stamp: load.stamp,
            max_in_flight_per_worker: None,
            timeout_s: None,
            send_shares_loop: true,
        },
        server: ServerModel {
            max_num_seqs: 1_000_000,
            max_waiting_queue_length: 1_000_000,
            ..ServerModel::default()
        },
        slo: None,
    }
}

/// What the client would report at `load` with `costs`, `before_send` (0 to 1) of each
/// request's fixed cost before it leaves, and its clock at `clock`.
pub fn simulate(
    costs: &LoopCosts,
    before_send: f64,
    slice_s: Option<f64>,
    clock: ClockStart,
    load: &LoopLoad,
) -> Result<LoopPrediction, ModelError> {
    if !(0.0..=1.0).contains(&before_send) {
        return Err(ModelError::invalid(
            "before_send",
            before_send,
            "must be a share between 0 and 1",
        ));
    }
    let sc = scenario(costs, before_send, slice_s, load);
    sc.validate()?;
    let (r, [from_intended, from_send_start]) = Simulation::new(sc).run_keeping_ttfts();
    let loop_part = match clock {
        ClockStart::Intended => from_intended,
        // The simulator's actual send is the end of the send job; the tool's clock starts
        // at its beginning, so the send job is inside its TTFT.
        ClockStart::OwnSend => from_send_start,
    };
    let reported_s = quantiles(&loop_part, 0.0, 0.0);
    let chunks = f64::from(load.chunks_per_request.max(1));
    Ok(LoopPrediction {
        costs: *costs,
        before_send,
        before_send_from: String::new(),
        delay_s: 0.0,
        delay_spread: 0.0,
        latency_shape: LatencyShape::Constant,
        loop_part: Some(loop_part),
        slice_s,
        clock,
        stamp: load.stamp,
        loops: load.loops.max(1),
        rate_per_s: load.rate_per_s,
        chunks_per_request: chunks,
        reported_s,
        achieved_per_s: r.achieved_qps,
        saturation_per_s: costs.saturation_per_s(chunks, load.loops.max(1)),
        busiest: None,
        machine: None,
        filling: Vec::new(),
        filled_saturation_per_s: None,
        wake_wait_s: (load.wake_wait_s > 0.0).then_some(load.wake_wait_s),
        wake_wait_from: String::new(),
        wake_wait_law: None,
        preempt_per_cpu_s: (load.preempt_per_cpu_s > 0.0 && load.wake_wait_s > 0.0)
            .then_some(load.preempt_per_cpu_s),
        arrival_scv: load.arrival_scv,
        gap_lateness: None,
        paced_held_per_s: None,
        batched: None,
        batched_saturation_per_s: None,
    })
}

/// One audit a fit is made on: the load it put on the client's loop and the TTFT its tool
/// added (reported minus true: mean, p50, p90, p99; None where the tool reports none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitTarget {
    /// The audit's load.
    pub load: LoopLoad,
    /// The excess the tool reported.
    pub excess_s: [Option<f64>; 4],
}

/// The share of the fixed cost before the send (0, 0.05, ..., 1) and the latency beyond
/// the CPU (`delay_s`) whose simulation comes closest to what the audits in `targets`
/// measured: their mean and, where the tool reports one, their median TTFT excess; the
/// prediction returned is at the first target's load.
///
/// With medians, each share's delay is the mean of what its simulated medians fall short
/// of the measured ones (a latency every request pays moves the median as much as the
/// mean, and is the same at every rate), and the share is the one whose means then come
/// closest, as the root mean square of the relative misses. Without them, the share alone
/// is fitted to the means, and a delay only where even the whole fixed cost before the
/// send falls short of them.
///
/// CPU before the send and latency beyond it move the mean and the median alike, at one
/// rate and, less so, between two (the work queued is the same whichever job holds it);
/// what more audits add is that one share and one latency must hold at every load.
pub fn fit_before_send(
    costs: &LoopCosts,
    slice_s: Option<f64>,
    clock: ClockStart,
    targets: &[FitTarget],
) -> Result<LoopPrediction, ModelError> {
    fit_share(costs, slice_s, clock, targets).map(|mut fits| fits.swap_remove(0))
}

/// [`fit_before_send`]'s fit, predicted at every target's load, in order.
fn fit_share(
    costs: &LoopCosts,
    slice_s: Option<f64>,
    clock: ClockStart,
    targets: &[FitTarget],
) -> Result<Vec<LoopPrediction>, ModelError> {
    let means: Option<Vec<f64>> = targets.iter().map(|t| t.excess_s[0]).collect();
    let Some(means) = means.filter(|m| !m.is_empty()) else {
        return Err(ModelError::invalid(
            "cost split",
            "no reported mean TTFT",
            "the share of a request's cost before its send is fitted on the tool's reported mean TTFT",
        ));
    };
    let average = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let mut fits = Vec::with_capacity(21);
    for step in 0..=20 {
        let share = f64::from(step) / 20.0;
        let runs = targets
            .iter()
            .map(|t| simulate(costs, share, slice_s, clock, &t.load))
            .collect::<Result<Vec<_>, _>>()?;
        let short: Vec<f64> = targets
            .iter()
            .zip(&runs)
            .filter_map(|(t, p)| Some(t.excess_s[1]? - p.reported_s[1]))
            .collect();
        let delay = if short.is_empty() {
            0.0
        } else {
            average(&short).max(0.0)
        };
        fits.push(
            runs.into_iter()
                .map(|p| with_delay(p, delay, 0.0))
                .collect::<Vec<_>>(),
        );
    }
    // A latency and CPU before the send move the mean and the median alike at low load, so
    // shares whose means come within 5 % of the measured ones (or of the closest) are told
    // apart by parsimony: the one that needs the least latency the CPU does not explain.
    let miss = |runs: &Vec<LoopPrediction>| {
        let squares: Vec<f64> = runs
            .iter()
            .zip(&means)
            .map(|(p, m)| ((p.reported_s[0] - m) / m.abs().max(1e-9)).powi(2))
            .collect();
        average(&squares).sqrt()
    };
    let closest = fits.iter().map(miss).fold(f64::INFINITY, f64::min);
    let within = closest.max(0.05);
    let best = fits
        .into_iter()
        .filter(|runs| miss(runs) <= within)
        .min_by(|a, b| {
            a[0].delay_s
                .total_cmp(&b[0].delay_s)
                .then(miss(a).total_cmp(&miss(b)))
        });
    let best = best.expect("the closest share is within its own miss");
    let short: Vec<f64> = best
        .iter()
        .zip(&means)
        .map(|(p, m)| m - p.reported_s[0])
        .collect();
    let short = average(&short);
    let medians = targets.iter().any(|t| t.excess_s[1].is_some());
    Ok(if !medians && best[0].before_send >= 1.0 && short > 0.0 {
        best.into_iter()
            .map(|p| with_delay(p, short, 0.0))
            .collect()
    } else {
        best
    })
}

/// The slices a loop's send and finish jobs are tried at, seconds (`None`: whole).
const SLICES: [Option<f64>; 6] = [
    None,
    Some(2e-3),
    Some(1e-3),
    Some(5e-4),
    Some(2.5e-4),
    Some(1e-4),
];

/// The slice (whole, 2, 1, 0.5, 0.25 or 0.1 ms), the share before the send and the latency
/// beyond the CPU whose simulation comes closest to the audits in `targets`: per slice the
/// share and latency are fitted on the means and medians ([`fit_before_send`]). With a
/// constant latency (`shape`), the slice is then the one whose p99s come closest, as the
/// mean of the absolute log ratios: a whole job in a request's way lengthens the tail long
/// before it moves the mean. With a drawn one, the slice and the share of the latency drawn
/// for each request from an exponential (0 to 1 by tenths, the mean unchanged) are the pair
/// whose p50s, p90s and p99s come closest: a latency that differs from one request to the
/// next lowers the median and lengthens the tail at once, as a constant one cannot.
/// Without a positive p99 to fit on, jobs run whole and the latency is constant. The
/// prediction is at the first target's load.
pub fn fit_loop(
    costs: &LoopCosts,
    clock: ClockStart,
    shape: LatencyShape,
    targets: &[FitTarget],
) -> Result<LoopPrediction, ModelError> {
    let fit = |slice| fit_share(costs, slice, clock, targets);
    // The p50, p90 and p99 each audit measured, where positive.
    let tails: Vec<[Option<f64>; 3]> = targets
        .iter()
        .map(|t| [1, 2, 3].map(|i| t.excess_s[i].filter(|&x| x > 0.0)))
        .collect();
    if tails.iter().all(|t| t[2].is_none()) {
        return fit(None).map(|mut fits| fits.swap_remove(0));
    }
    // Each slice's fit is a seeded simulation of its own: run side by side, taken in order.
    let fits: Vec<Result<Vec<LoopPrediction>, ModelError>> = std::thread::scope(|s| {
        let runs: Vec<_> = SLICES.map(|slice| s.spawn(move || fit(slice))).into();
        runs.into_iter()
            .map(|r| r.join().expect("a slice's fit does not panic"))
            .collect()
    });
    let (spreads, fitted_on): (&[f64], &[usize]) = match shape {
        LatencyShape::Constant => (&[0.0], &[2]),
        LatencyShape::Drawn => (&SPREADS, &[0, 1, 2]),
    };
    let miss = |runs: &[LoopPrediction], spread: f64| {
        let logs: Vec<f64> = runs
            .iter()
            .zip(&tails)
            .flat_map(|(p, m)| {
                let reported = reported_at(p, spread);
                fitted_on
                    .iter()
                    .filter_map(move |&i| Some((reported[i + 1].max(1e-9) / m[i]?).ln().abs()))
            })
            .collect();
        logs.iter().sum::<f64>() / logs.len() as f64
    };
    // Each slice's fit scored at each spread of its latency beyond the CPU: the mean stays,
    // the quantiles move, so no simulation is run again, and only the best is kept.
    let mut fits = fits.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut best: Option<(f64, usize, f64)> = None;
    for (k, runs) in fits.iter().enumerate() {
        for &spread in spreads {
            let m = miss(runs, spread);
            if best.is_none_or(|(b, ..)| m < b) {
                best = Some((m, k, spread));
            }
        }
    }
    let (_, k, spread) = best.expect("SLICES is not empty");
    let mut fitted = with_delay(fits.swap_remove(k).swap_remove(0), 0.0, spread);
    fitted.latency_shape = shape;
    Ok(fitted)
}

/// The mean, p50, p90 and p99 of `loop_part` with `fixed_s` added to every request and an
/// exponential of mean `drawn_s` drawn for each.
fn quantiles(loop_part: &Recorder, fixed_s: f64, drawn_s: f64) -> [f64; 4] {
    let [p50, p90, p99] = loop_part.quantiles_plus_exponential_s([0.5, 0.9, 0.99], drawn_s);
    [
        loop_part.mean_s() + fixed_s + drawn_s,
        fixed_s + p50,
        fixed_s + p90,
        fixed_s + p99,
    ]
}

/// `p` with `delay_s` more latency in every request's path, the share `spread` of all of
/// it drawn for each request from an exponential (the mean is the same at any spread).
fn with_delay(mut p: LoopPrediction, delay_s: f64, spread: f64) -> LoopPrediction {
    p.delay_s += delay_s;
    if p.loop_part.is_some() {
        p.delay_spread = spread;
        p.reported_s = reported_at(&p, spread);
    } else {
        p.reported_s = p.reported_s.map(|x| x + delay_s);
    }
    p
}

/// The mean, p50, p90 and p99 `p` reports with the share `spread` of its latency beyond the
/// CPU drawn for each request; as it stands where its loop's own part was not kept.
fn reported_at(p: &LoopPrediction, spread: f64) -> [f64; 4] {
    match &p.loop_part {
        Some(loop_part) => {
            let drawn = p.delay_s * spread;
            quantiles(loop_part, p.delay_s - drawn, drawn)
        }
        None => p.reported_s,
    }
}

/// The spreads of the latency beyond the CPU a fit tries: the share of it drawn for each
/// request, 0 to 1 by tenths.
const SPREADS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// A client's loop read from its calibration audits: the costs split between second,
/// request and chunk, the share before the send fitted on the longer audits' excess, and
/// the shorter ones predicted with it (checks at a length the fit did not see).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopReading {
    /// The costs and the share, as fitted on the longer audits (the first one's prediction).
    pub fitted: LoopPrediction,
    /// The shorter audits, predicted, in the order given.
    pub shorter: Vec<LoopPrediction>,
    /// The loops every audit it was read on found (the processes holding the client's
    /// connections), where they all found as many; None where they did not.
    pub loops_read_on: Option<u32>,
    /// The spread of the client's speed over the audits it was read on, where they differ.
    pub speeds: Option<Speeds>,
    /// The client's speed against the machine's over the audits it was read on, where
    /// every one of them was gauged.
    pub gauged: Option<GaugedSpeed>,
    /// The same against the gauge's walk through memory, where every one of them walked.
    pub walked: Option<GaugedSpeed>,
}

/// How much faster a client's path runs than the audit's gauge, in the step from one run
/// to the next: its speed goes as the gauge's reading to this power. Read on ten runs of
/// SGLang's bench at 100 req/s x 200 tokens in one sitting, whose CPU a request and gauge
/// both moved by about a tenth (the log-log slope, correlation 0.91; bench/audit/RESULTS.md,
/// r51). A Python client's path is an interpreter's: more of its time is in memory than the
/// gauge's integer unit spends, so a machine that is slower by some share slows it more.
/// Runs that did not set it read 2.0 (SGLang's bench, inference-perf), 2.25 (AIPerf) and
/// 1.77 (vLLM's bench) within each audit place (r52-r55), and fresh sittings of vLLM's and
/// SGLang's bench 1.34 and 1.11 (r56): the power changes between sittings. A fixed 2.0,
/// held against r56 by a rule written before it was read, did no better, so the value fixed
/// first stays.
pub const GAUGE_POWER: f64 = 1.8;

/// The power of the walk's ratio a client's speed goes as: 1, fixed before any audit was
/// read with it. The walk is work of the interpreter's kind (loads that wait on caches and
/// memory), so a machine that slows it by some share is taken to slow the client's path by
/// the same share. Over twelve launches of inference-perf at one load, its CPU a request
/// moved as a longer walk through the same table to the power 1.1 (correlation 0.92), and as
/// the integer unit to the power 24; between two later sittings it moved about four times
/// as much as the gauge's own walk (bench/audit/RESULTS.md, r60). Held against [`GAUGE_POWER`]
/// on the integer unit by a rule fixed first, over 24 held-out audits, it came within 25 % in
/// 14 means and 14 p99s against 13 and 11. vLLM's bench, slowing by a fifth over sixteen
/// audits in ten minutes, went as the walk to the power 1.9 ± 0.4 with its load held apart
/// (r61): a value to hold against fresh sittings, not one fitted into this constant.
pub const WALK_POWER: f64 = 1.0;

/// The client's speed at a reading of the audit's gauge (the machine's speed during the
/// load), from the audits a loop was read on: each one's speed against the fitted costs and
/// its gauge, their geometric means, and the line of a given slope through them in logs
/// ([`GAUGE_POWER`] for the integer unit, [`WALK_POWER`] for the walk). A forecast that
/// reads the machine during the run, and nothing of the client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugedSpeed {
    /// The geometric mean of the audits' speeds (factors on the fitted costs).
    pub speed: f64,
    /// The geometric mean of their gauges' readings, seconds a unit.
    pub unit_s: f64,
    /// The audits read.
    pub audits: usize,
    /// The line's slope in logs: the power of the gauge's ratio the client's speed goes as.
    pub power: f64,
}

impl GaugedSpeed {
    /// The line of slope `power` through `readings` (each audit's speed and gauge, None
    /// where it had either missing): None where any is missing or none is given.
    pub fn of(readings: &[Option<(f64, f64)>], power: f64) -> Option<Self> {
        let readings: Vec<(f64, f64)> = readings.iter().copied().collect::<Option<_>>()?;
        if readings.is_empty() || !readings.iter().all(|(k, g)| *k > 0.0 && *g > 0.0) {
            return None;
        }
        let n = readings.len() as f64;
        let log_mean =
            |f: fn(&(f64, f64)) -> f64| (readings.iter().map(|r| f(r).ln()).sum::<f64>() / n).exp();
        Some(Self {
            speed: log_mean(|r| r.0),
            unit_s: log_mean(|r| r.1),
            audits: readings.len(),
            power,
        })
    }

    /// The client's speed where the gauge reads `unit_s` a unit.
    pub fn at(&self, unit_s: f64) -> f64 {
        self.speed * (unit_s / self.unit_s).powf(self.power)
    }
}

/// How fast the client ran in each audit a loop was read on, against the costs fitted on
/// all of them ([`LoopCosts::speed_of`]): the fastest and the slowest. A Python client's
/// speed moves from one run to the next; the spread its calibration saw is the least a
/// forecast from it should carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speeds {
    /// The least of the audits' speeds (a factor on the fitted costs).
    pub fastest: f64,
    /// The greatest.
    pub slowest: f64,
    /// The audits read.
    pub audits: usize,
}

impl Speeds {
    /// The spread of `speeds` (each audit's, None where it had none): None with fewer than
    /// three audits (two are fitted exactly), with an audit without a speed, or where they
    /// agree within a thousandth (the costs fitted them exactly).
    fn of(speeds: &[Option<f64>]) -> Option<Self> {
        let speeds: Vec<f64> = speeds.iter().copied().collect::<Option<_>>()?;
        let fastest = speeds.iter().copied().fold(f64::INFINITY, f64::min);
        let slowest = speeds.iter().copied().fold(0.0, f64::max);
        (speeds.len() >= 3 && slowest - fastest > 1e-3 * slowest).then_some(Self {
            fastest,
            slowest,
            audits: speeds.len(),
        })
    }
}

/// How fast audit `a`'s client ran against `costs` ([`LoopCosts::speed_of`] at its
/// chunks, whole).
fn speed_of(costs: &LoopCosts, a: &AuditedLoad) -> Option<f64> {
    costs.speed_of(CostSample {
        chunks_per_request: a.chunks_per_request.round().max(1.0),
        ..a.sample()
    })
}

/// `fitted`'s loop with all of its client's path `k` times as long: each part of its CPU
/// and its latency beyond the CPU.
fn at_speed(fitted: &LoopPrediction, k: f64) -> LoopPrediction {
    LoopPrediction {
        costs: fitted.costs.scaled(k),
        delay_s: fitted.delay_s * k,
        ..fitted.clone()
    }
}

fn load_of(a: &AuditedLoad, seed: u64) -> LoopLoad {
    LoopLoad {
        rate_per_s: a.rate_per_s,
        chunks_per_request: a.chunks_per_request.round().max(1.0) as u32,
        loops: a.loops.max(1),
        stamp: a.stamp,
        wake_wait_s: a.wake_wait_s.unwrap_or(0.0),
        preempt_per_cpu_s: a.preempt_per_cpu_s.unwrap_or(0.0),
        arrival_scv: a.arrival_scv,
        seed,
    }
}

/// Reads a client's loop ([`LoopReading`]) from audits at a shorter length (`shorter`) and
/// one or more longer audits (`longs`, the first at the rate of the first shorter one);
/// `clock` is where the tool starts its TTFT, `shape` the form of the latency beyond its
/// CPU. One shorter audit splits the CPU per request into a part per request and a part
/// per chunk ([`LoopCosts::split`]); audits at two rates also find the part per second ([`LoopCosts::fit`]), which the simulated jobs leave out
/// (it is spent whatever the load). The share before the send, the latency beyond the CPU
/// and the slice are fitted on every longer audit at once ([`fit_loop`]). The busiest
/// process's costs are fitted the same way where they can be, for the saturation. Refused
/// when the costs cannot be split or a longer audit has no reported mean TTFT to fit on.
pub fn read_loop(
    shorter: &[AuditedLoad],
    longs: &[AuditedLoad],
    clock: ClockStart,
    shape: LatencyShape,
    seed: u64,
) -> Result<LoopReading, ModelError> {
    let Some(long) = longs.first() else {
        return Err(ModelError::invalid(
            "cost split",
            "no longer audit",
            "needs an audit at the length the loop is fitted on",
        ));
    };
    // Where the plane through every audit puts a part of a request below zero (the rates
    // disagree more than the lengths do), the line through the two audits at the first
    // rate is kept: no part per second.
    let fit = |sample: fn(&AuditedLoad) -> CostSample| match shorter {
        [] => Err(ModelError::invalid(
            "cost split",
            "no shorter audit",
            "needs an audit at a shorter length",
        )),
        [one] if longs.len() == 1 => {
            LoopCosts::split(sample(one), sample(long)).map(|c| (c, false))
        }
        [first, ..] => LoopCosts::fit(&shorter.iter().chain(longs).map(sample).collect::<Vec<_>>())
            .map(|c| (c, false))
            .or_else(|_| LoopCosts::split(sample(first), sample(long)).map(|c| (c, true))),
    };
    let (costs, one_rate) = fit(AuditedLoad::sample)?;
    // The busiest process is one of the loops, which share the requests at random: it takes
    // 1/k of them, each costing a + n b of its CPU.
    let request_scv = long
        .cpu_spread
        .and_then(|s| {
            s.work_scv(
                long.rate_per_s / f64::from(long.loops.max(1)),
                costs.request_s(long.chunks_per_request),
            )
        })
        .unwrap_or(0.0);
    let costs = LoopCosts {
        request_scv,
        ..costs
    };
    let busiest = fit(AuditedLoad::busiest_sample).ok().map(|(c, _)| c);
    let targets: Vec<FitTarget> = longs
        .iter()
        .map(|a| FitTarget {
            load: load_of(a, seed),
            excess_s: a.excess_s,
        })
        .collect();
    // The whole machine's work the same way, where every audit read it (checked first, so
    // the fallback below is never taken).
    let machine = shorter
        .iter()
        .chain(longs)
        .all(|a| a.machine.is_some())
        .then(|| fit(|a| a.machine_sample().unwrap_or_else(|| a.sample())).ok())
        .flatten()
        .zip(long.machine.map(|(_, cores)| cores))
        .map(|((c, _), cores)| (c, cores));
    // The same audits read again with the CPU a request falling as each bound's cores
    // fill, where they fit so: the loops' own, the busiest process's one core, the
    // machine's cores.
    let every: Vec<&AuditedLoad> = shorter.iter().chain(longs).collect();
    let of = |f: fn(&AuditedLoad) -> Option<CostSample>| -> Option<Vec<CostSample>> {
        every.iter().map(|a| f(a)).collect()
    };
    let filling: Vec<FillingCosts> = [
        of(|a| Some(a.sample())).map(|s| (s, long.loops.max(1))),
        of(|a| Some(a.busiest_sample())).map(|s| (s, 1)),
        of(AuditedLoad::machine_sample).zip(long.machine.map(|(_, cores)| cores)),
    ]
    .into_iter()
    .flatten()
    .filter_map(|(samples, cores)| FillingCosts::fit(&samples, cores).ok())
    .collect();
    let mut fitted = fit_loop(&costs, clock, shape, &targets)?
        .with_busiest(busiest)
        .with_machine(machine)
        .with_filling(&filling);
    // The wait to wake each audit read, as a line in the loops' CPU a second: the fitted
    // audits run with their own, every other is predicted with the line at its load.
    let readings: Vec<(f64, f64)> = shorter
        .iter()
        .chain(longs)
        .filter_map(|a| Some((a.cores(), a.wake_wait_s?)))
        .collect();
    fitted.wake_wait_law = CoreWait::fit(&readings);
    // Preemptions a second of the loop's CPU hardly move with the load: the audits' mean.
    let preempts: Vec<f64> = shorter
        .iter()
        .chain(longs)
        .filter_map(|a| a.preempt_per_cpu_s)
        .collect();
    fitted.preempt_per_cpu_s = (!preempts.is_empty() && fitted.wake_wait_s.is_some())
        .then(|| preempts.iter().sum::<f64>() / preempts.len() as f64);
    if fitted.wake_wait_s.is_some() {
        fitted.wake_wait_from = "read in this audit".into();
    }
    // Several series read as one calibration: the number of audits and their range.
    let rate = |a: &AuditedLoad| format!("{:.0} req/s", a.rate_per_s);
    let on = match longs.len() {
        1 => format!("audit at {}", rate(long)),
        2..=3 => format!(
            "audits at {}",
            longs.iter().map(rate).collect::<Vec<_>>().join(" and ")
        ),
        n => {
            let (lo, hi) = longs.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), a| {
                (lo.min(a.rate_per_s), hi.max(a.rate_per_s))
            });
            format!("{n} audits at {lo:.0} to {hi:.0} req/s")
        }
    };
    fitted.before_send_from = format!(
        "fitted on the {on} x {:.0} tokens{}",
        long.chunks_per_request,
        if one_rate {
            "; the costs from the first rate alone, the audits at two rates putting a part below zero"
        } else {
            ""
        }
    );
    let loops_read_on = every
        .iter()
        .all(|a| a.loops == long.loops)
        .then_some(long.loops);
    if loops_read_on.is_none() {
        // Say so wherever the loop is printed: its costs were read on different processes.
        let mut found: Vec<u32> = every.iter().map(|a| a.loops).collect();
        found.sort_unstable();
        found.dedup();
        let mut found: Vec<String> = found.iter().map(u32::to_string).collect();
        let last = found.pop().unwrap_or_default();
        fitted.before_send_from.push_str(&format!(
            "; the audits found its connections held by {} or {last} processes, so its costs mix different ones",
            found.join(", ")
        ));
    }
    let speeds = loops_read_on.and_then(|_| {
        let speeds: Vec<Option<f64>> = every.iter().map(|a| speed_of(&fitted.costs, a)).collect();
        Speeds::of(&speeds)
    });
    let line = |gauge: fn(&AuditedLoad) -> Option<f64>, power: f64| {
        loops_read_on.and_then(|_| {
            let readings: Vec<Option<(f64, f64)>> = every
                .iter()
                .map(|a| speed_of(&fitted.costs, a).zip(gauge(a)))
                .collect();
            GaugedSpeed::of(&readings, power)
        })
    };
    let gauged = line(|a| a.gauge_s, GAUGE_POWER);
    let walked = line(|a| a.walk_s, WALK_POWER);
    let shorter = shorter
        .iter()
        .map(|s| predict_audit(&fitted, s, seed))
        .collect::<Result<_, _>>()?;
    Ok(LoopReading {
        fitted,
        shorter,
        loops_read_on,
        speeds,
        gauged,
        walked,
    })
}

/// What `fitted`'s loop would report at the load of audit `a`.
pub fn predict_audit(
    fitted: &LoopPrediction,
    a: &AuditedLoad,
    seed: u64,
) -> Result<LoopPrediction, ModelError> {
    let chunks = a.chunks_per_request.round().max(1.0);
    let cores = fitted.costs.per_second + a.rate_per_s * fitted.costs.request_s(chunks);
    let load = LoopLoad {
        wake_wait_s: fitted.wake_wait_law.map_or(0.0, |law| law.at(cores)),
        preempt_per_cpu_s: fitted.preempt_per_cpu_s.unwrap_or(0.0),
        ..load_of(a, seed)
    };
    let mut p = simulate(
        &fitted.costs,
        fitted.before_send,
        fitted.slice_s,
        fitted.clock,
        &load,
    )?
    .with_busiest(fitted.busiest)
    .with_machine(fitted.machine)
    .with_filling(&fitted.filling)
    .with_pacing(fitted.gap_lateness)
    .with_batched(fitted.batched);
    p.before_send_from.clone_from(&fitted.before_send_from);
    p.latency_shape = fitted.latency_shape;
    p.wake_wait_law = fitted.wake_wait_law;
    if let Some(law) = fitted.wake_wait_law {
        p.wake_wait_from = format!(
            "the line through the audits' readings, {} + {} a core of the loops' CPU, at {cores:.2} cores",
            heisenbench_model::units::format_seconds(law.base),
            heisenbench_model::units::format_seconds(law.per_core)
        );
    }
    Ok(with_delay(p, fitted.delay_s, fitted.delay_spread))
}

/// What `reading`'s loop would report at the load of audit `a` with all of its path at
/// `a`'s own speed ([`LoopCosts::speed_of`]: its CPU a request against the fitted costs at
/// its load), with that speed: not a forecast of `a`, since one of its inputs is `a`'s,
/// but the queue's model held against `a` once the client's speed in that run is known.
/// Every part of the CPU and the latency beyond it are scaled alike: between runs of a
/// Python client the excess moves with the speed faster still, the median as much as the
/// mean (bench/audit/RESULTS.md: as `k` to the power 1.7). None where `a` has no CPU
/// a request, or where its loops are not the ones every audit of the reading found: a CPU
/// a request read on other processes is another measure, not another speed (GuideLLM's
/// connections are held by one process in one run and by ten in the next).
pub fn predict_given_speed(
    reading: &LoopReading,
    a: &AuditedLoad,
    seed: u64,
) -> Result<Option<(f64, LoopPrediction)>, ModelError> {
    predict_at(reading, a, seed, speed_of(&reading.fitted.costs, a))
}

/// `reading`'s loop at the load of audit `a` with all of its path at speed `k`, with `k`;
/// None without a speed or where `a`'s loops are not the ones every audit of the reading
/// found.
fn predict_at(
    reading: &LoopReading,
    a: &AuditedLoad,
    seed: u64,
    k: Option<f64>,
) -> Result<Option<(f64, LoopPrediction)>, ModelError> {
    match k.filter(|_| reading.loops_read_on == Some(a.loops)) {
        Some(k) => predict_audit(&at_speed(&reading.fitted, k), a, seed).map(|p| Some((k, p))),
        None => Ok(None),
    }
}

/// What `reading`'s loop would report at the load of audit `a` with all of its path at the
/// speed the machine's gauge in `a` puts it ([`GaugedSpeed::at`]), with that speed: a
/// forecast that reads `a`'s machine, not its client (its CPU a request and its latencies
/// are not inputs). None where `a` or a calibration audit was not gauged, or where `a`'s
/// loops are not the ones every calibration audit found (as in [`predict_given_speed`]).
pub fn predict_given_machine(
    reading: &LoopReading,
    a: &AuditedLoad,
    seed: u64,
) -> Result<Option<(f64, LoopPrediction)>, ModelError> {
    let k = reading.gauged.zip(a.gauge_s).map(|(g, unit)| g.at(unit));
    predict_at(reading, a, seed, k)
}

/// As [`predict_given_machine`], from the gauge's walk through memory
/// ([`LoopReading::walked`]) rather than its integer unit.
pub fn predict_given_walk(
    reading: &LoopReading,
    a: &AuditedLoad,
    seed: u64,
) -> Result<Option<(f64, LoopPrediction)>, ModelError> {
    let k = reading.walked.zip(a.walk_s).map(|(g, walk)| g.at(walk));
    predict_at(reading, a, seed, k)
}

/// What `reading`'s loop would report at the load of audit `a` at the fastest and at the
/// slowest speed its calibration audits ran ([`LoopReading::speeds`]): the band a forecast
/// from them carries. None where the calibration saw one speed, or where `a`'s loops are
/// not the ones every calibration audit found (as in [`predict_given_speed`]).
pub fn predict_across_speeds(
    reading: &LoopReading,
    a: &AuditedLoad,
    seed: u64,
) -> Result<Option<[LoopPrediction; 2]>, ModelError> {
    let Some(speeds) = reading
        .speeds
        .filter(|_| reading.loops_read_on == Some(a.loops))
    else {
        return Ok(None);
    };
    let at = |k: f64| predict_audit(&at_speed(&reading.fitted, k), a, seed);
    Ok(Some([at(speeds.fastest)?, at(speeds.slowest)?]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use heisenbench_model::mg1::Mg1;
    use heisenbench_model::queue::WaitModel;

    /// A loop's costs with nothing spent per second.
    fn costs(per_request_s: f64, per_chunk_s: f64, request_scv: f64) -> LoopCosts {
        LoopCosts {
            per_second: 0.0,
            per_request_s,
            per_chunk_s,
            request_scv,
        }
    }

    fn target(load: LoopLoad, excess_s: [Option<f64>; 4]) -> FitTarget {
        FitTarget { load, excess_s }
    }

    /// A loop read from its audits as the Python tools' are: the clock at their own send,
    /// a share of the latency drawn, one seed.
    fn read_own_send(
        shorter: &[AuditedLoad],
        longs: &[AuditedLoad],
    ) -> Result<LoopReading, ModelError> {
        read_loop(shorter, longs, ClockStart::OwnSend, LatencyShape::Drawn, 3)
    }

    /// The audit a known loop of `costs` makes at load `l`, 0.6 of a request's fixed cost
    /// before its send, its clock from its own send: its CPU a request as the costs say, and
    /// the TTFT it adds as simulated.
    fn audit_of(costs: &LoopCosts, l: &LoopLoad) -> AuditedLoad {
        let p = simulate(costs, 0.6, None, ClockStart::OwnSend, l).unwrap();
        let cpu = costs.request_s(f64::from(l.chunks_per_request));
        AuditedLoad {
            rate_per_s: l.rate_per_s,
            chunks_per_request: f64::from(l.chunks_per_request),
            cpu_per_request_s: cpu,
            busiest_cpu_per_request_s: cpu,
            loops: l.loops,
            stamp: l.stamp,
            cpu_spread: None,
            excess_s: p.reported_s.map(Some),
            wake_wait_s: (l.wake_wait_s > 0.0).then_some(l.wake_wait_s),
            preempt_per_cpu_s: None,
            arrival_scv: None,
            machine: None,
            gauge_s: None,
            walk_s: None,
        }
    }

    fn load(rate: f64, chunks: u32) -> LoopLoad {
        LoopLoad {
            rate_per_s: rate,
            chunks_per_request: chunks,
            loops: 1,
            stamp: Stamp::AfterProcessing,
            wake_wait_s: 0.0,
            preempt_per_cpu_s: 0.0,
            arrival_scv: None,
            seed: 3,
        }
    }

    /// Chunks that cost nothing and a fixed cost all before the send make one loop an
    /// M/D/1 queue of send jobs: from the intended send a request waits the queue's wait
    /// and its own send job (Pollaczek-Khinchine), and from its own send only the send job.
    #[test]
    fn a_loop_of_send_jobs_is_m_d_1() {
        let c = 2e-3;
        let costs = costs(c, 0.0, 0.0);
        let l = load(250.0, 1);
        let p = simulate(&costs, 1.0, None, ClockStart::Intended, &l).unwrap();
        let q = Mg1::new(250.0, Service::Deterministic { mean_s: c }).unwrap();
        let expected = q.wait_mean_s() + c;
        // rho 0.5: 20,000 requests hold the mean within a few per cent (its relative
        // standard error is about 1.5 % here); 6 % is four of them.
        assert!(
            (p.reported_s[0] - expected).abs() < 0.06 * expected,
            "{p:?} against {expected}"
        );
        let own = simulate(&costs, 1.0, None, ClockStart::OwnSend, &l).unwrap();
        assert!((own.reported_s[1] - c).abs() < 1e-9, "{own:?}");
        assert!((p.achieved_per_s - 250.0).abs() < 0.05 * 250.0, "{p:?}");
        assert!((p.saturation_per_s - 500.0).abs() < 1e-6);
    }

    /// A request's work that varies (SCV 1, all of it before the send) makes the loop an
    /// M/G/1 queue: from the intended send the mean is Pollaczek-Khinchine's wait at SCV
    /// 1 (twice M/D/1's) plus the send job; from the client's own send it is the send job
    /// alone, whose p99 is the lognormal's (4.90 times its mean at SCV 1).
    #[test]
    fn a_loop_of_variable_send_jobs_is_m_g_1() {
        let c = 2e-3;
        let costs = costs(c, 0.0, 1.0);
        let l = load(250.0, 1);
        let p = simulate(&costs, 1.0, None, ClockStart::Intended, &l).unwrap();
        let q = Mg1::new(
            250.0,
            Service::Lognormal {
                mean_s: c,
                scv: 1.0,
            },
        )
        .unwrap();
        let expected = q.wait_mean_s() + c;
        assert!((expected - 4e-3).abs() < 1e-9, "P-K at SCV 1: {expected}");
        // The wait's relative standard error is larger than at SCV 0 (about 3 % over
        // 20,000 requests); 10 % is three of them.
        assert!(
            (p.reported_s[0] - expected).abs() < 0.10 * expected,
            "{p:?} against {expected}"
        );
        let own = simulate(&costs, 1.0, None, ClockStart::OwnSend, &l).unwrap();
        assert!((own.reported_s[0] - c).abs() < 0.03 * c, "{own:?}");
        let sigma = 2f64.ln().sqrt();
        let p99 = c * (-sigma * sigma / 2.0 + 2.326_348 * sigma).exp();
        assert!(
            (own.reported_s[3] - p99).abs() < 0.10 * p99,
            "{own:?} against {p99}"
        );
    }

    /// Sliced finely, a loop of send jobs is a processor shared among the requests on it
    /// (round robin tends to processor sharing as its slice shrinks): a request of work S
    /// spends S / (1 - rho) there on average whatever the distribution, 4 ms for 2 ms at
    /// rho 0.5, where run whole (M/D/1) it spends 3 ms. A slice longer than every job
    /// changes nothing: the same bytes as none.
    #[test]
    fn a_finely_sliced_loop_is_processor_sharing() {
        let c = 2e-3;
        let costs = costs(c, 0.0, 0.0);
        let l = load(250.0, 1);
        let shared = simulate(&costs, 1.0, Some(c / 50.0), ClockStart::Intended, &l).unwrap();
        let expected = c / (1.0 - 0.5);
        // Processor sharing's sojourn has a larger spread than M/D/1's wait; 20,000
        // requests at rho 0.5 hold its mean within about 2 %; 8 % also covers the slice's
        // own granularity (a fiftieth of the job).
        assert!(
            (shared.reported_s[0] - expected).abs() < 0.08 * expected,
            "{shared:?} against {expected}"
        );
        let whole = simulate(&costs, 1.0, None, ClockStart::Intended, &l).unwrap();
        let long = simulate(&costs, 1.0, Some(2.0 * c), ClockStart::Intended, &l).unwrap();
        assert_eq!(whole.reported_s, long.reported_s);
        assert!(
            whole.reported_s[0] < 0.8 * shared.reported_s[0],
            "{whole:?}"
        );
    }

    /// A loop that loses its core p times a second of CPU while it has work, each time for
    /// an exponential wait of mean d, serves a job of c in c plus a compound Poisson sum:
    /// mean c (1 + p d), variance p c 2 d^2, and the queue is M/G/1 of that (with the wait
    /// to wake, exponential d, as setup: plus d). At 200 req/s of 2 ms, p 500 and d 0.5 ms:
    /// service 2.5 ms, PK's wait 1.35 ms, 4.35 ms in all, against 3.17 ms unpreempted.
    #[test]
    fn a_loop_preempted_while_it_works_serves_compound_poisson_stretched_jobs() {
        let (c, d, p, rate) = (2e-3, 0.5e-3, 500.0, 200.0);
        let costs = costs(c, 0.0, 0.0);
        let preempted = LoopLoad {
            wake_wait_s: d,
            preempt_per_cpu_s: p,
            ..load(rate, 1)
        };
        let r = simulate(&costs, 1.0, None, ClockStart::Intended, &preempted).unwrap();
        let service = c * (1.0 + p * d);
        let second_moment = p * c * 2.0 * d * d + service * service;
        let pk = rate * second_moment / (2.0 * (1.0 - rate * service));
        let expected = service + pk + d;
        // 20,000 requests at rho 0.5: within about 2 %; the unpreempted loop is 27 % less.
        assert!(
            (r.reported_s[0] - expected).abs() < 0.05 * expected,
            "{r:?} against {expected}"
        );
        assert_eq!(r.preempt_per_cpu_s, Some(p));
        // Without a wait to take, preemptions cost nothing and are not reported.
        let free = LoopLoad {
            preempt_per_cpu_s: p,
            ..load(rate, 1)
        };
        let free = simulate(&costs, 1.0, None, ClockStart::Intended, &free).unwrap();
        let plain = simulate(&costs, 1.0, None, ClockStart::Intended, &load(rate, 1)).unwrap();
        assert_eq!(free.reported_s, plain.reported_s);
        assert_eq!(free.preempt_per_cpu_s, None);
    }

    /// A loop that waits D to wake whenever work finds it idle is M/G/1 with setup times:
    /// the mean wait is Pollaczek-Khinchine's plus `(2 E[D] + lambda E[D^2]) / (2 (1 +
    /// lambda E[D]))`, which is E[D] for an exponential D and less for a constant one
    /// (work that arrives while the loop wakes is served in the same busy period). At 250
    /// req/s of 2 ms (rho 0.5, PK's wait 1 ms) and D of 4 ms: 7 ms from the intended send
    /// to the first chunk for an exponential D, 6 ms for a constant one.
    #[test]
    fn a_loop_that_waits_to_wake_is_mg1_with_setup_times() {
        let (c, d, rate) = (2e-3, 4e-3, 250.0);
        let costs = costs(c, 0.0, 0.0);
        let woken = LoopLoad {
            wake_wait_s: d,
            ..load(rate, 1)
        };
        let exp = simulate(&costs, 1.0, None, ClockStart::Intended, &woken).unwrap();
        let pk = rate * c * c / (2.0 * (1.0 - rate * c));
        let expected = c + pk + d;
        // 20,000 requests at rho 0.5 hold a mean sojourn within about 2 %; the two laws
        // differ by 14 %, so 5 % tells them apart.
        assert!(
            (exp.reported_s[0] - expected).abs() < 0.05 * expected,
            "{exp:?} against {expected}"
        );
        assert_eq!(exp.wake_wait_s, Some(d));
        let mut sc = scenario(&costs, 1.0, None, &woken);
        sc.client.costs.wake = Some(Service::Deterministic { mean_s: d });
        let r = Simulation::new(sc).run();
        let setup = (2.0 * d + rate * d * d) / (2.0 * (1.0 + rate * d));
        let expected = c + pk + setup;
        assert!(
            (r.ttft.from_intended.mean_s - expected).abs() < 0.05 * expected,
            "{} against {expected}",
            r.ttft.from_intended.mean_s
        );
        // No wait to wake: the same bytes as before the field existed.
        let none = simulate(&costs, 1.0, None, ClockStart::Intended, &load(rate, 1)).unwrap();
        assert_eq!(none.wake_wait_s, None);
        assert!(
            (none.reported_s[0] - (c + pk)).abs() < 0.05 * (c + pk),
            "{none:?}"
        );
    }

    /// The gaps the server saw are the loop's: nearly even gaps (SCV 0.001, gamma of shape
    /// 1,000) leave a loop at rho 0.5 without a queue (D/D/1: a request's TTFT is its 2 ms
    /// job), where Poisson gaps add Pollaczek-Khinchine's 1 ms, and SCV 1 is Poisson's law.
    #[test]
    fn the_loop_is_given_the_gaps_the_server_saw() {
        let (c, rate) = (2e-3, 250.0);
        let costs = costs(c, 0.0, 0.0);
        let with = |scv: Option<f64>| {
            let l = LoopLoad {
                arrival_scv: scv,
                ..load(rate, 1)
            };
            simulate(&costs, 1.0, None, ClockStart::Intended, &l).unwrap()
        };
        let even = with(Some(1e-3));
        assert!((even.reported_s[0] - c).abs() < 0.02 * c, "{even:?}");
        let poisson = c + rate * c * c / (2.0 * (1.0 - rate * c));
        for p in [with(None), with(Some(1.0))] {
            assert!((p.reported_s[0] - poisson).abs() < 0.05 * poisson, "{p:?}");
        }
    }

    /// A client that stamps a chunk at its arrival (heisenbench) leaves its loop's reading
    /// out of its TTFT: on an idle loop it adds its send job alone, where a client that
    /// stamps after reading adds the first chunk's job too.
    #[test]
    fn a_client_stamping_at_arrival_adds_its_send_alone() {
        let costs = costs(1e-3, 10e-6, 0.0);
        let idle = load(1.0, 100);
        let after = simulate(&costs, 0.5, None, ClockStart::Intended, &idle).unwrap();
        let arrival = LoopLoad {
            stamp: Stamp::NetworkArrival,
            ..idle
        };
        let at = simulate(&costs, 0.5, None, ClockStart::Intended, &arrival).unwrap();
        // The median is read from the report's histogram, within a fraction of a per cent;
        // the two clients are 2 % apart.
        assert!((at.reported_s[1] / 0.5e-3 - 1.0).abs() < 2e-3, "{at:?}");
        assert!(
            (after.reported_s[1] / 0.51e-3 - 1.0).abs() < 2e-3,
            "{after:?}"
        );
        assert_eq!(at.stamp, Stamp::NetworkArrival);
    }

    /// The slice that made a prediction is found back from its mean, median and p99.
    #[test]
    fn the_fit_finds_the_slice_back() {
        let costs = costs(2.5e-3, 10e-6, 0.0);
        let l = load(120.0, 50);
        let made = simulate(&costs, 0.2, Some(5e-4), ClockStart::Intended, &l).unwrap();
        let [mean, p50, p90, p99] = made.reported_s.map(Some);
        let fit = fit_loop(
            &costs,
            ClockStart::Intended,
            LatencyShape::Drawn,
            &[target(l, [mean, p50, p90, p99])],
        )
        .unwrap();
        assert_eq!(
            (fit.slice_s, fit.latency_shape),
            (Some(5e-4), LatencyShape::Drawn),
            "{fit:?}"
        );
        // With a constant latency, from the p99 alone, and nothing drawn.
        let fit = fit_loop(
            &costs,
            ClockStart::Intended,
            LatencyShape::Constant,
            &[target(l, [mean, p50, p90, p99])],
        )
        .unwrap();
        assert_eq!(
            (fit.slice_s, fit.delay_spread, fit.latency_shape),
            (Some(5e-4), 0.0, LatencyShape::Constant),
            "{fit:?}"
        );
        // Without a p99, jobs run whole.
        let fit = fit_loop(
            &costs,
            ClockStart::Intended,
            LatencyShape::Drawn,
            &[target(l, [mean, p50, p90, None])],
        )
        .unwrap();
        assert_eq!(fit.slice_s, None);
    }

    /// The fit recovers the share that made a prediction, from that prediction's mean.
    #[test]
    fn the_fit_finds_the_share_back() {
        let costs = costs(1.9e-3, 12e-6, 0.0);
        let l = load(60.0, 200);
        let made = simulate(&costs, 0.7, None, ClockStart::OwnSend, &l).unwrap();
        let mean_only = |p: &LoopPrediction| target(l, [Some(p.reported_s[0]), None, None, None]);
        let fit = fit_before_send(&costs, None, ClockStart::OwnSend, &[mean_only(&made)]).unwrap();
        assert!((fit.before_send - 0.7).abs() < 1e-9, "{fit:?}");
        assert_eq!(fit.delay_s, 0.0);
        // A mean beyond what the whole fixed cost before the send makes: the rest is a
        // delay, in every statistic.
        let all = simulate(&costs, 1.0, None, ClockStart::OwnSend, &l).unwrap();
        let mut beyond = all.clone();
        beyond.reported_s[0] += 1e-3;
        let more =
            fit_before_send(&costs, None, ClockStart::OwnSend, &[mean_only(&beyond)]).unwrap();
        assert_eq!(more.before_send, 1.0);
        assert!((more.delay_s - 1e-3).abs() < 1e-12, "{more:?}");
        assert!((more.reported_s[1] - all.reported_s[1] - 1e-3).abs() < 1e-12);
        // A share of 0.3 and 0.5 ms of latency: the mean and the median come back (the
        // mean within the 5 % that parsimony allows, the median exactly), with no more
        // latency than the client has and a larger share before the send in its place.
        let delayed = with_delay(
            simulate(&costs, 0.3, None, ClockStart::OwnSend, &l).unwrap(),
            5e-4,
            0.0,
        );
        let both = [
            Some(delayed.reported_s[0]),
            Some(delayed.reported_s[1]),
            None,
            None,
        ];
        let fit = fit_before_send(&costs, None, ClockStart::OwnSend, &[target(l, both)]).unwrap();
        assert!(
            (fit.reported_s[0] / delayed.reported_s[0] - 1.0).abs() <= 0.05,
            "{fit:?}"
        );
        assert!(
            (fit.reported_s[1] - delayed.reported_s[1]).abs() < 1e-12,
            "{fit:?}"
        );
        assert!(
            fit.delay_s <= 5e-4 + 1e-12 && fit.before_send >= 0.3,
            "{fit:?}"
        );
        assert!(
            fit_before_send(&costs, None, ClockStart::OwnSend, &[target(l, [None; 4])]).is_err()
        );
        assert!(simulate(&costs, 1.5, None, ClockStart::OwnSend, &l).is_err());
    }

    /// A loop with 0.3 of its fixed cost before the send, 1 ms of latency beyond its CPU
    /// (0.6 of it drawn for each request from an exponential) and its jobs in 0.5 ms slices,
    /// audited at two rates: fitted on both at once, both come back within 5 % at the mean,
    /// the latency is found to spread, and a third rate, held out, is predicted as the loop
    /// made it, its p90 and p99 nearer than a constant latency would put them. The
    /// parameters need not come back: CPU before the send and latency beyond it trade off
    /// even at two rates (the work in the queue is the same whichever job holds it), and
    /// parsimony takes the least latency among the fits within 5 %.
    #[test]
    fn a_fit_on_two_rates_predicts_a_third() {
        let costs = costs(2.5e-3, 10e-6, 0.0);
        let made = |rate: f64| {
            let l = load(rate, 50);
            let p = with_delay(
                simulate(&costs, 0.3, Some(5e-4), ClockStart::Intended, &l).unwrap(),
                1e-3,
                0.6,
            );
            target(l, p.reported_s.map(Some))
        };
        let (light, heavy, held) = (made(60.0), made(200.0), made(150.0));
        let near = |p: f64, m: Option<f64>, within: f64| (p / m.unwrap() - 1.0).abs() <= within;
        let both = fit_share(&costs, Some(5e-4), ClockStart::Intended, &[light, heavy]).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[1].rate_per_s, 200.0);
        for (p, t) in both.iter().zip([light, heavy]) {
            assert!(
                near(p.reported_s[0], t.excess_s[0], 0.05),
                "{p:?} against {t:?}"
            );
        }
        let fit = fit_loop(
            &costs,
            ClockStart::Intended,
            LatencyShape::Drawn,
            &[light, heavy],
        )
        .unwrap();
        assert_eq!(fit, {
            let mut again =
                fit_share(&costs, fit.slice_s, ClockStart::Intended, &[light, heavy]).unwrap();
            LoopPrediction {
                latency_shape: LatencyShape::Drawn,
                ..with_delay(again.swap_remove(0), 0.0, fit.delay_spread)
            }
        });
        assert!(fit.delay_spread >= 0.3, "{fit:?}");
        let at_held = |spread: f64| {
            with_delay(
                simulate(
                    &costs,
                    fit.before_send,
                    fit.slice_s,
                    ClockStart::Intended,
                    &held.load,
                )
                .unwrap(),
                fit.delay_s,
                spread,
            )
        };
        let (p, constant) = (at_held(fit.delay_spread), at_held(0.0));
        assert!(
            near(p.reported_s[0], held.excess_s[0], 0.05),
            "{p:?} against {held:?}"
        );
        for i in [2, 3] {
            assert!(
                near(p.reported_s[i], held.excess_s[i], 0.1),
                "{i}: {p:?} against {held:?}"
            );
        }
        let miss = |p: &LoopPrediction| -> f64 {
            (1..4)
                .map(|i| (p.reported_s[i] / held.excess_s[i].unwrap()).ln().abs())
                .sum()
        };
        assert!(
            miss(&p) < miss(&constant),
            "{p:?} {constant:?} against {held:?}"
        );
    }

    /// Two audits made by a known loop give its costs and share back, and the shorter
    /// audit's prediction is that loop's own.
    #[test]
    fn a_loop_is_read_back_from_two_audits() {
        let costs = costs(1.5e-3, 10e-6, 0.0);
        let audit = |chunks: u32| audit_of(&costs, &load(50.0, chunks));
        let (short, long) = (audit(20), audit(200));
        let r = read_own_send(&[short], &[long]).unwrap();
        assert!((r.fitted.costs.per_request_s - 1.5e-3).abs() < 1e-12);
        assert!((r.fitted.before_send - 0.6).abs() < 1e-9, "{r:?}");
        assert_eq!(r.shorter[0].reported_s.map(Some), short.excess_s);
        let no_mean = AuditedLoad {
            excess_s: [None; 4],
            ..long
        };
        assert!(read_own_send(&[short], &[no_mean]).is_err());
        assert!(read_own_send(&[], &[long]).is_err());
    }

    /// Audits of a loop whose wait to wake grows with its load (0.1 ms + 1 ms a core of
    /// its CPU): the line comes back from their readings, the fitted audit runs with its
    /// own, and the others are predicted with the line at their load, as they ran.
    #[test]
    fn the_wait_to_wake_is_read_from_the_audits() {
        let costs = costs(1.5e-3, 10e-6, 0.0);
        let wake = |cores: f64| 1e-4 + 1e-3 * cores;
        let audit = |rate: f64, chunks: u32| {
            let cpu = costs.request_s(f64::from(chunks));
            let l = LoopLoad {
                wake_wait_s: wake(rate * cpu),
                ..load(rate, chunks)
            };
            audit_of(&costs, &l)
        };
        let (short, long) = (audit(50.0, 20), audit(50.0, 200));
        let r = read_own_send(&[short], &[long]).unwrap();
        let law = r.fitted.wake_wait_law.expect("a law from two readings");
        assert!((law.base - 1e-4).abs() < 1e-9, "{law:?}");
        assert!((law.per_core - 1e-3).abs() < 1e-9, "{law:?}");
        assert!((r.fitted.before_send - 0.6).abs() < 1e-9, "{r:?}");
        assert_eq!(r.fitted.wake_wait_s, long.wake_wait_s);
        let faster = audit(120.0, 200);
        let p = predict_audit(&r.fitted, &faster, 3).unwrap();
        // The forecast carries the shape its latency was fitted with.
        assert_eq!(p.latency_shape, LatencyShape::Drawn);
        for (p, m) in p.reported_s.iter().zip(faster.excess_s) {
            assert!((p - m.unwrap()).abs() < 1e-6 * p, "{p} against {m:?}");
        }
        // Without the wait the faster audit's TTFT is shorter: the wait is in the prediction.
        let without = simulate(&costs, 0.6, None, ClockStart::OwnSend, &load(120.0, 200)).unwrap();
        assert!(
            without.reported_s[0] < p.reported_s[0] - 1e-4,
            "{without:?}"
        );
    }

    /// A run of the client whose whole path is 1.3 times the calibration's (1.95 ms a
    /// request and 13 us a chunk where those cost 1.5 ms and 10 us): the forecast from the
    /// calibration misses it, and the loop given that run's speed is that run's loop, to
    /// the simulation's last digit; the latency beyond the CPU is scaled with it. A run
    /// that measured no CPU gives no such prediction, nor does a run or a reading whose
    /// loops are not the same throughout.
    #[test]
    fn the_loop_given_a_runs_speed_is_that_runs_loop() {
        let audit = |k: f64, rate: f64, chunks: u32| {
            audit_of(&costs(1.5e-3 * k, 10e-6 * k, 0.0), &load(rate, chunks))
        };
        let r = read_own_send(&[audit(1.0, 50.0, 20)], &[audit(1.0, 50.0, 200)]).unwrap();
        assert!(
            (r.fitted.costs.per_request_s - 1.5e-3).abs() < 1e-9,
            "{r:?}"
        );
        let slower = audit(1.3, 150.0, 200);
        let forecast = predict_audit(&r.fitted, &slower, 3).unwrap();
        let (k, given) = predict_given_speed(&r, &slower, 3)
            .unwrap()
            .expect("a speed");
        assert!((k - 1.3).abs() < 1e-9, "{k}");
        assert!(
            (given.costs.per_request_s - 1.95e-3).abs() < 1e-12,
            "{given:?}"
        );
        assert!((given.costs.per_chunk_s - 13e-6).abs() < 1e-15, "{given:?}");
        for (g, m) in given.reported_s.iter().zip(slower.excess_s) {
            assert!((g - m.unwrap()).abs() < 1e-6 * g, "{g} against {m:?}");
        }
        let m = slower.excess_s[0].unwrap();
        assert!(forecast.reported_s[0] < 0.9 * m, "{forecast:?} against {m}");
        let delayed = LoopPrediction {
            delay_s: 1e-3,
            ..r.fitted.clone()
        };
        assert!((at_speed(&delayed, 1.3).delay_s - 1.3e-3).abs() < 1e-15);
        let idle = AuditedLoad {
            cpu_per_request_s: 0.0,
            ..slower
        };
        assert!(predict_given_speed(&r, &idle, 3).unwrap().is_none());
        // A run whose connections other processes held is not read for its speed, nor is
        // any run against audits that found different loops between them.
        let elsewhere = AuditedLoad { loops: 2, ..slower };
        assert!(predict_given_speed(&r, &elsewhere, 3).unwrap().is_none());
        let mixed = read_own_send(
            &[audit(1.0, 50.0, 20)],
            &[AuditedLoad {
                loops: 2,
                ..audit(1.0, 50.0, 200)
            }],
        )
        .unwrap();
        assert_eq!((r.loops_read_on, mixed.loops_read_on), (Some(1), None));
        assert!(
            mixed
                .fitted
                .before_send_from
                .ends_with("held by 1 or 2 processes, so its costs mix different ones"),
            "{}",
            mixed.fitted.before_send_from
        );
        assert!(!r.fitted.before_send_from.contains("held by"), "{r:?}");
        assert!(predict_given_speed(&mixed, &slower, 3).unwrap().is_none());
    }

    /// The gauge's line goes through the calibration's geometric means with slope
    /// [`GAUGE_POWER`] in logs: two audits at speeds 1.21 and 1 whose gauges read 1.1 and 1
    /// ms put speed 1.1 at sqrt(1.1) ms, and 1.1^1.9 at 1.1 ms. An audit without a gauge,
    /// or a speed, gives no line.
    #[test]
    fn the_gauges_line_goes_through_the_calibrations_means() {
        let g = GaugedSpeed::of(&[Some((1.21, 1.1e-3)), Some((1.0, 1e-3))], GAUGE_POWER).unwrap();
        assert_eq!(g.audits, 2);
        assert!((g.speed - 1.1).abs() < 1e-12, "{g:?}");
        assert!((g.unit_s - 1.1_f64.sqrt() * 1e-3).abs() < 1e-15, "{g:?}");
        assert!((g.at(g.unit_s) - 1.1).abs() < 1e-12);
        let expected = 1.1_f64.powf(1.0 + GAUGE_POWER / 2.0);
        assert!((g.at(1.1e-3) - expected).abs() < 1e-12, "{}", g.at(1.1e-3));
        assert!(GaugedSpeed::of(&[Some((1.0, 1e-3)), None], GAUGE_POWER).is_none());
        assert!(GaugedSpeed::of(&[Some((1.0, 0.0))], GAUGE_POWER).is_none());
        assert!(GaugedSpeed::of(&[], GAUGE_POWER).is_none());
        let walked = GaugedSpeed::of(&[Some((1.21, 1.1e-3)), Some((1.0, 1e-3))], WALK_POWER);
        assert!((walked.unwrap().at(1.1e-3) - 1.1_f64.powf(1.5)).abs() < 1e-12);
    }

    /// A calibration gauged at 1 ms a unit and a run whose gauge read 1.3^(1/1.8) ms: the
    /// machine puts the run's path at 1.3 times the calibration's, and where it did run so
    /// (1.95 ms a request and 13 us a chunk against 1.5 ms and 10 us) the forecast given the
    /// machine is that run's loop, without reading its CPU. A run or a calibration audit
    /// without a gauge gives no such forecast, nor does a run on other loops. The walk's line
    /// reads the same way at its own power.
    #[test]
    fn the_loop_given_the_machine_reads_the_gauge_not_the_client() {
        let gauged = |k: f64, rate: f64, chunks: u32, unit_s: Option<f64>| AuditedLoad {
            gauge_s: unit_s,
            walk_s: unit_s.map(|_| 2e-3),
            ..audit_of(&costs(1.5e-3 * k, 10e-6 * k, 0.0), &load(rate, chunks))
        };
        let r = read_own_send(
            &[gauged(1.0, 50.0, 20, Some(1e-3))],
            &[gauged(1.0, 50.0, 200, Some(1e-3))],
        )
        .unwrap();
        let g = r.gauged.expect("a gauged calibration");
        assert!(
            (g.speed - 1.0).abs() < 1e-9 && (g.unit_s - 1e-3).abs() < 1e-15,
            "{g:?}"
        );
        let unit = 1e-3 * 1.3_f64.powf(1.0 / GAUGE_POWER);
        let slower = gauged(1.3, 150.0, 200, Some(unit));
        // Its CPU says nothing here: the same run with the calibration's CPU a request.
        let blind = AuditedLoad {
            cpu_per_request_s: 0.0,
            busiest_cpu_per_request_s: 0.0,
            ..slower
        };
        let (k, given) = predict_given_machine(&r, &blind, 3)
            .unwrap()
            .expect("a gauged run");
        assert!((k - 1.3).abs() < 1e-9, "{k}");
        for (g, m) in given.reported_s.iter().zip(slower.excess_s) {
            assert!((g - m.unwrap()).abs() < 1e-6 * g, "{g} against {m:?}");
        }
        let forecast = predict_audit(&r.fitted, &slower, 3).unwrap();
        assert!(forecast.reported_s[0] < 0.9 * slower.excess_s[0].unwrap());
        // The walk, at the power 1: the same run read from a walk 1.3 times as long.
        let walked = AuditedLoad {
            walk_s: Some(2.6e-3),
            ..blind
        };
        let (k, given) = predict_given_walk(&r, &walked, 3)
            .unwrap()
            .expect("a walked run");
        assert!((k - 1.3).abs() < 1e-9, "{k}");
        for (g, m) in given.reported_s.iter().zip(slower.excess_s) {
            assert!((g - m.unwrap()).abs() < 1e-6 * g, "{g} against {m:?}");
        }
        assert!(predict_given_walk(&r, &blind, 3).unwrap().unwrap().0 < 1.0 + 1e-9);
        let ungauged = AuditedLoad {
            gauge_s: None,
            walk_s: None,
            ..slower
        };
        assert!(predict_given_machine(&r, &ungauged, 3).unwrap().is_none());
        let elsewhere = AuditedLoad { loops: 2, ..slower };
        assert!(predict_given_machine(&r, &elsewhere, 3).unwrap().is_none());
        let half = read_own_send(
            &[gauged(1.0, 50.0, 20, None)],
            &[gauged(1.0, 50.0, 200, Some(1e-3))],
        )
        .unwrap();
        assert!(half.gauged.is_none());
        assert!(predict_given_machine(&half, &slower, 3).unwrap().is_none());
    }

    /// Two sittings of one known loop whose requests cost 1.5 ms in one and 2.5 ms in the
    /// other, read as one calibration: the plane through both puts a request's fixed part
    /// at their mean, 2 ms, and a third sitting at that speed and another rate is forecast
    /// closer than either sitting alone forecasts it.
    #[test]
    fn sittings_read_together_give_their_mean_speed() {
        let audit = |per_request_s: f64, rate: f64, chunks: u32| {
            audit_of(&costs(per_request_s, 10e-6, 0.0), &load(rate, chunks))
        };
        let sitting = |a: f64| {
            (
                vec![audit(a, 50.0, 20), audit(a, 100.0, 20)],
                vec![audit(a, 50.0, 200), audit(a, 100.0, 200)],
            )
        };
        let ((s1, l1), (s2, l2)) = (sitting(1.5e-3), sitting(2.5e-3));
        let one = |s: &[AuditedLoad], l: &[AuditedLoad]| read_own_send(s, l).unwrap();
        // The faster sitting alone (the slower one is its mirror, and each reading
        // simulates its audits many times over).
        let fast = one(&s1, &l1);
        let both = one(
            &[s1.clone(), s2.clone()].concat(),
            &[l1.clone(), l2.clone()].concat(),
        );
        assert!(
            (both.fitted.costs.per_request_s - 2e-3).abs() < 1e-9,
            "{both:?}"
        );
        assert!(both.fitted.costs.per_second.abs() < 1e-9, "{both:?}");
        assert!(
            both.fitted
                .before_send_from
                .starts_with("fitted on the 4 audits at 50 to 100 req/s x 200 tokens"),
            "{}",
            both.fitted.before_send_from
        );
        let third = audit(2e-3, 150.0, 200);
        let error = |r: &LoopReading| {
            let p = predict_audit(&r.fitted, &third, 3).unwrap();
            (p.reported_s[0] / third.excess_s[0].unwrap() - 1.0).abs()
        };
        let (e_both, e_fast) = (error(&both), error(&fast));
        // The faster sitting alone is a quarter off in its speed; read with the slower
        // one, the error is less than half its.
        assert!(e_fast > 0.1, "{e_fast}");
        assert!(e_both < 0.5 * e_fast, "{e_both} {e_fast}");

        // One sitting's costs fit its four audits exactly: one speed, no band. Against
        // the costs read from both (2 ms a request and 10 us a chunk), the faster
        // sitting's short audits ran at 1.7 / 2.2 of them and the slower's at 2.7 / 2.2;
        // the third sitting, between them, lies in the band at its load at every
        // statistic, and a sitting faster than either lies below it.
        assert_eq!(fast.speeds, None);
        let s = both.speeds.expect("two speeds");
        assert!((s.fastest - 1.7 / 2.2).abs() < 1e-6, "{s:?}");
        assert!((s.slowest - 2.7 / 2.2).abs() < 1e-6, "{s:?}");
        assert_eq!(s.audits, 8);
        assert_eq!(predict_across_speeds(&fast, &third, 3).unwrap(), None);
        let [lo, hi] = predict_across_speeds(&both, &third, 3)
            .unwrap()
            .expect("a band");
        for i in 0..4 {
            let m = third.excess_s[i].unwrap();
            assert!(
                lo.reported_s[i] < m && m < hi.reported_s[i],
                "{i}: {m} not in {lo:?} .. {hi:?}"
            );
        }
        let quicker = audit(0.5e-3, 150.0, 200);
        let [lo, _] = predict_across_speeds(&both, &quicker, 3)
            .unwrap()
            .expect("a band");
        assert!(quicker.excess_s[0].unwrap() < lo.reported_s[0], "{lo:?}");
    }

    /// A client that spends 0.1 core a second whatever the load, read at two rates: the
    /// part per second is found and left out of the jobs, so the loop simulated is the one
    /// without it; its busiest process (three quarters of each request's cost) bounds the
    /// saturation below what the loops' cores would carry.
    #[test]
    fn a_part_per_second_is_read_from_a_second_rate() {
        let costs = costs(1.5e-3, 10e-6, 0.0);
        let audit = |rate: f64, chunks: u32| {
            let l = LoopLoad {
                loops: 2,
                ..load(rate, chunks)
            };
            let request = costs.request_s(f64::from(chunks));
            AuditedLoad {
                cpu_per_request_s: 0.1 / rate + request,
                busiest_cpu_per_request_s: 0.05 / rate + 0.75 * request,
                ..audit_of(&costs, &l)
            }
        };
        let (short, short_fast, long) = (audit(50.0, 20), audit(100.0, 20), audit(50.0, 200));
        let r = read_own_send(&[short, short_fast], &[long]).unwrap();
        let c = r.fitted.costs;
        assert!((c.per_second - 0.1).abs() < 1e-9, "{c:?}");
        assert!((c.per_request_s - 1.5e-3).abs() < 1e-9, "{c:?}");
        assert!((r.fitted.before_send - 0.6).abs() < 1e-9, "{r:?}");
        assert_eq!(r.shorter.len(), 2);
        for (p, m) in r.shorter[1].reported_s.iter().zip(short_fast.excess_s) {
            assert!((p - m.unwrap()).abs() < 1e-9, "{r:?}");
        }
        // Two loops' cores carry 1.9 / 3.5 ms = 543 req/s; the busiest process's one core,
        // 0.95 / 2.625 ms = 362.
        let b = r.fitted.busiest.expect("the busiest process fitted");
        assert!((b.per_second - 0.05).abs() < 1e-9, "{b:?}");
        assert!(
            (r.fitted.saturation_per_s - 0.95 / (0.75 * 3.5e-3)).abs() < 1e-6,
            "{r:?}"
        );
        assert!(r.fitted.machine.is_none());

        // The same client on a machine of 2 cores whose work (the client's other
        // processes, the server) is 0.4 cores a second and three times the loops' a
        // request: the cores are full at 1.6 / 10.5 ms = 152 req/s, before any process is.
        let on_machine = |a: AuditedLoad| AuditedLoad {
            machine: Some((
                0.4 / a.rate_per_s + 3.0 * costs.request_s(a.chunks_per_request),
                2,
            )),
            ..a
        };
        let r = read_own_send(
            &[on_machine(short), on_machine(short_fast)],
            &[on_machine(long)],
        )
        .unwrap();
        let (m, cores) = r.fitted.machine.expect("the machine fitted");
        assert_eq!(cores, 2);
        assert!((m.per_second - 0.4).abs() < 1e-9, "{m:?}");
        let expected = 1.6 / (3.0 * 3.5e-3);
        assert!(
            (r.fitted.machine_saturation_per_s().unwrap() - expected).abs() < 1e-6,
            "{r:?}"
        );
        assert!((r.fitted.saturation_per_s - expected).abs() < 1e-6, "{r:?}");
        // One audit without the machine's reading: no machine bound.
        let r = read_own_send(&[on_machine(short), short_fast], &[on_machine(long)]).unwrap();
        assert!(r.fitted.machine.is_none());
    }

    /// Audits of a client whose CPU a request falls as its two loops' cores fill (a
    /// request that finds them idle costs 1 ms more) give that law back, its saturation
    /// beside the bound, and every prediction made from the fit carries it. The busiest
    /// process's CPU a request rises with the load here, so it gives no such bound and the
    /// loops' stands alone.
    #[test]
    fn the_saturation_as_the_cores_fill_is_read_from_the_audits() {
        let (a, b, idle, cores) = (1.5e-3, 10e-6, 1e-3, 2);
        let filling = FillingCosts {
            per_request_s: a,
            per_chunk_s: b,
            idle_s: idle,
            cores,
        };
        let audit = |rate: f64, chunks: u32| {
            let n = f64::from(chunks);
            let cpu = filling.request_s(n, rate);
            AuditedLoad {
                rate_per_s: rate,
                chunks_per_request: n,
                cpu_per_request_s: cpu,
                busiest_cpu_per_request_s: 0.5 * cpu * (1.0 + rate / 100.0),
                loops: cores,
                stamp: Stamp::AfterProcessing,
                cpu_spread: None,
                excess_s: [Some(1e-3), Some(1e-3), Some(2e-3), Some(4e-3)],
                wake_wait_s: None,
                preempt_per_cpu_s: None,
                arrival_scv: None,
                machine: None,
                gauge_s: None,
                walk_s: None,
            }
        };
        let (short, short_fast, long) = (audit(50.0, 20), audit(100.0, 20), audit(50.0, 200));
        let r = read_own_send(&[short, short_fast], &[long]).unwrap();
        assert_eq!(r.fitted.filling.len(), 1, "{:?}", r.fitted.filling);
        let f = r.fitted.filling[0];
        assert_eq!(f.cores, cores);
        for (got, want) in [(f.per_request_s, a), (f.per_chunk_s, b), (f.idle_s, idle)] {
            assert!((got - want).abs() < 1e-9, "{f:?}");
        }
        // Two cores at 1.5 + 200 x 0.01 = 3.5 ms a request: 571 req/s.
        let expected = 2.0 / 3.5e-3;
        let filled = r.fitted.filled_saturation_per_s.expect("filled");
        assert!((filled - expected).abs() < 1e-6, "{filled}");
        for p in &r.shorter {
            // The shorter audits' own length: 2 / 1.7 ms.
            let own = p.filled_saturation_per_s.expect("carried");
            assert!((own - 2.0 / 1.7e-3).abs() < 1e-6, "{own}");
        }
    }
}
