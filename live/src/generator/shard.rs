//! One shard: a single-threaded runtime replaying its slice of the schedule.
//!
//! Each request is sent at its intended time (a microsecond timer, never tokio's 1 ms
//! wheel). Every read of the response carries the kernel's stamp of its bytes' arrival
//! (the shard's own reader; through reqwest, the read is stamped as it reaches the
//! request's task) and the time it returned, before any parsing; each event's processing
//! is stamped again afterwards. Latencies are measured from the arrival stamps, from the
//! intended send and from the actual send; the read's lateness after the arrival is the
//! read lag.

use heisenbench_model::limits::{MAX_RESPONSE_BYTES, MAX_SSE_EVENT_BYTES, MAX_SSE_LINE_BYTES};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use heisenbench_model::metrics::{Convention, Marks, Origin};
use heisenbench_model::scenario::{Arrivals, GroupSampler, Stop};
use heisenbench_model::schedule::{Planned, Schedule, user_shapes};
use heisenbench_model::slo::{Judged, Verdict};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::config::{ApiKind, RunConfig};
use super::result::{CacheUsage, Outcome, Row, ShardResult};
use super::stop::{GRACE, StopSignal};
use super::wake::ScheduleWake;
use crate::net::http1::{Piece, Wire, WireError};
use crate::net::receive_stamps::Stamps;
use crate::openai::prompt::PromptContent;
use crate::openai::sse::{SseEvent, SseParser};
use crate::openai::stream::{
    Ending, RepeatedHead, StreamEvent, StreamState, clip, error_text, interpret, interpret_after,
    text_of,
};
use crate::time::{mono_ns, thread_cpu_ns};

/// What a shard is told: the run, its index, and the common start (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardTask {
    /// The run.
    pub config: RunConfig,
    /// This shard's index, 0-based.
    pub shard: u32,
    /// When the schedule's time zero is, on CLOCK_MONOTONIC.
    pub start_mono_ns: u64,
    /// Fault injection for tests ([`super::RunOptions::crash_shard`]): the shard process
    /// aborts halfway through its slice.
    #[serde(default)]
    pub crash_halfway: bool,
}

/// The requests of `shard`'s slice of an open-loop schedule (None for closed loops).
pub fn slice_len(cfg: &RunConfig, shard: u32) -> Option<u64> {
    Schedule::new(&cfg.workload, cfg.seed)
        .map(|s| s.stripe(u64::from(shard), u64::from(cfg.shards)).rest())
}

/// Runs the shard to completion on the calling thread, or until `stop` (then it sends
/// nothing more, gives requests in flight [`GRACE`] and reports).
pub fn run_shard(task: &ShardTask, stop: &StopSignal) -> std::io::Result<ShardResult> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let cpu0 = thread_cpu_ns();
    let wall0 = mono_ns();
    let mut result = local.block_on(&rt, shard_main(task.clone(), stop.clone()))?;
    result.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    result.wall_ns = mono_ns().saturating_sub(wall0);
    Ok(result)
}

struct Ctx {
    cfg: RunConfig,
    shard: u32,
    start_ns: u64,
    client: reqwest::Client,
    /// The shard's own HTTP/1.1 reader, for a plain http:// endpoint (else reqwest).
    wire: Option<Wire>,
    endpoint: String,
    auth: Option<String>,
    /// When the schedule's next send is due, and who wakes it.
    wake: ScheduleWake,
    /// How prompts are made.
    prompts: PromptMaker,
    /// The run's tokenizer, which counts the output tokens of a stream that carries no
    /// usage (None: no `--tokenizer`).
    counter: Option<tokenizers::Tokenizer>,
    result: RefCell<ShardResult>,
    in_flight: Cell<u32>,
    timeout: Duration,
    /// Thrown [`GRACE`] after a stop: requests still in flight are cut off.
    cancel: StopSignal,
}

async fn shard_main(task: ShardTask, stop: StopSignal) -> std::io::Result<ShardResult> {
    let client = crate::net::client::client(task.config.server()).map_err(std::io::Error::other)?;
    let auth = crate::net::client::authorization(task.config.server());
    let wire = Wire::for_url(&task.config.endpoint(), auth.as_deref());
    // The shard's own reader takes the kernel's arrival stamps: on from the first packet.
    let _stamping = wire
        .as_ref()
        .and_then(|_| crate::net::receive_stamps::Stamping::start());
    let counter = match &task.config.prompts.tokenizer {
        Some(path) => {
            Some(crate::openai::prompt::load_tokenizer(path).map_err(std::io::Error::other)?)
        }
        None => None,
    };
    let ctx = Rc::new(Ctx {
        counter,
        endpoint: task.config.endpoint(),
        shard: task.shard,
        start_ns: task.start_mono_ns,
        wire,
        client,
        auth,
        wake: ScheduleWake::new()?,
        prompts: PromptMaker::new(&task.config),
        result: RefCell::new(ShardResult::default()),
        in_flight: Cell::new(0),
        timeout: Duration::from_secs_f64(task.config.timeout()),
        cancel: StopSignal::new(),
        cfg: task.config,
    });
    let cutoff = {
        let (stop, cancel) = (stop.clone(), ctx.cancel.clone());
        tokio::task::spawn_local(async move {
            stop.stopped().await;
            tokio::time::sleep(GRACE).await;
            cancel.stop();
        })
    };
    let cap = ctx
        .cfg
        .max_in_flight_per_shard
        .map(|n| std::sync::Arc::new(Semaphore::new(n as usize)));
    let mut tasks = Vec::new();
    match Schedule::new(&ctx.cfg.workload, ctx.cfg.seed) {
        Some(schedule) => {
            let mut planned = schedule.stripe(u64::from(ctx.shard), u64::from(ctx.cfg.shards));
            while let Some(p) = planned.next() {
                {
                    let mut r = ctx.result.borrow_mut();
                    r.scheduled += 1;
                    r.first_planned_ns.get_or_insert(p.at_ns);
                    r.series.at(p.at_ns).offered += 1;
                }
                // The body is made before the wait, so its prompt costs the send nothing.
                let payload = ctx.prompts.body(&ctx.cfg, &p);
                let ready = async {
                    let fired = ctx.wake.until_due(ctx.start_ns + p.at_ns).await;
                    let woken = Woken {
                        fired,
                        resumed: mono_ns(),
                    };
                    let permit = match &cap {
                        Some(s) => s.clone().acquire_owned().await.ok(),
                        None => None,
                    };
                    (woken, permit)
                };
                let (woken, permit) = tokio::select! {
                    ready = ready => ready,
                    () = stop.stopped() => {
                        // This request and the rest of the slice are never sent: they stay
                        // scheduled and unended, which the report counts as not sent.
                        let rest = planned.rest();
                        let mut r = ctx.result.borrow_mut();
                        r.scheduled += rest;
                        r.interrupted = true;
                        ctx.wake.none_due();
                        break;
                    }
                };
                ctx.wake.woken();
                if ctx
                    .cfg
                    .in_flight_bound
                    .is_some_and(|b| ctx.in_flight.get() >= b)
                {
                    ctx.wake.started();
                    drop_request(&ctx, &p);
                    continue;
                }
                let c = ctx.clone();
                let mut send = Box::pin(async move {
                    request(&c, p, Some(woken), payload).await;
                    drop(permit);
                });
                // The request starts here, not at the back of the loop's queue of ready
                // tasks (behind a round of chunk handlers): its first step runs now, and
                // its own task carries on from there.
                let finished =
                    std::future::poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx).is_ready())).await;
                if !finished {
                    tasks.push(tokio::task::spawn_local(send));
                }
            }
        }
        None => {
            let Arrivals::Closed { users, think_s } = ctx.cfg.workload.arrivals else {
                unreachable!("only closed loops lack a schedule")
            };
            for user in (ctx.shard..users).step_by(ctx.cfg.shards as usize) {
                let (c, stop) = (ctx.clone(), stop.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    tokio::select! {
                        () = closed_user(&c, user, users, think_s) => {}
                        () = stop.stopped() => c.result.borrow_mut().interrupted = true,
                    }
                }));
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    cutoff.abort();
    let _ = cutoff.await;
    let ctx = Rc::try_unwrap(ctx).map_err(|_| std::io::Error::other("requests still running"))?;
    Ok(ctx.result.into_inner())
}

/// One user of a closed loop: send, wait for the whole response, think, repeat.
async fn closed_user(ctx: &Rc<Ctx>, user: u32, users: u32, think_s: f64) {
    let mut shapes = user_shapes(&ctx.cfg.workload, ctx.cfg.seed, user);
    let mut index = u64::from(user);
    loop {
        let now_rel = mono_ns().saturating_sub(ctx.start_ns);
        let go = match ctx.cfg.workload.stop {
            Stop::Count { requests } => index < requests,
            Stop::Duration { seconds } => (now_rel as f64) < seconds * 1e9,
        };
        if !go {
            return;
        }
        let (input_tokens, output_tokens) = shapes.next().unwrap_or((1, 1));
        ctx.result.borrow_mut().scheduled += 1;
        let mut p = Planned {
            index,
            at_ns: now_rel,
            input_tokens,
            output_tokens,
        };
        let payload = ctx.prompts.body(&ctx.cfg, &p);
        // A closed loop's intended time is when the user is ready: now, its body made.
        p.at_ns = mono_ns().saturating_sub(ctx.start_ns);
        ctx.result.borrow_mut().series.at(p.at_ns).offered += 1;
        request(ctx, p, None, payload).await;
        index += u64::from(users);
        if think_s > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(think_s)).await;
        }
    }
}

/// Accounts request `p`, due while the shard held its in-flight bound, as dropped: never
/// sent, ended at its due time, judged (and failed) against the SLO like any other.
fn drop_request(ctx: &Ctx, p: &Planned) {
    let warm = ctx.cfg.warmup.is_some_and(|w| w.covers(p.index, p.at_ns));
    let mut r = ctx.result.borrow_mut();
    r.record(Outcome::Dropped);
    let now = mono_ns().saturating_sub(ctx.start_ns);
    r.series.at(now).failed += 1;
    if warm {
        r.warmup.requests += 1;
    } else if let Some(slo) = &ctx.cfg.slo {
        r.slo.note(slo, Verdict::FAILED, Verdict::FAILED, 0);
    }
    if ctx.cfg.csv {
        r.rows.push(Row {
            index: p.index,
            shard: ctx.shard,
            outcome: Outcome::Dropped.key(),
            intended_ns: p.at_ns,
            sent_ns: now,
            headers_ns: None,
            first_token_ns: None,
            first_token_server_ns: None,
            end_ns: None,
            tokens_stream: 0,
            tokens_usage: None,
            last_token_ns: None,
            max_itl_ns: None,
            warmup: warm,
        });
    }
}

/// How a shard makes its requests' prompts: the run's prompts and, with shared prefixes,
/// which prefix each request draws.
struct PromptMaker {
    /// Tokens in each shared prefix, and the draw of a request's group.
    prefix: Option<(u32, GroupSampler)>,
}

impl PromptMaker {
    fn new(cfg: &RunConfig) -> Self {
        Self {
            prefix: cfg.workload.prefix.map(|p| (p.tokens, p.sampler())),
        }
    }

    /// The prompt tokens of request `p`: its shared prefix's and its own.
    fn tokens(&self, p: &Planned) -> u32 {
        p.input_tokens
            .saturating_add(self.prefix.as_ref().map_or(0, |(t, _)| *t))
    }

    /// The prompt of request `p`: its group's prefix (the same words for every request of
    /// the group), then its own words.
    fn prompt(&self, cfg: &RunConfig, p: &Planned) -> String {
        let own = cfg.prompts.text(p.input_tokens, cfg.seed, p.index);
        let Some((tokens, groups)) = &self.prefix else {
            return own;
        };
        if cfg.prompts.content == PromptContent::Repeated {
            return cfg.prompts.text(self.tokens(p), cfg.seed, p.index);
        }
        let group = groups.group_of(cfg.seed, p.index);
        let mut text = cfg
            .prompts
            .text(*tokens, cfg.seed ^ PREFIX_SEED, u64::from(group));
        if !own.is_empty() {
            text.push(' ');
            text.push_str(&own);
        }
        text
    }

    /// The request body of `p`.
    fn body(&self, cfg: &RunConfig, p: &Planned) -> Vec<u8> {
        body(cfg, p, &self.prompt(cfg, p))
    }
}

/// Mixed into the seed of shared prefixes' words, so a prefix is not a request's prompt.
const PREFIX_SEED: u64 = 0x7072_6566_6978_0001;

/// The JSON body of request `p` with `prompt`, written directly (no value tree: a body is
/// made for every request, and a prompt's words are most of it).
fn body(cfg: &RunConfig, p: &Planned, prompt: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(prompt.len() + 192);
    // Writing JSON strings into a Vec cannot fail.
    out.extend_from_slice(b"{\"model\":");
    let _ = serde_json::to_writer(&mut out, &cfg.model);
    match cfg.api {
        ApiKind::Completions => {
            out.extend_from_slice(b",\"prompt\":");
            let _ = serde_json::to_writer(&mut out, prompt);
        }
        ApiKind::Chat => {
            out.extend_from_slice(b",\"messages\":[{\"role\":\"user\",\"content\":");
            let _ = serde_json::to_writer(&mut out, prompt);
            out.extend_from_slice(b"}]");
        }
    }
    out.extend_from_slice(b",\"max_tokens\":");
    out.extend_from_slice(itoa::Buffer::new().format(p.output_tokens).as_bytes());
    out.extend_from_slice(b",\"ignore_eos\":true,\"stream\":");
    out.extend_from_slice(if cfg.stream { b"true" } else { b"false" });
    if cfg.stream {
        out.extend_from_slice(b",\"stream_options\":{\"include_usage\":true}");
    }
    out.push(b'}');
    out
}

/// What one exchange saw (CLOCK_MONOTONIC ns).
#[derive(Default)]
struct Exchanged {
    headers: Option<u64>,
    first_arrival: Option<u64>,
    /// The server's stamp on the first token's chunk, when it sends one.
    first_sent: Option<u64>,
    first_processed: Option<u64>,
    last_arrival: u64,
    /// The largest gap between two token chunks' arrivals.
    max_gap: Option<u64>,
    /// When the response's end arrived.
    end: Option<u64>,
    /// When the read that brought its end returned: the client has it all from then (the
    /// run's duration ends at the last of these, so a loop's backlog counts against its
    /// rate).
    end_read: Option<u64>,
    stream: StreamState,
    /// The leading members this stream's chunks repeat, read once.
    head: RepeatedHead,
    /// The streamed text, kept when a tokenizer is to count its tokens.
    text: Option<String>,
}

/// When a request's due time was met: first seen due, by the schedule's timer or a chunk
/// handler (None: the deadline had passed when the schedule got to it), and when the
/// schedule's task resumed.
#[derive(Debug, Clone, Copy)]
struct Woken {
    fired: Option<u64>,
    resumed: u64,
}

/// One request: sent now, read to its end, recorded. `woken` splits an open loop's send
/// lag into its stages.
async fn request(ctx: &Rc<Ctx>, p: Planned, woken: Option<Woken>, payload: Vec<u8>) {
    let intended = ctx.start_ns + p.at_ns;
    let in_flight = ctx.in_flight.get() + 1;
    ctx.in_flight.set(in_flight);
    {
        let mut r = ctx.result.borrow_mut();
        r.max_in_flight = r.max_in_flight.max(in_flight);
    }
    let actual = mono_ns();
    if woken.is_some() {
        ctx.wake.started();
    }
    let mut seen = Exchanged {
        text: ctx.counter.is_some().then(String::new),
        ..Exchanged::default()
    };
    let outcome = tokio::select! {
        o = tokio::time::timeout(ctx.timeout, exchange(ctx, payload, &mut seen)) => {
            o.unwrap_or(Outcome::TimedOut)
        }
        () = ctx.cancel.stopped() => Outcome::Cancelled,
    };
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let finished = mono_ns();
    let warm = ctx.cfg.warmup.is_some_and(|w| w.covers(p.index, p.at_ns));
    let rel = |t: u64| t.saturating_sub(ctx.start_ns);
    let mut r = ctx.result.borrow_mut();
    r.record(outcome);
    let send_lag = actual.saturating_sub(intended);
    // The time series counts every request, the warm-up's too.
    let done = match (seen.end, seen.end_read) {
        (Some(end), read) => read.unwrap_or(end).max(end),
        (None, _) => finished,
    };
    r.series.in_flight(rel(actual), rel(done));
    r.series.at(rel(actual)).sent += 1;
    {
        let w = r.series.at(p.at_ns);
        w.send_lag.record(send_lag);
        if outcome == Outcome::Completed
            && let Some(first) = seen.first_arrival
        {
            let ttft = first.saturating_sub(intended);
            w.ttft.record(ttft);
            let f = r.series.at(rel(first));
            f.first_tokens += 1;
            f.ttft_sum_ns = f.ttft_sum_ns.saturating_add(ttft);
            f.ttft_send_lag_sum_ns = f.ttft_send_lag_sum_ns.saturating_add(send_lag);
        }
    }
    let usage = seen
        .stream
        .usage
        .map(|u| u32::try_from(u).unwrap_or(u32::MAX));
    // Without usage, the tokenizer's count of the text (when there is one).
    let counted = match (&seen.text, &ctx.counter) {
        (Some(text), Some(tok)) if usage.is_none() && outcome == Outcome::Completed => tok
            .encode(text.as_str(), false)
            .ok()
            .map(|e| u32::try_from(e.len()).unwrap_or(u32::MAX)),
        _ => None,
    };
    let output_tokens = seen.stream.tokens.max(usage.or(counted).unwrap_or(0));
    {
        let w = r.series.at(rel(done));
        if outcome == Outcome::Completed {
            w.completed += 1;
            // What the usage counted beyond the chunks (several tokens a chunk) arrives
            // with the response's end.
            w.output_tokens += u64::from(output_tokens - seen.stream.tokens);
        } else {
            w.failed += 1;
        }
    }
    r.first_send_ns = Some(r.first_send_ns.map_or(rel(actual), |f| f.min(rel(actual))));
    if let Some(m) = seen.stream.error.take() {
        r.note_message(m, 1);
    }
    if outcome == Outcome::Completed
        && let (Some(_), Some(end)) = (seen.first_arrival, seen.end)
    {
        r.last_end_ns = Some(r.last_end_ns.unwrap_or(0).max(rel(done.max(end))));
    }
    if ctx.cfg.csv {
        r.rows.push(Row {
            index: p.index,
            shard: ctx.shard,
            outcome: outcome.key(),
            intended_ns: p.at_ns,
            sent_ns: rel(actual),
            headers_ns: seen.headers.map(rel),
            first_token_ns: seen.first_arrival.map(rel),
            first_token_server_ns: seen.first_sent.map(rel),
            end_ns: seen.end.map(rel),
            tokens_stream: seen.stream.tokens,
            tokens_usage: usage,
            last_token_ns: seen.first_arrival.map(|_| rel(seen.last_arrival)),
            max_itl_ns: seen.max_gap,
            warmup: warm,
        });
    }
    if warm {
        r.warmup.requests += 1;
        if outcome == Outcome::Completed {
            r.warmup.completed += 1;
        }
        return;
    }
    r.measured_from_ns = Some(
        r.measured_from_ns
            .map_or(rel(actual), |f| f.min(rel(actual))),
    );
    r.recorders.send_lag.record(send_lag);
    if let Some(w) = woken {
        // The due time seen late (by the schedule's timer or a chunk handler), then the loop
        // late to resume the schedule, then the send's own start (an in-flight cap's wait,
        // the request's first step, the body): they add up to the send lag.
        let fired = w.fired.unwrap_or(intended).max(intended);
        let stages = &mut r.recorders.send_stages;
        stages.timer.record(fired - intended);
        stages.loop_wake.record(w.resumed.saturating_sub(fired));
        stages
            .start
            .record(actual.saturating_sub(w.resumed.max(intended)));
    }
    if outcome == Outcome::Completed && seen.first_arrival.is_none() {
        r.zero_token_completions += 1;
    }
    let mut verdicts = (Verdict::FAILED, Verdict::FAILED);
    if outcome == Outcome::Completed
        && let (Some(first), Some(end)) = (seen.first_arrival, seen.end)
    {
        let tokens = output_tokens.max(1);
        let marks = Marks {
            intended_send_ns: intended,
            actual_send_ns: actual,
            first_token_ns: first,
            last_token_ns: seen.last_arrival.max(first),
            end_ns: end,
            output_tokens: tokens,
        };
        let from_intended = marks.scalars(Origin::Intended, Convention::Heisenbench);
        let from_actual = marks.scalars(Origin::Actual, Convention::Heisenbench);
        if let Some(slo) = &ctx.cfg.slo {
            let gap = seen.max_gap.map(|g| g as f64 * 1e-9);
            verdicts = (
                slo.judge(&Judged::new(&from_intended, gap)),
                slo.judge(&Judged::new(&from_actual, gap)),
            );
        }
        let processed_ttft = seen
            .first_processed
            .unwrap_or(first)
            .saturating_sub(intended) as f64
            * 1e-9;
        r.recorders
            .record_request(&from_intended, &from_actual, processed_ttft);
        let parts = from_intended.ntpot_parts;
        r.ntpot_parts_sum.add(&parts);
        r.tokens_stream += u64::from(seen.stream.tokens);
        r.output_tokens += u64::from(output_tokens);
        if let Some(c) = counted {
            r.tokens_tokenizer += u64::from(c);
            r.tokenizer_chunks += u64::from(seen.stream.tokens);
        }
        if let Some(u) = usage {
            r.tokens_usage += u64::from(u);
            r.usage_chunks += u64::from(seen.stream.tokens);
            if ctx.cfg.stream && u != seen.stream.tokens {
                r.token_mismatches += 1;
            }
        }
        let prompt_tokens = ctx.prompts.tokens(&p);
        r.prompt_tokens_sent += u64::from(prompt_tokens);
        if let Some(counted) = seen.stream.prompt_usage {
            if let Some(cached) = seen.stream.cached_usage {
                r.prefix_cache.add(&CacheUsage {
                    requests: 1,
                    prompt_tokens: counted,
                    cached_tokens: cached.min(counted),
                });
            }
            let counted = i64::try_from(counted).unwrap_or(i64::MAX);
            r.note_prompt_overhead(counted.saturating_sub(i64::from(prompt_tokens)), 1);
        }
    }
    if let Some(slo) = &ctx.cfg.slo
        && outcome != Outcome::Cancelled
    {
        r.slo
            .note(slo, verdicts.0, verdicts.1, u64::from(output_tokens));
    }
}

fn classify(e: &reqwest::Error) -> Outcome {
    if e.is_connect() {
        Outcome::ConnectFailed
    } else if e.is_timeout() {
        Outcome::TimedOut
    } else if e.is_body() || e.is_decode() || e.is_request() {
        Outcome::StreamBroken
    } else {
        Outcome::OtherError
    }
}

/// Most of an error response's body kept for the server's message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A response being read: through reqwest, or by the shard's own reader.
enum Reply<'w> {
    Pooled(reqwest::Response, bytes::Bytes),
    Own(crate::net::http1::Response<'w>),
}

/// A failed exchange of the shard's own reader, as an outcome.
fn broken(e: &WireError) -> Outcome {
    match e {
        WireError::Connect(_) => Outcome::ConnectFailed,
        WireError::Broken(_) => Outcome::StreamBroken,
    }
}

impl Reply<'_> {
    fn status(&self) -> u16 {
        match self {
            Self::Pooled(r, _) => r.status().as_u16(),
            Self::Own(r) => r.status,
        }
    }

    fn date(&self) -> Option<&str> {
        match self {
            Self::Pooled(r, _) => r.headers().get("date").and_then(|d| d.to_str().ok()),
            Self::Own(r) => r.date.as_deref(),
        }
    }

    /// The media type the body is in (`text/event-stream`), lower case, without parameters.
    fn media_type(&self) -> Option<String> {
        let v = match self {
            Self::Pooled(r, _) => r
                .headers()
                .get("content-type")
                .and_then(|d| d.to_str().ok()),
            Self::Own(r) => r.content_type.as_deref(),
        }?;
        Some(
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase(),
        )
    }

    /// A content coding the body is in, other than `identity`.
    fn encoding(&self) -> Option<&str> {
        match self {
            Self::Pooled(r, _) => r
                .headers()
                .get("content-encoding")
                .and_then(|d| d.to_str().ok()),
            Self::Own(r) => r.content_encoding.as_deref(),
        }
        .filter(|e| !e.trim().is_empty() && !e.trim().eq_ignore_ascii_case("identity"))
    }

    /// The next piece of the body as it arrived, and when; None at its end. Through
    /// reqwest a piece is stamped as it reaches this task (no kernel stamp). A failure
    /// carries its cause.
    async fn chunk(&mut self) -> Result<Option<Piece<'_>>, (Outcome, String)> {
        match self {
            Self::Pooled(r, last) => match r.chunk().await {
                Ok(Some(b)) => {
                    let stamps = Stamps::now();
                    *last = b;
                    Ok(Some(Piece {
                        bytes: &last[..],
                        stamps,
                    }))
                }
                Ok(None) => Ok(None),
                Err(e) => Err((classify(&e), crate::net::client::error_chain(&e))),
            },
            Self::Own(r) => r.chunk().await.map_err(|e| (broken(&e), e.to_string())),
        }
    }

    /// The body, read to its end or until `limit` bytes (then the rest is left unread and
    /// the body is said to be cut), and the stamps of its last piece read (of its end, for
    /// an empty body).
    async fn bytes(&mut self, limit: usize) -> Result<(Vec<u8>, Stamps, bool), (Outcome, String)> {
        let mut all = Vec::new();
        let mut last = None;
        while let Some(piece) = self.chunk().await? {
            let room = limit.saturating_sub(all.len());
            all.extend_from_slice(&piece.bytes[..piece.bytes.len().min(room)]);
            last = Some(piece.stamps);
            if piece.bytes.len() > room {
                return Ok((all, last.unwrap_or_else(Stamps::now), true));
            }
        }
        Ok((all, last.unwrap_or_else(Stamps::now), false))
    }
}

/// Sends the request; its outcome and the cause (refused, TLS, DNS: what a user needs to
/// fix the run) when no response came.
async fn send<'c>(ctx: &'c Ctx, payload: Vec<u8>) -> Result<Reply<'c>, (Outcome, String)> {
    if let Some(wire) = &ctx.wire {
        return match wire.post(&payload).await {
            Ok(r) => Ok(Reply::Own(r)),
            Err(e) => Err((broken(&e), e.to_string())),
        };
    }
    let mut req = ctx
        .client
        .post(&ctx.endpoint)
        .header("content-type", "application/json")
        .body(payload);
    if let Some(a) = &ctx.auth {
        req = req.header("authorization", a);
    }
    match req.send().await {
        Ok(r) => Ok(Reply::Pooled(r, bytes::Bytes::new())),
        Err(e) => Err((classify(&e), crate::net::client::error_chain(&e))),
    }
}

async fn exchange(ctx: &Rc<Ctx>, payload: Vec<u8>, seen: &mut Exchanged) -> Outcome {
    let mut resp = match send(ctx, payload).await {
        Ok(r) => r,
        Err((outcome, cause)) => {
            seen.stream.error = Some(format!("{}: {cause}", outcome.key()));
            return outcome;
        }
    };
    seen.headers = Some(mono_ns());
    if ctx.result.borrow().clock_offset_estimate_s.is_none()
        && let Some(date) = resp.date().and_then(|d| httpdate::parse_http_date(d).ok())
    {
        // The header holds whole seconds, truncated: add half a second for its mean.
        let local = std::time::SystemTime::now();
        let offset = match date.duration_since(local) {
            Ok(ahead) => ahead.as_secs_f64(),
            Err(behind) => -behind.duration().as_secs_f64(),
        } + 0.5;
        ctx.result.borrow_mut().clock_offset_estimate_s = Some(offset);
    }
    let status = resp.status();
    if !(200..300).contains(&status) {
        // Read the error body (so the connection can be reused) for the server's message.
        let body = resp
            .bytes(MAX_ERROR_BODY)
            .await
            .map(|(b, _, _)| b)
            .unwrap_or_default();
        let message = error_text(&body);
        let hint = crate::net::client::explain_status(status);
        let said = if message.is_empty() {
            reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("")
                .to_string()
        } else {
            message
        };
        seen.stream.error = Some(if hint.is_empty() {
            format!("http_{status}: {said}")
        } else {
            format!("http_{status}: {hint}; the server said: {said}")
        });
        return Outcome::HttpStatus(status);
    }
    if let Some(coding) = resp.encoding() {
        seen.stream.error = Some(format!(
            "malformed: the answer is encoded ({}), which heisenbench neither asks for nor decodes",
            clip(coding)
        ));
        return Outcome::Malformed;
    }
    let media = resp.media_type();
    let whole = !ctx.cfg.stream || media.as_deref() == Some("application/json");
    if ctx.cfg.stream
        && let Some(m) = media
            .as_deref()
            .filter(|m| *m != "text/event-stream" && *m != "application/json")
    {
        let head = resp.bytes(200).await.map(|(b, _, _)| b).unwrap_or_default();
        seen.stream.error = Some(format!(
            "malformed: a {status} answer of type {}, not an event stream: {}",
            clip(m),
            clip(&String::from_utf8_lossy(&head))
        ));
        return Outcome::Malformed;
    }
    if whole {
        let (bytes, stamps) = match resp.bytes(MAX_RESPONSE_BYTES).await {
            Ok((_, _, true)) => {
                seen.stream.error = Some(format!(
                    "malformed: the response body is longer than {} MiB",
                    MAX_RESPONSE_BYTES >> 20
                ));
                return Outcome::Malformed;
            }
            Ok((b, st, false)) => (b, st),
            Err((o, cause)) => {
                seen.stream.error = Some(format!("{}: {cause}", o.key()));
                return o;
            }
        };
        let arrival = stamps.arrival_ns();
        let body = interpret(SseEvent {
            event: b"",
            data: &bytes,
        });
        let chunk = match body {
            StreamEvent::Chunk(c) if c.implausible_usage().is_some() => {
                seen.stream.error = c.implausible_usage();
                return Outcome::Malformed;
            }
            StreamEvent::Chunk(c) if !ctx.cfg.stream => c,
            StreamEvent::Error(m) => {
                seen.stream.error = Some(m);
                return Outcome::ServerError;
            }
            StreamEvent::Chunk(_) => {
                seen.stream.error = Some(
                    "malformed: a streamed request was answered with one JSON body (the server ignored \"stream\": true)"
                        .into(),
                );
                return Outcome::Malformed;
            }
            _ => {
                seen.stream.error = Some(format!(
                    "malformed: the body is not a completion: {}",
                    clip(&String::from_utf8_lossy(&bytes[..bytes.len().min(200)]))
                ));
                return Outcome::Malformed;
            }
        };
        seen.stream.usage = chunk.usage;
        seen.stream.prompt_usage = chunk.prompt_usage;
        seen.stream.cached_usage = chunk.cached_usage;
        // Without usage, a non-streamed answer counts as one token.
        seen.stream.tokens = chunk
            .usage
            .map_or(1, |u| u32::try_from(u).unwrap_or(u32::MAX));
        if let Some(lag) = stamps.read_lag_ns() {
            ctx.result.borrow_mut().recorders.read_lag.record(lag);
        }
        seen.first_arrival = Some(arrival);
        seen.first_processed = Some(mono_ns());
        seen.last_arrival = arrival;
        seen.end = Some(arrival);
        seen.end_read = Some(stamps.read_ns);
        return Outcome::Completed;
    }
    let mut parser = SseParser::new();
    let cost_ns = (ctx.cfg.client_cost_s * 1e9) as u64;
    loop {
        match resp.chunk().await {
            Ok(Some(piece)) => {
                let stamps = piece.stamps;
                if ctx.wake.send_due(stamps.read_ns) {
                    // The chunk keeps its stamps; its handling waits one turn of the loop.
                    ctx.wake.wake_schedule_if_due(stamps.read_ns);
                    tokio::task::yield_now().await;
                }
                let mut r = ctx.result.borrow_mut();
                parser.feed(piece.bytes, |ev| {
                    on_event(ev, stamps, ctx.start_ns, cost_ns, seen, &mut r)
                });
                drop(r);
                if parser.overflowed() {
                    seen.stream.error = Some(format!(
                        "malformed: a server-sent event line longer than {} MiB or an event longer than {} MiB",
                        MAX_SSE_LINE_BYTES >> 20,
                        MAX_SSE_EVENT_BYTES >> 20
                    ));
                    return Outcome::Malformed;
                }
            }
            Ok(None) => break,
            // After `[DONE]` the stream has ended as far as the API goes; a connection
            // dropped before the HTTP body's own end (llama.cpp's server does that when a
            // new request interrupts a stream) changes nothing: the events decide.
            Err(_) if seen.stream.done => break,
            Err((o, cause)) => {
                let o = match o {
                    Outcome::TimedOut => Outcome::TimedOut,
                    _ => Outcome::StreamBroken,
                };
                seen.stream.error = Some(format!("{}: {cause}", o.key()));
                return o;
            }
        }
    }
    if seen.end.is_none() {
        seen.end = Some(mono_ns());
    }
    if seen.end_read.is_none() {
        seen.end_read = Some(mono_ns());
    }
    match seen.stream.ending(parser.incomplete()) {
        Ending::Completed => Outcome::Completed,
        Ending::ServerError(_) => Outcome::ServerError,
        Ending::Malformed => {
            seen.stream.error = seen.stream.malformed_why.take();
            Outcome::Malformed
        }
        Ending::Truncated => Outcome::Truncated,
    }
}

/// Most of a malformed event quoted in its cause, bytes.
const MALFORMED_QUOTE: usize = 200;

/// Handles one SSE event, stamped as the read that brought its bytes.
fn on_event(
    ev: SseEvent<'_>,
    stamps: Stamps,
    start_ns: u64,
    cost_ns: u64,
    seen: &mut Exchanged,
    r: &mut ShardResult,
) {
    let arrival = stamps.arrival_ns();
    r.events += 1;
    if let Some(lag) = stamps.read_lag_ns() {
        r.recorders.read_lag.record(lag);
    }
    let event = interpret_after(ev, &mut seen.head);
    if event == StreamEvent::Malformed && seen.stream.malformed_why.is_none() {
        seen.stream.malformed_why = Some(format!(
            "malformed: an event that is not a completion chunk: {}",
            clip(&String::from_utf8_lossy(
                &ev.data[..ev.data.len().min(MALFORMED_QUOTE)]
            ))
        ));
    }
    let Some(chunk) = seen.stream.apply(event) else {
        if seen.stream.done {
            seen.end = Some(arrival);
            seen.end_read = Some(stamps.read_ns);
        }
        return;
    };
    if let Some(sent) = chunk.sent_ns {
        r.recorders
            .observer_overhead
            .record(arrival.saturating_sub(sent));
    }
    // The emulated client cost: busy work on this loop, as a slow client's parsing would be.
    if cost_ns > 0 {
        let until = mono_ns() + cost_ns;
        while mono_ns() < until {
            std::hint::spin_loop();
        }
    }
    let processed = mono_ns();
    r.recorders
        .processing
        .record(processed.saturating_sub(stamps.read_ns));
    if chunk.token {
        if let Some(text) = &mut seen.text
            && let Some(t) = text_of(ev.data)
        {
            text.push_str(&t);
        }
        if seen.first_arrival.is_none() {
            seen.first_arrival = Some(arrival);
            seen.first_sent = chunk.sent_ns;
            seen.first_processed = Some(processed);
        } else {
            let gap = arrival.saturating_sub(seen.last_arrival);
            r.recorders.itl.record(gap);
            seen.max_gap = Some(seen.max_gap.map_or(gap, |g| g.max(gap)));
        }
        seen.last_arrival = arrival;
        r.series.at(arrival.saturating_sub(start_ns)).output_tokens += 1;
    }
}
