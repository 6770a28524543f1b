//! Figure 4: NTPOT decomposed into queue, prefill and decode against prompt length.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};

/// Figure 4: NTPOT decomposition against input length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NtpotDecomposition {
    /// Input lengths, tokens.
    pub input_tokens: Vec<u32>,
    /// Mean queue part, seconds per output token.
    pub queue_s: Vec<f64>,
    /// Mean prefill part, seconds per output token.
    pub prefill_s: Vec<f64>,
    /// Mean decode part, seconds per output token.
    pub decode_s: Vec<f64>,
}

pub(crate) fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &NtpotDecomposition,
) -> Result<(), DrawError> {
    let n = d.input_tokens.len();
    if n == 0 {
        return Err("no data".into());
    }
    let totals: Vec<f64> = (0..n)
        .map(|i| (d.queue_s[i] + d.prefill_s[i] + d.decode_s[i]) * 1e3)
        .collect();
    let top = totals.iter().copied().fold(0.0, f64::max) * 1.15;
    let mut chart = frame(root, "NTPOT and its parts against prompt length", 80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top.max(1e-9))?;
    let labels: Vec<String> = d.input_tokens.iter().map(|t| t.to_string()).collect();
    chart
        .configure_mesh()
        .x_desc("prompt tokens")
        .y_desc("NTPOT (milliseconds per output token)")
        .x_labels(n)
        .x_label_formatter(&|x| labels.get(x.round() as usize).cloned().unwrap_or_default())
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .disable_x_mesh()
        .draw()?;
    let parts = [
        ("decode", &d.decode_s, 2),
        ("prefill (and server queue)", &d.prefill_s, 1),
        ("client queue (send lag)", &d.queue_s, 0),
    ];
    let mut base = vec![0.0; n];
    for (label, values, ci) in parts {
        let c = color(ci);
        let bars: Vec<_> = (0..n)
            .map(|i| {
                let (lo, hi) = (base[i], base[i] + values[i] * 1e3);
                base[i] = hi;
                Rectangle::new([(i as f64 - 0.3, lo), (i as f64 + 0.3, hi)], c.filled())
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
