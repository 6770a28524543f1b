//! `heisenbench compare`: a report held against the model.

use heisenbench_live::files::FileKind;
use std::io::Write;

use heisenbench_live::generator::result::loop_observation;
use heisenbench_model::compare::{Comparison, Foreign, compare};
use serde::Serialize;
use serde_json::Value;

use super::write_json;
use crate::Failure;
use crate::args::CompareArgs;

/// One compared run.
#[derive(Serialize)]
struct Compared {
    label: String,
    source: String,
    comparison: Comparison,
}

pub fn run(a: CompareArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let text = heisenbench_live::files::read_bounded(&a.report, FileKind::Report)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let v: Value = serde_json::from_slice(&text)
        .map_err(|e| Failure::Usage(format!("{}: not JSON: {e}", a.report.display())))?;
    let mut results = Vec::new();
    match v.get("kind").and_then(Value::as_str) {
        Some("sim") => {
            let runs = heisenbench_sim::report::run_comparisons(&v);
            if runs.is_empty() {
                return Err(Failure::Usage(format!(
                    "{}: a sim report with no runs",
                    a.report.display()
                )));
            }
            for (label, c) in runs {
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
        Some("live") => {
            let Some((label, obs)) = loop_observation(&v)? else {
                return Err(Failure::Usage(
                    "the live report has no completed requests to compare".into(),
                ));
            };
            results.push(Compared {
                label,
                source: "live".into(),
                comparison: compare(&obs, a.tolerance)?,
            });
        }
        _ => {
            let f: Foreign = serde_json::from_value(v).map_err(|e| {
                Failure::Usage(format!(
                    "{}: neither a heisenbench report nor a foreign observation: {e}",
                    a.report.display()
                ))
            })?;
            let obs = f.observation().map_err(|e| Failure::Usage(e.to_string()))?;
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
        r.comparison.write_summary(out, &r.label, &r.source)?;
    }
    Ok(())
}
