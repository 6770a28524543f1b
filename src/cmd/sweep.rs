//! `heisenbench sweep`: a latency profile over rising rates, and its knee.

use std::io::Write;

use heisenbench_live::prompt::Prompts;
use heisenbench_live::run::config::{ApiKind, RunConfig, ShardMode};
use heisenbench_live::run::{RunOptions, run as run_live};
use heisenbench_model::profile::{Criterion, Stage, knee, rates};
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};
use heisenbench_model::units::format_seconds;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::scenario::{ServerModel, SimScenario, preset};
use serde::Serialize;

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::SweepArgs;

/// The profile.
#[derive(Serialize)]
struct Profile {
    criterion: Criterion,
    criterion_text: String,
    stages: Vec<Stage>,
    knee_qps: Option<f64>,
    stopped_early: bool,
}

/// The built-in scenario (also the reproduction's latency profile): 8 slots, 20 ms to the first token, 1 ms per later token, 50
/// tokens; a request holds a slot 69 ms, so the server saturates at 8 / 0.069 = 116 req/s.
pub fn builtin(seconds: f64) -> Result<SimScenario, Failure> {
    let mut sc = preset("paper-1000", seconds, 1)
        .map_err(|e| Failure::Runtime(e.into()))?
        .remove(1);
    sc.name = "profile".into();
    sc.workload.output_tokens = Lengths::Fixed { tokens: 50 };
    sc.server = ServerModel {
        max_num_seqs: 8,
        max_waiting_queue_length: 100_000,
        time_to_first_token_s: 20e-3,
        inter_token_latency_s: 1e-3,
        ..ServerModel::default()
    };
    Ok(sc)
}

pub fn run(a: SweepArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let criterion = Criterion {
        min_achieved_ratio: a.min_achieved,
        max_p99_s: a.max_p99.get(),
    };
    if !(a.min_achieved > 0.0 && a.min_achieved <= 1.0) {
        return Err(Failure::Usage(format!(
            "--min-achieved {} must be in (0, 1]",
            a.min_achieved
        )));
    }
    let secs = a.stage_duration.get();
    let base = match (&a.url, &a.scenario) {
        (Some(_), _) => None,
        (None, Some(p)) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Failure::Usage(format!("cannot read scenario {}: {e}", p.display()))
            })?;
            let mut sc = SimScenario::from_json(&text)
                .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
            sc.workload.stop = Stop::Duration { seconds: secs };
            Some(sc)
        }
        (None, None) => Some(builtin(secs)?),
    };
    if let Some(dir) = &a.out {
        super::check_out_dir(dir)?;
    }
    let plan = rates(a.from.get(), a.to.get(), a.steps as usize, a.geometric);
    let mut stages = Vec::new();
    let mut failing = 0;
    let mut stopped_early = false;
    // Resolved at the first live stage when not given.
    let mut model = a.model.clone().unwrap_or_default();
    // Ctrl-C ends the sweep after the stages done; the one running is dropped.
    let stop = heisenbench_live::run::stop::StopSignal::new();
    heisenbench_live::run::stop::listen_for_signals(stop.clone(), true)?;
    for (i, q) in plan.iter().enumerate() {
        if stop.is_stopped() {
            break;
        }
        let (stage, report) = match (&base, &a.url) {
            (Some(sc), _) => {
                let mut sc = sc.clone();
                sc.workload.arrivals = Arrivals::Poisson { rate_per_s: *q };
                let r = Simulation::new(sc).run();
                let s = Stage {
                    offered_qps: *q,
                    achieved_qps: r.achieved_qps,
                    p99_s: r.ttft.from_intended.p99_s,
                };
                (s, serde_json::to_vec_pretty(&r))
            }
            (None, Some(url)) => {
                let mut cfg = RunConfig {
                    name: format!("sweep stage {}", i + 1),
                    seed: 1,
                    workload: Workload {
                        arrivals: Arrivals::Poisson { rate_per_s: *q },
                        stop: Stop::Duration { seconds: secs },
                        input_tokens: Lengths::Fixed {
                            tokens: a.prompt_tokens,
                        },
                        output_tokens: Lengths::Fixed {
                            tokens: a.output_tokens,
                        },
                    },
                    url: url.clone(),
                    api: ApiKind::Completions,
                    stream: true,
                    model: model.clone(),
                    api_key_env: None,
                    timeout_s: Some(60.0),
                    max_in_flight_per_shard: None,
                    workers: a.workers,
                    shard_mode: ShardMode::Thread,
                    client_cost_s: 0.0,
                    csv: false,
                    ca_cert: None,
                    insecure: false,
                    prompts: Prompts::words(),
                };
                if cfg.model.is_empty() {
                    cfg.model = super::run::served_model(&cfg)?;
                    model.clone_from(&cfg.model);
                }
                let opts = RunOptions {
                    stop: stop.clone(),
                    ..RunOptions::default()
                };
                let r = run_live(&cfg, &opts).map_err(|e| match e {
                    heisenbench_live::run::RunError::Config(c) => Failure::Usage(c.to_string()),
                    other => Failure::Runtime(other.into()),
                })?;
                if r.interrupted {
                    break;
                }
                let s = Stage {
                    offered_qps: *q,
                    achieved_qps: r.achieved_qps,
                    p99_s: r.ttft.from_intended.p99_s,
                };
                (s, serde_json::to_vec_pretty(&r))
            }
            (None, None) => unreachable!("a base scenario exists without a URL"),
        };
        if let Some(dir) = &a.out {
            write_atomic(
                &dir.join(format!("stage-{:02}.json", i + 1)),
                &report.map_err(|e| Failure::Runtime(e.into()))?,
            )?;
        }
        let ok = criterion.is_met_by(&stage);
        if !a.json {
            writeln!(
                out,
                "[sweep] stage {}/{}: offered {:.1}, achieved {:.1} req/s, p99 TTFT {} {}",
                i + 1,
                plan.len(),
                stage.offered_qps,
                stage.achieved_qps,
                format_seconds(stage.p99_s),
                if ok { "ok" } else { "misses the criterion" }
            )?;
            out.flush()?;
        }
        stages.push(stage);
        failing = if ok { 0 } else { failing + 1 };
        if failing >= 2 && !a.no_early_stop && i + 1 < plan.len() {
            stopped_early = true;
            break;
        }
    }
    let profile = Profile {
        criterion,
        criterion_text: criterion.describe(),
        knee_qps: knee(&stages, &criterion),
        stages,
        stopped_early,
    };
    if let Some(dir) = &a.out {
        write_atomic(
            &dir.join("profile.json"),
            &serde_json::to_vec_pretty(&profile).map_err(|e| Failure::Runtime(e.into()))?,
        )?;
    }
    if a.json {
        write_json(out, &profile)?;
        return if stop.is_stopped() {
            Err(Failure::Interrupted)
        } else {
            Ok(())
        };
    }
    match profile.knee_qps {
        _ if profile.stages.is_empty() => writeln!(out, "no stage finished")?,
        Some(k) => writeln!(
            out,
            "knee: {k:.1} req/s, the highest rate at which every stage up to it met: {}",
            profile.criterion_text
        )?,
        None => writeln!(
            out,
            "no knee: even the lowest stage missed: {}",
            profile.criterion_text
        )?,
    }
    if stopped_early {
        writeln!(out, "(stopped after two failing stages in a row)")?;
    }
    if stop.is_stopped() {
        writeln!(
            out,
            "(interrupted: the profile holds the stages finished before)"
        )?;
        return Err(Failure::Interrupted);
    }
    Ok(())
}
