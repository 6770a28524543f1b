//! `heisenbench sim`: scenarios, presets and the textbook queue.

use heisenbench_live::files::FileKind;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::flags::sim::{QueueFlags, SimFlags};
use anyhow::Context;
use heisenbench_sim::engine::Simulation;
use heisenbench_sim::report::SimReport;
use heisenbench_sim::scenario::SimScenario;
use heisenbench_sim::textbook::TextbookReport;
use serde::Serialize;

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::{SimArgs, SimSub};

/// The report of `heisenbench sim`: one or more runs (a preset is a pair).
#[derive(Debug, Serialize)]
pub struct SimOutput {
    /// Always "sim".
    pub kind: &'static str,
    /// The runs, in order.
    pub runs: Vec<SimReport>,
}

pub fn run(a: SimArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if let Some(SimSub::Queue(q)) = a.textbook {
        return textbook(q, out);
    }
    let a = a.flags;
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
        r.write_summary(out)?;
    }
    if let ([single, sharded], Some(_)) = (output.runs.as_slice(), &a.preset) {
        writeln!(out, "{}", SimReport::preset_verdict(single, sharded))?;
    }
    Ok(())
}

/// The scenarios the flags name; a file's errors carry its path.
fn scenarios(a: &SimFlags) -> Result<Vec<SimScenario>, Failure> {
    let text = match (&a.preset, &a.scenario) {
        (None, Some(path)) => Some(
            heisenbench_live::files::read_text(path, FileKind::Config)
                .map_err(|e| Failure::Usage(e.to_string()))?,
        ),
        _ => None,
    };
    let trace = a
        .workload
        .trace
        .as_deref()
        .map(super::read_trace)
        .transpose()?;
    let mut list = a
        .scenarios(text.as_deref(), trace)
        .map_err(|e| match (&a.scenario, &text) {
            (Some(path), Some(_)) => Failure::Usage(format!("{}: {e}", path.display())),
            _ => Failure::Usage(e.to_string()),
        })?;
    // A dataset's entries are drawn as `run` draws them: the same file, seed and schedule
    // give the same requests' lengths.
    for sc in &mut list {
        let expected = sc.workload.expected_requests();
        if let Some(ds) = &mut sc.workload.dataset
            && ds.entries.is_empty()
        {
            heisenbench_live::openai::dataset::read_dataset(
                ds,
                a.tokenizer.as_deref(),
                sc.seed,
                expected,
            )
            .map_err(|e| Failure::Usage(e.to_string()))?;
        }
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

fn textbook(a: QueueFlags, out: &mut dyn Write) -> Result<(), Failure> {
    let spec = a.spec()?;
    let started = Instant::now();
    let report = TextbookReport::run(spec, a.engine);
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(path) = &a.out {
        let text = serde_json::to_vec_pretty(&report).context("serialising the report")?;
        write_atomic(path, &text)?;
    }
    if a.json {
        return write_json(out, &report);
    }
    report.write_summary(out)?;
    let customers = report.customers_simulated();
    eprintln!(
        "[sim] {customers} customers in {elapsed:.2} s ({:.1}M customers/s)",
        customers as f64 / elapsed / 1e6
    );
    Ok(())
}
