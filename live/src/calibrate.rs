//! Measuring the generator's own per-event cost on this machine.
//!
//! One thread shard streams 200-token responses from the embedded mock (on its own
//! thread) at a modest rate; the shard thread's CPU time divided by the events it handled
//! is the mean cost of an event on this machine, everything included (HTTP, framing,
//! stamping, bookkeeping). Its variability comes from the per-event processing times.
//! `plan` and `run` use the stored figure instead of a guess. The machine's loopback floor
//! ([`crate::floor`]) is measured and stored with it.

use std::path::{Path, PathBuf};

use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};
use serde::{Deserialize, Serialize};

use crate::mock::config::MockConfig;
use crate::mock::{MockError, MockServer};
use crate::prompt::Prompts;
use crate::run::config::{ApiKind, RunConfig, ShardMode};
use crate::run::{RunOptions, run};

/// A stored calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Mean CPU cost of one event on a shard's loop, seconds.
    pub event_cost_mean_s: f64,
    /// Squared coefficient of variation of the per-event processing time.
    pub event_cost_scv: f64,
    /// Events measured.
    pub events: u64,
    /// CPU seconds of the shard thread.
    pub cpu_s: f64,
    /// Load during the measurement, requests per second.
    pub qps: f64,
    /// Length of the measurement, seconds.
    pub duration_s: f64,
    /// Cores this machine reports.
    pub cores: usize,
    /// This machine's loopback floor, idle and at the measurement's chunk rate.
    #[serde(default)]
    pub floor: Option<crate::floor::Floor>,
}

/// Why calibration failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// The embedded mock did not start.
    #[error(transparent)]
    Mock(#[from] MockError),
    /// The run could not be made.
    #[error(transparent)]
    Run(#[from] crate::run::RunError),
    /// Nothing was measured.
    #[error("no events were received; is the loopback interface up?")]
    Empty,
    /// The loopback floor could not be measured.
    #[error("measuring the loopback floor: {0}")]
    Floor(std::io::Error),
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a calibration.
    #[error("{path}: not a calibration file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// `$HEISENBENCH_CALIBRATION`, else `$XDG_CACHE_HOME/heisenbench/calibration.json`, else
/// `~/.cache/heisenbench/calibration.json`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HEISENBENCH_CALIBRATION") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("heisenbench").join("calibration.json"))
}

/// Reads a stored calibration; `Ok(None)` when the file does not exist.
pub fn load(path: &Path) -> Result<Option<Calibration>, CalibrationError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CalibrationError::Format {
                    path: path.into(),
                    reason: e.to_string(),
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CalibrationError::Io {
            path: path.into(),
            source,
        }),
    }
}

/// Writes `c` to `path` atomically, creating the directory.
pub fn store(path: &Path, c: &Calibration) -> Result<(), CalibrationError> {
    let io = |source| CalibrationError::Io {
        path: path.into(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(c).unwrap_or_default()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Measures the per-event cost for `duration_s` at `qps` requests per second.
pub fn measure(duration_s: f64, qps: f64) -> Result<Calibration, CalibrationError> {
    let mock = MockServer::start(MockConfig {
        port: 0,
        max_num_seqs: 100_000,
        max_model_len: 1_000_000,
        ..MockConfig::default()
    })?;
    let cfg = RunConfig {
        name: "calibration".into(),
        seed: 1,
        workload: Workload {
            arrivals: Arrivals::Poisson { rate_per_s: qps },
            stop: Stop::Duration {
                seconds: duration_s,
            },
            input_tokens: Lengths::Fixed { tokens: 32 },
            output_tokens: Lengths::Fixed { tokens: 200 },
        },
        url: mock.url(),
        api: ApiKind::Completions,
        stream: true,
        model: MockConfig::default().model,
        api_key_env: None,
        timeout_s: Some(30.0),
        max_in_flight_per_shard: None,
        workers: 1,
        shard_mode: ShardMode::Thread,
        client_cost_s: 0.0,
        csv: false,
        ca_cert: None,
        insecure: false,
        prompts: Prompts::words(),
    };
    let report = run(&cfg, &RunOptions::default())?;
    mock.shutdown();
    let r = &report.merged;
    if r.events == 0 {
        return Err(CalibrationError::Empty);
    }
    let proc = &r.recorders.processing;
    let scv = if proc.mean_s() > 0.0 {
        (proc.sd_s() / proc.mean_s()).powi(2)
    } else {
        1.0
    };
    Ok(Calibration {
        event_cost_mean_s: r.cpu_ns as f64 * 1e-9 / r.events as f64,
        event_cost_scv: scv,
        events: r.events,
        cpu_s: r.cpu_ns as f64 * 1e-9,
        qps,
        duration_s,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        floor: Some(crate::floor::measure(qps * 200.0).map_err(CalibrationError::Floor)?),
    })
}
