//! A run in llm-d-benchmark's benchmark report format, version 0.2: the one schema that
//! harness builds from every tool it runs, so dashboards that read it read heisenbench too.
//!
//! What goes where: the standard latency fields carry heisenbench's own numbers, measured
//! from the **intended** send (the format does not say which origin a tool uses; every
//! other tool fills them from its actual send). The same quantities from the actual send,
//! the send lag, the accounting and the server's side go under `results.observability`
//! (the format leaves it open), so nothing is lost. Times are in seconds (`s`, `s/token`).
//! No wall-clock time is written: the same run's report is the same bytes.

use serde_json::{Map, Value, json};

use heisenbench_model::scenario::{Arrivals, Lengths};
use heisenbench_model::stats::Dist;

use super::result::RunReport;

/// The format's version this writes.
pub const VERSION: &str = "0.2";

/// Its file beside `report.json` in `run --out DIR`.
pub const FILE: &str = "benchmark-report-v0.2.json";

/// The statistics of `d` in `units`, or None when nothing was measured.
fn stats(d: &Dist, units: &str) -> Option<Value> {
    (d.count > 0).then(|| {
        json!({
            "units": units,
            "mean": d.mean_s,
            "p50": d.p50_s,
            "p90": d.p90_s,
            "p99": d.p99_s,
            "p99p9": d.p999_s,
            "max": d.max_s,
        })
    })
}

fn rate(units: &str, per_s: f64) -> Value {
    json!({ "units": units, "mean": per_s })
}

fn lengths(l: &Lengths) -> Value {
    match *l {
        Lengths::Fixed { tokens } => json!({ "distribution": "fixed", "value": tokens.max(1) }),
        Lengths::Uniform { min, max } => json!({
            "distribution": "random",
            "value": ((f64::from(min) + f64::from(max)) / 2.0).max(1.0),
            "min": min,
            "max": max.max(1),
        }),
        Lengths::Normal { mean, sd } => json!({
            "distribution": "gaussian",
            "value": mean.max(1.0),
            "std_dev": sd.max(0.0),
        }),
        Lengths::Lognormal { mean, scv } => json!({
            "distribution": "other",
            "value": mean.max(1.0),
            "std_dev": mean * scv.max(0.0).sqrt(),
        }),
    }
}

/// Inserts `value` at `key` when there is one (the format's dump leaves out what is None).
fn put(m: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        m.insert(key.into(), v);
    }
}

/// `r` as a benchmark report v0.2.
pub fn benchmark_report(r: &RunReport) -> Value {
    let c = &r.config;
    let w = &c.workload;
    let mut standardized = Map::new();
    standardized.insert("tool".into(), json!("heisenbench"));
    standardized.insert("tool_version".into(), json!(env!("CARGO_PKG_VERSION")));
    // Prompts are seeded random words (or a repeated one): generated, not sampled.
    standardized.insert("source".into(), json!("random"));
    standardized.insert("stage".into(), json!(0));
    standardized.insert("input_seq_len".into(), lengths(&w.input_tokens));
    standardized.insert("output_seq_len".into(), lengths(&w.output_tokens));
    match &w.arrivals {
        Arrivals::Closed { users, .. } => {
            standardized.insert("concurrency".into(), json!((*users).max(1)));
        }
        a => put(
            &mut standardized,
            "rate_qps",
            a.rate_per_s().filter(|q| *q > 0.0).map(|q| json!(q)),
        ),
    }
    let acc = &r.accounting;
    let failures: u64 = acc.failed.values().sum();
    let mut latency = Map::new();
    put(
        &mut latency,
        "time_to_first_token",
        stats(&r.ttft.from_intended, "s"),
    );
    put(
        &mut latency,
        "normalized_time_per_output_token",
        stats(&r.ntpot.from_intended, "s/token"),
    );
    put(
        &mut latency,
        "time_per_output_token",
        stats(&r.tpot, "s/token"),
    );
    put(
        &mut latency,
        "inter_token_latency",
        stats(&r.itl, "s/token"),
    );
    put(
        &mut latency,
        "request_latency",
        stats(&r.e2e.from_intended, "s"),
    );
    let t = &r.throughput;
    let mut heisenbench = Map::new();
    heisenbench.insert("origin".into(), json!("intended send"));
    put(
        &mut heisenbench,
        "time_to_first_token_from_actual_send",
        stats(&r.ttft.from_actual, "s"),
    );
    put(
        &mut heisenbench,
        "request_latency_from_actual_send",
        stats(&r.e2e.from_actual, "s"),
    );
    put(&mut heisenbench, "send_lag", stats(&r.send_lag, "s"));
    heisenbench.insert("accounting".into(), json!(acc));
    heisenbench.insert("offered_qps".into(), json!(r.offered_qps));
    heisenbench.insert("seed".into(), json!(c.seed));
    heisenbench.insert("plan_hash".into(), json!(r.plan_hash));
    put(
        &mut heisenbench,
        "goodput",
        r.goodput.as_ref().map(|g| json!(g)),
    );
    put(
        &mut heisenbench,
        "server",
        r.server.as_ref().map(|s| json!(s)),
    );
    json!({
        "version": VERSION,
        "run": { "eid": c.name },
        "scenario": {
            "load": {
                "metadata": {
                    "schema_version": "0.0.1",
                    "cfg_id": r.plan_hash,
                    "description": format!("heisenbench run of {:?}, seed {}", c.name, c.seed),
                },
                "standardized": standardized,
                "native": { "config": c },
            }
        },
        "results": {
            "request_performance": {
                "aggregate": {
                    "requests": {
                        "total": acc.scheduled,
                        "failures": failures,
                        "incomplete": acc.timed_out + acc.not_sent + acc.lost,
                    },
                    "latency": latency,
                    "throughput": {
                        "input_token_rate": rate("tokens/s", t.input_tokens_per_s),
                        "output_token_rate": rate("tokens/s", t.output_tokens_per_s),
                        "total_token_rate": rate("tokens/s", t.total_tokens_per_s),
                        "requests_rate": rate("queries/s", r.achieved_qps),
                    },
                }
            },
            "observability": { "heisenbench": heisenbench },
        }
    })
}
