//! What every chart shares: the frame, the data bounds, the axes' labels and ranges,
//! the legend and the palette.

use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;

use crate::style::{CAPTION, FONT, LABEL, PALETTE};

/// What a chart's drawing can fail with: plotters' errors (the backend's, boxed) or a
/// message about the data.
pub(crate) type DrawError = Box<dyn std::error::Error + Send + Sync>;

/// A chart frame in the shared style: caption, margins, label areas.
pub(crate) fn frame<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    caption: impl AsRef<str>,
    y_area: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(caption, (FONT, CAPTION))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(y_area);
    b
}

pub(crate) fn bounds(points: impl Iterator<Item = (f64, f64)>) -> Option<((f64, f64), (f64, f64))> {
    let mut b: Option<((f64, f64), (f64, f64))> = None;
    for (x, y) in points.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        b = Some(match b {
            None => ((x, x), (y, y)),
            Some(((x0, x1), (y0, y1))) => ((x0.min(x), x1.max(x)), (y0.min(y), y1.max(y))),
        });
    }
    b
}

/// A tick label for a duration in seconds: ms or us with at most three significant digits.
pub(crate) fn seconds_label(s: f64) -> String {
    let (v, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else {
        (s * 1e6, "us")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{:.*} {unit}", digits, v)
}

/// A log axis's tick label: durations at 1, 2 and 5 times a power of ten, blank between
/// (plotters offers every multiple, which crowds the axis).
pub(crate) fn log_tick_label(s: f64) -> String {
    if !(s.is_finite() && s > 0.0) {
        return String::new();
    }
    let mantissa = s / 10f64.powf(s.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
    {
        seconds_label(s)
    } else {
        String::new()
    }
}

/// A count or rate on a tick: a whole number with thousands separated ("1,000", not
/// "1000.0"); fractions keep one decimal.
pub(crate) fn count_label(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if (v - v.round()).abs() > 1e-9 * v.abs().max(1.0) {
        return format!("{v:.1}");
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// A plain number on a tick: counts as [`count_label`], fractions with as many decimals
/// as their first significant digit needs ("0.01", not "0.010000000000000002").
pub(crate) fn plain_label(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return if v == 0.0 { "0".into() } else { String::new() };
    }
    if v.abs() >= 1.0 {
        return count_label(v);
    }
    let decimals = (-v.abs().log10()).ceil() as usize + 1;
    let text = format!("{v:.decimals$}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(crate) fn positive_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let lo = if lo > 0.0 { lo } else { hi.max(1e-12) * 1e-3 };
    (lo / 1.5)..(hi.max(lo * 10.0) * 1.5)
}

pub(crate) fn legend<'a, DB: DrawingBackend<ErrorType: 'static> + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, LABEL))
        .draw()?;
    Ok(())
}

pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

#[cfg(test)]
mod tests {
    use super::{count_label, plain_label};

    #[test]
    fn fractions_print_short() {
        assert_eq!(plain_label(0.1), "0.1");
        assert_eq!(plain_label(0.010000000000000002), "0.01");
        assert_eq!(plain_label(100.0), "100");
        assert_eq!(plain_label(0.0), "0");
    }

    #[test]
    fn counts_print_whole_with_separators() {
        assert_eq!(count_label(1.0), "1");
        assert_eq!(count_label(1000.0), "1,000");
        assert_eq!(count_label(100_000.0), "100,000");
        assert_eq!(count_label(12_345_678.0), "12,345,678");
        assert_eq!(count_label(2.5), "2.5");
        assert_eq!(count_label(-1000.0), "-1,000");
    }
}
