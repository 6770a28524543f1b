//! heisenbench-figures: the paper's figures, drawn from prepared data.
//!
//! Every figure is one function over one plain serde struct ([`FigureData`] holds them
//! all), so figures are redrawn from a data file alone. Each is written as PNG (the
//! bundled DejaVu Sans renders its text, so no system fonts are needed) and as SVG.
//! Style constants live in [`style`].
//!
//! ```
//! use heisenbench_figures::{Figure, FigureData, Series, draw_all};
//!
//! let mut data = FigureData::default();
//! data.rate_failure.series.push(Series {
//!     label: "a client".into(),
//!     points: vec![(100.0, 100.0), (1000.0, 400.0)],
//! });
//! // Every figure needs its data: with the others empty, drawing stops at the first
//! // empty one and names it.
//! let dir = std::env::temp_dir().join(format!("hb-figures-doc-{}", std::process::id()));
//! let err = draw_all(&data, &dir).unwrap_err();
//! assert!(err.to_string().starts_with(Figure::WaitVsUtilization.stem()));
//! assert!(dir.join("1-rate-failure.png").exists());
//! # std::fs::remove_dir_all(&dir).ok();
//! ```

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

pub mod style {
    //! Shared look of every figure.
    use plotters::style::RGBColor;

    /// Font family name under which the bundled font is registered.
    pub const FONT: &str = "sans-serif";
    /// Figure size in pixels.
    pub const SIZE: (u32, u32) = (960, 600);
    /// Caption size.
    pub const CAPTION: u32 = 26;
    /// Axis description and tick label size.
    pub const LABEL: u32 = 17;
    /// A palette that stays apart in print and for common colour blindness (Okabe-Ito).
    pub const PALETTE: [RGBColor; 7] = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
        RGBColor(0, 0, 0),
    ];
}

use style::{CAPTION, FONT, LABEL, PALETTE, SIZE};

/// Why a figure could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FigureError {
    /// The bundled font did not load.
    #[error("the bundled font could not be loaded")]
    Font,
    /// Drawing or writing failed.
    #[error("{figure}: {source}")]
    Draw {
        /// The figure's file stem.
        figure: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Nothing to draw.
    #[error("{0}: no data")]
    Empty(String),
}

/// A named line of (x, y) points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
}

/// A measured point with a confidence half-width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CiPoint {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// Half-width of the 95 % interval.
    pub ci: f64,
}

/// Figure 1: achieved vs offered rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RateFailure {
    /// One series per client (offered, achieved), requests per second.
    pub series: Vec<Series>,
}

/// Figure 2: client-side wait vs utilisation, theory curves and simulated points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitVsUtilization {
    /// Theory curves (utilisation, wait in units of E\[S\]).
    pub curves: Vec<Series>,
    /// Simulated mean waits with their intervals.
    pub mean_points: Vec<CiPoint>,
    /// Simulated p99 waits with their intervals.
    pub p99_points: Vec<CiPoint>,
}

/// Figure 3: TTFT distributions as CDFs (seconds, cumulative probability).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TtftCdfs {
    /// One CDF per view (points: value in seconds, probability).
    pub series: Vec<Series>,
}

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

/// Figure 6: workers needed vs target rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkersNeeded {
    /// One series per (cost, burst): (requests per second, workers).
    pub series: Vec<Series>,
    /// The budget in words.
    pub budget: String,
}

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

/// One chunk's passage through a loop (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChunkPassage {
    /// Request number (for colour).
    pub request: u32,
    /// Network arrival.
    pub arrival: f64,
    /// Processing starts.
    pub start: f64,
    /// Processing ends (the timestamp of a stamp-after-processing client).
    pub end: f64,
}

/// One loop's lane in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// Lane label.
    pub label: String,
    /// Its chunks.
    pub chunks: Vec<ChunkPassage>,
}

/// Figure 8: a few requests through one loop vs through k loops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The single loop's lane(s).
    pub single: Vec<Lane>,
    /// The k loops' lanes.
    pub sharded: Vec<Lane>,
}

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

/// Everything the figures need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FigureData {
    /// Figure 1.
    pub rate_failure: RateFailure,
    /// Figure 2.
    pub wait_vs_utilization: WaitVsUtilization,
    /// Figure 3.
    pub ttft_cdfs: TtftCdfs,
    /// Figure 4.
    pub ntpot: NtpotDecomposition,
    /// Figure 5.
    pub profile: LatencyProfile,
    /// Figure 6.
    pub workers_needed: WorkersNeeded,
    /// Figure 7.
    pub predicted_observed: Vec<PredictedObserved>,
    /// Figure 8.
    pub timeline: Timeline,
    /// Figure 9.
    #[serde(default)]
    pub policies: Policies,
}

/// The figures, in the order `reproduce` numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Achieved vs offered rate.
    RateFailure,
    /// Client-side wait vs utilisation.
    WaitVsUtilization,
    /// TTFT distributions.
    TtftCdf,
    /// NTPOT decomposition.
    NtpotDecomposition,
    /// A latency profile and its knee.
    LatencyProfile,
    /// Loops needed vs target rate.
    WorkersNeeded,
    /// Predicted vs observed wait.
    PredictedObserved,
    /// Chunks through one loop vs k loops.
    Timeline,
    /// The three dispatch policies.
    Policies,
}

impl Figure {
    /// Every figure, in order.
    pub const ALL: [Figure; 9] = [
        Self::RateFailure,
        Self::WaitVsUtilization,
        Self::TtftCdf,
        Self::NtpotDecomposition,
        Self::LatencyProfile,
        Self::WorkersNeeded,
        Self::PredictedObserved,
        Self::Timeline,
        Self::Policies,
    ];

    /// The file stem: its number and name.
    pub fn stem(self) -> &'static str {
        match self {
            Self::RateFailure => "1-rate-failure",
            Self::WaitVsUtilization => "2-wait-vs-utilization",
            Self::TtftCdf => "3-ttft-cdf",
            Self::NtpotDecomposition => "4-ntpot-decomposition",
            Self::LatencyProfile => "5-latency-profile",
            Self::WorkersNeeded => "6-workers-needed",
            Self::PredictedObserved => "7-predicted-vs-observed",
            Self::Timeline => "8-timeline",
            Self::Policies => "9-policies",
        }
    }
}

fn font() -> Result<(), FigureError> {
    static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        [
            FontStyle::Normal,
            FontStyle::Bold,
            FontStyle::Italic,
            FontStyle::Oblique,
        ]
        .into_iter()
        .all(|s| plotters::style::register_font(FONT, s, FONT_BYTES).is_ok())
    });
    if ok { Ok(()) } else { Err(FigureError::Font) }
}

/// Draws every figure into `dir` as `<stem>.png` and `<stem>.svg`; returns the paths.
pub fn draw_all(data: &FigureData, dir: &Path) -> Result<Vec<PathBuf>, FigureError> {
    font()?;
    std::fs::create_dir_all(dir).map_err(|e| FigureError::Draw {
        figure: dir.display().to_string(),
        source: Box::new(e),
    })?;
    let mut out = Vec::new();
    for fig in Figure::ALL {
        let stem = fig.stem();
        let png = dir.join(format!("{stem}.png"));
        let svg = dir.join(format!("{stem}.svg"));
        let wrap = |r: Result<(), DrawError>| {
            r.map_err(|source| FigureError::Draw {
                figure: stem.to_string(),
                source,
            })
        };
        wrap(draw_one(
            fig,
            data,
            BitMapBackend::new(&png, SIZE).into_drawing_area(),
        ))?;
        wrap(draw_one(
            fig,
            data,
            SVGBackend::new(&svg, SIZE).into_drawing_area(),
        ))?;
        out.push(png);
        out.push(svg);
    }
    Ok(out)
}

fn draw_one<DB: DrawingBackend<ErrorType: 'static>>(
    fig: Figure,
    d: &FigureData,
    root: DrawingArea<DB, Shift>,
) -> Result<(), DrawError> {
    root.fill(&WHITE)?;
    match fig {
        Figure::RateFailure => rate_failure(&root, &d.rate_failure),
        Figure::WaitVsUtilization => wait_vs_utilization(&root, &d.wait_vs_utilization),
        Figure::TtftCdf => ttft_cdfs(&root, &d.ttft_cdfs),
        Figure::NtpotDecomposition => ntpot(&root, &d.ntpot),
        Figure::LatencyProfile => profile(&root, &d.profile),
        Figure::WorkersNeeded => workers_needed(&root, &d.workers_needed),
        Figure::PredictedObserved => predicted_observed(&root, &d.predicted_observed),
        Figure::Timeline => timeline(&root, &d.timeline),
        Figure::Policies => policies(&root, &d.policies),
    }?;
    root.present()?;
    Ok(())
}

/// What a chart's drawing can fail with: plotters' errors (the backend's, boxed) or a
/// message about the data.
type DrawError = Box<dyn std::error::Error + Send + Sync>;

/// A chart frame in the shared style: caption, margins, label areas.
fn frame<'a, 'b, DB: DrawingBackend>(
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

fn bounds(points: impl Iterator<Item = (f64, f64)>) -> Option<((f64, f64), (f64, f64))> {
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
fn seconds_label(s: f64) -> String {
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

fn positive_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let lo = if lo > 0.0 { lo } else { hi.max(1e-12) * 1e-3 };
    (lo / 1.5)..(hi.max(lo * 10.0) * 1.5)
}

fn legend<'a, DB: DrawingBackend<ErrorType: 'static> + 'a, X: Ranged, Y: Ranged>(
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

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn rate_failure<DB: DrawingBackend<ErrorType: 'static>>(
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

fn wait_vs_utilization<DB: DrawingBackend<ErrorType: 'static>>(
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
    for (points, label, marker) in [
        (&d.mean_points, "simulated mean (95% CI)", 0),
        (&d.p99_points, "simulated p99 (95% CI)", 1),
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
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
        } else {
            chart
                .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 7, c.filled())))?
                .label(label)
                .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 7, c.filled()));
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

fn ttft_cdfs<DB: DrawingBackend<ErrorType: 'static>>(
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
    let mut chart = frame(root, "Measured vs true TTFT at 1,000 requests/s", 80)
        .build_cartesian_2d(positive_range(x0, x1).log_scale(), 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("TTFT (seconds, log scale)")
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

fn ntpot<DB: DrawingBackend<ErrorType: 'static>>(
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

fn profile<DB: DrawingBackend<ErrorType: 'static>>(
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
        .y_desc("p99 TTFT from the intended send (seconds)")
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

fn workers_needed<DB: DrawingBackend<ErrorType: 'static>>(
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

fn policies<DB: DrawingBackend<ErrorType: 'static>>(
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

fn predicted_observed<DB: DrawingBackend<ErrorType: 'static>>(
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

fn timeline<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    d: &Timeline,
) -> Result<(), DrawError> {
    let lanes: Vec<&Lane> = d.single.iter().chain(&d.sharded).collect();
    let all = lanes.iter().flat_map(|l| {
        l.chunks
            .iter()
            .flat_map(|c| [(c.arrival, 0.0), (c.end, 0.0)])
    });
    let ((x0, x1), _) = bounds(all).ok_or("no data")?;
    let ms = |s: f64| (s - x0) * 1e3;
    let span = ms(x1) * 1.03;
    let n = lanes.len() as f64;
    let mut chart = frame(root, "Chunks through one loop and through k loops", 150)
        .build_cartesian_2d(0f64..span.max(1e-6), -0.5f64..(n - 0.5))?;
    let names: Vec<String> = lanes.iter().map(|l| l.label.clone()).collect();
    chart
        .configure_mesh()
        .x_desc("time (milliseconds)")
        .y_labels(lanes.len())
        .y_label_formatter(&|y| names.get(y.round() as usize).cloned().unwrap_or_default())
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, LABEL))
        .disable_y_mesh()
        .draw()?;
    for (row, lane) in lanes.iter().enumerate() {
        let y = row as f64;
        for c in &lane.chunks {
            let col = color(c.request as usize);
            // Waiting for the loop: a faint bar; processing: a solid bar; arrival: a tick.
            chart.draw_series(std::iter::once(Rectangle::new(
                [(ms(c.arrival), y - 0.08), (ms(c.start), y + 0.08)],
                col.mix(0.25).filled(),
            )))?;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(ms(c.start), y - 0.3), (ms(c.end), y + 0.3)],
                col.filled(),
            )))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(ms(c.arrival), y - 0.4), (ms(c.arrival), y - 0.3)],
                col.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}
