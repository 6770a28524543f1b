//! The live sharded load generator (`heisenbench run`).
//!
//! One seeded schedule ([`heisenbench_model::schedule::Schedule`]); N shards, each
//! replaying every N-th request on its own single-threaded runtime, as threads of this
//! process or as worker processes (this binary re-invoked with the hidden `__shard`
//! command, its task on stdin and its result on stdout). Shard results merge exactly
//! (counters and HDR histograms); a shard that fails or never reports is named in the
//! report and its requests are counted as lost, so the accounting always balances.

pub mod config;
pub mod distributed;
pub mod result;
pub mod shard;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use heisenbench_model::metrics::NtpotParts;
use result::{Accounting, Origins, Outcome, RunReport, ShardResult, ShardStatus};
use shard::{ShardTask, run_shard, slice_len};

use crate::clock::mono_ns;
use config::{RunConfig, ShardMode};

/// Report format version.
pub const REPORT_VERSION: u32 = 1;

/// Why a run could not be made (a failed request is not an error: it is accounted for).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] heisenbench_model::ModelError),
    /// The worker binary could not be found.
    #[error("cannot find the heisenbench binary to start shard processes: {0}")]
    Exe(std::io::Error),
}

/// Options that are not part of the run's identity.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The binary to re-invoke for process shards (default: this executable).
    pub exe: Option<PathBuf>,
    /// Why this many workers (goes into the report).
    pub workers_reasoning: Vec<String>,
}

/// Runs `cfg` and reports. Blocks until every shard has finished or failed.
pub fn run(cfg: &RunConfig, opts: &RunOptions) -> Result<RunReport, RunError> {
    cfg.validate()?;
    let exe = match (cfg.shard_mode, &opts.exe) {
        (ShardMode::Process, Some(p)) => Some(p.clone()),
        (ShardMode::Process, None) => Some(std::env::current_exe().map_err(RunError::Exe)?),
        (ShardMode::Thread, _) => None,
    };
    // Time zero a little ahead, so every shard is up before its first send.
    let lead_ns =
        50_000_000 + u64::from(cfg.workers) * if exe.is_some() { 10_000_000 } else { 1_000_000 };
    let start = mono_ns() + lead_ns;
    let tasks: Vec<ShardTask> = (0..cfg.workers)
        .map(|shard| ShardTask {
            config: cfg.clone(),
            shard,
            start_mono_ns: start,
        })
        .collect();
    let outcomes: Vec<Result<ShardResult, String>> = match &exe {
        None => {
            let handles: Vec<_> = tasks
                .into_iter()
                .map(|t| {
                    std::thread::Builder::new()
                        .name(format!("heisenbench-shard-{}", t.shard))
                        .spawn(move || run_shard(&t).map_err(|e| e.to_string()))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h
                        .join()
                        .unwrap_or_else(|_| Err("the shard thread panicked".into())),
                    Err(e) => Err(format!("cannot start the shard thread: {e}")),
                })
                .collect()
        }
        Some(exe) => {
            let children: Vec<_> = tasks.iter().map(|t| spawn_process(exe, t)).collect();
            children
                .into_iter()
                .map(|c| c.and_then(wait_process))
                .collect()
        }
    };
    Ok(report(cfg, opts, outcomes))
}

fn spawn_process(exe: &PathBuf, task: &ShardTask) -> Result<std::process::Child, String> {
    let mut child = Command::new(exe)
        .arg("__shard")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let json = serde_json::to_vec(task).map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(&json)
        .map_err(|e| format!("cannot hand the task over: {e}"))?;
    Ok(child)
}

fn wait_process(child: std::process::Child) -> Result<ShardResult, String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim();
        return Err(format!(
            "shard process exited with {}{}",
            out.status,
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("unreadable shard result: {e}"))
}

/// The hidden worker's main: a task on stdin, the result on stdout.
pub fn shard_process_main() -> Result<(), String> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| e.to_string())?;
    let task: ShardTask =
        serde_json::from_slice(&input).map_err(|e| format!("bad shard task: {e}"))?;
    // A test hook: abort this shard halfway through its slice, as a crash would.
    if std::env::var("HEISENBENCH_TEST_CRASH_SHARD")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        == Some(task.shard)
    {
        let wait = slice_duration_ns(&task.config) / 2;
        std::thread::sleep(std::time::Duration::from_nanos(
            task.start_mono_ns.saturating_sub(mono_ns()) + wait,
        ));
        std::process::abort();
    }
    let result = run_shard(&task).map_err(|e| e.to_string())?;
    let json = serde_json::to_vec(&result).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    out.write_all(&json)
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())
}

fn slice_duration_ns(cfg: &RunConfig) -> u64 {
    match cfg.workload.stop {
        heisenbench_model::scenario::Stop::Duration { seconds } => (seconds * 1e9) as u64,
        heisenbench_model::scenario::Stop::Count { requests } => {
            let rate = cfg.workload.arrivals.rate_per_s().unwrap_or(1.0);
            (requests as f64 / rate * 1e9) as u64
        }
    }
}

/// Merges shard outcomes into the report; failed shards' slices count as lost.
pub fn report(
    cfg: &RunConfig,
    opts: &RunOptions,
    outcomes: Vec<Result<ShardResult, String>>,
) -> RunReport {
    let mut merged = ShardResult::default();
    let mut shards = Vec::new();
    let mut lost = 0;
    for (i, o) in outcomes.into_iter().enumerate() {
        let index = i as u32;
        let planned = slice_len(cfg, index);
        match o {
            Ok(r) => {
                shards.push(ShardStatus {
                    index,
                    ok: true,
                    error: None,
                    scheduled: r.scheduled,
                    utilization: if r.wall_ns == 0 {
                        0.0
                    } else {
                        r.cpu_ns as f64 / r.wall_ns as f64
                    },
                    start_slip_s: match (r.first_send_ns, r.first_planned_ns) {
                        (Some(s), Some(p)) => Some((s as f64 - p as f64) * 1e-9),
                        _ => None,
                    },
                    clock_offset_estimate_s: r.clock_offset_estimate_s,
                    max_in_flight: r.max_in_flight,
                });
                merged.merge(&r);
            }
            Err(e) => {
                let n = planned.unwrap_or(0);
                lost += n;
                shards.push(ShardStatus {
                    index,
                    ok: false,
                    error: Some(e),
                    scheduled: n,
                    utilization: 0.0,
                    start_slip_s: None,
                    clock_offset_estimate_s: None,
                    max_in_flight: 0,
                });
            }
        }
    }
    let completed = merged.count(Outcome::Completed);
    let timed_out = merged.count(Outcome::TimedOut);
    let failed: std::collections::BTreeMap<String, u64> = merged
        .outcomes
        .iter()
        .filter(|(k, _)| k.as_str() != "completed" && k.as_str() != "timed_out")
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let scheduled = merged.scheduled + lost;
    let ended = merged.ended();
    let not_sent = merged.scheduled.saturating_sub(ended) + merged.not_sent;
    let balanced =
        scheduled == completed + failed.values().sum::<u64>() + timed_out + not_sent + lost;
    let duration_s = match (merged.first_send_ns, merged.last_end_ns) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 * 1e-9,
        _ => 0.0,
    };
    let offered_qps = cfg
        .workload
        .arrivals
        .rate_per_s()
        .unwrap_or(if duration_s > 0.0 {
            scheduled as f64 / duration_s
        } else {
            0.0
        });
    let n = completed.max(1) as f64;
    let rec = &merged.recorders;
    RunReport {
        version: REPORT_VERSION,
        kind: "live".into(),
        config: cfg.clone(),
        plan_hash: cfg.plan_hash(),
        workers_reasoning: opts.workers_reasoning.clone(),
        shards,
        accounting: Accounting {
            scheduled,
            completed,
            failed,
            timed_out,
            not_sent,
            lost,
            balanced,
        },
        offered_qps,
        achieved_qps: if duration_s > 0.0 {
            completed as f64 / duration_s
        } else {
            0.0
        },
        duration_s,
        send_lag: rec.send_lag.summary(),
        ttft: Origins {
            from_intended: rec.ttft_intended.summary(),
            from_actual: rec.ttft_actual.summary(),
        },
        ttft_after_processing: rec.ttft_processed.summary(),
        tpot: rec.tpot.summary(),
        itl: rec.itl.summary(),
        e2e: Origins {
            from_intended: rec.e2e_intended.summary(),
            from_actual: rec.e2e_actual.summary(),
        },
        ntpot: Origins {
            from_intended: rec.ntpot_intended.summary(),
            from_actual: rec.ntpot_actual.summary(),
        },
        ntpot_parts_mean: NtpotParts {
            queue_s: merged.ntpot_parts_sum[0] / n,
            prefill_s: merged.ntpot_parts_sum[1] / n,
            decode_s: merged.ntpot_parts_sum[2] / n,
        },
        observer_overhead: rec.observer_overhead.summary(),
        processing: rec.processing.summary(),
        tokens_stream: merged.tokens_stream,
        tokens_usage: merged.tokens_usage,
        token_mismatches: merged.token_mismatches,
        events: merged.events,
        merged,
    }
}
