//! The paper's figures' experiments on the model and the simulator: which curves, loads
//! and scenarios each figure shows. (`heisenbench reproduce` runs these, adds its live
//! runs, which this crate never makes, and draws them all.) Durations are simulated
//! seconds of schedule per simulator run (`sim_s`) and customers per textbook point.

use heisenbench_model::ModelError;
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
    ScenarioError, ServerModel, SimScenario, preset, profile_server, python_costs, sharded_workers,
};
use heisenbench_sim::textbook::{
    BurstSpec, Gaps, QueueSpec, lindley, lindley_bursts, pooled_bursts,
};

use crate::{
    CiPoint, LatencyProfile, NtpotDecomposition, Policies, RateFailure, Series, Timeline, TtftCdfs,
    WaitVsUtilization, WorkersNeeded,
};

/// Why an experiment could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// A preset or scenario was refused.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A model refused its inputs.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// One simulator run to its end.
pub fn sim(sc: SimScenario) -> SimReport {
    Simulation::new(sc).run()
}

/// A named line.
pub fn series(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.into(),
        points,
    }
}

/// Figure 1, simulated: achieved against offered rate for one Python-like loop and for
/// the loops planned for 2,000 req/s; with the runs behind it.
pub fn rate_failure(sim_s: f64) -> Result<(RateFailure, Vec<SimReport>), ExperimentError> {
    let offered = [
        100.0, 150.0, 200.0, 300.0, 500.0, 750.0, 1000.0, 1500.0, 2000.0,
    ];
    let k = sharded_workers(2000.0, &python_costs(), 200)?;
    let base = preset("paper-1000", sim_s.min(10.0), 2)?.remove(0);
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

/// Figure 2: M/G/1 and its relatives' waits against utilisation, with Lindley
/// simulations (95 % intervals) at six utilisations.
pub fn wait_vs_utilization(customers: u64) -> WaitVsUtilization {
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
            customers,
            warmup: customers / 10,
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

/// Figure 3: the true TTFT distribution against the ones one loop and the planned loops
/// report, at 1,000 req/s.
pub fn ttft_cdfs(sim_s: f64) -> Result<TtftCdfs, ExperimentError> {
    let pair = preset("paper-1000", sim_s.min(20.0), 3)?;
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

/// Figure 4: NTPOT split into queue, prefill and decode as the prompt grows.
pub fn ntpot_decomposition(sim_s: f64) -> Result<NtpotDecomposition, ExperimentError> {
    let inputs = [128u32, 512, 2048, 8192];
    let mut d = NtpotDecomposition {
        input_tokens: inputs.to_vec(),
        ..Default::default()
    };
    let base = preset("paper-1000", sim_s.min(20.0), 4)?.remove(1);
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
pub fn profile_criterion() -> Criterion {
    Criterion::new(0.99, 0.1).expect("the sweep defaults are valid")
}

/// Figure 5: the simulated server's latency profile (p99 and achieved rate over offered
/// rate) and its knee; with the stages behind it.
pub fn latency_profile(sim_s: f64) -> Result<(LatencyProfile, Vec<Stage>), ExperimentError> {
    let base = profile_server(sim_s.max(20.0))?;
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

/// Figure 8: four requests through one loop and through two.
pub fn timeline() -> Result<Timeline, ExperimentError> {
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
            prefix: None,
            dataset: None,
        },
        client: heisenbench_model::scenario::ClientModel {
            workers,
            policy: heisenbench_model::scenario::Policy::RoundRobin,
            costs: EventCosts {
                send: None,
                chunk: Some(Service::deterministic(150e-6).expect("valid")),
                finish: None,
                slice_s: None,
                wake: None,
                preempt_per_cpu_s: None,
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
        slo: None,
    };
    let lanes = |workers: u32, label: &dyn Fn(u32) -> String| {
        crate::simulated_lanes(sc(workers), workers, 1000, label)
    };
    Ok(Timeline {
        single: lanes(1, &|_| "one loop".into()),
        sharded: lanes(2, &|w| format!("loop {} of 2", w + 1)),
    })
}

/// Figure 6: loops needed against the request rate for several costs per chunk.
pub fn workers_needed() -> Result<WorkersNeeded, ExperimentError> {
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
pub fn policies(customers: u64) -> Result<Policies, ExperimentError> {
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
                bursts: (customers / 20).max(5_000),
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
