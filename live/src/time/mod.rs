//! Time: the one place live code reads the clock, and the timers it waits with.
//!
//! * [`mono_ns`]: CLOCK_MONOTONIC in nanoseconds, the same clock for every process on a
//!   host, so a chunk stamped by the mock when it is sent and by the generator when it
//!   arrives gives the chunk's delay exactly, without clock synchronisation.
//! * [`clock::Clock`]: where the mock reads and waits for time (the host, or tokio's
//!   pausable clock in tests).
//! * [`timer`]: microsecond-resolution sleeps for the async runtime: many sleepers'
//!   ([`timer::Pacer`], the mock's timed streams) and one loop's ([`timer::LoopTimer`],
//!   the shard's schedule).
//!
//! Uses nothing else of this crate; everything else may use it.

pub mod clock;
pub mod timer;

/// CLOCK_MONOTONIC now, nanoseconds since an arbitrary host-wide origin (boot).
#[inline]
pub fn mono_ns() -> u64 {
    read_ns(rustix::time::ClockId::Monotonic)
}

/// CLOCK_REALTIME now, nanoseconds since the Unix epoch: only to place the kernel's own
/// realtime stamps (of packet arrivals) on the monotonic clock.
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    read_ns(rustix::time::ClockId::Realtime)
}

/// CPU time of the calling thread, nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    read_ns(rustix::time::ClockId::ThreadCPUTime)
}

/// CPU time of this whole process (every thread), nanoseconds.
#[inline]
pub fn process_cpu_ns() -> u64 {
    read_ns(rustix::time::ClockId::ProcessCPUTime)
}

/// `clock` now, in nanoseconds.
#[inline]
fn read_ns(clock: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(clock);
    // Both clocks are non-negative here and far below 2^63 ns (292 years).
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}
