//! `heisenbench plan`.

use std::io::Write;

use heisenbench_live::calibrate::{default_path, load};
use heisenbench_model::plan::{
    Assignment, Hardware, Load, max_qps, plan_with_workers, plan_workers,
};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Rate, format_seconds};
use heisenbench_sim::plancheck::{Check, Simulations, budget_name};

use super::write_json;
use crate::Failure;
use crate::args::PlanArgs;
use heisenbench_model::table::write_pairs;

pub fn run(a: PlanArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let (mean, scv, calibration) = match a.event_cost {
        Some(c) => (c.get(), a.event_cost_scv.unwrap_or(0.0), None),
        None => {
            let path = a.calibration.clone().or_else(default_path).ok_or_else(|| {
                Failure::Usage("give --event-cost, or run `heisenbench calibrate` first".into())
            })?;
            let c = load(&path).map_err(|e| Failure::Usage(e.to_string()))?.ok_or_else(|| {
                Failure::Usage(format!(
                    "no calibration at {}: give --event-cost, or run `heisenbench calibrate` first",
                    path.display()
                ))
            })?;
            (
                c.event_cost_mean_s,
                a.event_cost_scv.unwrap_or(c.event_cost_scv),
                Some((c, path)),
            )
        }
    };
    let cost = Service::named(a.event_cost_dist, mean, scv)?;
    // --max-qps ignores --qps; any positive placeholder keeps Load's checks in one place.
    let qps = a.qps.map_or_else(|| Rate::per_s(1.0), Ok)?;
    let load = Load::new(qps, a.events_per_request, a.burst, cost, a.assignment)?;
    if a.max_qps {
        let workers = a
            .workers
            .ok_or_else(|| Failure::Usage("--max-qps needs --workers".into()))?;
        let cap = max_qps(&load, workers, &a.budget, a.cores)?;
        if a.json {
            return write_json(out, &cap);
        }
        writeln!(out, "capacity of {workers} loop(s) under {}", a.budget)?;
        write_pairs(
            out,
            &[
                ("max qps".into(), format!("{:.1} req/s", cap.max_qps)),
                (
                    "saturation qps".into(),
                    format!("{:.1} req/s", cap.saturation_qps),
                ),
                (
                    "utilisation there".into(),
                    format!("{:.4}", cap.utilization),
                ),
                (
                    "predicted wait there".into(),
                    format_seconds(cap.predicted_wait_s),
                ),
            ],
        )?;
        return Ok(());
    }
    let hw = Hardware {
        cores: a.cores,
        cores_per_machine: a.cores_per_machine,
    };
    // With a calibration, the cost each shard pays at the rate it carries.
    let (mut plan, load) = match &calibration {
        Some((c, path)) => {
            let (plan, used) = c.plan(&load, &a.budget, hw)?;
            let mut plan = plan;
            plan.reasoning.insert(
                0,
                format!(
                    "per-event cost {} (SCV {:.2}) at {:.0} events/s per loop, read from the cost-by-load curve measured by `heisenbench calibrate` ({})",
                    format_seconds(used.cost_mean_s),
                    used.cost_scv,
                    used.events_per_s,
                    path.display()
                ),
            );
            let load = Load {
                event_cost: Service::gamma(used.cost_mean_s, used.cost_scv.max(0.0))?,
                ..load
            };
            (plan, load)
        }
        None => (plan_workers(&load, &a.budget, hw)?, load),
    };
    let pooled = load.assignment == Assignment::Pooled;
    let mut sims = Simulations::new(&load, &a.budget);
    if pooled {
        let model_k = plan.workers;
        let k = sims.size_pool(model_k);
        let model_name = plan.model.clone();
        if k != model_k {
            plan = plan_with_workers(&load, &a.budget, hw, k);
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
            budget_name(&a.budget),
            format_seconds(sim_at_k)
        ));
    }
    let checks: Vec<Check> = if a.check || pooled {
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
    if a.json {
        if !checks.is_empty() {
            let mut v = serde_json::to_value(&plan).map_err(|e| Failure::Runtime(e.into()))?;
            v["checks"] = serde_json::to_value(&checks).map_err(|e| Failure::Runtime(e.into()))?;
            return write_json(out, &v);
        }
        return write_json(out, &plan);
    }
    writeln!(
        out,
        "{} loop(s) for {} req/s under {}",
        plan.workers,
        load.qps.get(),
        a.budget
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
    if !checks.is_empty() {
        writeln!(
            out,
            "checked by simulation ({}, 95 % intervals):",
            if pooled { "the pool" } else { "one loop" }
        )?;
        for c in &checks {
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
