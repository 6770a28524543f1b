//! `heisenbench merge`: shard results of one plan, from any number of machines, merged.

use heisenbench_live::files::FileKind;
use std::io::Write;

use heisenbench_live::generator::distributed::{MergeError, Merger, documents, parse_document};

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::MergeArgs;

pub fn run(a: MergeArgs, out: &mut dyn Write) -> Result<(), Failure> {
    // One file at a time, each result kept as its text until the merge folds it: the
    // memory is the files', not a parsed result's per shard.
    let usage = |e: MergeError| match e {
        MergeError::PlanMismatch { .. } | MergeError::Empty | MergeError::Bad(_) => {
            Failure::Usage(e.to_string())
        }
        other => Failure::Runtime(other.into()),
    };
    let mut merger = Merger::default();
    for f in &a.files {
        let text = heisenbench_live::files::read_text(f, FileKind::Report)
            .map_err(|e| Failure::Usage(e.to_string()))?;
        let in_file = |e: String| Failure::Usage(format!("{}: {e}", f.display()));
        for doc in documents(&text).map_err(in_file)? {
            let r = parse_document(doc).map_err(in_file)?;
            merger.add(r, Some(doc)).map_err(usage)?;
        }
    }
    let (report, notes) = merger.finish().map_err(|e| match e {
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
