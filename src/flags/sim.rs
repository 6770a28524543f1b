//! The flags of `heisenbench sim` and `sim queue`.

use std::path::PathBuf;

use clap::Args;
use heisenbench_model::scenario::WorkloadFlags;
use heisenbench_model::service::Service;
use heisenbench_model::units::{Rate, Seconds};

use heisenbench_sim::scenario::{PRESET_SECONDS, ScenarioError, SimScenario, preset};
use heisenbench_sim::textbook::{Engines, Gaps, QueueSpec};

/// `heisenbench sim`: a scenario file or a preset, with overrides.
#[derive(Debug, Args)]
pub struct SimFlags {
    /// A scenario file (JSON: workload, client, server, seed).
    pub scenario: Option<PathBuf>,
    /// A built-in scenario pair instead of a file: paper-1000 or paper-5000.
    #[arg(long, conflicts_with = "scenario")]
    pub preset: Option<String>,
    /// Root seed (overrides the file's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Schedule length in seconds (overrides the file's stop; presets default to 10).
    #[arg(long, value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub duration: Option<Seconds>,
    /// Request count instead of a duration.
    #[arg(long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Offered requests per second (overrides the arrival rate).
    #[arg(long, allow_hyphen_values = true)]
    pub qps: Option<Rate>,
    /// Client loops (overrides the file's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Send times from a file, one per line, seconds from the start (replaces the arrivals).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print the full report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the full report here (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl SimFlags {
    /// The scenarios to simulate: the preset's pair (of the flags' length, or
    /// [`PRESET_SECONDS`]), else the file's one, read from `file_text`; each with the
    /// flags' seed, loops and workload overrides (`trace`: the send times read from
    /// `--trace`'s file), checked.
    pub fn scenarios(
        &self,
        file_text: Option<&str>,
        trace: Option<Vec<f64>>,
    ) -> Result<Vec<SimScenario>, ScenarioError> {
        let mut list = match (&self.preset, file_text) {
            (Some(name), _) => {
                let seconds = self.duration.map_or(PRESET_SECONDS, Seconds::get);
                preset(
                    name,
                    seconds,
                    self.seed
                        .unwrap_or(heisenbench_model::scenario::DEFAULT_SEED),
                )?
            }
            (None, Some(text)) => vec![SimScenario::from_json(text)?],
            (None, None) => return Err(ScenarioError::Missing),
        };
        let flags = WorkloadFlags {
            qps: self.qps.map(Rate::get),
            trace,
            duration_s: self.duration.map(Seconds::get),
            requests: self.requests,
            ..WorkloadFlags::default()
        };
        for sc in &mut list {
            if let Some(seed) = self.seed {
                sc.seed = seed;
            }
            if let Some(w) = self.workers {
                sc.client.workers = w;
            }
            sc.workload.apply(&flags)?;
            sc.validate()?;
        }
        Ok(list)
    }
}

/// `heisenbench sim queue`: one FIFO queue by the Lindley recursion and the event engine.
#[derive(Debug, Args)]
pub struct QueueFlags {
    /// Inter-arrival shape: poisson, constant, gamma:shape=X or erlang:k=K.
    #[arg(long, default_value = "poisson")]
    pub arrival: Gaps,
    /// Arrivals per second.
    #[arg(long, allow_hyphen_values = true)]
    pub rate: Rate,
    /// Service: deterministic:mean=1s, exponential:mean=1s, gamma:mean=1s,scv=0.5,
    /// lognormal:mean=1s,scv=2.
    #[arg(long)]
    pub service: Service,
    /// Customers measured after the warm-up (a tenth as many are simulated first).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub customers: u64,
    /// Root seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// lindley, events or both.
    #[arg(long, default_value = "both")]
    pub engine: Engines,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report here (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl QueueFlags {
    /// The experiment: a tenth of the measured customers as warm-up, 32 batches for the
    /// confidence intervals. Refused when the queue never settles.
    pub fn spec(&self) -> Result<QueueSpec, heisenbench_model::ModelError> {
        let spec = QueueSpec {
            rate_per_s: self.rate.get(),
            gaps: self.arrival,
            service: self.service.clone(),
            customers: self.customers,
            warmup: self.customers / 10,
            batches: 32,
            seed: self.seed,
        };
        spec.check_stable()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::flags::parse_flags as parse;

    fn sim(args: &[&str]) -> SimFlags {
        parse(args).unwrap()
    }

    #[test]
    fn a_preset_takes_the_overrides_and_a_missing_scenario_is_named() {
        let list = sim(&[
            "--preset",
            "paper-1000",
            "--seed",
            "7",
            "--qps",
            "50",
            "--duration",
            "2s",
        ])
        .scenarios(None, None)
        .unwrap();
        assert_eq!(list.len(), 2);
        for sc in &list {
            assert_eq!(sc.seed, 7);
            assert_eq!(sc.workload.arrivals.rate_per_s(), Some(50.0));
        }
        let single = sim(&["--workers", "3"]);
        let text = serde_json::to_string(&list[0]).unwrap();
        assert_eq!(
            single.scenarios(Some(&text), None).unwrap()[0]
                .client
                .workers,
            3
        );
        assert!(matches!(
            single.scenarios(None, None),
            Err(ScenarioError::Missing)
        ));
        assert!(sim(&["--preset", "nope"]).scenarios(None, None).is_err());
    }

    #[test]
    fn the_spec_warms_up_on_a_tenth_and_refuses_an_unsettled_queue() {
        let f = parse::<QueueFlags>(&[
            "--rate",
            "0.5",
            "--service",
            "exponential:mean=1s",
            "--customers",
            "1000",
        ]);
        let s = f.unwrap().spec().unwrap();
        assert_eq!((s.customers, s.warmup, s.batches), (1000, 100, 32));
        assert_eq!(s.gaps, Gaps::Poisson);
        let f = parse::<QueueFlags>(&["--rate", "1", "--service", "exponential:mean=1s"]).unwrap();
        assert!(f.spec().unwrap_err().to_string().contains("server"));
        assert!(
            parse::<QueueFlags>(&[
                "--rate",
                "1",
                "--service",
                "exponential:mean=1s",
                "--customers",
                "99"
            ])
            .is_err()
        );
    }
}
