//! Auditing another benchmark client against a server whose truth is known.
//!
//! The audit starts the embedded mock (zero latency unless told otherwise) recording every
//! generation request it answers ([`crate::mock::Journal`]), runs the client command as a
//! child process with placeholders filled in, and follows the client's process tree for
//! CPU time ([`tree`]). When the client ends, three things are on the table: the server's
//! truth (arrivals, first and last token handed to the connection), the client's CPU, and
//! the client's own report ([`adapters`]). [`predict`] holds them against the queueing
//! model of the client's loop.

pub mod adapters;
pub mod gauge;
pub mod predict;
pub mod report;
pub mod tree;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use heisenbench_model::interval::SampleInterval;
use heisenbench_model::stats::{Dist, Recorder};
use serde::{Deserialize, Serialize};

use crate::mock::config::MockConfig;
use crate::mock::{MockError, MockServer, Served};
use crate::time::thread_cpu_ns;
use adapters::{ClientStamps, Reported, RequestKey};

/// The placeholders a client command may hold, and what each becomes.
pub const PLACEHOLDERS: [(&str, &str); 10] = [
    ("{url}", "the mock's base URL, http://127.0.0.1:PORT"),
    ("{host}", "the mock's address"),
    ("{port}", "the mock's port"),
    ("{model}", "the model name the mock serves"),
    ("{rate}", "the offered request rate, per second"),
    ("{duration}", "the offered duration, whole seconds"),
    ("{requests}", "rate x duration, rounded: the request count"),
    ("{prompt_tokens}", "prompt tokens per request"),
    ("{output_tokens}", "output tokens per request"),
    ("{out}", "a directory for the client's results"),
];

/// What to audit.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// The client command and its arguments, with placeholders.
    pub command: Vec<String>,
    /// Offered request rate, per second.
    pub rate_per_s: f64,
    /// Offered duration.
    pub duration: Duration,
    /// Prompt tokens per request.
    pub prompt_tokens: u32,
    /// Output tokens per request.
    pub output_tokens: u32,
    /// Where the client's results (`{out}`) and its output logs go.
    pub work_dir: PathBuf,
    /// The client is stopped after this long.
    pub timeout: Duration,
    /// How often the process tree is read.
    pub sample_every: Duration,
    /// The server.
    pub mock: MockConfig,
    /// Measure the wire after the client ends ([`Wire`], [`WIRE_S`] seconds).
    pub wire: bool,
    /// Stops the audit (a signal): the client's whole process tree is killed at once,
    /// whether or not it heeds signals itself.
    pub stop: crate::generator::stop::StopSignal,
}

impl AuditConfig {
    /// How long a client may take when no timeout is given: three times the offered
    /// duration (start-up, a slow client's backlog, its report) plus a minute.
    pub fn default_timeout(duration: Duration) -> Duration {
        duration * 3 + Duration::from_secs(60)
    }

    /// A new folder name under the system's temporary directory for an audit's results.
    /// Unique per audit, not only per process: audits keep their folders, and a process id
    /// comes round again, so an earlier audit's results would reach a client that wrote
    /// none.
    pub fn fresh_work_dir() -> PathBuf {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::env::temp_dir().join(format!("heisenbench-audit-{}-{now}", std::process::id()))
    }
}

/// Why an audit could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The mock did not start.
    #[error(transparent)]
    Mock(#[from] MockError),
    /// The client command could not be started.
    #[error("cannot start the client `{program}`: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The work directory could not be prepared.
    #[error("cannot prepare {path}: {source}")]
    Work {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No command was given.
    #[error("no client command: give it after `--`")]
    NoCommand,
    /// Stopped by a signal: the client's process tree was killed.
    #[error("stopped before the client finished: its process tree was killed")]
    Interrupted,
    /// The client's output folder holds files from before this audit, which would be read
    /// as this client's results.
    #[error("{0} already holds files from an earlier audit: empty it or choose another --work-dir")]
    StaleOutput(PathBuf),
}

/// The load the client was asked to offer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    /// Requests per second.
    pub rate_per_s: f64,
    /// Seconds.
    pub duration_s: f64,
    /// Prompt tokens per request.
    pub prompt_tokens: u32,
    /// Output tokens per request.
    pub output_tokens: u32,
}

/// How the client process ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRun {
    /// The command run, placeholders filled in.
    pub command: Vec<String>,
    /// Exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether the audit stopped it at the timeout.
    pub timed_out: bool,
    /// From start to end, seconds.
    pub wall_s: f64,
    /// CPU time of the whole process tree, seconds (`None`: not measurable here).
    pub cpu_s: Option<f64>,
    /// The load window: from the first request's arrival to the last token handed over,
    /// seconds.
    pub window_s: f64,
    /// CPU time of the tree inside the load window, seconds: the work of the load, without
    /// start-up and shut-down.
    pub window_cpu_s: Option<f64>,
    /// Largest number of processes alive at once.
    pub max_processes: usize,
    /// Largest number of threads alive at once.
    pub max_threads: u64,
    /// Processes seen over the run.
    pub processes_seen: usize,
    /// Processes that each spent at least a tenth of the tree's CPU inside the load window:
    /// the client's loops, unless told otherwise.
    pub busy_processes: u32,
    /// CPU inside the load window per process, seconds, largest first.
    pub window_cpu_per_process_s: Vec<f64>,
    /// CPU the audit spent reading the tree, seconds.
    pub sampler_cpu_s: f64,
    /// Tree readings taken.
    pub samples: u64,
    /// Descendants still running when the client ended, stopped by the audit.
    pub left_running: usize,
    /// How the busiest process's CPU varied from one tree reading to the next inside the
    /// load window (None where the kernel keeps no scheduler statistics or the window held
    /// fewer than ten readings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_spread: Option<WorkSpread>,
    /// How long the busiest process's main thread waited for a core per unit of its CPU
    /// in the load window (`/proc/PID/schedstat`): where the client's loop, the mock and
    /// the audit share too few cores, a wait the simulated loop does not hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_core_wait: Option<f64>,
    /// How long that thread waited for a core each time it was put on one, on average,
    /// seconds: mostly the wait of a loop woken by work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_wait_per_turn_s: Option<f64>,
    /// That thread's CPU in the load window, in cores (where the process's CPU holds
    /// other threads, it is less than the process's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_main_cores: Option<f64>,
    /// The share of that thread's turns on a core that followed a preemption (it lost its
    /// core while it could still run) rather than a sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_preempted_share: Option<f64>,
    /// The processes that held the client's connections to the server in the load window:
    /// the ones that read its answers and stamp them (None where not read, or in files
    /// written before they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected: Option<Connected>,
    /// The whole machine's cores and how many were busy on average in the load window
    /// (`/proc/stat`): the client, the mock, the audit and anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineLoad>,
    /// The audit's own process's CPU in the load window, in cores: the mock's threads and
    /// the sampler (with the tree's CPU, all the work this audit put on the machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_cores: Option<f64>,
    /// The machine's speed in the load window: a fixed unit of work timed beside the
    /// client ([`gauge`]; None where the window held too few units, and in audits made
    /// before it was gauged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gauge: Option<gauge::MachineGauge>,
    /// Where the client's standard output and error went.
    pub logs: [PathBuf; 2],
}

/// The processes that held a client's connections to the server in an audit's load
/// window, read from `/proc/net/tcp` and each process's descriptors every tenth tree
/// reading. A client whose coordinator hands requests to worker processes has its chunks
/// read, and stamped, in the workers: their loops are the ones a chunk waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connected {
    /// How many processes held connections.
    pub processes: u32,
    /// The connections they held (each process at its reading with the most).
    pub connections: u32,
    /// Each one's CPU in the load window, seconds, largest first.
    pub window_cpu_per_process_s: Vec<f64>,
    /// Whether the tree's busiest process is one of them.
    pub holds_busiest: bool,
    /// Their main threads' CPU, cores, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_cores: Option<f64>,
    /// How often their main threads were put on a core, a second, summed: each time one
    /// woke from a sleep, or came back after losing its core. Where the loop's CPU a
    /// request falls as it fills, this falls with it (it sleeps less).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_per_s: Option<f64>,
    /// Their main threads' wait for a core each time one was put on a core, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_per_turn_s: Option<f64>,
    /// The share of those turns that followed a preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_share: Option<f64>,
    /// Their main threads' wait for a core per unit of their CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_wait: Option<f64>,
    /// How the busiest one's main thread's CPU varied from one tree reading to the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<WorkSpread>,
}

impl Connected {
    /// Their CPU in the load window, seconds.
    pub fn window_cpu_s(&self) -> f64 {
        self.window_cpu_per_process_s.iter().sum()
    }

    /// The loops they make for a model that deals requests out evenly: as many as would
    /// each carry the busiest one's CPU (their total over the busiest one's, rounded; 1 to
    /// their number). A worker that held a connection and did little (AIPerf's second) is
    /// not a loop taking half the requests; ten workers sharing the load evenly are ten.
    pub fn loops(&self) -> u32 {
        let busiest = self
            .window_cpu_per_process_s
            .first()
            .copied()
            .unwrap_or(0.0);
        if busiest <= 0.0 {
            return self.processes.max(1);
        }
        ((self.window_cpu_s() / busiest).round() as u32).clamp(1, self.processes.max(1))
    }
}

/// The whole machine's CPU in an audit's load window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    /// Cores.
    pub cores: u32,
    /// Cores busy on average.
    pub busy_cores: f64,
}

impl MachineLoad {
    /// Above this share of its cores busy, the machine is the client's bottleneck as much
    /// as its loop: runnable loops wait for a core, not only loops that wake.
    pub const CROWDED: f64 = 0.9;

    /// The share of the cores busy.
    pub fn share(&self) -> f64 {
        self.busy_cores / f64::from(self.cores.max(1))
    }

    /// Whether the cores were nearly all busy ([`MachineLoad::CROWDED`]).
    pub fn crowded(&self) -> bool {
        self.share() >= Self::CROWDED
    }
}

impl ClientRun {
    /// Whether the client ended by itself with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The client's ending in words.
    pub fn ending(&self) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, _, _) => "stopped by the audit at the timeout".into(),
            (_, Some(0), _) => "exited with status 0".into(),
            (_, Some(c), _) => format!("exited with status {c}"),
            (_, None, Some(s)) => format!("ended by signal {s}"),
            _ => "ended".into(),
        }
    }
}

/// The busiest process's CPU per interval between tree readings, in cores: with the arrival
/// rate and the cost of a request, the variability of a request's work
/// ([`heisenbench_model::client_loop::CpuSpread`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkSpread {
    /// The mean interval, seconds.
    pub interval_s: f64,
    /// Intervals read.
    pub intervals: u32,
    /// Mean CPU over the intervals, cores.
    pub mean_cores: f64,
    /// Variance of the CPU per interval, cores squared.
    pub variance_cores2: f64,
}

impl WorkSpread {
    /// Of `(interval, CPU in it)` pairs in nanoseconds; None for fewer than ten.
    pub fn of(intervals: &[(u64, u64)]) -> Option<Self> {
        let kept: Vec<(f64, f64)> = intervals
            .iter()
            .filter(|(dt, _)| *dt > 0)
            .map(|(dt, cpu)| (*dt as f64 * 1e-9, *cpu as f64 / *dt as f64))
            .collect();
        if kept.len() < 10 {
            return None;
        }
        let n = kept.len() as f64;
        let mean_cores = kept.iter().map(|(_, c)| c).sum::<f64>() / n;
        let variance_cores2 = kept
            .iter()
            .map(|(_, c)| (c - mean_cores).powi(2))
            .sum::<f64>()
            / (n - 1.0);
        Some(Self {
            interval_s: kept.iter().map(|(dt, _)| dt).sum::<f64>() / n,
            intervals: kept.len() as u32,
            mean_cores,
            variance_cores2,
        })
    }

    /// The spread as the cost model reads it: the interval and the variance of the CPU per
    /// interval in seconds squared.
    pub fn cpu_spread(&self) -> heisenbench_model::client_loop::CpuSpread {
        heisenbench_model::client_loop::CpuSpread {
            interval_s: self.interval_s,
            variance_s2: self.variance_cores2 * self.interval_s * self.interval_s,
        }
    }
}

/// What the server saw: the truth a client's report is held against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Generation requests received.
    pub requests: u64,
    /// Answered 200 with every token handed over.
    pub completed: u64,
    /// Answers other than 200, by status.
    pub errors: Vec<(u16, u64)>,
    /// Completed requests per second, first to last arrival.
    pub achieved_rate_per_s: f64,
    /// Squared coefficient of variation of the gaps between arrivals (1: Poisson).
    pub arrival_gap_scv: Option<f64>,
    /// Mean tokens per completed request.
    pub tokens_per_request: f64,
    /// Mean prompt tokens per completed request, as the mock counts them (words).
    pub prompt_tokens_per_request: f64,
    /// Tokens handed over in all.
    pub tokens: u64,
    /// The whole request's arrival (its body's end) to the first token handed to the
    /// connection: the server's own latency.
    pub ttft: Dist,
    /// Per request: first to last token over the gaps between them.
    pub itl: Dist,
    /// The whole request's arrival to the last token handed to the connection.
    pub e2e: Dist,
    /// Per completed request: how long its body trailed its head at the server. The
    /// client's own time (it wrote the body apart and later), inside the TTFT it reports
    /// and outside the server's; near zero for a client that writes a request at once.
    /// Audits written before it was recorded read it as empty.
    #[serde(default)]
    pub upload: Dist,
}

impl Truth {
    /// The gaps between the completed requests' arrivals, over which the achieved rate is
    /// read.
    pub fn gaps(&self) -> u64 {
        self.completed.saturating_sub(1)
    }

    /// Reads the journal.
    pub fn of(served: &[Served]) -> Self {
        let mut errors: Vec<(u16, u64)> = Vec::new();
        let (mut ttft, mut itl, mut e2e, mut upload) = (
            Recorder::default(),
            Recorder::default(),
            Recorder::default(),
            Recorder::default(),
        );
        let (mut completed, mut tokens, mut prompt) = (0u64, 0u64, 0u64);
        let mut first_last: Option<(u64, u64)> = None;
        for s in served {
            if s.status != 200 {
                match errors.iter_mut().find(|(c, _)| *c == s.status) {
                    Some((_, n)) => *n += 1,
                    None => errors.push((s.status, 1)),
                }
                continue;
            }
            tokens += u64::from(s.tokens);
            let (Some(first), Some(last), true) = (s.first_token_ns, s.last_token_ns, s.complete)
            else {
                continue;
            };
            completed += 1;
            prompt += u64::from(s.prompt_tokens);
            ttft.record(first.saturating_sub(s.received()));
            e2e.record(last.saturating_sub(s.received()));
            upload.record(s.upload_ns());
            if s.tokens > 1 {
                itl.record(last.saturating_sub(first) / u64::from(s.tokens - 1));
            }
            first_last = Some(match first_last {
                None => (s.arrival_ns, s.arrival_ns),
                Some((a, b)) => (a.min(s.arrival_ns), b.max(s.arrival_ns)),
            });
        }
        errors.sort_unstable();
        let achieved = match first_last {
            Some((a, b)) if b > a && completed > 1 => {
                (completed - 1) as f64 / ((b - a) as f64 * 1e-9)
            }
            _ => 0.0,
        };
        let gaps: Vec<f64> = served
            .windows(2)
            .map(|w| w[1].arrival_ns.saturating_sub(w[0].arrival_ns) as f64)
            .collect();
        let scv = (gaps.len() >= 10).then(|| {
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let v = gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64;
            v / (m * m)
        });
        let per = |x: u64| {
            if completed > 0 {
                x as f64 / completed as f64
            } else {
                0.0
            }
        };
        Self {
            requests: served.len() as u64,
            completed,
            errors,
            achieved_rate_per_s: achieved,
            arrival_gap_scv: scv.filter(|v| v.is_finite()),
            tokens_per_request: per(tokens),
            prompt_tokens_per_request: per(prompt),
            tokens,
            ttft: ttft.summary(),
            itl: itl.summary(),
            e2e: e2e.summary(),
            upload: upload.summary(),
        }
    }
}

/// How long the wire is measured after an audit, seconds.
pub const WIRE_S: f64 = 3.0;

/// The wire between a client and the server on this machine: one way over loopback for
/// a lone message, at the rate the audit's requests reached the server, by the loopback
/// floor's method ([`crate::measure::floor::one_way`]: a 16-byte write on one thread, the
/// kernel's arrival stamp on another). It is what a request costs to reach the server, and
/// a response's first chunk to reach the client, where neither waits for anything but the
/// kernel; larger writes (a request's body, a whole response) take a little longer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wire {
    /// Messages a second it was measured at.
    pub rate_per_s: f64,
    /// The write to the arrival stamp.
    pub one_way: Dist,
}

impl Wire {
    /// Measures it for [`WIRE_S`] at `rate_per_s` (None where the kernel does not stamp
    /// arrivals or the measurement failed).
    pub fn measure(rate_per_s: f64) -> Option<Self> {
        let rate = rate_per_s.max(1.0);
        let one_way = crate::measure::floor::one_way(rate, WIRE_S).ok()?;
        (one_way.count > 0).then_some(Self {
            rate_per_s: rate,
            one_way,
        })
    }
}

/// One audit: the load offered, how the client ran, the server's truth and the client's
/// own report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// The load asked for.
    pub offered: Offered,
    /// The client process.
    pub client: ClientRun,
    /// The server's side.
    pub truth: Truth,
    /// The client's own numbers, when a result file was recognised.
    pub reported: Option<Reported>,
    /// The wire between the client and the server, measured once the client had ended
    /// (None where it was not asked for, or the kernel does not stamp arrivals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<Wire>,
    /// Every request the server answered (for `--out`; empty in summaries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<Served>,
    /// The TTFT the client added request by request, where its results name each request
    /// as the server saw it (None otherwise, and in audits written before it was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_excess: Option<PairedExcess>,
}

/// How far beyond the rate it was offered the server may see a client before its audit
/// counts as not sent on its schedule. Poisson counts over an audit of 500 requests spread
/// by about 4.5 %, so 20 % is past any draw; a client that fell behind and then sent its
/// backlog at once goes far beyond it (vLLM's bench schedules by the wall clock: in r58 it
/// started ten seconds of its schedule within a third of one, with no pause of its loop
/// before them, and the server saw 183 req/s of 100 offered).
pub const OFF_SCHEDULE: f64 = 1.2;

impl Observed {
    /// Why this audit does not read the load it was offered, where it does not: the server
    /// saw more than [`OFF_SCHEDULE`] times the offered rate, so the client sent a backlog
    /// at once and its costs and excess are those of a burst. Falling short is not flagged:
    /// a tool that sleeps each gap sends less than asked at any load.
    pub fn off_schedule(&self) -> Option<String> {
        let (offered, t) = (self.offered.rate_per_s, &self.truth);
        (t.achieved_rate_per_s > OFF_SCHEDULE * offered).then(|| {
            let scv = t
                .arrival_gap_scv
                .map_or(String::new(), |v| format!(", arrival gaps SCV {v:.1}"));
            format!(
                "the audit at {offered} req/s x {} tokens was not sent on its schedule: the server saw \
                 {:.1} req/s{scv}, so its client fell behind and then sent its backlog at once \
                 (a tool that schedules by the wall clock does so when the clock steps forward); \
                 audit it again",
                self.offered.output_tokens, t.achieved_rate_per_s
            )
        })
    }

    /// The audit with the client's records paired with the server's, where they can be.
    fn paired(mut self) -> Self {
        self.paired_excess = self.reported.as_ref().and_then(|r| {
            let (server, displaced) = by_key(&self.served, r.sent);
            let in_order = r.sent == Some(self.served.len() as u64);
            let mut p = PairedExcess::of_keys(&r.ttft_by_id, in_order, &server, displaced)?;
            let own = &r.ttft_from_own_send_by_id;
            p.from_own_send = Some(ttft_differences(own.iter().copied(), &server))
                .filter(|d| enough(d.len(), own.len()))
                .and_then(|d| PairedFigure::of(&d));
            p.legs = Legs::of(&r.stamps_by_id, &server);
            Some(p)
        });
        self
    }

    /// The TTFT the client added: mean, p50, p90 and p99, seconds. Request by request where
    /// its records were paired with the server's ([`PairedExcess`]); else its reported
    /// statistics minus the server's true ones (None where it reports no such figure).
    pub fn ttft_excess_s(&self) -> [Option<f64>; 4] {
        if let Some(p) = &self.paired_excess {
            return [p.mean_s, p.p50_s, p.p90_s, p.p99_s].map(Some);
        }
        let t = &self.truth.ttft;
        let truth = [t.mean_s, t.p50_s, t.p90_s, t.p99_s];
        match self.reported.as_ref().and_then(|r| r.ttft) {
            Some(r) => {
                let rep = [r.mean_s, r.p50_s, r.p90_s, r.p99_s];
                std::array::from_fn(|i| rep[i].map(|x| x - truth[i]))
            }
            None => [None; 4],
        }
    }
}

/// The TTFT a client added to each request, its record paired with the server's record of
/// the same request by a name both kept ([`RequestKey`]), or by the order the client sent
/// them: the statistics of the differences. The difference of two quantiles is not the
/// quantile of the differences: where the server's own TTFT has a tail (a mock starved of a
/// core by the client's processes), the client's p99 minus the server's mixes two sets of
/// requests, and can even come out below the median of what the client added.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedExcess {
    /// Requests paired: in the client's records and answered whole by the server.
    pub paired: u64,
    /// Requests in the client's records.
    pub recorded: u64,
    /// Whether they were paired by the order the client sent them (nothing named them to
    /// the server), not by a name.
    #[serde(default)]
    pub by_order: bool,
    /// Mean of the differences, seconds.
    pub mean_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 90th percentile.
    pub p90_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// The 95 % intervals of the mean and the p99, from the differences in the order the
    /// server received their requests: how far this run's own sampling noise could have
    /// moved them (None with fewer than 200 pairs, and in audits written before it was
    /// read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<SampleInterval>,
    /// Where the client's records are named and in the order it sent them (vLLM's bench),
    /// what pairing by that order alone would have given: how far to trust it for the
    /// tools that leave nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_check: Option<OrderCheck>,
    /// The same requests' excess with the client's TTFT counted from its own send, where
    /// it counts from the intended send and its records say when it sent (heisenbench's):
    /// what it added beyond its own lateness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_own_send: Option<PairedFigure>,
    /// That excess from its own send taken apart, where the client's stamps and the
    /// server's share a clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legs: Option<Legs>,
}

/// Pairing by send order held against pairing by name, on the same requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OrderCheck {
    /// Requests whose place among the server's arrivals was not their place in the order
    /// the client sent them (close sends that overtook each other on the way).
    pub displaced: u64,
    /// The mean of the differences paired by order, seconds.
    pub mean_s: f64,
    /// Their 99th percentile.
    pub p99_s: f64,
}

/// One figure read request by request from paired records: seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedFigure {
    /// Requests paired.
    pub paired: u64,
    /// Mean.
    pub mean_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// The 95 % intervals of the mean and the p99, as [`PairedExcess::interval`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<SampleInterval>,
}

impl PairedFigure {
    /// The figure of `in_arrival_order` (the requests in the order the server received
    /// them). None where it is empty.
    fn of(in_arrival_order: &[f64]) -> Option<Self> {
        if in_arrival_order.is_empty() {
            return None;
        }
        let mut sorted = in_arrival_order.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self {
            paired: sorted.len() as u64,
            mean_s: mean(&sorted),
            p99_s: nearest_rank(&sorted, 0.99),
            interval: SampleInterval::of(in_arrival_order, 0.99),
        })
    }
}

/// A client's TTFT excess from its own send, taken apart request by request on the clock
/// it shares with the server (a client on the server's machine that says where its times
/// stand on CLOCK_MONOTONIC: heisenbench). The two add up to that excess.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Legs {
    /// The client's send to the server's having the whole request: the client's own path
    /// before its write, and the wire.
    pub request: PairedFigure,
    /// The server's first token handed to the connection to the client's stamp of it: the
    /// wire, and whatever lies between the server's stamp and its write.
    pub response: PairedFigure,
    /// Of the request's way, the client's own path from its send to the start of its
    /// write, where it says when that began (heisenbench's own reader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_write: Option<PairedFigure>,
    /// The rest of the request's way: the start of the client's write to the server's
    /// having the request, what the wire one way measures for a lone message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_write: Option<PairedFigure>,
}

impl Legs {
    /// Pairs `stamps` (what names each request; its send and its first token's stamp on
    /// the server's clock) with the server's records. None where fewer than nine in ten
    /// pair, as [`PairedExcess::of`].
    fn of(stamps: &[(RequestKey, ClientStamps)], server: &ByKey) -> Option<Self> {
        let ns = |later: u64, earlier: u64| (later as f64 - earlier as f64) * 1e-9;
        let mut legs: Vec<(u64, f64, f64, Option<f64>)> = stamps
            .iter()
            .filter_map(|(key, c)| {
                let (s, place) = (*server.get(key)?)?;
                Some((
                    place,
                    ns(s.received(), c.sent_ns),
                    ns(c.first_ns, s.first_token_ns?),
                    c.write_ns.map(|w| ns(w, c.sent_ns)),
                ))
            })
            .collect();
        if !enough(legs.len(), stamps.len()) {
            return None;
        }
        legs.sort_by_key(|l| l.0);
        let request: Vec<f64> = legs.iter().map(|l| l.1).collect();
        let response: Vec<f64> = legs.iter().map(|l| l.2).collect();
        let before_write: Option<Vec<f64>> = legs.iter().map(|l| l.3).collect();
        let after_write: Option<Vec<f64>> = before_write
            .as_ref()
            .map(|b| request.iter().zip(b).map(|(r, b)| r - b).collect());
        Some(Self {
            request: PairedFigure::of(&request)?,
            response: PairedFigure::of(&response)?,
            before_write: before_write.and_then(|b| PairedFigure::of(&b)),
            after_write: after_write.and_then(|a| PairedFigure::of(&a)),
        })
    }
}

/// Each record of `records` (what names a request, the client's TTFT in seconds) that
/// names a finished request of the server's, less the server's own TTFT: in the order the
/// server received the requests.
fn ttft_differences(records: impl Iterator<Item = (RequestKey, f64)>, server: &ByKey) -> Vec<f64> {
    let mut d: Vec<(u64, f64)> = records
        .filter_map(|(key, ttft_s)| {
            let (s, place) = (*server.get(&key)?)?;
            let ttft_ns = s.first_token_ns?.saturating_sub(s.received());
            Some((place, ttft_s - ttft_ns as f64 * 1e-9))
        })
        .collect();
    d.sort_by_key(|(place, _)| *place);
    d.into_iter().map(|(_, x)| x).collect()
}

/// Whether `paired` of `recorded` records are enough to describe them: some, and nine in
/// ten at least (fewer: the names are not the server's, and the differences would
/// describe a chosen few).
fn enough(paired: usize, recorded: usize) -> bool {
    paired > 0 && paired * 10 >= recorded * 9
}

/// The server's finished requests by the keys that name them, each with its place among
/// the arrivals (None: a key two requests share).
type ByKey<'a> = HashMap<RequestKey, Option<(&'a Served, u64)>>;

/// The server's finished requests by every key that names one (a key two requests share
/// names neither), each with its place among the arrivals; and how many requests named by
/// their index arrived out of that place. `sent`: as [`PairedExcess::of`].
fn by_key(served: &[Served], sent: Option<u64>) -> (ByKey<'_>, u64) {
    let mut arrivals: Vec<&Served> = served.iter().collect();
    arrivals.sort_by_key(|s| (s.arrival_ns, s.received()));
    let in_order = sent == Some(served.len() as u64);
    let mut server: ByKey = HashMap::new();
    let mut displaced = 0;
    for (place, s) in arrivals.into_iter().enumerate() {
        let place = place as u64;
        let index = s.request_tag.and_then(|t| t.index);
        displaced += u64::from(index.is_some_and(|i| i != place));
        if !(s.first_token_ns.is_some() && s.status == 200 && s.complete) {
            continue;
        }
        let keys = [
            s.id.map(RequestKey::Response),
            s.request_tag.map(|t| RequestKey::RequestId(t.hash)),
            index.map(RequestKey::RequestIndex),
            in_order.then_some(RequestKey::Sent(place)),
        ];
        for k in keys.into_iter().flatten() {
            server
                .entry(k)
                .and_modify(|t| *t = None)
                .or_insert(Some((s, place)));
        }
    }
    (server, displaced)
}

impl PairedExcess {
    /// Pairs `recorded` (what names each request, the client's TTFT in seconds) with the
    /// server's records; `sent` is how many requests the client sent where its records give
    /// their order ([`RequestKey::Sent`]), which pair with the server's arrivals in order
    /// only when the server saw exactly that many. None where fewer than nine in ten of the
    /// records pair: the names are not the server's, and the differences would describe a
    /// chosen few.
    pub fn of(
        recorded: &[(RequestKey, f64)],
        sent: Option<u64>,
        served: &[Served],
    ) -> Option<Self> {
        let (server, displaced) = by_key(served, sent);
        Self::of_keys(
            recorded,
            sent == Some(served.len() as u64),
            &server,
            displaced,
        )
    }

    /// [`PairedExcess::of`] on the server's requests by key; `in_order`: they carry their
    /// place among the arrivals as [`RequestKey::Sent`] too, of which `displaced` arrived
    /// out of their index's place.
    fn of_keys(
        recorded: &[(RequestKey, f64)],
        in_order: bool,
        server: &ByKey,
        displaced: u64,
    ) -> Option<Self> {
        let arrived = ttft_differences(recorded.iter().copied(), server);
        if !enough(arrived.len(), recorded.len()) {
            return None;
        }
        let interval = SampleInterval::of(&arrived, 0.99);
        let mut d = arrived;
        d.sort_by(f64::total_cmp);
        let order_check = in_order
            .then(|| {
                let as_sent = recorded.iter().filter_map(|(k, t)| match k {
                    RequestKey::RequestIndex(i) => Some((RequestKey::Sent(*i), *t)),
                    _ => None,
                });
                let mut by_order = ttft_differences(as_sent, server);
                by_order.sort_by(f64::total_cmp);
                (by_order.len() == d.len()).then(|| OrderCheck {
                    displaced,
                    mean_s: mean(&by_order),
                    p99_s: nearest_rank(&by_order, 0.99),
                })
            })
            .flatten();
        Some(Self {
            paired: d.len() as u64,
            recorded: recorded.len() as u64,
            by_order: recorded
                .iter()
                .any(|(k, _)| matches!(k, RequestKey::Sent(_))),
            mean_s: mean(&d),
            p50_s: nearest_rank(&d, 0.5),
            p90_s: nearest_rank(&d, 0.9),
            p99_s: nearest_rank(&d, 0.99),
            interval,
            order_check,
            from_own_send: None,
            legs: None,
        })
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The smallest of `sorted` (not empty) with at least `q` of them at or below it.
pub(crate) fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Fills the placeholders of one argument.
pub fn substitute(arg: &str, values: &[(&str, String)]) -> String {
    let mut s = arg.to_string();
    for (k, v) in values {
        if s.contains(k) {
            s = s.replace(k, v);
        }
    }
    s
}

/// Runs the audit: the mock, the client, the sampling, the collection.
pub fn run(cfg: &AuditConfig) -> Result<Observed, AuditError> {
    if cfg.command.is_empty() {
        return Err(AuditError::NoCommand);
    }
    let work = |path: PathBuf| move |source| AuditError::Work { path, source };
    let out_dir = cfg.work_dir.join("client-out");
    std::fs::create_dir_all(&out_dir).map_err(work(out_dir.clone()))?;
    // Whatever the folder holds is read as this client's results afterwards: it must
    // start empty.
    let mut entries = std::fs::read_dir(&out_dir).map_err(work(out_dir.clone()))?;
    if entries.next().is_some() {
        return Err(AuditError::StaleOutput(out_dir));
    }
    let (server, journal) = MockServer::start_recorded(cfg.mock.clone())?;
    let addr = server.addr();
    let values = [
        ("{url}", server.url()),
        ("{host}", addr.ip().to_string()),
        ("{port}", addr.port().to_string()),
        ("{model}", cfg.mock.model.clone()),
        ("{rate}", fmt_number(cfg.rate_per_s)),
        (
            "{duration}",
            format!("{}", cfg.duration.as_secs_f64().round() as u64),
        ),
        (
            "{requests}",
            format!(
                "{}",
                (cfg.rate_per_s * cfg.duration.as_secs_f64()).round() as u64
            ),
        ),
        ("{prompt_tokens}", cfg.prompt_tokens.to_string()),
        ("{output_tokens}", cfg.output_tokens.to_string()),
        ("{out}", out_dir.display().to_string()),
    ];
    let argv: Vec<String> = cfg.command.iter().map(|a| substitute(a, &values)).collect();
    let logs = [
        cfg.work_dir.join("client.stdout"),
        cfg.work_dir.join("client.stderr"),
    ];
    let stdout = File::create(&logs[0]).map_err(work(logs[0].clone()))?;
    let stderr = File::create(&logs[1]).map_err(work(logs[1].clone()))?;
    let mut sampler = tree::TreeSampler::new();
    sampler.follow_connections_to(addr.port());
    let gauge = gauge::Gauge::start();
    let start = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|source| AuditError::Start {
            program: argv[0].clone(),
            source,
        })?;
    let pid = child.id() as i32;
    let mut sampler_ns = 0u64;
    let mut timed_out = false;
    let status: Option<ExitStatus> = loop {
        let t0 = thread_cpu_ns();
        sampler.sample();
        sampler.reap_orphans(pid);
        let ended = tree::is_zombie(pid);
        if ended {
            sampler.record_final(pid);
        }
        sampler_ns += thread_cpu_ns().saturating_sub(t0);
        if (ended || !tree::available())
            && let Ok(Some(s)) = child.try_wait()
        {
            break Some(s);
        }
        if cfg.stop.is_stopped() {
            // Killed whole, now: a client that ignores SIGINT would otherwise run on to
            // the timeout, and its children past the audit.
            sampler.sample();
            for p in sampler.live_pids() {
                kill(p);
            }
            let _ = child.wait();
            server.shutdown();
            return Err(AuditError::Interrupted);
        }
        if start.elapsed() >= cfg.timeout {
            timed_out = true;
            sampler.sample();
            for p in sampler.live_pids() {
                kill(p);
            }
            break child.wait().ok();
        }
        std::thread::sleep(cfg.sample_every);
    };
    let wall = start.elapsed();
    let gauged = gauge.stop();
    // Descendants the client left behind are stopped; their time so far counts.
    sampler.sample();
    let left = sampler.live_pids();
    for p in &left {
        kill(*p);
    }
    if !left.is_empty() {
        std::thread::sleep(Duration::from_millis(50));
        sampler.reap_orphans(pid);
    }
    // Bodies end when the client's connections close: give the last ones a moment.
    std::thread::sleep(Duration::from_millis(200));
    server.shutdown();
    let served = journal.snapshot();
    let tps = tree::ticks_per_second().max(1) as f64;
    let total = sampler.total_ticks();
    let (from, to) = window(&served);
    let in_window = sampler.window_ticks(from, to);
    let window_total: f64 = in_window.iter().sum();
    let busy = in_window
        .iter()
        .filter(|t| **t * 10.0 >= window_total)
        .count()
        .max(1) as u32;
    let client = ClientRun {
        command: crate::net::secret::redact_args(&argv),
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        timed_out,
        wall_s: wall.as_secs_f64(),
        cpu_s: tree::available().then(|| total as f64 / tps),
        window_s: to.saturating_sub(from) as f64 * 1e-9,
        window_cpu_s: (tree::available() && to > from).then(|| window_total / tps),
        max_processes: sampler.max_processes,
        max_threads: sampler.max_threads,
        processes_seen: sampler.processes_seen(),
        busy_processes: busy,
        window_cpu_per_process_s: in_window.iter().map(|t| t / tps).collect(),
        sampler_cpu_s: sampler_ns as f64 * 1e-9,
        samples: sampler.samples,
        left_running: left.len(),
        busiest_spread: WorkSpread::of(&sampler.busiest_intervals(from, to)),
        busiest_core_wait: sampler.busiest_core_wait(from, to),
        busiest_wait_per_turn_s: sampler.busiest_wait_per_turn(from, to),
        busiest_preempted_share: sampler.busiest_preempted_share(from, to),
        busiest_main_cores: sampler.busiest_main_cores(from, to),
        connected: sampler.connection_holders(from, to),
        machine: sampler
            .machine_busy(from, to)
            .map(|(cores, busy_cores)| MachineLoad { cores, busy_cores }),
        audit_cores: sampler.own_cores(from, to),
        gauge: gauge::MachineGauge::of(&gauged, from, to),
        logs,
    };
    let truth = Truth::of(&served);
    let wire = cfg
        .wire
        .then(|| Wire::measure(truth.achieved_rate_per_s))
        .flatten();
    Ok(Observed {
        offered: Offered {
            rate_per_s: cfg.rate_per_s,
            duration_s: cfg.duration.as_secs_f64(),
            prompt_tokens: cfg.prompt_tokens,
            output_tokens: cfg.output_tokens,
        },
        client,
        truth,
        paired_excess: None,
        reported: adapters::find(&out_dir),
        wire,
        served,
    }
    .paired())
}

/// From the first arrival to the last token handed over (CLOCK_MONOTONIC ns).
fn window(served: &[Served]) -> (u64, u64) {
    let from = served.iter().map(|s| s.arrival_ns).min().unwrap_or(0);
    let to = served
        .iter()
        .map(|s| s.last_token_ns.unwrap_or(s.arrival_ns))
        .max()
        .unwrap_or(0);
    (from, to)
}

/// A rate as a command line wants it: no trailing `.0`.
fn fmt_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn kill(pid: i32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::RequestTag;

    /// A hundred requests whose client added 0, 10, ..., 990 us, ten of them (50-59) also
    /// slow at the server (30 ms): paired by id, the differences come back exactly (mean
    /// 495 us, p99 the 99th smallest, 980 us), where the client's p99 minus the server's
    /// gives about 580 us. Ids that are not the server's pair nothing; a request the
    /// server did not finish does not pair.
    #[test]
    fn the_excess_paired_by_id_is_the_clients_own_request_by_request() {
        let truth_ns = |i: u64| {
            if (50..60).contains(&i) {
                30_000_000
            } else {
                100_000
            }
        };
        let served: Vec<Served> = (0..100u64)
            .map(|i| Served {
                id: Some(i),
                first_token_ns: Some(i * 1_000_000 + truth_ns(i)),
                last_token_ns: Some(i * 1_000_000 + truth_ns(i)),
                ..served(i, 0, 1, 200)
            })
            .collect();
        let recorded: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| {
                let ttft_s = (truth_ns(i) as f64 + i as f64 * 10_000.0) * 1e-9;
                (RequestKey::Response(i), ttft_s)
            })
            .collect();
        let p = PairedExcess::of(&recorded, None, &served).expect("paired");
        assert_eq!((p.paired, p.recorded), (100, 100));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(p.mean_s, 495e-6), "{p:?}");
        assert!(close(p.p50_s, 490e-6), "{p:?}");
        assert!(close(p.p90_s, 890e-6), "{p:?}");
        assert!(close(p.p99_s, 980e-6), "{p:?}");
        // The difference of the two p99s is another number.
        let mut rep: Vec<f64> = recorded.iter().map(|r| r.1).collect();
        rep.sort_by(f64::total_cmp);
        let t = Truth::of(&served);
        assert!((rep[98] - t.ttft.p99_s - p.p99_s).abs() > 300e-6);
        // Ids of another server's pair nothing.
        let foreign: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| (RequestKey::Response(i + 1000), recorded[i as usize].1))
            .collect();
        assert_eq!(PairedExcess::of(&foreign, None, &served), None);
        // The same requests named by the x-request-id they sent (vLLM's bench: a prefix and
        // their place), by its hash or by its number, pair the same way; two requests that
        // end with one number name neither.
        let tagged: Vec<Served> = served
            .iter()
            .map(|s| Served {
                id: None,
                request_tag: s.id.map(|i| RequestTag::of(&format!("bench-1a2b-{i}"))),
                ..*s
            })
            .collect();
        let by_index: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| (RequestKey::RequestIndex(i), recorded[i as usize].1))
            .collect();
        assert_eq!(PairedExcess::of(&by_index, None, &tagged), Some(p));
        let by_hash: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| {
                let hash = RequestTag::of(&format!("bench-1a2b-{i}")).hash;
                (RequestKey::RequestId(hash), recorded[i as usize].1)
            })
            .collect();
        assert_eq!(PairedExcess::of(&by_hash, None, &tagged), Some(p));
        let mut twice = tagged.clone();
        for s in twice.iter_mut().take(20) {
            s.request_tag = Some(RequestTag::of("other-5"));
        }
        assert_eq!(PairedExcess::of(&by_index, None, &twice), None);
        // Unfinished requests do not pair; with eight in a hundred the rest still do.
        let mut cut = served.clone();
        for s in cut.iter_mut().take(8) {
            s.complete = false;
        }
        assert_eq!(
            PairedExcess::of(&recorded, None, &cut).map(|p| p.paired),
            Some(92)
        );
        for s in cut.iter_mut().take(11) {
            s.complete = false;
        }
        assert_eq!(PairedExcess::of(&recorded, None, &cut), None);
    }

    /// The sampling interval reads the differences in the order the server received the
    /// requests, not the order the client listed them: 400 requests, the first 200 to
    /// arrive 1 ms late and the rest 3 ms, listed scrambled. In arrival order the 20
    /// batches' means are 1 and 3 ms: their variance of the mean, 1.0526 / 20 ms², is 21
    /// times the 1.0025 / 400 of independent requests, and the mean's half-width is
    /// t(19) 2.093 x sqrt(1.0526 / 20) = 0.480 ms. In the listed order every batch would
    /// have mixed the two halves, and the half-width would have been about a fifth of it.
    #[test]
    fn the_sampling_interval_follows_the_order_of_arrival() {
        let served: Vec<Served> = (0..400u64)
            .map(|i| Served {
                id: Some(i),
                first_token_ns: Some(i * 1_000_000 + 100_000),
                last_token_ns: Some(i * 1_000_000 + 100_000),
                ..served(i, 0, 1, 200)
            })
            .collect();
        let late_s = |i: u64| if i < 200 { 1e-3 } else { 3e-3 };
        let recorded: Vec<(RequestKey, f64)> = (0..400u64)
            .map(|k| (k * 7) % 400)
            .map(|i| (RequestKey::Response(i), 100e-6 + late_s(i)))
            .collect();
        let p = PairedExcess::of(&recorded, None, &served).expect("paired");
        let i = p.interval.expect("400 pairs give an interval");
        assert!((p.mean_s - 2e-3).abs() < 1e-9, "{p:?}");
        assert!((i.inflation - 21.0).abs() < 0.05, "{i:?}");
        let half = (i.mean[1] - i.mean[0]) / 2.0;
        assert!((half - 0.480e-3).abs() < 0.002e-3, "{i:?}");
        // The p99 is 3 ms whichever way; its interval, at 19 effective requests, reaches
        // past the largest.
        assert!(i.open_above && i.holds_quantile(3e-3), "{i:?}");
        assert!((i.quantile[1] - 3e-3).abs() < 1e-9, "{i:?}");
    }

    /// Requests nothing names pair by the order the client sent them with the order the
    /// server saw them: exactly where none overtook another, not at all where the counts
    /// differ (a warm-up left out of the records would shift every pair by one). Where the
    /// records are named too (vLLM's bench), the check says how many arrived out of place
    /// and what the order alone gives: two requests that swapped on the way exchange their
    /// truths, which leaves the mean and moves the tail.
    #[test]
    fn requests_nothing_names_pair_by_the_order_they_were_sent() {
        // Request i arrives at i ms; the server takes 100 us, 20 ms for request 7; the
        // client adds 1 ms + i us.
        let truth_ns = |i: u64| if i == 7 { 20_000_000 } else { 100_000 };
        let at = |i: u64, arrival_ns: u64| Served {
            arrival_ns,
            received_ns: arrival_ns,
            first_token_ns: Some(arrival_ns + truth_ns(i)),
            last_token_ns: Some(arrival_ns + truth_ns(i)),
            request_tag: Some(RequestTag::of(&format!("bench-{i}"))),
            ..served(i, 0, 1, 200)
        };
        let served: Vec<Served> = (0..100u64).map(|i| at(i, i * 1_000_000)).collect();
        let client_s = |i: u64| truth_ns(i) as f64 * 1e-9 + 1e-3 + i as f64 * 1e-6;
        let sent: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| (RequestKey::Sent(i), client_s(i)))
            .collect();
        let p = PairedExcess::of(&sent, Some(100), &served).expect("paired by order");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(
            p.by_order && p.paired == 100 && p.order_check.is_none(),
            "{p:?}"
        );
        assert!(close(p.mean_s, 1.0495e-3), "{p:?}");
        assert!(close(p.p99_s, 1.098e-3), "{p:?}");
        // The server saw one request more (or the count is unknown): no pairing by order.
        assert_eq!(PairedExcess::of(&sent, Some(99), &served), None);
        assert_eq!(PairedExcess::of(&sent, None, &served), None);
        // A request the server failed keeps its place: the others still pair in order.
        let mut failed = served.clone();
        failed[3] = Served {
            first_token_ns: None,
            complete: false,
            status: 500,
            ..failed[3]
        };
        let q = PairedExcess::of(&sent, Some(100), &failed).expect("paired by order");
        // 99 differences, 1.000 to 1.099 ms without 1.003: the p99 is the largest.
        assert!(q.paired == 99 && close(q.p99_s, 1.099e-3), "{q:?}");
        // Named by their index too, with request 7 overtaken by 8 on the way: by name the
        // pairs are exact; by order 7 and 8 exchange their truths.
        let mut swapped = served.clone();
        swapped[7] = at(7, 8_500_000);
        let named: Vec<(RequestKey, f64)> = (0..100u64)
            .map(|i| (RequestKey::RequestIndex(i), client_s(i)))
            .collect();
        let n = PairedExcess::of(&named, Some(100), &swapped).expect("paired by name");
        assert!(!n.by_order && close(n.mean_s, 1.0495e-3) && close(n.p99_s, 1.098e-3));
        let c = n.order_check.expect("checked against the order");
        assert_eq!(c.displaced, 2);
        assert!(close(c.mean_s, n.mean_s), "{c:?}");
        // Sorted by order: -18.9 ms, 1.000 ... 1.099 ms without 1.007 and 1.008, 20.907 ms.
        assert!(close(c.p99_s, 1.099e-3), "{c:?}");
        assert_eq!(
            PairedExcess::of(&named, None, &swapped).map(|p| p.order_check),
            Some(None)
        );
    }

    /// A compound Poisson stream of work, read per 100 ms interval, gives back the
    /// variability of the work it was made with: exponential work (SCV 1) and constant work
    /// (SCV 0), 2,000 intervals of 10 requests each. The estimate's standard error is about
    /// 0.07 for the first and 0.03 for the second; the bounds are 0.4 and 0.2.
    #[test]
    fn the_spread_of_a_compound_poisson_stream_gives_its_work_back() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let (rate, w, work) = (100.0, 0.1, 2e-3);
        for (scv, exponential) in [(1.0, true), (0.0, false)] {
            let intervals: Vec<(u64, u64)> = (0..2_000)
                .map(|_| {
                    // Poisson count: exponential gaps within the interval.
                    let (mut t, mut cpu) = (0.0, 0.0);
                    loop {
                        t += -(1.0 - rng.random::<f64>()).ln() / rate;
                        if t > w {
                            break;
                        }
                        cpu += if exponential {
                            -(1.0 - rng.random::<f64>()).ln() * work
                        } else {
                            work
                        };
                    }
                    (100_000_000, (cpu * 1e9) as u64)
                })
                .collect();
            let spread = WorkSpread::of(&intervals).unwrap();
            let got = spread.cpu_spread().work_scv(rate, work).unwrap();
            assert!(
                (got - scv).abs() < 0.2 * (1.0 + scv),
                "SCV {scv}: got {got}"
            );
        }
        assert!(WorkSpread::of(&[(100_000_000, 5); 9]).is_none());
    }

    fn served(arrival_ms: u64, ttft_ms: u64, tokens: u32, status: u16) -> Served {
        Served {
            arrival_ns: arrival_ms * 1_000_000,
            received_ns: arrival_ms * 1_000_000,
            status,
            first_token_ns: (status == 200).then_some((arrival_ms + ttft_ms) * 1_000_000),
            last_token_ns: (status == 200).then_some((arrival_ms + ttft_ms + 10) * 1_000_000),
            tokens,
            prompt_tokens: 8,
            bytes: 100,
            complete: status == 200,
            id: None,
            request_tag: None,
        }
    }

    #[test]
    fn truth_counts_rates_and_latencies() {
        let mut v: Vec<Served> = (0..11).map(|i| served(i * 100, 5, 11, 200)).collect();
        v.push(served(1050, 0, 0, 429));
        v.sort_by_key(|s| s.arrival_ns);
        let t = Truth::of(&v);
        assert_eq!(
            (t.requests, t.completed, t.errors.clone()),
            (12, 11, vec![(429, 1)])
        );
        // 11 arrivals 100 ms apart: 10 gaps in one second.
        assert!((t.achieved_rate_per_s - 10.0).abs() < 1e-9);
        assert!((t.ttft.mean_s - 0.005).abs() < 1e-5);
        // 10 ms from first to last token over 10 gaps.
        assert!((t.itl.mean_s - 0.001).abs() < 1e-6);
        assert!((t.e2e.mean_s - 0.015).abs() < 2e-5);
        assert_eq!(t.tokens_per_request, 11.0);
        assert_eq!(t.upload.max_s, 0.0);
    }

    /// A body that trails its head is the client's time: the server's latency starts when
    /// the whole request is in, and the wait is counted apart. Files written before the
    /// body's arrival was recorded (0) read as a request that came whole.
    #[test]
    fn truth_starts_when_the_whole_request_is_in() {
        let mut v: Vec<Served> = (0..11).map(|i| served(i * 100, 5, 11, 200)).collect();
        // The first request's body came 3 ms after its head, 2 ms before its first token.
        v[0].received_ns = 3_000_000;
        // The second one's stamp was never recorded.
        v[1].received_ns = 0;
        let t = Truth::of(&v);
        let mean_ttft = (2.0 + 10.0 * 5.0) / 11.0 * 1e-3;
        assert!(
            (t.ttft.mean_s - mean_ttft).abs() < 1e-6,
            "{}",
            t.ttft.mean_s
        );
        assert!((t.upload.mean_s - 3e-3 / 11.0).abs() < 1e-6);
        assert!((t.upload.max_s - 3e-3).abs() < 1e-5);
        assert!((t.achieved_rate_per_s - 10.0).abs() < 1e-9);
    }

    #[test]
    fn placeholders_fill_inside_arguments() {
        let vals = [
            ("{url}", "http://h:1".to_string()),
            ("{rate}", "5".to_string()),
        ];
        assert_eq!(
            substitute("--base-url={url}/v1", &vals),
            "--base-url=http://h:1/v1"
        );
        assert_eq!(substitute("{rate}{rate}", &vals), "55");
        assert_eq!(substitute("{other}", &vals), "{other}");
        assert_eq!(fmt_number(400.0), "400");
        assert_eq!(fmt_number(2.5), "2.5");
    }
}
