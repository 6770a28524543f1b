//! The flags of `heisenbench run` and `heisenbench k8s`, and the run they describe: a
//! scenario file or a resolved config, overridden by flags ([`RunConfig::resolve`] holds
//! the rules of their meeting).

use std::path::{Path, PathBuf};

use crate::flags::model::WorkloadArgs;
use heisenbench_model::ModelError;
use heisenbench_model::scenario::Trace;
use heisenbench_model::slo::Slo;
use heisenbench_model::units::Seconds;

use heisenbench_live::files::FileKind;
use heisenbench_live::generator::config::{
    ApiKind, Checked, ResolveError, RunConfig, RunOverrides, ShardMode, Warmup,
};
use heisenbench_live::generator::distributed::{ShardSpec, parse_utc, utc_now_s};
use heisenbench_live::generator::k8s::{Deployment, SecretKey};
use heisenbench_live::generator::prepare::Pending;
use heisenbench_live::openai::prompt::PromptContent;

/// `heisenbench run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A scenario file (the same JSON `heisenbench sim` reads; its workload and client parts).
    pub scenario: Option<PathBuf>,
    /// A resolved run config (as `heisenbench k8s` puts in its ConfigMap); flags still override.
    #[arg(long, conflicts_with = "scenario")]
    pub config: Option<PathBuf>,
    /// Run only shard I of N (I from 0): the plan is the N-shard plan, the result is this
    /// shard's, printed between marker lines (or written to --out DIR/shard-I.json) for
    /// `heisenbench merge`.
    #[arg(long)]
    pub shard: Option<ShardSpec>,
    /// With --shard: the common start, UTC (2026-11-30T10:00:00Z or seconds since the epoch).
    #[arg(long, requires = "shard", value_parser = parse_utc)]
    pub start_at: Option<f64>,
    /// The flags that set the run's fields (server, API, shards, timeouts, seed).
    #[command(flatten)]
    pub flags: RunFlags,
    /// The workload's flags (each replaces the scenario's value).
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// A Hugging Face tokenizer.json: prompts of exactly --prompt-tokens tokens of the
    /// prompt text (without BOS or chat template), checked against the server's usage.
    /// Without it a token is a word, exact only for the embedded mock.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Calibration file (default: $HEISENBENCH_CALIBRATION or ~/.cache/heisenbench/calibration.json).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// After the run, measure this machine's loopback floor (4 s: idle, and at the run's
    /// chunk rate) and report the observer overhead as a multiple of it. Without it, the
    /// floor stored by `heisenbench calibrate` is used when there is one.
    #[arg(long)]
    pub floor: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write report.json (and requests.csv with --csv) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write one CSV row per request (needs --out).
    #[arg(long, requires = "out")]
    pub csv: bool,
}

/// Why the flags and files describe no run.
#[derive(Debug, thiserror::Error)]
pub enum RunArgsError {
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] heisenbench_live::files::ReadError),
    /// A file's content is wrong.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where in it.
        reason: String,
    },
    /// The flags contradict each other or the file, or a value is out of range.
    #[error(transparent)]
    Invalid(#[from] ModelError),
}

impl RunArgs {
    /// The run the flags (and the scenario or config file) describe, checked once, and what
    /// it leaves for [`heisenbench_live::generator::prepare::prepare`] to settle: the
    /// prompts of a tokenizer or dataset, the model (without --model, a server at --url is
    /// asked) and the shard count (when neither a flag nor the file gives it). Reads the
    /// config, scenario or trace file named; asks no server.
    pub fn config(&self) -> Result<(Checked, Pending), RunArgsError> {
        let in_file = |p: &Path, reason: String| RunArgsError::File {
            path: p.to_path_buf(),
            reason,
        };
        if let Some(p) = &self.config {
            let mut cfg: RunConfig = serde_json::from_str(&read_file(p, FileKind::Config)?)
                .map_err(|e| in_file(p, e.to_string()))?;
            if let Some(u) = &self.flags.url {
                cfg.url = u.clone();
            }
            if let Some(spec) = self.shard {
                cfg.shards = spec.of;
            }
            return Ok((cfg.checked()?, Pending::default()));
        }
        let text = self
            .scenario
            .as_deref()
            .map(|p| read_file(p, FileKind::Config))
            .transpose()?;
        let trace = match &self.workload.trace {
            Some(p) => Some(read_trace(p)?),
            None => None,
        };
        let flags = RunOverrides {
            workload: self.workload.flags(trace),
            csv: self.csv,
            shards: self.shard.map(|spec| spec.of).or(self.flags.shards),
            ..self.flags.clone().into()
        };
        let (cfg, shards_given) =
            RunConfig::resolve(text.as_deref(), &flags).map_err(|e| match e {
                // Only a file's text is parsed as a scenario.
                ResolveError::Scenario(e) => in_file(
                    self.scenario.as_deref().unwrap_or(Path::new("-")),
                    e.to_string(),
                ),
                ResolveError::Invalid(e) => e.into(),
            })?;
        let pending = Pending {
            tokenizer: self.tokenizer.clone(),
            model: self.flags.model.is_none() && self.flags.url.is_some(),
            shards: !shards_given,
            embedded_mock: self.flags.url.is_none(),
        };
        Ok((cfg, pending))
    }
}

/// The flags of `heisenbench run` that set a [`RunConfig`] field ([`RunOverrides`], one
/// flag a field; the workload's are [`WorkloadArgs`], declared beside these).
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Base URL of the server; without it, the embedded mock is started in this process.
    #[arg(long)]
    pub url: Option<String>,
    /// completions or chat.
    #[arg(long, default_value = "completions", value_parser = parse_flag::<ApiKind>)]
    pub api: ApiKind,
    /// Ask for whole responses instead of streams.
    #[arg(long = "no-stream", action = clap::ArgAction::SetFalse)]
    pub stream: bool,
    /// The model field of each request (default: the one model the server's /v1/models
    /// lists; the embedded mock's name without --url).
    #[arg(long)]
    pub model: Option<String>,
    /// Extra trusted certificates (PEM, e.g. a private CA) for an https:// --url.
    #[arg(long)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Do not verify the server's TLS certificate (the report says so).
    #[arg(long)]
    pub insecure: bool,
    /// Environment variable holding the API key (never printed or written).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Per-request timeout from the actual send.
    #[arg(long = "timeout", value_name = "TIMEOUT", value_parser = positive_seconds, allow_hyphen_values = true)]
    pub timeout_s: Option<f64>,
    /// Requests one shard keeps in flight at most.
    #[arg(long = "max-in-flight", value_name = "MAX_IN_FLIGHT", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight_per_shard: Option<u32>,
    /// Shards: the generator's single-threaded loops, as processes or threads (default: what
    /// `plan` says this load needs, capped at this machine's cores; `k8s`: one pod each).
    #[arg(long, alias = "workers", value_parser = clap::value_parser!(u32).range(1..=i64::from(heisenbench_model::limits::MAX_LOCAL_SHARDS)))]
    pub shards: Option<u32>,
    /// What the prompts are: unique (seeded random words, a different prompt for every
    /// request, so a server's prefix cache finds nothing) or repeated (one word repeated,
    /// every prompt of a length the same).
    #[arg(long = "prompts", value_name = "PROMPTS", default_value = "unique", value_parser = parse_flag::<PromptContent>)]
    pub prompt_content: PromptContent,
    /// process or thread.
    #[arg(long, default_value = "process", value_parser = parse_flag::<ShardMode>)]
    pub shard_mode: ShardMode,
    /// Emulated client cost per received event (busy work on the shard's loop), e.g. 12us.
    #[arg(long = "client-cost", value_name = "CLIENT_COST", default_value = "0s", hide_default_value = true, value_parser = seconds, allow_hyphen_values = true)]
    pub client_cost_s: f64,
    /// Root seed of the schedule.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Service-level objectives a good request meets, any subset of ttft, tpot, itl (every
    /// gap between chunks), ntpot and e2e: e.g. ttft=200ms,tpot=50ms. The report gives
    /// goodput from the intended send and from the actual send, and the client's share.
    #[arg(long, value_parser = parse_flag::<Slo>)]
    pub slo: Option<Slo>,
    /// Keep the start of the run out of its statistics: a duration (30s: the requests
    /// intended in the first 30 seconds) or a count (500: the first 500 requests). They
    /// are still sent, accounted for and reported apart.
    #[arg(long, value_parser = parse_flag::<Warmup>)]
    pub warmup: Option<Warmup>,
    /// The server's Prometheus metrics, read during the run on its clock: auto (the
    /// --url's /metrics when it answers; the default), off, or an endpoint URL (repeat
    /// for several servers). The report splits TTFT into the client's part and the
    /// server's queue and prefill.
    #[arg(long = "server-metrics", value_name = "auto|off|URL")]
    pub server_metrics: Vec<String>,
    /// Time between two scrapes of the server's metrics (10ms to 1h; default 1s).
    #[arg(long = "scrape-interval", value_name = "INTERVAL", value_parser = seconds)]
    pub scrape_interval_s: Option<f64>,
    /// Keep a row per request (`run --csv`, declared with the `--out` it needs).
    #[arg(skip)]
    pub csv: bool,
    /// The workload's flags (declared by the command: their types are the model's).
    #[arg(skip)]
    pub workload: heisenbench_model::scenario::WorkloadFlags,
}

impl From<RunFlags> for RunOverrides {
    fn from(f: RunFlags) -> Self {
        Self {
            url: f.url,
            api: f.api,
            stream: f.stream,
            model: f.model,
            ca_cert: f.ca_cert,
            insecure: f.insecure,
            api_key_env: f.api_key_env,
            timeout_s: f.timeout_s,
            max_in_flight_per_shard: f.max_in_flight_per_shard,
            shards: f.shards,
            prompt_content: f.prompt_content,
            shard_mode: f.shard_mode,
            client_cost_s: f.client_cost_s,
            seed: f.seed,
            csv: f.csv,
            slo: f.slo,
            warmup: f.warmup,
            server_metrics: f.server_metrics,
            scrape_interval_s: f.scrape_interval_s,
            workload: f.workload,
        }
    }
}

/// A value whose grammar lives in its type's `FromStr`.
pub(crate) fn parse_flag<T: std::str::FromStr<Err = ModelError>>(s: &str) -> Result<T, ModelError> {
    s.parse()
}

/// A duration such as 12us or 1.5s, in seconds (zero allowed).
fn seconds(s: &str) -> Result<f64, ModelError> {
    heisenbench_model::units::Seconds::parse(s).map(|d| d.get())
}

/// A duration greater than zero, in seconds.
fn positive_seconds(s: &str) -> Result<f64, ModelError> {
    heisenbench_model::units::Seconds::parse_positive(s).map(|d| d.get())
}

/// `heisenbench k8s`.
#[derive(Debug, clap::Args)]
pub struct K8sArgs {
    /// The run, as for `heisenbench run` (needs --url).
    #[command(flatten)]
    pub run: RunArgs,
    /// Container image holding the heisenbench binary.
    #[arg(long, default_value = "heisenbench:latest")]
    pub image: String,
    /// Namespace.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// How far ahead of now the common start is, for pods to be scheduled and pull images.
    #[arg(long, default_value = "2m", value_parser = Seconds::parse_positive)]
    pub start_delay: Seconds,
    /// The API key's Secret as NAME/KEY (the pod gets it in --api-key-env's variable).
    #[arg(long)]
    pub api_key_secret: Option<SecretKey>,
    /// CPU cores each shard's pod requests (default: what `plan` gives per shard, at least 1).
    #[arg(long)]
    pub cpu_per_shard: Option<f64>,
}

impl K8sArgs {
    /// The first flag of `run` given that the manifests cannot carry: they fix each pod's
    /// command, its shard and its start themselves, and the pods need the server's URL and
    /// the model's name without asking.
    pub fn refused_flag(&self) -> Option<String> {
        let r = &self.run;
        if r.flags.url.is_none() {
            return Some(
                "k8s needs the server's --url (pods cannot reach an embedded mock)".into(),
            );
        }
        if r.flags.shards.is_none() {
            return Some("k8s needs --shards: one pod each".into());
        }
        let fixed = [
            ("--shard", r.shard.is_some()),
            ("--start-at", r.start_at.is_some()),
            ("--shard-mode", r.flags.shard_mode != ShardMode::Process),
            ("--calibration", r.calibration.is_some()),
            ("--out", r.out.is_some()),
            ("--csv", r.csv),
            ("--json", r.json),
        ];
        if let Some((flag, _)) = fixed.iter().find(|(_, given)| *given) {
            return Some(format!(
                "k8s does not use {flag}: the pods' commands are fixed by the manifests"
            ));
        }
        (r.flags.model.is_none() && r.config.is_none()).then(|| {
            "k8s needs --model: the manifests are written without asking the server".into()
        })
    }

    /// Where the run goes: the start is --start-delay from now.
    pub fn deployment(&self) -> Deployment {
        Deployment {
            namespace: self.namespace.clone(),
            image: self.image.clone(),
            cpu_per_shard: self.cpu_per_shard.unwrap_or(1.0),
            start_at_s: utc_now_s() + self.start_delay.get(),
            api_key_secret: self.api_key_secret.clone(),
        }
    }
}

/// The text of the file at `path`, of `kind` (a config or a trace), within its size limit.
fn read_file(path: &Path, kind: FileKind) -> Result<String, RunArgsError> {
    Ok(heisenbench_live::files::read_text(path, kind)?)
}

/// A trace file: send times, or requests with their lengths
/// ([`heisenbench_model::scenario::parse_trace`] reads its three formats).
pub fn read_trace(path: &Path) -> Result<Trace, RunArgsError> {
    let text = read_file(path, FileKind::Trace)?;
    heisenbench_model::scenario::parse_trace(&text).map_err(|(line, why)| RunArgsError::File {
        path: path.to_path_buf(),
        reason: format!("line {line}: {why}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run` with no flag overrides nothing: the flags' defaults are the overrides'.
    #[test]
    fn no_flag_is_no_override() {
        let none: RunFlags = crate::flags::parse_flags(&[]).unwrap();
        assert_eq!(
            format!("{:?}", RunOverrides::from(none)),
            format!("{:?}", RunOverrides::default())
        );
        let some: RunFlags =
            crate::flags::parse_flags(&["--api", "chat", "--no-stream", "--shard-mode", "thread"])
                .unwrap();
        let o = RunOverrides::from(some);
        assert_eq!(
            (o.api, o.stream, o.shard_mode),
            (ApiKind::Chat, false, ShardMode::Thread)
        );
    }

    fn parse<T: clap::Args + clap::FromArgMatches>(args: &[&str]) -> T {
        crate::flags::parse_flags(args).unwrap()
    }

    #[test]
    fn flags_override_the_defaults_and_a_bad_file_is_the_users_to_fix() {
        let (cfg, pending) =
            parse::<RunArgs>(&["--qps", "250", "--requests", "40", "--shards", "3"])
                .config()
                .unwrap();
        assert!(!pending.shards && !pending.model && pending.embedded_mock);
        assert_eq!(
            (cfg.shards, cfg.workload.arrivals.rate_per_s()),
            (3, Some(250.0))
        );
        let (_, pending) = parse::<RunArgs>(&[]).config().unwrap();
        assert!(pending.shards, "the shard count is the caller's to size");
        let (_, pending) = parse::<RunArgs>(&["--url", "http://127.0.0.1:9"])
            .config()
            .unwrap();
        assert!(
            pending.model && !pending.embedded_mock,
            "no server is asked yet"
        );
        let e = parse::<RunArgs>(&["--trace", "/nonexistent/trace"])
            .config()
            .unwrap_err();
        assert!(e.to_string().contains("cannot read trace"), "{e}");
    }

    #[test]
    fn k8s_refuses_what_its_manifests_fix_and_reads_a_secret_key() {
        let k = |extra: &[&str]| {
            let mut a = vec!["--shards", "2"];
            a.extend_from_slice(extra);
            parse::<K8sArgs>(&a).refused_flag()
        };
        assert!(k(&[]).unwrap().contains("--url"));
        let url = ["--url", "http://h:1"];
        assert!(
            k(&[&url[..], &["--out", "d"]].concat())
                .unwrap()
                .contains("--out")
        );
        assert!(k(&url).unwrap().contains("--model"));
        assert_eq!(k(&[&url[..], &["--model", "m"]].concat()), None);
        let s: SecretKey = "llm/api-key".parse().unwrap();
        assert_eq!((s.name.as_str(), s.key.as_str()), ("llm", "api-key"));
        for bad in ["llm", "/k", "n/", "a/b/c"] {
            assert!(bad.parse::<SecretKey>().is_err(), "{bad}");
        }
    }
}
