//! The machine's speed during an audit, gauged beside the client: a fixed unit of integer
//! work, then a fixed walk through memory, each timed on its own thread's CPU clock every
//! [`PERIOD`]. A shared machine's speed moves on the scale of seconds, and a Python client's
//! CPU a request moves with it (bench/audit/RESULTS.md, r51); a probe before or after the
//! run misses what the run met.
//!
//! The two units see different things. The integer unit runs in registers: it slows as the
//! core does (its clock, time taken by the host). The walk's every step waits on a load from
//! a table the size of a core's L2 cache that other work has evicted meanwhile: it slows as
//! the caches and memory do (neighbours sharing them), as an interpreter's work does. Where
//! a client's CPU a request moved by half from one launch to the next, the integer unit
//! moved by 1.6 % and a longer walk through the same table about as the client did
//! (bench/audit/RESULTS.md, r60).

use crate::time::{mono_ns, thread_cpu_ns};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Time between two rounds of work (the integer unit and the walk): under 3 % of a core.
pub const PERIOD: Duration = Duration::from_millis(50);

/// Xorshift steps in one unit (about 0.75 ms on the machine r51 ran on).
pub const STEPS: u64 = 300_000;

/// Fewest units in the load window for a reading.
pub const MIN_UNITS: usize = 20;

/// Slots in the walk's table (4 bytes each: 1 MiB, a core's L2 cache on the machines the
/// audit was read on).
pub const WALK_SLOTS: usize = 1 << 18;

/// Dependent loads in one walk (0.64-0.75 ms on the machine r60 ran on).
pub const WALK_STEPS: usize = 6_000;

/// One timed round of the gauge: when it started (CLOCK_MONOTONIC, ns) and the CPU time of
/// its integer unit and of its walk, ns.
pub type Round = (u64, u64, u64);

/// The gauge's reading over an audit's load window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineGauge {
    /// The median CPU time of one unit, seconds (larger: a slower machine).
    pub unit_s: f64,
    /// The 10th and 90th percentiles of the units' times, seconds.
    pub spread_s: [f64; 2],
    /// Units timed in the window.
    pub units: usize,
    /// The median CPU time of one walk through memory, seconds (None in audits made before
    /// the gauge walked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk_s: Option<f64>,
}

impl MachineGauge {
    /// The reading of the rounds that started inside `[from, to]`; None with fewer than
    /// [`MIN_UNITS`] there.
    pub fn of(rounds: &[Round], from: u64, to: u64) -> Option<Self> {
        let inside: Vec<&Round> = rounds
            .iter()
            .filter(|(at, _, _)| (from..=to).contains(at))
            .collect();
        if inside.len() < MIN_UNITS {
            return None;
        }
        let sorted = |ns: fn(&Round) -> u64| {
            let mut t: Vec<f64> = inside.iter().map(|r| ns(r) as f64 * 1e-9).collect();
            t.sort_by(f64::total_cmp);
            t
        };
        let t = sorted(|r| r.1);
        let walks = sorted(|r| r.2);
        let at = |q: f64| super::nearest_rank(&t, q);
        Some(Self {
            unit_s: at(0.5),
            spread_s: [at(0.1), at(0.9)],
            units: t.len(),
            walk_s: Some(super::nearest_rank(&walks, 0.5)).filter(|w| *w > 0.0),
        })
    }
}

/// The gauge's thread, running until [`Gauge::stop`] or until dropped (an audit that ends
/// early leaves no gauge behind).
pub struct Gauge {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Round>>>,
}

impl Gauge {
    /// Starts timing units now.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let table = walk_table();
            let mut slot = 0;
            let mut rounds = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let at = mono_ns();
                let c0 = thread_cpu_ns();
                std::hint::black_box(unit(std::hint::black_box(at)));
                let c1 = thread_cpu_ns();
                slot = walk(&table, slot);
                let c2 = thread_cpu_ns();
                rounds.push((at, c1.saturating_sub(c0), c2.saturating_sub(c1)));
                std::thread::sleep(PERIOD);
            }
            rounds
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread and gives every round it timed.
    pub fn stop(mut self) -> Vec<Round> {
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

/// The walk's table: one cycle through all [`WALK_SLOTS`] slots in an order drawn from a
/// fixed seed (Sattolo's shuffle), so each step's load depends on the one before and lands
/// where no prefetcher can guess.
fn walk_table() -> Vec<u32> {
    let mut table: Vec<u32> = (0..WALK_SLOTS as u32).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..WALK_SLOTS).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        table.swap(i, (x % i as u64) as usize);
    }
    table
}

/// One walk: [`WALK_STEPS`] loads along the table's cycle from `slot`, giving where it
/// stopped (the next walk goes on from there, through parts of the table not just read).
fn walk(table: &[u32], mut slot: usize) -> usize {
    for _ in 0..WALK_STEPS {
        slot = table[slot] as usize;
    }
    std::hint::black_box(slot)
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

    /// The reading takes the window's rounds only, and its medians and spread by rank.
    #[test]
    fn the_reading_is_the_windows_median() {
        // 100 rounds a millisecond apart, round i's unit taking i + 1 microseconds and its
        // walk twice that.
        let units: Vec<Round> = (0..100)
            .map(|i| (i * 1_000_000, (i + 1) * 1_000, (i + 1) * 2_000))
            .collect();
        let g = MachineGauge::of(&units, 10_000_000, 59_000_000).unwrap();
        assert_eq!(g.units, 50);
        // Units 10..=59: times 11..=60 us; by nearest rank the median is the 25th of 50
        // (35 us), the 10th percentile the 5th (15 us) and the 90th the 45th (55 us).
        assert!((g.unit_s - 35e-6).abs() < 1e-12, "{g:?}");
        assert!((g.spread_s[0] - 15e-6).abs() < 1e-12, "{g:?}");
        assert!((g.spread_s[1] - 55e-6).abs() < 1e-12, "{g:?}");
        assert!((g.walk_s.unwrap() - 70e-6).abs() < 1e-12, "{g:?}");
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
        assert!(units.iter().all(|(_, ns, walk)| *ns > 0 && *walk > 0));
        assert!(units.windows(2).all(|w| w[0].0 < w[1].0));
    }

    /// The walk's table is one cycle through every slot: from any slot, the walk comes back
    /// to it after exactly [`WALK_SLOTS`] steps and not before, so no walk circles a few
    /// slots a cache could keep.
    #[test]
    fn the_walk_passes_every_slot_once_a_cycle() {
        let table = walk_table();
        let mut slot = 0;
        for step in 1..=WALK_SLOTS {
            slot = table[slot] as usize;
            assert!(
                slot != 0 || step == WALK_SLOTS,
                "back at 0 after {step} steps"
            );
        }
        assert_eq!(slot, 0);
    }
}
