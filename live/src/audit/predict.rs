//! The client's own wait, predicted from what the audit measured, and held against the
//! bias in what the client reported.
//!
//! The model is a loop per busy process. Requests reach the loops at the rate the server
//! saw, split at random over the loops (Poisson each). A loop spends the measured CPU per
//! chunk on every chunk. With a server that streams every token at once (the default,
//! zero-latency mock) a response reaches the client as one burst of N chunks, and the
//! first chunk of a burst waits for the work already in the loop: the M/G/1 wait of
//! bursts, each costing N times the chunk cost (taken as constant: a sum of N costs
//! varies little). That wait is what the client adds to the TTFT it reports. With spread
//! tokens each chunk is its own arrival, and the wait is M/D/1's over chunks.
//!
//! Per-request work (building the request, opening a connection, parsing headers) is
//! spread over the chunks, as the CPU per chunk is the tree's CPU over the chunks served:
//! the loop's utilisation, which is what the wait depends on most, is then exact.

use heisenbench_model::compare::Verdict;
use heisenbench_model::mg1::Mg1;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::service::Service;
use heisenbench_model::units::{Quantile, Seconds};
use serde::{Deserialize, Serialize};

use super::Observed;

/// One statistic of TTFT: the client's, the server's and their difference against the
/// model's wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiasRow {
    /// `mean`, `p50`, `p90`, `p99`.
    pub statistic: String,
    /// What the client reported, seconds.
    pub reported_s: f64,
    /// What the server saw, seconds.
    pub true_s: f64,
    /// Reported minus true (for quantiles, the difference of the two quantiles).
    pub excess_s: f64,
    /// The model's client wait for this statistic, seconds.
    pub predicted_s: Option<f64>,
    /// (excess - predicted) / predicted.
    pub relative_error: Option<f64>,
}

/// The model's reading of an audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Loops (processes) the model assumed.
    pub loops: u32,
    /// Whether they are the processes that held the client's connections (else the busy
    /// ones, or as many as the user said). Read as false from files written before.
    #[serde(default)]
    pub loops_hold_connections: bool,
    /// The share of the loops' processes' CPU their main threads spent, where it was read
    /// and is the greater part: the loop's own work, which the cost per chunk and per
    /// request then hold (None: the processes' whole CPU, as in files written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_thread_share: Option<f64>,
    /// Which CPU was counted as the loops' work. Read as the main threads' from files
    /// written before, and not written where it is.
    #[serde(default, skip_serializing_if = "LoopCpu::is_main_thread")]
    pub loop_cpu: LoopCpu,
    /// Chunks per request.
    pub chunks_per_request: f64,
    /// Whether a response reaches the client as one burst.
    pub bursts: bool,
    /// CPU per chunk, seconds.
    pub cpu_per_chunk_s: f64,
    /// CPU per request, seconds.
    pub cpu_per_request_s: f64,
    /// Per-loop utilisation at the rate the server saw.
    pub rho: f64,
    /// Per-loop utilisation the offered rate would need.
    pub rho_offered: f64,
    /// The model, in words.
    pub model: String,
    /// The client's own wait before the first chunk: mean, p50, p90, p99 (None: saturated).
    pub wait_s: Option<[f64; 4]>,
    /// TTFT, reported against true, by statistic.
    pub rows: Vec<BiasRow>,
    /// The conclusion.
    pub verdict: Option<Verdict>,
    /// The conclusion in words.
    pub verdict_text: String,
    /// Loops (processes, a core each) the offered rate needs for the budget.
    pub loops_needed: Option<u32>,
    /// The budget planned for, on the client's wait before the first chunk.
    pub budget: String,
    /// Why that many.
    pub plan_reason: String,
}

/// Which of the loops' processes' CPU is their loop's work, the queue the chunks wait in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopCpu {
    /// The main threads', where they ran at least half of their processes' CPU (else all
    /// of it): the other threads (a resolver's pool, a progress bar, a messaging
    /// library's I/O threads) run beside the loop on a core of their own.
    #[default]
    MainThread,
    /// All of it: the other threads run Python under the interpreter's lock, so none of
    /// their work runs beside the loop's, and a request that hops to one waits for the
    /// loop to let go of the lock and then for the loop again. vLLM's bench does so twice
    /// for every request: its aiohttp session trusts the environment, and looks up netrc
    /// credentials and proxies in worker threads before each send.
    Process,
}

impl LoopCpu {
    /// Whether it is the main threads' (the default).
    pub fn is_main_thread(&self) -> bool {
        *self == Self::MainThread
    }
}

impl std::fmt::Display for LoopCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::MainThread => "main-thread",
            Self::Process => "process",
        })
    }
}

impl std::str::FromStr for LoopCpu {
    type Err = String;

    /// `main-thread` or `process`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "main-thread" => Ok(Self::MainThread),
            "process" => Ok(Self::Process),
            _ => Err(format!("'{s}': use main-thread or process")),
        }
    }
}

/// The budget the plan meets: a quantile of the first chunk's wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The level.
    pub q: Quantile,
    /// The limit.
    pub limit: Seconds,
}

/// The share of a process's CPU (`process_s`) its loop ran, given its main thread's CPU
/// (`main_s`): an asyncio client runs its loop in its main thread, and its other threads (a
/// resolver's pool, a progress bar) take a core of their own, so only the main thread's
/// work is a queue for the chunks. Where the main thread ran less than half of the
/// process's CPU the loop is elsewhere: None, and the whole process counts.
fn loop_share(main_s: f64, process_s: f64) -> Option<f64> {
    (process_s > 0.0 && main_s.is_finite())
        .then(|| (main_s / process_s).min(1.0))
        .filter(|s| *s >= 0.5)
}

/// The first chunk's wait in one loop: bursts (or single chunks) at `rate` per second.
fn first_wait(rate: f64, n: f64, c: f64, bursts: bool) -> Option<Mg1> {
    let (lambda, service) = if bursts {
        (rate, Service::Deterministic { mean_s: n * c })
    } else {
        (rate * n, Service::Deterministic { mean_s: c })
    };
    Mg1::new(lambda, service).ok()
}

fn stats(m: &Mg1) -> [f64; 4] {
    let q = |x: f64| m.wait_quantile_s(Quantile::new(x).expect("valid level"));
    [m.wait_mean_s(), q(0.5), q(0.9), q(0.99)]
}

/// Holds `o` against the model; `bursts`: whether the server streamed every token at
/// once; `tolerance`: the relative error within which the bias counts as explained.
///
/// `loops`: the processes that run the client's loops; the loops' CPU is that of the
/// `loops` busiest processes, so a coordinator process left out of the count does not
/// inflate the cost per chunk. By default the loops are the processes that held the
/// client's connections to the server (they read the answers, and stamp them), with their
/// CPU; where none was seen holding one, the busy processes. `loop_cpu`: which of their CPU
/// is the loop's.
pub fn predict(
    o: &Observed,
    bursts: bool,
    loops: Option<u32>,
    loop_cpu: LoopCpu,
    budget: Budget,
    tolerance: f64,
) -> Option<Prediction> {
    o.client.window_cpu_s?;
    let t = &o.truth;
    if t.completed == 0 || t.tokens == 0 {
        return None;
    }
    let holders = o.client.connected.as_ref().filter(|_| loops.is_none());
    let (k, cpu) = match holders {
        Some(h) => (h.loops(), h.window_cpu_s()),
        None => {
            let k = loops.unwrap_or(o.client.busy_processes).max(1);
            let cpu = o
                .client
                .window_cpu_per_process_s
                .iter()
                .take(k as usize)
                .sum();
            (k, cpu)
        }
    };
    let whose = match holders {
        Some(h) if h.processes != k => format!(
            " (the {} processes holding its connections, counted as loops as busy as their busiest)",
            h.processes
        ),
        Some(_) => " (the processes holding its connections)".into(),
        None => String::new(),
    };
    // The holders' main threads, or the busiest process's as a share of that process.
    let main_share = match holders {
        Some(h) => h
            .main_cores
            .and_then(|m| loop_share(m * o.client.window_s, cpu)),
        None => o.client.busiest_main_cores.and_then(|m| {
            loop_share(
                m * o.client.window_s,
                *o.client.window_cpu_per_process_s.first()?,
            )
        }),
    };
    let loop_thread_share = main_share.filter(|_| loop_cpu.is_main_thread());
    let cpu = cpu * loop_thread_share.unwrap_or(1.0);
    let whose = match (loop_cpu, main_share) {
        (LoopCpu::MainThread, Some(s)) => format!(
            "{whose}, their loops' threads {:.0}% of their CPU",
            s * 100.0
        ),
        (LoopCpu::Process, Some(s)) => format!(
            "{whose}, all of their CPU counted as their loops' (their main threads ran {:.0}% of it, \
             the others under the interpreter's lock)",
            s * 100.0
        ),
        (_, None) => whose,
    };
    let n = t.tokens_per_request.max(1.0);
    let c = cpu / t.tokens as f64;
    let rate = t.achieved_rate_per_s / f64::from(k);
    let rho = rate * n * c;
    let rho_offered = o.offered.rate_per_s / f64::from(k) * n * c;
    let model = if bursts {
        format!(
            "{k} loop(s){whose}, requests split at random; each response a burst of {n:.0} chunks costing {} each: \
             M/D/1 of bursts, the first chunk waits for the work before it",
            heisenbench_model::units::format_seconds(c)
        )
    } else {
        format!(
            "{k} loop(s){whose}, requests split at random; chunks spread out, each costing {}: M/D/1 of chunks",
            heisenbench_model::units::format_seconds(c)
        )
    };
    let wait = first_wait(rate, n, c, bursts).map(|m| stats(&m));
    let mut rows = Vec::new();
    if let (Some(r), true) = (o.reported.as_ref().and_then(|r| r.ttft), t.completed > 0) {
        let truth = [t.ttft.mean_s, t.ttft.p50_s, t.ttft.p90_s, t.ttft.p99_s];
        let rep = [r.mean_s, r.p50_s, r.p90_s, r.p99_s];
        let excess_s = o.ttft_excess_s();
        for (i, name) in ["mean", "p50", "p90", "p99"].iter().enumerate() {
            let (Some(reported), Some(excess)) = (rep[i], excess_s[i]) else {
                continue;
            };
            let predicted = wait.map(|w| w[i]);
            rows.push(BiasRow {
                statistic: (*name).into(),
                reported_s: reported,
                true_s: truth[i],
                excess_s: excess,
                predicted_s: predicted,
                relative_error: predicted.filter(|p| *p > 0.0).map(|p| (excess - p) / p),
            });
        }
    }
    let lag = o
        .reported
        .as_ref()
        .and_then(|r| r.send_lag)
        .and_then(|l| l.mean_s);
    let (verdict, verdict_text) = verdict(rho, &rows, tolerance, o.reported.is_some(), lag);
    let (loops_needed, plan_reason) = plan(o.offered.rate_per_s, n, c, bursts, budget);
    Some(Prediction {
        loops: k,
        loops_hold_connections: holders.is_some(),
        loop_thread_share,
        loop_cpu,
        chunks_per_request: n,
        bursts,
        cpu_per_chunk_s: c,
        cpu_per_request_s: cpu / t.completed as f64,
        rho,
        rho_offered,
        model,
        wait_s: wait,
        rows,
        verdict,
        verdict_text,
        loops_needed,
        budget: format!(
            "{} of the wait before the first chunk <= {}",
            budget.q, budget.limit
        ),
        plan_reason,
    })
}

fn verdict(
    rho: f64,
    rows: &[BiasRow],
    tolerance: f64,
    reported: bool,
    lag_s: Option<f64>,
) -> (Option<Verdict>, String) {
    if rho >= 1.0 {
        let shown = match lag_s {
            Some(l) => format!(
                "this client measures from its actual send, so its TTFT leaves the backlog out \
                 and reports it as lateness ({} on average): it sends late, not slow",
                heisenbench_model::units::format_seconds(l)
            ),
            None => "what it reports is inflated by that backlog wherever its clock starts \
                     before its loop gets to the request"
                .into(),
        };
        return (
            Some(Verdict::ClientSaturated),
            format!(
                "the client's loop is saturated (utilisation {rho:.2}): its backlog grows for as long as \
                 the run lasts; {shown}"
            ),
        );
    }
    let Some(key) = rows
        .iter()
        .find(|r| r.statistic == "mean")
        .or_else(|| rows.first())
    else {
        return (
            None,
            if reported {
                "the client's results hold no TTFT to compare".into()
            } else {
                "no results file of a known format: the truth, the CPU and the prediction stand alone"
                    .into()
            },
        );
    };
    let Some(e) = key.relative_error else {
        return (None, "the model predicts no wait here".into());
    };
    let pct = e * 100.0;
    if e.abs() <= tolerance {
        (
            Some(Verdict::ClientBias),
            format!(
                "the {} TTFT excess is the client's own queueing: within {:.0}% of the model ({pct:+.1}%)",
                key.statistic,
                tolerance * 100.0
            ),
        )
    } else if e > 0.0 {
        (
            Some(Verdict::BeyondClient),
            format!(
                "the {} TTFT excess is {pct:+.1}% beyond the client-queue model: more client work \
                 than its loop's queueing (start-up, request building, network) or several loops \
                 sharing cores",
                key.statistic
            ),
        )
    } else {
        (
            Some(Verdict::BelowPrediction),
            format!(
                "the {} TTFT excess is {pct:.1}% below the model: the client stamps before some of its \
                 queueing, or its work is not one loop per process",
                key.statistic
            ),
        )
    }
}

/// The fewest loops (one per core) that keep the first chunk's wait within the budget at
/// the offered rate, requests split at random.
fn plan(rate: f64, n: f64, c: f64, bursts: bool, b: Budget) -> (Option<u32>, String) {
    let demand = rate * n * c;
    for k in 1..=4096u32 {
        let Some(m) = first_wait(rate / f64::from(k), n, c, bursts) else {
            continue;
        };
        let w = m.wait_quantile_s(b.q);
        if w <= b.limit.get() {
            return (
                Some(k),
                format!(
                    "{demand:.2} cores of client work at the offered rate; with {k} loop(s) each is \
                     {:.0}% busy and the {} wait before the first chunk is {}",
                    m.rho() * 100.0,
                    b.q,
                    heisenbench_model::units::format_seconds(w)
                ),
            );
        }
    }
    (
        None,
        format!("no loop count up to 4096 meets the budget ({demand:.2} cores of work)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_wait_is_pollaczek_khinchine_on_bursts() {
        // 100 bursts/s of 20 chunks at 200 us: B = 4 ms, rho 0.4, Wq = rho B / (2 (1 - rho)).
        let m = first_wait(100.0, 20.0, 200e-6, true).expect("stable");
        let want = 0.4 * 0.004 / (2.0 * 0.6);
        assert!((m.wait_mean_s() - want).abs() < 1e-9 * want.max(1.0));
        assert!(first_wait(300.0, 20.0, 200e-6, true).is_none());
    }

    /// The main thread's share of its process's CPU is the loop's where it is the greater
    /// part, capped at the whole (ticks round the process's figure); below half, or with
    /// nothing to divide by, the process counts whole.
    #[test]
    fn the_loop_is_the_main_thread_where_it_ran_most_of_the_process() {
        assert_eq!(loop_share(0.8, 1.0), Some(0.8));
        assert_eq!(loop_share(0.5, 1.0), Some(0.5));
        assert_eq!(loop_share(1.02, 1.0), Some(1.0));
        assert_eq!(loop_share(0.3, 1.0), None);
        assert_eq!(loop_share(0.3, 0.0), None);
        assert_eq!(loop_share(f64::NAN, 1.0), None);
    }

    #[test]
    fn the_plan_is_the_fewest_loops_meeting_the_budget() {
        let b = Budget {
            q: Quantile::new(0.99).expect("level"),
            limit: Seconds::new(0.002).expect("limit"),
        };
        let (k, _) = plan(1000.0, 200.0, 20e-6, true, b);
        let k = k.expect("reachable");
        let w = |k: u32| {
            first_wait(1000.0 / f64::from(k), 200.0, 20e-6, true)
                .map_or(f64::INFINITY, |m| m.wait_quantile_s(b.q))
        };
        assert!(w(k) <= 0.002 && w(k - 1) > 0.002, "k = {k}");
        // Four cores of work need at least five loops.
        assert!(k >= 5);
    }
}
