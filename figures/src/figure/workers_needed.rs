//! Figure 6: client loops needed against the target rate.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::Series;
use crate::chart::*;
use crate::style::{FONT, LABEL};

/// Figure 6: workers needed vs target rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkersNeeded {
    /// One series per (cost, burst): (requests per second, workers).
    pub series: Vec<Series>,
    /// The budget in words.
    pub budget: String,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &WorkersNeeded,
) -> Result<(), DrawError> {
    let ((x0, x1), (y0, y1)) =
        bounds(d.series.iter().flat_map(|s| s.points.iter().copied())).ok_or("no data")?;
    let mut chart = frame(root, format!("Client loops needed ({})", d.budget), 80)
        .build_cartesian_2d(
            positive_range(x0, x1).log_scale(),
            positive_range(y0.max(1.0), y1).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("target rate (requests/s)")
        .y_desc("loops (one core each)")
        .x_label_formatter(&|v| count_label(*v))
        .y_label_formatter(&|v| count_label(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    for (i, s) in d.series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(3)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
