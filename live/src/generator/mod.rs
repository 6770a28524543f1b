//! The live sharded load generator (`heisenbench run`).
//!
//! One seeded schedule ([`heisenbench_model::schedule::Schedule`]); N shards, each
//! replaying every N-th request on its own single-threaded runtime, as threads of this
//! process or as worker processes (this binary re-invoked with the hidden `__shard`
//! command, its task on stdin and its result on stdout). Shard results merge exactly
//! (counters and HDR histograms); a shard that fails or never reports is named in the
//! report and its requests are counted as lost, so the accounting always balances.

pub mod calibrate;
pub mod config;
pub mod distributed;
pub mod k8s;
pub mod llmd;
pub mod prepare;
pub mod result;
pub mod series;
pub mod shard;
pub mod shards;
pub mod stop;
mod summary;
mod wake;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, getppid, kill_process, set_parent_process_death_signal};

use heisenbench_model::metrics::NtpotParts;
use heisenbench_model::scenario::{Arrivals, Stop};
use heisenbench_model::steady::{grew, mser};
use result::MachineLoad;
use result::{
    Accounting, Goodput, Origins, Outcome, RunReport, ShardResult, ShardStatus, SteadyState,
    Throughput, TokenCounter, WarmupReport,
};
use series::Series;
use shard::{ShardTask, run_shard, slice_len};
use stop::{GRACE, StopSignal, listen_for_signals};

use crate::scrape;
use crate::time::mono_ns;
use config::{Checked, RunConfig, ShardMode};

/// Report format version.
pub const REPORT_VERSION: u32 = 1;

/// Why a run could not be made (a failed request is not an error: it is accounted for).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] heisenbench_model::ModelError),
    /// The HTTP client cannot be built (a bad `--ca-cert`, say).
    #[error(transparent)]
    Http(#[from] crate::net::client::HttpError),
    /// The worker binary could not be found.
    #[error("cannot find the heisenbench binary to start shard processes: {0}")]
    Exe(std::io::Error),
}

/// Why a shard gave no result; its slice of the schedule is then counted as lost.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The shard's thread could not be started.
    #[error("cannot start the shard thread: {0}")]
    Thread(std::io::Error),
    /// The shard's thread panicked.
    #[error("the shard thread panicked")]
    Panicked,
    /// The shard failed to run (its runtime or client could not be built).
    #[error("the shard failed: {0}")]
    Failed(std::io::Error),
    /// The shard's process could not be started.
    #[error("cannot start {exe}: {source}", exe = exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The task could not be written to the shard's process.
    #[error("cannot hand the task over: {0}")]
    Handover(String),
    /// The shard's process ended without a result.
    #[error("shard process exited with {status}{}", if last_line.is_empty() { String::new() } else { format!(": {last_line}") })]
    Exited {
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last line it wrote to stderr.
        last_line: String,
    },
    /// The shard's process wrote something that is not a result.
    #[error("unreadable shard result: {0}")]
    Unreadable(serde_json::Error),
    /// The shard had not reported by the run's deadline; its process was killed.
    #[error(
        "no result by the run's deadline ({0:.1} s after the start): killed and counted as lost"
    )]
    Deadline(f64),
    /// The shard never reported (its channel closed).
    #[error("the shard never reported")]
    Silent,
    /// A merge found no result for this shard.
    #[error("no result for this shard")]
    Missing,
}

/// The `x-request-id` request `index` of the schedule carries (the `index` column of
/// `requests.csv`), so a server's own log joins the run's rows. The name repeats from one
/// run to the next: two runs sent at once to one server share names.
pub fn request_id(index: u64) -> String {
    format!("heisenbench-{index}")
}

/// Options that are not part of the run's identity.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The binary to re-invoke for process shards (default: this executable).
    pub exe: Option<PathBuf>,
    /// Why this many workers (goes into the report).
    pub shards_reasoning: Vec<String>,
    /// Stops the run early; the report is still made, marked interrupted.
    pub stop: StopSignal,
    /// Fault injection for tests: the process of this shard aborts halfway through its
    /// slice, as a crash would (process shards only; a thread cannot crash alone).
    pub crash_shard: Option<u32>,
    /// The server runs in this process (the embedded mock): its ends of the connections
    /// share this process's descriptors, and its CPU is this process's.
    pub server_in_process: bool,
    /// The in-process server's metrics, read directly instead of over HTTP when the run's
    /// `--server-metrics` is `auto`.
    pub in_process_metrics: Option<scrape::InProcess>,
}

/// Slack past a run's expected end (its schedule, the per-request timeout, the grace
/// period) before a shard that has not reported is declared lost.
const DEADLINE_SLACK: Duration = Duration::from_secs(5);

/// Runs `cfg` and reports. Returns when every shard has reported, failed, or missed the
/// run's deadline (its schedule plus the per-request timeout plus slack; a shard process
/// past it is killed and its slice counted as lost).
pub fn run(cfg: &Checked, opts: &RunOptions) -> Result<RunReport, RunError> {
    cfg.check_read()?;
    let descriptors = shards::raise_descriptor_limit();
    let mut cfg = cfg.clone();
    let mut opts = opts.clone();
    if cfg.in_flight_bound.is_none() {
        let (bound, why) = shards::in_flight_bound(
            cfg.shards,
            cfg.shard_mode == ShardMode::Thread,
            opts.server_in_process,
            descriptors,
        );
        cfg.settle().in_flight_bound = Some(bound);
        opts.shards_reasoning.push(why);
    }
    let (cfg, opts) = (&cfg, &opts);
    let cpu0 = crate::time::process_cpu_ns();
    let wall0 = mono_ns();
    let ticks0 = result::machine_ticks();
    // Fail before any shard starts if the client cannot be built.
    crate::net::client::client(cfg.server())?;
    let exe = match (cfg.shard_mode, &opts.exe) {
        (ShardMode::Process, Some(p)) => Some(p.clone()),
        (ShardMode::Process, None) => Some(std::env::current_exe().map_err(RunError::Exe)?),
        (ShardMode::Thread, _) => None,
    };
    // Time zero a little ahead, so every shard is up before its first send.
    let lead_ns =
        50_000_000 + u64::from(cfg.shards) * if exe.is_some() { 10_000_000 } else { 1_000_000 };
    let start = mono_ns() + lead_ns;
    let (scraper, server_note) = start_scraper(cfg, opts, start);
    let tasks: Vec<ShardTask> = (0..cfg.shards)
        .map(|shard| ShardTask {
            config: RunConfig::clone(cfg),
            shard,
            start_mono_ns: start,
            crash_halfway: opts.crash_shard == Some(shard),
        })
        .collect();
    let (tx, rx) = mpsc::channel::<(usize, Result<ShardResult, ShardError>)>();
    let mut outcomes: Vec<Option<Result<ShardResult, ShardError>>> =
        (0..tasks.len()).map(|_| None).collect();
    let mut children: Vec<Option<Pid>> = vec![None; tasks.len()];
    for (i, t) in tasks.into_iter().enumerate() {
        let tx = tx.clone();
        match &exe {
            None => {
                let stop = opts.stop.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("heisenbench-shard-{}", t.shard))
                    .spawn(move || {
                        let r = std::panic::catch_unwind(|| run_shard(&t, &stop))
                            .map_err(|_| ShardError::Panicked)
                            .and_then(|r| r.map_err(ShardError::Failed));
                        let _ = tx.send((i, r));
                    });
                if let Err(e) = spawned {
                    outcomes[i] = Some(Err(ShardError::Thread(e)));
                }
            }
            Some(exe) => match spawn_process(exe, &t) {
                Ok(child) => {
                    children[i] = Some(Pid::from_child(&child));
                    // Read its output on a thread of its own, so a large result never
                    // blocks the shard on a full pipe.
                    std::thread::spawn(move || {
                        let _ = tx.send((i, wait_process(child)));
                    });
                }
                Err(e) => outcomes[i] = Some(Err(e)),
            },
        }
    }
    drop(tx);
    let expected = Duration::from_nanos(lead_ns + slice_duration_ns(cfg))
        + Duration::from_secs_f64(cfg.timeout())
        + GRACE
        + DEADLINE_SLACK;
    // A closed loop bounded by a count has no schedule length: only its timeouts bound it.
    let closed_count = matches!(
        (&cfg.workload.arrivals, &cfg.workload.stop),
        (Arrivals::Closed { .. }, Stop::Count { .. })
    );
    let far = Instant::now() + Duration::from_secs(365 * 86_400);
    let mut deadline = if closed_count {
        far
    } else {
        Instant::now().checked_add(expected).unwrap_or(far).min(far)
    };
    let mut forwarded = false;
    while outcomes.iter().any(Option::is_none) {
        if opts.stop.is_stopped() && !forwarded {
            // Shard processes stop as the parent does (a terminal's Ctrl-C reaches them
            // anyway; a SIGTERM to the parent alone does not).
            forwarded = true;
            for (pid, o) in children.iter().zip(&outcomes) {
                if let (Some(pid), None) = (pid, o) {
                    let _ = kill_process(*pid, Signal::TERM);
                }
            }
            deadline = deadline.min(Instant::now() + GRACE + DEADLINE_SLACK);
        }
        let now = Instant::now();
        if now >= deadline {
            for (i, o) in outcomes.iter_mut().enumerate() {
                if o.is_none() {
                    if let Some(pid) = children[i] {
                        let _ = kill_process(pid, Signal::KILL);
                    }
                    *o = Some(Err(ShardError::Deadline(expected.as_secs_f64())));
                }
            }
            break;
        }
        let wait = (deadline - now).min(Duration::from_millis(50));
        match rx.recv_timeout(wait) {
            Ok((i, r)) => outcomes[i] = Some(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let outcomes = outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Err(ShardError::Silent)))
        .collect::<Vec<_>>();
    let scrapes = scraper.map(scrape::Scraper::finish);
    let mut rep = report(cfg, opts, outcomes);
    rep.start_monotonic_ns = Some(start);
    rep.interrupted |= opts.stop.is_stopped();
    rep.server_note = server_note;
    if let Some(s) = &scrapes {
        rep.server = Some(server_view(&rep, s));
    }
    rep.note_machine(MachineLoad::measured(
        cfg,
        &rep,
        crate::time::process_cpu_ns().saturating_sub(cpu0),
        mono_ns().saturating_sub(wall0),
        opts.server_in_process,
        ticks0.zip(result::machine_ticks()),
    ));
    Ok(rep)
}

/// Starts reading the server's metrics, when asked and (for `auto`) when the endpoint
/// answers; says why not otherwise.
fn start_scraper(
    cfg: &RunConfig,
    opts: &RunOptions,
    start: u64,
) -> (Option<scrape::Scraper>, Option<String>) {
    let interval = Duration::from_secs_f64(cfg.server_metrics.interval_s);
    let urls = match &cfg.server_metrics.targets {
        scrape::Targets::Off => return (None, None),
        scrape::Targets::Urls(u) => u.clone(),
        scrape::Targets::Auto if opts.in_process_metrics.is_some() => {
            let source = opts.in_process_metrics.clone().expect("checked");
            let label = format!("{} (read in process)", scrape::metrics_url(&cfg.url));
            return match scrape::Scraper::start_in_process(source, label, interval, start) {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(format!("cannot start the scraper: {e}"))),
            };
        }
        scrape::Targets::Auto => {
            let url = scrape::metrics_url(&cfg.url);
            if let Err(why) = scrape::answers(cfg.server(), &url) {
                let shown = crate::net::client::redact_url(&url);
                return (None, Some(format!("no server metrics at {shown}: {why}")));
            }
            vec![url]
        }
    };
    match scrape::Scraper::start(cfg.server(), urls, interval, start) {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(format!("cannot start the scraper: {e}"))),
    }
}

/// The server's side of a finished run, its split against the run's measured span.
fn server_view(rep: &RunReport, s: &scrape::Scrapes) -> scrape::view::ServerView {
    let m = &rep.merged;
    let from = m.measured_from_ns.or(m.first_send_ns).unwrap_or(0);
    let to = m.last_end_ns.unwrap_or(from);
    let t = &rep.ttft;
    let client = scrape::view::ClientSide {
        ttft_mean_s: t.from_intended.mean_s,
        send_lag_mean_s: t.from_intended.mean_s - t.from_actual.mean_s,
        completed: rep.accounting.completed.saturating_sub(m.warmup.completed) as f64,
        span_s: rep.duration_s,
    };
    scrape::view::view(s, &m.series, from, to, client)
}

fn spawn_process(exe: &PathBuf, task: &ShardTask) -> Result<std::process::Child, ShardError> {
    let mut child = Command::new(exe)
        .arg("__shard")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ShardError::Spawn {
            exe: exe.clone(),
            source,
        })?;
    let json = serde_json::to_vec(task).map_err(|e| ShardError::Handover(e.to_string()))?;
    child
        .stdin
        .take()
        .ok_or_else(|| ShardError::Handover("the process has no stdin".into()))?
        .write_all(&json)
        .map_err(|e| ShardError::Handover(e.to_string()))?;
    Ok(child)
}

fn wait_process(child: std::process::Child) -> Result<ShardResult, ShardError> {
    let out = child.wait_with_output().map_err(ShardError::Failed)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(ShardError::Exited {
            status: out.status,
            last_line: err.lines().last().unwrap_or("").trim().to_string(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(ShardError::Unreadable)
}

/// Why a shard worker process could not do its task.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// It could not ask to die with its parent.
    #[error("cannot follow the parent process")]
    Parent(#[source] std::io::Error),
    /// The parent was gone before the shard started.
    #[error("the parent exited before the shard started")]
    Orphaned,
    /// The task could not be read from stdin, or the result written to stdout.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// What stdin held is not a shard task.
    #[error("bad shard task")]
    Task(#[source] serde_json::Error),
}

/// The hidden worker's main: a task on stdin, the result on stdout. The worker dies with
/// its parent (SIGTERM, so it stops like a Ctrl-C: nothing more is sent) and stops on
/// SIGINT or SIGTERM with a result.
pub fn shard_process_main() -> Result<(), WorkerError> {
    let parent = getppid();
    set_parent_process_death_signal(Some(Signal::TERM))
        .map_err(|e| WorkerError::Parent(e.into()))?;
    if getppid() != parent {
        return Err(WorkerError::Orphaned);
    }
    let stop = StopSignal::new();
    listen_for_signals(stop.clone(), false)?;
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input)?;
    let task: ShardTask = serde_json::from_slice(&input).map_err(WorkerError::Task)?;
    if task.crash_halfway {
        let wait = slice_duration_ns(&task.config) / 2;
        std::thread::sleep(std::time::Duration::from_nanos(
            task.start_mono_ns.saturating_sub(mono_ns()) + wait,
        ));
        std::process::abort();
    }
    let result = run_shard(&task, &stop)?;
    let json = serde_json::to_vec(&result).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&json)?;
    out.flush()?;
    Ok(())
}

fn slice_duration_ns(cfg: &RunConfig) -> u64 {
    match cfg.workload.stop {
        Stop::Duration { seconds } => (seconds * 1e9) as u64,
        Stop::Count { requests } => {
            let rate = cfg.workload.arrivals.rate_per_s().unwrap_or(1.0);
            (requests as f64 / rate * 1e9) as u64
        }
    }
}

/// Merges shard outcomes into the report; failed shards' slices count as lost.
pub fn report(
    cfg: &RunConfig,
    opts: &RunOptions,
    outcomes: impl IntoIterator<Item = Result<ShardResult, ShardError>>,
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
                    error: Some(e.to_string()),
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
    let failed: std::collections::BTreeMap<Outcome, u64> = merged
        .outcomes
        .iter()
        .filter(|(k, _)| k.is_failure())
        .map(|(k, v)| (*k, *v))
        .collect();
    // Checked sums: counters from files may be anything, and a wrapped sum must not read
    // as balanced.
    let ended = merged
        .outcomes
        .values()
        .try_fold(0u64, |a, b| a.checked_add(*b));
    let scheduled = merged.scheduled.checked_add(lost);
    let not_sent = ended
        .and_then(|e| merged.scheduled.checked_sub(e))
        .and_then(|n| n.checked_add(merged.not_sent));
    let failed_sum = failed.values().try_fold(0u64, |a, b| a.checked_add(*b));
    let accounted = [
        Some(completed),
        failed_sum,
        Some(timed_out),
        not_sent,
        Some(lost),
    ]
    .into_iter()
    .try_fold(0u64, |a, b| b.and_then(|b| a.checked_add(b)));
    let balanced = scheduled.is_some() && scheduled == accounted;
    let scheduled = scheduled.unwrap_or(u64::MAX);
    let not_sent = not_sent.unwrap_or(0);
    // The measured part of the run starts at its first send past the warm-up (reports
    // written before there was a warm-up have only the first send).
    let measured_from = merged.measured_from_ns.or(merged.first_send_ns);
    let duration_s = match (measured_from, merged.last_end_ns) {
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
    let per_s = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };
    let n = completed.saturating_sub(merged.warmup.completed).max(1) as f64;
    let rec = &merged.recorders;
    let steady = steady_state(&merged.series);
    let tpot = rec.tpot.summary();
    let rate = |t: f64| (t > 0.0).then(|| 1.0 / t);
    // The server's usage where it sent one, else the tokenizer's count of the text.
    let tokens_per_chunk = if merged.usage_chunks > 0 {
        Some((
            merged.tokens_usage as f64 / merged.usage_chunks as f64,
            TokenCounter::Usage,
        ))
    } else {
        (merged.tokenizer_chunks > 0).then(|| {
            (
                merged.tokens_tokenizer as f64 / merged.tokenizer_chunks as f64,
                TokenCounter::Tokenizer,
            )
        })
    };
    let throughput = Throughput {
        output_tokens: merged.output_tokens,
        input_tokens: merged.prompt_tokens_sent,
        output_tokens_per_s: per_s(merged.output_tokens),
        input_tokens_per_s: per_s(merged.prompt_tokens_sent),
        total_tokens_per_s: per_s(
            merged
                .output_tokens
                .saturating_add(merged.prompt_tokens_sent),
        ),
        peak_output_tokens_per_s: merged
            .series
            .windows
            .iter()
            .map(|w| w.output_tokens)
            .max()
            .unwrap_or(0) as f64,
        per_request_output_tokens_per_s_p50: rate(tpot.p50_s),
        per_request_output_tokens_per_s_p1: rate(tpot.p99_s),
        tokens_per_chunk: tokens_per_chunk.map(|(k, _)| k),
        tokens_per_chunk_by: tokens_per_chunk.map(|(_, by)| by),
    };
    let goodput = cfg
        .slo
        .map(|slo| Goodput::from_counts(&slo, &merged.slo, None, per_s));
    let warmup = cfg.warmup.map(|w| WarmupReport {
        warmup: w,
        requests: merged.warmup.requests,
        completed: merged.warmup.completed,
    });
    RunReport {
        version: REPORT_VERSION,
        kind: "live".into(),
        config: cfg.redacted(),
        plan_hash: cfg.plan_hash(),
        shards_reasoning: opts.shards_reasoning.clone(),
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
        achieved_qps: per_s(completed.saturating_sub(merged.warmup.completed)),
        sending: Some(sending(cfg, &merged)),
        duration_s,
        send_lag: rec.send_lag.summary(),
        send_stages: rec.send_stages.summary(),
        ttft: Origins {
            from_intended: rec.ttft_intended.summary(),
            from_actual: rec.ttft_actual.summary(),
        },
        ttft_after_processing: rec.ttft_processed.summary(),
        ttft_by_turn: merged
            .ttft_by_turn
            .iter()
            .map(heisenbench_model::stats::Recorder::summary)
            .collect(),
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
        ntpot_parts_mean: NtpotParts::mean(merged.ntpot_parts_sum, n),
        observer_overhead: rec.observer_overhead.summary(),
        processing: rec.processing.summary(),
        read_lag: rec.read_lag.summary(),
        tokens_stream: merged.tokens_stream,
        tokens_usage: merged.tokens_usage,
        token_mismatches: merged.token_mismatches,
        prompt_tokens: merged.prompt_check(),
        prefix_cache: merged.prefix_cache,
        events: merged.events,
        interrupted: merged.interrupted,
        floor: None,
        throughput,
        goodput,
        warmup,
        saturated: steady.as_ref().and_then(|s| s.saturated.clone()),
        steady_state: steady,
        series: merged.series.points(),
        machine: None,
        server: None,
        server_note: None,
        start_monotonic_ns: None,
        merged,
    }
}

/// What left when: sent requests over the schedule's length, and the share on time.
fn sending(cfg: &RunConfig, merged: &ShardResult) -> result::Sending {
    let sent: u64 = merged.series.windows.iter().map(|w| w.sent).sum();
    let closed = matches!(cfg.workload.arrivals, Arrivals::Closed { .. });
    let span_s = slice_duration_ns(cfg) as f64 * 1e-9;
    result::Sending {
        sent,
        sent_qps: (!closed && span_s > 0.0).then(|| sent as f64 / span_s),
        on_time: merged
            .recorders
            .send_lag
            .fraction_at_most((result::ON_TIME_S * 1e9) as u64),
    }
}

/// A median's growth that counts as a trend, besides doubling (seconds): below it, a
/// series of microseconds that doubles is noise, not saturation.
const GROWTH_FLOOR_S: f64 = 5e-3;

/// Whether the run settled, from the medians of its whole windows' TTFT and send lag
/// (windows in which requests were offered, the last, partial one left out).
fn steady_state(series: &Series) -> Option<SteadyState> {
    let last = series.windows.iter().rposition(|w| w.offered > 0)?;
    let whole = &series.windows[..last];
    let median = |h: &heisenbench_model::stats::LogHist| h.quantile(0.5).map(|ns| ns * 1e-9);
    let ttft: Vec<f64> = whole.iter().filter_map(|w| median(&w.ttft)).collect();
    let lag: Vec<f64> = whole.iter().filter_map(|w| median(&w.send_lag)).collect();
    let t = mser(&ttft)?;
    let trend = |x: &[f64]| mser(x).is_some_and(|t| !t.settled) && grew(x, 2.0, GROWTH_FLOOR_S);
    let mut growing = Vec::new();
    if trend(&lag) {
        growing.push("send lag".to_string());
    }
    if trend(&ttft) {
        growing.push("ttft".to_string());
    }
    let saturated = if trend(&lag) {
        Some("the generator: its send lag grew through the run (TTFT from the intended send grows with it)".to_string())
    } else if trend(&ttft) {
        Some("the server: TTFT grew through the run while the send lag held".to_string())
    } else {
        None
    };
    Some(SteadyState {
        windows: ttft.len(),
        transient_windows: t.delete,
        settled: t.settled,
        growing,
        saturated,
    })
}
