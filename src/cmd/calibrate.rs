//! `heisenbench calibrate`.

use std::io::Write;

use heisenbench_live::calibrate::{default_path, measure, store};
use heisenbench_model::units::format_seconds;

use super::write_json;
use crate::Failure;
use crate::args::CalibrateArgs;

pub fn run(a: CalibrateArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let path = a.out.or_else(default_path).ok_or_else(|| {
        Failure::Usage("no place to store the calibration: give --out FILE".into())
    })?;
    let loads: Vec<f64> = a.qps.iter().map(|q| q.get()).collect();
    let c = measure(a.duration.get(), &loads, true).map_err(|e| Failure::Runtime(e.into()))?;
    store(&path, &c).map_err(|e| Failure::Runtime(e.into()))?;
    if a.json {
        return write_json(out, &c);
    }
    writeln!(
        out,
        "per-event cost on this machine, by load (200-token streams); stored in {}",
        path.display()
    )?;
    for p in &c.points {
        writeln!(
            out,
            "  {:>9.0} events/s: mean {} (SCV {:.2})",
            p.events_per_s,
            format_seconds(p.cost_mean_s),
            p.cost_scv
        )?;
    }
    let (events_per_s, requests_per_s) = c.loop_capacity();
    writeln!(
        out,
        "one shard loop tops out near {events_per_s:.0} events/s, i.e. {requests_per_s:.0} req/s of 200-token streams"
    )?;
    if let Some(f) = &c.floor {
        writeln!(
            out,
            "loopback floor (one-way, write stamp to read stamp): idle p50 {} p99 {}; at {:.0} msg/s p50 {} p99 {}",
            format_seconds(f.idle.p50_s),
            format_seconds(f.idle.p99_s),
            f.loaded_rate_per_s,
            format_seconds(f.loaded.p50_s),
            format_seconds(f.loaded.p99_s)
        )?;
    }
    Ok(())
}
