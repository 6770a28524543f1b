//! Sizing: how many independent client loops keep the wait inside the client under a
//! budget, and the inverse, how much load k loops carry.
//!
//! Each loop is a single-threaded FIFO server with its own queue (one process or thread,
//! one core). With random assignment of requests each loop sees Poisson bursts at 1/k of
//! the rate: M^X/G/1 (M/G/1 for bursts of one). With round robin and one burst per
//! request each loop sees every k-th request: E_k^X/G/1, smoother, solved on a lattice. Pooled
//! loops share one queue: M/G/c for spread events, M^X/G/c for bursts. When k
//! loops share C < k cores, each loop gets C/k of a core, so every event takes k/C times
//! as long: utilisation stops falling with k and waits grow; the plan says so.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::batch::BatchMg1;
use crate::error::{ModelError, Result, min_stable_servers};
use crate::gig1::Gig1;
use crate::mmc::{Mgc, PooledBursts};
use crate::queue::WaitModel;
use crate::service::Service;
use crate::units::{Quantile, Rate, Seconds, format_seconds};

/// A limit on the client-side wait: on its mean or on one of its quantiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "statistic", rename_all = "snake_case")]
pub enum Budget {
    /// E\[Wq\] <= limit.
    Mean {
        /// The limit, seconds.
        limit_s: Seconds,
    },
    /// The q-quantile of Wq <= limit.
    Quantile {
        /// The level.
        q: Quantile,
        /// The limit, seconds.
        limit_s: Seconds,
    },
}

impl Budget {
    /// The budgeted statistic of `queue`, seconds.
    pub fn statistic(&self, queue: &dyn WaitModel) -> f64 {
        match self {
            Self::Mean { .. } => queue.wait_mean_s(),
            Self::Quantile { q, .. } => queue.wait_quantile_s(*q),
        }
    }

    /// The limit in seconds.
    pub fn limit_s(&self) -> f64 {
        match self {
            Self::Mean { limit_s } | Self::Quantile { limit_s, .. } => limit_s.get(),
        }
    }

    /// Whether `queue` meets the budget.
    pub fn is_met_by(&self, queue: &dyn WaitModel) -> bool {
        self.statistic(queue) <= self.limit_s()
    }
}

impl FromStr for Budget {
    type Err = ModelError;

    /// `mean=2ms`, `p99=1ms`, `p99.9=500us`.
    fn from_str(s: &str) -> Result<Self> {
        let (stat, limit) = s.split_once('=').ok_or_else(|| {
            ModelError::invalid(
                "budget",
                s,
                "expected STAT=DURATION, e.g. p99=1ms or mean=200us",
            )
        })?;
        let limit_s = Seconds::parse(limit)?;
        if limit_s.get() <= 0.0 {
            return Err(ModelError::invalid("budget", s, "the limit must be > 0"));
        }
        match stat.trim() {
            "mean" | "avg" => Ok(Self::Mean { limit_s }),
            q => Ok(Self::Quantile {
                q: q.parse()?,
                limit_s,
            }),
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mean { limit_s } => write!(f, "mean wait <= {limit_s}"),
            Self::Quantile { q, limit_s } => write!(f, "{q} wait <= {limit_s}"),
        }
    }
}

/// How requests are dealt to loops: the dispatch policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignment {
    /// Each request to a loop chosen independently at random: every loop sees Poisson.
    Random,
    /// Requests dealt in turn, as heisenbench's own shards stripe the schedule: every loop
    /// sees each k-th request (Erlang-k gaps). The default.
    #[default]
    RoundRobin,
    /// One queue shared by all loops: any idle loop takes the next event (a worker pool).
    Pooled,
}

impl FromStr for Assignment {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "random" | "poisson" => Ok(Self::Random),
            "round-robin" | "round_robin" | "rr" => Ok(Self::RoundRobin),
            "pooled" | "shared" => Ok(Self::Pooled),
            _ => Err(ModelError::invalid(
                "policy",
                s,
                "expected random, round-robin or pooled",
            )),
        }
    }
}

/// The client's load: requests per second, each bringing `events_per_request` events that
/// reach the client in bursts of `burst`, each event costing `event_cost` on its loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Target requests per second.
    pub qps: Rate,
    /// Events (chunks) the client processes per request.
    pub events_per_request: u32,
    /// Events that arrive together (1: spread out; events_per_request: all at once).
    pub burst: u32,
    /// Per-event cost on a loop with a core to itself.
    pub event_cost: Service,
    /// How requests are dealt to loops.
    pub assignment: Assignment,
}

impl Load {
    /// Checks the counts.
    pub fn new(
        qps: Rate,
        events_per_request: u32,
        burst: u32,
        event_cost: Service,
        assignment: Assignment,
    ) -> Result<Self> {
        if events_per_request == 0 || events_per_request > crate::limits::MAX_TOKENS {
            return Err(ModelError::invalid(
                "events per request",
                events_per_request,
                "must be between 1 and 10,000,000",
            ));
        }
        if burst == 0 || burst > events_per_request {
            return Err(ModelError::invalid(
                "burst",
                burst,
                "must be between 1 and the events per request",
            ));
        }
        Ok(Self {
            qps,
            events_per_request,
            burst,
            event_cost,
            assignment,
        })
    }

    /// Events per second over all loops.
    pub fn event_rate_per_s(&self) -> f64 {
        self.qps.get() * f64::from(self.events_per_request)
    }

    /// Offered load in erlangs (cores of client work): qps x events x E\[S\].
    pub fn offered_erlangs(&self) -> f64 {
        self.event_rate_per_s() * self.event_cost.mean_s()
    }

    /// What one of `workers` loops sees: bursts per second, and the k of its Erlang-k
    /// gaps when round robin makes them so (None: Poisson bursts). Pooled loops share one
    /// queue: the rate is then the pool's, all the bursts.
    ///
    /// Erlang-k gaps hold only when a request is a single burst; otherwise a loop's
    /// arrivals superpose several bursts per request and are close to Poisson.
    pub fn loop_arrivals(&self, workers: u32) -> (f64, Option<u32>) {
        let bursts_per_request = f64::from(self.events_per_request) / f64::from(self.burst);
        let sharing = if self.assignment == Assignment::Pooled {
            1.0
        } else {
            f64::from(workers)
        };
        let rate = self.qps.get() * bursts_per_request / sharing;
        let erlang = self.assignment == Assignment::RoundRobin
            && workers > 1
            && self.burst == self.events_per_request;
        (rate, erlang.then_some(workers))
    }

    /// The queue one of `workers` loops sees, each event taking `slowdown` times its
    /// dedicated-core cost.
    pub fn worker_queue(&self, workers: u32, slowdown: f64) -> Result<Box<dyn WaitModel>> {
        let (rate, erlang_k) = self.loop_arrivals(workers);
        let service = if slowdown == 1.0 {
            self.event_cost.clone()
        } else {
            self.event_cost.scaled(slowdown)
        };
        let load = rate * f64::from(self.burst) * service.mean_s();
        if self.assignment == Assignment::Pooled {
            return Ok(if self.burst == 1 {
                Box::new(Mgc::new(rate, workers, service)?)
            } else {
                Box::new(PooledBursts::new(rate, self.burst, workers, service)?)
            });
        }
        if load >= 1.0 {
            return Err(ModelError::unstable(load * f64::from(workers), workers));
        }
        Ok(match erlang_k {
            Some(k) => Box::new(Gig1::erlang(k, rate, self.burst, service)?),
            None => Box::new(BatchMg1::new(rate, self.burst, service)?),
        })
    }
}

/// One candidate worker count, evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Loops.
    pub workers: u32,
    /// Per-loop utilisation (may be >= 1: then unstable).
    pub utilization: f64,
    /// The budgeted statistic of the wait, seconds; `None` when unstable.
    pub predicted_wait_s: Option<f64>,
    /// Whether the budget holds.
    pub meets_budget: bool,
    /// The queue model used.
    pub model: String,
}

impl Evaluation {
    fn of(load: &Load, budget: &Budget, workers: u32, slowdown: f64) -> Self {
        let utilization = load.offered_erlangs() * slowdown / f64::from(workers);
        match load.worker_queue(workers, slowdown) {
            Ok(q) => {
                let w = budget.statistic(q.as_ref());
                Self {
                    workers,
                    utilization,
                    predicted_wait_s: Some(w),
                    meets_budget: w <= budget.limit_s(),
                    model: q.name().to_string(),
                }
            }
            Err(_) => Self {
                workers,
                utilization,
                predicted_wait_s: None,
                meets_budget: false,
                model: "unstable".into(),
            },
        }
    }
}

/// Where the loops run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Hardware {
    /// Cores available to the client, if limited.
    pub cores: Option<u32>,
    /// Cores per machine, to count machines.
    pub cores_per_machine: Option<u32>,
}

/// The answer to "how many loops does this load need?".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerPlan {
    /// The load planned for.
    pub load: Load,
    /// The budget.
    pub budget: Budget,
    /// Offered client work in erlangs (cores busy on events).
    pub offered_erlangs: f64,
    /// The smallest loop count that meets the budget with a core each.
    pub workers: u32,
    /// Per-loop utilisation at `workers`.
    pub utilization: f64,
    /// The budgeted statistic at `workers`, seconds.
    pub predicted_wait_s: f64,
    /// The queue model.
    pub model: String,
    /// The same at one loop fewer (absent when `workers` is 1): it must not meet the budget.
    pub at_fewer_workers: Option<Evaluation>,
    /// Cores the answer needs (one per loop).
    pub cores_needed: u32,
    /// Machines, given cores per machine.
    pub machines_needed: Option<u32>,
    /// When fewer cores than loops are available: the loops share them.
    pub shared_cores: Option<SharedCores>,
    /// The reasoning, one sentence a line.
    pub reasoning: Vec<String>,
}

/// The plan's loops squeezed onto fewer cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedCores {
    /// Cores available.
    pub cores: u32,
    /// Each event takes this many times longer (loops / cores).
    pub slowdown: f64,
    /// The planned loop count on the shared cores.
    pub at_planned_workers: Evaluation,
    /// One loop per core, the best these cores can do.
    pub one_loop_per_core: Evaluation,
}

/// Largest loop count searched before declaring a budget unreachable.
const MAX_WORKERS: u32 = 1 << 24;

/// The smallest number of independent loops that meets `budget` under `load`.
///
/// # Errors
/// [`ModelError::Unreachable`] when no count does: the wait inside a burst, (N - 1) E\[S\]
/// on the last event, does not shrink with more loops.
pub fn plan_workers(load: &Load, budget: &Budget, hw: Hardware) -> Result<WorkerPlan> {
    plan_workers_unless(load, budget, hw, &|| false)
}

/// [`plan_workers`], asking `stop` before each count it evaluates: a caller that no longer
/// needs the answer ends the search within one evaluation.
///
/// # Errors
/// As [`plan_workers`], and [`ModelError::Stopped`] once `stop` says so.
pub fn plan_workers_unless(
    load: &Load,
    budget: &Budget,
    hw: Hardware,
    stop: &dyn Fn() -> bool,
) -> Result<WorkerPlan> {
    let erlangs = load.offered_erlangs();
    let k_stable = u32::try_from(min_stable_servers(erlangs))
        .unwrap_or(u32::MAX)
        .max(1);
    let meets = |k: u32| {
        if stop() {
            return Err(ModelError::Stopped);
        }
        Ok(Evaluation::of(load, budget, k, 1.0).meets_budget)
    };
    // Exponential search up, then bisection: the wait falls monotonically in k.
    let (mut lo, mut hi) = (k_stable.saturating_sub(1), k_stable);
    while !meets(hi)? {
        if hi >= MAX_WORKERS {
            let floor = Evaluation::of(load, budget, MAX_WORKERS, 1.0);
            return Err(ModelError::Unreachable {
                budget: budget.to_string(),
                reason: format!(
                    "even {MAX_WORKERS} loops predict {}; the wait inside a burst of {} events \
                     ({} per event) does not shrink with more loops",
                    floor
                        .predicted_wait_s
                        .map_or("unstable".into(), format_seconds),
                    load.burst,
                    format_seconds(load.event_cost.mean_s())
                ),
            });
        }
        lo = hi;
        hi = hi.saturating_mul(2).min(MAX_WORKERS);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if meets(mid)? { hi = mid } else { lo = mid }
    }
    Ok(plan_with_workers(load, budget, hw, hi))
}

/// The plan for exactly `k` loops: its evaluation, the one at k - 1, the cores and
/// machines, and the reasoning. [`plan_workers`] finds k by the model; a caller that
/// sizes by other means (a simulation of pooled loops) explains its k with this.
pub fn plan_with_workers(load: &Load, budget: &Budget, hw: Hardware, k: u32) -> WorkerPlan {
    let k = k.max(1);
    let erlangs = load.offered_erlangs();
    let k_stable = u32::try_from(min_stable_servers(erlangs))
        .unwrap_or(u32::MAX)
        .max(1);
    let at_k = Evaluation::of(load, budget, k, 1.0);
    let fewer = (k > 1).then(|| Evaluation::of(load, budget, k - 1, 1.0));
    let mut reasoning = vec![
        format!(
            "offered client work: {} req/s x {} events x {} = {erlangs:.3} cores busy",
            load.qps.get(),
            load.events_per_request,
            format_seconds(load.event_cost.mean_s())
        ),
        format!("at least {k_stable} loop(s) keep each loop's utilisation below 1"),
        format!(
            "{k} loop(s): utilisation {:.3}, predicted {} = {} ({}), {} {budget}",
            at_k.utilization,
            budget_stat_name(budget),
            format_seconds(at_k.predicted_wait_s.unwrap_or(f64::NAN)),
            at_k.model,
            if at_k.meets_budget { "meets" } else { "misses" }
        ),
    ];
    if let Some(f) = &fewer {
        reasoning.push(match f.predicted_wait_s {
            Some(w) => format!(
                "{} loop(s): utilisation {:.3}, predicted {} = {}, {} the budget",
                f.workers,
                f.utilization,
                budget_stat_name(budget),
                format_seconds(w),
                if f.meets_budget { "meets" } else { "misses" }
            ),
            None => format!(
                "{} loop(s): utilisation {:.3} >= 1, unstable",
                f.workers, f.utilization
            ),
        });
    }
    let shared = hw.cores.filter(|&c| c < k).map(|cores| {
        let slowdown = f64::from(k) / f64::from(cores);
        let planned = Evaluation::of(load, budget, k, slowdown);
        let per_core = Evaluation::of(load, budget, cores, 1.0);
        reasoning.push(format!(
            "only {cores} core(s): {k} loops would each get {:.2} of a core, so every event \
             takes {slowdown:.2}x longer and each loop's utilisation is {:.3}, the total work \
             over the cores, however many loops share them; {}",
            1.0 / slowdown,
            planned.utilization,
            match planned.predicted_wait_s {
                Some(w) if planned.meets_budget =>
                    format!("still meets the budget ({})", format_seconds(w)),
                Some(w) => format!("misses the budget ({})", format_seconds(w)),
                None => "the loops cannot keep up".into(),
            }
        ));
        SharedCores {
            cores,
            slowdown,
            at_planned_workers: planned,
            one_loop_per_core: per_core,
        }
    });
    let machines = hw
        .cores_per_machine
        .filter(|&c| c > 0)
        .map(|c| k.div_ceil(c));
    if let (Some(m), Some(c)) = (machines, hw.cores_per_machine) {
        reasoning.push(format!("{k} cores at {c} per machine: {m} machine(s)"));
    }
    WorkerPlan {
        load: load.clone(),
        budget: *budget,
        offered_erlangs: erlangs,
        workers: k,
        utilization: at_k.utilization,
        predicted_wait_s: at_k.predicted_wait_s.unwrap_or(f64::NAN),
        model: at_k.model.clone(),
        at_fewer_workers: fewer,
        cores_needed: k,
        machines_needed: machines,
        shared_cores: shared,
        reasoning,
    }
}

fn budget_stat_name(b: &Budget) -> String {
    match b {
        Budget::Mean { .. } => "mean wait".into(),
        Budget::Quantile { q, .. } => format!("{q} wait"),
    }
}

/// The largest load `workers` loops carry under a budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Loops.
    pub workers: u32,
    /// The budget.
    pub budget: Budget,
    /// The largest requests per second that meet it (relative precision 1e-6).
    pub max_qps: f64,
    /// Requests per second at which the loops saturate (utilisation 1).
    pub saturation_qps: f64,
    /// Per-loop utilisation at `max_qps`.
    pub utilization: f64,
    /// The budgeted statistic at `max_qps`, seconds.
    pub predicted_wait_s: f64,
}

/// The largest QPS `workers` loops (on `cores`, if fewer) carry with `budget` met.
/// `load.qps` is ignored.
pub fn max_qps(load: &Load, workers: u32, budget: &Budget, cores: Option<u32>) -> Result<Capacity> {
    if workers == 0 {
        return Err(ModelError::invalid("workers", 0, "must be >= 1"));
    }
    let slowdown = cores
        .filter(|&c| c < workers)
        .map_or(1.0, |c| f64::from(workers) / f64::from(c));
    let per_request = f64::from(load.events_per_request) * load.event_cost.mean_s() * slowdown;
    let saturation = f64::from(workers) / per_request;
    let at = |qps: f64| -> Option<f64> {
        let l = Load {
            qps: Rate::per_s(qps).ok()?,
            ..load.clone()
        };
        let q = l.worker_queue(workers, slowdown).ok()?;
        Some(budget.statistic(q.as_ref()))
    };
    let ok = |qps: f64| at(qps).is_some_and(|w| w <= budget.limit_s());
    let (mut lo, mut hi) = (saturation * 1e-9, saturation);
    if !ok(lo) {
        return Err(ModelError::Unreachable {
            budget: budget.to_string(),
            reason: format!(
                "even a nearly idle loop predicts {}: the wait inside a burst of {} events does \
                 not depend on the load",
                format_seconds(at(lo).unwrap_or(f64::NAN)),
                load.burst
            ),
        });
    }
    // Bisect in log space: the answer may sit anywhere in nine decades.
    while hi / lo > 1.0 + 1e-7 {
        let mid = (lo * hi).sqrt();
        if ok(mid) { lo = mid } else { hi = mid }
    }
    Ok(Capacity {
        workers,
        budget: *budget,
        max_qps: lo,
        saturation_qps: saturation,
        utilization: lo / saturation,
        predicted_wait_s: at(lo).unwrap_or(f64::NAN),
    })
}
