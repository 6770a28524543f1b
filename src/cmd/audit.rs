//! `heisenbench audit`: another client against the mock, its report against the truth.

use std::io::Write;
use std::time::Duration;

use heisenbench_figures::{AuditPoint, AuditedClient};
use heisenbench_live::audit::predict::{self, Prediction};
use heisenbench_live::audit::{self, AuditConfig, AuditError, Observed};
use heisenbench_model::plan::Budget;
use heisenbench_model::units::format_seconds;
use serde::{Deserialize, Serialize};

use super::{check_out_file, write_atomic, write_json};
use crate::Failure;
use crate::args::AuditArgs;

/// One audit as written by `--out` and `--json`.
#[derive(Serialize, Deserialize, Clone)]
struct Report {
    version: u32,
    /// "audit".
    kind: String,
    /// The client's name.
    #[serde(default)]
    label: Option<String>,
    observed: Observed,
    prediction: Option<Prediction>,
    /// What the mock was told (its latencies are the truth's floor).
    server: String,
}

/// `audit --rates`: one report per rate (without the per-request records).
#[derive(Serialize, Deserialize)]
struct Series {
    version: u32,
    /// "audit-series".
    kind: String,
    points: Vec<Report>,
}

pub fn run(a: AuditArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let Budget::Quantile { q, limit_s } = a.budget else {
        return Err(Failure::Usage(
            "--budget: audit plans on a quantile of the wait (e.g. p99=1ms), not the mean".into(),
        ));
    };
    if !(a.tolerance.is_finite() && a.tolerance > 0.0) {
        return Err(Failure::Usage("--tolerance must be > 0".into()));
    }
    if let Some(p) = &a.out {
        check_out_file(p)?;
    }
    if let Some(d) = &a.figure {
        super::check_out_dir(d)?;
    }
    let work_dir = match a.work_dir {
        Some(d) => {
            super::check_out_dir(&d)?;
            d
        }
        None => std::env::temp_dir().join(format!("heisenbench-audit-{}", std::process::id())),
    };
    let rates: Vec<f64> = match a.rate {
        Some(r) => vec![r.get()],
        None => a.rates.iter().map(|r| r.get()).collect(),
    };
    let series = a.rate.is_none();
    let duration = Duration::from_secs_f64(a.duration.get());
    let mock = super::mock::config(a.mock);
    let bursts = mock.law().streams_in_bursts();
    let server = format!(
        "embedded mock: TTFT {}, ITL {}",
        format_seconds(mock.time_to_first_token.as_secs_f64()),
        format_seconds(mock.inter_token_latency.as_secs_f64())
    );
    let budget = predict::Budget { q, limit: limit_s };
    let mut reports = Vec::new();
    let mut failure = None;
    for rate in rates {
        let cfg = AuditConfig {
            command: a.command.clone(),
            rate_per_s: rate,
            duration,
            prompt_tokens: a.prompt_tokens,
            output_tokens: a.output_tokens,
            work_dir: if series {
                work_dir.join(format!("rate-{rate}"))
            } else {
                work_dir.clone()
            },
            timeout: a
                .timeout
                .map_or(duration * 3 + Duration::from_secs(60), |t| {
                    Duration::from_secs_f64(t.get())
                }),
            sample_every: Duration::from_millis(100),
            mock: mock.clone(),
        };
        let observed = audit::run(&cfg).map_err(|e| match e {
            AuditError::Start { .. } | AuditError::NoCommand => Failure::Usage(e.to_string()),
            AuditError::Mock(heisenbench_live::mock::MockError::Config(c)) => {
                Failure::Usage(c.to_string())
            }
            other => Failure::Runtime(other.into()),
        })?;
        let prediction = predict::predict(&observed, bursts, a.loops, budget, a.tolerance);
        if !a.json {
            if series {
                writeln!(out, "== offered {rate} req/s")?;
            }
            print(out, &observed, prediction.as_ref(), &server)?;
        }
        if failure.is_none() {
            failure = ending(&observed).err();
        }
        reports.push(Report {
            version: 1,
            kind: "audit".into(),
            label: a.label.clone(),
            observed,
            prediction,
            server: server.clone(),
        });
    }
    let summaries: Vec<Report> = reports
        .iter()
        .map(|r| Report {
            observed: Observed {
                served: Vec::new(),
                ..r.observed.clone()
            },
            ..r.clone()
        })
        .collect();
    if let Some(p) = &a.out {
        let bytes = if series {
            pretty(&Series {
                version: 1,
                kind: "audit-series".into(),
                points: summaries.clone(),
            })
        } else {
            pretty(&reports[0])
        }?;
        write_atomic(p, &bytes)?;
    }
    if a.json {
        if series {
            write_json(
                out,
                &Series {
                    version: 1,
                    kind: "audit-series".into(),
                    points: summaries.clone(),
                },
            )?;
        } else {
            write_json(out, &summaries[0])?;
        }
    }
    if let Some(dir) = &a.figure {
        let files = heisenbench_figures::draw_audit(&[client_line(&summaries)], dir)
            .map_err(|e| Failure::Runtime(e.into()))?;
        if !a.json {
            writeln!(out, "drew {}", files[0].display())?;
        }
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

fn pretty(v: &impl Serialize) -> Result<Vec<u8>, Failure> {
    serde_json::to_vec_pretty(v).map_err(|e| Failure::Runtime(e.into()))
}

/// How the client's run ended, as the command's status.
fn ending(o: &Observed) -> Result<(), Failure> {
    let c = &o.client;
    if c.timed_out {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "the client did not finish within the timeout; it was stopped (see {})",
            c.logs[1].display()
        )));
    }
    if !c.succeeded() {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "the client {} (its output: {})",
            c.ending(),
            c.logs[1].display()
        )));
    }
    if o.truth.requests == 0 {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "the server saw no requests: does the command use {{url}} (or {{host}} and {{port}})?"
        )));
    }
    Ok(())
}

/// One client's line on the audit figure: its reports ordered by offered rate.
fn client_line(reports: &[Report]) -> AuditedClient {
    let label = reports
        .iter()
        .find_map(|r| r.label.clone())
        .or_else(|| {
            reports
                .iter()
                .find_map(|r| r.observed.reported.as_ref().map(|x| x.tool.clone()))
        })
        .or_else(|| {
            reports.first().and_then(|r| {
                r.observed.client.command.first().map(|c| {
                    std::path::Path::new(c)
                        .file_name()
                        .map_or(c.clone(), |f| f.to_string_lossy().into_owned())
                })
            })
        })
        .unwrap_or_else(|| "client".into());
    let mut points: Vec<AuditPoint> = reports
        .iter()
        .map(|r| {
            let o = &r.observed;
            let ttft = o.reported.as_ref().and_then(|x| x.ttft);
            AuditPoint {
                offered: o.offered.rate_per_s,
                achieved: o.truth.achieved_rate_per_s,
                reported_p50_s: ttft.and_then(|t| t.p50_s),
                reported_p99_s: ttft.and_then(|t| t.p99_s),
                true_p50_s: o.truth.ttft.p50_s,
                true_p99_s: o.truth.ttft.p99_s,
            }
        })
        .collect();
    points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    AuditedClient { label, points }
}

/// `heisenbench figures --audit FILE...`: one line per client (files of a client's single
/// audits and series are joined by the client's name).
pub fn figure_from_files(
    files: &[std::path::PathBuf],
    dir: &std::path::Path,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let mut clients: Vec<AuditedClient> = Vec::new();
    for f in files {
        let text = std::fs::read(f)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", f.display())))?;
        let v: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| Failure::Usage(format!("{}: not JSON: {e}", f.display())))?;
        let bad = |e: serde_json::Error| Failure::Usage(format!("{}: {e}", f.display()));
        let reports: Vec<Report> = match v.get("kind").and_then(serde_json::Value::as_str) {
            Some("audit") => vec![serde_json::from_value(v).map_err(bad)?],
            Some("audit-series") => serde_json::from_value::<Series>(v).map_err(bad)?.points,
            _ => {
                return Err(Failure::Usage(format!(
                    "{}: not an `audit --out` file",
                    f.display()
                )));
            }
        };
        // Files of the same client (one per rate) make one line.
        let line = client_line(&reports);
        match clients.iter_mut().find(|c| c.label == line.label) {
            Some(c) => {
                c.points.extend(line.points);
                c.points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
            }
            None => clients.push(line),
        }
    }
    let drawn =
        heisenbench_figures::draw_audit(&clients, dir).map_err(|e| Failure::Runtime(e.into()))?;
    writeln!(out, "drew {}", drawn[0].display())?;
    Ok(())
}

fn print(
    out: &mut dyn Write,
    o: &Observed,
    p: Option<&Prediction>,
    server: &str,
) -> Result<(), Failure> {
    let c = &o.client;
    let t = &o.truth;
    let f = format_seconds;
    writeln!(out, "client: {}", c.command.join(" "))?;
    writeln!(
        out,
        "  {} after {:.1}s; {} process(es) seen, at most {} at once with {} threads",
        c.ending(),
        c.wall_s,
        c.processes_seen,
        c.max_processes,
        c.max_threads
    )?;
    if c.left_running > 0 {
        writeln!(
            out,
            "  {} process(es) it left running were stopped",
            c.left_running
        )?;
    }
    match c.cpu_s {
        Some(cpu) => writeln!(
            out,
            "  CPU {cpu:.2}s over the tree; {:.2}s in the {:.1}s load window ({:.0}% of one core), \
             by process {}; the audit's own sampling: {:.3}s ({:.2}% of one core)",
            c.window_cpu_s.unwrap_or(0.0),
            c.window_s,
            100.0 * c.window_cpu_s.unwrap_or(0.0) / c.window_s.max(1e-9),
            c.window_cpu_per_process_s
                .iter()
                .take(4)
                .map(|s| format!("{s:.2}s"))
                .collect::<Vec<_>>()
                .join(", "),
            c.sampler_cpu_s,
            100.0 * c.sampler_cpu_s / c.wall_s.max(1e-9)
        )?,
        None => writeln!(
            out,
            "  CPU: not measurable here (no /proc process accounting)"
        )?,
    }
    writeln!(out, "server ({server}):")?;
    writeln!(
        out,
        "  {} requests, {} completed{}; achieved {:.1} req/s of {} offered; arrival gaps SCV {}",
        t.requests,
        t.completed,
        if t.errors.is_empty() {
            String::new()
        } else {
            format!(
                ", errors {}",
                t.errors
                    .iter()
                    .map(|(s, n)| format!("{n} x {s}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        t.achieved_rate_per_s,
        o.offered.rate_per_s,
        t.arrival_gap_scv
            .map_or("-".into(), |v| format!("{v:.2} (Poisson: 1)"))
    )?;
    writeln!(
        out,
        "  {:.1} tokens and {:.1} prompt words per request (asked: {} and {})",
        t.tokens_per_request,
        t.prompt_tokens_per_request,
        o.offered.output_tokens,
        o.offered.prompt_tokens
    )?;
    writeln!(
        out,
        "  true TTFT p50 {} p99 {}; E2E p50 {} p99 {}",
        f(t.ttft.p50_s),
        f(t.ttft.p99_s),
        f(t.e2e.p50_s),
        f(t.e2e.p99_s)
    )?;
    match &o.reported {
        Some(r) => {
            writeln!(
                out,
                "client's own report ({}, {}):",
                r.tool,
                r.file.display()
            )?;
            if let Some(rate) = r.requests_per_s {
                writeln!(
                    out,
                    "  throughput {rate:.1} req/s reported, {:.1} seen by the server",
                    t.achieved_rate_per_s
                )?;
            }
            let line = |name: &str,
                        rep: Option<heisenbench_live::audit::adapters::Summary>,
                        truth: &heisenbench_model::stats::Dist|
             -> String {
                let Some(rep) = rep else {
                    return format!("  {name:<5} not reported");
                };
                let cell = |r: Option<f64>, t: f64| {
                    r.map_or("-".to_string(), |r| format!("{} (true {})", f(r), f(t)))
                };
                format!(
                    "  {name:<5} mean {}  p50 {}  p99 {}",
                    cell(rep.mean_s, truth.mean_s),
                    cell(rep.p50_s, truth.p50_s),
                    cell(rep.p99_s, truth.p99_s)
                )
            };
            writeln!(out, "{}", line("TTFT", r.ttft, &t.ttft))?;
            writeln!(out, "{}", line("ITL", r.itl, &t.itl))?;
            writeln!(out, "{}", line("E2E", r.e2e, &t.e2e))?;
            if let Some(lag) = r.send_lag {
                writeln!(
                    out,
                    "  its own lateness against its schedule (not in its TTFT): mean {}  p99 {}",
                    lag.mean_s.map_or("-".into(), f),
                    lag.p99_s.map_or("-".into(), f)
                )?;
            }
        }
        None => writeln!(
            out,
            "client's own report: no result file of a known format in {} (known: {})",
            c.logs[0]
                .parent()
                .map_or("-".into(), |d| d.join("client-out").display().to_string()),
            heisenbench_live::audit::adapters::FORMATS.join(", ")
        )?,
    }
    let Some(p) = p else {
        writeln!(
            out,
            "model: no prediction (no completed requests, or no CPU figures)"
        )?;
        return Ok(());
    };
    writeln!(out, "model: {}", p.model)?;
    writeln!(
        out,
        "  CPU per chunk {}, per request {}; utilisation per loop {:.2} at the rate achieved, {:.2} at the rate offered",
        f(p.cpu_per_chunk_s),
        f(p.cpu_per_request_s),
        p.rho,
        p.rho_offered
    )?;
    if let Some(w) = p.wait_s {
        writeln!(
            out,
            "  predicted wait before the first chunk: mean {}  p50 {}  p90 {}  p99 {}",
            f(w[0]),
            f(w[1]),
            f(w[2]),
            f(w[3])
        )?;
    }
    for r in &p.rows {
        writeln!(
            out,
            "  TTFT {:<4} excess {} (reported {} - true {}), predicted {}{}",
            r.statistic,
            f(r.excess_s),
            f(r.reported_s),
            f(r.true_s),
            r.predicted_s.map_or("-".into(), f),
            r.relative_error
                .map_or(String::new(), |e| format!(", error {:+.1}%", e * 100.0))
        )?;
    }
    writeln!(out, "  verdict: {}", p.verdict_text)?;
    match p.loops_needed {
        Some(k) => writeln!(
            out,
            "plan: {k} process(es) for {} req/s with {} ({})",
            o.offered.rate_per_s, p.budget, p.plan_reason
        )?,
        None => writeln!(out, "plan: {}", p.plan_reason)?,
    }
    Ok(())
}
