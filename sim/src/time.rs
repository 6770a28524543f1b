//! Simulated time: integer nanoseconds, never a wall clock.

use serde::{Deserialize, Serialize};

/// A point in simulated time, nanoseconds since the start of the run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct SimTime(pub u64);

impl SimTime {
    /// The start of the run.
    pub const ZERO: SimTime = SimTime(0);

    /// Nanoseconds since the start.
    pub fn ns(self) -> u64 {
        self.0
    }

    /// Seconds since the start.
    pub fn secs(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// This time plus `ns` nanoseconds (saturating: the far future stays far).
    pub fn plus(self, ns: u64) -> SimTime {
        SimTime(self.0.saturating_add(ns))
    }
}

pub use heisenbench_model::sample::ns_from_secs;

/// Signed nanosecond difference `to - from` as seconds.
pub fn secs_between(from: u64, to: u64) -> f64 {
    (i128::from(to) - i128::from(from)) as f64 * 1e-9
}
