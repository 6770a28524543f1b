//! Figure 3: TTFT distributions as CDFs.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::Series;
use crate::chart::*;
use crate::style::{FONT, LABEL};

/// Figure 3: TTFT distributions as CDFs (seconds, cumulative probability).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TtftCdfs {
    /// One CDF per view (points: value in seconds, probability).
    pub series: Vec<Series>,
    /// The chart's title (default: the reproduction's, at 1,000 requests/s).
    #[serde(default)]
    pub title: Option<String>,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &TtftCdfs,
) -> Result<(), DrawError> {
    let ((x0, x1), _) = bounds(
        d.series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, _)| *x > 0.0),
    )
    .ok_or("no data")?;
    let title = d
        .title
        .as_deref()
        .unwrap_or("Measured vs true TTFT at 1,000 requests/s");
    let mut chart =
        frame(root, title, 80).build_cartesian_2d(positive_range(x0, x1).log_scale(), 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("TTFT (log scale)")
        .x_labels(30)
        .x_label_formatter(&|v| log_tick_label(*v))
        .y_desc("fraction of requests")
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    for (i, s) in d.series.iter().enumerate() {
        let c = color(i);
        let pts: Vec<_> = s.points.iter().copied().filter(|p| p.0 > 0.0).collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(3)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}
