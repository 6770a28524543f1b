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
    let c = measure(a.duration.get(), a.qps.get()).map_err(|e| Failure::Runtime(e.into()))?;
    store(&path, &c).map_err(|e| Failure::Runtime(e.into()))?;
    if a.json {
        return write_json(out, &c);
    }
    writeln!(
        out,
        "per-event cost on this machine: mean {} (SCV {:.2}) over {} events at {} req/s x 200 tokens; stored in {}",
        format_seconds(c.event_cost_mean_s),
        c.event_cost_scv,
        c.events,
        c.qps,
        path.display()
    )?;
    writeln!(
        out,
        "one shard loop tops out near {:.0} events/s, i.e. {:.0} req/s of 200-token streams",
        1.0 / c.event_cost_mean_s,
        1.0 / (c.event_cost_mean_s * 202.0)
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
