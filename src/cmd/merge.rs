//! `heisenbench merge`: shard results of one plan, from any number of machines, merged.

use heisenbench_live::files::FileKind;
use std::io::Write;

use heisenbench_live::generator::distributed::{MergeError, merge, parse_results};

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::MergeArgs;

pub fn run(a: MergeArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let mut results = Vec::new();
    for f in &a.files {
        let text = heisenbench_live::files::read_text(f, FileKind::Report)
            .map_err(|e| Failure::Usage(e.to_string()))?;
        results.extend(
            parse_results(&text).map_err(|e| Failure::Usage(format!("{}: {e}", f.display())))?,
        );
    }
    let (report, notes) = merge(results).map_err(|e| match e {
        MergeError::PlanMismatch { .. } | MergeError::Empty | MergeError::Bad(_) => {
            Failure::Usage(e.to_string())
        }
        other => Failure::Runtime(other.into()),
    })?;
    if let Some(path) = &a.out {
        write_atomic(
            path,
            &serde_json::to_vec_pretty(&report).map_err(|e| Failure::Runtime(e.into()))?,
        )?;
    }
    if let Some(path) = &a.html {
        write_atomic(path, super::report_page::html(&report)?.as_bytes())?;
    }
    if a.json {
        let mut v = serde_json::to_value(&report).map_err(|e| Failure::Runtime(e.into()))?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "merge_notes".into(),
                serde_json::to_value(&notes).map_err(|e| Failure::Runtime(e.into()))?,
            );
        }
        write_json(out, &v)?;
        return super::run::verdict(&report);
    }
    notes.write_summary(&report, out)?;
    super::run::verdict(&report)
}
