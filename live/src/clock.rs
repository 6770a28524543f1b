//! The one place live code reads time.
//!
//! `mono_ns` is CLOCK_MONOTONIC in nanoseconds: the same clock for every process on a
//! host, so a chunk stamped by the mock when it is sent and by the generator when it
//! arrives gives the chunk's delay exactly, without clock synchronisation.

/// CLOCK_MONOTONIC now, nanoseconds since an arbitrary host-wide origin (boot).
#[inline]
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Monotonic time is non-negative and far below 2^63 ns (292 years of uptime).
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_in_step_with_instant() {
        let (a, i) = (mono_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (b, d) = (mono_ns(), i.elapsed());
        assert!(b > a);
        // Both read the same kernel clock: the two intervals agree within scheduling noise.
        let diff = (b - a) as i128 - d.as_nanos() as i128;
        assert!(diff.abs() < 2_000_000, "{diff} ns");
    }
}
