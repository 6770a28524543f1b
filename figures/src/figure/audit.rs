//! The audit figure: real clients against the truth, over offered rates. Left, the
//! achieved rate (figure 1's chart); right, the TTFT each client reported (p50 solid, p99
//! dashed) next to the server's true TTFT, and where the audit simulated the client's loop,
//! the p50 and p99 it predicted (crosses); one legend entry a client, the title saying
//! which mark is which.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::figure::rate_failure::{self, RateFailure};
use crate::style::{FONT, LABEL};

/// One client audited over several rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditedClient {
    /// Legend text.
    pub label: String,
    /// Per rate: offered, achieved (server side), reported TTFT p50 and p99 (None: not
    /// reported), true TTFT p50 and p99; rates per second, times in seconds.
    pub points: Vec<AuditPoint>,
}

/// One audit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AuditPoint {
    /// Offered requests per second.
    pub offered: f64,
    /// Achieved, as the server saw it.
    pub achieved: f64,
    /// TTFT median the client reported.
    pub reported_p50_s: Option<f64>,
    /// TTFT p99 the client reported.
    pub reported_p99_s: Option<f64>,
    /// The server's TTFT median.
    pub true_p50_s: f64,
    /// The server's TTFT p99.
    pub true_p99_s: f64,
    /// The reported TTFT median the simulated loop predicts (true plus its predicted
    /// excess), where the audit simulated it.
    #[serde(default)]
    pub predicted_p50_s: Option<f64>,
    /// The reported TTFT p99 it predicts.
    #[serde(default)]
    pub predicted_p99_s: Option<f64>,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    clients: &[AuditedClient],
) -> Result<(), DrawError> {
    let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
    let rates = RateFailure {
        series: clients
            .iter()
            .map(|c| crate::Series {
                label: c.label.clone(),
                points: c.points.iter().map(|p| (p.offered, p.achieved)).collect(),
            })
            .collect(),
    };
    rate_failure::draw(&left, &rates)?;
    let all = clients.iter().flat_map(|c| c.points.iter());
    let ((_, x1), (y0, y1)) = bounds(all.flat_map(|p| {
        [
            (p.offered, p.reported_p50_s.unwrap_or(f64::NAN)),
            (p.offered, p.reported_p99_s.unwrap_or(f64::NAN)),
            (p.offered, p.true_p50_s),
            (p.offered, p.true_p99_s),
            (p.offered, p.predicted_p50_s.unwrap_or(f64::NAN)),
            (p.offered, p.predicted_p99_s.unwrap_or(f64::NAN)),
        ]
    }))
    .ok_or("no data")?;
    let simulated = clients
        .iter()
        .flat_map(|c| c.points.iter())
        .any(|p| p.predicted_p50_s.is_some() || p.predicted_p99_s.is_some());
    let title = if simulated {
        "Reported TTFT: p50 solid, p99 dashed, simulated x"
    } else {
        "Reported TTFT: p50 solid, p99 dashed"
    };
    let mut chart = frame(&right, title, 90)
        .build_cartesian_2d(0f64..x1 * 1.05, positive_range(y0, y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered rate (requests/s)")
        .y_desc("TTFT")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| seconds_label(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .draw()?;
    for (i, c) in clients.iter().enumerate() {
        let col = color(i);
        let line = |f: fn(&AuditPoint) -> Option<f64>| -> Vec<(f64, f64)> {
            c.points
                .iter()
                .filter_map(|p| f(p).filter(|v| *v > 0.0).map(|v| (p.offered, v)))
                .collect()
        };
        let p50 = line(|p| p.reported_p50_s);
        // One legend entry a client; the title says which mark is which statistic.
        chart
            .draw_series(LineSeries::new(p50.clone(), col.stroke_width(3)))?
            .label(c.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3)));
        chart.draw_series(p50.iter().map(|p| Circle::new(*p, 4, col.filled())))?;
        chart.draw_series(DashedLineSeries::new(
            line(|p| p.reported_p99_s),
            6,
            4,
            col.stroke_width(2),
        ))?;
        let predicted: Vec<(f64, f64)> =
            [line(|p| p.predicted_p50_s), line(|p| p.predicted_p99_s)].concat();
        chart.draw_series(
            predicted
                .into_iter()
                .map(|p| Cross::new(p, 6, col.stroke_width(2))),
        )?;
    }
    // The truth: one line over every audit (the same server), the largest p99 the server
    // showed any client at each rate.
    let mut truth: Vec<(f64, f64)> = Vec::new();
    for p in clients.iter().flat_map(|c| c.points.iter()) {
        match truth.iter_mut().find(|(x, _)| *x == p.offered) {
            Some((_, y)) => *y = y.max(p.true_p99_s),
            None => truth.push((p.offered, p.true_p99_s)),
        }
    }
    truth.retain(|(_, v)| *v > 0.0);
    truth.sort_by(|a, b| a.0.total_cmp(&b.0));
    chart
        .draw_series(LineSeries::new(truth, BLACK.mix(0.5).stroke_width(2)))?
        .label("server's true TTFT p99")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
