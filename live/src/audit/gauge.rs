//! The machine's speed during an audit, gauged beside the client: a fixed unit of integer
//! work timed on its own thread's CPU clock every [`PERIOD`]. A shared machine's speed moves
//! on the scale of seconds, and a Python client's CPU a request moves with it
//! (bench/audit/RESULTS.md, r51); a probe before or after the run misses what the run met.

use crate::time::{mono_ns, thread_cpu_ns};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Time between two units of work: under 2 % of a core.
pub const PERIOD: Duration = Duration::from_millis(50);

/// Xorshift steps in one unit (about 0.75 ms on the machine r51 ran on).
pub const STEPS: u64 = 300_000;

/// Fewest units in the load window for a reading.
pub const MIN_UNITS: usize = 20;

/// The gauge's reading over an audit's load window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineGauge {
    /// The median CPU time of one unit, seconds (larger: a slower machine).
    pub unit_s: f64,
    /// The 10th and 90th percentiles of the units' times, seconds.
    pub spread_s: [f64; 2],
    /// Units timed in the window.
    pub units: usize,
}

impl MachineGauge {
    /// The reading of `units` (each unit's start on CLOCK_MONOTONIC and its CPU time, ns)
    /// that started inside `[from, to]`; None with fewer than [`MIN_UNITS`] there.
    pub fn of(units: &[(u64, u64)], from: u64, to: u64) -> Option<Self> {
        let mut t: Vec<f64> = units
            .iter()
            .filter(|(at, _)| (from..=to).contains(at))
            .map(|(_, ns)| *ns as f64 * 1e-9)
            .collect();
        if t.len() < MIN_UNITS {
            return None;
        }
        t.sort_by(f64::total_cmp);
        let at = |q: f64| super::nearest_rank(&t, q);
        Some(Self {
            unit_s: at(0.5),
            spread_s: [at(0.1), at(0.9)],
            units: t.len(),
        })
    }
}

/// The gauge's thread, running until [`Gauge::stop`] or until dropped (an audit that ends
/// early leaves no gauge behind).
pub struct Gauge {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<(u64, u64)>>>,
}

impl Gauge {
    /// Starts timing units now.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut units = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let at = mono_ns();
                let c0 = thread_cpu_ns();
                std::hint::black_box(unit(std::hint::black_box(at)));
                units.push((at, thread_cpu_ns().saturating_sub(c0)));
                std::thread::sleep(PERIOD);
            }
            units
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread and gives every unit it timed (start, CPU ns).
    pub fn stop(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One unit of work: [`STEPS`] xorshift steps, a chain no compiler can shorten.
fn unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..STEPS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reading takes the window's units only, and its median and spread by rank.
    #[test]
    fn the_reading_is_the_windows_median() {
        // 100 units a millisecond apart, unit i taking i + 1 microseconds.
        let units: Vec<(u64, u64)> = (0..100).map(|i| (i * 1_000_000, (i + 1) * 1_000)).collect();
        let g = MachineGauge::of(&units, 10_000_000, 59_000_000).unwrap();
        assert_eq!(g.units, 50);
        // Units 10..=59: times 11..=60 us; by nearest rank the median is the 25th of 50
        // (35 us), the 10th percentile the 5th (15 us) and the 90th the 45th (55 us).
        assert!((g.unit_s - 35e-6).abs() < 1e-12, "{g:?}");
        assert!((g.spread_s[0] - 15e-6).abs() < 1e-12, "{g:?}");
        assert!((g.spread_s[1] - 55e-6).abs() < 1e-12, "{g:?}");
        assert!(
            MachineGauge::of(&units, 0, 18_000_000).is_none(),
            "19 units"
        );
        assert!(
            MachineGauge::of(&units, 0, 19_000_000).is_some(),
            "20 units"
        );
    }

    /// The thread times units until stopped, each one taking some CPU.
    #[test]
    fn the_gauge_times_units_until_stopped() {
        let g = Gauge::start();
        std::thread::sleep(PERIOD * 3);
        let units = g.stop();
        assert!(!units.is_empty() && units.len() < 100, "{}", units.len());
        assert!(units.iter().all(|(_, ns)| *ns > 0));
        assert!(units.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
