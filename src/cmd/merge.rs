//! `heisenbench merge`: shard results of one plan, from any number of machines, merged.

use std::io::Write;

use heisenbench_live::run::distributed::{MergeError, merge, parse_results};

use super::{write_atomic, write_json};
use crate::Failure;
use crate::args::MergeArgs;

pub fn run(a: MergeArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let mut results = Vec::new();
    for f in &a.files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", f.display())))?;
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
    let acc = &report.accounting;
    writeln!(
        out,
        "merged {} of {} shard(s) of plan {}: scheduled {}, completed {}, timed out {}, lost {} ({})",
        report.shards.iter().filter(|s| s.ok).count(),
        report.config.workers,
        report.plan_hash,
        acc.scheduled,
        acc.completed,
        acc.timed_out,
        acc.lost,
        if acc.balanced {
            "balanced"
        } else {
            "NOT BALANCED"
        }
    )?;
    if !notes.missing.is_empty() {
        writeln!(
            out,
            "missing shards (their requests are counted as lost): {:?}",
            notes.missing
        )?;
    }
    if !notes.duplicated.is_empty() {
        writeln!(
            out,
            "duplicated shards (the first result of each was kept): {:?}",
            notes.duplicated
        )?;
    }
    for s in &report.shards {
        writeln!(
            out,
            "  shard {}: {} requests, start slip {}, server clock offset {}",
            s.index,
            s.scheduled,
            s.start_slip_s
                .map_or("-".into(), |v| format!("{:.3} ms", v * 1e3)),
            s.clock_offset_estimate_s
                .map_or("-".into(), |v| format!("{v:+.1} s (+-0.5 s)"))
        )?;
    }
    writeln!(
        out,
        "TTFT from intended p50 {} p99 {}; achieved {:.1} of {:.1} req/s",
        heisenbench_model::units::format_seconds(report.ttft.from_intended.p50_s),
        heisenbench_model::units::format_seconds(report.ttft.from_intended.p99_s),
        report.achieved_qps,
        report.offered_qps
    )?;
    super::run::verdict(&report)
}
