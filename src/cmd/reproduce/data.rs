//! Running every experiment of the reproduction and preparing the figures' data.

use heisenbench_figures::paper::{self, series, sim};
use heisenbench_figures::{FigureData, PredictedObserved, Series};
use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::result::RunReport;
use heisenbench_live::generator::stop::StopSignal;
use heisenbench_live::generator::{RunOptions, run as run_live};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_model::batch::BatchMg1;
use heisenbench_model::profile::Stage;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};
use heisenbench_model::service::Service;
use heisenbench_sim::report::SimReport;
use heisenbench_sim::scenario::{PYTHON_CHUNK_COST_S, preset};
use serde::Serialize;

use super::Scale;
use crate::Failure;

/// One claim of the paper and what this machine reproduced.
#[derive(Debug, Clone, Serialize)]
pub struct Claim {
    /// The claim.
    pub claim: String,
    /// The paper's figure.
    pub paper: String,
    /// What this run found.
    pub here: String,
}

/// The runs behind the figures, kept for the record.
#[derive(Debug, Serialize)]
pub struct Reports {
    /// The scale used.
    pub scale: Scale,
    /// The paper presets (single loop and planned loops, at 1,000 and 5,000 req/s).
    pub presets: Vec<SimReport>,
    /// Live runs against the embedded mock.
    pub live: Vec<RunReport>,
    /// The simulated latency profile's stages.
    pub profile: Vec<Stage>,
}

/// Everything the summary needs.
pub struct Story {
    /// Figure inputs.
    pub figures: FigureData,
    /// Raw reports.
    pub reports: Reports,
    /// Claims vs reproduction.
    pub claims: Vec<Claim>,
    /// heisenbench's own observer overhead at 1,000 req/s.
    pub observer_p50_s: f64,
    /// Its p99.
    pub observer_p99_s: f64,
    /// That run's read lag (its reads' return after the kernel's arrival stamp): p50.
    pub read_lag_p50_s: f64,
    /// Its p99.
    pub read_lag_p99_s: f64,
    /// This machine's loopback floor at that run's chunk rate (not measured at the smoke
    /// scale).
    pub floor: Option<heisenbench_live::measure::floor::Floor>,
    /// Predicted vs observed relative errors of the runs where the model's assumptions hold.
    pub agreement: Vec<(String, f64)>,
}

/// What an interrupted `reproduce` kept: nothing (its outputs are all or none).
pub(super) const NOTHING_WRITTEN: &str =
    "nothing was written (reproduce writes all of its outputs or none: run it again)";

/// Runs everything; `progress` hears about each part.
pub fn gather(
    scale: Scale,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<Story, Failure> {
    progress("simulating the paper presets");
    let mut presets = Vec::new();
    for name in ["paper-1000", "paper-5000"] {
        for sc in preset(name, scale.sim_s, 1).map_err(paper::ExperimentError::from)? {
            presets.push(sim(sc));
        }
    }
    progress("simulating achieved vs offered rates");
    let (rate_failure, rate_runs) = paper::rate_failure(scale.sim_s)?;
    progress("running the live generator against the embedded mock");
    let (live_series, live_runs) = live_runs(scale, stop)?;
    let mut rate_failure = rate_failure;
    rate_failure.series.extend(live_series);
    progress("textbook queues against theory");
    let wait = paper::wait_vs_utilization(scale.customers);
    progress("TTFT distributions, NTPOT decomposition, latency profile, timeline");
    let ttft = paper::ttft_cdfs(scale.sim_s)?;
    let ntpot = paper::ntpot_decomposition(scale.sim_s)?;
    let (profile, stages) = paper::latency_profile(scale.sim_s)?;
    let timeline = paper::timeline()?;
    let workers = paper::workers_needed()?;
    let policies = paper::policies(scale.customers)?;
    let (predicted_observed, agreement) = predicted_observed(&presets, &rate_runs, &live_runs);
    let heis = live_runs
        .iter()
        .find(|r| r.config.name.starts_with("heisenbench") && (r.offered_qps - 1000.0).abs() < 1.0);
    let (observer_p50_s, observer_p99_s) = heis.map_or((0.0, 0.0), |r| {
        (r.observer_overhead.p50_s, r.observer_overhead.p99_s)
    });
    let (read_lag_p50_s, read_lag_p99_s) =
        heis.map_or((0.0, 0.0), |r| (r.read_lag.p50_s, r.read_lag.p99_s));
    let floor = match heis {
        Some(r) if scale.name != "smoke" && r.duration_s > 0.0 => {
            progress("measuring this machine's loopback floor");
            heisenbench_live::measure::floor::measure(r.events as f64 / r.duration_s).ok()
        }
        _ => None,
    };
    let claims = claims(&presets, &live_runs);
    Ok(Story {
        figures: FigureData {
            rate_failure,
            wait_vs_utilization: wait,
            ttft_cdfs: ttft,
            ntpot,
            profile,
            workers_needed: workers,
            predicted_observed,
            timeline,
            policies,
        },
        reports: Reports {
            scale,
            presets,
            live: live_runs,
            profile: stages,
        },
        claims,
        observer_p50_s,
        observer_p99_s,
        read_lag_p50_s,
        read_lag_p99_s,
        floor,
        agreement,
    })
}

fn live_config(
    name: String,
    url: &str,
    qps: f64,
    seconds: f64,
    shards: u32,
    client_cost_s: f64,
) -> RunConfig {
    RunConfig {
        timeout_s: Some(30.0 + seconds),
        shards,
        // Thread shards (the default), so the reproduction needs no second binary (and
        // runs inside tests).
        client_cost_s,
        ..RunConfig::streaming(
            &name,
            Workload {
                arrivals: Arrivals::Poisson { rate_per_s: qps },
                stop: Stop::Duration { seconds },
                input_tokens: Lengths::Fixed { tokens: 320 },
                output_tokens: Lengths::Fixed { tokens: 200 },
                prefix: None,
                dataset: None,
            },
            url,
            &MockConfig::default().model,
        )
    }
}

fn live_runs(scale: Scale, stop: &StopSignal) -> Result<(Vec<Series>, Vec<RunReport>), Failure> {
    let opts = RunOptions {
        stop: stop.clone(),
        ..RunOptions::default()
    };
    let mock = MockServer::start(MockConfig::embedded()).map_err(|e| Failure::Runtime(e.into()))?;
    let url = mock.url();
    let mut runs = Vec::new();
    let mut slow = Vec::new();
    let mut own = Vec::new();
    // A single loop made slow on purpose: 25 us of busy work per chunk, as the simulated
    // Python client; it should top out near 1 / (201 x 25 us) = 199 req/s.
    for q in [100.0, 150.0, 250.0, 400.0] {
        let cfg = live_config(
            format!("one loop, 25us per chunk, {q} req/s"),
            &url,
            q,
            scale.live_s,
            1,
            PYTHON_CHUNK_COST_S,
        );
        let cfg = cfg.checked().map_err(|e| Failure::Runtime(e.into()))?;
        let r = run_live(&cfg, &opts).map_err(|e| Failure::Runtime(e.into()))?;
        if r.interrupted {
            return Err(Failure::Interrupted(NOTHING_WRITTEN.into()));
        }
        slow.push((q, r.achieved_qps));
        runs.push(r);
    }
    for q in [250.0, 1000.0, 2000.0] {
        let cfg = live_config(
            format!("heisenbench, 2 shards, {q} req/s"),
            &url,
            q,
            scale.live_s,
            2,
            0.0,
        );
        let cfg = cfg.checked().map_err(|e| Failure::Runtime(e.into()))?;
        let r = run_live(&cfg, &opts).map_err(|e| Failure::Runtime(e.into()))?;
        if r.interrupted {
            return Err(Failure::Interrupted(NOTHING_WRITTEN.into()));
        }
        own.push((q, r.achieved_qps));
        runs.push(r);
    }
    mock.shutdown();
    Ok((
        vec![
            series("live: one loop, 25 us per chunk emulated", slow),
            series("live: heisenbench, 2 shards", own),
        ],
        runs,
    ))
}

fn predicted_observed(
    presets: &[SimReport],
    rate_runs: &[SimReport],
    live: &[RunReport],
) -> (Vec<PredictedObserved>, Vec<(String, f64)>) {
    let mut out = Vec::new();
    let mut agreement = Vec::new();
    for r in presets.iter().chain(rate_runs) {
        if let Some(p) = &r.prediction
            && let Some(q) = &p.comparison.predicted
        {
            out.push(PredictedObserved {
                label: r.scenario.name.clone(),
                source: "sim".into(),
                predicted_s: q.wq_mean_s,
                observed_s: r.client_wait_from_due.mean_s,
            });
        }
    }
    // Live single loop with emulated cost, while stable: a response's 201 costed events
    // are due together at the request's intended time (zero-latency mock), so the loop is
    // M^X/D/1 with bursts of 201 at the request rate. An event's time in the client is its
    // wait plus its own 25 us, observed as the send lag, plus the bytes' way here (send
    // stamp to the kernel's arrival stamp), plus their wait for the busy loop to read them
    // (the read lag), plus read to processed.
    for r in live.iter().filter(|r| r.config.client_cost_s > 0.0) {
        let burst = 201;
        if let Ok(q) = BatchMg1::new(
            r.offered_qps,
            burst,
            Service::deterministic(r.config.client_cost_s).expect("positive cost"),
        ) {
            let predicted = q.wait_mean_s() + r.config.client_cost_s;
            let observed = r.send_lag.mean_s
                + r.observer_overhead.mean_s
                + r.read_lag.mean_s
                + r.processing.mean_s;
            agreement.push((r.config.name.clone(), (observed - predicted) / predicted));
            out.push(PredictedObserved {
                label: r.config.name.clone(),
                source: "live".into(),
                predicted_s: predicted,
                observed_s: observed,
            });
        }
    }
    (out, agreement)
}

fn claims(presets: &[SimReport], live: &[RunReport]) -> Vec<Claim> {
    let s1 = &presets[0];
    let k1 = &presets[1];
    let s5 = &presets[2];
    let k5 = &presets[3];
    let f = heisenbench_model::units::format_seconds;
    let slow_peak = live
        .iter()
        .filter(|r| r.config.client_cost_s > 0.0)
        .map(|r| r.achieved_qps)
        .fold(0.0, f64::max);
    let own: Vec<&RunReport> = live
        .iter()
        .filter(|r| r.config.client_cost_s == 0.0)
        .collect();
    let own_top = own
        .iter()
        .max_by(|a, b| a.offered_qps.total_cmp(&b.offered_qps));
    vec![
        Claim {
            claim: "single-process clients collapse at 1,000 req/s".into(),
            paper: "vLLM bench 146, InferenceX 443 req/s achieved".into(),
            here: format!(
                "one simulated Python-like loop achieves {:.0} req/s; a live loop with 25 us of work per chunk peaks at {:.0} req/s",
                s1.achieved_qps, slow_peak
            ),
        },
        Claim {
            claim: "the client's own delay is reported as TTFT".into(),
            paper: "8 ms to 58 s of injected delay".into(),
            here: format!(
                "median TTFT {} at 1,000 and {} at 5,000 req/s from one loop, against a server TTFT of 0",
                f(s1.ttft.from_intended.p50_s),
                f(s5.ttft.from_intended.p50_s)
            ),
        },
        Claim {
            claim: "a multi-process client holds the rate".into(),
            paper: "4,998 of 5,000 req/s on a 144-vCPU client".into(),
            here: format!(
                "simulated: {} loops achieve {:.0} of 1,000 and {} loops {:.0} of 5,000 req/s; live on 2 vCPUs: {}",
                k1.scenario.client.workers,
                k1.achieved_qps,
                k5.scenario.client.workers,
                k5.achieved_qps,
                own_top.map_or("-".into(), |r| format!(
                    "{:.0} of {:.0} req/s with send lag p99 {}",
                    r.achieved_qps,
                    r.offered_qps,
                    f(r.send_lag.p99_s)
                ))
            ),
        },
        Claim {
            claim: "the overhead of a good client is sub-millisecond".into(),
            paper: "0.63 ms median TTFT at 1,000 req/s (inference-perf)".into(),
            here: own
                .iter()
                .find(|r| (r.offered_qps - 1000.0).abs() < 1.0)
                .map_or("-".into(), |r| {
                    format!(
                        "heisenbench's observer overhead per chunk p50 {}, p99 {}; median TTFT {}",
                        f(r.observer_overhead.p50_s),
                        f(r.observer_overhead.p99_s),
                        f(r.ttft.from_intended.p50_s)
                    )
                }),
        },
    ]
}
