//! [`Clock`]: the seam the mock reads and waits through: the host's clock with the
//! microsecond pacer in production, or tokio's clock, which a test can pause
//! (`tokio::time::pause`, `#[tokio::test(start_paused = true)]`) so that every latency is
//! exact virtual time and no assertion depends on how busy the machine is.

use std::time::Instant;

use super::mono_ns;
use super::timer::Pacer;

/// Where time is read and waited for.
#[derive(Clone, Debug)]
pub enum Clock {
    /// The host's monotonic clock; sleeps on the microsecond pacer of the runtime that
    /// first sleeps on it.
    Host(Pacer),
    /// tokio's clock: virtual when the runtime's time is paused. Sleeps end on tokio's
    /// millisecond ticks (a deadline between ticks is met at the next one), and stamps
    /// count from `origin`, the clock's reading when it was made, on the host's
    /// monotonic scale.
    Tokio {
        /// tokio's reading when this clock was made.
        origin: tokio::time::Instant,
        /// `mono_ns` at that moment.
        origin_ns: u64,
    },
}

impl Clock {
    /// The host's clock, with a pacer of its own.
    pub fn host() -> Self {
        Self::Host(Pacer::new())
    }

    /// tokio's clock, read from inside a runtime (virtual when its time is paused).
    pub fn tokio() -> Self {
        Self::Tokio {
            origin: tokio::time::Instant::now(),
            origin_ns: mono_ns(),
        }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        match self {
            Self::Host(_) => Instant::now(),
            Self::Tokio { .. } => tokio::time::Instant::now().into_std(),
        }
    }

    /// Now on the monotonic nanosecond scale of [`mono_ns`] (the stamp a chunk carries).
    pub fn stamp_ns(&self) -> u64 {
        match self {
            Self::Host(_) => mono_ns(),
            Self::Tokio { origin, origin_ns } => {
                let since = tokio::time::Instant::now().saturating_duration_since(*origin);
                origin_ns.saturating_add(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
            }
        }
    }

    /// Completes at `deadline`, never before it (at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        match self {
            Self::Host(timer) => timer.sleep_until(deadline).await,
            Self::Tokio { .. } => tokio::time::sleep_until(deadline.into()).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn monotonic_and_in_step_with_instant() {
        // Each reading of mono_ns is bracketed by two readings of Instant (the same kernel
        // clock), so the interval between two of them lies between the brackets' extremes,
        // however late any read runs.
        let (i0, a, i1) = (Instant::now(), mono_ns(), Instant::now());
        std::thread::sleep(Duration::from_millis(2));
        let (j0, b, j1) = (Instant::now(), mono_ns(), Instant::now());
        let mono = Duration::from_nanos(b - a);
        assert!(mono >= j0 - i1 && mono <= j1 - i0, "{mono:?}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn tokio_clock_is_virtual_and_stamps_follow_it() {
        let c = Clock::tokio();
        let (t0, s0) = (c.now(), c.stamp_ns());
        // Between ticks: met at the next whole millisecond, never before.
        c.sleep_until(t0 + Duration::from_micros(2_500)).await;
        assert_eq!(c.now() - t0, Duration::from_millis(3));
        assert_eq!(c.stamp_ns() - s0, 3_000_000);
        // On a tick: exactly.
        c.sleep_until(t0 + Duration::from_secs(3600)).await;
        assert_eq!(c.now() - t0, Duration::from_secs(3600));
        // A deadline in the past returns at once.
        c.sleep_until(t0).await;
        assert_eq!(c.now() - t0, Duration::from_secs(3600));
    }
}
