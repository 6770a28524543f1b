//! Measuring the generator's own per-event cost on this machine (`heisenbench calibrate`).
//!
//! One thread shard streams 200-token responses from the embedded mock (on its own
//! thread); the shard thread's CPU time divided by the events it handled is the mean cost
//! of an event on this machine, everything included (HTTP, framing, stamping,
//! bookkeeping). Its variability comes from the per-event processing times. The result is
//! a [`Calibration`], stored by [`crate::measure::calibration::store`].

use heisenbench_model::error::ModelError;
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};

use super::config::RunConfig;
use super::{RunOptions, run};
use crate::measure::calibration::{BUILD, Calibration, CalibrationError, CostPoint};
use crate::mock::config::MockConfig;
use crate::mock::{MockError, MockServer};

/// Why a calibration could not be made or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// The embedded mock did not start.
    #[error(transparent)]
    Mock(#[from] MockError),
    /// The run could not be made.
    #[error(transparent)]
    Run(#[from] super::RunError),
    /// Nothing was measured.
    #[error("no events were received; is the loopback interface up?")]
    Empty,
    /// The loopback floor could not be measured.
    #[error("measuring the loopback floor: {0}")]
    Floor(std::io::Error),
    /// A stored calibration could not be read or written.
    #[error(transparent)]
    Stored(#[from] CalibrationError),
    /// The plan could not be made.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Measures the per-event cost for `duration_s` at each of `loads_qps` requests per second
/// (200-token streams), and, with `floor`, this machine's loopback floor.
pub fn measure(
    duration_s: f64,
    loads_qps: &[f64],
    floor: bool,
) -> Result<Calibration, CalibrateError> {
    let mut loads: Vec<f64> = loads_qps.to_vec();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let mut points = Vec::new();
    let mut first = None;
    for qps in &loads {
        let (point, events, cpu_s) = measure_one(duration_s, *qps)?;
        first.get_or_insert((point, events, cpu_s, *qps));
        points.push(point);
    }
    let Some((p, events, cpu_s, qps)) = first else {
        return Err(CalibrateError::Empty);
    };
    let floor = if floor {
        let top = points.last().map_or(20_000.0, |p| p.events_per_s);
        Some(crate::measure::floor::measure(top).map_err(CalibrateError::Floor)?)
    } else {
        None
    };
    Ok(Calibration {
        event_cost_mean_s: p.cost_mean_s,
        event_cost_scv: p.cost_scv,
        events,
        cpu_s,
        qps,
        duration_s,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        floor,
        points,
        build: BUILD.to_string(),
    })
}

/// One load: the cost point, the events handled and the shard's CPU seconds.
fn measure_one(duration_s: f64, qps: f64) -> Result<(CostPoint, u64, f64), CalibrateError> {
    let mock = MockServer::start(MockConfig::embedded())?;
    let cfg = RunConfig {
        timeout_s: Some(30.0),
        ..RunConfig::streaming(
            "calibration",
            Workload {
                arrivals: Arrivals::Poisson { rate_per_s: qps },
                stop: Stop::Duration {
                    seconds: duration_s,
                },
                input_tokens: Lengths::Fixed { tokens: 32 },
                output_tokens: Lengths::Fixed { tokens: 200 },
                prefix: None,
                dataset: None,
            },
            &mock.url(),
            &MockConfig::default().model,
        )
    };
    let report = run(&cfg.checked()?, &RunOptions::default())?;
    mock.shutdown();
    let r = &report.merged;
    if r.events == 0 || r.wall_ns == 0 {
        return Err(CalibrateError::Empty);
    }
    let proc = &r.recorders.processing;
    let scv = if proc.mean_s() > 0.0 {
        (proc.sd_s() / proc.mean_s()).powi(2)
    } else {
        1.0
    };
    let cpu_s = r.cpu_ns as f64 * 1e-9;
    Ok((
        CostPoint {
            events_per_s: r.events as f64 / (r.wall_ns as f64 * 1e-9),
            cost_mean_s: cpu_s / r.events as f64,
            cost_scv: scv,
        },
        r.events,
        cpu_s,
    ))
}
