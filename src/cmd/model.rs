//! `heisenbench model <queue>`.

use std::io::Write;

use crate::flags::model::QueueCmd;
use heisenbench_model::queue::TailMethod;
use heisenbench_sim::plancheck::PoolCheck;

use super::write_json;
use crate::Failure;
use heisenbench_model::table::{queue_rows, write_pairs};

pub fn run(cmd: QueueCmd, out: &mut dyn Write) -> Result<(), Failure> {
    let queue = cmd.build()?;
    let json = cmd.json();
    let report = queue.report();
    // A pool the model only approximates is answered by simulation as well.
    let check = match &cmd {
        QueueCmd::Mgc {
            customers,
            seed,
            no_check: false,
            ..
        } if report.tail_method == TailMethod::ExponentialFit => PoolCheck::run(
            report.arrival_rate_per_s,
            report.servers,
            queue.service(),
            *customers,
            *seed,
        ),
        _ => None,
    };
    if json {
        let mut v = serde_json::to_value(&report).map_err(|e| Failure::Runtime(e.into()))?;
        if let (Some(c), Some(o)) = (&check, v.as_object_mut()) {
            let c = serde_json::to_value(c).map_err(|e| Failure::Runtime(e.into()))?;
            o.insert("simulation".into(), c);
        }
        return write_json(out, &v);
    }
    writeln!(out, "{}", report.model)?;
    write_pairs(out, &queue_rows(&report))?;
    if let Some(c) = &check {
        c.write_summary(&report, out)?;
    }
    Ok(())
}
