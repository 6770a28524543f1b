//! Figure 2: one loop's client-side wait against its utilisation, theory and simulation.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};
use crate::{CiPoint, Series};

/// Figure 2: client-side wait vs utilisation, theory curves and simulated points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitVsUtilization {
    /// Theory curves (utilisation, wait in units of E\[S\]).
    pub curves: Vec<Series>,
    /// Simulated mean waits with their intervals.
    pub mean_points: Vec<CiPoint>,
    /// Simulated p99 waits with their intervals.
    pub p99_points: Vec<CiPoint>,
    /// What the points are, for the legend (default: simulated, with 95 % intervals).
    #[serde(default)]
    pub points_label: Option<String>,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &WaitVsUtilization,
) -> Result<(), DrawError> {
    let all = d
        .curves
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .chain(
            d.mean_points
                .iter()
                .chain(&d.p99_points)
                .map(|p| (p.x, p.y)),
        );
    let ((x0, x1), (y0, y1)) = bounds(all.filter(|(_, y)| *y > 0.0)).ok_or("no data")?;
    let mut chart = frame(root, "Client-side wait vs utilisation of one loop", 80)
        .build_cartesian_2d(
            (x0 * 0.95)..(x1 * 1.02).min(1.0),
            positive_range(y0, y1).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("utilisation rho")
        .y_desc("wait (units of the mean service time)")
        .y_label_formatter(&|v| plain_label(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    for (i, s) in d.curves.iter().enumerate() {
        let c = color(i);
        let dashed = s.label.contains("p99");
        let style = if dashed {
            c.stroke_width(2)
        } else {
            c.stroke_width(3)
        };
        let pts: Vec<_> = s.points.iter().copied().filter(|p| p.1 > 0.0).collect();
        chart
            .draw_series(LineSeries::new(pts, style))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    let what = d.points_label.as_deref().unwrap_or("simulated");
    let ci = if d.points_label.is_some() {
        ""
    } else {
        " (95% CI)"
    };
    for (points, label, marker) in [
        (&d.mean_points, format!("{what} mean{ci}"), 0),
        (&d.p99_points, format!("{what} p99{ci}"), 1),
    ] {
        let c = color(6);
        for p in points.iter().filter(|p| p.y > 0.0) {
            let lo = (p.y - p.ci).max(p.y * 0.01);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(p.x, lo), (p.x, p.y + p.ci)],
                c.stroke_width(2),
            )))?;
        }
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.y > 0.0)
            .map(|p| (p.x, p.y))
            .collect();
        if marker == 0 {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 5, c.filled())))?
                .label(label.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
        } else {
            chart
                .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 7, c.filled())))?
                .label(label.as_str())
                .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 7, c.filled()));
        }
    }
    // Waits grow with the utilisation and bursts lift the low end, so the lower right is
    // where no curve runs.
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}
