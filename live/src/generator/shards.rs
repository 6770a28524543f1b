//! The default shard count of a run: the plan that keeps each shard's loop under a wait
//! budget at this machine's measured per-event cost.

use std::path::Path;

use super::calibrate::{CalibrateError, measure};
use crate::measure::calibration::{Calibration, LOADS_QPS, default_path, load, store};

/// Seconds per load of the calibration a run makes by itself when there is none.
pub const AUTO_CALIBRATION_S: f64 = 1.0;
/// A run's default shard count keeps the p99 wait of an event for its shard's loop under
/// this.
pub const SHARD_BUDGET_S: f64 = 100e-6;

/// The default shard count of a run of `workload` on a machine of `cores` cores, with the
/// reasons, one a line (`whole_responses`: the server sends each response at once, as the
/// embedded zero-latency mock does). Open loop: the shard count [`Calibration::default_shards`] gives
/// with the calibration at `path` (else [`default_path`]); without one (or with one from
/// another build) one is measured now (`before_measuring` is told first) and stored. A
/// closed loop gets one shard per user, up to the cores.
pub fn default_run_shards(
    workload: &heisenbench_model::scenario::Workload,
    whole_responses: bool,
    path: Option<&Path>,
    cores: u32,
    before_measuring: &mut dyn FnMut(&str),
) -> Result<(u32, Vec<String>), CalibrateError> {
    use heisenbench_model::scenario::Arrivals;
    let mut why = Vec::new();
    let Some(qps) = workload.arrivals.rate_per_s() else {
        let users = match workload.arrivals {
            Arrivals::Closed { users, .. } => users,
            _ => 1,
        };
        let k = users.min(cores).max(1);
        why.push(format!(
            "closed loop of {users} users: one shard per user up to the {cores} cores here: {k}"
        ));
        return Ok((k, why));
    };
    let path = path.map(Path::to_path_buf).or_else(default_path);
    let stored = match &path {
        Some(p) => load(p)?.filter(Calibration::fits_this_build),
        None => None,
    };
    let (cal, source) = match stored {
        Some(c) => {
            let shown = path
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string());
            (c, format!("measured by `heisenbench calibrate` ({shown})"))
        }
        None => {
            before_measuring(&format!(
                "this machine has no calibration yet; measuring the generator's cost per event at {} loads (about {} s)...",
                LOADS_QPS.len(),
                LOADS_QPS.len() * AUTO_CALIBRATION_S as usize
            ));
            let c = measure(AUTO_CALIBRATION_S, &LOADS_QPS, false)?;
            let kept = match &path {
                Some(p) => match store(p, &c) {
                    Ok(()) => format!("stored in {}", p.display()),
                    Err(e) => format!("not stored: {e}"),
                },
                None => "not stored: no cache directory".into(),
            };
            (c, format!("measured just now, automatically ({kept})"))
        }
    };
    let (k, reasons) = cal.default_shards(
        qps,
        workload.mean_tokens().1,
        whole_responses,
        cores,
        SHARD_BUDGET_S,
        &source,
    )?;
    why.extend(reasons);
    Ok((k, why))
}

/// Descriptors a process of a run keeps free of connections (its files, pipes, the
/// runtime's own), or a quarter of its limit when that is less.
const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises this process's soft limit on open files to its hard limit (shard processes
/// inherit it) and returns the limit in force: a fresh machine's soft limit (often 1,024)
/// is far below what a load generator needs, and the hard limit is the machine's consent.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (now.current, now.maximum)
        && soft < hard
    {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            },
        );
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Local ports for outgoing connections (`ip_local_port_range`; 28,232 by Linux's
/// default when it cannot be read).
fn local_ports() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            let mut it = t.split_whitespace().map(|v| v.parse::<u64>().ok());
            match (it.next()??, it.next()??) {
                (lo, hi) if hi >= lo => Some(hi - lo + 1),
                _ => None,
            }
        })
        .unwrap_or(60_999 - 32_768 + 1)
}

/// The default bound on one shard's requests in flight, and why, in one line: what this
/// machine's descriptor limit (`descriptors`, per process) and local ports allow `shards`
/// shards (processes, each with its own descriptors, or threads sharing this process's),
/// with `server_here`: the server runs in this process (the embedded mock), so its end of
/// every connection is a descriptor here too. Past the bound, a request due is not sent
/// but counted as dropped: a generator that opens connections without bound runs out of
/// descriptors or ports and then fails every request, not only the excess.
pub fn in_flight_bound(
    shards: u32,
    threads: bool,
    server_here: bool,
    descriptors: u64,
) -> (u32, String) {
    let shards_u = u64::from(shards.max(1));
    let free = descriptors
        .saturating_sub(RESERVED_DESCRIPTORS.min(descriptors / 4))
        .max(1);
    // Connections whose descriptors share one table: all of them with threads, the
    // server's ends with it in this process.
    let per_table = match (threads, server_here) {
        (true, true) => free / (2 * shards_u),
        (true, false) | (false, true) => free / shards_u,
        (false, false) => free,
    };
    // Ports stay free for connections closing (TIME_WAIT): 90 % of the range.
    let ports = local_ports();
    let per_ports = ports * 9 / 10 / shards_u;
    let bound = per_table.min(per_ports).clamp(1, u64::from(u32::MAX)) as u32;
    let by = if per_table <= per_ports {
        format!(
            "{descriptors} open files a process{}",
            if server_here {
                ", the embedded mock's ends included"
            } else {
                ""
            }
        )
    } else {
        format!("{ports} local ports shared by {shards} shard(s)")
    };
    (
        bound,
        format!(
            "in flight: at most {bound} request(s) a shard by default ({by}); a request due past it is not sent and counts as dropped (--max-in-flight sets a cap that waits instead)"
        ),
    )
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    /// The bound follows the table the descriptors share and the ports, and never
    /// reaches zero.
    #[test]
    fn the_bound_divides_what_is_shared() {
        let ports = local_ports() * 9 / 10;
        let lim = |n: u64| n.min(ports) as u32;
        assert_eq!(in_flight_bound(1, false, false, 10_256).0, lim(10_000));
        assert_eq!(
            in_flight_bound(2, false, true, 10_256).0,
            lim(5_000).min((ports / 2) as u32)
        );
        assert_eq!(in_flight_bound(2, true, true, 10_256).0, lim(2_500));
        assert_eq!(in_flight_bound(4, false, false, 1).0, 1);
        assert_eq!(in_flight_bound(1, false, false, 512).0, lim(384));
        let (_, why) = in_flight_bound(2, false, true, 1_280);
        assert!(
            why.contains("1280 open files") && why.contains("dropped"),
            "{why}"
        );
    }
}
