//! A self-contained HTML page of charts and tables: a run's or a sweep's report page.
//!
//! The page carries everything inline (styles and SVG charts, no script and no external
//! file), so it opens from disk, travels as one attachment and renders the same years
//! later. What it shows is prepared by the caller as [`Page`]: this module knows charts
//! and tables, not runs.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::chart::*;
use crate::style::{FONT, LABEL};
use crate::{FigureError, Series};

/// How a chart's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Counts or rates, linear from zero.
    Count,
    /// Durations in seconds, on a log scale.
    LogSeconds,
    /// A fraction from 0 to 1.
    Fraction,
}

/// A vertical line across a chart at `x`, labelled (a knee, the end of a warm-up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// Where, in the chart's x units.
    pub x: f64,
    /// What it marks.
    pub label: String,
}

/// One line chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// The caption.
    pub title: String,
    /// The x axis's description.
    pub x_desc: String,
    /// How x reads (Count or LogSeconds; LogSeconds draws a CDF's values).
    pub x_axis: Axis,
    /// The y axis's description.
    pub y_desc: String,
    /// How y reads.
    pub y_axis: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical markers.
    #[serde(default)]
    pub markers: Vec<Marker>,
}

/// A table of text cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Its caption.
    pub caption: String,
    /// Column heads.
    pub head: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

/// Everything a report page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The page's title.
    pub title: String,
    /// One line under it (what ran, where, when).
    pub subtitle: String,
    /// Warnings shown first (an unbalanced account, a run that never settled).
    pub warnings: Vec<String>,
    /// Tables, in order.
    pub tables: Vec<Table>,
    /// Charts, in order.
    pub charts: Vec<Chart>,
    /// A preformatted block (the text summary), shown after the charts.
    pub text: String,
    /// The config and seed that made the report, as JSON.
    pub config_json: String,
}

/// The page as HTML.
pub fn render(page: &Page) -> Result<String, FigureError> {
    crate::font()?;
    let mut html = String::with_capacity(64 * 1024);
    html.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    html.push_str(&format!("<title>{}</title>\n", escape(&page.title)));
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str(STYLE);
    html.push_str("</head><body>\n");
    html.push_str(&format!(
        "<h1>{}</h1>\n<p class=\"sub\">{}</p>\n",
        escape(&page.title),
        escape(&page.subtitle)
    ));
    for w in &page.warnings {
        html.push_str(&format!("<p class=\"warn\">{}</p>\n", escape(w)));
    }
    for t in &page.tables {
        html.push_str(&table(t));
    }
    for (i, c) in page.charts.iter().enumerate() {
        let svg = chart_svg(c).map_err(|source| FigureError::Draw {
            figure: c.title.clone(),
            source,
        })?;
        html.push_str(&format!(
            "<figure id=\"chart-{i}\">{svg}<figcaption>{}</figcaption></figure>\n",
            escape(&c.title)
        ));
    }
    if !page.text.is_empty() {
        html.push_str(&format!(
            "<h2>Summary</h2>\n<pre>{}</pre>\n",
            escape(&page.text)
        ));
    }
    html.push_str(&format!(
        "<details><summary>The config and seed that made this report</summary><pre>{}</pre></details>\n",
        escape(&page.config_json)
    ));
    html.push_str("</body></html>\n");
    Ok(html)
}

const STYLE: &str = "<style>\
body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
h1{margin-bottom:.2em}.sub{color:#555;margin-top:0}\
.warn{background:#fde8e0;border-left:4px solid #d55e00;padding:.5em 1em}\
table{border-collapse:collapse;margin:1em 0}caption{text-align:left;font-weight:bold;padding:.3em 0}\
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f2f2f2}\
td:first-child,th:first-child{text-align:left}\
figure{margin:1.5em 0}figure svg{width:100%;height:auto}figcaption{display:none}\
pre{background:#f7f7f7;padding:1em;overflow-x:auto;font-size:12px}\
</style>\n";

fn table(t: &Table) -> String {
    let mut s = format!("<table><caption>{}</caption><tr>", escape(&t.caption));
    for h in &t.head {
        s.push_str(&format!("<th>{}</th>", escape(h)));
    }
    s.push_str("</tr>");
    for r in &t.rows {
        s.push_str("<tr>");
        for c in r {
            s.push_str(&format!("<td>{}</td>", escape(c)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>\n");
    s
}

/// Text as HTML, safe in an element's content and in a double-quoted attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A chart's size on the page, pixels (the SVG scales to the page's width).
const CHART: (u32, u32) = (960, 420);

fn chart_svg(c: &Chart) -> Result<String, DrawError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root, c)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw<DB: DrawingBackend<ErrorType: 'static>>(
    root: &DrawingArea<DB, Shift>,
    c: &Chart,
) -> Result<(), DrawError> {
    let usable = |axis: Axis, v: f64| v.is_finite() && (axis != Axis::LogSeconds || v > 0.0);
    let points = || {
        c.series.iter().flat_map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|(x, y)| usable(c.x_axis, *x) && usable(c.y_axis, *y))
        })
    };
    // Markers widen the x range, so a bound outside the data still shows where it is.
    let marks = c
        .markers
        .iter()
        .map(|m| m.x)
        .filter(|x| usable(c.x_axis, *x));
    let Some(((x0, x1), (y0, y1))) = bounds(points())
        .map(|((x0, x1), y)| marks.fold(((x0, x1), y), |((a, b), y), x| ((a.min(x), b.max(x)), y)))
    else {
        // A chart without data says so rather than failing the page.
        root.draw(&Text::new(
            format!("{}: no data", c.title),
            (20, 20),
            (FONT, LABEL),
        ))?;
        return Ok(());
    };
    let x_range = |lo: f64, hi: f64| {
        if hi > lo { lo..hi } else { lo - 0.5..hi + 0.5 }
    };
    let y_top = |hi: f64| if hi > 0.0 { hi * 1.1 } else { 1.0 };
    let b = frame(root, &c.title, 90);
    match (c.x_axis, c.y_axis) {
        (Axis::LogSeconds, y) => {
            let xr = positive_range(x0, x1).log_scale();
            let yr = match y {
                Axis::Fraction => 0f64..1.0,
                _ => 0f64..y_top(y1),
            };
            let mut chart = { b }.build_cartesian_2d(xr, yr)?;
            chart
                .configure_mesh()
                .x_desc(c.x_desc.as_str())
                .y_desc(c.y_desc.as_str())
                .x_labels(30)
                .x_label_formatter(&|v| log_tick_label(*v))
                .y_label_formatter(&|v| plain_label(*v))
                .label_style((FONT, LABEL))
                .axis_desc_style((FONT, LABEL))
                .light_line_style(BLACK.mix(0.03))
                .draw()?;
            lines(&mut chart, c)
        }
        (_, Axis::LogSeconds) => {
            let mut chart =
                { b }.build_cartesian_2d(x_range(x0, x1), positive_range(y0, y1).log_scale())?;
            chart
                .configure_mesh()
                .x_desc(c.x_desc.as_str())
                .y_desc(c.y_desc.as_str())
                .y_labels(30)
                .x_label_formatter(&|v| plain_label(*v))
                .y_label_formatter(&|v| log_tick_label(*v))
                .label_style((FONT, LABEL))
                .axis_desc_style((FONT, LABEL))
                .light_line_style(BLACK.mix(0.03))
                .draw()?;
            lines(&mut chart, c)
        }
        (_, y) => {
            let yr = match y {
                Axis::Fraction => 0f64..1.05,
                _ => 0f64..y_top(y1),
            };
            let mut chart = { b }.build_cartesian_2d(x_range(x0, x1), yr)?;
            chart
                .configure_mesh()
                .x_desc(c.x_desc.as_str())
                .y_desc(c.y_desc.as_str())
                .x_label_formatter(&|v| plain_label(*v))
                .y_label_formatter(&|v| count_label(*v))
                .label_style((FONT, LABEL))
                .axis_desc_style((FONT, LABEL))
                .light_line_style(BLACK.mix(0.03))
                .draw()?;
            lines(&mut chart, c)
        }
    }
}

fn lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    c: &Chart,
) -> Result<(), DrawError>
where
    DB: DrawingBackend<ErrorType: 'static> + 'a,
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let ok = |axis: Axis, v: f64| v.is_finite() && (axis != Axis::LogSeconds || v > 0.0);
    for (i, s) in c.series.iter().enumerate() {
        let col = color(i);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(x, y)| ok(c.x_axis, *x) && ok(c.y_axis, *y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), col.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3)));
        if pts.len() <= 40 {
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
        }
    }
    let (y_lo, y_hi) = {
        let r = chart.plotting_area().get_y_range();
        (r.start, r.end)
    };
    for m in &c.markers {
        let grey = BLACK.mix(0.5);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(m.x, y_lo), (m.x, y_hi)],
            grey.stroke_width(2),
        )))?;
        // The label sits at the foot of the line, clear of the legend at the top.
        let foot = match c.y_axis {
            Axis::LogSeconds => y_lo * (y_hi / y_lo).powf(0.08),
            _ => y_lo + (y_hi - y_lo) * 0.08,
        };
        chart.draw_series(std::iter::once(Text::new(
            format!(" {}", m.label),
            (m.x, foot),
            (FONT, LABEL).into_font().color(&grey),
        )))?;
    }
    legend(chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page {
            title: "run <one>".into(),
            subtitle: "a & b".into(),
            warnings: vec!["not steady".into()],
            tables: vec![Table {
                caption: "goodput".into(),
                head: vec!["origin".into(), "req/s".into()],
                rows: vec![vec!["intended".into(), "12.5".into()]],
            }],
            charts: vec![
                Chart {
                    title: "rates".into(),
                    x_desc: "seconds".into(),
                    x_axis: Axis::Count,
                    y_desc: "per second".into(),
                    y_axis: Axis::Count,
                    series: vec![Series {
                        label: "offered".into(),
                        points: vec![(0.0, 10.0), (1.0, 12.0), (2.0, 11.0)],
                    }],
                    markers: vec![Marker {
                        x: 1.0,
                        label: "warm-up ends".into(),
                    }],
                },
                Chart {
                    title: "ttft".into(),
                    x_desc: "seconds".into(),
                    x_axis: Axis::Count,
                    y_desc: "TTFT".into(),
                    y_axis: Axis::LogSeconds,
                    series: vec![Series {
                        label: "p99".into(),
                        points: vec![(0.0, 1e-3), (1.0, 0.0), (2.0, 2e-3)],
                    }],
                    markers: vec![],
                },
                Chart {
                    title: "cdf".into(),
                    x_desc: "TTFT".into(),
                    x_axis: Axis::LogSeconds,
                    y_desc: "fraction".into(),
                    y_axis: Axis::Fraction,
                    series: vec![Series {
                        label: "from intended".into(),
                        points: vec![(1e-4, 0.0), (1e-3, 0.5), (1e-2, 1.0)],
                    }],
                    markers: vec![],
                },
                Chart {
                    title: "empty".into(),
                    x_desc: "x".into(),
                    x_axis: Axis::Count,
                    y_desc: "y".into(),
                    y_axis: Axis::Count,
                    series: vec![],
                    markers: vec![],
                },
            ],
            text: "a < b".into(),
            config_json: "{\"seed\": 1}".into(),
        }
    }

    /// Self-contained (no script, no external reference), escaped, one SVG a chart, and
    /// the same page for the same data.
    #[test]
    fn a_page_is_whole_escaped_and_deterministic() {
        let html = render(&page()).unwrap();
        assert_eq!(html.matches("<svg").count(), 4);
        assert!(!html.contains("<script"));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(html.contains("run &lt;one&gt;") && html.contains("a &amp; b"));
        assert!(html.contains("a &lt; b") && html.contains("&quot;seed&quot;"));
        assert!(html.contains("warm-up ends") && html.contains("empty: no data"));
        assert_eq!(html, render(&page()).unwrap());
    }
}
