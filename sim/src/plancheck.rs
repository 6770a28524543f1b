//! Plans checked by simulation: a plan's loop count (and one fewer) simulated with the
//! fast recursions of [`crate::textbook`] — one loop of a random or round-robin client by
//! Lindley's recursion over bursts, the whole pool of a pooled one by Kiefer-Wolfowitz's —
//! with 95 % intervals, and pooled loops sized by simulation, since their models are
//! approximations. `model` plans; this checks; the command wires the two.

use std::collections::BTreeMap;

use heisenbench_model::error::min_stable_servers;
use heisenbench_model::plan::{Assignment, Budget, Hardware, Load, WorkerPlan, plan_with_workers};
use heisenbench_model::table::write_pairs;
use heisenbench_model::units::format_seconds;
use serde::{Deserialize, Serialize};

use crate::textbook::{BurstSpec, Gaps, lindley_bursts, pooled_bursts};

/// A plan's loop count, simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Loops.
    pub workers: u32,
    /// The budgeted statistic by the model, seconds.
    pub model_s: f64,
    /// The same statistic simulated, seconds.
    pub simulated_s: f64,
    /// Its 95 % half-width (batch means), seconds.
    pub ci95_s: f64,
    /// Events simulated.
    pub events: u64,
    /// Within 3 half-widths plus 0.5 % of each other.
    pub agrees: bool,
}

/// The budgeted statistic's name, e.g. `p99 wait`.
pub fn budget_name(b: &Budget) -> String {
    match b {
        Budget::Mean { .. } => "mean wait".into(),
        Budget::Quantile { q, .. } => format!("{q} wait"),
    }
}

/// Simulations of a load at several loop counts, each run once.
pub struct Simulations<'a> {
    load: &'a Load,
    budget: &'a Budget,
    done: BTreeMap<u32, Option<Check>>,
}

impl<'a> Simulations<'a> {
    /// None run yet.
    pub fn new(load: &'a Load, budget: &'a Budget) -> Self {
        Self {
            load,
            budget,
            done: BTreeMap::new(),
        }
    }

    /// The check at `workers` (None when that many are unstable).
    pub fn get(&mut self, workers: u32) -> Option<&Check> {
        if !self.done.contains_key(&workers) {
            let c = simulate(self.load, self.budget, workers);
            self.done.insert(workers, c);
        }
        self.done.get(&workers).and_then(Option::as_ref)
    }

    /// Whether the simulated statistic at `workers` meets the budget.
    pub fn meets(&mut self, workers: u32) -> bool {
        let limit = self.budget.limit_s();
        self.get(workers).is_some_and(|c| c.simulated_s <= limit)
    }

    /// The fewest pooled loops whose simulated statistic meets the budget: bisection
    /// between the stable minimum and the model's count (searched upwards from there when
    /// the simulation says the model's count misses). The common random numbers of one
    /// seed keep the simulated statistic monotone in the count.
    pub fn size_pool(&mut self, model_k: u32) -> u32 {
        let stable = u32::try_from(min_stable_servers(self.load.offered_erlangs()))
            .unwrap_or(u32::MAX)
            .max(1);
        let (mut lo, mut hi) = (stable.saturating_sub(1), model_k.max(stable));
        while !self.meets(hi) {
            if hi >= model_k.saturating_mul(64) {
                return model_k;
            }
            lo = hi;
            hi = hi.saturating_mul(2);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.meets(mid) { hi = mid } else { lo = mid }
        }
        hi
    }
}

/// Simulates `workers` loops under `load` (None when that many are unstable): one loop of
/// a random or round-robin client, the whole pool of a pooled one.
pub fn simulate(load: &Load, budget: &Budget, workers: u32) -> Option<Check> {
    let model = load.worker_queue(workers, 1.0).ok()?;
    let (rate, erlang_k) = load.loop_arrivals(workers);
    // About 2 million events, whatever the burst.
    let spec = BurstSpec {
        burst_rate_per_s: rate,
        gaps: erlang_k.map_or(Gaps::Poisson, |k| Gaps::Gamma {
            shape: f64::from(k),
        }),
        burst: load.burst,
        service: load.event_cost.clone(),
        bursts: (2_000_000 / u64::from(load.burst)).max(1_000),
        seed: 1,
    };
    let sim = if load.assignment == Assignment::Pooled {
        pooled_bursts(&spec, workers)
    } else {
        lindley_bursts(&spec)
    };
    let (model_s, est) = match budget {
        Budget::Mean { .. } => (model.wait_mean_s(), sim.wait_mean_s),
        Budget::Quantile { q, .. } => {
            let m = model.wait_quantile_s(*q);
            // The simulator estimates the four standard levels; others by the nearest.
            let est = sim
                .wait_quantiles_s
                .iter()
                .min_by(|a, b| {
                    (a.0.get() - q.get())
                        .abs()
                        .total_cmp(&(b.0.get() - q.get()).abs())
                })
                .map(|(_, e)| *e)
                .unwrap_or(sim.wait_mean_s);
            (m, est)
        }
    };
    Some(Check {
        workers,
        model_s,
        simulated_s: est.value,
        ci95_s: est.ci95,
        events: sim.customers,
        agrees: est.covers(model_s, 3.0, 0.005 * model_s),
    })
}

/// A plan with what the simulator says of it: a pool is always sized by simulation (no
/// formula for M/G/c met 2 %, see `bench/RESULTS.md`), and a checked plan carries the
/// simulated wait at k and k - 1 loops with 95 % intervals.
#[derive(Debug, Clone, Serialize)]
pub struct CheckedPlan {
    /// The plan (for a pool, at the count simulation found).
    #[serde(flatten)]
    pub plan: WorkerPlan,
    /// The simulations at k and k - 1 loops (empty when not checked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// Whether the loops share one queue.
    #[serde(skip)]
    pub pooled: bool,
}

/// Sizes a pool by simulation (the model's count is where the search starts, and the
/// reasoning says both), and checks the plan at k and k - 1 when `check` (always for a
/// pool).
pub fn check_plan(
    load: &Load,
    budget: &Budget,
    hw: Hardware,
    mut plan: WorkerPlan,
    check: bool,
) -> CheckedPlan {
    let pooled = load.assignment == Assignment::Pooled;
    let mut sims = Simulations::new(load, budget);
    if pooled {
        let model_k = plan.workers;
        let k = sims.size_pool(model_k);
        let model_name = plan.model.clone();
        if k != model_k {
            plan = plan_with_workers(load, budget, hw, k);
        }
        let sim_at_k = sims.get(k).map_or(f64::NAN, |c| c.simulated_s);
        plan.reasoning.push(format!(
            "pooled loops: the {model_name} model is an approximation ({}), so the pool is sized \
             by simulating it (Kiefer-Wolfowitz's recursion, about 2 million events a count): \
             the model asked for {model_k} loop(s); {k} is the fewest whose simulated {} = {} \
             meets the budget",
            if load.burst == 1 {
                "Lee-Longton's mean with an exponential tail; the M/D/c mean is exact"
            } else {
                "one loop as fast as all of them"
            },
            budget_name(budget),
            format_seconds(sim_at_k)
        ));
    }
    let checks = if check || pooled {
        [
            Some(plan.workers),
            plan.workers.checked_sub(1).filter(|k| *k > 0),
        ]
        .into_iter()
        .flatten()
        .filter_map(|k| sims.get(k).cloned())
        .collect()
    } else {
        Vec::new()
    };
    CheckedPlan {
        plan,
        checks,
        pooled,
    }
}

impl CheckedPlan {
    /// The plan as text for a terminal: the count, its numbers, why, and the checks.
    pub fn write_summary(
        &self,
        out: &mut dyn std::io::Write,
        qps: f64,
        budget: &Budget,
    ) -> std::io::Result<()> {
        let plan = &self.plan;
        writeln!(
            out,
            "{} loop(s) for {qps} req/s under {budget}",
            plan.workers
        )?;
        let mut rows = vec![
            ("workers".into(), plan.workers.to_string()),
            ("utilisation".into(), format!("{:.4}", plan.utilization)),
            (
                "predicted wait".into(),
                format_seconds(plan.predicted_wait_s),
            ),
            ("model".into(), plan.model.clone()),
            ("cores needed".into(), plan.cores_needed.to_string()),
        ];
        if let Some(m) = plan.machines_needed {
            rows.push(("machines needed".into(), m.to_string()));
        }
        write_pairs(out, &rows)?;
        writeln!(out, "why:")?;
        for line in &plan.reasoning {
            writeln!(out, "  - {line}")?;
        }
        if !self.checks.is_empty() {
            writeln!(
                out,
                "checked by simulation ({}, 95 % intervals):",
                if self.pooled { "the pool" } else { "one loop" }
            )?;
            for c in &self.checks {
                writeln!(
                    out,
                    "  - {} loop(s): model {}, simulated {} +- {} over {} events: {}",
                    c.workers,
                    format_seconds(c.model_s),
                    format_seconds(c.simulated_s),
                    format_seconds(c.ci95_s),
                    c.events,
                    if c.agrees {
                        "agree"
                    } else {
                        "DISAGREE beyond the interval"
                    }
                )?;
            }
        }
        Ok(())
    }
}

/// Most pooled servers [`PoolCheck::run`] simulates (its heap holds one entry each).
pub const MAX_CHECKED_SERVERS: u32 = 100_000;

/// An M/G/c queue the model answers only approximately (general service: its mean is
/// Lee and Longton's two-moment formula, its tail an exponential fit), answered by
/// simulation: Kiefer-Wolfowitz's recursion over Poisson arrivals, with 95 % intervals.
/// The simulation is then the answer, to within its interval; the formula stands beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCheck {
    /// Customers measured (a tenth as many are simulated first and left out).
    pub customers: u64,
    /// Root seed.
    pub seed: u64,
    /// Mean wait, P(wait) and quantiles, simulated.
    pub simulated: crate::textbook::QueueResult,
}

impl PoolCheck {
    /// Simulates `servers` pooled loops at `rate_per_s` Poisson arrivals of `service`.
    /// None when there are more than [`MAX_CHECKED_SERVERS`].
    pub fn run(
        rate_per_s: f64,
        servers: u32,
        service: &heisenbench_model::service::Service,
        customers: u64,
        seed: u64,
    ) -> Option<Self> {
        if servers > MAX_CHECKED_SERVERS {
            return None;
        }
        let spec = BurstSpec {
            burst_rate_per_s: rate_per_s,
            gaps: Gaps::Poisson,
            burst: 1,
            service: service.clone(),
            bursts: customers,
            seed,
        };
        Some(Self {
            customers,
            seed,
            simulated: pooled_bursts(&spec, servers),
        })
    }

    /// The simulated rows beside the model's (`model`'s report of the same queue), and
    /// how far the model's mean and p99 are from them.
    pub fn write_summary(
        &self,
        model: &heisenbench_model::queue::QueueReport,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        use heisenbench_model::units::Quantile;
        let s = &self.simulated;
        writeln!(
            out,
            "checked by simulation (Kiefer-Wolfowitz, {} customers, seed {}), the answer to \
             within its 95 % intervals:",
            self.customers, self.seed
        )?;
        let cell = |e: &crate::textbook::Estimate| {
            format!("{} +- {}", format_seconds(e.value), format_seconds(e.ci95))
        };
        let mut rows = vec![
            ("mean wait Wq".to_string(), cell(&s.wait_mean_s)),
            (
                "P(wait > 0)".to_string(),
                format!("{:.6} +- {:.6}", s.p_wait.value, s.p_wait.ci95),
            ),
        ];
        for (q, e) in &s.wait_quantiles_s {
            rows.push((format!("wait {q}"), cell(e)));
        }
        write_pairs(out, &rows)?;
        let off = |model_s: f64, e: &crate::textbook::Estimate| {
            let percent = if e.value > 0.0 {
                format!("{:+.1} % ", 100.0 * (model_s / e.value - 1.0))
            } else {
                String::new()
            };
            let side = if (model_s - e.value).abs() <= e.ci95 {
                "inside"
            } else {
                "outside"
            };
            format!("{percent}({side} the interval)")
        };
        let p99 = s
            .wait_quantiles_s
            .iter()
            .find(|(q, _)| *q == Quantile::P99)
            .map(|(_, e)| *e);
        writeln!(
            out,
            "the formula against the simulation: mean {}, p99 {}",
            off(model.wq_mean_s, &s.wait_mean_s),
            match (model.wq_quantile_s(Quantile::P99), p99) {
                (Some(m), Some(e)) => off(m, &e),
                _ => "-".into(),
            }
        )
    }
}
