//! `heisenbench sweep`: a latency profile over rising rates, and its knee.

use heisenbench_live::files::FileKind;
use std::io::Write;

use crate::flags::model::SweepFlags;
use heisenbench_live::generator::config::RunConfig;
use heisenbench_live::generator::{RunOptions, run as run_live};
use heisenbench_model::profile::{search, sweep};
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
            let text = heisenbench_live::files::read_text(p, FileKind::Config)
                .map_err(|e| Failure::Usage(e.to_string()))?;
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
    let loads = a.loads();
    let closed = a.users.is_some();
    // Resolved at the first live stage when not given.
    let mut model = a.model.clone().unwrap_or_default();
    // Ctrl-C ends the sweep after the stages done; the one running is dropped.
    let stop = heisenbench_live::generator::stop::StopSignal::new();
    heisenbench_live::generator::stop::listen_for_signals(stop.clone(), true)?;
    let of = if a.search {
        String::new()
    } else {
        format!("/{}", loads.len())
    };
    let arrivals = |load: f64| {
        if closed {
            Arrivals::Closed {
                users: load as u32,
                think_s: 0.0,
                turns: 1,
            }
        } else {
            Arrivals::Poisson { rate_per_s: load }
        }
    };
    let run_stage = |i: usize, q: f64| {
        if stop.is_stopped() {
            return Ok(None);
        }
        let mut server_split: Option<String> = None;
        let (stage, report) = match &base {
            Some(sc) => {
                let mut sc = sc.clone();
                sc.workload.arrivals = arrivals(q);
                let r = Simulation::new(sc).run();
                let mut stage = r.profile_stage(q);
                if closed {
                    stage.users = Some(q as u32);
                    stage.offered_qps = stage.achieved_qps;
                }
                (stage, serde_json::to_vec_pretty(&r))
            }
            None => {
                let mut cfg = RunConfig::profile_stage(
                    i,
                    if closed { 1.0 } else { q },
                    secs,
                    (a.prompt_tokens, a.output_tokens),
                    a.url.as_deref().unwrap_or_default(),
                    &model,
                    a.shards,
                );
                cfg.workload.arrivals = arrivals(q);
                cfg.slo = a.slo;
                cfg.server_metrics =
                    heisenbench_live::generator::config::ServerMetrics::from_flags(
                        &a.server_metrics,
                        a.scrape_interval.map(|s| s.get()),
                    )
                    .map_err(|e| Failure::Usage(e.to_string()))?;
                if cfg.model.is_empty() {
                    cfg.model = super::run::served_model(&cfg)?;
                    model.clone_from(&cfg.model);
                }
                let opts = RunOptions {
                    stop: stop.clone(),
                    ..RunOptions::default()
                };
                let cfg = cfg.checked().map_err(|e| Failure::Usage(e.to_string()))?;
                let r = run_live(&cfg, &opts).map_err(|e| match e {
                    heisenbench_live::generator::RunError::Config(c) => {
                        Failure::Usage(c.to_string())
                    }
                    other => Failure::Runtime(other.into()),
                })?;
                if r.interrupted {
                    return Ok(None);
                }
                server_split = r
                    .server
                    .as_ref()
                    .and_then(|v| v.attribution.as_ref())
                    .map(|a| {
                        let share = |n: &str| {
                            a.parts
                                .iter()
                                .find(|p| p.name == n)
                                .map_or(0.0, |p| 100.0 * p.share)
                        };
                        format!(
                            ", TTFT {:.0} % server queue, {:.0} % prefill, {:.0} % client",
                            share("queue"),
                            share("prefill"),
                            share("client")
                        )
                    });
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
            let load = match stage.users {
                Some(u) => format!("{u} users, {:.1} req/s", stage.achieved_qps),
                None => format!(
                    "offered {:.1}{}, achieved {:.1} req/s",
                    stage.offered_qps,
                    stage
                        .scheduled_qps
                        .map_or(String::new(), |d| format!(" (drawn {d:.1})")),
                    stage.achieved_qps
                ),
            };
            let good = stage
                .good_fraction
                .map_or(String::new(), |g| format!(", {:.1} % good", 100.0 * g));
            let little = match (stage.in_flight_mean, stage.little_in_flight) {
                (Some(l), Some(p)) => format!(", in flight {l:.1} (Little: {p:.1})"),
                _ => String::new(),
            };
            writeln!(
                out,
                "[sweep] stage {}{of}: {load}, p99 TTFT {}{good}{little}{} {}",
                i + 1,
                format_seconds(stage.p99_s),
                server_split.take().unwrap_or_default(),
                if criterion.is_met_by(&stage) {
                    "ok"
                } else {
                    "misses the criterion"
                }
            )?;
            out.flush()?;
        }
        Ok::<_, Failure>(Some(stage))
    };
    let profile = if a.search {
        let (lo, hi) = (loads[0], loads[loads.len() - 1]);
        search(
            lo,
            hi,
            a.tolerance,
            a.geometric || closed,
            closed,
            criterion,
            run_stage,
        )?
    } else {
        sweep(&loads, criterion, !a.no_early_stop, run_stage)?
    };
    let stopped_early = profile.stopped_early;
    if let Some(dir) = &a.out {
        write_atomic(
            &dir.join("profile.json"),
            &serde_json::to_vec_pretty(&profile).map_err(|e| Failure::Runtime(e.into()))?,
        )?;
        let target = a.url.as_deref().map_or_else(
            || "the simulator".to_string(),
            heisenbench_live::net::client::redact_url,
        );
        let subtitle = format!(
            "{} stage(s) of {} against {target}{}",
            profile.stages.len(),
            format_seconds(secs),
            if a.search {
                ", searched by bisection"
            } else {
                ""
            }
        );
        write_atomic(
            &dir.join("sweep.html"),
            super::report_page::sweep_page(&profile, subtitle)?.as_bytes(),
        )?;
    }
    if a.json {
        write_json(out, &profile)?;
        return if stop.is_stopped() {
            Err(Failure::Interrupted(
                "the profile printed holds the stages finished before".into(),
            ))
        } else {
            Ok(())
        };
    }
    match profile.knee_qps {
        _ if profile.stages.is_empty() => writeln!(out, "no stage finished")?,
        Some(k) if profile.search.is_some() => {
            let missed = profile.search.and_then(|s| s.missed);
            let load = |v: f64| {
                if closed {
                    format!("{v:.0} users")
                } else {
                    format!("{v:.1} req/s")
                }
            };
            writeln!(
                out,
                "knee: {}, the highest load the search found meeting: {}{}",
                profile
                    .knee_users
                    .map_or(format!("{k:.1} req/s"), |u| format!(
                        "{u} users ({k:.1} req/s)"
                    )),
                profile.criterion_text,
                missed.map_or(" (even the highest met it)".into(), |m| format!(
                    "; {} missed it",
                    load(m)
                ))
            )?;
        }
        Some(k) => writeln!(
            out,
            "knee: {}{k:.1} req/s, the highest load at which every stage up to it met: {}",
            profile
                .knee_users
                .map_or(String::new(), |u| format!("{u} users, ")),
            profile.criterion_text
        )?,
        None => writeln!(
            out,
            "no knee: even the lowest stage missed: {}",
            profile.criterion_text
        )?,
    }
    if let Some(g) = profile.goodput_knee_load {
        writeln!(
            out,
            "knee by goodput alone: {} (every stage up to it had at least {:.1} % of its requests within {})",
            if closed {
                format!("{g:.0} users")
            } else {
                format!("{g:.1} req/s")
            },
            100.0 * a.min_goodput,
            a.slo.map(|s| s.to_string()).unwrap_or_default()
        )?;
    }
    if stopped_early {
        writeln!(out, "(stopped after two failing stages in a row)")?;
    }
    if stop.is_stopped() {
        writeln!(
            out,
            "(interrupted: the profile holds the stages finished before)"
        )?;
        return Err(Failure::Interrupted(
            "the profile above holds the stages finished before".into(),
        ));
    }
    Ok(())
}
