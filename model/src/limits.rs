//! The bounds every numeric input is checked against, in one place.
//!
//! They are generous on purpose: each is far past any real benchmark, and exists so that a
//! typo or a hostile value gets a clear refusal instead of a panic, a clamp, an allocation of
//! gigabytes or a computation that never returns. Durations live on an integer-nanosecond
//! clock, so they must be at least 1 ns (or exactly 0 where zero means "none") and fit it
//! with room to add.

/// The finest duration the clocks resolve, seconds.
pub const MIN_NONZERO_SECONDS: f64 = 1e-9;
/// The longest duration accepted, seconds (about 31.7 years: sums of many still fit u64 ns).
pub const MAX_SECONDS: f64 = 1e9;
/// The highest rate accepted, per second (one event per nanosecond).
pub const MAX_RATE_PER_S: f64 = 1e9;
/// The lowest rate accepted, per second: one event in [`MAX_SECONDS`] (a lower rate's mean
/// gap is past the clock's range).
pub const MIN_RATE_PER_S: f64 = 1e-9;
/// Servers (client loops) in one pooled or sharded model.
pub const MAX_SERVERS: u32 = 1_000_000;
/// Events (chunks) in one burst, and tokens in one request.
pub const MAX_TOKENS: u32 = 10_000_000;
/// Client loops one simulation holds.
pub const MAX_SIM_WORKERS: u32 = 100_000;
/// Shards one machine starts (threads or processes); more machines take `--shard I/N`.
pub const MAX_LOCAL_SHARDS: u32 = 1_024;
/// Closed-loop users one sweep stage may hold (each is a request in flight).
pub const MAX_USERS: u32 = 100_000;
/// Requests one schedule may hold, counted or expected (rate x duration): a day at
/// 10,000 requests/s is 8.6e8. Bounds what one command can be asked to do from the product
/// of its inputs, not from each alone.
pub const MAX_SCHEDULED_REQUESTS: f64 = 1e9;
/// Requests one simulation may schedule: an overloaded client holds every request it has
/// not served, about 130 bytes each in the simulator, so this bounds its memory near 7 GB.
pub const MAX_SIM_REQUESTS: f64 = 5e7;
/// Events one simulation may process (each request's send, chunks and finish): about
/// 25 minutes at the engine's ~7 million events/s on one core.
pub const MAX_SIM_EVENTS: f64 = 1e10;
/// Customers one textbook queue simulation (`sim queue`, a check by simulation) measures.
pub const MAX_CUSTOMERS: u64 = 1_000_000_000;
/// The largest slow-down a simulated or mock server's batch may apply
/// (`time_factor_under_load`): a latency a million times its base is already past any run.
pub const MAX_LOAD_FACTOR: f64 = 1e6;
/// Squared coefficient of variation of a random service time: below the minimum it is
/// deterministic in every digit a report prints (use deterministic), above the maximum no
/// finite sample is meaningful.
pub const MIN_RANDOM_SCV: f64 = 1e-6;
/// See [`MIN_RANDOM_SCV`].
pub const MAX_SCV: f64 = 1e6;

/// What one response may hold, so that a hostile or broken server costs memory within a
/// stated bound. Each is hundreds of times what a real server sends; past it the request
/// ends as malformed, with the limit named.
///
/// The longest line of a server-sent event stream, bytes (a chunk of JSON is a few hundred).
pub const MAX_SSE_LINE_BYTES: usize = 1 << 20;
/// The most data one server-sent event accumulates over its lines, bytes.
pub const MAX_SSE_EVENT_BYTES: usize = 4 << 20;
/// The largest whole (non-streamed) response body, bytes (a million tokens of text is
/// about 5 MiB). A shard holds at most this much per request in flight.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// The largest model list (`/v1/models`), bytes.
pub const MAX_MODEL_LIST_BYTES: usize = 16 << 20;

/// How large each kind of file heisenbench reads may be, bytes, so that a FIFO, a device
/// or a huge log named by mistake is refused with the limit named rather than read into
/// memory whole. Each is far past any real file of its kind.
///
/// A run or sim config, a scenario, a stored calibration: hand-written JSON.
pub const MAX_CONFIG_FILE_BYTES: u64 = 16 << 20;
/// A trace of send times, one per line (about 50 million lines).
pub const MAX_TRACE_FILE_BYTES: u64 = 512 << 20;
/// Largest dataset file of prompts read (ShareGPT's cleaned set is about 640 MiB).
pub const MAX_DATASET_FILE_BYTES: u64 = 2 << 30;
/// A report or result heisenbench wrote (`run`, a shard's result, `sim`, `audit`, figure
/// data), or a client's own results file read by an audit.
pub const MAX_REPORT_FILE_BYTES: u64 = 256 << 20;
/// A tokenizer (`tokenizer.json`: the largest real ones are tens of MiB).
pub const MAX_TOKENIZER_FILE_BYTES: u64 = 256 << 20;
/// A PEM bundle of certificates (`--ca-cert`).
pub const MAX_CERTIFICATE_FILE_BYTES: u64 = 16 << 20;

/// Why a duration is refused, if it is: `None` when it is finite, >= 0, on the nanosecond
/// clock and at most [`MAX_SECONDS`].
pub fn duration_problem(s: f64) -> Option<&'static str> {
    if !(s.is_finite() && s >= 0.0) {
        Some("must be a finite number of seconds >= 0")
    } else if s > 0.0 && s < MIN_NONZERO_SECONDS {
        Some("is below the 1 ns resolution of the clocks (0 or at least 1ns)")
    } else if s > MAX_SECONDS {
        Some("is beyond the nanosecond clock's range (at most 1e9 s)")
    } else {
        None
    }
}
