//! The command line's words for the simulator (feature `cli`): the flags of
//! `heisenbench sim queue`, declared beside the experiment they describe.

use std::path::PathBuf;

use clap::Args;
use heisenbench_model::service::Service;
use heisenbench_model::units::Rate;

use crate::textbook::{Engines, Gaps, QueueSpec};

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
    use clap::FromArgMatches;

    fn parse(args: &[&str]) -> Result<QueueFlags, clap::Error> {
        let cmd = QueueFlags::augment_args(clap::Command::new("queue"));
        let m = cmd.try_get_matches_from(std::iter::once("queue").chain(args.iter().copied()))?;
        QueueFlags::from_arg_matches(&m)
    }

    #[test]
    fn the_spec_warms_up_on_a_tenth_and_refuses_an_unsettled_queue() {
        let f = parse(&[
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
        let f = parse(&["--rate", "1", "--service", "exponential:mean=1s"]).unwrap();
        assert!(f.spec().unwrap_err().to_string().contains("server"));
        assert!(
            parse(&[
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
