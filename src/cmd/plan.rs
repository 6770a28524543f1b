//! `heisenbench plan`.

use std::io::Write;

use heisenbench_model::plan::{Hardware, Load, max_qps, plan_workers};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Rate, format_seconds};

use super::write_json;
use crate::Failure;
use crate::args::PlanArgs;
use crate::table::write_pairs;

pub fn run(a: PlanArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let cost = Service::named(a.event_cost_dist, a.event_cost.get(), a.event_cost_scv)?;
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
    let plan = plan_workers(
        &load,
        &a.budget,
        Hardware {
            cores: a.cores,
            cores_per_machine: a.cores_per_machine,
        },
    )?;
    if a.json {
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
    Ok(())
}
