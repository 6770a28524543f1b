//! The default shard count of a run: the plan that keeps each shard's loop under a wait
//! budget at this machine's measured per-event cost.

use std::path::Path;

use super::calibrate::{CalibrateError, measure};
use crate::measure::calibration::{Calibration, LOADS_QPS, default_path, load, store};

/// Seconds per load of the calibration a run makes by itself when there is none.
pub const AUTO_CALIBRATION_S: f64 = 1.0;
/// A run's default shard count keeps the p99 wait of an event for its shard's loop under
/// this.
pub const SHARD_BUDGET_S: f64 = 100e-6;

/// The default shard count of a run of `workload` on a machine of `cores` cores, with the
/// reasons, one a line (`whole_responses`: the server sends each response at once, as the
/// embedded zero-latency mock does). Open loop: the shard count [`Calibration::default_shards`] gives
/// with the calibration at `path` (else [`default_path`]); without one (or with one from
/// another build) one is measured now (`before_measuring` is told first) and stored. A
/// closed loop gets one shard per user, up to the cores.
pub fn default_run_shards(
    workload: &heisenbench_model::scenario::Workload,
    whole_responses: bool,
    path: Option<&Path>,
    cores: u32,
    before_measuring: &mut dyn FnMut(&str),
) -> Result<(u32, Vec<String>), CalibrateError> {
    use heisenbench_model::scenario::Arrivals;
    let mut why = Vec::new();
    let Some(qps) = workload.arrivals.rate_per_s() else {
        let users = match workload.arrivals {
            Arrivals::Closed { users, .. } => users,
            _ => 1,
        };
        let k = users.min(cores).max(1);
        why.push(format!(
            "closed loop of {users} users: one shard per user up to the {cores} cores here: {k}"
        ));
        return Ok((k, why));
    };
    let path = path.map(Path::to_path_buf).or_else(default_path);
    let stored = match &path {
        Some(p) => load(p)?.filter(Calibration::fits_this_build),
        None => None,
    };
    let (cal, source) = match stored {
        Some(c) => {
            let shown = path
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string());
            (c, format!("measured by `heisenbench calibrate` ({shown})"))
        }
        None => {
            before_measuring(&format!(
                "this machine has no calibration yet; measuring the generator's cost per event at {} loads (about {} s)...",
                LOADS_QPS.len(),
                LOADS_QPS.len() * AUTO_CALIBRATION_S as usize
            ));
            let c = measure(AUTO_CALIBRATION_S, &LOADS_QPS, false)?;
            let kept = match &path {
                Some(p) => match store(p, &c) {
                    Ok(()) => format!("stored in {}", p.display()),
                    Err(e) => format!("not stored: {e}"),
                },
                None => "not stored: no cache directory".into(),
            };
            (c, format!("measured just now, automatically ({kept})"))
        }
    };
    let (k, reasons) = cal.default_shards(
        qps,
        workload.output_tokens.mean(),
        whole_responses,
        cores,
        SHARD_BUDGET_S,
        &source,
    )?;
    why.extend(reasons);
    Ok((k, why))
}
