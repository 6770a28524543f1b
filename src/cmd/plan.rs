//! `heisenbench plan`.

use std::io::Write;

use heisenbench_live::calibrate::{default_path, load};
use heisenbench_model::plan::{Budget, Hardware, Load, max_qps, plan_workers};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Rate, format_seconds};
use heisenbench_sim::textbook::{BurstSpec, Gaps, lindley_bursts};

use super::write_json;
use crate::Failure;
use crate::args::PlanArgs;
use crate::table::write_pairs;

pub fn run(a: PlanArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let (mean, scv, source) = match a.event_cost {
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
            let why = format!(
                "per-event cost {} (SCV {:.2}) measured by `heisenbench calibrate` ({})",
                format_seconds(c.event_cost_mean_s),
                c.event_cost_scv,
                path.display()
            );
            (
                c.event_cost_mean_s,
                a.event_cost_scv.unwrap_or(c.event_cost_scv),
                Some(why),
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
    let mut plan = plan_workers(
        &load,
        &a.budget,
        Hardware {
            cores: a.cores,
            cores_per_machine: a.cores_per_machine,
        },
    )?;
    if let Some(why) = source {
        plan.reasoning.insert(0, why);
    }
    let checks = if a.check {
        [
            Some(plan.workers),
            plan.workers.checked_sub(1).filter(|k| *k > 0),
        ]
        .into_iter()
        .flatten()
        .map(|k| check(&load, &a.budget, k))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect()
    } else {
        Vec::new()
    };
    if a.json {
        if a.check {
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
        writeln!(out, "checked by simulation (one loop, 95 % intervals):")?;
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

/// A plan's loop count, simulated.
#[derive(serde::Serialize)]
struct Check {
    workers: u32,
    /// The budgeted statistic by the model, seconds.
    model_s: f64,
    /// The same statistic simulated, seconds.
    simulated_s: f64,
    /// Its 95 % half-width (batch means), seconds.
    ci95_s: f64,
    events: u64,
    /// Within 3 half-widths plus 0.5 % (the simulator's histogram rounding).
    agrees: bool,
}

/// Simulates one of `workers` loops under `load` (None when that many are unstable).
fn check(load: &Load, budget: &Budget, workers: u32) -> Result<Option<Check>, Failure> {
    let Ok(model) = load.worker_queue(workers, 1.0) else {
        return Ok(None);
    };
    let (rate, erlang_k) = load.loop_arrivals(workers);
    // About 2 million events, whatever the burst.
    let bursts = (2_000_000 / u64::from(load.burst)).max(1_000);
    let sim = lindley_bursts(&BurstSpec {
        burst_rate_per_s: rate,
        gaps: erlang_k.map_or(Gaps::Poisson, |k| Gaps::Gamma {
            shape: f64::from(k),
        }),
        burst: load.burst,
        service: load.event_cost.clone(),
        bursts,
        seed: 1,
    });
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
    Ok(Some(Check {
        workers,
        model_s,
        simulated_s: est.value,
        ci95_s: est.ci95,
        events: sim.customers,
        agrees: est.covers(model_s, 3.0, 0.005 * model_s),
    }))
}
