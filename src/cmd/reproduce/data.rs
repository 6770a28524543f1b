//! Running every experiment of the reproduction and preparing the figures' data.

use heisenbench_figures::{
    CiPoint, FigureData, LatencyProfile, NtpotDecomposition, Policies, PredictedObserved,
    RateFailure, Series, Timeline, TtftCdfs, WaitVsUtilization, WorkersNeeded,
};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::run::config::RunConfig;
use heisenbench_live::run::result::RunReport;
use heisenbench_live::run::stop::StopSignal;
use heisenbench_live::run::{RunOptions, run as run_live};
use heisenbench_model::batch::BatchMg1;
use heisenbench_model::mg1::Mg1;
use heisenbench_model::plan::{Assignment, Budget, Hardware, Load, plan_workers};
use heisenbench_model::profile::{Criterion, Stage, knee, rates};
use heisenbench_model::queue::WaitModel;
use heisenbench_model::scenario::{Arrivals, EventCosts, Lengths, Stop, Workload};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Quantile, Rate, Seconds};
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::report::SimReport;
use heisenbench_sim::scenario::{
    PYTHON_CHUNK_COST_S, ServerModel, SimScenario, preset, profile_server, python_costs,
    sharded_workers,
};
use heisenbench_sim::textbook::{
    BurstSpec, Gaps, QueueSpec, lindley, lindley_bursts, pooled_bursts,
};
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
    /// This machine's loopback floor at that run's chunk rate (not measured at the smoke
    /// scale).
    pub floor: Option<heisenbench_live::floor::Floor>,
    /// Predicted vs observed relative errors of the runs where the model's assumptions hold.
    pub agreement: Vec<(String, f64)>,
}

fn sim(sc: SimScenario) -> SimReport {
    Simulation::new(sc).run()
}

fn series(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        points,
    }
}

/// Runs everything; `progress` hears about each part.
pub fn gather(
    scale: Scale,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<Story, Failure> {
    progress("simulating the paper presets");
    let mut presets = Vec::new();
    for name in ["paper-1000", "paper-5000"] {
        for sc in preset(name, scale.sim_s, 1).map_err(|e| Failure::Runtime(e.into()))? {
            presets.push(sim(sc));
        }
    }
    progress("simulating achieved vs offered rates");
    let (rate_failure, rate_runs) = rate_failure_sim(scale)?;
    progress("running the live generator against the embedded mock");
    let (live_series, live_runs) = live_runs(scale, stop)?;
    let mut rate_failure = rate_failure;
    rate_failure.series.extend(live_series);
    progress("textbook queues against theory");
    let wait = wait_vs_utilization(scale);
    progress("TTFT distributions, NTPOT decomposition, latency profile, timeline");
    let ttft = ttft_cdfs(scale)?;
    let ntpot = ntpot_decomposition(scale)?;
    let (profile, stages) = latency_profile(scale)?;
    let timeline = timeline()?;
    let workers = workers_needed()?;
    let policies = policies(scale)?;
    let (predicted_observed, agreement) = predicted_observed(&presets, &rate_runs, &live_runs);
    let heis = live_runs
        .iter()
        .find(|r| r.config.name.starts_with("heisenbench") && (r.offered_qps - 1000.0).abs() < 1.0);
    let (observer_p50_s, observer_p99_s) = heis.map_or((0.0, 0.0), |r| {
        (r.observer_overhead.p50_s, r.observer_overhead.p99_s)
    });
    let floor = match heis {
        Some(r) if scale.name != "smoke" && r.duration_s > 0.0 => {
            progress("measuring this machine's loopback floor");
            heisenbench_live::floor::measure(r.events as f64 / r.duration_s).ok()
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
        floor,
        agreement,
    })
}

fn rate_failure_sim(scale: Scale) -> Result<(RateFailure, Vec<SimReport>), Failure> {
    let offered = [
        100.0, 150.0, 200.0, 300.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0,
    ];
    let k =
        sharded_workers(2000.0, &python_costs(), 200).map_err(|e| Failure::Runtime(e.into()))?;
    let base = preset("paper-1000", scale.sim_s.min(10.0), 2)
        .map_err(|e| Failure::Runtime(e.into()))?
        .remove(0);
    let mut single = Vec::new();
    let mut sharded = Vec::new();
    let mut runs = Vec::new();
    for q in offered {
        for (workers, out) in [(1, &mut single), (k, &mut sharded)] {
            let mut sc = base.clone();
            sc.name = format!("sim {workers} loop(s) at {q}");
            sc.workload.arrivals = Arrivals::Poisson { rate_per_s: q };
            sc.client.workers = workers;
            let r = sim(sc);
            out.push((q, r.achieved_qps));
            runs.push(r);
        }
    }
    Ok((
        RateFailure {
            series: vec![
                series("simulated: one Python-like loop", single),
                series(
                    format!("simulated: {k} loops (the plan for 2,000 req/s)"),
                    sharded,
                ),
            ],
        },
        runs,
    ))
}

fn live_config(
    name: String,
    url: &str,
    qps: f64,
    seconds: f64,
    workers: u32,
    client_cost_s: f64,
) -> RunConfig {
    RunConfig {
        timeout_s: Some(30.0 + seconds),
        workers,
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
    let mock = MockServer::start(MockConfig {
        port: 0,
        max_num_seqs: 1_000_000,
        max_model_len: 1_000_000,
        ..MockConfig::default()
    })
    .map_err(|e| Failure::Runtime(e.into()))?;
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
        let r = run_live(&cfg, &opts).map_err(|e| Failure::Runtime(e.into()))?;
        if r.interrupted {
            return Err(Failure::Interrupted);
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
        let r = run_live(&cfg, &opts).map_err(|e| Failure::Runtime(e.into()))?;
        if r.interrupted {
            return Err(Failure::Interrupted);
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

fn wait_vs_utilization(scale: Scale) -> WaitVsUtilization {
    let service = Service::gamma(1.0, 0.5).expect("valid");
    let grid: Vec<f64> = (1..=97).map(|i| i as f64 / 100.0).collect();
    let curve = |label: &str, f: &dyn Fn(f64) -> Option<f64>| {
        series(
            label,
            grid.iter().filter_map(|r| f(*r).map(|w| (*r, w))).collect(),
        )
    };
    let mg1 = |r: f64| Mg1::new(r, service.clone()).ok();
    let curves = vec![
        curve("M/G/1 mean, Pollaczek-Khinchine (SCV 0.5)", &|r| {
            mg1(r).map(|q| q.wait_mean_s())
        }),
        curve("M/G/1 p99 (SCV 0.5)", &|r| {
            mg1(r).map(|q| q.wait_quantile_s(Quantile::P99))
        }),
        curve("M/M/1 mean", &|r| {
            Mg1::mm1(r, 1.0).ok().map(|q| q.wait_mean_s())
        }),
        curve("M/D/1 mean", &|r| {
            Mg1::md1(r, 1.0).ok().map(|q| q.wait_mean_s())
        }),
        curve("M^X/G/1 mean, bursts of 10", &|r| {
            BatchMg1::new(r / 10.0, 10, service.clone())
                .ok()
                .map(|q| q.wait_mean_s())
        }),
    ];
    let mut mean_points = Vec::new();
    let mut p99_points = Vec::new();
    for rho in [0.2, 0.4, 0.6, 0.7, 0.8, 0.9] {
        let spec = QueueSpec {
            rate_per_s: rho,
            gaps: Gaps::Poisson,
            service: service.clone(),
            customers: scale.customers,
            warmup: scale.customers / 10,
            batches: 32,
            seed: 7,
        };
        let r = lindley(&spec);
        mean_points.push(CiPoint {
            x: rho,
            y: r.wait_mean_s.value,
            ci: r.wait_mean_s.ci95,
        });
        let p99 = r.wait_quantiles_s[2].1;
        p99_points.push(CiPoint {
            x: rho,
            y: p99.value,
            ci: p99.ci95,
        });
    }
    WaitVsUtilization {
        curves,
        mean_points,
        p99_points,
        points_label: None,
    }
}

fn ttft_cdfs(scale: Scale) -> Result<TtftCdfs, Failure> {
    let pair =
        preset("paper-1000", scale.sim_s.min(20.0), 3).map_err(|e| Failure::Runtime(e.into()))?;
    let mut out = Vec::new();
    let mut server = None;
    for mut sc in pair {
        // A server with a real TTFT, so the true distribution has a shape to compare with.
        sc.server.time_to_first_token_s = 2e-3;
        sc.server.time_to_first_token_std_dev_s = 0.5e-3;
        let label = format!(
            "measured by {}",
            if sc.client.workers == 1 {
                "one loop".to_string()
            } else {
                format!("{} loops", sc.client.workers)
            }
        );
        let r = sim(sc);
        server.get_or_insert_with(|| r.ttft_cdf_server.clone());
        out.push(series(label, r.ttft_cdf_from_intended.clone()));
    }
    out.insert(0, series("true (server side)", server.unwrap_or_default()));
    Ok(TtftCdfs {
        series: out,
        title: None,
    })
}

fn ntpot_decomposition(scale: Scale) -> Result<NtpotDecomposition, Failure> {
    let inputs = [128u32, 512, 2048, 8192];
    let mut d = NtpotDecomposition {
        input_tokens: inputs.to_vec(),
        ..Default::default()
    };
    let base = preset("paper-1000", scale.sim_s.min(20.0), 4)
        .map_err(|e| Failure::Runtime(e.into()))?
        .remove(1);
    for tokens in inputs {
        let mut sc = base.clone();
        sc.workload.arrivals = Arrivals::Poisson { rate_per_s: 50.0 };
        sc.workload.input_tokens = Lengths::Fixed { tokens };
        sc.workload.output_tokens = Lengths::Fixed { tokens: 100 };
        sc.server = ServerModel {
            prefill_overhead_s: 1e-3,
            prefill_time_per_token_s: 20e-6,
            inter_token_latency_s: 1e-3,
            max_num_seqs: 256,
            ..ServerModel::default()
        };
        let r = sim(sc);
        d.queue_s.push(r.ntpot_parts_mean.queue_s);
        d.prefill_s.push(r.ntpot_parts_mean.prefill_s);
        d.decode_s.push(r.ntpot_parts_mean.decode_s);
    }
    Ok(d)
}

/// The profile's criterion, the `sweep` defaults.
fn profile_criterion() -> Criterion {
    Criterion {
        min_achieved_ratio: 0.99,
        max_p99_s: 0.1,
    }
}

fn latency_profile(scale: Scale) -> Result<(LatencyProfile, Vec<Stage>), Failure> {
    let base = profile_server(scale.sim_s.max(20.0)).map_err(|e| Failure::Runtime(e.into()))?;
    let mut stages = Vec::new();
    for q in rates(40.0, 160.0, 13, false) {
        let mut sc = base.clone();
        sc.workload.arrivals = Arrivals::Poisson { rate_per_s: q };
        stages.push(sim(sc).profile_stage(q));
    }
    let c = profile_criterion();
    Ok((
        LatencyProfile {
            p99: stages.iter().map(|s| (s.offered_qps, s.p99_s)).collect(),
            achieved: stages
                .iter()
                .map(|s| (s.offered_qps, s.achieved_qps))
                .collect(),
            knee: knee(&stages, &c),
            criterion: c.describe(),
        },
        stages,
    ))
}

fn timeline() -> Result<Timeline, Failure> {
    // Four requests of six tokens, 0.3 ms apart on the server; each chunk costs the loop
    // 0.15 ms. One loop falls behind; two keep up.
    let sc = |workers: u32| SimScenario {
        name: "timeline".into(),
        seed: 11,
        workload: Workload {
            arrivals: Arrivals::Constant { rate_per_s: 1000.0 },
            stop: Stop::Count { requests: 4 },
            input_tokens: Lengths::Fixed { tokens: 8 },
            output_tokens: Lengths::Fixed { tokens: 6 },
        },
        client: heisenbench_model::scenario::ClientModel {
            workers,
            policy: heisenbench_model::scenario::Policy::RoundRobin,
            costs: EventCosts {
                send: None,
                chunk: Some(Service::deterministic(150e-6).expect("valid")),
                finish: None,
            },
            stamp: heisenbench_model::scenario::Stamp::AfterProcessing,
            max_in_flight_per_worker: None,
            timeout_s: None,
            send_shares_loop: false,
        },
        server: ServerModel {
            time_to_first_token_s: 0.2e-3,
            inter_token_latency_s: 0.3e-3,
            max_num_seqs: 16,
            ..ServerModel::default()
        },
    };
    let lanes = |workers: u32, label: &dyn Fn(u32) -> String| {
        heisenbench_figures::simulated_lanes(sc(workers), workers, 1000, label)
    };
    Ok(Timeline {
        single: lanes(1, &|_| "one loop".into()),
        sharded: lanes(2, &|w| format!("loop {} of 2", w + 1)),
    })
}

fn workers_needed() -> Result<WorkersNeeded, Failure> {
    let budget = Budget::Quantile {
        q: Quantile::P99,
        limit_s: Seconds::new(1e-3)?,
    };
    let qps: Vec<f64> = rates(10.0, 100_000.0, 25, true);
    let mut series_out = Vec::new();
    for (cost_us, burst) in [(2.0, 1u32), (5.0, 1), (20.0, 1), (50.0, 1), (20.0, 10)] {
        let mut pts = Vec::new();
        for q in &qps {
            let load = Load::new(
                Rate::per_s(*q)?,
                200,
                burst,
                Service::gamma(cost_us * 1e-6, 0.5)?,
                Assignment::Random,
            )?;
            if let Ok(p) = plan_workers(&load, &budget, Hardware::default()) {
                pts.push((*q, f64::from(p.workers)));
            }
        }
        let label = if burst == 1 {
            format!("{cost_us} us per chunk")
        } else {
            format!("{cost_us} us per chunk, bursts of {burst}")
        };
        series_out.push(series(label, pts));
    }
    Ok(WorkersNeeded {
        series: series_out,
        budget: "200 chunks per request, p99 wait <= 1 ms".into(),
    })
}

/// Figure 9: p99 wait per chunk against the number of loops under the three dispatch
/// policies, for one load: 1,000 requests/s of 20 chunks arriving together, 40 us
/// (exponential) per chunk, 0.8 cores of work.
fn policies(scale: Scale) -> Result<Policies, Failure> {
    let cost = Service::exponential(40e-6)?;
    let mut curves = Vec::new();
    let mut points = Vec::new();
    for (label, policy) in [
        ("round robin", Assignment::RoundRobin),
        ("random", Assignment::Random),
        ("pooled", Assignment::Pooled),
    ] {
        let load = Load::new(Rate::per_s(1000.0)?, 20, 20, cost.clone(), policy)?;
        let (mut curve, mut sims) = (Vec::new(), Vec::new());
        for k in 1..=8u32 {
            let Ok(model) = load.worker_queue(k, 1.0) else {
                continue;
            };
            curve.push((f64::from(k), model.wait_quantile_s(Quantile::P99)));
            let (rate, erlang_k) = load.loop_arrivals(k);
            let spec = BurstSpec {
                burst_rate_per_s: rate,
                gaps: erlang_k.map_or(Gaps::Poisson, |e| Gaps::Gamma {
                    shape: f64::from(e),
                }),
                burst: 20,
                service: cost.clone(),
                bursts: (scale.customers / 20).max(5_000),
                seed: 9,
            };
            let r = if policy == Assignment::Pooled {
                pooled_bursts(&spec, k)
            } else {
                lindley_bursts(&spec)
            };
            let p99 = r.wait_quantiles_s[2].1;
            sims.push(CiPoint {
                x: f64::from(k),
                y: p99.value,
                ci: p99.ci95,
            });
        }
        curves.push(series(label, curve));
        points.push(sims);
    }
    Ok(Policies {
        curves,
        points,
        load: "1,000 req/s, 20-chunk bursts, 40 us per chunk".into(),
    })
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
    // wait plus its own 25 us, observed as the send lag, plus the bytes' wait for the busy
    // loop to read them (send stamp to arrival stamp), plus arrival to processed.
    for r in live.iter().filter(|r| r.config.client_cost_s > 0.0) {
        let burst = 201;
        if let Ok(q) = BatchMg1::new(
            r.offered_qps,
            burst,
            Service::deterministic(r.config.client_cost_s).expect("positive cost"),
        ) {
            let predicted = q.wait_mean_s() + r.config.client_cost_s;
            let observed = r.send_lag.mean_s + r.observer_overhead.mean_s + r.processing.mean_s;
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
