//! What a live run needs: the shared workload plus the HTTP side.

use std::hash::Hasher;

use heisenbench_model::ModelError;
use heisenbench_model::limits::duration_problem;
use heisenbench_model::scenario::{Arrivals, DEFAULT_SEED, Lengths, Stop, Workload};
use heisenbench_model::slo::Slo;
use serde::{Deserialize, Serialize};

use crate::net::client::{Server, redact_url};

/// Which OpenAI endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    /// `POST /v1/completions`.
    #[default]
    Completions,
    /// `POST /v1/chat/completions`.
    Chat,
}

/// How shards run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardMode {
    /// Each shard is this binary re-invoked as a hidden worker process.
    #[default]
    Process,
    /// Each shard is a thread of this process with its own runtime.
    Thread,
}

impl std::str::FromStr for ApiKind {
    type Err = ModelError;

    /// `completions` or `chat`.
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "completions" => Ok(Self::Completions),
            "chat" => Ok(Self::Chat),
            _ => Err(ModelError::invalid("api", s, "use completions or chat")),
        }
    }
}

impl std::str::FromStr for ShardMode {
    type Err = ModelError;

    /// `process` or `thread`.
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "process" => Ok(Self::Process),
            "thread" => Ok(Self::Thread),
            _ => Err(ModelError::invalid(
                "shard mode",
                s,
                "use process or thread",
            )),
        }
    }
}

impl ApiKind {
    /// The endpoint's path.
    pub fn path(self) -> &'static str {
        match self {
            Self::Completions => "/v1/completions",
            Self::Chat => "/v1/chat/completions",
        }
    }
}

/// The per-request timeout when none is given: long enough for any sane generation, short
/// enough that a server which accepts and never answers cannot hold a run forever.
pub const DEFAULT_TIMEOUT_S: f64 = 300.0;

/// A resolved, validated live run. Holds the name of the API key's environment
/// variable, never the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// A label for reports.
    pub name: String,
    /// Root seed of the schedule.
    pub seed: u64,
    /// What is sent and when (the same type the simulator reads).
    pub workload: Workload,
    /// Base URL, e.g. `http://127.0.0.1:8000`.
    pub url: String,
    /// Endpoint.
    pub api: ApiKind,
    /// Stream the responses.
    pub stream: bool,
    /// The `model` field of each request.
    pub model: String,
    /// Environment variable holding the API key (sent as a bearer token).
    pub api_key_env: Option<String>,
    /// Per-request timeout from the actual send, seconds (None: [`DEFAULT_TIMEOUT_S`]).
    pub timeout_s: Option<f64>,
    /// Requests one shard keeps in flight at most.
    pub max_in_flight_per_shard: Option<u32>,
    /// Shards: the generator's single-threaded loops, as processes or threads (files
    /// written before the name was `shards` say `workers`).
    #[serde(alias = "workers")]
    pub shards: u32,
    /// Processes or threads.
    pub shard_mode: ShardMode,
    /// Emulated client cost per received event, seconds of busy work on the shard's loop
    /// (0: none).
    pub client_cost_s: f64,
    /// Keep a row per request for CSV output.
    pub csv: bool,
    /// A PEM file of extra trusted certificates (a private CA) for `https://` targets.
    #[serde(default)]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Skip TLS certificate verification (reports say so).
    #[serde(default)]
    pub insecure: bool,
    /// How prompts are built and what their token counts mean.
    #[serde(default)]
    pub prompts: crate::openai::prompt::Prompts,
    /// The bounds a good request meets (goodput); None: no goodput is judged.
    #[serde(default)]
    pub slo: Option<Slo>,
    /// The first requests, kept out of the statistics (still accounted for).
    #[serde(default)]
    pub warmup: Option<Warmup>,
    /// Requests one shard holds in flight before a request due is dropped instead of
    /// sent (None: no bound; a run sets it from this machine's limits when not given,
    /// see [`super::shards::in_flight_bound`]).
    #[serde(default)]
    pub in_flight_bound: Option<u32>,
    /// The server's Prometheus endpoints read during the run (none in a config made in
    /// code; the command line's default is the `--url`'s `/metrics` when it answers).
    #[serde(default)]
    pub server_metrics: ServerMetrics,
}

/// What of the server's own metrics a run reads, and how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// Which endpoints.
    pub targets: crate::scrape::Targets,
    /// Seconds between scrapes, on the run's clock.
    pub interval_s: f64,
}

impl Default for ServerMetrics {
    /// Nothing scraped (1 s apart, were it asked).
    fn default() -> Self {
        Self {
            targets: crate::scrape::Targets::Off,
            interval_s: Self::DEFAULT_INTERVAL_S,
        }
    }
}

impl ServerMetrics {
    /// The shortest interval allowed, seconds.
    pub const MIN_INTERVAL_S: f64 = 0.01;
    /// The longest interval allowed, seconds.
    pub const MAX_INTERVAL_S: f64 = 3600.0;

    /// The interval between scrapes where none is given, seconds.
    pub const DEFAULT_INTERVAL_S: f64 = 1.0;

    /// From `--server-metrics` values (none: `auto`; `off`; `auto`; or endpoint URLs,
    /// repeatable) and `--scrape-interval` (None: [`Self::DEFAULT_INTERVAL_S`]; refused
    /// beside `off`, where nothing is scraped).
    pub fn from_flags(values: &[String], interval_s: Option<f64>) -> Result<Self, ModelError> {
        use crate::scrape::Targets;
        let bad =
            |v: &str, reason: &'static str| Err(ModelError::invalid("server-metrics", v, reason));
        let targets = match values {
            [] => Targets::Auto,
            [one] if one == "auto" => Targets::Auto,
            [one] if one == "off" => Targets::Off,
            many => {
                for v in many {
                    if v == "off" || v == "auto" {
                        return bad(v, "off and auto stand alone, not beside URLs");
                    }
                    if !(v.starts_with("http://") || v.starts_with("https://")) {
                        return bad(v, "write off, auto, or an http:// or https:// URL");
                    }
                }
                Targets::Urls(many.to_vec())
            }
        };
        if let (crate::scrape::Targets::Off, Some(s)) = (&targets, interval_s) {
            return Err(ModelError::invalid(
                "scrape-interval",
                format!("{s}s"),
                "nothing is scraped with --server-metrics off",
            ));
        }
        let m = Self {
            targets,
            interval_s: interval_s.unwrap_or(Self::DEFAULT_INTERVAL_S),
        };
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), ModelError> {
        if !(Self::MIN_INTERVAL_S..=Self::MAX_INTERVAL_S).contains(&self.interval_s) {
            return Err(ModelError::invalid(
                "scrape-interval",
                format!("{}s", self.interval_s),
                "must be between 10ms and 1h",
            ));
        }
        if let crate::scrape::Targets::Urls(u) = &self.targets
            && u.len() > 64
        {
            return Err(ModelError::invalid(
                "server-metrics",
                u.len().to_string(),
                "at most 64 endpoints",
            ));
        }
        Ok(())
    }
}

/// The start of a run that its statistics leave out: connection set-up, a cold cache.
/// Its requests are sent, read and accounted for like the rest, shown in the time series,
/// and reported apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Warmup {
    /// Requests intended in the run's first `seconds`.
    Seconds {
        /// How long.
        seconds: f64,
    },
    /// The first `requests` of the schedule (by index).
    Requests {
        /// How many.
        requests: u64,
    },
}

impl Warmup {
    /// Whether the request with schedule `index`, intended `at_ns` after the start, is in
    /// the warm-up.
    pub fn covers(self, index: u64, at_ns: u64) -> bool {
        match self {
            Self::Seconds { seconds } => (at_ns as f64) < seconds * 1e9,
            Self::Requests { requests } => index < requests,
        }
    }
}

impl std::str::FromStr for Warmup {
    type Err = ModelError;

    /// A duration with its unit (`30s`: the requests intended in the first 30 seconds) or
    /// a count (`500`: the first 500 requests).
    fn from_str(s: &str) -> Result<Self, ModelError> {
        let t = s.trim();
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return match t.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Self::Requests { requests: n }),
                _ => Err(ModelError::invalid(
                    "warmup",
                    s,
                    "a count must be between 1 and 2^64-1",
                )),
            };
        }
        heisenbench_model::units::Seconds::parse_positive(t)
            .map(|d| Self::Seconds { seconds: d.get() })
            .map_err(|_| {
                ModelError::invalid(
                    "warmup",
                    s,
                    "write a duration (30s) or a number of requests (500)",
                )
            })
    }
}

/// What a command line says about a run, over a scenario file: one field for each flag of
/// `heisenbench run` that sets a [`RunConfig`] field, and the workload's
/// ([`WorkloadFlags`]). Each `None` leaves the scenario file's value and, past it, the
/// default ([`RunConfig::resolve`]); the rest are given. `Default` is a command line with
/// no flag.
///
/// [`WorkloadFlags`]: heisenbench_model::scenario::WorkloadFlags
#[derive(Debug, Clone)]
pub struct RunOverrides {
    /// Base URL of the server; without it, the embedded mock is started in this process.
    pub url: Option<String>,
    /// completions or chat.
    pub api: ApiKind,
    /// Ask for whole responses instead of streams.
    pub stream: bool,
    /// The model field of each request (default: the one model the server's /v1/models
    /// lists; the embedded mock's name without --url).
    pub model: Option<String>,
    /// Extra trusted certificates (PEM, e.g. a private CA) for an https:// --url.
    pub ca_cert: Option<std::path::PathBuf>,
    /// Do not verify the server's TLS certificate (the report says so).
    pub insecure: bool,
    /// Environment variable holding the API key (never printed or written).
    pub api_key_env: Option<String>,
    /// Per-request timeout from the actual send.
    pub timeout_s: Option<f64>,
    /// Requests one shard keeps in flight at most.
    pub max_in_flight_per_shard: Option<u32>,
    /// Shards (default: what `plan` says this load needs, capped at this machine's cores).
    pub shards: Option<u32>,
    /// What the prompts' words are.
    pub prompt_content: crate::openai::prompt::PromptContent,
    /// process or thread.
    pub shard_mode: ShardMode,
    /// Emulated client cost per received event (busy work on the shard's loop), e.g. 12us.
    pub client_cost_s: f64,
    /// Root seed of the schedule.
    pub seed: Option<u64>,
    /// Keep a row per request (`run --csv`).
    pub csv: bool,
    /// The bounds a good request meets (`--slo ttft=200ms,...`).
    pub slo: Option<Slo>,
    /// The first requests kept out of the statistics (`--warmup 30s` or `--warmup 500`).
    pub warmup: Option<Warmup>,
    /// `--server-metrics` as given (none: `auto`), checked with the interval by
    /// [`ServerMetrics::from_flags`].
    pub server_metrics: Vec<String>,
    /// `--scrape-interval`, seconds (None: not given, [`ServerMetrics::DEFAULT_INTERVAL_S`]).
    pub scrape_interval_s: Option<f64>,
    /// The workload's overrides.
    pub workload: heisenbench_model::scenario::WorkloadFlags,
}

impl Default for RunOverrides {
    /// No flag: the endpoint's completions, streamed, from shard processes, with no
    /// emulated cost; the rest from the file or the defaults.
    fn default() -> Self {
        Self {
            url: None,
            api: ApiKind::Completions,
            stream: true,
            model: None,
            ca_cert: None,
            insecure: false,
            api_key_env: None,
            timeout_s: None,
            max_in_flight_per_shard: None,
            shards: None,
            prompt_content: crate::openai::prompt::PromptContent::Unique,
            shard_mode: ShardMode::Process,
            client_cost_s: 0.0,
            seed: None,
            csv: false,
            slo: None,
            warmup: None,
            server_metrics: Vec::new(),
            scrape_interval_s: None,
            workload: heisenbench_model::scenario::WorkloadFlags::default(),
        }
    }
}

/// The parts of a scenario file a live run reads (the server part is the simulator's).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunScenario {
    #[serde(default)]
    name: String,
    /// The simulator's server model: not a live run's business, but part of the file, and
    /// read as strictly as the simulator reads it (a misspelt field is refused by both).
    #[serde(default)]
    server: Option<heisenbench_model::server::ServerModel>,
    seed: Option<u64>,
    workload: Workload,
    client: Option<heisenbench_model::scenario::ClientModel>,
}

/// Why a run cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The scenario file is not a scenario.
    #[error("{0}")]
    Scenario(#[from] serde_json::Error),
    /// A value is out of range, or the flags contradict the file.
    #[error(transparent)]
    Invalid(#[from] ModelError),
}

impl RunConfig {
    /// The run a scenario file (its JSON text, if any) and the flags describe: flags over
    /// the file over the defaults (Poisson arrivals at 100 requests/s for 10 s, 320 prompt
    /// and 200 output tokens, seed 1, the name "live", one shard, the embedded mock's
    /// model). Also says whether the shard count was given (by a flag or the file's
    /// client), since a caller may size it itself otherwise.
    pub fn resolve(
        scenario_json: Option<&str>,
        flags: &RunOverrides,
    ) -> Result<(Checked, bool), ResolveError> {
        use heisenbench_model::scenario::{Arrivals, Lengths, Stop};
        let file: Option<RunScenario> = scenario_json.map(serde_json::from_str).transpose()?;
        if let Some(server) = file.as_ref().and_then(|f| f.server.as_ref()) {
            server.validate()?;
        }
        let mut workload = file.as_ref().map_or(
            Workload {
                arrivals: Arrivals::Poisson { rate_per_s: 100.0 },
                stop: Stop::Duration { seconds: 10.0 },
                input_tokens: Lengths::Fixed { tokens: 320 },
                output_tokens: Lengths::Fixed { tokens: 200 },
                prefix: None,
                dataset: None,
            },
            |f| f.workload.clone(),
        );
        workload.apply(&flags.workload)?;
        let client = file.as_ref().and_then(|f| f.client.clone());
        let shards = flags.shards.or(client.as_ref().map(|c| c.workers));
        let cfg = Self {
            name: file
                .as_ref()
                .map(|f| f.name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "live".into()),
            seed: flags
                .seed
                .or(file.as_ref().and_then(|f| f.seed))
                .unwrap_or(DEFAULT_SEED),
            workload,
            url: flags
                .url
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:0".into()),
            api: flags.api,
            stream: flags.stream,
            model: flags
                .model
                .clone()
                .unwrap_or_else(|| crate::mock::config::MockConfig::default().model),
            api_key_env: flags.api_key_env.clone(),
            timeout_s: flags
                .timeout_s
                .or(client.as_ref().and_then(|c| c.timeout_s)),
            max_in_flight_per_shard: flags
                .max_in_flight_per_shard
                .or(client.as_ref().and_then(|c| c.max_in_flight_per_worker)),
            shards: shards.unwrap_or(1),
            shard_mode: flags.shard_mode,
            client_cost_s: flags.client_cost_s,
            csv: flags.csv,
            ca_cert: flags.ca_cert.clone(),
            insecure: flags.insecure,
            prompts: crate::openai::prompt::Prompts::words().with_content(flags.prompt_content),
            slo: flags.slo,
            warmup: flags.warmup,
            in_flight_bound: None,
            server_metrics: ServerMetrics::from_flags(
                &flags.server_metrics,
                flags.scrape_interval_s,
            )?,
        };
        Ok((cfg.checked()?, shards.is_some()))
    }
}

/// A [`RunConfig`] that passed [`RunConfig::validate`]: what [`super::prepare::prepare`]
/// and [`super::run`] take, so a run is checked once, where it is made (from flags by
/// [`RunConfig::resolve`], from a file or code by [`RunConfig::checked`]). Read through
/// `Deref`; the few fields set afterwards have setters that check what they set.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked(RunConfig);

impl std::ops::Deref for Checked {
    type Target = RunConfig;
    fn deref(&self) -> &RunConfig {
        &self.0
    }
}

impl Checked {
    /// Points the run at another server (the embedded mock, once it listens).
    pub fn set_url(&mut self, url: String) -> Result<(), ModelError> {
        check_url(&url)?;
        self.0.url = url;
        Ok(())
    }

    /// Sets the shard count (a distributed run's N, a Kubernetes deployment's pods).
    pub fn set_shards(&mut self, shards: u32) -> Result<(), ModelError> {
        check_shards(shards)?;
        self.0.shards = shards;
        Ok(())
    }

    /// The config within, for the crate's own settling ([`super::prepare::prepare`], the
    /// in-flight bound) of what it derives from checked values.
    pub(crate) fn settle(&mut self) -> &mut RunConfig {
        &mut self.0
    }

    /// The config, no longer marked checked.
    pub fn into_inner(self) -> RunConfig {
        self.0
    }
}

fn check_url(url: &str) -> Result<(), ModelError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(ModelError::invalid(
            "url",
            url,
            "must start with http:// or https://",
        ))
    }
}

fn check_shards(shards: u32) -> Result<(), ModelError> {
    if shards == 0 || shards > heisenbench_model::limits::MAX_LOCAL_SHARDS {
        Err(ModelError::invalid(
            "shards",
            shards,
            "must be between 1 and 1,024 on one machine (more machines: --shard I/N)",
        ))
    } else {
        Ok(())
    }
}

impl RunConfig {
    /// A streamed-completions run of `workload` against `url` asking for `model`, with
    /// everything else at its plain setting (seed 1, one thread shard, the default
    /// timeout, no emulated cost, no CSV, prompts of words, TLS verified); callers change
    /// the fields they care about.
    pub fn streaming(name: &str, workload: Workload, url: &str, model: &str) -> Self {
        Self {
            name: name.into(),
            seed: DEFAULT_SEED,
            workload,
            url: url.into(),
            api: ApiKind::Completions,
            stream: true,
            model: model.into(),
            api_key_env: None,
            timeout_s: None,
            max_in_flight_per_shard: None,
            shards: 1,
            shard_mode: ShardMode::Thread,
            client_cost_s: 0.0,
            csv: false,
            ca_cert: None,
            insecure: false,
            prompts: crate::openai::prompt::Prompts::words(),
            slo: None,
            warmup: None,
            in_flight_bound: None,
            server_metrics: ServerMetrics::default(),
        }
    }

    /// Stage `index` (from 0) of a live latency profile (`heisenbench sweep --url`):
    /// Poisson arrivals at `rate_per_s` for `seconds`, fixed prompt and output lengths
    /// (`tokens`), streamed to `url` on `workers` shards, and a 60 s timeout so that a
    /// saturated server ends a stage instead of holding it.
    pub fn profile_stage(
        index: usize,
        rate_per_s: f64,
        seconds: f64,
        tokens: (u32, u32),
        url: &str,
        model: &str,
        shards: u32,
    ) -> Self {
        let workload = Workload {
            arrivals: Arrivals::Poisson { rate_per_s },
            stop: Stop::Duration { seconds },
            input_tokens: Lengths::Fixed { tokens: tokens.0 },
            output_tokens: Lengths::Fixed { tokens: tokens.1 },
            prefix: None,
            dataset: None,
        };
        Self {
            timeout_s: Some(60.0),
            shards,
            ..Self::streaming(&format!("sweep stage {}", index + 1), workload, url, model)
        }
    }

    /// Checks that nothing is left to read before the run: a dataset's prompts drawn.
    pub fn check_read(&self) -> Result<(), ModelError> {
        match &self.workload.dataset {
            Some(d) if d.entries.is_empty() => Err(ModelError::Invalid {
                name: "workload.dataset",
                value: d.path.display().to_string(),
                reason: "was not read: a run needs its drawn prompts",
            }),
            _ => Ok(()),
        }
    }

    /// This config, checked once ([`RunConfig::validate`]) and marked so.
    pub fn checked(self) -> Result<Checked, ModelError> {
        self.validate()?;
        Ok(Checked(self))
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.workload.validate()?;
        let bad = |name, value: String, reason| {
            Err(ModelError::Invalid {
                name,
                value,
                reason,
            })
        };
        check_url(&self.url)?;
        // Certificates are an https:// server's; the embedded mock and an http:// --url
        // have none, and a report would then claim a verification that never happened.
        if !self.url.starts_with("https://") {
            let reason = "only an https:// --url has a certificate to check";
            if self.insecure {
                return bad("--insecure", "a plain-HTTP server".into(), reason);
            }
            if self.ca_cert.is_some() {
                return bad("--ca-cert", "a plain-HTTP server".into(), reason);
            }
        }
        check_shards(self.shards)?;
        self.server_metrics.validate()?;
        if self.workload.turns() > 1 && !self.stream {
            return bad(
                "--turns",
                self.workload.turns().to_string(),
                "conversations re-send the streamed replies: drop --no-stream",
            );
        }
        if let Some(d) = &self.workload.dataset {
            if d.entries.len() != self.prompts.dataset.len() {
                return bad(
                    "workload.dataset",
                    d.path.display().to_string(),
                    "its drawn lengths and prompts differ in number",
                );
            }
            if self.prompts.content == crate::openai::prompt::PromptContent::Repeated {
                return bad(
                    "--prompts",
                    "repeated".into(),
                    "makes prompts of its own: a dataset gives them",
                );
            }
        }
        if self.in_flight_bound == Some(0) {
            return bad("in_flight_bound", "0".into(), "must be >= 1");
        }
        if self.max_in_flight_per_shard == Some(0) {
            return bad("max_in_flight", "0".into(), "must be >= 1");
        }
        if let Some(t) = self.timeout_s {
            if t == 0.0 {
                return bad("timeout", t.to_string(), "must be > 0");
            }
            if let Some(reason) = duration_problem(t) {
                return bad("timeout", format!("{t:e}"), reason);
            }
        }
        if let Some(reason) = duration_problem(self.client_cost_s) {
            return bad("client_cost", format!("{:e}", self.client_cost_s), reason);
        }
        if self.model.is_empty() {
            return bad("model", String::new(), "must not be empty");
        }
        if let Some(slo) = &self.slo {
            slo.validate()?;
        }
        match self.warmup {
            Some(Warmup::Seconds { seconds })
                if duration_problem(seconds).is_some() || seconds <= 0.0 =>
            {
                return bad(
                    "warmup",
                    format!("{seconds:e}"),
                    "must be a duration greater than zero",
                );
            }
            Some(Warmup::Requests { requests: 0 }) => {
                return bad("warmup", "0".into(), "must be at least one request");
            }
            _ => {}
        }
        Ok(())
    }

    /// This config as reports show it: credentials in the URL replaced by `***`.
    pub fn redacted(&self) -> RunConfig {
        let mut server_metrics = self.server_metrics.clone();
        if let crate::scrape::Targets::Urls(u) = &mut server_metrics.targets {
            for url in u.iter_mut() {
                *url = redact_url(url);
            }
        }
        RunConfig {
            url: redact_url(&self.url),
            server_metrics,
            ..self.clone()
        }
    }

    /// The per-request timeout in force, seconds.
    pub fn timeout(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    /// The server as its HTTP clients see it.
    pub fn server(&self) -> Server<'_> {
        Server {
            url: &self.url,
            ca_cert: self.ca_cert.as_deref(),
            insecure: self.insecure,
            api_key_env: self.api_key_env.as_deref(),
        }
    }

    /// The endpoint URL ([`crate::net::client::at_path`]).
    pub fn endpoint(&self) -> String {
        crate::net::client::at_path(&self.url, self.api.path())
    }

    /// A fingerprint of the schedule (workload and seed) and shard count: shard results
    /// merge only with results of the same plan.
    pub fn plan_hash(&self) -> String {
        let text =
            serde_json::to_string(&(&self.workload, self.seed, self.shards)).unwrap_or_default();
        let mut h = Fnv64::default();
        h.write(text.as_bytes());
        format!("{:016x}", h.finish())
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms (unlike std's SipHash keys).
struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config is checked where it is made; what is set on it afterwards is checked by
    /// its setter, and an invalid config never becomes a `Checked`.
    #[test]
    fn a_checked_config_stays_valid() {
        let (mut cfg, _) = RunConfig::resolve(None, &RunOverrides::default()).unwrap();
        assert!(cfg.set_url("ftp://127.0.0.1:9".into()).is_err());
        assert!(cfg.set_shards(0).is_err());
        assert!(
            cfg.set_shards(heisenbench_model::limits::MAX_LOCAL_SHARDS + 1)
                .is_err()
        );
        assert_eq!(
            cfg.url, "http://127.0.0.1:0",
            "a refused setter changes nothing"
        );
        cfg.set_url("http://127.0.0.1:9".into()).unwrap();
        cfg.set_shards(3).unwrap();
        assert_eq!((cfg.url.as_str(), cfg.shards), ("http://127.0.0.1:9", 3));
        assert!(cfg.validate().is_ok());
        let bad = RunConfig {
            model: String::new(),
            ..cfg.into_inner()
        };
        assert!(bad.checked().is_err());
    }

    /// `--insecure` and `--ca-cert` are refused where there is no certificate: the embedded
    /// mock and an http:// server; an https:// one takes them.
    #[test]
    fn certificates_are_an_https_servers() {
        let with = |url: Option<&str>, insecure: bool, ca: bool| {
            RunConfig::resolve(
                None,
                &RunOverrides {
                    url: url.map(String::from),
                    insecure,
                    ca_cert: ca.then(|| "ca.pem".into()),
                    ..RunOverrides::default()
                },
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        for url in [None, Some("http://10.0.0.1:8000")] {
            let e = with(url, true, false).unwrap_err();
            assert!(e.contains("--insecure") && e.contains("https://"), "{e}");
            let e = with(url, false, true).unwrap_err();
            assert!(e.contains("--ca-cert") && e.contains("https://"), "{e}");
            assert!(with(url, false, false).is_ok());
        }
        assert!(with(Some("https://10.0.0.1:8000"), true, false).is_ok());
        assert!(with(Some("https://10.0.0.1:8000"), false, true).is_ok());
    }

    /// An interval between scrapes is refused where nothing is scraped (`off`), taken
    /// beside `auto` or URLs, and 1 s where none is given; out of range it is refused.
    #[test]
    fn a_scrape_interval_needs_something_to_scrape() {
        let off = ["off".to_string()];
        let e = ServerMetrics::from_flags(&off, Some(0.1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("scrape-interval") && e.contains("--server-metrics off"),
            "{e}"
        );
        assert!(ServerMetrics::from_flags(&off, None).is_ok());
        let auto = ServerMetrics::from_flags(&[], Some(0.1)).unwrap();
        assert_eq!(auto.interval_s, 0.1);
        let url = ["http://10.0.0.1:8000/metrics".to_string()];
        assert_eq!(
            ServerMetrics::from_flags(&url, None).unwrap().interval_s,
            ServerMetrics::DEFAULT_INTERVAL_S
        );
        assert!(ServerMetrics::from_flags(&url, Some(0.001)).is_err());
    }

    /// No flag: a streamed completions run by process shards, nothing else set.
    #[test]
    fn the_flags_defaults() {
        let f = RunOverrides::default();
        assert!(f.stream && !f.csv && !f.insecure);
        assert_eq!(
            (f.api, f.shard_mode),
            (ApiKind::Completions, ShardMode::Process)
        );
        assert_eq!(f.client_cost_s, 0.0);
        assert!(f.url.is_none() && f.timeout_s.is_none() && f.shards.is_none());
    }

    /// Flags over the scenario file over the defaults; the file's client gives the shard
    /// count only when no flag does, and says it was given.
    #[test]
    fn flags_over_file_over_defaults() {
        use heisenbench_model::scenario::{Arrivals, Lengths, Stop};
        let (cfg, given) = RunConfig::resolve(None, &RunOverrides::default()).unwrap();
        assert_eq!(
            cfg.workload.arrivals,
            Arrivals::Poisson { rate_per_s: 100.0 }
        );
        assert_eq!(cfg.workload.stop, Stop::Duration { seconds: 10.0 });
        assert_eq!(cfg.workload.input_tokens, Lengths::Fixed { tokens: 320 });
        assert_eq!((cfg.seed, cfg.shards, cfg.name.as_str()), (1, 1, "live"));
        assert!(!given);
        let file = r#"{"name": "f", "seed": 7,
            "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 50},
                "stop": {"kind": "count", "requests": 9},
                "input_tokens": {"kind": "fixed", "tokens": 4},
                "output_tokens": {"kind": "fixed", "tokens": 5}},
            "client": {"workers": 3, "costs": {"chunk": {"kind": "deterministic", "mean_s": 0.0}}}}"#;
        let (cfg, given) = RunConfig::resolve(Some(file), &RunOverrides::default()).unwrap();
        assert_eq!((cfg.seed, cfg.shards, cfg.name.as_str()), (7, 3, "f"));
        assert_eq!(cfg.workload.stop, Stop::Count { requests: 9 });
        assert!(given);
        let flags = RunOverrides {
            seed: Some(2),
            shards: Some(5),
            workload: heisenbench_model::scenario::WorkloadFlags {
                qps: Some(80.0),
                ..Default::default()
            },
            ..RunOverrides::default()
        };
        let (cfg, _) = RunConfig::resolve(Some(file), &flags).unwrap();
        assert_eq!((cfg.seed, cfg.shards), (2, 5));
        assert_eq!(
            cfg.workload.arrivals,
            Arrivals::Poisson { rate_per_s: 80.0 }
        );
        assert!(matches!(
            RunConfig::resolve(Some("{}"), &RunOverrides::default()),
            Err(ResolveError::Scenario(_))
        ));
        // The simulator's server part is read as strictly as the simulator reads it.
        let file = |server: &str| {
            format!(
                r#"{{"workload": {{"arrivals": {{"kind": "poisson", "rate_per_s": 5}},
                    "stop": {{"kind": "count", "requests": 3}},
                    "input_tokens": {{"kind": "fixed", "tokens": 4}},
                    "output_tokens": {{"kind": "fixed", "tokens": 4}}}},
                    "server": {server}}}"#
            )
        };
        let misspelt = RunConfig::resolve(
            Some(&file(r#"{"max_num_seq": 4}"#)),
            &RunOverrides::default(),
        );
        assert!(
            matches!(&misspelt, Err(ResolveError::Scenario(e)) if e.to_string().contains("max_num_seq")),
            "{:?}",
            misspelt.err()
        );
        assert!(matches!(
            RunConfig::resolve(
                Some(&file(r#"{"max_num_seqs": 0}"#)),
                &RunOverrides::default()
            ),
            Err(ResolveError::Invalid(_))
        ));
        assert!(
            RunConfig::resolve(
                Some(&file(r#"{"max_num_seqs": 4}"#)),
                &RunOverrides::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn the_endpoint_keeps_the_base_query_at_the_end() {
        use crate::net::client::at_path;
        for (base, url) in [
            ("http://h:1", "http://h:1/v1/completions"),
            ("http://h:1/v1/", "http://h:1/v1/completions"),
            (
                "https://h/openai/v1?api-version=2024-06",
                "https://h/openai/v1/completions?api-version=2024-06",
            ),
            ("http://h/#f", "http://h/v1/completions#f"),
        ] {
            assert_eq!(at_path(base, "/v1/completions"), url, "{base}");
        }
    }

    #[test]
    fn credentials_never_reach_a_report() {
        for (url, shown) in [
            (
                "http://user:password@host:8000/v1",
                "http://***@host:8000/v1",
            ),
            ("https://tok@h", "https://***@h"),
            ("http://a:b@c@h/x@y", "http://***@h/x@y"),
            ("http://h:1/v1?q=a@b", "http://h:1/v1?q=***"),
            (
                "https://u:p@h/openai?api-version=2024&api-key=sk-9#top",
                "https://***@h/openai?api-version=***&api-key=***#top",
            ),
            ("http://h/v1?sk-bare&", "http://h/v1?***&"),
            ("http://127.0.0.1:9", "http://127.0.0.1:9"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
