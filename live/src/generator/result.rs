//! Per-shard results (mergeable) and the run's report.

use std::collections::BTreeMap;

use heisenbench_model::metrics::{NtpotParts, Scalars};
use heisenbench_model::sample::ns_from_secs;
pub use heisenbench_model::slo::{Attained, Goodput, GoodputView, SloCounts};
use heisenbench_model::stats::{Dist, Recorder};
use serde::{Deserialize, Serialize};

use super::config::RunConfig;
use super::series::{Series, SeriesPoint};

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The whole response arrived.
    Completed,
    /// No connection (refused, unreachable, DNS).
    ConnectFailed,
    /// The server answered with an error status.
    HttpStatus(u16),
    /// The per-request timeout fired.
    TimedOut,
    /// The connection broke while the response was being read.
    StreamBroken,
    /// The stream ended without a finish reason (with or without `[DONE]`), or in the
    /// middle of an event: the server stopped the generation early.
    Truncated,
    /// Sent, but still in flight when the run was stopped and its grace period ran out.
    Cancelled,
    /// The server sent an error object inside a stream or a successful body.
    ServerError,
    /// An event that is not an OpenAI stream event, or an unreadable JSON body.
    Malformed,
    /// Any other client error (request building, TLS).
    OtherError,
    /// Due while its shard already held its in-flight bound: never sent (a load
    /// generator past its machine's limits, as k6 counts dropped iterations).
    Dropped,
}

impl Outcome {
    /// Every outcome but an HTTP status, for reading keys back.
    const KEYED: [Outcome; 10] = [
        Self::Completed,
        Self::ConnectFailed,
        Self::TimedOut,
        Self::StreamBroken,
        Self::Truncated,
        Self::ServerError,
        Self::Cancelled,
        Self::Malformed,
        Self::OtherError,
        Self::Dropped,
    ];

    /// The outcome a report key names (`completed`, `http_429`, ...).
    pub fn from_key(key: &str) -> Option<Self> {
        if let Some(status) = key.strip_prefix("http_") {
            return status.parse().ok().map(Self::HttpStatus);
        }
        Self::KEYED.into_iter().find(|o| o.key() == key)
    }

    /// Whether the request failed: neither a whole response nor a timeout.
    pub fn is_failure(self) -> bool {
        !matches!(self, Self::Completed | Self::TimedOut)
    }

    /// The key used in reports' outcome and failure maps.
    pub fn key(self) -> String {
        match self {
            Self::Completed => "completed".into(),
            Self::ConnectFailed => "connect_failed".into(),
            Self::HttpStatus(s) => format!("http_{s}"),
            Self::TimedOut => "timed_out".into(),
            Self::StreamBroken => "stream_broken".into(),
            Self::Truncated => "truncated".into(),
            Self::ServerError => "server_error".into(),
            Self::Cancelled => "cancelled".into(),
            Self::Malformed => "malformed".into(),
            Self::OtherError => "other_error".into(),
            Self::Dropped => "dropped".into(),
        }
    }
}

/// One request's row for CSV output (nanoseconds relative to the run's start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Position in the schedule.
    pub index: u64,
    /// Shard.
    pub shard: u32,
    /// How it ended.
    pub outcome: String,
    /// Intended send.
    pub intended_ns: u64,
    /// Actual send.
    pub sent_ns: u64,
    /// When the write of the request began, where the generator's own HTTP/1.1 reader
    /// wrote it (None through reqwest, and in rows written before it was kept): from the
    /// actual send to here is the generator's own path before the wire.
    #[serde(default)]
    pub write_ns: Option<u64>,
    /// Response headers.
    pub headers_ns: Option<u64>,
    /// First token's arrival.
    pub first_token_ns: Option<u64>,
    /// The server's own stamp of the first token's chunk ([`crate::mock::api::SENT_FIELD`],
    /// the embedded mock's), relative to the same start: on one host, `first_token_ns`
    /// minus this is the first chunk's observer overhead.
    #[serde(default)]
    pub first_token_server_ns: Option<u64>,
    /// End of the response.
    pub end_ns: Option<u64>,
    /// Tokens counted in the stream.
    pub tokens_stream: u32,
    /// Tokens the server's usage reported.
    pub tokens_usage: Option<u32>,
    /// The last token's arrival.
    #[serde(default)]
    pub last_token_ns: Option<u64>,
    /// The largest gap between two token chunks (None: fewer than two).
    #[serde(default)]
    pub max_itl_ns: Option<u64>,
    /// In the warm-up: kept out of the statistics.
    #[serde(default)]
    pub warmup: bool,
}

/// Where an open loop's send lag goes, request by request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SendStages {
    /// The due time seen late: the schedule saw its timer's wake-up, or a chunk handler
    /// saw the time pass (whichever came first), this long after it.
    pub timer: Dist,
    /// The shard's loop, busy with other work, resuming the schedule after the due time
    /// was seen.
    pub loop_wake: Dist,
    /// The send's own start: an in-flight cap's wait, the task's start, the body.
    pub start: Dist,
}

/// The recorders of one shard (all nanoseconds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recorders {
    /// Actual minus intended send.
    pub send_lag: Recorder,
    /// TTFT from the intended send, arrival stamps.
    pub ttft_intended: Recorder,
    /// TTFT from the actual send, arrival stamps.
    pub ttft_actual: Recorder,
    /// TTFT from the intended send as a client stamping after processing would see it.
    pub ttft_processed: Recorder,
    /// Time per output token after the first (arrival stamps).
    pub tpot: Recorder,
    /// Inter-token latency (arrival stamps).
    pub itl: Recorder,
    /// End to end from the intended send.
    pub e2e_intended: Recorder,
    /// End to end from the actual send.
    pub e2e_actual: Recorder,
    /// NTPOT from the intended send.
    pub ntpot_intended: Recorder,
    /// NTPOT from the actual send.
    pub ntpot_actual: Recorder,
    /// Arrival stamp minus the server's send stamp, per event (when the server stamps).
    pub observer_overhead: Recorder,
    /// Processed stamp minus the return of the read that brought the event, per event.
    pub processing: Recorder,
    /// The read's return minus the kernel's arrival stamp, per event (empty when the
    /// kernel stamps nothing: through reqwest, TLS).
    #[serde(default)]
    pub read_lag: Recorder,
    /// The send lag of an open loop in its stages (they add up to it request by request).
    #[serde(default)]
    pub send_stages: StageRecorders,
}

/// The send lag of an open loop in its stages, recorded (nanoseconds); [`SendStages`]
/// summarises them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageRecorders {
    /// The due time seen late: from the intended send until the schedule's timer fired
    /// or a chunk handler saw the time pass.
    pub timer: Recorder,
    /// The shard's loop late to resume the schedule after that.
    pub loop_wake: Recorder,
    /// The send's own start: an in-flight cap's wait, the task's start, the body.
    pub start: Recorder,
}

impl StageRecorders {
    /// Their summaries.
    pub fn summary(&self) -> SendStages {
        SendStages {
            timer: self.timer.summary(),
            loop_wake: self.loop_wake.summary(),
            start: self.start.summary(),
        }
    }
}

impl Recorders {
    fn merge(&mut self, o: &Recorders) {
        for (a, b) in self.all_mut().into_iter().zip(o.all()) {
            a.merge(b);
        }
    }

    fn all(&self) -> [&Recorder; 16] {
        [
            &self.send_lag,
            &self.ttft_intended,
            &self.ttft_actual,
            &self.ttft_processed,
            &self.tpot,
            &self.itl,
            &self.e2e_intended,
            &self.e2e_actual,
            &self.ntpot_intended,
            &self.ntpot_actual,
            &self.observer_overhead,
            &self.processing,
            &self.read_lag,
            &self.send_stages.timer,
            &self.send_stages.loop_wake,
            &self.send_stages.start,
        ]
    }

    fn all_mut(&mut self) -> [&mut Recorder; 16] {
        let StageRecorders {
            timer,
            loop_wake,
            start,
        } = &mut self.send_stages;
        [
            &mut self.send_lag,
            &mut self.ttft_intended,
            &mut self.ttft_actual,
            &mut self.ttft_processed,
            &mut self.tpot,
            &mut self.itl,
            &mut self.e2e_intended,
            &mut self.e2e_actual,
            &mut self.ntpot_intended,
            &mut self.ntpot_actual,
            &mut self.observer_overhead,
            &mut self.processing,
            &mut self.read_lag,
            timer,
            loop_wake,
            start,
        ]
    }

    /// Records one completed request's scalar metrics.
    pub fn record_request(&mut self, intended: &Scalars, actual: &Scalars, processed_ttft_s: f64) {
        let r = |rec: &mut Recorder, s: f64| rec.record(ns_from_secs(s));
        r(&mut self.ttft_intended, intended.ttft_s);
        r(&mut self.ttft_actual, actual.ttft_s);
        r(&mut self.ttft_processed, processed_ttft_s);
        r(&mut self.e2e_intended, intended.e2e_s);
        r(&mut self.e2e_actual, actual.e2e_s);
        r(&mut self.ntpot_intended, intended.ntpot_s);
        r(&mut self.ntpot_actual, actual.ntpot_s);
        if let Some(t) = actual.tpot_s {
            r(&mut self.tpot, t);
        }
    }
}

/// Everything one shard measured. `merge` is exact and associative; `Default` is its
/// identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardResult {
    /// Requests in the shard's slice of the schedule (or, closed loop, sent).
    pub scheduled: u64,
    /// Requests by outcome (written by key: `completed`, `http_429`, ...).
    #[serde(with = "by_key")]
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Scheduled but never sent (the run was stopped first).
    pub not_sent: u64,
    /// The shard was stopped before the end of its slice (Ctrl-C, SIGTERM).
    #[serde(default)]
    pub interrupted: bool,
    /// Latency recorders.
    pub recorders: Recorders,
    /// TTFT from the intended send by conversation turn (index: turn - 1), when
    /// closed-loop users hold conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_turn: Vec<Recorder>,
    /// Output tokens counted in streams.
    pub tokens_stream: u64,
    /// Output tokens the server's usage reported.
    pub tokens_usage: u64,
    /// Completed requests whose stream count differs from the usage count.
    pub token_mismatches: u64,
    /// Prompt tokens of the completed requests, as the prompts count them (see
    /// [`crate::openai::prompt`]).
    #[serde(default)]
    pub prompt_tokens_sent: u64,
    /// Completed requests with a prompt count in their usage, by the server's count minus
    /// the prompt's own (a BOS, a chat template); at most [`MAX_PROMPT_OVERHEADS`] distinct
    /// differences, the rest in `prompt_overhead_other`.
    #[serde(default)]
    pub prompt_overheads: BTreeMap<i64, u64>,
    /// Requests whose difference was past the distinct ones kept.
    #[serde(default)]
    pub prompt_overhead_other: u64,
    /// Completed requests whose usage said how many prompt tokens the server's prefix
    /// cache served, their prompt tokens (the server's count) and the cached ones.
    #[serde(default)]
    pub prefix_cache: CacheUsage,
    /// SSE events received.
    pub events: u64,
    /// Completed requests that carried no token (a finish reason on the first chunk): no
    /// TTFT is recorded for them.
    #[serde(default)]
    pub zero_token_completions: u64,
    /// The servers' own error messages (`http_404: ...`, mid-stream errors), by count; at
    /// most [`MAX_MESSAGES`] distinct ones, the rest under [`OTHER_MESSAGES`].
    #[serde(default)]
    pub server_messages: BTreeMap<String, u64>,
    /// NTPOT parts summed over completed requests, seconds.
    pub ntpot_parts_sum: NtpotParts,
    /// Most requests in flight at once (the maximum over shards when merged).
    pub max_in_flight: u32,
    /// CPU time of the shard's thread, nanoseconds.
    pub cpu_ns: u64,
    /// Wall time of the shard, nanoseconds.
    pub wall_ns: u64,
    /// Earliest actual send, ns after the start.
    pub first_send_ns: Option<u64>,
    /// Intended time of the shard's first request, ns after the start.
    #[serde(default)]
    pub first_planned_ns: Option<u64>,
    /// Server clock minus this host's clock, from the first response's `Date` header
    /// (whole seconds, so good to about half a second), seconds.
    #[serde(default)]
    pub clock_offset_estimate_s: Option<f64>,
    /// Latest end of a response, ns after the start: the return of the read that brought
    /// it (a response is done when the client has read it).
    pub last_end_ns: Option<u64>,
    /// Output tokens of the completed requests, each counted as the larger of its token
    /// chunks and the server's usage (what TPOT divides by).
    #[serde(default)]
    pub output_tokens: u64,
    /// Token chunks of the completed requests whose usage counted their tokens: with
    /// `tokens_usage`, how many tokens a chunk carried.
    #[serde(default)]
    pub usage_chunks: u64,
    /// Output tokens of the completed requests that sent no usage, counted by encoding
    /// their streamed text with `--tokenizer`.
    #[serde(default)]
    pub tokens_tokenizer: u64,
    /// Token chunks of those requests: with `tokens_tokenizer`, how many tokens a chunk
    /// carried.
    #[serde(default)]
    pub tokenizer_chunks: u64,
    /// The run second by second.
    #[serde(default)]
    pub series: Series,
    /// Requests judged against the run's SLO, and how they fared.
    #[serde(default)]
    pub slo: SloCounts,
    /// The warm-up's requests, kept out of the statistics.
    #[serde(default)]
    pub warmup: WarmupCounts,
    /// Earliest actual send of a request past the warm-up, ns after the start: where the
    /// measured part of the run begins.
    #[serde(default)]
    pub measured_from_ns: Option<u64>,
    /// Per-request rows, when asked for.
    pub rows: Vec<Row>,
}

/// The requests of a run's warm-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmupCounts {
    /// Sent (and ended in any way).
    pub requests: u64,
    /// Of them, completed.
    pub completed: u64,
}

impl WarmupCounts {
    fn add(&mut self, o: &WarmupCounts) {
        self.requests = self.requests.saturating_add(o.requests);
        self.completed = self.completed.saturating_add(o.completed);
    }
}

/// Distinct prompt-count differences a result keeps.
pub const MAX_PROMPT_OVERHEADS: usize = 64;

/// Distinct server messages a result keeps.
pub const MAX_MESSAGES: usize = 16;
/// The key that counts the messages past [`MAX_MESSAGES`].
pub const OTHER_MESSAGES: &str = "(other messages)";

impl ShardResult {
    /// Counts `requests` whose usage counted `overhead` more prompt tokens than were sent.
    pub fn note_prompt_overhead(&mut self, overhead: i64, requests: u64) {
        if self.prompt_overheads.contains_key(&overhead)
            || self.prompt_overheads.len() < MAX_PROMPT_OVERHEADS
        {
            let n = self.prompt_overheads.entry(overhead).or_default();
            *n = n.saturating_add(requests);
        } else {
            self.prompt_overhead_other = self.prompt_overhead_other.saturating_add(requests);
        }
    }

    /// The server's prompt counts against the prompts': the usual difference (the most
    /// common), the requests it covers, and the requests that differ from it.
    pub fn prompt_check(&self) -> PromptCheck {
        let checked = self
            .prompt_overheads
            .values()
            .fold(self.prompt_overhead_other, |a, n| a.saturating_add(*n));
        let usual = self
            .prompt_overheads
            .iter()
            .max_by_key(|(d, n)| (**n, std::cmp::Reverse(d.abs())))
            .map(|(d, n)| (*d, *n));
        PromptCheck {
            sent: self.prompt_tokens_sent,
            checked,
            usual_overhead: usual.map(|(d, _)| d),
            mismatches: checked - usual.map_or(0, |(_, n)| n),
        }
    }

    /// Counts one server message, keeping at most [`MAX_MESSAGES`] distinct ones.
    pub fn note_message(&mut self, message: String, count: u64) {
        let key = if self.server_messages.contains_key(&message)
            || self.server_messages.len() < MAX_MESSAGES
        {
            message
        } else {
            OTHER_MESSAGES.to_string()
        };
        let n = self.server_messages.entry(key).or_default();
        *n = n.saturating_add(count);
    }

    /// Notes a measured TTFT (from the intended send) at turn `turn` of a conversation.
    pub fn record_turn(&mut self, turn: u32, ttft_ns: u64) {
        let i = turn as usize - 1;
        if self.ttft_by_turn.len() <= i {
            self.ttft_by_turn.resize_with(i + 1, Recorder::default);
        }
        self.ttft_by_turn[i].record(ttft_ns);
    }

    /// Adds `o` into `self`. Counters saturate instead of wrapping (shard files may hold
    /// anything), so a sum too large to hold shows as unbalanced accounting, never as a
    /// small, plausible number.
    pub fn merge(&mut self, o: &ShardResult) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.scheduled, o.scheduled);
        for (k, v) in &o.outcomes {
            add(self.outcomes.entry(*k).or_default(), *v);
        }
        add(&mut self.not_sent, o.not_sent);
        self.interrupted |= o.interrupted;
        self.recorders.merge(&o.recorders);
        if self.ttft_by_turn.len() < o.ttft_by_turn.len() {
            self.ttft_by_turn
                .resize_with(o.ttft_by_turn.len(), Recorder::default);
        }
        for (a, b) in self.ttft_by_turn.iter_mut().zip(&o.ttft_by_turn) {
            a.merge(b);
        }
        add(&mut self.tokens_stream, o.tokens_stream);
        add(&mut self.tokens_usage, o.tokens_usage);
        add(&mut self.token_mismatches, o.token_mismatches);
        add(&mut self.prompt_tokens_sent, o.prompt_tokens_sent);
        for (d, n) in &o.prompt_overheads {
            self.note_prompt_overhead(*d, *n);
        }
        add(&mut self.prompt_overhead_other, o.prompt_overhead_other);
        self.prefix_cache.add(&o.prefix_cache);
        add(&mut self.events, o.events);
        add(&mut self.zero_token_completions, o.zero_token_completions);
        for (m, n) in &o.server_messages {
            self.note_message(m.clone(), *n);
        }
        self.ntpot_parts_sum.add(&o.ntpot_parts_sum);
        self.max_in_flight = self.max_in_flight.max(o.max_in_flight);
        add(&mut self.cpu_ns, o.cpu_ns);
        self.wall_ns = self.wall_ns.max(o.wall_ns);
        self.first_send_ns = min_opt(self.first_send_ns, o.first_send_ns);
        self.first_planned_ns = min_opt(self.first_planned_ns, o.first_planned_ns);
        self.clock_offset_estimate_s = self.clock_offset_estimate_s.or(o.clock_offset_estimate_s);
        self.last_end_ns = self.last_end_ns.max(o.last_end_ns);
        add(&mut self.output_tokens, o.output_tokens);
        add(&mut self.usage_chunks, o.usage_chunks);
        add(&mut self.tokens_tokenizer, o.tokens_tokenizer);
        add(&mut self.tokenizer_chunks, o.tokenizer_chunks);
        self.series.merge(&o.series);
        self.slo.add(&o.slo);
        self.warmup.add(&o.warmup);
        self.measured_from_ns = min_opt(self.measured_from_ns, o.measured_from_ns);
        self.rows.extend(o.rows.iter().cloned());
    }

    /// Requests that ended, in any way (saturating).
    pub fn ended(&self) -> u64 {
        self.outcomes
            .values()
            .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Requests by outcome.
    pub fn count(&self, o: Outcome) -> u64 {
        self.outcomes.get(&o).copied().unwrap_or(0)
    }

    /// Counts one request that ended as `o`.
    pub fn record(&mut self, o: Outcome) {
        let n = self.outcomes.entry(o).or_default();
        *n = n.saturating_add(1);
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// One shard's fate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStatus {
    /// Index.
    pub index: u32,
    /// Whether it reported.
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// Requests in its slice (known in advance for open loops).
    pub scheduled: u64,
    /// Its thread's busy fraction (CPU time over wall time).
    pub utilization: f64,
    /// Most requests it had in flight at once.
    #[serde(default)]
    pub max_in_flight: u32,
    /// How late its first request went out after its intended time, seconds.
    #[serde(default)]
    pub start_slip_s: Option<f64>,
    /// Server clock minus the shard host's clock, seconds (from an HTTP `Date` header).
    #[serde(default)]
    pub clock_offset_estimate_s: Option<f64>,
}

/// Request accounting. Balanced: scheduled = completed + failed + timed_out + not_sent +
/// lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accounting {
    /// In the schedule.
    pub scheduled: u64,
    /// Whole responses.
    pub completed: u64,
    /// Failures by class (HTTP status, connect, stream broken, malformed, other), written
    /// by key.
    #[serde(with = "by_key")]
    pub failed: BTreeMap<Outcome, u64>,
    /// Timed out.
    pub timed_out: u64,
    /// Never sent.
    pub not_sent: u64,
    /// In the slices of shards that failed or never reported.
    pub lost: u64,
    /// Whether the equation holds.
    pub balanced: bool,
}

/// What the server's usage said of its prefix cache (`prompt_tokens_details.cached_tokens`),
/// summed over completed requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheUsage {
    /// Requests whose usage carried a cached count.
    pub requests: u64,
    /// Their prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// Their prompt tokens the server's prefix cache served.
    pub cached_tokens: u64,
}

impl CacheUsage {
    /// Adds `o`'s counts (saturating).
    pub fn add(&mut self, o: &CacheUsage) {
        self.requests = self.requests.saturating_add(o.requests);
        self.prompt_tokens = self.prompt_tokens.saturating_add(o.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(o.cached_tokens);
    }

    /// The share of prompt tokens served from the cache (`None`: nothing was reported).
    pub fn hit_rate(&self) -> Option<f64> {
        (self.prompt_tokens > 0).then(|| self.cached_tokens as f64 / self.prompt_tokens as f64)
    }
}

/// The server's prompt token counts (usage) against the prompts heisenbench built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCheck {
    /// Prompt tokens of the completed requests, as the prompts count them.
    pub sent: u64,
    /// Completed requests whose usage carried a prompt count.
    pub checked: u64,
    /// The most common difference, server's count minus the prompt's (the BOS or chat
    /// template the server adds); `None` when no usage carried a prompt count.
    pub usual_overhead: Option<i64>,
    /// Checked requests whose difference is not the usual one: prompts whose length the
    /// server counts differently.
    pub mismatches: u64,
}

/// Three views of a latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Origins {
    /// From the intended send.
    pub from_intended: Dist,
    /// From the actual send.
    pub from_actual: Dist,
}

/// The report of a live run. Carries the config and seed that made it (never the key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Format version.
    pub version: u32,
    /// Always "live".
    pub kind: String,
    /// The resolved config.
    pub config: RunConfig,
    /// Fingerprint of the schedule and shard count.
    pub plan_hash: String,
    /// Why this many shards.
    pub shards_reasoning: Vec<String>,
    /// Shard by shard.
    pub shards: Vec<ShardStatus>,
    /// Where every request went.
    pub accounting: Accounting,
    /// Requests per second the schedule asked for.
    pub offered_qps: f64,
    /// Completed requests per second of the run.
    pub achieved_qps: f64,
    /// How faithfully the schedule was sent, apart from how fast the server completed it
    /// (None in reports written before it was measured).
    #[serde(default)]
    pub sending: Option<Sending>,
    /// From the first send to the last response, seconds.
    pub duration_s: f64,
    /// TTFT from the intended send by conversation turn (turn 1 first), when closed-loop
    /// users hold conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_turn: Vec<Dist>,
    /// Actual minus intended send.
    pub send_lag: Dist,
    /// The send lag of an open loop in its stages (they add up to it request by request).
    #[serde(default)]
    pub send_stages: SendStages,
    /// Time to first token (arrival stamps).
    pub ttft: Origins,
    /// TTFT from the intended send as a client stamping after processing would report it.
    pub ttft_after_processing: Dist,
    /// Time per output token after the first.
    pub tpot: Dist,
    /// Inter-token latency.
    pub itl: Dist,
    /// End to end.
    pub e2e: Origins,
    /// Normalised time per output token.
    pub ntpot: Origins,
    /// Mean NTPOT parts from the intended send.
    pub ntpot_parts_mean: NtpotParts,
    /// Arrival stamp minus the server's send stamp, per event.
    pub observer_overhead: Dist,
    /// Processed stamp minus the read's return, per event.
    pub processing: Dist,
    /// The read's return minus the kernel's arrival stamp, per event: how late this
    /// generator read what had arrived (empty without kernel stamps).
    #[serde(default)]
    pub read_lag: Dist,
    /// Output tokens counted in streams, and reported by the server.
    pub tokens_stream: u64,
    /// Output tokens the server's usage reported.
    pub tokens_usage: u64,
    /// Completed requests whose counts disagree.
    pub token_mismatches: u64,
    /// Prompt lengths against the server's usage.
    #[serde(default)]
    pub prompt_tokens: PromptCheck,
    /// The server's prefix-cache hits, as its usage reported them.
    #[serde(default)]
    pub prefix_cache: CacheUsage,
    /// SSE events received.
    pub events: u64,
    /// The run was stopped early (Ctrl-C, SIGTERM): what was measured until then.
    #[serde(default)]
    pub interrupted: bool,
    /// This machine's loopback floor, when measured for the run (`run --floor`) or stored
    /// with the calibration: the least observer overhead the machine allows.
    #[serde(default)]
    pub floor: Option<crate::measure::floor::Floor>,
    /// Token throughput over the measured part of the run.
    #[serde(default)]
    pub throughput: Throughput,
    /// Goodput against the run's SLO (None: no SLO was given).
    #[serde(default)]
    pub goodput: Option<Goodput>,
    /// The warm-up kept out of the statistics (None: no warm-up was asked for).
    #[serde(default)]
    pub warmup: Option<WarmupReport>,
    /// Whether the run settled, and what grew if it did not.
    #[serde(default)]
    pub steady_state: Option<SteadyState>,
    /// The run second by second.
    #[serde(default)]
    pub series: Vec<SeriesPoint>,
    /// The CPU this machine gave the run (None: a report merged from shard files).
    #[serde(default)]
    pub machine: Option<MachineLoad>,
    /// Which side saturated, in words, when one did: the machine (generator and server
    /// together at its cores, or requests dropped at the in-flight bound), the generator
    /// (its send lag grew), or the server (TTFT grew while the send lag held).
    #[serde(default)]
    pub saturated: Option<String>,
    /// The server's side, from its metrics endpoint (None: nothing was scraped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::scrape::view::ServerView>,
    /// Why the server's side is missing, when it was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_note: Option<String>,
    /// The run's time zero on this machine's CLOCK_MONOTONIC, nanoseconds: what the times
    /// of `requests.csv` count from, so a process on the same machine (a server's own
    /// stamps) can place them on its clock (None: a report merged from shard files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_monotonic_ns: Option<u64>,
    /// The merged raw result (histograms included), so reports can be merged again.
    pub merged: ShardResult,
}

/// The sending side of a run: what left when, whatever the server did with it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sending {
    /// Requests sent (the warm-up's included).
    pub sent: u64,
    /// Sent per second of the schedule's length (None: a closed loop has no length).
    pub sent_qps: Option<f64>,
    /// Share of the measured requests sent within [`ON_TIME_S`] of their intended time.
    pub on_time: Option<f64>,
}

/// A send this close to its intended time counts as on time, seconds.
pub const ON_TIME_S: f64 = 1e-3;

/// The CPU a run took of this machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    /// Cores this machine offers.
    pub cores: u32,
    /// From the shards' start to their last report, seconds.
    pub wall_s: f64,
    /// The shards' loops, CPU seconds.
    pub generator_cpu_s: f64,
    /// The embedded mock's, CPU seconds (None: the server ran elsewhere).
    pub server_cpu_s: Option<f64>,
    /// Both over the wall time: the cores kept busy.
    pub busy_cores: f64,
    /// The whole machine's busy share over the run, from `/proc/stat` (every process,
    /// the kernel's interrupt work included; None where it cannot be read).
    #[serde(default)]
    pub machine_busy: Option<f64>,
}

/// The machine's CPU time so far, from `/proc/stat`'s first line: (busy, total) in clock
/// ticks, busy being everything but idle and I/O wait.
pub fn machine_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// The median TTFT from the actual send past which the embedded (zero-latency) mock is
/// late: the machine running it and the generator together is saturated.
pub const EMBEDDED_LATE_S: f64 = 1e-3;

/// Busy over cores at which a machine counts as saturated.
pub const SATURATED_BUSY: f64 = 0.9;

impl MachineLoad {
    /// The load of a run that took `process_cpu_ns` of this process's CPU over `wall_ns`,
    /// with its shards' CPU from `rep`; with `server_here`, the server is this process
    /// (less its thread shards, which are this process's too).
    pub fn measured(
        cfg: &RunConfig,
        rep: &RunReport,
        process_cpu_ns: u64,
        wall_ns: u64,
        server_here: bool,
        ticks: Option<((u64, u64), (u64, u64))>,
    ) -> Self {
        let shards_ns = rep.merged.cpu_ns;
        let own_ns = match cfg.shard_mode {
            super::config::ShardMode::Thread => process_cpu_ns.saturating_sub(shards_ns),
            super::config::ShardMode::Process => process_cpu_ns,
        };
        let wall_s = wall_ns as f64 * 1e-9;
        let server = server_here.then_some(own_ns as f64 * 1e-9);
        let generator = shards_ns as f64 * 1e-9;
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            wall_s,
            generator_cpu_s: generator,
            server_cpu_s: server,
            busy_cores: if wall_s > 0.0 {
                (generator + server.unwrap_or(0.0)) / wall_s
            } else {
                0.0
            },
            machine_busy: ticks.and_then(|((b0, t0), (b1, t1))| {
                (t1 > t0).then(|| b1.saturating_sub(b0) as f64 / (t1 - t0) as f64)
            }),
        }
    }

    /// Whether the run kept this machine's cores busy: the whole machine's busy share
    /// (or, where it cannot be read, the run's own processes') at least
    /// [`SATURATED_BUSY`].
    pub fn saturated(&self) -> bool {
        match self.machine_busy {
            Some(b) => b >= SATURATED_BUSY,
            None => self.busy_cores >= SATURATED_BUSY * f64::from(self.cores),
        }
    }
}

/// Tokens per second over the measured part of the run (the completed requests past the
/// warm-up, over `duration_s`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Output tokens of the completed requests (each the larger of its chunks and the
    /// server's usage).
    pub output_tokens: u64,
    /// Their prompt tokens, as the prompts count them.
    pub input_tokens: u64,
    /// Output tokens per second.
    pub output_tokens_per_s: f64,
    /// Prompt tokens per second.
    pub input_tokens_per_s: f64,
    /// Both.
    pub total_tokens_per_s: f64,
    /// The most output tokens that arrived in one second of the run (any request's).
    pub peak_output_tokens_per_s: f64,
    /// One request's decode rate (1 / TPOT), median, tokens per second (None: TPOT was
    /// zero, every token at once, or no request had two tokens).
    pub per_request_output_tokens_per_s_p50: Option<f64>,
    /// The decode rate the slowest 1 % of requests stayed below (1 / TPOT p99).
    pub per_request_output_tokens_per_s_p1: Option<f64>,
    /// Tokens a chunk carried, by the server's usage over the chunks that carried them, or
    /// else by `--tokenizer` over the streamed text (None: neither counted, and each chunk
    /// counts as one token).
    pub tokens_per_chunk: Option<f64>,
    /// What counted them (None: nothing did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_chunk_by: Option<TokenCounter>,
}

/// What counted the tokens a streamed chunk carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenCounter {
    /// The server's usage.
    Usage,
    /// `--tokenizer`, over the streamed text.
    Tokenizer,
}

/// The warm-up kept out of the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WarmupReport {
    /// What was asked for.
    pub warmup: super::config::Warmup,
    /// Its requests (sent and ended in any way).
    pub requests: u64,
    /// Of them, completed.
    pub completed: u64,
}

/// Whether the run reached a steady state, judged on its per-second series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// The windows judged (whole seconds while requests were offered).
    pub windows: usize,
    /// MSER's truncation of the TTFT median series: the windows of transient at the start.
    pub transient_windows: usize,
    /// Whether the TTFT series settled (MSER's minimum before half the run).
    pub settled: bool,
    /// What grew through the run (`send lag`, `ttft`), if anything.
    pub growing: Vec<String>,
    /// Which side the growth points at, in words (None: nothing grew).
    pub saturated: Option<String>,
}

impl RunReport {
    /// Records the machine's load and, from it, the dropped requests and the steady-state
    /// verdict, which side saturated.
    pub fn note_machine(&mut self, m: MachineLoad) {
        self.machine = Some(m);
        let dropped = self.merged.count(Outcome::Dropped);
        let cpu = match m.server_cpu_s {
            Some(s) => format!(
                "the generator's shards used {:.2} cores and the embedded mock {:.2}, of {}",
                m.generator_cpu_s / m.wall_s.max(1e-9),
                s / m.wall_s.max(1e-9),
                m.cores
            ),
            None => format!(
                "the generator's shards used {:.2} of {} cores",
                m.generator_cpu_s / m.wall_s.max(1e-9),
                m.cores
            ),
        };
        let cpu = match m.machine_busy {
            Some(b) => format!("{cpu}; the machine was {:.0} % busy", 100.0 * b),
            None => cpu,
        };
        let bound = self.config.in_flight_bound.unwrap_or(0);
        // The embedded mock answers at once: a TTFT from the actual send of more than a
        // millisecond is this machine failing to serve and generate the load together.
        let late_mock = m.server_cpu_s.is_some() && self.ttft.from_actual.p50_s > EMBEDDED_LATE_S;
        let cpu = if late_mock {
            format!(
                "the embedded mock, which answers at once, took {} to the first token (median from the actual send); {cpu}",
                heisenbench_model::units::format_seconds(self.ttft.from_actual.p50_s)
            )
        } else {
            cpu
        };
        self.saturated = if m.saturated() || late_mock {
            Some(format!(
                "the machine: {cpu}{}",
                if dropped > 0 {
                    format!(
                        "; {dropped} request(s) dropped at the in-flight bound of {bound} a shard"
                    )
                } else {
                    String::new()
                }
            ))
        } else if dropped > 0 {
            Some(format!(
                "requests piled up past the in-flight bound ({bound} a shard): {dropped} dropped; {cpu}"
            ))
        } else {
            self.steady_state
                .as_ref()
                .and_then(|s| s.saturated.clone())
                .map(|s| format!("{s}; {cpu}"))
        };
    }

    /// What is wrong with the accounting, in one line: requests lost with their shards,
    /// or counts that do not add up to the schedule. None when every scheduled request
    /// is accounted for.
    pub fn accounting_problem(&self) -> Option<String> {
        let a = &self.accounting;
        (!a.balanced || a.lost > 0).then(|| {
            format!(
                "{} of {} scheduled request(s) lost with their shards{}",
                a.lost,
                a.scheduled,
                if a.balanced {
                    ""
                } else {
                    "; the accounting does not balance"
                }
            )
        })
    }

    /// The chunks received per second of the run: the rate a floor measured for
    /// comparison with it should carry.
    pub fn chunk_rate(&self) -> f64 {
        self.events as f64 / self.duration_s.max(1e-9)
    }

    /// This run as a stage of a latency profile offered `offered_qps` (its p99 is TTFT's
    /// from the intended send), with its goodput and Little's law: the time-weighted
    /// mean in flight over the schedule's whole seconds (after the first, when there are
    /// three or more) against the achieved rate times the mean E2E from the actual send.
    pub fn profile_stage(&self, offered_qps: f64) -> heisenbench_model::profile::Stage {
        let users = match self.config.workload.arrivals {
            heisenbench_model::scenario::Arrivals::Closed { users, .. } => Some(users),
            _ => None,
        };
        // The whole seconds of the schedule (the first left out when there are three or
        // more: connections are set up in it).
        let whole = match self.config.workload.stop {
            heisenbench_model::scenario::Stop::Duration { seconds } => seconds.floor() as usize,
            heisenbench_model::scenario::Stop::Count { .. } => self
                .series
                .iter()
                .rposition(|p| p.offered_per_s > 0.0)
                .unwrap_or(0),
        }
        .min(self.series.len());
        let first = usize::from(whole >= 3);
        let loaded = (whole > first).then(|| &self.series[first..whole]);
        heisenbench_model::profile::Stage {
            users,
            good_fraction: self.goodput.as_ref().map(|g| g.from_intended.good_fraction),
            in_flight_mean: loaded
                .map(|w| w.iter().map(|p| p.in_flight_mean).sum::<f64>() / w.len() as f64),
            little_in_flight: loaded.map(|_| self.achieved_qps * self.e2e.from_actual.mean_s),
            scheduled_qps: match self.config.workload.stop {
                heisenbench_model::scenario::Stop::Duration { seconds } if users.is_none() => {
                    Some(self.accounting.scheduled as f64 / seconds)
                }
                _ => None,
            },
            ..heisenbench_model::profile::Stage::at_rate(
                if users.is_some() {
                    self.achieved_qps
                } else {
                    offered_qps
                },
                self.achieved_qps,
                self.ttft.from_intended.p99_s,
            )
        }
    }
}

/// A live report (its JSON, as `run --out` writes it) as one shard loop's observation for
/// the model, with the run's name: its events arrive a response at a time, each costing
/// the emulated client cost (or, without one, the shards' CPU per event). None when the
/// report has no completed requests.
pub fn loop_observation(
    v: &serde_json::Value,
) -> Result<Option<(String, heisenbench_model::compare::Observation)>, heisenbench_model::ModelError>
{
    use heisenbench_model::compare::{LoopArrivals, Observation};
    use heisenbench_model::service::Service;
    let cfg = &v["config"];
    let shards = cfg["shards"]
        .as_f64()
        .or(cfg["workers"].as_f64())
        .unwrap_or(1.0)
        .max(1.0);
    let events = v["events"].as_f64().unwrap_or(0.0);
    let completed = v["accounting"]["completed"].as_f64().unwrap_or(0.0);
    if events == 0.0 || completed == 0.0 {
        return Ok(None);
    }
    let cost = cfg["client_cost_s"].as_f64().unwrap_or(0.0);
    let cpu = v["merged"]["cpu_ns"].as_f64().unwrap_or(0.0) * 1e-9 / events;
    let mean = if cost > 0.0 { cost } else { cpu.max(1e-9) };
    let per_request = events / completed;
    let rate = v["offered_qps"].as_f64().unwrap_or(0.0) / shards * per_request;
    let d = |k: &str, f: &str| v[k][f].as_f64().unwrap_or(0.0);
    // With a zero-latency server a response is due at its request's intended time. Its
    // events' time in the client is then the send lag (the loop was busy when the
    // request was due), the bytes' way to this host (send stamp to arrival stamp), their
    // wait for the loop to read them (the read lag; inside the overhead in reports without
    // kernel stamps) and the wait and processing after the read: the model's wait plus
    // one service.
    let observed = d("send_lag", "mean_s")
        + d("observer_overhead", "mean_s")
        + d("read_lag", "mean_s")
        + d("processing", "mean_s")
        - mean;
    let obs = Observation {
        event_rate_per_s: rate,
        service: Service::gamma(mean, if cost > 0.0 { 0.0 } else { 0.25 })?,
        burst: per_request.round().max(1.0) as u32,
        arrivals: LoopArrivals::Poisson,
        wait_mean_s: Some(observed.max(0.0)),
        wait_quantiles_s: vec![],
    };
    let name = cfg["name"].as_str().unwrap_or("live").to_string();
    Ok(Some((name, obs)))
}

/// A map by outcome, written as a map by key (`completed`, `http_429`, ...) in key order;
/// a key no outcome has is refused when read.
mod by_key {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error};

    use super::Outcome;

    pub fn serialize<S: Serializer>(m: &BTreeMap<Outcome, u64>, s: S) -> Result<S::Ok, S::Error> {
        let keyed: BTreeMap<String, u64> = m.iter().map(|(o, n)| (o.key(), *n)).collect();
        keyed.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<Outcome, u64>, D::Error> {
        BTreeMap::<String, u64>::deserialize(d)?
            .into_iter()
            .map(|(k, n)| match Outcome::from_key(&k) {
                Some(o) => Ok((o, n)),
                None => Err(D::Error::custom(format!("no outcome is called {k:?}"))),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every outcome reads back from its key; maps are written by key, in key order, and a
    /// key no outcome has is refused rather than counted under a wrong name.
    #[test]
    fn outcomes_are_written_and_read_by_key() {
        let all: Vec<Outcome> = Outcome::KEYED
            .into_iter()
            .chain([Outcome::HttpStatus(429), Outcome::HttpStatus(503)])
            .collect();
        for o in &all {
            assert_eq!(Outcome::from_key(&o.key()), Some(*o), "{o:?}");
        }
        assert_eq!(Outcome::from_key("http_x"), None);
        assert_eq!(Outcome::from_key("done"), None);
        let mut r = ShardResult::default();
        for o in [
            Outcome::TimedOut,
            Outcome::HttpStatus(429),
            Outcome::Completed,
        ] {
            r.record(o);
        }
        r.record(Outcome::Completed);
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v["outcomes"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["completed", "http_429", "timed_out"]);
        assert_eq!(v["outcomes"]["completed"], 2);
        let back: ShardResult = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.count(Outcome::HttpStatus(429)), 1);
        let mut bad = v;
        bad["outcomes"]["finished"] = serde_json::json!(1);
        assert!(serde_json::from_value::<ShardResult>(bad).is_err());
    }
}
