//! `heisenbench sweep`: a latency profile over rising rates, and its knee.

use std::io::Write;

use crate::flags::model::SweepFlags;
use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::{RunOptions, run as run_live};
use heisenbench_model::profile::sweep;
use heisenbench_model::scenario::{Arrivals, Stop};
use heisenbench_model::units::format_seconds;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::scenario::{SimScenario, profile_server};

use super::{write_atomic, write_json};
use crate::Failure;

pub fn run(a: SweepFlags, out: &mut dyn Write) -> Result<(), Failure> {
    let criterion = a.criterion()?;
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
        (None, None) => Some(profile_server(secs).map_err(|e| Failure::Runtime(e.into()))?),
    };
    if let Some(dir) = &a.out {
        super::check_out_dir(dir)?;
    }
    let plan = a.rates();
    // Resolved at the first live stage when not given.
    let mut model = a.model.clone().unwrap_or_default();
    // Ctrl-C ends the sweep after the stages done; the one running is dropped.
    let stop = heisenbench_live::generator::stop::StopSignal::new();
    heisenbench_live::generator::stop::listen_for_signals(stop.clone(), true)?;
    let stages = plan.len();
    let profile = sweep(&plan, criterion, !a.no_early_stop, |i, q| {
        if stop.is_stopped() {
            return Ok(None);
        }
        let (stage, report) = match &base {
            Some(sc) => {
                let mut sc = sc.clone();
                sc.workload.arrivals = Arrivals::Poisson { rate_per_s: q };
                let r = Simulation::new(sc).run();
                (r.profile_stage(q), serde_json::to_vec_pretty(&r))
            }
            None => {
                let mut cfg = RunConfig::profile_stage(
                    i,
                    q,
                    secs,
                    (a.prompt_tokens, a.output_tokens),
                    a.url.as_deref().unwrap_or_default(),
                    &model,
                    a.shards,
                );
                if cfg.model.is_empty() {
                    cfg.model = super::run::served_model(&cfg)?;
                    model.clone_from(&cfg.model);
                }
                let opts = RunOptions {
                    stop: stop.clone(),
                    ..RunOptions::default()
                };
                let r = run_live(&cfg, &opts).map_err(|e| match e {
                    heisenbench_live::generator::RunError::Config(c) => {
                        Failure::Usage(c.to_string())
                    }
                    other => Failure::Runtime(other.into()),
                })?;
                if r.interrupted {
                    return Ok(None);
                }
                (r.profile_stage(q), serde_json::to_vec_pretty(&r))
            }
        };
        if let Some(dir) = &a.out {
            write_atomic(
                &dir.join(format!("stage-{:02}.json", i + 1)),
                &report.map_err(|e| Failure::Runtime(e.into()))?,
            )?;
        }
        if !a.json {
            writeln!(
                out,
                "[sweep] stage {}/{stages}: offered {:.1}, achieved {:.1} req/s, p99 TTFT {} {}",
                i + 1,
                stage.offered_qps,
                stage.achieved_qps,
                format_seconds(stage.p99_s),
                if criterion.is_met_by(&stage) {
                    "ok"
                } else {
                    "misses the criterion"
                }
            )?;
            out.flush()?;
        }
        Ok::<_, Failure>(Some(stage))
    })?;
    let stopped_early = profile.stopped_early;
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
