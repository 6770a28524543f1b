//! Holding an observed client-side wait against the model's prediction.
//!
//! Given what a client did (events per second on one loop, what each event cost, how the
//! events arrived) and what it saw (per-event waits: mean and quantiles), predict the
//! waits and say whether the observation is the client's own queue (measurement bias) or
//! something the client queue cannot explain (server behaviour, unmodelled client work).

use serde::{Deserialize, Serialize};

use crate::batch::BatchMg1;
use crate::error::{ModelError, Result};
use crate::gig1::Gig1;
use crate::queue::{QueueReport, WaitModel};
use crate::service::Service;
use crate::units::Quantile;

/// How events reached the observed loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[serde(deny_unknown_fields)]
pub enum LoopArrivals {
    /// Poisson bursts (random assignment, or a single loop fed by a Poisson schedule).
    #[default]
    Poisson,
    /// Every k-th burst of a Poisson stream (round robin over k loops).
    RoundRobin {
        /// Loops in the rotation.
        k: u32,
    },
}

/// What one client loop did and saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Events per second processed by the loop.
    pub event_rate_per_s: f64,
    /// Measured per-event cost.
    pub service: Service,
    /// Events arriving together (1 when spread out).
    pub burst: u32,
    /// Arrival pattern.
    pub arrivals: LoopArrivals,
    /// Observed mean wait per event, seconds.
    pub wait_mean_s: Option<f64>,
    /// Observed wait quantiles, seconds.
    pub wait_quantiles_s: Vec<(Quantile, f64)>,
}

impl Observation {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        crate::units::Rate::per_s(self.event_rate_per_s).map_err(|_| {
            ModelError::invalid(
                "event rate",
                self.event_rate_per_s,
                "must be a finite number > 0 and at most 1e9 per second",
            )
        })?;
        self.service.validate()?;
        if self.burst == 0 || self.burst > crate::limits::MAX_TOKENS {
            return Err(ModelError::invalid(
                "burst",
                self.burst,
                "events per burst must be between 1 and 10,000,000",
            ));
        }
        if let LoopArrivals::RoundRobin { k } = self.arrivals
            && (k == 0 || k > crate::limits::MAX_SERVERS)
        {
            return Err(ModelError::invalid(
                "round_robin_k",
                k,
                "loops in the rotation must be between 1 and 1,000,000",
            ));
        }
        let waits = self
            .wait_mean_s
            .iter()
            .chain(self.wait_quantiles_s.iter().map(|(_, v)| v));
        for w in waits {
            if let Some(reason) = crate::limits::duration_problem(*w) {
                return Err(ModelError::invalid("observed wait", w, reason));
            }
        }
        Ok(())
    }
}

/// One statistic, predicted and observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `mean`, `p50`, `p99`, ...
    pub statistic: String,
    /// The model's value, seconds.
    pub predicted_s: f64,
    /// The observation, seconds.
    pub observed_s: f64,
    /// (observed - predicted) / predicted; `None` when the prediction is 0.
    pub relative_error: Option<f64>,
}

/// What the comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The loop cannot keep up: waits grow with the run's length; every latency the client
    /// reports is inflated by its own backlog.
    ClientSaturated,
    /// The observed wait is what the client's own queue predicts: measurement bias.
    ClientBias,
    /// The observation exceeds the client-queue prediction: the excess is server
    /// behaviour or client work the observation did not include.
    BeyondClient,
    /// The observation is below the prediction: the model is conservative here.
    BelowPrediction,
}

/// The prediction next to the observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Per-loop utilisation.
    pub rho: f64,
    /// The model chosen, and why.
    pub model: String,
    /// Why that model.
    pub model_reason: String,
    /// The model's full report (`None` when saturated).
    pub predicted: Option<QueueReport>,
    /// Statistic by statistic.
    pub rows: Vec<Row>,
    /// For bursts: plain M/G/1 on the same events, to show what ignoring bursts misses.
    pub plain_mg1: Option<QueueReport>,
    /// The relative tolerance the verdict used.
    pub tolerance: f64,
    /// The conclusion.
    pub verdict: Verdict,
    /// The conclusion in words.
    pub verdict_text: String,
}

/// The model for a loop: M^X/G/1 (M/G/1 for bursts of one) under Poisson arrivals,
/// E_k^X/G/1 under round robin. Returns the model and the reason it was chosen.
pub fn loop_model(
    event_rate_per_s: f64,
    burst: u32,
    service: &Service,
    arrivals: LoopArrivals,
) -> Result<(Box<dyn WaitModel>, String)> {
    if burst == 0 {
        return Err(ModelError::invalid("burst", 0, "must be >= 1"));
    }
    let burst_rate = event_rate_per_s / f64::from(burst);
    Ok(match arrivals {
        LoopArrivals::RoundRobin { k } if k > 1 => (
            Box::new(Gig1::erlang(k, burst_rate, burst, service.clone())?),
            format!(
                "round robin over {k} loops makes each loop's arrivals Erlang-{k} (smoother than Poisson)"
            ),
        ),
        _ if burst > 1 => (
            Box::new(BatchMg1::new(burst_rate, burst, service.clone())?),
            format!(
                "events arrive in bursts of {burst}: a batch queue, which adds the wait inside the burst"
            ),
        ),
        _ => (
            Box::new(BatchMg1::new(burst_rate, 1, service.clone())?),
            "single events at Poisson times: the Pollaczek-Khinchine queue".to_string(),
        ),
    })
}

/// Compares `obs` with the model; `tolerance` is the relative error on the mean (or the
/// first quantile given) within which the observation counts as explained.
pub fn compare(obs: &Observation, tolerance: f64) -> Result<Comparison> {
    if !(tolerance.is_finite() && tolerance > 0.0) {
        return Err(ModelError::invalid("tolerance", tolerance, "must be > 0"));
    }
    obs.validate()?;
    let rho = obs.event_rate_per_s * obs.service.mean_s();
    let (model, reason) = match loop_model(
        obs.event_rate_per_s,
        obs.burst,
        &obs.service,
        obs.arrivals,
    ) {
        Ok(m) => m,
        Err(ModelError::Unstable { .. }) => {
            return Ok(Comparison {
                rho,
                model: "unstable".into(),
                model_reason: format!("utilisation {rho:.3} >= 1: no steady state exists"),
                predicted: None,
                rows: vec![],
                plain_mg1: None,
                tolerance,
                verdict: Verdict::ClientSaturated,
                verdict_text: format!(
                    "the loop is saturated (utilisation {rho:.3}): its backlog grows for as long as the \
                     run lasts, and every latency it reports includes that backlog"
                ),
            });
        }
        Err(e) => return Err(e),
    };
    let report = model.report();
    let mut rows = Vec::new();
    let row = |statistic: String, predicted_s: f64, observed_s: f64| Row {
        statistic,
        predicted_s,
        observed_s,
        relative_error: (predicted_s > 0.0).then(|| (observed_s - predicted_s) / predicted_s),
    };
    if let Some(m) = obs.wait_mean_s {
        rows.push(row("mean".into(), report.wq_mean_s, m));
    }
    for &(q, v) in &obs.wait_quantiles_s {
        rows.push(row(q.label(), model.wait_quantile_s(q), v));
    }
    let plain_mg1 = if obs.burst > 1 {
        BatchMg1::new(obs.event_rate_per_s, 1, obs.service.clone())
            .ok()
            .map(|q| q.report())
    } else {
        None
    };
    let key = rows.first().ok_or_else(|| {
        ModelError::invalid(
            "observation",
            "no waits",
            "give the observed mean or at least one quantile",
        )
    })?;
    let (verdict, verdict_text) = match key.relative_error {
        Some(e) if e.abs() <= tolerance => (
            Verdict::ClientBias,
            format!(
                "observed {} wait is within {:.0}% of the client-queue prediction ({:+.1}%): it is the \
                 client's own queueing, not server time",
                key.statistic,
                tolerance * 100.0,
                e * 100.0
            ),
        ),
        Some(e) if e > tolerance => (
            Verdict::BeyondClient,
            format!(
                "observed {} wait exceeds the client-queue prediction by {:+.1}%: the excess is server \
                 behaviour or client work not in the observation",
                key.statistic,
                e * 100.0
            ),
        ),
        Some(e) => (
            Verdict::BelowPrediction,
            format!(
                "observed {} wait is {:.1}% below the prediction: the model is conservative here \
                 (check the burst size and the service variability)",
                key.statistic,
                -e * 100.0
            ),
        ),
        None => (
            if key.observed_s > 0.0 {
                Verdict::BeyondClient
            } else {
                Verdict::ClientBias
            },
            "the model predicts no wait at all".to_string(),
        ),
    };
    Ok(Comparison {
        rho,
        model: model.name().into(),
        model_reason: reason,
        predicted: Some(report),
        rows,
        plain_mg1,
        tolerance,
        verdict,
        verdict_text,
    })
}

// ----- a foreign client's observation ----------------------------------------------------

/// A foreign client's measurements for one of its loops, as `compare` reads them from
/// JSON. The rate is named by its unit: requests per second with the events (chunks)
/// each brings, or events per second.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Foreign {
    /// Requests per second on one client loop.
    pub requests_per_s: Option<f64>,
    /// Events (streamed chunks) one request brings to the loop.
    pub events_per_request: Option<f64>,
    /// Events per second on one client loop.
    pub events_per_s: Option<f64>,
    /// Refused: it does not say whether it counts requests or events.
    pub arrival_rate_per_s: Option<f64>,
    /// Mean CPU per event, seconds.
    pub event_cost_mean_s: f64,
    /// Its SCV (1 unless given).
    #[serde(default = "one")]
    pub event_cost_scv: f64,
    /// Events arriving together (1 unless given).
    #[serde(default = "one_u")]
    pub burst: u32,
    /// Requests dealt round robin over this many loops (Poisson split otherwise).
    pub round_robin_k: Option<u32>,
    /// The waits the client saw.
    pub observed: ForeignWaits,
}

/// The waits a foreign client observed, seconds; any may be missing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForeignWaits {
    /// Mean.
    pub mean_s: Option<f64>,
    /// Median.
    pub p50_s: Option<f64>,
    /// 90th percentile.
    pub p90_s: Option<f64>,
    /// 99th percentile.
    pub p99_s: Option<f64>,
}

fn one() -> f64 {
    1.0
}
fn one_u() -> u32 {
    1
}

/// Why a foreign observation was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForeignError {
    /// `arrival_rate_per_s` was given.
    #[error(
        "arrival_rate_per_s is ambiguous (requests or chunks per second?): give requests_per_s with events_per_request, or events_per_s"
    )]
    Ambiguous,
    /// `requests_per_s` without `events_per_request`.
    #[error("requests_per_s needs events_per_request: the loop's load is its events")]
    NoEventsPerRequest,
    /// Neither or both ways of naming the rate.
    #[error("give either requests_per_s with events_per_request, or events_per_s (not both)")]
    RateNamedTwice,
    /// A rate that is not a positive number.
    #[error("{name} must be > 0, not {value}")]
    NotPositive {
        /// The field.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A field out of the model's range.
    #[error(transparent)]
    Model(#[from] ModelError),
}

impl Foreign {
    /// The events per second on the loop; refuses the ambiguous.
    pub fn event_rate_per_s(&self) -> std::result::Result<f64, ForeignError> {
        if self.arrival_rate_per_s.is_some() {
            return Err(ForeignError::Ambiguous);
        }
        let positive = |name: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(value)
            } else {
                Err(ForeignError::NotPositive { name, value })
            }
        };
        match (
            self.requests_per_s,
            self.events_per_request,
            self.events_per_s,
        ) {
            (Some(r), Some(n), None) => {
                Ok(positive("requests_per_s", r)? * positive("events_per_request", n)?)
            }
            (None, None, Some(e)) => positive("events_per_s", e),
            (Some(_), None, None) => Err(ForeignError::NoEventsPerRequest),
            _ => Err(ForeignError::RateNamedTwice),
        }
    }

    /// The observation to hold against the model.
    pub fn observation(&self) -> std::result::Result<Observation, ForeignError> {
        let o = &self.observed;
        Ok(Observation {
            event_rate_per_s: self.event_rate_per_s()?,
            service: Service::gamma(self.event_cost_mean_s, self.event_cost_scv)?,
            burst: self.burst,
            arrivals: self
                .round_robin_k
                .map_or(LoopArrivals::Poisson, |k| LoopArrivals::RoundRobin { k }),
            wait_mean_s: o.mean_s,
            wait_quantiles_s: [
                (Quantile::P50, o.p50_s),
                (Quantile::P90, o.p90_s),
                (Quantile::P99, o.p99_s),
            ]
            .into_iter()
            .filter_map(|(q, v)| v.map(|v| (q, v)))
            .collect(),
        })
    }
}

impl Comparison {
    /// The comparison as text for a terminal, headed by `label` and `source`.
    pub fn write_summary(
        &self,
        out: &mut dyn std::io::Write,
        label: &str,
        source: &str,
    ) -> std::io::Result<()> {
        use crate::units::format_seconds;
        let c = self;
        writeln!(
            out,
            "{label} ({source}): model {} at utilisation {:.3}",
            c.model, c.rho
        )?;
        writeln!(out, "  why this model: {}", c.model_reason)?;
        for row in &c.rows {
            writeln!(
                out,
                "  {:<6} predicted {:>10}  observed {:>10}  error {}",
                row.statistic,
                format_seconds(row.predicted_s),
                format_seconds(row.observed_s),
                row.relative_error
                    .map_or("-".into(), |e| format!("{:+.1}%", e * 100.0))
            )?;
        }
        if let Some(p) = &c.plain_mg1 {
            writeln!(
                out,
                "  plain M/G/1, ignoring the bursts, would predict a mean of {}",
                format_seconds(p.wq_mean_s)
            )?;
        }
        writeln!(out, "  verdict: {}", c.verdict_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(rate: f64, burst: u32, mean: f64) -> Observation {
        Observation {
            event_rate_per_s: rate,
            service: Service::exponential(1.0).unwrap(),
            burst,
            arrivals: LoopArrivals::Poisson,
            wait_mean_s: Some(mean),
            wait_quantiles_s: vec![(Quantile::P99, 21.91)],
        }
    }

    #[test]
    fn matching_observation_is_client_bias() {
        // M/M/1 at rho 0.8, E[S] = 1: Wq = 4, p99 = 21.91.
        let c = compare(&obs(0.8, 1, 4.1), 0.1).unwrap();
        assert_eq!(c.verdict, Verdict::ClientBias);
        assert_eq!(c.model, "M/M/1");
        assert!((c.rows[0].relative_error.unwrap() - 0.025).abs() < 1e-12);
        assert!(c.rows[1].relative_error.unwrap().abs() < 1e-3);
    }

    #[test]
    fn excess_is_beyond_the_client_and_deficit_below() {
        assert_eq!(
            compare(&obs(0.8, 1, 8.0), 0.1).unwrap().verdict,
            Verdict::BeyondClient
        );
        assert_eq!(
            compare(&obs(0.8, 1, 2.0), 0.1).unwrap().verdict,
            Verdict::BelowPrediction
        );
    }

    #[test]
    fn saturation_is_named() {
        let c = compare(&obs(1.2, 1, 100.0), 0.1).unwrap();
        assert_eq!(c.verdict, Verdict::ClientSaturated);
        assert!(c.predicted.is_none());
    }

    #[test]
    fn bursts_pick_the_batch_model_and_show_what_mg1_misses() {
        let c = compare(&obs(0.5, 10, 1.0), 0.1).unwrap();
        assert_eq!(c.model, "M^X/G/1");
        let plain = c.plain_mg1.unwrap();
        let batch = c.predicted.unwrap();
        assert!(
            plain.wq_mean_s < batch.wq_mean_s / 3.0,
            "{} vs {}",
            plain.wq_mean_s,
            batch.wq_mean_s
        );
    }

    #[test]
    fn round_robin_is_exact_and_gets_no_allowance() {
        let mut o = obs(0.8, 1, 1.0);
        o.arrivals = LoopArrivals::RoundRobin { k: 4 };
        let predicted = compare(&o, 0.1).unwrap().rows[0].predicted_s;
        o.wait_mean_s = Some(predicted * 1.05);
        let c = compare(&o, 0.1).unwrap();
        assert_eq!(c.verdict, Verdict::ClientBias);
        assert!((c.tolerance - 0.1).abs() < 1e-12);
        o.wait_mean_s = Some(predicted * 1.25);
        assert_eq!(compare(&o, 0.1).unwrap().verdict, Verdict::BeyondClient);
    }

    #[test]
    fn round_robin_picks_erlang() {
        let mut o = obs(0.8, 1, 1.0);
        o.arrivals = LoopArrivals::RoundRobin { k: 4 };
        assert_eq!(compare(&o, 0.1).unwrap().model, "E_k/G/1");
    }
}
