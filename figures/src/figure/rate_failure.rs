//! Figure 1: achieved against offered rate, one series per client.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::Series;
use crate::chart::*;
use crate::style::{FONT, LABEL};

/// Figure 1: achieved vs offered rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateFailure {
    /// One series per client (offered, achieved), requests per second.
    pub series: Vec<Series>,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &RateFailure,
) -> Result<(), DrawError> {
    let ((_, x1), (_, y1)) =
        bounds(d.series.iter().flat_map(|s| s.points.iter().copied())).ok_or("no data")?;
    let top = x1.max(y1) * 1.05;
    let mut chart = frame(root, "Achieved vs offered request rate", 80)
        .build_cartesian_2d(0f64..top, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("offered rate (requests/s)")
        .y_desc("achieved rate (requests/s)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 0.0), (top, top)],
            BLACK.mix(0.3).stroke_width(1),
        ))?
        .label("achieved = offered")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.3)));
    for (i, s) in d.series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(3)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
