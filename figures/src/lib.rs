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
pub mod page;
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

    /// What the figure shows and why, for a reader learning queueing theory from it (the
    /// summary of `reproduce` prints it under the figure).
    pub fn caption(self, data: &FigureData) -> String {
        match self {
            Self::RateFailure => {
                "A client loop is a server of events: at 200 chunks per request and 25 us per chunk it can do at most \
                 1 / (200 x 25 us), about 200 requests per second, whatever the server does. Past that point the achieved \
                 rate stays flat and the backlog grows without bound; the sharded client follows the diagonal."
                    .into()
            }
            Self::WaitVsUtilization => {
                "Pollaczek-Khinchine: Wq = rho (1 + Cs^2) E[S] / (2 (1 - rho)). The wait grows like 1 / (1 - rho); \
                 constant service (M/D/1) waits half as long as exponential (M/M/1), and bursts of N events (M^X/G/1) \
                 add (N - 1) E[S] / 2 at any load. Dots are simulated means and p99s with 95% batch-means intervals."
                    .into()
            }
            Self::TtftCdf => {
                "The server's own TTFT is 2 ms. One Python-like loop at 1,000 requests/s reports seconds, because every \
                 request waits behind the loop's backlog before it is even sent (latency measured from the intended send \
                 time includes that wait); the planned number of loops reports close to the truth."
                    .into()
            }
            Self::NtpotDecomposition => {
                "NTPOT = (queue + prefill + decode) / N_out. With a prefill cost per prompt token, long prompts (RAG) \
                 raise NTPOT through prefill while decode per token stays put; queue is the client's send lag."
                    .into()
            }
            Self::LatencyProfile => {
                let knee = data
                    .profile
                    .knee
                    .map_or("none".to_string(), |k| format!("{k:.0} requests/s"));
                format!(
                    "Stages of increasing rate against a server with 8 slots and 69 ms per request, which saturates at \
                     8 / 0.069 = 116 requests/s. The knee ({knee}) is the highest rate at which every stage up to it met \
                     the criterion: {}.",
                    data.profile.criterion
                )
            }
            Self::WorkersNeeded => {
                "The smallest k with the p99 wait of an event under 1 ms when k loops share the load: k grows linearly with \
                 the rate once the per-loop utilisation is pinned by the budget; cheaper events need fewer loops, bursts \
                 need more because the wait inside a burst does not shrink with k."
                    .into()
            }
            Self::PredictedObserved => {
                "Each dot is one run: the model's mean client wait (M/G/1, M^X/G/1 or E_k/G/1, chosen by the run's \
                 arrival pattern) against the simulated or measured one, both counted from when each event was due \
                 (with a zero-latency server: its request's intended time). Points on y = x are explained by \
                 queueing alone; the E_k model is Lindley's equation solved on a lattice, exact to its stated lattice error."
                    .into()
            }
            Self::Timeline => {
                "Each bar is a chunk: the thin part is its wait for the loop after it arrived (the tick), the thick part \
                 its processing. A client that stamps after processing reports the end of the thick part; on one loop \
                 the waits pile up, on two they vanish."
                    .into()
            }
            Self::Policies => {
                "The same client work spread over k loops three ways: round robin (each loop gets every k-th request, \
                 as heisenbench's shards do: Erlang-k gaps, E_k^X/G/1 solved on a lattice), random assignment (Poisson \
                 at each loop, M^X/G/1) and one queue shared by all loops (any idle loop takes the next chunk, M^X/G/c \
                 approximated as one loop k times as fast). Lines are the models, dots simulations with 95 % intervals. \
                 Round robin beats random because its gaps are regular; the pool beats both because a burst's chunks \
                 are processed side by side, and its model overstates the pool's wait at light load, which is why \
                 `plan --policy pooled` sizes pools by simulating them."
                    .into()
            }
        }
    }
}

/// Standard base64 with padding (figures inlined into a self-contained HTML page).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    #[test]
    fn base64_known_values() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
