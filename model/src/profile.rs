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
    /// Closed-loop users, when the stage held a concurrency instead of a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    /// The share of the stage's requests that met its SLO from the intended send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_fraction: Option<f64>,
    /// Little's law, measured: the time-weighted mean of requests in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_mean: Option<f64>,
    /// Little's law, predicted: achieved rate times mean time in the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub little_in_flight: Option<f64>,
    /// The rate the stage's schedule drew: its requests over its duration. A Poisson
    /// stage's count varies around the offered rate by its square root (3 % at 1,000
    /// requests, far more than a 1 % criterion allows), so keeping up is judged against
    /// what was drawn, not against the rate asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_qps: Option<f64>,
}

impl Stage {
    /// A stage of a rate sweep, without goodput or Little's law.
    pub fn at_rate(offered_qps: f64, achieved_qps: f64, p99_s: f64) -> Self {
        Self {
            offered_qps,
            achieved_qps,
            p99_s,
            users: None,
            good_fraction: None,
            in_flight_mean: None,
            little_in_flight: None,
            scheduled_qps: None,
        }
    }

    /// What the stage held: its users for a concurrency ladder, else its offered rate.
    pub fn load(&self) -> f64 {
        self.users.map_or(self.offered_qps, f64::from)
    }
}

/// What a stage must do to count as keeping up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Achieved over offered must be at least this (0.99: 99 %).
    pub min_achieved_ratio: f64,
    /// The p99 latency must not exceed this, seconds.
    pub max_p99_s: f64,
    /// The share of requests meeting the SLO must be at least this (goodput's target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_good_fraction: Option<f64>,
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
            min_good_fraction: None,
        })
    }

    /// This criterion, also asking that at least `fraction` (in (0, 1]) of a stage's
    /// requests meet its SLO.
    pub fn with_goodput(self, fraction: f64) -> crate::error::Result<Self> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(crate::ModelError::invalid(
                "goodput target",
                fraction,
                "must be in (0, 1]",
            ));
        }
        Ok(Self {
            min_good_fraction: Some(fraction),
            ..self
        })
    }

    /// Whether `s` meets it (a stage that judged no SLO fails a goodput target). The
    /// achieved rate is compared with the rate the stage's schedule drew when it is known
    /// ([`Stage::scheduled_qps`]), else with the offered rate. A closed loop's achieved
    /// rate is what it offered, so the ratio always holds there.
    pub fn is_met_by(&self, s: &Stage) -> bool {
        let asked = s.scheduled_qps.unwrap_or(s.offered_qps);
        let keeps_up = s.users.is_some() || s.achieved_qps >= self.min_achieved_ratio * asked;
        keeps_up && s.p99_s <= self.max_p99_s && self.good_enough(s)
    }

    /// Whether `s` meets the goodput target alone (true without one).
    pub fn good_enough(&self, s: &Stage) -> bool {
        match self.min_good_fraction {
            None => true,
            Some(min) => s.good_fraction.is_some_and(|g| g >= min),
        }
    }

    /// In words.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "achieved >= {:.0}% of offered and p99 TTFT <= {}",
            self.min_achieved_ratio * 100.0,
            crate::units::format_seconds(self.max_p99_s)
        );
        if let Some(g) = self.min_good_fraction {
            text += &format!(" and >= {:.1}% of requests within the SLO", 100.0 * g);
        }
        text
    }
}

/// The knee: the highest offered rate such that it and every lower stage meet the
/// criterion (a lucky stage above a failing one does not count). `None` when even the
/// lowest stage fails.
pub fn knee(stages: &[Stage], c: &Criterion) -> Option<f64> {
    knee_stage(stages, |s| c.is_met_by(s)).map(|s| s.offered_qps)
}

/// The stage of highest load such that it and every stage of lower load pass `ok`.
pub fn knee_stage(stages: &[Stage], ok: impl Fn(&Stage) -> bool) -> Option<&Stage> {
    let mut sorted: Vec<&Stage> = stages.iter().collect();
    sorted.sort_by(|a, b| a.load().total_cmp(&b.load()));
    sorted.into_iter().take_while(|s| ok(s)).last()
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
    /// The knee's users, for a concurrency ladder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_users: Option<u32>,
    /// The knee by goodput alone: the highest load whose stages up to it met the goodput
    /// target (None without one, or when even the lowest missed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_knee_load: Option<f64>,
    /// Stopped after two failing stages in a row, before the last rate.
    pub stopped_early: bool,
    /// The search that chose the stages, if the sweep was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchResult>,
}

/// How a search ended: the highest load that met the criterion and the lowest that
/// missed it, within the tolerance of each other.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The relative tolerance asked for (0.05: the bracket within 5 %).
    pub tolerance: f64,
    /// The highest load that met the criterion (None: not even the lowest).
    pub met: Option<f64>,
    /// The lowest load that missed it (None: not even the highest missed).
    pub missed: Option<f64>,
}

impl Profile {
    fn of(criterion: Criterion, stages: Vec<Stage>, stopped_early: bool) -> Self {
        let k = knee_stage(&stages, |s| criterion.is_met_by(s)).copied();
        let goodput_knee_load = criterion
            .min_good_fraction
            .and_then(|_| knee_stage(&stages, |s| criterion.good_enough(s)).map(Stage::load));
        Self {
            criterion,
            criterion_text: criterion.describe(),
            knee_qps: k.map(|s| s.offered_qps),
            knee_users: k.and_then(|s| s.users),
            goodput_knee_load,
            stages,
            stopped_early,
            search: None,
        }
    }
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
    Ok(Profile::of(criterion, stages, stopped_early))
}

/// Searches for the highest load in `[lo, hi]` that meets `criterion`, by bisection:
/// `lo` and `hi` first, then the middle of the bracket (geometric with `geometric`,
/// whole numbers with `whole`, for users) until the highest load met and the lowest
/// missed are within `tolerance` of each other (relative; whole numbers stop at
/// neighbours). It assumes what a server's saturation gives, a criterion met below some
/// load and missed above; a stage that breaks this (a lucky one above a miss) moves the
/// bracket like any other. `run_stage(i, load)` runs stage i (`None`: interrupted).
pub fn search<E>(
    lo: f64,
    hi: f64,
    tolerance: f64,
    geometric: bool,
    whole: bool,
    criterion: Criterion,
    mut run_stage: impl FnMut(usize, f64) -> Result<Option<Stage>, E>,
) -> Result<Profile, E> {
    let mut stages = Vec::new();
    let mut result = SearchResult {
        tolerance,
        met: None,
        missed: None,
    };
    let close = |a: f64, b: f64| {
        if whole {
            b - a <= 1.0
        } else {
            b <= a * (1.0 + tolerance)
        }
    };
    let mut next = Some(lo);
    while let Some(load) = next {
        let Some(stage) = run_stage(stages.len(), load)? else {
            break;
        };
        if criterion.is_met_by(&stage) {
            result.met = Some(result.met.map_or(load, |m: f64| m.max(load)));
        } else {
            result.missed = Some(result.missed.map_or(load, |m: f64| m.min(load)));
        }
        stages.push(stage);
        next = match (result.met, result.missed) {
            // The lowest missed: nothing below to find.
            (None, Some(_)) => None,
            // Only the lowest run, and it met: try the highest.
            (Some(m), None) if m < hi => Some(hi),
            (Some(_), None) => None,
            (Some(a), Some(b)) if a < b && !close(a, b) => {
                let mid = if geometric {
                    (a * b).sqrt()
                } else {
                    (a + b) / 2.0
                };
                let mid = if whole { mid.round() } else { mid };
                (mid > a && mid < b).then_some(mid)
            }
            _ => None,
        };
    }
    let mut p = Profile::of(criterion, stages, false);
    p.search = Some(result);
    // The search's own answer: the highest load met, whatever lies below it unrun.
    if let Some(m) = result.met {
        let s = p.stages.iter().find(|s| s.load() == m).copied();
        p.knee_qps = s.map(|s| s.offered_qps);
        p.knee_users = s.and_then(|s| s.users);
    } else {
        p.knee_qps = None;
        p.knee_users = None;
    }
    Ok(p)
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
        let c = Criterion::new(0.99, 0.1).unwrap();
        // A server that keeps up to 30 req/s.
        let stage = |q: f64| Stage::at_rate(q, q.min(30.0), if q <= 30.0 { 0.01 } else { 1.0 });
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

    /// A stage whose Poisson schedule drew 2.6 % fewer requests than its rate (66.5 of
    /// 68.3 req/s: within two standard deviations of a 10 s stage) and completed all of
    /// them keeps up; judged against the rate asked for it would miss, by chance.
    #[test]
    fn keeping_up_is_judged_against_what_the_schedule_drew() {
        let c = Criterion::new(0.99, 1.0).unwrap();
        let mut s = Stage::at_rate(68.3, 66.4, 0.01);
        assert!(!c.is_met_by(&s));
        s.scheduled_qps = Some(66.5);
        assert!(c.is_met_by(&s));
        // A server that truly falls behind still misses.
        s.achieved_qps = 60.0;
        assert!(!c.is_met_by(&s));
    }

    #[test]
    fn knee_is_the_last_stage_before_the_first_failure() {
        let c = Criterion::new(0.99, 0.1).unwrap();
        let st = Stage::at_rate;
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

    /// A server that keeps up to 37.3 req/s: the search brackets it within its
    /// tolerance in about log2(range / tolerance) stages; a whole-number search of users
    /// stops at neighbours; a lowest load that misses ends it at once.
    #[test]
    fn a_search_brackets_the_knee_within_its_tolerance() {
        let c = Criterion::new(0.99, 0.1).unwrap();
        let stage = |q: f64| Stage::at_rate(q, q.min(37.3), if q <= 37.3 { 0.01 } else { 1.0 });
        let p = search::<()>(1.0, 1000.0, 0.02, true, false, c, |_, q| Ok(Some(stage(q)))).unwrap();
        let r = p.search.unwrap();
        let (met, missed) = (r.met.unwrap(), r.missed.unwrap());
        assert!(
            met <= 37.3 && missed > 37.3 && missed <= met * 1.02,
            "{r:?}"
        );
        assert_eq!(p.knee_qps, Some(met));
        assert!(p.stages.len() <= 2 + 10, "{} stages", p.stages.len());
        // Users: 1 to 64, the server keeps p99 under the bound up to 13 users.
        let users = |n: f64| Stage {
            users: Some(n as u32),
            ..Stage::at_rate(n * 10.0, n * 10.0, if n <= 13.0 { 0.05 } else { 0.2 })
        };
        let p = search::<()>(1.0, 64.0, 0.0, true, true, c, |_, n| Ok(Some(users(n)))).unwrap();
        assert_eq!(p.knee_users, Some(13));
        assert_eq!(p.search.unwrap().missed, Some(14.0));
        let none = search::<()>(50.0, 100.0, 0.05, false, false, c, |_, q| {
            Ok(Some(stage(q)))
        })
        .unwrap();
        assert_eq!((none.stages.len(), none.knee_qps), (1, None));
        let all =
            search::<()>(1.0, 30.0, 0.05, false, false, c, |_, q| Ok(Some(stage(q)))).unwrap();
        assert_eq!((all.stages.len(), all.knee_qps), (2, Some(30.0)));
    }

    /// A goodput target fails a stage below it and a stage that judged nothing; the
    /// profile's goodput knee is judged on goodput alone.
    #[test]
    fn a_goodput_target_is_part_of_the_criterion() {
        let c = Criterion::new(0.99, 1.0)
            .unwrap()
            .with_goodput(0.9)
            .unwrap();
        assert!(
            Criterion::new(0.99, 1.0)
                .unwrap()
                .with_goodput(0.0)
                .is_err()
        );
        let st = |q: f64, g: Option<f64>| Stage {
            good_fraction: g,
            ..Stage::at_rate(q, q, 0.01)
        };
        assert!(c.is_met_by(&st(10.0, Some(0.95))));
        assert!(!c.is_met_by(&st(10.0, Some(0.85))));
        assert!(!c.is_met_by(&st(10.0, None)));
        let stages = [
            st(10.0, Some(0.99)),
            st(20.0, Some(0.95)),
            st(30.0, Some(0.5)),
        ];
        let p = sweep::<()>(&[10.0, 20.0, 30.0], c, false, |i, _| Ok(Some(stages[i]))).unwrap();
        assert_eq!((p.knee_qps, p.goodput_knee_load), (Some(20.0), Some(20.0)));
        assert!(
            p.criterion_text
                .contains("90.0% of requests within the SLO")
        );
    }
}
