//! The arrival schedule: a plain iterator of intended send times and request shapes.
//!
//! One seed gives one schedule, whoever consumes it: the simulator replays it in
//! simulated time, the live generator in real time, and N live shards each take every
//! N-th entry ([`Schedule::stripe`]) so that together they replay exactly the schedule one
//! generator would.

use rand_distr::{Distribution, Exp1, Gamma};
use serde::{Deserialize, Serialize};

use crate::sample::{LengthSampler, SimRng, ns_from_secs, purpose, stream};
use crate::scenario::{Arrivals, Stop, Workload};

/// One scheduled request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    /// Position in the schedule, from 0.
    pub index: u64,
    /// Intended send time, nanoseconds after the start.
    pub at_ns: u64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Output tokens.
    pub output_tokens: u32,
}

/// The open-loop schedule of a workload (Poisson, constant, gamma or trace arrivals).
/// Closed loops have no schedule: their send times depend on the responses.
pub struct Schedule {
    workload: Workload,
    rng_arrivals: SimRng,
    rng_lengths: SimRng,
    gamma: Option<Gamma<f64>>,
    input: LengthSampler,
    output: LengthSampler,
    index: u64,
    at_ns: u64,
}

impl Schedule {
    /// The schedule of `workload` under `seed`; `None` for closed loops. The workload must
    /// be valid.
    pub fn new(workload: &Workload, seed: u64) -> Option<Self> {
        if matches!(workload.arrivals, Arrivals::Closed { .. }) {
            return None;
        }
        let gamma = match workload.arrivals {
            Arrivals::Gamma { rate_per_s, shape } => {
                Gamma::new(shape, 1.0 / (rate_per_s * shape)).ok()
            }
            _ => None,
        };
        Some(Self {
            workload: workload.clone(),
            rng_arrivals: stream(seed, purpose::ARRIVALS),
            rng_lengths: stream(seed, purpose::LENGTHS),
            gamma,
            input: LengthSampler::new(&workload.input_tokens),
            output: LengthSampler::new(&workload.output_tokens),
            index: 0,
            at_ns: 0,
        })
    }

    /// Every `count`-th entry from `first` on: shard `first` of `count`.
    pub fn stripe(self, first: u64, count: u64) -> Stripe {
        Stripe {
            schedule: self,
            first,
            count: count.max(1),
        }
    }

    /// Where a count-stopped schedule ends (its index past the last entry), when it is
    /// known without drawing the send times: a count of a rate, or of a trace.
    fn known_end(&self) -> Option<u64> {
        match (&self.workload.stop, &self.workload.arrivals) {
            (Stop::Count { requests }, Arrivals::Trace { send_times_s, .. }) => {
                Some((*requests).min(send_times_s.len() as u64))
            }
            (Stop::Count { requests }, _) => Some(*requests),
            (Stop::Duration { .. }, _) => None,
        }
    }

    fn time_of(&mut self, index: u64) -> Option<u64> {
        Some(match &self.workload.arrivals {
            Arrivals::Poisson { rate_per_s } => {
                let e: f64 = Exp1.sample(&mut self.rng_arrivals);
                self.at_ns.saturating_add(ns_from_secs(e / rate_per_s))
            }
            // From the index, not by accumulation, so rounding never drifts.
            Arrivals::Constant { rate_per_s } => ns_from_secs(index as f64 / rate_per_s),
            Arrivals::Gamma { .. } => {
                let g = self.gamma.as_ref()?;
                self.at_ns
                    .saturating_add(ns_from_secs(g.sample(&mut self.rng_arrivals)))
            }
            Arrivals::Trace { send_times_s, .. } => {
                ns_from_secs(*send_times_s.get(index as usize)?)
            }
            Arrivals::Closed { .. } => return None,
        })
    }
}

impl Iterator for Schedule {
    type Item = Planned;

    fn next(&mut self) -> Option<Planned> {
        let index = self.index;
        if let Stop::Count { requests } = self.workload.stop
            && index >= requests
        {
            return None;
        }
        let at_ns = self.time_of(index)?;
        if let Stop::Duration { seconds } = self.workload.stop
            && at_ns >= ns_from_secs(seconds)
        {
            return None;
        }
        self.at_ns = at_ns;
        self.index += 1;
        // A trace or a dataset may give the lengths instead (drawn all the same, so the
        // stream's position does not depend on it).
        let drawn = (
            self.input.sample(&mut self.rng_lengths),
            self.output.sample(&mut self.rng_lengths),
        );
        let (input_tokens, output_tokens) = self.workload.lengths_of(index, drawn);
        Some(Planned {
            index,
            at_ns,
            input_tokens,
            output_tokens,
        })
    }
}

/// One shard's entries of a [`Schedule`]: every `count`-th from `first` on.
pub struct Stripe {
    schedule: Schedule,
    first: u64,
    count: u64,
}

impl Stripe {
    /// How many entries are left, consuming the stripe: counted from the indices when the
    /// schedule stops at a count (O(1), so that a stop in a run of 2^60 requests is at
    /// once), else by drawing the rest of the send times (bounded by
    /// [`crate::limits::MAX_SCHEDULED_REQUESTS`]).
    pub fn rest(mut self) -> u64 {
        match self.schedule.known_end() {
            Some(end) => {
                let from = self.schedule.index;
                // Indices in [from, end) congruent to `first` modulo `count`.
                let below = |n: u64| n / self.count + u64::from(n % self.count > self.first);
                below(end.max(from)) - below(from)
            }
            None => (&mut self).count() as u64,
        }
    }
}

impl Iterator for Stripe {
    type Item = Planned;

    fn next(&mut self) -> Option<Planned> {
        loop {
            let p = self.schedule.next()?;
            if p.index % self.count == self.first {
                return Some(p);
            }
        }
    }
}

/// One closed-loop user's request shapes (prompt and output tokens), endless: one stream
/// per user, so that a user draws the same shapes whichever shard or simulator runs it and
/// whatever the other users do. The simulator and the live generator both draw from it.
pub struct UserShapes {
    rng: SimRng,
    input: LengthSampler,
    output: LengthSampler,
}

impl Iterator for UserShapes {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        Some((
            self.input.sample(&mut self.rng),
            self.output.sample(&mut self.rng),
        ))
    }
}

/// User `user`'s request shapes in a closed loop of `workload` under `seed`.
pub fn user_shapes(workload: &Workload, seed: u64, user: u32) -> UserShapes {
    UserShapes {
        rng: stream(seed ^ (u64::from(user) << 32), purpose::LENGTHS),
        input: LengthSampler::new(&workload.input_tokens),
        output: LengthSampler::new(&workload.output_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Lengths;
    use proptest::prelude::*;

    fn workload(arrivals: Arrivals, stop: Stop) -> Workload {
        Workload {
            arrivals,
            stop,
            input_tokens: Lengths::Uniform { min: 1, max: 400 },
            output_tokens: Lengths::Lognormal {
                mean: 200.0,
                scv: 0.5,
            },
            prefix: None,
            dataset: None,
        }
    }

    #[test]
    fn the_rest_of_a_stripe_is_counted_as_drawing_it_would() {
        for (arrivals, stop) in [
            (
                Arrivals::Poisson { rate_per_s: 50.0 },
                Stop::Count { requests: 37 },
            ),
            (
                Arrivals::Trace {
                    send_times_s: (0..20).map(f64::from).collect(),
                    lengths: Vec::new(),
                    blocks: None,
                },
                Stop::Count { requests: 31 },
            ),
            (
                Arrivals::Poisson { rate_per_s: 50.0 },
                Stop::Duration { seconds: 0.6 },
            ),
        ] {
            let w = workload(arrivals, stop);
            for count in 1..5 {
                for first in 0..count {
                    for taken in 0..12 {
                        let mut fast = Schedule::new(&w, 3).unwrap().stripe(first, count);
                        let mut slow = Schedule::new(&w, 3).unwrap().stripe(first, count);
                        for _ in 0..taken {
                            fast.next();
                            slow.next();
                        }
                        let drawn = slow.count() as u64;
                        assert_eq!(fast.rest(), drawn, "{stop:?} {first}/{count} {taken}");
                    }
                }
            }
        }
        // A count far beyond any run's length is counted at once.
        let w = workload(
            Arrivals::Constant { rate_per_s: 10.0 },
            Stop::Count { requests: u64::MAX },
        );
        let mut s = Schedule::new(&w, 1).unwrap().stripe(1, 4);
        s.next();
        // Indices 1, 5, 9, ... below 2^64 - 1: (2^64 - 1) / 4 full cycles and one more; one taken.
        assert_eq!(s.rest(), u64::MAX / 4);
    }

    #[test]
    fn constant_and_count_stop() {
        let w = workload(
            Arrivals::Constant { rate_per_s: 4.0 },
            Stop::Count { requests: 5 },
        );
        let times: Vec<u64> = Schedule::new(&w, 1).unwrap().map(|p| p.at_ns).collect();
        assert_eq!(
            times,
            vec![0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
        );
    }

    #[test]
    fn poisson_rate_and_duration_stop() {
        let w = workload(
            Arrivals::Poisson { rate_per_s: 1000.0 },
            Stop::Duration { seconds: 20.0 },
        );
        let n = Schedule::new(&w, 3).unwrap().count() as f64;
        // Poisson count over 20 s at 1000/s: mean 20,000, sd 141; 4 sd is 566.
        assert!((n - 20_000.0).abs() < 566.0, "{n}");
    }

    proptest! {
        #[test]
        fn stripes_partition_the_schedule(seed in 0u64..1000, shards in 1u64..9) {
            let w = workload(Arrivals::Gamma { rate_per_s: 500.0, shape: 0.5 }, Stop::Count { requests: 300 });
            let whole: Vec<Planned> = Schedule::new(&w, seed).unwrap().collect();
            let mut merged: Vec<Planned> = (0..shards)
                .flat_map(|s| Schedule::new(&w, seed).unwrap().stripe(s, shards).collect::<Vec<_>>())
                .collect();
            merged.sort_by_key(|p| p.index);
            prop_assert_eq!(&merged, &whole);
            prop_assert!(whole.windows(2).all(|p| p[0].at_ns <= p[1].at_ns));
        }
    }
}
