//! `heisenbench sim`: scenarios, presets and the textbook queue.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::Context;
use heisenbench_model::batch::BatchMg1;
use heisenbench_model::gig1::Gig1;
use heisenbench_model::queue::WaitModel;
use heisenbench_model::scenario::{Arrivals, Stop};
use heisenbench_model::units::{Seconds, format_seconds};
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::report::{SimReport, Views};
use heisenbench_sim::scenario::{SimScenario, preset};
use heisenbench_sim::textbook::{Gaps, QueueSpec, TextbookReport, events, lindley};
use serde::Serialize;

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::{QueueSimArgs, SimArgs, SimSub};
use crate::table::write_pairs;

/// The report of `heisenbench sim`: one or more runs (a preset is a pair).
#[derive(Debug, Serialize)]
pub struct SimOutput {
    /// Always "sim".
    pub kind: &'static str,
    /// The runs, in order.
    pub runs: Vec<SimReport>,
}

const PRESET_SECONDS: f64 = 10.0;

pub fn run(a: SimArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if let Some(SimSub::Queue(q)) = a.textbook {
        return textbook(q, out);
    }
    let scenarios = scenarios(&a)?;
    if let Some(path) = &a.out {
        super::check_out_file(path)?;
    }
    let mut runs = Vec::new();
    for sc in scenarios {
        runs.push(simulate(sc, !a.json));
    }
    let output = SimOutput { kind: "sim", runs };
    if let Some(path) = &a.out {
        let text = serde_json::to_vec_pretty(&output).map_err(|e| Failure::Runtime(e.into()))?;
        write_atomic(path, &text)?;
    }
    if a.json {
        return write_json(out, &output);
    }
    for r in &output.runs {
        summary(out, r)?;
    }
    if let ([single, sharded], Some(_)) = (output.runs.as_slice(), &a.preset) {
        writeln!(
            out,
            "verdict: one loop achieved {:.0}% of the offered rate with median TTFT {} (server: {}); \
             {} loops achieved {:.1}% with a p99 send lag of {}",
            100.0 * single.achieved_qps / single.offered_qps,
            format_seconds(single.ttft.from_intended.p50_s),
            format_seconds(single.ttft.server.p50_s),
            sharded.scenario.client.workers,
            100.0 * sharded.achieved_qps / sharded.offered_qps,
            format_seconds(sharded.send_lag.p99_s),
        )?;
    }
    Ok(())
}

fn scenarios(a: &SimArgs) -> Result<Vec<SimScenario>, Failure> {
    let mut list = match (&a.preset, &a.scenario) {
        (Some(name), _) => {
            let seconds = a.duration.map_or(PRESET_SECONDS, Seconds::get);
            preset(name, seconds, a.seed.unwrap_or(1)).map_err(|e| Failure::Usage(e.to_string()))?
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::Usage(format!("cannot read scenario {}: {e}", path.display()))
            })?;
            vec![
                SimScenario::from_json(&text)
                    .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?,
            ]
        }
        (None, None) => {
            return Err(Failure::Usage(
                "give a scenario file, --preset NAME, or `sim queue`".into(),
            ));
        }
    };
    let trace = match &a.trace {
        Some(path) => Some(super::read_trace(path)?),
        None => None,
    };
    for sc in &mut list {
        if let Some(seed) = a.seed {
            sc.seed = seed;
        }
        if let Some(d) = a.duration {
            sc.workload.stop = Stop::Duration { seconds: d.get() };
        }
        if let Some(n) = a.requests {
            sc.workload.stop = Stop::Count { requests: n };
        }
        if let Some(w) = a.workers {
            sc.client.workers = w;
        }
        if let Some(q) = a.qps {
            match &mut sc.workload.arrivals {
                Arrivals::Poisson { rate_per_s }
                | Arrivals::Constant { rate_per_s }
                | Arrivals::Gamma { rate_per_s, .. } => {
                    *rate_per_s = q.get();
                }
                _ => {
                    return Err(Failure::Usage(
                        "--qps needs Poisson, constant or gamma arrivals".into(),
                    ));
                }
            }
        }
        if let Some(times) = &trace {
            sc.workload.arrivals = Arrivals::Trace {
                send_times_s: times.clone(),
            };
            if !matches!(sc.workload.stop, Stop::Count { .. }) && a.duration.is_none() {
                sc.workload.stop = Stop::Count {
                    requests: times.len() as u64,
                };
            }
        }
        sc.validate()?;
    }
    Ok(list)
}

/// Runs one scenario, with a progress line on a terminal once it takes over a second.
fn simulate(sc: SimScenario, show_progress: bool) -> SimReport {
    let show = show_progress && std::io::stderr().is_terminal();
    let name = sc.name.clone();
    let mut sim = Simulation::new(sc);
    let started = Instant::now();
    let mut steps = 0u64;
    let mut shown = false;
    while sim.step() {
        steps += 1;
        if show && steps.is_multiple_of(1 << 20) && started.elapsed().as_secs_f64() > 1.0 {
            eprint!(
                "\r[sim] {name}: {:5.1}% of the schedule, {:.1}M events",
                100.0 * sim.progress(),
                steps as f64 / 1e6
            );
            shown = true;
        }
    }
    if shown {
        eprintln!();
    }
    sim.report()
}

fn views_row(name: &str, v: &Views) -> Vec<(String, String)> {
    let f = format_seconds;
    vec![
        (
            format!("{name} p50"),
            format!(
                "{:>10}  {:>12}  {:>12}",
                f(v.server.p50_s),
                f(v.from_intended.p50_s),
                f(v.from_actual.p50_s)
            ),
        ),
        (
            format!("{name} p99"),
            format!(
                "{:>10}  {:>12}  {:>12}",
                f(v.server.p99_s),
                f(v.from_intended.p99_s),
                f(v.from_actual.p99_s)
            ),
        ),
    ]
}

/// A row of two durations, `a / b`.
fn pair(label: &str, a: f64, b: f64) -> (String, String) {
    (
        label.to_string(),
        format!("{} / {}", format_seconds(a), format_seconds(b)),
    )
}

fn summary(out: &mut dyn Write, r: &SimReport) -> Result<(), Failure> {
    let c = &r.counts;
    writeln!(
        out,
        "{} (seed {}): {} loop(s), offered {:.1} req/s, achieved {:.1} req/s",
        r.scenario.name, r.scenario.seed, r.scenario.client.workers, r.offered_qps, r.achieved_qps
    )?;
    let mut rows = vec![
        (
            "requests".to_string(),
            format!(
                "scheduled {}, completed {}, rejected {}, timed out {}, left {}",
                c.scheduled, c.completed, c.rejected, c.timed_out, c.in_system_at_end
            ),
        ),
        (
            "simulated".into(),
            format!(
                "{} client events, {} heap events, {:.3} s",
                c.client_events, c.heap_events, r.simulated_s
            ),
        ),
        (
            "".into(),
            format!(
                "{:>10}  {:>12}  {:>12}",
                "server", "from intended", "from actual"
            ),
        ),
    ];
    rows.extend(views_row("TTFT", &r.ttft));
    rows.extend(views_row("E2E", &r.e2e));
    rows.extend(views_row("NTPOT", &r.ntpot));
    rows.push((
        "TPOT p50".into(),
        format!(
            "{:>10}  {:>12}",
            format_seconds(r.tpot.server.p50_s),
            format_seconds(r.tpot.from_actual.p50_s)
        ),
    ));
    rows.push((
        "ITL p99".into(),
        format!(
            "{:>10}  {:>12}",
            format_seconds(r.itl_server.p99_s),
            format_seconds(r.itl_measured.p99_s)
        ),
    ));
    rows.push(pair(
        "send lag p50 / p99",
        r.send_lag.p50_s,
        r.send_lag.p99_s,
    ));
    rows.push(pair(
        "client wait mean / p99",
        r.client_wait.mean_s,
        r.client_wait.p99_s,
    ));
    rows.push(pair(
        "client wait from due mean / p99",
        r.client_wait_from_due.mean_s,
        r.client_wait_from_due.p99_s,
    ));
    rows.push((
        "client share of TTFT p99".into(),
        format_seconds(r.first_chunk_delay.p99_s),
    ));
    let max_util = r.workers.iter().map(|w| w.utilization).fold(0.0, f64::max);
    rows.push(("busiest loop utilisation".into(), format!("{max_util:.3}")));
    if let Some(p) = &r.prediction {
        let cmp = &p.comparison;
        let predicted = cmp.predicted.as_ref().map_or("unbounded".to_string(), |q| {
            format!(
                "mean {} / p99 {}",
                format_seconds(q.wq_mean_s),
                format_seconds(q.wq_p99_s)
            )
        });
        rows.push((
            "model".into(),
            format!("{} (rho {:.3}): {predicted}", cmp.model, cmp.rho),
        ));
        rows.push(("model says".into(), cmp.verdict_text.clone()));
    }
    write_pairs(out, &rows)?;
    writeln!(out)?;
    Ok(())
}

fn textbook(a: QueueSimArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let service = a.service.clone();
    let gaps = a.arrival;
    let spec = QueueSpec {
        rate_per_s: a.rate.get(),
        gaps,
        service: service.clone(),
        customers: a.customers,
        warmup: a.customers / 10,
        batches: 32,
        seed: a.seed,
    };
    let rho = spec.rate_per_s * service.mean_s();
    if rho >= 1.0 {
        return Err(heisenbench_model::ModelError::unstable(rho, 1).into());
    }
    // The model for these gaps: Poisson is exact theory, other gaps the lattice solution.
    let model = match gaps {
        Gaps::Poisson => BatchMg1::new(spec.rate_per_s, 1, service.clone())
            .ok()
            .map(|q| q.report()),
        Gaps::Constant => Gig1::new(spec.rate_per_s, 0.0, 1, service.clone())
            .ok()
            .map(|q| q.report()),
        Gaps::Gamma { shape } => Gig1::new(spec.rate_per_s, 1.0 / shape, 1, service.clone())
            .ok()
            .map(|q| q.report()),
    };
    let mut results = Vec::new();
    let started = Instant::now();
    match a.engine.as_str() {
        "lindley" => results.push(lindley(&spec)),
        "events" => results.push(events(&spec)),
        "both" => {
            results.push(lindley(&spec));
            results.push(events(&spec));
        }
        other => {
            return Err(Failure::Usage(format!(
                "unknown engine '{other}': use lindley, events or both"
            )));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let report = TextbookReport {
        spec,
        model,
        results,
    };
    if let Some(path) = &a.out {
        let text = serde_json::to_vec_pretty(&report).context("serialising the report")?;
        write_atomic(path, &text)?;
    }
    if a.json {
        return write_json(out, &report);
    }
    writeln!(
        out,
        "textbook queue: {} arrivals at {} /s, service {service}, rho {rho:.4}, seed {}",
        a.arrival,
        a.rate.get(),
        a.seed
    )?;
    let m = report.model.as_ref();
    let model_of = |f: &dyn Fn(&heisenbench_model::queue::QueueReport) -> f64| {
        m.map_or("-".into(), |r| format!("{:.6}", f(r)))
    };
    let mut rows = vec![("".to_string(), {
        let mut h = format!("{:>12}", "model");
        for r in &report.results {
            h += &format!("  {:>24}", format!("{} (95% CI)", r.engine));
        }
        h
    })];
    let cell = |v: f64, ci: f64| format!("{:.6} +- {:.6}", v, ci);
    let mut line =
        |label: &str,
         model: String,
         pick: &dyn Fn(&heisenbench_sim::textbook::QueueResult) -> (f64, f64)| {
            let mut s = format!("{model:>12}");
            for r in &report.results {
                let (v, ci) = pick(r);
                s += &format!("  {:>24}", cell(v, ci));
            }
            rows.push((label.to_string(), s));
        };
    line("mean wait (s)", model_of(&|r| r.wq_mean_s), &|r| {
        (r.wait_mean_s.value, r.wait_mean_s.ci95)
    });
    line("P(wait)", model_of(&|r| r.p_wait), &|r| {
        (r.p_wait.value, r.p_wait.ci95)
    });
    for (i, q) in heisenbench_model::units::Quantile::STANDARD
        .iter()
        .enumerate()
    {
        let mv = m
            .and_then(|r| r.wq_quantile_s(*q))
            .map_or("-".into(), |v| format!("{v:.6}"));
        line(&format!("wait {q} (s)"), mv, &|r| {
            (r.wait_quantiles_s[i].1.value, r.wait_quantiles_s[i].1.ci95)
        });
    }
    write_pairs(out, &rows)?;
    if let Some(m) = m {
        writeln!(out, "model: {} ({})", m.model, m.tail_method.describe())?;
    }
    let customers: u64 = report
        .results
        .iter()
        .map(|r| r.customers + r.customers / 10)
        .sum();
    eprintln!(
        "[sim] {customers} customers in {elapsed:.2} s ({:.1}M customers/s)",
        customers as f64 / elapsed / 1e6
    );
    Ok(())
}
