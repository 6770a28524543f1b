//! The flags of `heisenbench sim` and `sim queue`.

use std::path::PathBuf;

use crate::flags::model::WorkloadArgs;
use clap::Args;
use heisenbench_model::service::Service;
use heisenbench_model::slo::Slo;
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
    /// Client loops (overrides the file's `client.workers`).
    #[arg(long, alias = "workers", value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_SIM_WORKERS)))]
    pub loops: Option<u32>,
    /// The workload's flags, the same as `run`'s (each overrides the file's or the preset's).
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Count a dataset's tokens with this Hugging Face tokenizer.json, as `run
    /// --tokenizer` does (without it, words, as `run` counts without it).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Service-level objectives, as `run`'s --slo (overrides the file's `slo`): the report
    /// gives goodput from the server's own latencies, the intended send and the actual send.
    #[arg(long, value_parser = crate::flags::run::parse_flag::<Slo>)]
    pub slo: Option<Slo>,
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
        trace: Option<heisenbench_model::scenario::Trace>,
    ) -> Result<Vec<SimScenario>, ScenarioError> {
        let mut list = match (&self.preset, file_text) {
            (Some(name), _) => {
                let seconds = self.workload.duration.map_or(PRESET_SECONDS, Seconds::get);
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
        let flags = self.workload.flags(trace);
        for sc in &mut list {
            if let Some(seed) = self.seed {
                sc.seed = seed;
            }
            if let Some(w) = self.loops {
                sc.client.workers = w;
            }
            if self.slo.is_some() {
                sc.slo = self.slo;
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
    /// Customers measured after the warm-up (a tenth as many are simulated first; at most
    /// 1e9).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..=heisenbench_model::limits::MAX_CUSTOMERS))]
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
        let single = sim(&["--loops", "3"]);
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

    /// `sim` reads the workload flags `run` reads, into the same workload: one scenario,
    /// two views, one set of words.
    #[test]
    fn sim_and_run_read_the_workload_flags_alike() {
        use heisenbench_model::scenario::{Arrivals, Lengths};
        let words = [
            "--users",
            "3",
            "--prompt-tokens",
            "7",
            "--output-tokens",
            "uniform:2,4",
            "--requests",
            "30",
        ];
        let sc = &sim(&[&["--preset", "paper-1000"][..], &words].concat())
            .scenarios(None, None)
            .unwrap()[0];
        let run: crate::flags::run::RunArgs = parse(&words).unwrap();
        let (cfg, _) = run.config().unwrap();
        assert_eq!(sc.workload, cfg.workload);
        assert!(matches!(
            sc.workload.arrivals,
            Arrivals::Closed { users: 3, .. }
        ));
        assert_eq!(sc.workload.input_tokens, Lengths::Fixed { tokens: 7 });
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
