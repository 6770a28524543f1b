//! Plans checked by simulation: a plan's loop count (and one fewer) simulated with the
//! fast recursions of [`crate::textbook`] — one loop of a random or round-robin client by
//! Lindley's recursion over bursts, the whole pool of a pooled one by Kiefer-Wolfowitz's —
//! with 95 % intervals, and pooled loops sized by simulation, since their models are
//! approximations. `model` plans; this checks; the command wires the two.

use std::collections::BTreeMap;

use heisenbench_model::error::min_stable_servers;
use heisenbench_model::plan::{Assignment, Budget, Load};
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
