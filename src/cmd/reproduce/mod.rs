//! `heisenbench reproduce`: the paper's story on embedded defaults, end to end.
//!
//! Theory (the model and the worker plan at the paper's operating points), simulation
//! (the paper presets and the experiments behind each figure), live runs of the
//! generator against the embedded mock (a slow single loop emulated on purpose, and
//! heisenbench's own shards), the comparison of all three, every figure, and a summary in
//! Markdown and self-contained HTML.

mod data;
mod summary;

use std::io::Write;

use heisenbench_figures::{Figure, draw_all};
use heisenbench_model::units::format_seconds;
use serde::Serialize;

use super::write_atomic;
use crate::Failure;
use crate::args::ReproduceArgs;

/// How long each part runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Scale {
    /// Label.
    pub name: &'static str,
    /// Simulated seconds of schedule per simulator run.
    pub sim_s: f64,
    /// Wall seconds per live run.
    pub live_s: f64,
    /// Customers per textbook point.
    pub customers: u64,
}

impl Scale {
    fn of(a: &ReproduceArgs) -> Self {
        if a.smoke {
            Self {
                name: "smoke",
                sim_s: 0.5,
                live_s: 0.3,
                customers: 20_000,
            }
        } else if a.full {
            Self {
                name: "full",
                sim_s: 300.0,
                live_s: 60.0,
                customers: 5_000_000,
            }
        } else {
            Self {
                name: "quick",
                sim_s: 10.0,
                live_s: 3.0,
                customers: 400_000,
            }
        }
    }
}

pub fn run(a: ReproduceArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let scale = Scale::of(&a);
    super::check_out_dir(&a.out)?;
    let mut progress = |msg: &str| {
        if !a.json {
            let _ = writeln!(out, "[reproduce] {msg}");
            let _ = out.flush();
        }
    };
    // Ctrl-C stops the live runs; nothing is written then (the outputs are all or none).
    let stop = heisenbench_live::generator::stop::StopSignal::new();
    heisenbench_live::generator::stop::listen_for_signals(stop.clone(), true)?;
    let story = data::gather(scale, &stop, &mut progress)?;
    if stop.is_stopped() {
        return Err(Failure::Interrupted(data::NOTHING_WRITTEN.into()));
    }
    let dir = &a.out;
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("cannot create {}: {e}", dir.display())))?;
    progress("drawing the figures");
    draw_all(&story.figures, dir).map_err(|e| Failure::Runtime(e.into()))?;
    write_atomic(&dir.join("figure-data.json"), &pretty(&story.figures)?)?;
    write_atomic(&dir.join("reports.json"), &pretty(&story.reports)?)?;
    let md = summary::markdown(&story);
    write_atomic(&dir.join("summary.md"), md.as_bytes())?;
    write_atomic(
        &dir.join("summary.html"),
        summary::html(&story, &md, dir)?.as_bytes(),
    )?;
    if a.json {
        return super::write_json(out, &story.claims);
    }
    writeln!(out)?;
    writeln!(
        out,
        "the paper's claims, as reproduced on this machine ({} scale):",
        scale.name
    )?;
    for c in &story.claims {
        writeln!(out, "- {}: paper {}; here {}", c.claim, c.paper, c.here)?;
    }
    writeln!(
        out,
        "observer overhead of heisenbench's own generator at 1,000 req/s: p50 {}, p99 {}; read lag p50 {}, p99 {}",
        format_seconds(story.observer_p50_s),
        format_seconds(story.observer_p99_s),
        format_seconds(story.read_lag_p50_s),
        format_seconds(story.read_lag_p99_s)
    )?;
    if let Some(f) = &story.floor {
        writeln!(
            out,
            "{}",
            f.over(
                story.observer_p50_s,
                story.observer_p99_s,
                f.loaded_rate_per_s
            )
        )?;
        writeln!(
            out,
            "{}",
            f.read_lag_over(
                story.read_lag_p50_s,
                story.read_lag_p99_s,
                f.loaded_rate_per_s
            )
        )?;
    }
    writeln!(
        out,
        "wrote {} figures (PNG and SVG), reports.json, figure-data.json, summary.md and summary.html to {}",
        Figure::ALL.len(),
        dir.display()
    )?;
    Ok(())
}

fn pretty<T: Serialize>(v: &T) -> Result<Vec<u8>, Failure> {
    serde_json::to_vec_pretty(v).map_err(|e| Failure::Runtime(e.into()))
}
