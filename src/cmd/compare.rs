//! `heisenbench compare`: a report held against the model.

use std::io::Write;

use heisenbench_model::compare::{Comparison, LoopArrivals, Observation, compare};
use heisenbench_model::service::Service;
use heisenbench_model::units::{Quantile, format_seconds};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write_json;
use crate::Failure;
use crate::args::CompareArgs;

/// A foreign client's measurements, for one of its loops. The rate is named by its unit:
/// requests per second with the events (chunks) each brings, or events per second.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Foreign {
    /// Requests per second on one client loop.
    requests_per_s: Option<f64>,
    /// Events (streamed chunks) one request brings to the loop.
    events_per_request: Option<f64>,
    /// Events per second on one client loop.
    events_per_s: Option<f64>,
    /// Refused: it does not say whether it counts requests or events.
    arrival_rate_per_s: Option<f64>,
    event_cost_mean_s: f64,
    #[serde(default = "one")]
    event_cost_scv: f64,
    #[serde(default = "one_u")]
    burst: u32,
    round_robin_k: Option<u32>,
    observed: Observed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Observed {
    mean_s: Option<f64>,
    p50_s: Option<f64>,
    p90_s: Option<f64>,
    p99_s: Option<f64>,
}

fn one() -> f64 {
    1.0
}
fn one_u() -> u32 {
    1
}

/// One compared run.
#[derive(Serialize)]
struct Compared {
    label: String,
    source: String,
    comparison: Comparison,
}

pub fn run(a: CompareArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let text = std::fs::read(&a.report)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", a.report.display())))?;
    let v: Value = serde_json::from_slice(&text)
        .map_err(|e| Failure::Usage(format!("{}: not JSON: {e}", a.report.display())))?;
    let mut results = Vec::new();
    match v.get("kind").and_then(Value::as_str) {
        Some("sim") => {
            let runs = v["runs"].as_array().map_or(&[][..], Vec::as_slice);
            if runs.is_empty() {
                return Err(Failure::Usage(format!(
                    "{}: a sim report with no runs",
                    a.report.display()
                )));
            }
            for run in runs {
                let label = run["scenario"]["name"]
                    .as_str()
                    .unwrap_or("sim")
                    .to_string();
                let c: Option<Comparison> =
                    serde_json::from_value(run["prediction"]["comparison"].clone()).ok();
                match c {
                    Some(comparison) => results.push(Compared {
                        label,
                        source: "sim".into(),
                        comparison,
                    }),
                    None => writeln!(
                        out,
                        "{label}: no prediction (closed loop, or a free client)"
                    )?,
                }
            }
        }
        Some("live") => results.push(live(&v, a.tolerance)?),
        _ => {
            let f: Foreign = serde_json::from_value(v).map_err(|e| {
                Failure::Usage(format!(
                    "{}: neither a heisenbench report nor a foreign observation: {e}",
                    a.report.display()
                ))
            })?;
            let event_rate = foreign_event_rate(&f)?;
            let service = Service::gamma(f.event_cost_mean_s, f.event_cost_scv)?;
            let mut quantiles = Vec::new();
            for (q, v) in [
                (Quantile::P50, f.observed.p50_s),
                (Quantile::P90, f.observed.p90_s),
                (Quantile::P99, f.observed.p99_s),
            ] {
                if let Some(v) = v {
                    quantiles.push((q, v));
                }
            }
            let obs = Observation {
                event_rate_per_s: event_rate,
                service,
                burst: f.burst,
                arrivals: f
                    .round_robin_k
                    .map_or(LoopArrivals::Poisson, |k| LoopArrivals::RoundRobin { k }),
                wait_mean_s: f.observed.mean_s,
                wait_quantiles_s: quantiles,
            };
            results.push(Compared {
                label: "foreign client".into(),
                source: "foreign".into(),
                comparison: compare(&obs, a.tolerance)?,
            });
        }
    }
    if a.json {
        return write_json(out, &results);
    }
    for r in &results {
        print(out, r)?;
    }
    Ok(())
}

/// The events per second a foreign observation describes; refuses the ambiguous.
fn foreign_event_rate(f: &Foreign) -> Result<f64, Failure> {
    if f.arrival_rate_per_s.is_some() {
        return Err(Failure::Usage(
            "arrival_rate_per_s is ambiguous (requests or chunks per second?): give \
             requests_per_s with events_per_request, or events_per_s"
                .into(),
        ));
    }
    let positive = |name: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(Failure::Usage(format!("{name} must be > 0, not {v}")))
        }
    };
    match (f.requests_per_s, f.events_per_request, f.events_per_s) {
        (Some(r), Some(n), None) => {
            Ok(positive("requests_per_s", r)? * positive("events_per_request", n)?)
        }
        (None, None, Some(e)) => positive("events_per_s", e),
        (Some(_), None, None) => Err(Failure::Usage(
            "requests_per_s needs events_per_request: the loop's load is its events".into(),
        )),
        _ => Err(Failure::Usage(
            "give either requests_per_s with events_per_request, or events_per_s (not both)".into(),
        )),
    }
}

/// A live report: one shard's loop, its events arriving a response at a time, each
/// costing the emulated client cost (or, without one, the shards' CPU per event).
fn live(v: &Value, tolerance: f64) -> Result<Compared, Failure> {
    let cfg = &v["config"];
    let workers = cfg["workers"].as_f64().unwrap_or(1.0).max(1.0);
    let events = v["events"].as_f64().unwrap_or(0.0);
    let completed = v["accounting"]["completed"].as_f64().unwrap_or(0.0);
    if events == 0.0 || completed == 0.0 {
        return Err(Failure::Usage(
            "the live report has no completed requests to compare".into(),
        ));
    }
    let cost = cfg["client_cost_s"].as_f64().unwrap_or(0.0);
    let cpu = v["merged"]["cpu_ns"].as_f64().unwrap_or(0.0) * 1e-9 / events;
    let mean = if cost > 0.0 { cost } else { cpu.max(1e-9) };
    let per_request = events / completed;
    let rate = v["offered_qps"].as_f64().unwrap_or(0.0) / workers * per_request;
    let d = |k: &str, f: &str| v[k][f].as_f64().unwrap_or(0.0);
    // With a zero-latency server a response is due at its request's intended time. Its
    // events' time in the client is then the send lag (the loop was busy when the
    // request was due), the bytes' wait for the loop to read them (send stamp to arrival
    // stamp) and the wait and processing after arrival: the model's wait plus one service.
    let observed =
        d("send_lag", "mean_s") + d("observer_overhead", "mean_s") + d("processing", "mean_s")
            - mean;
    let obs = Observation {
        event_rate_per_s: rate,
        service: Service::gamma(mean, if cost > 0.0 { 0.0 } else { 0.25 })?,
        burst: per_request.round().max(1.0) as u32,
        arrivals: LoopArrivals::Poisson,
        wait_mean_s: Some(observed.max(0.0)),
        wait_quantiles_s: vec![],
    };
    Ok(Compared {
        label: cfg["name"].as_str().unwrap_or("live").to_string(),
        source: "live".into(),
        comparison: compare(&obs, tolerance)?,
    })
}

fn print(out: &mut dyn Write, r: &Compared) -> Result<(), Failure> {
    let c = &r.comparison;
    writeln!(
        out,
        "{} ({}): model {} at utilisation {:.3}",
        r.label, r.source, c.model, c.rho
    )?;
    writeln!(out, "  why this model: {}", c.model_reason)?;
    for row in &c.rows {
        writeln!(
            out,
            "  {:<6} predicted {:>10}  observed {:>10}  error {}",
            row.statistic,
            format_seconds(row.predicted_s),
            format_seconds(row.observed_s),
            row.relative_error
                .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0))
        )?;
    }
    if let Some(p) = &c.plain_mg1 {
        writeln!(
            out,
            "  plain M/G/1, ignoring the bursts, would predict a mean of {}",
            format_seconds(p.wq_mean_s)
        )?;
    }
    writeln!(out, "  verdict: {}", c.verdict_text)?;
    Ok(())
}
