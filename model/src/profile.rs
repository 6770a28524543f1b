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
    /// A criterion: achieved over offered at least `min_achieved_ratio` (in (0, 1]) and
    /// p99 at most `max_p99_s` (positive).
    pub fn new(min_achieved_ratio: f64, max_p99_s: f64) -> crate::error::Result<Self> {
        if !(min_achieved_ratio > 0.0 && min_achieved_ratio <= 1.0) {
            return Err(crate::ModelError::invalid(
                "minimum achieved ratio",
                min_achieved_ratio,
                "must be in (0, 1]",
            ));
        }
        if !(max_p99_s > 0.0 && max_p99_s.is_finite()) {
            return Err(crate::ModelError::invalid(
                "p99 bound",
                max_p99_s,
                "must be a positive duration",
            ));
        }
        Ok(Self {
            min_achieved_ratio,
            max_p99_s,
        })
    }

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

/// A finished (or stopped) sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// What a stage had to do.
    pub criterion: Criterion,
    /// The same in words.
    pub criterion_text: String,
    /// The stages run, in order.
    pub stages: Vec<Stage>,
    /// The knee ([`knee`]).
    pub knee_qps: Option<f64>,
    /// Stopped after two failing stages in a row, before the last rate.
    pub stopped_early: bool,
}

/// Runs a sweep: `run_stage(i, rate)` measures stage i at each of `rates` in turn (it
/// returns `None` when the sweep was interrupted: the stages before are kept), and the
/// sweep stops after two stages in a row miss `criterion` (unless `early_stop` is off),
/// since past the knee every further stage only loads the server more. How a stage is run
/// (simulated, or against a live server) is the caller's.
pub fn sweep<E>(
    rates: &[f64],
    criterion: Criterion,
    early_stop: bool,
    mut run_stage: impl FnMut(usize, f64) -> Result<Option<Stage>, E>,
) -> Result<Profile, E> {
    let mut stages = Vec::new();
    let (mut failing, mut stopped_early) = (0, false);
    for (i, rate) in rates.iter().enumerate() {
        let Some(stage) = run_stage(i, *rate)? else {
            break;
        };
        let ok = criterion.is_met_by(&stage);
        stages.push(stage);
        failing = if ok { 0 } else { failing + 1 };
        if failing >= 2 && early_stop && i + 1 < rates.len() {
            stopped_early = true;
            break;
        }
    }
    Ok(Profile {
        criterion,
        criterion_text: criterion.describe(),
        knee_qps: knee(&stages, &criterion),
        stages,
        stopped_early,
    })
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
    fn a_criterion_needs_a_ratio_in_0_1_and_a_positive_bound() {
        let c = Criterion::new(0.99, 0.1).unwrap();
        assert_eq!((c.min_achieved_ratio, c.max_p99_s), (0.99, 0.1));
        assert!(Criterion::new(1.0, 1e-6).is_ok());
        for (ratio, p99) in [
            (0.0, 0.1),
            (1.01, 0.1),
            (f64::NAN, 0.1),
            (0.5, 0.0),
            (0.5, -1.0),
            (0.5, f64::INFINITY),
        ] {
            assert!(Criterion::new(ratio, p99).is_err(), "{ratio} {p99}");
        }
    }

    #[test]
    fn a_sweep_stops_after_two_misses_and_keeps_what_it_ran() {
        let c = Criterion {
            min_achieved_ratio: 0.99,
            max_p99_s: 0.1,
        };
        // A server that keeps up to 30 req/s.
        let stage = |q: f64| Stage {
            offered_qps: q,
            achieved_qps: q.min(30.0),
            p99_s: if q <= 30.0 { 0.01 } else { 1.0 },
        };
        let rates = rates(10.0, 60.0, 6, false);
        let p = sweep::<()>(&rates, c, true, |_, q| Ok(Some(stage(q)))).unwrap();
        assert_eq!(p.stages.len(), 5, "stops after 40 and 50 miss");
        assert!(p.stopped_early);
        assert_eq!(p.knee_qps, Some(30.0));
        let all = sweep::<()>(&rates, c, false, |_, q| Ok(Some(stage(q)))).unwrap();
        assert_eq!(all.stages.len(), 6);
        // Interrupted at the third stage: two kept.
        let cut = sweep::<()>(&rates, c, true, |i, q| Ok((i < 2).then(|| stage(q)))).unwrap();
        assert_eq!((cut.stages.len(), cut.knee_qps), (2, Some(20.0)));
    }

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
