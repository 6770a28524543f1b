//! The flags of `heisenbench audit`, and the audits they ask for: one per offered rate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use heisenbench_model::ModelError;
use heisenbench_model::client_loop::{ClockStart, LatencyShape};
use heisenbench_model::plan;
use heisenbench_model::units::{Rate, Seconds};

use crate::flags::mock::MockFlags;
use heisenbench_live::audit::AuditConfig;
use heisenbench_live::audit::predict::{Budget, LoopCpu};

/// `heisenbench audit [options] -- COMMAND ARGS...`.
///
/// The command may hold placeholders: {url} {host} {port} {model} {rate} {duration}
/// {requests} {prompt_tokens} {output_tokens} {out}.
#[derive(Debug, clap::Args)]
#[command(mut_arg("port", |a| a.default_value("0")))]
#[command(group(clap::ArgGroup::new("loop_reading").args(["cost_split", "from"])))]
pub struct AuditFlags {
    /// The request rate the client is asked to offer ({rate}).
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present_any = ["rates", "from"],
        conflicts_with = "rates"
    )]
    pub rate: Option<Rate>,
    /// Audit once per rate (comma-separated) and draw achieved rate and reported TTFT
    /// against offered rate (`--figure`).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub rates: Vec<Rate>,
    /// The client's name in reports and on the figure (default: the tool whose results
    /// were read, else the command's file name).
    #[arg(long)]
    pub label: Option<String>,
    /// Draw the audit figure (audit.png and audit.svg) into this directory.
    #[arg(long)]
    pub figure: Option<PathBuf>,
    /// How long the client is asked to run ({duration}, whole seconds).
    #[arg(long, default_value = "10s", value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub duration: Seconds,
    /// Prompt tokens per request ({prompt_tokens}).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_TOKENS)))]
    pub prompt_tokens: u32,
    /// Output tokens per request ({output_tokens}).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_TOKENS)))]
    pub output_tokens: u32,
    /// Stop the client after this long (default: three times the duration plus 60 s).
    #[arg(long, value_parser = Seconds::parse_positive, allow_hyphen_values = true)]
    pub timeout: Option<Seconds>,
    /// The plan's budget on the client's wait before the first chunk: a quantile only.
    #[arg(long, default_value = "p99=1ms")]
    pub budget: plan::Budget,
    /// Relative error within which the TTFT excess counts as explained by the model.
    #[arg(long, default_value_t = 0.25)]
    pub tolerance: f64,
    /// The client's loops: its N busiest processes. Default: the processes that held its
    /// connections to the server (they read and stamp the answers), as many loops as carry
    /// the busiest one's load; where none was seen holding one, every process that spent a
    /// tenth of the tree's CPU.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: Option<u32>,
    /// Where the client's results and logs go ({out} is a folder inside); default: a
    /// fresh folder under the system's temporary directory.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Also audit with this many output tokens at the first rate and at twice it, split
    /// the client's CPU into a part per second, a part per request and a part per chunk,
    /// and predict the TTFT it adds at every rate by simulating its loop as it runs (send,
    /// chunk and finish jobs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_TOKENS)))]
    pub cost_split: Option<u32>,
    /// With --cost-split or --from: fit the client's loop (the share of a request's cost
    /// before its send, the latency beyond its CPU, the slice) on the first N audits at the
    /// longer length at once, and hold it against the rest: the slice, the latency and the
    /// costs must then hold at several loads, not one. Default 1; with --from, as many as
    /// the file's series was fitted on (the first N of each series, with several).
    #[arg(long, requires = "loop_reading", value_parser = clap::value_parser!(u32).range(1..))]
    pub fit_on: Option<u32>,
    /// With --cost-split: after the audits at --rates, audit the client again at these
    /// fractions of the saturation its fitted loop predicts (comma-separated, each above 0
    /// and at most 1; the rate rounded to a whole request a second) and hold the loop
    /// against them: held-out audits at the utilisations asked for, whatever the client's
    /// capacity.
    #[arg(long, value_delimiter = ',', num_args = 1.., requires = "cost_split", value_parser = parse_fraction)]
    pub hold_at: Vec<f64>,
    /// With --cost-split and every rate fitted on (--fit-on as many as --rates): after
    /// them, audit the client once more at this fraction of the saturation the fitted loop
    /// predicts, and fit the loop again on all of them with it. A calibration that reaches
    /// the loads --hold-at then asks for: a client whose CPU a request falls as its load
    /// grows (vLLM's bench's does) is otherwise fitted only where it spends the most.
    #[arg(long, requires = "cost_split", value_parser = parse_fraction)]
    pub fit_at: Option<f64>,
    /// With --cost-split: also audit the client at twice the first rate with the server
    /// holding every response to the next whole period of this length (`mock
    /// --release-every`), so that its loop meets the responses in batches as it does past
    /// its knee, and read from it the CPU a request there and the throughput that bounds.
    #[arg(long, requires = "cost_split", value_parser = parse_period)]
    pub batched: Option<Duration>,
    /// With --cost-split or --from: where the client starts its TTFT clock, intended or own-send
    /// (default: by the tool whose results were read; heisenbench's is the intended send,
    /// every other known tool's its own).
    #[arg(long, requires = "loop_reading")]
    pub clock: Option<ClockStart>,
    /// With --cost-split or --from: the shape of the latency the fit finds beyond the
    /// client's CPU, constant (the same for every request, the slice fitted on the p99s) or
    /// drawn (a share of it drawn for each request, fitted with the slice on the p50s, p90s
    /// and p99s) (default: by the tool whose results were read; drawn for vLLM's bench,
    /// constant for every other tool; see docs/audit.md).
    #[arg(long, requires = "loop_reading")]
    pub latency_shape: Option<LatencyShape>,
    /// Which CPU of the processes holding the client's connections is its loop's work:
    /// main-thread (their main threads', where they ran most of it: the other threads run
    /// beside the loop) or process (all of it: the other threads run Python under the
    /// interpreter's lock, as vLLM's bench's do for every request; see docs/audit.md).
    #[arg(long, default_value_t = LoopCpu::MainThread)]
    pub loop_cpu: LoopCpu,
    /// With --cost-split or --from: the simulated loop also loses its core while it has
    /// work, as often a second of its CPU as the calibration audits read, and waits for one
    /// again as long as it waits to wake. Closer for clients of several processes sharing
    /// the cores (AIPerf, GuideLLM); further for one process with a core to itself (see
    /// docs/audit.md).
    #[arg(long, requires = "loop_reading")]
    pub preemptions: bool,
    /// After each audit, measure the wire: one way over loopback for lone messages at the
    /// rate the audit's requests reached the server (3 s), and take the mean TTFT excess
    /// apart into the wire both ways, the client's own lateness (where its TTFT holds it)
    /// and the rest.
    #[arg(long, conflicts_with = "from")]
    pub wire: bool,
    /// Write the audit (with every request the server answered) to this JSON file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The server: any flag of `heisenbench mock` (zero latency by default).
    #[command(flatten)]
    pub mock: MockFlags,
    /// Read the client's loop again from a series `audit --cost-split --out` wrote (its
    /// calibration audits), simulate it at each of its audits and print that; nothing is
    /// run. Several series of one client (comma-separated) are read as one calibration: the
    /// loop is fitted on all their calibration audits at once, so that its costs are those
    /// of several runs rather than one run's speed, and simulated at every audit of each.
    /// With --clock, --loops, --held-out, --out and --figure.
    #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with_all = ["rate", "rates", "cost_split", "command"])]
    pub from: Vec<PathBuf>,
    /// With --from: also hold the loop read from the series against these audits of the
    /// same client (`audit --out` files, comma-separated; a series counts with every audit
    /// in it), simulated at each one's load: the series' held-out rates audited again, to
    /// hold the prediction against several runs rather than one.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub held_out: Vec<PathBuf>,
    /// With --from, for a tool that sleeps each gap: the gaps its seed drew for its runs,
    /// replayed apart from it (a JSON list of `rate_per_s`, `requests` and `mean_gap_s`, as
    /// `bench/audit/sglang-gaps.sh` writes it with `DRAWN=FILE`), which must cover every
    /// --held-out audit. Where it has the draws of every calibration audit of the series,
    /// the tool's lateness is read net of them; the held-out audits read as a knee walk are
    /// also read given their draws.
    #[arg(long)]
    pub drawn: Option<PathBuf>,
    /// The client command and its arguments, after `--`.
    #[arg(last = true, required_unless_present = "from", num_args = 1..)]
    pub command: Vec<String>,
}

impl crate::flags::IdleFlags for AuditFlags {
    /// A reading from a series runs nothing, so the flags that shape a live audit (its
    /// load, the client's folder and time, the mock's every flag) do nothing beside
    /// --from; the flags that read against a series do nothing without it (clap's
    /// `requires` drops them once --rate or the command is given).
    fn idle_rules() -> Vec<crate::flags::Rule> {
        use crate::flags::Rule;
        use clap::Args;
        let runs_nothing = "a reading from a series runs nothing";
        let mock = MockFlags::augment_args(clap::Command::new("mock"));
        let live = [
            "label",
            "duration",
            "prompt_tokens",
            "output_tokens",
            "timeout",
            "work_dir",
        ]
        .into_iter()
        .map(str::to_string)
        .chain(
            mock.get_arguments()
                .map(|a| a.get_id().to_string())
                .filter(|id| id != "help" && id != "version"),
        );
        let mut rules: Vec<Rule> = live
            .map(|flag| Rule::with(&flag, "from", runs_nothing))
            .collect();
        rules.extend([
            Rule::without(
                "held_out",
                "from",
                "it reads audits against a series given with --from",
            ),
            Rule::without(
                "drawn",
                "from",
                "it reads draws against a series given with --from",
            ),
        ]);
        rules
    }
}

impl AuditFlags {
    /// The budget the prediction plans on, and the tolerance, checked (an audit plans on a
    /// quantile of the wait, not its mean), and a cost split's length against the audit's.
    pub fn budget(&self) -> Result<Budget, ModelError> {
        if let Some(n) = self.cost_split {
            let (lo, hi) = (n.min(self.output_tokens), n.max(self.output_tokens));
            if u64::from(hi) < 2 * u64::from(lo) {
                return Err(ModelError::invalid(
                    "cost-split",
                    n,
                    "must differ from --output-tokens by a factor of two or more",
                ));
            }
        }
        let rates = self.rates.len().max(1);
        if self.cost_split.is_some() && self.fit_on_count() > rates {
            return Err(ModelError::invalid(
                "fit-on",
                self.fit_on_count(),
                "must be at most the number of rates asked for",
            ));
        }
        if self.fit_at.is_some() && self.fit_on_count() != rates {
            return Err(ModelError::invalid(
                "fit-at",
                format!("--fit-on {} with {rates} rates", self.fit_on_count()),
                "needs every rate fitted on (--fit-on as many as --rates): the audit it adds is fitted on with them",
            ));
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(ModelError::invalid(
                "tolerance",
                self.tolerance,
                "must be a number > 0",
            ));
        }
        match self.budget {
            plan::Budget::Quantile { q, limit_s } => Ok(Budget { q, limit: limit_s }),
            plan::Budget::Mean { .. } => Err(ModelError::invalid(
                "budget",
                self.budget,
                "audit plans on a quantile of the wait, e.g. p99=1ms, not the mean",
            )),
        }
    }

    /// The offered rates of the held-out audits `--hold-at` asks for, given the saturation
    /// the fitted loop predicts: whole requests a second, at least one.
    pub fn held_rates(&self, saturation_per_s: f64) -> Result<Vec<f64>, String> {
        rates_at("--hold-at", &self.hold_at, saturation_per_s)
    }

    /// The offered rate of the audit `--fit-at` adds to the fit, given the saturation the
    /// loop fitted on the listed rates predicts (None without the flag).
    pub fn fit_rate(&self, saturation_per_s: f64) -> Result<Option<f64>, String> {
        self.fit_at
            .map(|f| rates_at("--fit-at", &[f], saturation_per_s).map(|r| r[0]))
            .transpose()
    }

    /// The audits the client's loop is fitted on (`--fit-on`, default 1).
    pub fn fit_on_count(&self) -> usize {
        self.fit_on.unwrap_or(1) as usize
    }

    /// Whether a series of rates is asked for (`--rates`), not one audit.
    pub fn is_series(&self) -> bool {
        self.rate.is_none() || self.cost_split.is_some()
    }

    /// One audit per offered rate, in the order given. A series' audits keep their
    /// results apart, in a folder per rate under `work_dir`.
    pub fn configs(
        &self,
        work_dir: &Path,
        stop: &heisenbench_live::generator::stop::StopSignal,
    ) -> Vec<AuditConfig> {
        let duration = Duration::from_secs_f64(self.duration.get());
        let timeout = self
            .timeout
            .map_or(AuditConfig::default_timeout(duration), |t| {
                Duration::from_secs_f64(t.get())
            });
        let rates: Vec<f64> = match self.rate {
            Some(r) => vec![r.get()],
            None => self.rates.iter().map(|r| r.get()).collect(),
        };
        rates
            .into_iter()
            .map(|rate| AuditConfig {
                command: self.command.clone(),
                rate_per_s: rate,
                duration,
                prompt_tokens: self.prompt_tokens,
                output_tokens: self.output_tokens,
                work_dir: if self.is_series() {
                    work_dir.join(format!("rate-{rate}"))
                } else {
                    work_dir.to_path_buf()
                },
                timeout,
                sample_every: Duration::from_millis(100),
                mock: self.mock.clone().into(),
                wire: self.wire,
                stop: stop.clone(),
            })
            .collect()
    }
}

/// A release period: a duration above zero.
fn parse_period(s: &str) -> Result<Duration, String> {
    match heisenbench_live::mock::config::parse_latency(s).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err("must be above zero".into()),
        d => Ok(d),
    }
}

/// `fractions` of a fitted loop's saturation as offered rates: whole requests a second, at
/// least one; refused (for `flag`) where the loop predicts no saturation.
fn rates_at(flag: &str, fractions: &[f64], saturation_per_s: f64) -> Result<Vec<f64>, String> {
    if !(saturation_per_s.is_finite() && saturation_per_s > 0.0) {
        return Err(format!(
            "{flag}: the fitted loop predicts no saturation to audit it at ({saturation_per_s} req/s)"
        ));
    }
    Ok(fractions
        .iter()
        .map(|f| (f * saturation_per_s).round().max(1.0))
        .collect())
}

/// A share of the saturation: above 0 and at most 1.
fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!("{s}: must be a fraction above 0 and at most 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<AuditFlags, clap::Error> {
        crate::flags::parse_flags(args)
    }

    #[test]
    fn a_series_gets_a_folder_per_rate_and_the_default_timeout() {
        let f = parse(&["--rates", "10,20", "--duration", "5s", "--", "client"]).unwrap();
        assert!(f.is_series());
        let c = f.configs(Path::new("/w"), &Default::default());
        let rates: Vec<f64> = c.iter().map(|c| c.rate_per_s).collect();
        assert_eq!(rates, [10.0, 20.0]);
        assert_eq!(c[0].work_dir, Path::new("/w/rate-10"));
        assert_eq!(c[1].work_dir, Path::new("/w/rate-20"));
        // 3 x 5 s + 60 s.
        assert_eq!(c[0].timeout, Duration::from_secs(75));
        assert_eq!(c[0].command, ["client"]);
    }

    #[test]
    fn one_rate_uses_the_folder_itself_and_a_given_timeout() {
        let f = parse(&["--rate", "7", "--timeout", "9s", "--", "client", "{url}"]).unwrap();
        assert!(!f.is_series());
        let c = f.configs(Path::new("/w"), &Default::default());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].work_dir, Path::new("/w"));
        assert_eq!(c[0].timeout, Duration::from_secs(9));
        assert_eq!(f.budget().unwrap().limit.get(), 1e-3);
    }

    #[test]
    fn held_out_fractions_are_shares_of_the_saturation_and_need_a_cost_split() {
        let args = |f: &str| {
            parse(&[
                "--rates",
                "10,20",
                "--cost-split",
                "20",
                "--hold-at",
                f,
                "--",
                "c",
            ])
        };
        let f = args("0.4,0.7").unwrap();
        assert_eq!(f.hold_at, [0.4, 0.7]);
        assert_eq!(f.held_rates(312.0).unwrap(), [125.0, 218.0]);
        // A tiny saturation still gets one request a second; none gets a reason.
        assert_eq!(f.held_rates(0.5).unwrap(), [1.0, 1.0]);
        assert!(f.held_rates(0.0).unwrap_err().contains("--hold-at"));
        assert!(f.held_rates(f64::INFINITY).is_err());
        for bad in ["0", "1.5", "-0.2", "half", "NaN"] {
            assert!(args(bad).is_err(), "{bad} was taken");
        }
        assert!(args("1").is_ok());
        assert!(parse(&["--rates", "10", "--hold-at", "0.5", "--", "c"]).is_err());
    }

    #[test]
    fn a_mean_budget_and_a_bad_tolerance_are_refused() {
        let f = parse(&["--rate", "7", "--budget", "mean=1ms", "--", "c"]).unwrap();
        assert!(f.budget().unwrap_err().to_string().contains("not the mean"));
        let f = parse(&["--rate", "7", "--tolerance", "0", "--", "c"]).unwrap();
        assert!(f.budget().unwrap_err().to_string().contains("tolerance"));
        assert!(parse(&["--rate", "0", "--", "c"]).is_err());
        let f = parse(&["--rate", "7", "--cost-split", "150", "--", "c"]).unwrap();
        assert!(f.budget().unwrap_err().to_string().contains("cost-split"));
        let fit_on = |n: &str| {
            parse(&[
                "--rates",
                "7,9",
                "--cost-split",
                "2",
                "--fit-on",
                n,
                "--",
                "c",
            ])
            .unwrap()
        };
        assert!(
            fit_on("3")
                .budget()
                .unwrap_err()
                .to_string()
                .contains("fit-on")
        );
        assert!(fit_on("2").budget().is_ok());
        assert!(parse(&["--rates", "7,9", "--fit-on", "2", "--", "c"]).is_err());
        let f = parse(&["--rate", "7", "--cost-split", "20", "--", "c"]).unwrap();
        assert!(f.budget().is_ok());
        assert!(parse(&["--rate", "7", "--clock", "intended", "--", "c"]).is_err());
        assert!(parse(&["--rate", "7", "--latency-shape", "drawn", "--", "c"]).is_err());
        assert!(parse(&["--rate", "7"]).is_err());
        // The wire is measured live, so a reading from a file cannot ask for it.
        assert!(parse(&["--from", "a.json", "--wire"]).is_err());
        let f = parse(&["--rate", "7", "--wire", "--", "c"]).unwrap();
        assert!(f.configs(Path::new("/w"), &Default::default())[0].wire);
        // Replayed draws are read against a series: with --from, held-out audits or not.
        let f = parse(&["--from", "s.json", "--drawn", "d.json"]).unwrap();
        assert_eq!(f.drawn.as_deref(), Some(Path::new("d.json")));
        for flag in ["--drawn", "--held-out"] {
            let without = crate::flags::parse_checked::<AuditFlags>(&[
                "--rate", "7", flag, "d.json", "--", "c",
            ]);
            assert_eq!(
                without.unwrap_err(),
                format!(
                    "{flag} does nothing without --from: it reads {} against a series given with --from",
                    if flag == "--drawn" { "draws" } else { "audits" }
                ),
            );
        }
    }

    /// A reading from a series refuses the flags of a live audit (the mock's too, whose
    /// defaults pass), and the flags that read against a series are refused without one.
    #[test]
    fn a_reading_from_a_series_refuses_the_flags_of_a_live_audit() {
        use crate::flags::{assert_rules_name_flags, parse_checked};
        assert_rules_name_flags::<AuditFlags>();
        let from = |args: &[&str]| {
            parse_checked::<AuditFlags>(&[&["--from", "s.json"][..], args].concat())
        };
        for (flag, value) in [
            ("--duration", "5s"),
            ("--output-tokens", "5"),
            ("--work-dir", "w"),
            ("--label", "x"),
            ("--port", "9"),
            ("--seed", "3"),
            ("--time-to-first-token", "5ms"),
            ("--release-every", "1s"),
        ] {
            assert_eq!(
                from(&[flag, value]).unwrap_err(),
                format!("{flag} does nothing beside --from: a reading from a series runs nothing")
            );
        }
        let f = from(&[
            "--held-out",
            "h.json",
            "--drawn",
            "d.json",
            "--loops",
            "2",
            "--clock",
            "intended",
            "--latency-shape",
            "constant",
            "--preemptions",
            "--figure",
            "fig",
            "--out",
            "o.json",
            "--json",
        ])
        .unwrap();
        assert_eq!(f.loops, Some(2));
        assert_eq!(f.latency_shape, Some(LatencyShape::Constant));
        assert!(parse_checked::<AuditFlags>(&["--rate", "7", "--port", "9", "--", "c"]).is_ok());
    }
}
