//! `heisenbench plan`.

use std::io::Write;

use crate::flags::model::PlanFlags;
use heisenbench_live::measure::calibration::{default_path, load};
use heisenbench_model::plan::{max_qps, plan_workers};
use heisenbench_model::units::format_seconds;
use heisenbench_sim::plancheck::check_plan;

use super::write_json;
use crate::Failure;
use heisenbench_model::table::write_pairs;

pub fn run(a: PlanFlags, out: &mut dyn Write) -> Result<(), Failure> {
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
    let load = a.load(mean, scv)?;
    if a.max_qps {
        let workers = a
            .loops
            .ok_or_else(|| Failure::Usage("--max-qps needs --loops".into()))?;
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
    let hw = a.hardware();
    // With a calibration, the cost each shard pays at the rate it carries.
    let (plan, load) = match &calibration {
        Some((c, path)) => {
            let (mut plan, used) = c.plan(&load, &a.budget, hw)?;
            plan.reasoning.insert(
                0,
                format!(
                    "{used}, read from the cost-by-load curve measured by `heisenbench calibrate` ({})",
                    path.display()
                ),
            );
            (plan, used.applied_to(&load)?)
        }
        None => (plan_workers(&load, &a.budget, hw)?, load),
    };
    let checked = check_plan(&load, &a.budget, hw, plan, !a.no_check);
    if a.json {
        return write_json(out, &checked);
    }
    checked.write_summary(out, load.qps.get(), &a.budget)?;
    Ok(())
}
