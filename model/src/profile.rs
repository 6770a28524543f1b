//! Latency profiles: rate stages and the knee.

use serde::{Deserialize, Serialize};

/// One stage of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Requests per second asked for.
    pub offered_qps: f64,
    /// Requests per second completed.
    pub achieved_qps: f64,
    /// The stage's p99 latency (TTFT from the intended send), seconds.
    pub p99_s: f64,
}

/// What a stage must do to count as keeping up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Achieved over offered must be at least this (0.99: 99 %).
    pub min_achieved_ratio: f64,
    /// The p99 latency must not exceed this, seconds.
    pub max_p99_s: f64,
}

impl Criterion {
    /// Whether `s` meets it.
    pub fn is_met_by(&self, s: &Stage) -> bool {
        s.achieved_qps >= self.min_achieved_ratio * s.offered_qps && s.p99_s <= self.max_p99_s
    }

    /// In words.
    pub fn describe(&self) -> String {
        format!(
            "achieved >= {:.0}% of offered and p99 TTFT <= {}",
            self.min_achieved_ratio * 100.0,
            crate::units::format_seconds(self.max_p99_s)
        )
    }
}

/// The knee: the highest offered rate such that it and every lower stage meet the
/// criterion (a lucky stage above a failing one does not count). `None` when even the
/// lowest stage fails.
pub fn knee(stages: &[Stage], c: &Criterion) -> Option<f64> {
    let mut sorted: Vec<&Stage> = stages.iter().collect();
    sorted.sort_by(|a, b| a.offered_qps.total_cmp(&b.offered_qps));
    sorted
        .iter()
        .take_while(|s| c.is_met_by(s))
        .last()
        .map(|s| s.offered_qps)
}

/// `steps` rates from `from` to `to`, evenly spaced or geometric.
pub fn rates(from: f64, to: f64, steps: usize, geometric: bool) -> Vec<f64> {
    if steps <= 1 {
        return vec![from];
    }
    (0..steps)
        .map(|i| {
            let f = i as f64 / (steps - 1) as f64;
            if geometric {
                from * (to / from).powf(f)
            } else {
                from + (to - from) * f
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knee_is_the_last_stage_before_the_first_failure() {
        let c = Criterion {
            min_achieved_ratio: 0.99,
            max_p99_s: 0.1,
        };
        let st = |o: f64, a: f64, p: f64| Stage {
            offered_qps: o,
            achieved_qps: a,
            p99_s: p,
        };
        let stages = [
            st(10.0, 10.0, 0.01),
            st(20.0, 20.0, 0.02),
            st(40.0, 35.0, 0.5),
            st(80.0, 80.0, 0.05),
        ];
        assert_eq!(knee(&stages, &c), Some(20.0));
        assert_eq!(knee(&stages[2..3], &c), None);
        assert_eq!(rates(10.0, 1000.0, 3, true), vec![10.0, 100.0, 1000.0]);
        assert_eq!(rates(10.0, 30.0, 3, false), vec![10.0, 20.0, 30.0]);
    }
}
