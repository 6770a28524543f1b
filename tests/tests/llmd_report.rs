//! `run --out DIR` writes the run in llm-d-benchmark's benchmark report format (v0.2)
//! beside `report.json`; it validates against a transcription of that format's schema
//! (`tests/fixtures/llm-d-benchmark-report-v0.2.schema.json`), and documents broken on
//! purpose do not.

use std::time::Duration;

use heisenbench_live::generator::config::{RunConfig, ServerMetrics};
use heisenbench_live::generator::llmd::{FILE, VERSION, benchmark_report};
use heisenbench_live::generator::{RunOptions, run};
use heisenbench_live::mock::MockServer;
use heisenbench_live::mock::config::MockConfig;
use heisenbench_live::scrape::{Targets, metrics_url};
use heisenbench_model::scenario::{Arrivals, Lengths, Stop, Workload};
use serde_json::{Value, json};

fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/llm-d-benchmark-report-v0.2.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The JSON Schema keywords the transcription uses (`type`, `enum`, `required`,
/// `properties`, `additionalProperties: false`, `minimum`, `exclusiveMinimum`, `$ref` into
/// `$defs`), and its one own keyword, `units`: the name of a `$defs` enum the referenced
/// statistics' `units` must be in (the format's per-field unit lists). Every violation
/// found, by its path.
fn validate(root: &Value, schema: &Value, doc: &Value, path: &str, errors: &mut Vec<String>) {
    let resolved = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            &root["$defs"][name]
        }
        None => schema,
    };
    if let Some(class) = schema.get("units").and_then(Value::as_str) {
        let allowed = &root["$defs"][class]["enum"];
        if !allowed
            .as_array()
            .is_some_and(|a| a.contains(&doc["units"]))
        {
            errors.push(format!("{path}.units: {} not in {allowed}", doc["units"]));
        }
    }
    let s = resolved;
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => doc.is_object(),
            "string" => doc.is_string(),
            "number" => doc.is_number(),
            "integer" => doc.is_u64() || doc.is_i64(),
            _ => true,
        };
        if !ok {
            errors.push(format!("{path}: not a {t}: {doc}"));
            return;
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(doc)
    {
        errors.push(format!("{path}: {doc} not one of {e:?}"));
    }
    if let Some(min) = s.get("minimum").and_then(Value::as_f64)
        && doc.as_f64().is_some_and(|x| x < min)
    {
        errors.push(format!("{path}: {doc} < {min}"));
    }
    if let Some(min) = s.get("exclusiveMinimum").and_then(Value::as_f64)
        && doc.as_f64().is_some_and(|x| x <= min)
    {
        errors.push(format!("{path}: {doc} <= {min}"));
    }
    let Some(obj) = doc.as_object() else { return };
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = r.as_str().unwrap();
        if !obj.contains_key(key) {
            errors.push(format!("{path}: missing {key}"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    for (k, v) in obj {
        match props.and_then(|p| p.get(k)) {
            Some(sub) => validate(root, sub, v, &format!("{path}.{k}"), errors),
            None if s.get("additionalProperties") == Some(&json!(false)) => {
                errors.push(format!("{path}: unknown field {k}"));
            }
            None => {}
        }
    }
}

fn violations(doc: &Value) -> Vec<String> {
    let root = schema();
    let mut errors = Vec::new();
    validate(&root, &root, doc, "$", &mut errors);
    errors
}

#[test]
fn a_runs_report_validates_and_broken_ones_do_not() {
    let (m, _journal) = MockServer::start_recorded(MockConfig {
        port: 0,
        time_to_first_token: Duration::from_millis(2),
        inter_token_latency: Duration::from_micros(200),
        ..MockConfig::default()
    })
    .unwrap();
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate_per_s: 200.0 },
        stop: Stop::Count { requests: 100 },
        input_tokens: Lengths::Uniform { min: 8, max: 64 },
        output_tokens: Lengths::Fixed { tokens: 8 },
        prefix: None,
        dataset: None,
    };
    let cfg = RunConfig {
        seed: 3,
        server_metrics: ServerMetrics {
            targets: Targets::Urls(vec![metrics_url(&m.url())]),
            interval_s: 0.2,
        },
        ..RunConfig::streaming("llm-d", workload, &m.url(), "heisenbench-mock")
    };
    let cfg = cfg.checked().unwrap();
    let report = run(&cfg, &RunOptions::default()).unwrap();
    m.shutdown();
    let dir = std::env::temp_dir().join(format!("heisenbench-llmd-{}", std::process::id()));
    report.write_files(&dir, false).unwrap();
    let text = std::fs::read(dir.join(FILE)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // The bytes are those of the report made again (the same run, the same bytes).
    assert_eq!(
        text,
        serde_json::to_vec_pretty(&benchmark_report(&report)).unwrap()
    );
    let written: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(written["version"], json!(VERSION));
    assert_eq!(violations(&written), Vec::<String>::new());

    // The numbers are the run's: TTFT from the intended send in seconds, every request.
    let agg = &written["results"]["request_performance"]["aggregate"];
    assert_eq!(agg["requests"]["total"], json!(100));
    let p50 = agg["latency"]["time_to_first_token"]["p50"]
        .as_f64()
        .unwrap();
    assert!((p50 - report.ttft.from_intended.p50_s).abs() < 1e-12);
    let obs = &written["results"]["observability"]["heisenbench"];
    assert_eq!(obs["origin"], json!("intended send"));
    assert!(obs["server"]["attribution"].is_object());

    // Broken on purpose, each one way: the validator sees it.
    let mut broken = Vec::new();
    let mut d = written.clone();
    d["results"]["surprise"] = json!(1);
    broken.push(d);
    let mut d = written.clone();
    d["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["units"] =
        json!("s/token");
    broken.push(d);
    let mut d = written.clone();
    d["scenario"]["load"]["standardized"]["source"] = json!("made up");
    broken.push(d);
    let mut d = written.clone();
    d["scenario"]["load"]["standardized"]
        .as_object_mut()
        .unwrap()
        .remove("tool");
    broken.push(d);
    let mut d = written.clone();
    d["scenario"]["load"]["standardized"]["rate_qps"] = json!(0);
    broken.push(d);
    for (i, d) in broken.iter().enumerate() {
        assert_eq!(
            violations(d).len(),
            1,
            "broken document {i}: {:?}",
            violations(d)
        );
    }
}
