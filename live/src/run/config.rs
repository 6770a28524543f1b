//! What a live run needs: the shared workload plus the HTTP side.

use std::hash::Hasher;

use heisenbench_model::ModelError;
use heisenbench_model::limits::duration_problem;
use heisenbench_model::scenario::Workload;
use serde::{Deserialize, Serialize};

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
    /// Shards.
    pub workers: u32,
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
    pub prompts: crate::prompt::Prompts,
}

impl RunConfig {
    /// A streamed-completions run of `workload` against `url` asking for `model`, with
    /// everything else at its plain setting (seed 1, one thread shard, the default
    /// timeout, no emulated cost, no CSV, prompts of words, TLS verified); callers change
    /// the fields they care about.
    pub fn streaming(name: &str, workload: Workload, url: &str, model: &str) -> Self {
        Self {
            name: name.into(),
            seed: 1,
            workload,
            url: url.into(),
            api: ApiKind::Completions,
            stream: true,
            model: model.into(),
            api_key_env: None,
            timeout_s: None,
            max_in_flight_per_shard: None,
            workers: 1,
            shard_mode: ShardMode::Thread,
            client_cost_s: 0.0,
            csv: false,
            ca_cert: None,
            insecure: false,
            prompts: crate::prompt::Prompts::words(),
        }
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
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return bad(
                "url",
                self.url.clone(),
                "must start with http:// or https://",
            );
        }
        if self.workers == 0 || self.workers > heisenbench_model::limits::MAX_LOCAL_SHARDS {
            return bad(
                "workers",
                self.workers.to_string(),
                "must be between 1 and 1,024 on one machine (more machines: --shard I/N)",
            );
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
        Ok(())
    }

    /// This config as reports show it: credentials in the URL replaced by `***`.
    pub fn redacted(&self) -> RunConfig {
        RunConfig {
            url: redact_url(&self.url),
            ..self.clone()
        }
    }

    /// The per-request timeout in force, seconds.
    pub fn timeout(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        let base = self.url.trim_end_matches('/');
        let path = super::http::path(self.api);
        // A base given with its /v1 is accepted too.
        let base = base.strip_suffix("/v1").unwrap_or(base);
        format!("{base}{path}")
    }

    /// A fingerprint of the schedule (workload and seed) and shard count: shard results
    /// merge only with results of the same plan.
    pub fn plan_hash(&self) -> String {
        let text =
            serde_json::to_string(&(&self.workload, self.seed, self.workers)).unwrap_or_default();
        let mut h = Fnv64::default();
        h.write(text.as_bytes());
        format!("{:016x}", h.finish())
    }
}

/// `url` with any `user:password@` replaced by `***@`, for reports and logs.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end], &rest[at..]),
        None => url.to_string(),
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

    #[test]
    fn credentials_never_reach_a_report() {
        for (url, shown) in [
            (
                "http://user:password@host:8000/v1",
                "http://***@host:8000/v1",
            ),
            ("https://tok@h", "https://***@h"),
            ("http://a:b@c@h/x@y", "http://***@h/x@y"),
            ("http://h:1/v1?q=a@b", "http://h:1/v1?q=a@b"),
            ("http://127.0.0.1:9", "http://127.0.0.1:9"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
