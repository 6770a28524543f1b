//! The mock server's configuration, with llm-d-inference-sim's flag names and defaults.

use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use heisenbench_model::ModelError;
use heisenbench_model::units::Seconds;
use serde::{Deserialize, Serialize};

/// How response text is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Words of the prompt, in order (cycled when more tokens are needed).
    Echo,
    /// Seeded random words from a fixed vocabulary.
    #[default]
    Random,
}

impl FromStr for Mode {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "echo" => Ok(Self::Echo),
            "random" => Ok(Self::Random),
            _ => Err(ModelError::Invalid {
                name: "mode",
                value: s.into(),
                reason: "expected echo or random",
            }),
        }
    }
}

/// An injectable failure and the OpenAI-style error it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureType {
    /// 429, `rate_limit_exceeded`.
    RateLimit,
    /// 401, `invalid_api_key`.
    InvalidApiKey,
    /// 400, `context_length_exceeded`.
    ContextLength,
    /// 503, `server_error`.
    ServerError,
    /// 400, `invalid_request_error`.
    InvalidRequest,
    /// 404, `model_not_found`.
    ModelNotFound,
}

impl FailureType {
    /// All types, the default set.
    pub const ALL: [FailureType; 6] = [
        Self::RateLimit,
        Self::InvalidApiKey,
        Self::ContextLength,
        Self::ServerError,
        Self::InvalidRequest,
        Self::ModelNotFound,
    ];

    /// HTTP status.
    pub fn status(self) -> u16 {
        match self {
            Self::RateLimit => 429,
            Self::InvalidApiKey => 401,
            Self::ContextLength | Self::InvalidRequest => 400,
            Self::ServerError => 503,
            Self::ModelNotFound => 404,
        }
    }

    /// OpenAI error `type` and `code`, and a message.
    pub fn error(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::RateLimit => (
                "rate_limit_exceeded",
                "rate_limit_exceeded",
                "Rate limit reached (injected failure)",
            ),
            Self::InvalidApiKey => (
                "invalid_request_error",
                "invalid_api_key",
                "Incorrect API key provided (injected failure)",
            ),
            Self::ContextLength => (
                "invalid_request_error",
                "context_length_exceeded",
                "This model's maximum context length was exceeded (injected failure)",
            ),
            Self::ServerError => (
                "server_error",
                "server_error",
                "The server had an error processing the request (injected failure)",
            ),
            Self::InvalidRequest => (
                "invalid_request_error",
                "invalid_request_error",
                "Invalid request (injected failure)",
            ),
            Self::ModelNotFound => (
                "invalid_request_error",
                "model_not_found",
                "The model does not exist (injected failure)",
            ),
        }
    }
}

impl FromStr for FailureType {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        Ok(match s {
            "rate_limit" => Self::RateLimit,
            "invalid_api_key" => Self::InvalidApiKey,
            "context_length" => Self::ContextLength,
            "server_error" => Self::ServerError,
            "invalid_request" => Self::InvalidRequest,
            "model_not_found" => Self::ModelNotFound,
            _ => {
                return Err(ModelError::Invalid {
                    name: "failure type",
                    value: s.into(),
                    reason: "expected rate_limit, invalid_api_key, context_length, server_error, invalid_request or model_not_found",
                });
            }
        })
    }
}

/// Everything the mock needs. Its names and defaults follow llm-d-inference-sim's flags
/// (`heisenbench mock` has one flag a field); [`MockConfig::default`] is what the mock
/// serves with no flag. Sub-millisecond latencies are kept exact, unlike
/// llm-d-inference-sim's whole milliseconds ([`parse_latency`] reads them). Every streamed
/// chunk carries "heisenbench_sent_ns": CLOCK_MONOTONIC nanoseconds when it was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MockConfig {
    /// Address to bind.
    pub host: IpAddr,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// The served model name.
    pub model: String,
    /// Time to first token.
    pub time_to_first_token: Duration,
    /// Standard deviation of the time to first token (normal jitter, clamped at zero).
    pub time_to_first_token_std_dev: Duration,
    /// Time between consecutive tokens.
    pub inter_token_latency: Duration,
    /// Standard deviation of the inter-token latency.
    pub inter_token_latency_std_dev: Duration,
    /// Fixed prefill time; with --prefill-time-per-token it replaces the TTFT when set.
    pub prefill_overhead: Duration,
    /// Prefill time per prompt token.
    pub prefill_time_per_token: Duration,
    /// Concurrent sequences (batch slots).
    pub max_num_seqs: u32,
    /// Requests that may wait for a slot; beyond, 429.
    pub max_waiting_queue_length: u32,
    /// Slow-down factor F at full load: latencies scale by 1 + (F-1)(running-1)/(max_num_seqs-1).
    pub time_factor_under_load: f64,
    /// Largest prompt + max_tokens; beyond, 400.
    pub max_model_len: u32,
    /// Response text: echo (the prompt) or random.
    pub mode: Mode,
    /// Seed of the jitter, the random text and the failure draws.
    pub seed: u64,
    /// Percentage (0-100) of requests answered with an injected failure.
    pub failure_injection_rate: f64,
    /// Failures to inject, comma-separated, drawn uniformly: rate_limit, invalid_api_key,
    /// context_length, server_error, invalid_request, model_not_found (default: all).
    pub failure_types: Vec<FailureType>,
    /// Runtime threads (1: the mock stays on one core).
    pub threads: usize,
    /// Close a connection that sends no whole request head for this long after it opened
    /// or after its previous response (idle keep-alive included); a body that has not
    /// arrived whole this long after its head is answered 408 and its connection closed.
    pub header_timeout: Duration,
    /// Keep a prefix cache ([`heisenbench_model::prefix_cache`]): prompt blocks seen before
    /// skip the prefill time per token, and usage reports them as
    /// `prompt_tokens_details.cached_tokens`.
    #[serde(default)]
    pub enable_kvcache: bool,
    /// The cache's capacity, blocks.
    #[serde(default = "default_kv_cache_size")]
    pub kv_cache_size: u32,
    /// Tokens (words) per cache block.
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    /// Release each response's first token only at the next multiple of this period since
    /// the server started (zero: off), as an engine's step hands every running sequence
    /// its token at once: the responses that fall due within one period reach the client
    /// together. The latency law ([`MockConfig::law`]) leaves it out; the server's stamps
    /// carry it.
    #[serde(default)]
    pub release_every: Duration,
}

/// llm-d-inference-sim's default cache capacity, blocks.
fn default_kv_cache_size() -> u32 {
    1024
}

/// llm-d-inference-sim's (and vLLM's) default block size, tokens.
fn default_block_size() -> u32 {
    16
}

/// The mock's default [`MockConfig::header_timeout`].
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(60);
/// Most runtime threads the mock starts.
pub const MAX_THREADS: usize = 256;

impl Default for MockConfig {
    /// What `heisenbench mock` serves with no flag: llm-d-inference-sim's defaults (zero
    /// latency, 5 slots, 1,000 waiting, 1,024 tokens of context, random text), on
    /// 127.0.0.1:8000.
    fn default() -> Self {
        Self {
            host: IpAddr::from([127, 0, 0, 1]),
            port: 8000,
            model: "heisenbench-mock".into(),
            time_to_first_token: Duration::ZERO,
            time_to_first_token_std_dev: Duration::ZERO,
            inter_token_latency: Duration::ZERO,
            inter_token_latency_std_dev: Duration::ZERO,
            prefill_overhead: Duration::ZERO,
            prefill_time_per_token: Duration::ZERO,
            max_num_seqs: 5,
            max_waiting_queue_length: 1000,
            time_factor_under_load: 1.0,
            max_model_len: 1024,
            mode: Mode::Random,
            seed: 0,
            failure_injection_rate: 0.0,
            failure_types: FailureType::ALL.to_vec(),
            threads: 1,
            header_timeout: HEADER_TIMEOUT,
            enable_kvcache: false,
            kv_cache_size: default_kv_cache_size(),
            block_size: default_block_size(),
            release_every: Duration::ZERO,
        }
    }
}

impl MockConfig {
    /// The mock a run starts in its own process (`run` without --url, `calibrate`,
    /// `reproduce`): zero latency, any free port, and batch and context limits no run
    /// reaches, so every delay measured above it is the client's.
    pub fn embedded() -> Self {
        Self {
            port: 0,
            max_num_seqs: 1_000_000,
            max_model_len: 10_000_000,
            ..Self::default()
        }
    }

    /// Checks the ranges the flags cannot.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.enable_kvcache {
            self.prefix_cache().validate()?;
        }
        if self.max_num_seqs == 0 {
            return Err(ModelError::Invalid {
                name: "--max-num-seqs",
                value: "0".into(),
                reason: "must be >= 1",
            });
        }
        if !(self.time_factor_under_load.is_finite()
            && (1.0..=heisenbench_model::limits::MAX_LOAD_FACTOR)
                .contains(&self.time_factor_under_load))
        {
            return Err(ModelError::Invalid {
                name: "--time-factor-under-load",
                value: format!("{:e}", self.time_factor_under_load),
                reason: "must be between 1 and 1e6",
            });
        }
        if !(0.0..=100.0).contains(&self.failure_injection_rate) {
            return Err(ModelError::Invalid {
                name: "--failure-injection-rate",
                value: self.failure_injection_rate.to_string(),
                reason: "must be a percentage between 0 and 100",
            });
        }
        if self.failure_types.is_empty() {
            return Err(ModelError::Invalid {
                name: "--failure-types",
                value: "[]".into(),
                reason: "name at least one type",
            });
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(ModelError::Invalid {
                name: "--threads",
                value: self.threads.to_string(),
                reason: "must be between 1 and 256",
            });
        }
        if self.max_model_len == 0 {
            return Err(ModelError::Invalid {
                name: "--max-model-len",
                value: "0".into(),
                reason: "must be >= 1 token",
            });
        }
        if self.header_timeout.is_zero() {
            return Err(ModelError::Invalid {
                name: "--header-timeout",
                value: "0".into(),
                reason: "must be > 0",
            });
        }
        if self.model.is_empty() {
            return Err(ModelError::Invalid {
                name: "--model",
                value: "".into(),
                reason: "must not be empty",
            });
        }
        Ok(())
    }

    /// The prefix cache's shape (in force with [`MockConfig::enable_kvcache`]).
    pub fn prefix_cache(&self) -> heisenbench_model::prefix_cache::PrefixCacheLaw {
        heisenbench_model::prefix_cache::PrefixCacheLaw {
            block_tokens: self.block_size,
            capacity_blocks: self.kv_cache_size,
        }
    }

    /// The latency law these settings give (`heisenbench_model::server`, which the
    /// simulator's server follows too).
    pub fn law(&self) -> heisenbench_model::server::ServerModel {
        heisenbench_model::server::ServerModel {
            time_to_first_token_s: self.time_to_first_token.as_secs_f64(),
            time_to_first_token_std_dev_s: self.time_to_first_token_std_dev.as_secs_f64(),
            prefill_overhead_s: self.prefill_overhead.as_secs_f64(),
            prefill_time_per_token_s: self.prefill_time_per_token.as_secs_f64(),
            inter_token_latency_s: self.inter_token_latency.as_secs_f64(),
            inter_token_latency_std_dev_s: self.inter_token_latency_std_dev.as_secs_f64(),
            max_num_seqs: self.max_num_seqs,
            max_waiting_queue_length: self.max_waiting_queue_length,
            time_factor_under_load: self.time_factor_under_load,
            prefix_cache: self.enable_kvcache.then(|| self.prefix_cache()),
        }
    }

    /// Whether every latency is zero: responses are then written in one piece.
    pub fn is_instant(&self) -> bool {
        [
            self.time_to_first_token,
            self.time_to_first_token_std_dev,
            self.inter_token_latency,
            self.inter_token_latency_std_dev,
            self.prefill_overhead,
            self.prefill_time_per_token,
        ]
        .iter()
        .all(|d| d.is_zero())
    }
}

/// A latency flag: a bare integer is milliseconds (as older llm-d-inference-sim versions
/// took it), otherwise a duration with its unit (`250us`, `2ms`, `1s`). Sub-millisecond
/// values are kept exact.
pub fn parse_latency(s: &str) -> Result<Duration, ModelError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(ModelError::Invalid {
            name: "duration",
            value: s.into(),
            reason: "must not be negative",
        });
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let ms: u64 = t.parse().map_err(|_| ModelError::Invalid {
            name: "duration",
            value: s.into(),
            reason: "too large",
        })?;
        return Ok(Duration::from_millis(ms));
    }
    let secs = Seconds::parse(t)?;
    Ok(Duration::from_secs_f64(secs.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-process mock answers at once, on a free port, and is never the bottleneck:
    /// its limits are beyond any load a run or a calibration offers.
    #[test]
    fn the_embedded_mock_is_instant_and_unbounded() {
        let m = MockConfig::embedded();
        m.validate().unwrap();
        assert!(m.is_instant());
        assert_eq!(m.port, 0);
        assert!(m.max_num_seqs >= 1_000_000 && m.max_model_len >= 1_000_000);
    }

    /// The defaults come from the flags: llm-d-inference-sim's values, every failure type,
    /// the page server's head timeout.
    #[test]
    fn defaults_are_the_flags_defaults() {
        let c = MockConfig::default();
        assert_eq!((c.host, c.port), (IpAddr::from([127, 0, 0, 1]), 8000));
        assert_eq!((c.max_num_seqs, c.max_waiting_queue_length), (5, 1000));
        assert_eq!((c.max_model_len, c.threads, c.seed), (1024, 1, 0));
        assert_eq!(c.failure_types, FailureType::ALL.to_vec());
        assert_eq!((c.mode, c.time_factor_under_load), (Mode::Random, 1.0));
        assert_eq!(c.header_timeout, HEADER_TIMEOUT);
        assert_eq!(c.time_to_first_token, Duration::ZERO);
        assert_eq!(c.model, "heisenbench-mock");
        c.validate().unwrap();
    }

    #[test]
    fn latencies_take_bare_milliseconds_and_units() {
        assert_eq!(parse_latency("20").unwrap(), Duration::from_millis(20));
        assert_eq!(parse_latency("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_latency("2ms").unwrap(), Duration::from_millis(2));
        assert_eq!(parse_latency("1s").unwrap(), Duration::from_secs(1));
        for bad in ["-5", "-5ms", "abc", "", "1.5"] {
            assert!(parse_latency(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn failure_types_parse() {
        assert_eq!("rate_limit".parse::<FailureType>().unwrap().status(), 429);
        assert!("teapot".parse::<FailureType>().is_err());
    }
}
