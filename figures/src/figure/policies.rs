//! Figure 9: the three dispatch policies' waits against the number of loops.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};
use crate::{CiPoint, Series};

/// Figure 9: how requests reach the loops (round robin, random, one shared queue) and
/// the wait it gives, against the number of loops: model curves and simulated points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Policies {
    /// One model curve per policy: (loops, p99 wait seconds).
    pub curves: Vec<Series>,
    /// Simulated p99 waits with their 95 % intervals, one list per curve, in its order.
    pub points: Vec<Vec<CiPoint>>,
    /// The load in words.
    pub load: String,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &Policies,
) -> Result<(), DrawError> {
    let all = d
        .curves
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .chain(d.points.iter().flatten().map(|p| (p.x, p.y)))
        .filter(|p| p.1 > 0.0);
    let ((x0, x1), (y0, y1)) = bounds(all).ok_or("no data")?;
    // log10 units on a linear axis, labelled as durations at every tick (see figure 7).
    let r = positive_range(y0, y1);
    let mut chart = frame(
        root,
        format!("Dispatch policy and the client wait ({})", d.load),
        95,
    )
    .build_cartesian_2d((x0 - 0.3)..(x1 + 0.3), r.start.log10()..r.end.log10())?;
    chart
        .configure_mesh()
        .x_desc("client loops")
        .y_desc("p99 wait per chunk (log scale)")
        .y_labels(8)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| seconds_label(10f64.powf(*v)))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    let log = |p: (f64, f64)| (p.0, p.1.log10());
    for (i, s) in d.curves.iter().enumerate() {
        let c = color(i);
        let pts: Vec<_> = s
            .points
            .iter()
            .copied()
            .filter(|p| p.1 > 0.0)
            .map(log)
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(3)))?
            .label(format!("{} (model)", s.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        let sims: Vec<&CiPoint> = d
            .points
            .get(i)
            .into_iter()
            .flatten()
            .filter(|p| p.y > 0.0)
            .collect();
        for p in &sims {
            let lo = (p.y - p.ci).max(p.y * 0.01);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(p.x, lo.log10()), (p.x, (p.y + p.ci).log10())],
                c.stroke_width(2),
            )))?;
        }
        chart.draw_series(
            sims.iter()
                .map(|p| Circle::new(log((p.x, p.y)), 5, c.filled())),
        )?;
    }
    let k = color(6);
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("simulated (95% CI)")
        .legend(move |(x, y)| Circle::new((x + 10, y), 5, k.filled()));
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}
