//! `heisenbench calibrate`.

use std::io::Write;

use crate::flags::calibrate::CalibrateFlags;
use heisenbench_live::generator::calibrate::measure;
use heisenbench_live::measure::calibration::{default_path, store};

use super::write_json;
use crate::Failure;

pub fn run(a: CalibrateFlags, out: &mut dyn Write) -> Result<(), Failure> {
    let path = a.out.or_else(default_path).ok_or_else(|| {
        Failure::Usage("no place to store the calibration: give --out FILE".into())
    })?;
    let loads: Vec<f64> = a.qps.iter().map(|q| q.get()).collect();
    let c = measure(a.duration.get(), &loads, true).map_err(|e| Failure::Runtime(e.into()))?;
    store(&path, &c).map_err(|e| Failure::Runtime(e.into()))?;
    if a.json {
        return write_json(out, &c);
    }
    c.write_summary(out, &path)?;
    Ok(())
}
