//! Prometheus metrics with the vLLM names llm-d-inference-sim exposes.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// vLLM's request-latency buckets, seconds.
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
/// Finer buckets for the inter-token latency.
const ITL_BUCKETS: [f64; 16] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,
    0.25, 0.5,
];

/// A cumulative histogram of seconds with fixed buckets (lock-free).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64; 16],
    counts: [AtomicU64; 17],
    sum_ns: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64; 16]) -> Self {
        Self {
            bounds,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe_ns(&self, ns: u64) {
        let s = ns as f64 * 1e-9;
        let i = self
            .bounds
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            cum += self.counts[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
        }
        cum += self.counts[16].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cum}");
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            self.sum_ns.load(Relaxed) as f64 * 1e-9
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {cum}");
    }
}

/// Every metric the mock exposes.
#[derive(Debug)]
pub struct Metrics {
    /// Requests in a slot now.
    pub running: AtomicU64,
    /// Requests waiting for a slot now.
    pub waiting: AtomicU64,
    /// Finished with reason `stop`.
    pub success_stop: AtomicU64,
    /// Finished with reason `length`.
    pub success_length: AtomicU64,
    /// Answered 429 because the waiting line was full.
    pub rejected: AtomicU64,
    /// Answered with an injected failure.
    pub injected: AtomicU64,
    /// Timed tokens whose due time had passed when the token before them in their stream
    /// was handed to the connection: late enough that the connection may write the two in
    /// one piece, so a client sees them arrive together.
    pub due_together: AtomicU64,
    /// Prompt tokens of accepted requests.
    pub prompt_tokens: AtomicU64,
    /// Generated tokens.
    pub generation_tokens: AtomicU64,
    /// Prompt tokens looked up in the prefix cache.
    pub prefix_cache_queries: AtomicU64,
    /// Prompt tokens the prefix cache held.
    pub prefix_cache_hits: AtomicU64,
    /// Prefix-cache blocks in use.
    pub kv_cache_blocks: AtomicU64,
    /// The prefix cache's capacity, blocks (0: no cache).
    pub kv_cache_capacity: AtomicU64,
    /// Time to first token.
    pub ttft: Histogram,
    /// Inter-token latency.
    pub itl: Histogram,
    /// End to end.
    pub e2e: Histogram,
    /// Wait for a slot.
    pub queue: Histogram,
    /// From the slot to the first token.
    pub prefill: Histogram,
    /// From the first token to the last.
    pub decode: Histogram,
    /// How late each timed token was written against the mock's own schedule (its TTFT
    /// and inter-token latencies): a mock that falls behind says so, instead of serving a
    /// latency it was not configured with as if it were.
    pub lateness: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let z = || AtomicU64::new(0);
        Self {
            running: z(),
            waiting: z(),
            success_stop: z(),
            success_length: z(),
            rejected: z(),
            injected: z(),
            due_together: z(),
            prompt_tokens: z(),
            generation_tokens: z(),
            prefix_cache_queries: z(),
            prefix_cache_hits: z(),
            kv_cache_blocks: z(),
            kv_cache_capacity: z(),
            ttft: Histogram::new(&LATENCY_BUCKETS),
            itl: Histogram::new(&ITL_BUCKETS),
            e2e: Histogram::new(&LATENCY_BUCKETS),
            queue: Histogram::new(&LATENCY_BUCKETS),
            prefill: Histogram::new(&LATENCY_BUCKETS),
            decode: Histogram::new(&LATENCY_BUCKETS),
            lateness: Histogram::new(&ITL_BUCKETS),
        }
    }
}

impl Metrics {
    /// The Prometheus text exposition.
    pub fn render(&self, model: &str) -> String {
        let l = format!(
            "model_name=\"{}\"",
            model.replace('\\', "\\\\").replace('"', "\\\"")
        );
        let mut out = String::with_capacity(8192);
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{l}}} {v}"
            );
        };
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{l}}} {v}"
            );
        };
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Requests in a batch slot.",
            self.running.load(Relaxed),
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Requests waiting for a slot.",
            self.waiting.load(Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP vllm:request_success_total Finished requests.\n# TYPE vllm:request_success_total counter\n\
             vllm:request_success_total{{{l},finished_reason=\"stop\"}} {}\n\
             vllm:request_success_total{{{l},finished_reason=\"length\"}} {}",
            self.success_stop.load(Relaxed),
            self.success_length.load(Relaxed)
        );
        counter(
            &mut out,
            "vllm:prompt_tokens_total",
            "Prompt tokens processed.",
            self.prompt_tokens.load(Relaxed),
        );
        counter(
            &mut out,
            "vllm:generation_tokens_total",
            "Tokens generated.",
            self.generation_tokens.load(Relaxed),
        );
        let capacity = self.kv_cache_capacity.load(Relaxed);
        if capacity > 0 {
            counter(
                &mut out,
                "vllm:prefix_cache_queries_total",
                "Prompt tokens looked up in the prefix cache.",
                self.prefix_cache_queries.load(Relaxed),
            );
            counter(
                &mut out,
                "vllm:prefix_cache_hits_total",
                "Prompt tokens found in the prefix cache.",
                self.prefix_cache_hits.load(Relaxed),
            );
            let used = self.kv_cache_blocks.load(Relaxed) as f64 / capacity as f64;
            let _ = writeln!(
                out,
                "# HELP vllm:kv_cache_usage_perc Fraction of the prefix cache's blocks in use.\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{l}}} {used}"
            );
        }
        counter(
            &mut out,
            "heisenbench:requests_rejected_total",
            "Requests refused with 429 (waiting line full).",
            self.rejected.load(Relaxed),
        );
        counter(
            &mut out,
            "heisenbench:failures_injected_total",
            "Requests answered with an injected failure.",
            self.injected.load(Relaxed),
        );
        counter(
            &mut out,
            "heisenbench:mock_tokens_due_together_total",
            "Timed tokens already due when the token before them was handed over (the two may be written in one piece).",
            self.due_together.load(Relaxed),
        );
        self.ttft.render(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Time to first token.",
            &l,
        );
        self.itl.render(
            &mut out,
            "vllm:inter_token_latency_seconds",
            "Time between consecutive tokens.",
            &l,
        );
        self.e2e.render(
            &mut out,
            "vllm:e2e_request_latency_seconds",
            "End-to-end request latency.",
            &l,
        );
        self.queue.render(
            &mut out,
            "vllm:request_queue_time_seconds",
            "Time waiting for a batch slot.",
            &l,
        );
        self.prefill.render(
            &mut out,
            "vllm:request_prefill_time_seconds",
            "From a batch slot to the first token.",
            &l,
        );
        self.decode.render(
            &mut out,
            "vllm:request_decode_time_seconds",
            "From the first token to the last.",
            &l,
        );
        self.lateness.render(
            &mut out,
            "heisenbench:mock_token_lateness_seconds",
            "How late each timed token was written against the mock's schedule.",
            &l,
        );
        out
    }
}
