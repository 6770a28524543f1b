//! Plain aligned tables for humans: every command's text report is made of these rows.

use std::io::{self, Write};

use crate::queue::QueueReport;
use crate::units::format_seconds;

/// Writes `rows` as `label  value`, labels padded to one column.
pub fn write_pairs(out: &mut dyn Write, rows: &[(String, String)]) -> io::Result<()> {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        writeln!(out, "  {k:<width$}  {v}")?;
    }
    Ok(())
}

/// The rows of a queue report.
pub fn queue_rows(r: &QueueReport) -> Vec<(String, String)> {
    let mut rows = vec![
        (
            "model".to_string(),
            format!("{} ({})", r.model, r.assumptions),
        ),
        (
            "arrival rate".into(),
            format!("{:.6} /s", r.arrival_rate_per_s),
        ),
        ("service".into(), r.service.to_string()),
    ];
    if r.servers > 1 {
        rows.push(("servers".into(), r.servers.to_string()));
    }
    rows.extend([
        ("utilisation rho".into(), format!("{:.6}", r.rho)),
        ("P(wait > 0)".into(), format!("{:.6}", r.p_wait)),
        (
            "mean wait Wq".into(),
            match r.wq_mean_error_s {
                Some(e) => format!(
                    "{} (+-{} lattice)",
                    format_seconds(r.wq_mean_s),
                    format_seconds(e)
                ),
                None => format_seconds(r.wq_mean_s),
            },
        ),
    ]);
    if let Some(sd) = r.wq_sd_s {
        rows.push(("sd of wait".into(), format_seconds(sd)));
    }
    rows.extend([
        ("wait p50".into(), format_seconds(r.wq_p50_s)),
        ("wait p90".into(), format_seconds(r.wq_p90_s)),
        ("wait p99".into(), format_seconds(r.wq_p99_s)),
        ("wait p99.9".into(), format_seconds(r.wq_p999_s)),
        ("mean in queue Lq".into(), format!("{:.6}", r.lq)),
        ("mean in system W".into(), format_seconds(r.w_mean_s)),
        ("mean in system L".into(), format!("{:.6}", r.l)),
        ("quantiles by".into(), r.tail_method.describe().into()),
    ]);
    rows
}
