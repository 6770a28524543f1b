//! Figure 5: a latency profile over rising rates, and its knee.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};

/// Figure 5: a latency profile with its knee.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyProfile {
    /// (offered rate, p99 latency seconds) per stage.
    pub p99: Vec<(f64, f64)>,
    /// (offered rate, achieved rate) per stage.
    pub achieved: Vec<(f64, f64)>,
    /// The knee: the highest offered rate meeting the criterion.
    pub knee: Option<f64>,
    /// The criterion in words.
    pub criterion: String,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &LatencyProfile,
) -> Result<(), DrawError> {
    let ((x0, x1), (y0, y1)) =
        bounds(d.p99.iter().copied().filter(|p| p.1 > 0.0)).ok_or("no data")?;
    let mut chart = frame(root, "Latency profile and its knee", 80)
        .build_cartesian_2d((x0 * 0.9)..(x1 * 1.05), positive_range(y0, y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered rate (requests/s)")
        .y_desc("p99 TTFT from the intended send")
        .x_label_formatter(&|v| count_label(*v))
        .y_label_formatter(&|v| seconds_label(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    let c = color(0);
    chart
        .draw_series(LineSeries::new(
            d.p99.iter().copied().filter(|p| p.1 > 0.0),
            c.stroke_width(3),
        ))?
        .label("p99 TTFT")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    chart.draw_series(
        d.p99
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|p| Circle::new(*p, 4, c.filled())),
    )?;
    if let Some(k) = d.knee {
        let r = color(1);
        let lo = positive_range(y0, y1).start;
        let hi = positive_range(y0, y1).end;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(k, lo), (k, hi)],
                r.stroke_width(2),
            )))?
            .label(format!("knee: {k:.0} requests/s ({})", d.criterion))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], r.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
