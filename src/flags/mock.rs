//! The flags of `heisenbench mock`: one per field of the mock's config.

use std::net::IpAddr;
use std::time::Duration;

use heisenbench_live::mock::config::{FailureType, MockConfig, Mode, parse_latency};

/// `heisenbench mock`'s flags (and `audit`'s server), whose names and defaults follow
/// llm-d-inference-sim. Latencies take a bare integer as milliseconds (as older
/// llm-d-inference-sim versions did) or a duration with a unit (250us, 2ms, 1s); unlike
/// llm-d-inference-sim, sub-millisecond latencies are kept exact instead of being truncated
/// to whole milliseconds. Every streamed chunk carries "heisenbench_sent_ns":
/// CLOCK_MONOTONIC nanoseconds when it was sent.
#[derive(Debug, Clone, clap::Args)]
pub struct MockFlags {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// The served model name.
    #[arg(long, default_value = "heisenbench-mock")]
    pub model: String,
    /// Time to first token.
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub time_to_first_token: Duration,
    /// Standard deviation of the time to first token (normal jitter, clamped at zero).
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub time_to_first_token_std_dev: Duration,
    /// Time between consecutive tokens.
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub inter_token_latency: Duration,
    /// Standard deviation of the inter-token latency.
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub inter_token_latency_std_dev: Duration,
    /// Fixed prefill time; with --prefill-time-per-token it replaces the TTFT when set.
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub prefill_overhead: Duration,
    /// Prefill time per prompt token.
    #[arg(long, default_value = "0", value_parser = parse_latency, allow_hyphen_values = true)]
    pub prefill_time_per_token: Duration,
    /// Concurrent sequences (batch slots).
    #[arg(long, default_value_t = 5)]
    pub max_num_seqs: u32,
    /// Requests that may wait for a slot; beyond, 429.
    #[arg(long, default_value_t = 1000)]
    pub max_waiting_queue_length: u32,
    /// Slow-down factor F at full load: latencies scale by 1 + (F-1)(running-1)/(max_num_seqs-1).
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub time_factor_under_load: f64,
    /// Largest prompt + max_tokens; beyond, 400.
    #[arg(long, default_value_t = 1024)]
    pub max_model_len: u32,
    /// Response text: echo (the prompt) or random.
    #[arg(long, default_value = "random")]
    pub mode: Mode,
    /// Seed of the jitter, the random text and the failure draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Percentage (0-100) of requests answered with an injected failure.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub failure_injection_rate: f64,
    /// Failures to inject, comma-separated, drawn uniformly: rate_limit, invalid_api_key,
    /// context_length, server_error, invalid_request, model_not_found (default: all).
    #[arg(
        long,
        value_delimiter = ',',
        hide_default_value = true,
        default_value = "rate_limit,invalid_api_key,context_length,server_error,invalid_request,model_not_found"
    )]
    pub failure_types: Vec<FailureType>,
    /// Runtime threads (1: the mock stays on one core).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Close a connection that sends no whole request head for this long after it opened
    /// or after its previous response (idle keep-alive included); a body that has not
    /// arrived whole this long after its head is answered 408 and its connection closed.
    #[arg(long, default_value = "60s", value_parser = parse_latency)]
    pub header_timeout: Duration,
    /// Keep a prefix cache: prompt blocks seen before skip the prefill time per token, and
    /// usage reports them as prompt_tokens_details.cached_tokens (`--enable-kvcache` or
    /// `--enable-kvcache true`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_kvcache: bool,
    /// The prefix cache's capacity, blocks.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_cache_size: u32,
    /// Tokens (words) per prefix-cache block.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub block_size: u32,
    /// Release each response's first token only at the next multiple of this period since
    /// the mock started (0: off): the responses due within one period leave together, as
    /// an engine's step hands every running sequence its token at once.
    #[arg(long, default_value = "0", value_parser = parse_latency)]
    pub release_every: Duration,
}

impl From<MockFlags> for MockConfig {
    fn from(f: MockFlags) -> Self {
        Self {
            host: f.host,
            port: f.port,
            model: f.model,
            time_to_first_token: f.time_to_first_token,
            time_to_first_token_std_dev: f.time_to_first_token_std_dev,
            inter_token_latency: f.inter_token_latency,
            inter_token_latency_std_dev: f.inter_token_latency_std_dev,
            prefill_overhead: f.prefill_overhead,
            prefill_time_per_token: f.prefill_time_per_token,
            max_num_seqs: f.max_num_seqs,
            max_waiting_queue_length: f.max_waiting_queue_length,
            time_factor_under_load: f.time_factor_under_load,
            max_model_len: f.max_model_len,
            mode: f.mode,
            seed: f.seed,
            failure_injection_rate: f.failure_injection_rate,
            failure_types: f.failure_types,
            threads: f.threads,
            header_timeout: f.header_timeout,
            enable_kvcache: f.enable_kvcache,
            kv_cache_size: f.kv_cache_size,
            block_size: f.block_size,
            release_every: f.release_every,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags' defaults are the config's: `heisenbench mock` with no flag serves what
    /// `MockConfig::default()` describes, and every flag lands in its own field.
    #[test]
    fn no_flag_is_the_default_config_and_each_flag_lands_in_its_field() {
        let none: MockFlags = crate::flags::parse_flags(&[]).unwrap();
        assert_eq!(MockConfig::from(none), MockConfig::default());
        let some: MockFlags = crate::flags::parse_flags(&[
            "--port",
            "9",
            "--inter-token-latency",
            "250us",
            "--max-num-seqs",
            "7",
            "--failure-types",
            "rate_limit",
            "--header-timeout",
            "2s",
        ])
        .unwrap();
        let c = MockConfig::from(some);
        assert_eq!(
            (c.port, c.inter_token_latency, c.max_num_seqs),
            (9, Duration::from_micros(250), 7)
        );
        assert_eq!(c.failure_types, [FailureType::RateLimit]);
        assert_eq!(c.header_timeout, Duration::from_secs(2));
    }
}
