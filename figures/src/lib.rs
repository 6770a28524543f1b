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

use style::{FONT, SIZE};

mod chart;
pub mod explore;
pub mod paper;
mod figure {
    pub(crate) mod audit;
    pub(crate) mod latency_profile;
    pub(crate) mod ntpot;
    pub(crate) mod policies;
    pub(crate) mod predicted_observed;
    pub(crate) mod rate_failure;
    pub(crate) mod timeline;
    pub(crate) mod ttft_cdf;
    pub(crate) mod wait_vs_utilization;
    pub(crate) mod workers_needed;
}

use chart::DrawError;
pub use figure::audit::{AuditPoint, AuditedClient};
pub use figure::latency_profile::LatencyProfile;
pub use figure::ntpot::NtpotDecomposition;
pub use figure::policies::Policies;
pub use figure::predicted_observed::PredictedObserved;
pub use figure::rate_failure::RateFailure;
pub use figure::timeline::{ChunkPassage, Lane, Timeline, simulated_lanes};
pub use figure::ttft_cdf::TtftCdfs;
pub use figure::wait_vs_utilization::WaitVsUtilization;
pub use figure::workers_needed::WorkersNeeded;

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

    /// Its title.
    pub fn title(self) -> &'static str {
        match self {
            Self::RateFailure => "Achieved vs offered rate",
            Self::WaitVsUtilization => "Client-side wait vs utilisation",
            Self::TtftCdf => "Measured vs true TTFT",
            Self::NtpotDecomposition => "NTPOT decomposition",
            Self::LatencyProfile => "Latency profile",
            Self::WorkersNeeded => "Client loops needed",
            Self::PredictedObserved => "Predicted vs observed client wait",
            Self::Timeline => "Chunks through one loop vs k loops",
            Self::Policies => "Dispatch policy and the client wait",
        }
    }

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

/// Draws the audit figure (real clients over offered rates) into `dir` as `audit.png`
/// and `audit.svg`; returns the paths.
pub fn draw_audit(clients: &[AuditedClient], dir: &Path) -> Result<Vec<PathBuf>, FigureError> {
    font()?;
    if clients.iter().all(|c| c.points.is_empty()) {
        return Err(FigureError::Empty("audit".into()));
    }
    let fail = |source: DrawError| FigureError::Draw {
        figure: "audit".into(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(Box::new(e)))?;
    let (png, svg) = (dir.join("audit.png"), dir.join("audit.svg"));
    let wide = (SIZE.0 * 2, SIZE.1);
    let draw = |root: DrawingArea<_, Shift>| -> Result<(), DrawError> {
        root.fill(&WHITE)?;
        figure::audit::draw(&root, clients)?;
        root.present()?;
        Ok(())
    };
    draw(BitMapBackend::new(&png, wide).into_drawing_area()).map_err(fail)?;
    {
        let root = SVGBackend::new(&svg, wide).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(Box::new(e)))?;
        figure::audit::draw(&root, clients).map_err(fail)?;
        root.present().map_err(|e| fail(Box::new(e)))?;
    }
    Ok(vec![png, svg])
}

fn draw_one<DB: DrawingBackend<ErrorType: 'static>>(
    fig: Figure,
    d: &FigureData,
    root: DrawingArea<DB, Shift>,
) -> Result<(), DrawError> {
    root.fill(&WHITE)?;
    use figure::*;
    match fig {
        Figure::RateFailure => rate_failure::draw(&root, &d.rate_failure),
        Figure::WaitVsUtilization => wait_vs_utilization::draw(&root, &d.wait_vs_utilization),
        Figure::TtftCdf => ttft_cdf::draw(&root, &d.ttft_cdfs),
        Figure::NtpotDecomposition => ntpot::draw(&root, &d.ntpot),
        Figure::LatencyProfile => latency_profile::draw(&root, &d.profile),
        Figure::WorkersNeeded => workers_needed::draw(&root, &d.workers_needed),
        Figure::PredictedObserved => predicted_observed::draw(&root, &d.predicted_observed),
        Figure::Timeline => timeline::draw(&root, &d.timeline),
        Figure::Policies => policies::draw(&root, &d.policies),
    }?;
    root.present()?;
    Ok(())
}
