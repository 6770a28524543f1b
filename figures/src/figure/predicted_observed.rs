//! Figure 7: predicted against observed client wait, every run.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};

/// One run's predicted and observed client wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedObserved {
    /// Run label.
    pub label: String,
    /// `sim` or `live`.
    pub source: String,
    /// Predicted mean wait, seconds.
    pub predicted_s: f64,
    /// Observed mean wait, seconds.
    pub observed_s: f64,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &[PredictedObserved],
) -> Result<(), DrawError> {
    let pts = d
        .iter()
        .map(|p| (p.predicted_s, p.observed_s))
        .filter(|p| p.0 > 0.0 && p.1 > 0.0);
    let ((x0, x1), (y0, y1)) = bounds(pts).ok_or("no data")?;
    // Drawn in log10 units on linear axes, so the ticks fall evenly over the whole range
    // (plotters' log axis labels only round powers, leaving most points without a scale).
    let r = positive_range(x0.min(y0), x1.max(y1));
    let r = r.start.log10()..r.end.log10();
    let log = |p: (f64, f64)| (p.0.log10(), p.1.log10());
    let mut chart = frame(root, "Predicted vs observed client wait, every run", 95)
        .build_cartesian_2d(r.clone(), r.clone())?;
    chart
        .configure_mesh()
        .x_desc("predicted mean wait (log scale)")
        .y_desc("observed mean wait (log scale)")
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| seconds_label(10f64.powf(*v)))
        .y_label_formatter(&|v| seconds_label(10f64.powf(*v)))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            [(r.start, r.start), (r.end, r.end)],
            BLACK.mix(0.4).stroke_width(1),
        ))?
        .label("y = x")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
    for (i, source) in ["sim", "live"].iter().enumerate() {
        let c = color(i);
        let pts: Vec<(f64, f64)> = d
            .iter()
            .filter(|p| p.source == *source && p.predicted_s > 0.0 && p.observed_s > 0.0)
            .map(|p| log((p.predicted_s, p.observed_s)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 6, c.filled())))?
            .label(*source)
            .legend(move |(x, y)| Circle::new((x + 10, y), 6, c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
