//! Figure 8: a few requests through one loop and through k loops.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};

/// One chunk's passage through a loop (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChunkPassage {
    /// Request number (for colour).
    pub request: u32,
    /// Network arrival.
    pub arrival: f64,
    /// Processing starts.
    pub start: f64,
    /// Processing ends (the timestamp of a stamp-after-processing client).
    pub end: f64,
}

/// One loop's lane in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// Lane label.
    pub label: String,
    /// Its chunks.
    pub chunks: Vec<ChunkPassage>,
}

/// Figure 8: a few requests through one loop vs through k loops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The single loop's lane(s).
    pub single: Vec<Lane>,
    /// The k loops' lanes.
    pub sharded: Vec<Lane>,
}

/// The lanes of a simulated run with a trace: each of `workers` loops' chunks, labelled by
/// `label` (the loop's index). Runs `scenario` with that many loops to its end, keeping up
/// to `trace` events.
pub fn simulated_lanes(
    scenario: heisenbench_sim::scenario::SimScenario,
    workers: u32,
    trace: usize,
    label: &dyn Fn(u32) -> String,
) -> Vec<Lane> {
    let mut sc = scenario;
    sc.client.workers = workers;
    let mut sim = heisenbench_sim::engine::Simulation::new(sc).with_trace(trace);
    while sim.step() {}
    (0..workers)
        .map(|w| Lane {
            label: label(w),
            chunks: sim
                .trace()
                .iter()
                .filter(|t| t.worker == w && t.kind == "chunk")
                .map(|t| ChunkPassage {
                    request: t.request as u32,
                    arrival: t.arrive_ns as f64 * 1e-9,
                    start: t.start_ns as f64 * 1e-9,
                    end: t.done_ns as f64 * 1e-9,
                })
                .collect(),
        })
        .collect()
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &Timeline,
) -> Result<(), DrawError> {
    let lanes: Vec<&Lane> = d.single.iter().chain(&d.sharded).collect();
    let all = lanes.iter().flat_map(|l| {
        l.chunks
            .iter()
            .flat_map(|c| [(c.arrival, 0.0), (c.end, 0.0)])
    });
    let ((x0, x1), _) = bounds(all).ok_or("no data")?;
    let ms = |s: f64| (s - x0) * 1e3;
    let span = ms(x1) * 1.03;
    let n = lanes.len() as f64;
    let mut chart = frame(root, "Chunks through one loop and through k loops", 150)
        .build_cartesian_2d(0f64..span.max(1e-6), -0.5f64..(n - 0.5))?;
    let names: Vec<String> = lanes.iter().map(|l| l.label.clone()).collect();
    chart
        .configure_mesh()
        .x_desc("time (milliseconds)")
        .y_labels(lanes.len())
        .y_label_formatter(&|y| names.get(y.round() as usize).cloned().unwrap_or_default())
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .disable_y_mesh()
        .draw()?;
    for (row, lane) in lanes.iter().enumerate() {
        let y = row as f64;
        for c in &lane.chunks {
            let col = color(c.request as usize);
            // Waiting for the loop: a faint bar; processing: a solid bar; arrival: a tick.
            chart.draw_series(std::iter::once(Rectangle::new(
                [(ms(c.arrival), y - 0.08), (ms(c.start), y + 0.08)],
                col.mix(0.25).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(ms(c.start), y - 0.3), (ms(c.end), y + 0.3)],
                col.filled(),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(ms(c.arrival), y - 0.4), (ms(c.arrival), y - 0.3)],
                col.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}
