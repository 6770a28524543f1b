//! A live run's report as a page: what `run --out DIR` writes as `report.html`, drawn by
//! `figures` from the report's own numbers.

use heisenbench_figures::Series;
use heisenbench_figures::page::{Axis, Chart, Marker, Page, Table};
use heisenbench_live::generator::config::Warmup;
use heisenbench_live::generator::result::RunReport;
use heisenbench_model::stats::Dist;
use heisenbench_model::units::format_seconds;

/// The page of `report` as HTML.
pub(crate) fn html(report: &RunReport) -> Result<String, crate::Failure> {
    heisenbench_figures::page::render(&run_page(report))
        .map_err(|e| crate::Failure::Runtime(e.into()))
}

/// The page of `report`.
pub(crate) fn run_page(report: &RunReport) -> Page {
    let r = report;
    let c = &r.config;
    let mut warnings = Vec::new();
    if let Some(p) = r.accounting_problem() {
        warnings.push(format!("Accounting: {p}."));
    }
    if r.interrupted {
        warnings.push("Interrupted: stopped before the end of its schedule.".into());
    }
    if c.insecure {
        warnings.push("TLS certificate verification was off (--insecure).".into());
    }
    if let Some(who) = &r.saturated {
        warnings.push(format!("Saturated: {who}."));
    }
    let mut text = Vec::new();
    let _ = r.write_summary(&mut text);
    Page {
        title: format!("heisenbench run: {}", c.name),
        subtitle: format!(
            "{} against {} ({:?}, {}), {} shard(s), seed {}: offered {:.1} req/s, achieved {:.1} req/s over {:.2} s",
            arrivals(&c.workload.arrivals),
            c.url,
            c.api,
            if c.stream {
                "streamed"
            } else {
                "whole responses"
            },
            c.shards,
            c.seed,
            r.offered_qps,
            r.achieved_qps,
            r.duration_s
        ),
        warnings,
        tables: tables(r),
        charts: charts(r),
        text: String::from_utf8_lossy(&text).into_owned(),
        config_json: serde_json::to_string_pretty(c).unwrap_or_default(),
    }
}

/// The arrival process in a few words.
fn arrivals(a: &heisenbench_model::scenario::Arrivals) -> String {
    use heisenbench_model::scenario::Arrivals::*;
    match a {
        Poisson { rate_per_s } => format!("Poisson arrivals at {rate_per_s} req/s"),
        Constant { rate_per_s } => format!("arrivals every 1/{rate_per_s} s"),
        Gamma { rate_per_s, .. } => format!("gamma arrivals at {rate_per_s} req/s"),
        Trace { .. } => "a trace's arrivals".into(),
        Closed { users, turns, .. } if *turns > 1 => {
            format!("{users} closed-loop users in conversations of {turns} turns")
        }
        Closed { users, .. } => format!("{users} closed-loop users"),
    }
}

fn tables(r: &RunReport) -> Vec<Table> {
    let t = &r.throughput;
    let a = &r.accounting;
    let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    let mut out = vec![
        Table {
            caption: "Requests".into(),
            head: [
                "scheduled",
                "completed",
                "failed",
                "timed out",
                "not sent",
                "lost",
                "accounting",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![vec![
                a.scheduled.to_string(),
                a.completed.to_string(),
                a.failed.values().sum::<u64>().to_string(),
                a.timed_out.to_string(),
                a.not_sent.to_string(),
                a.lost.to_string(),
                if a.balanced {
                    "balanced"
                } else {
                    "NOT balanced"
                }
                .into(),
            ]],
        },
        Table {
            caption: "Throughput (the measured part of the run)".into(),
            head: [
                "requests/s",
                "output tok/s",
                "peak output tok/s (1 s)",
                "input tok/s",
                "total tok/s",
                "per request tok/s, median",
                "per request, slowest 1 %",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![vec![
                format!("{:.1}", r.achieved_qps),
                format!("{:.0}", t.output_tokens_per_s),
                format!("{:.0}", t.peak_output_tokens_per_s),
                format!("{:.0}", t.input_tokens_per_s),
                format!("{:.0}", t.total_tokens_per_s),
                opt(t.per_request_output_tokens_per_s_p50),
                opt(t.per_request_output_tokens_per_s_p1),
            ]],
        },
    ];
    let f = format_seconds;
    let row = |name: &str, d: &Dist| {
        vec![
            name.to_string(),
            d.count.to_string(),
            f(d.p50_s),
            f(d.p90_s),
            f(d.p99_s),
            f(d.p999_s),
            f(d.max_s),
        ]
    };
    out.push(Table {
        caption: "Latency".into(),
        head: ["", "count", "p50", "p90", "p99", "p99.9", "max"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            row("send lag", &r.send_lag),
            row("TTFT from the intended send", &r.ttft.from_intended),
            row("TTFT from the actual send", &r.ttft.from_actual),
            row("TPOT", &r.tpot),
            row("ITL (per chunk)", &r.itl),
            row("E2E from the intended send", &r.e2e.from_intended),
            row("E2E from the actual send", &r.e2e.from_actual),
        ],
    });
    if !r.ttft_by_turn.is_empty() {
        out.push(Table {
            caption: "TTFT from the intended send by conversation turn (each turn re-sends the conversation so far)".into(),
            head: ["turn", "count", "p50", "p90", "p99", "p99.9", "max"]
                .map(String::from)
                .to_vec(),
            rows: r
                .ttft_by_turn
                .iter()
                .enumerate()
                .map(|(i, d)| row(&(i + 1).to_string(), d))
                .collect(),
        });
    }
    if let Some(g) = &r.goodput {
        let mut head = vec![
            "origin".to_string(),
            "good req/s".into(),
            "good tok/s".into(),
            "good".into(),
        ];
        head.extend(g.slo.bounded().map(|k| format!("{} met", k.key())));
        let view = |name: &str, v: &heisenbench_live::generator::result::GoodputView| {
            let mut cells = vec![
                name.to_string(),
                format!("{:.1}", v.requests_per_s),
                format!("{:.0}", v.output_tokens_per_s),
                format!("{:.1} %", 100.0 * v.good_fraction),
            ];
            cells.extend(v.attainment.values().map(|a| format!("{:.1} %", 100.0 * a)));
            cells
        };
        out.push(Table {
            caption: format!(
                "Goodput against {} ({} requests judged; the client's own delay failed {:.1} % of them)",
                g.slo,
                g.judged,
                100.0 * g.client_share
            ),
            head,
            rows: vec![
                view("from the intended send", &g.from_intended),
                view("from the actual send", &g.from_actual),
            ],
        });
    }
    if let Some(a) = r.server.as_ref().and_then(|v| v.attribution.as_ref()) {
        out.push(Table {
            caption: format!("TTFT split: {}", a.verdict),
            head: ["part", "mean", "share", "how"].map(String::from).to_vec(),
            rows: a
                .parts
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        format_seconds(p.mean_s),
                        format!("{:.1} %", 100.0 * p.share),
                        p.how.clone(),
                    ]
                })
                .collect(),
        });
    }
    out
}

fn charts(r: &RunReport) -> Vec<Chart> {
    let s = &r.series;
    let line =
        |label: &str,
         f: &dyn Fn(&heisenbench_live::generator::series::SeriesPoint) -> Option<f64>| {
            Series {
                label: label.into(),
                points: s.iter().filter_map(|p| f(p).map(|y| (p.t_s, y))).collect(),
            }
        };
    let markers: Vec<Marker> = match r.warmup.map(|w| w.warmup) {
        Some(Warmup::Seconds { seconds }) => vec![Marker {
            x: seconds,
            label: "warm-up ends".into(),
        }],
        _ => Vec::new(),
    };
    let over_time = |title: &str, y_desc: &str, y_axis: Axis, series: Vec<Series>| Chart {
        title: title.into(),
        x_desc: "seconds into the run".into(),
        x_axis: Axis::Count,
        y_desc: y_desc.into(),
        y_axis,
        series,
        markers: markers.clone(),
    };
    let cdf = |label: &str, rec: &heisenbench_model::stats::Recorder| Series {
        label: label.into(),
        points: rec.cdf(200),
    };
    let rec = &r.merged.recorders;
    let mut server = Vec::new();
    if let Some(v) = &r.server {
        use heisenbench_live::scrape::engines::Quantity as Q;
        let gauge = |label: &str, q: Q| Series {
            label: label.into(),
            points: v
                .windows
                .iter()
                .filter_map(|w| w.gauges.get(&q).map(|y| (w.t_s, *y)))
                .collect(),
        };
        server.push(over_time(
            "The server's requests, by its own gauges",
            "requests",
            Axis::Count,
            vec![gauge("running", Q::Running), gauge("waiting", Q::Waiting)],
        ));
        if let Some(a) = &v.attribution {
            let part = |label: &str, f: &dyn Fn(&heisenbench_live::scrape::view::SplitPoint) -> Option<f64>| Series {
                label: label.into(),
                points: a
                    .windows
                    .iter()
                    .filter_map(|w| f(w).map(|y| (w.t_s, y * 1e3)))
                    .collect(),
            };
            server.push(over_time(
                "TTFT split by the second of the first token (means)",
                "milliseconds",
                Axis::Count,
                vec![
                    part("TTFT from the intended send", &|w| Some(w.ttft_mean_s)),
                    part("the server's queue", &|w| w.queue_s),
                    part("the server's prefill", &|w| w.prefill_s),
                    part("the client's send lag", &|w| Some(w.client_s)),
                ],
            ));
        }
    }
    let mut charts = vec![
        over_time(
            "Requests per second",
            "requests per second",
            Axis::Count,
            vec![
                line("offered (intended send)", &|p| Some(p.offered_per_s)),
                line("sent", &|p| Some(p.sent_per_s)),
                line("completed", &|p| Some(p.completed_per_s)),
                line("failed", &|p| Some(p.failed_per_s)),
            ],
        ),
        over_time(
            "Output tokens per second",
            "tokens per second",
            Axis::Count,
            vec![line("output tokens", &|p| Some(p.output_tokens_per_s))],
        ),
        over_time(
            "Latency by the second of the intended send",
            "seconds (log scale)",
            Axis::LogSeconds,
            vec![
                line("TTFT p50 from the intended send", &|p| p.ttft_p50_s),
                line("TTFT p99 from the intended send", &|p| p.ttft_p99_s),
                line("send lag p99", &|p| p.send_lag_p99_s),
            ],
        ),
        over_time(
            "Requests in flight (time-weighted mean)",
            "requests",
            Axis::Count,
            vec![line("in flight", &|p| Some(p.in_flight_mean))],
        ),
        Chart {
            title: "TTFT from the intended and the actual send".into(),
            x_desc: "TTFT (log scale)".into(),
            x_axis: Axis::LogSeconds,
            y_desc: "fraction of requests".into(),
            y_axis: Axis::Fraction,
            series: vec![
                cdf("from the intended send", &rec.ttft_intended),
                cdf("from the actual send", &rec.ttft_actual),
            ],
            markers: r
                .config
                .slo
                .and_then(|s| s.ttft_s)
                .map(|b| Marker {
                    x: b,
                    label: "TTFT bound".into(),
                })
                .into_iter()
                .collect(),
        },
    ];
    charts.extend(server);
    charts
}

/// The page of a sweep's profile: its stages as a table, and latency, rate and goodput
/// against load with the knee marked.
pub(crate) fn sweep_page(
    p: &heisenbench_model::profile::Profile,
    subtitle: String,
) -> Result<String, crate::Failure> {
    let closed = p.stages.iter().any(|s| s.users.is_some());
    let x_desc = if closed {
        "closed-loop users"
    } else {
        "offered requests per second"
    };
    let knee = p.knee_users.map(f64::from).or(p.knee_qps);
    let mut markers: Vec<Marker> = knee
        .map(|k| Marker {
            x: k,
            label: "knee".into(),
        })
        .into_iter()
        .collect();
    if let Some(g) = p.goodput_knee_load.filter(|g| Some(*g) != knee) {
        markers.push(Marker {
            x: g,
            label: "knee by goodput".into(),
        });
    }
    let mut stages = p.stages.clone();
    stages.sort_by(|a, b| a.load().total_cmp(&b.load()));
    let line =
        |label: &str, f: &dyn Fn(&heisenbench_model::profile::Stage) -> Option<f64>| Series {
            label: label.into(),
            points: stages
                .iter()
                .filter_map(|s| f(s).map(|y| (s.load(), y)))
                .collect(),
        };
    let chart = |title: &str, y_desc: &str, y_axis: Axis, series: Vec<Series>| Chart {
        title: title.into(),
        x_desc: x_desc.into(),
        x_axis: Axis::Count,
        y_desc: y_desc.into(),
        y_axis,
        series,
        markers: markers.clone(),
    };
    let mut charts = vec![
        chart(
            "p99 TTFT from the intended send",
            "seconds (log scale)",
            Axis::LogSeconds,
            vec![line("p99 TTFT", &|s| Some(s.p99_s))],
        ),
        chart(
            "Achieved requests per second",
            "requests per second",
            Axis::Count,
            vec![line("achieved", &|s| Some(s.achieved_qps))],
        ),
    ];
    if stages.iter().any(|s| s.good_fraction.is_some()) {
        charts.push(chart(
            "Requests within the SLO (from the intended send)",
            "fraction of requests",
            Axis::Fraction,
            vec![line("good", &|s| s.good_fraction)],
        ));
    }
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    let rows = stages
        .iter()
        .map(|s| {
            vec![
                s.users.map_or(format!("{:.1} req/s", s.offered_qps), |u| {
                    format!("{u} users")
                }),
                format!("{:.1}", s.achieved_qps),
                format_seconds(s.p99_s),
                opt(s.good_fraction, &|g| format!("{:.1} %", 100.0 * g)),
                opt(s.in_flight_mean, &|l| format!("{l:.2}")),
                opt(s.little_in_flight, &|l| format!("{l:.2}")),
                if p.criterion.is_met_by(s) {
                    "met"
                } else {
                    "missed"
                }
                .into(),
            ]
        })
        .collect();
    let knee_text = match (p.knee_users, p.knee_qps) {
        (Some(u), Some(q)) => format!("knee: {u} users ({q:.1} req/s)"),
        (None, Some(q)) => format!("knee: {q:.1} req/s"),
        _ => "no knee: even the lowest stage missed".into(),
    };
    let page = Page {
        title: "heisenbench sweep".into(),
        subtitle,
        warnings: Vec::new(),
        tables: vec![Table {
            caption: format!("{knee_text}; criterion: {}", p.criterion_text),
            head: [
                "load",
                "achieved req/s",
                "p99 TTFT",
                "good",
                "in flight (measured)",
                "in flight (Little: rate x E2E)",
                "criterion",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }],
        charts,
        text: String::new(),
        config_json: serde_json::to_string_pretty(p).unwrap_or_default(),
    };
    heisenbench_figures::page::render(&page).map_err(|e| crate::Failure::Runtime(e.into()))
}
