//! One shard: a single-threaded runtime replaying its slice of the schedule.
//!
//! Each request is sent at its intended time (a microsecond timer, never tokio's 1 ms
//! wheel). Every read of the response carries the kernel's stamp of its bytes' arrival
//! (the shard's own reader; through reqwest, the read is stamped as it reaches the
//! request's task) and the time it returned, before any parsing; each event's processing
//! is stamped again afterwards. Latencies are measured from the arrival stamps, from the
//! intended send and from the actual send; the read's lateness after the arrival is the
//! read lag.
//!
//! This file plans and records (the slice, the sends on time, each request's outcome
//! into the shard's result); `shard/payload.rs` makes a request's body before it is due,
//! and `shard/exchange.rs` writes it and reads the response.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use heisenbench_model::layout::Conversation;
use heisenbench_model::metrics::{Convention, Marks, Origin};
use heisenbench_model::scenario::{Arrivals, Stop};
use heisenbench_model::schedule::{Planned, Schedule, user_shapes};
use heisenbench_model::slo::{Judged, Verdict};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::config::RunConfig;
use super::result::{CacheUsage, Outcome, Row, ShardResult};
use super::stop::{GRACE, StopSignal};
use super::wake::ScheduleWake;
use crate::net::http1::Wire;
use crate::time::{mono_ns, thread_cpu_ns};

mod exchange;
mod payload;

use exchange::{Exchanged, exchange};
use payload::PromptMaker;

use crate::openai::prompt::ChatMessage;

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
            let Arrivals::Closed {
                users,
                think_s,
                turns,
            } = ctx.cfg.workload.arrivals
            else {
                unreachable!("only closed loops lack a schedule")
            };
            for user in (ctx.shard..users).step_by(ctx.cfg.shards as usize) {
                let (c, stop) = (ctx.clone(), stop.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    tokio::select! {
                        () = closed_user(&c, user, users, think_s, turns) => {}
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

/// One user of a closed loop: send, wait for the whole response, think, repeat. A user
/// holding conversations sends each turn with the conversation so far (its messages and
/// the server's replies as they came) before its new message.
async fn closed_user(ctx: &Rc<Ctx>, user: u32, users: u32, think_s: f64, turns: u32) {
    let mut shapes = user_shapes(&ctx.cfg.workload, ctx.cfg.seed, user);
    let mut conversation = Conversation::new(turns);
    let mut history: Vec<ChatMessage> = Vec::new();
    let mut index = u64::from(user);
    // Users start with the run, as an open loop's schedule does: a request sent before the
    // start would have no intended time to count from.
    let early = ctx.start_ns.saturating_sub(mono_ns());
    if early > 0 {
        tokio::time::sleep(Duration::from_nanos(early)).await;
    }
    loop {
        let now_rel = mono_ns().saturating_sub(ctx.start_ns);
        let go = match ctx.cfg.workload.stop {
            Stop::Count { requests } => index < requests,
            Stop::Duration { seconds } => (now_rel as f64) < seconds * 1e9,
        };
        if !go {
            return;
        }
        let drawn = shapes.next().unwrap_or((1, 1));
        let (input_tokens, output_tokens) = ctx.cfg.workload.lengths_of(index, drawn);
        ctx.result.borrow_mut().scheduled += 1;
        let mut p = Planned {
            index,
            at_ns: now_rel,
            input_tokens,
            output_tokens,
        };
        let (payload, turn) = if turns > 1 {
            let t = conversation.next((input_tokens, output_tokens));
            if t.turn == 1 {
                history.clear();
            }
            (p.input_tokens, p.output_tokens) = (t.input, t.output);
            history.push(ChatMessage {
                role: "user".into(),
                content: ctx.cfg.prompts.text(t.message, ctx.cfg.seed, index),
            });
            (
                ctx.prompts.conversation_body(&ctx.cfg, &p, &history),
                t.turn,
            )
        } else {
            (ctx.prompts.body(&ctx.cfg, &p), 0)
        };
        // A closed loop's intended time is when the user is ready: now, its body made.
        p.at_ns = mono_ns().saturating_sub(ctx.start_ns);
        ctx.result.borrow_mut().series.at(p.at_ns).offered += 1;
        let reply = request(ctx, p, None, payload).await;
        if turn > 0 {
            history.push(ChatMessage {
                role: "assistant".into(),
                content: reply.text.unwrap_or_default(),
            });
            if let Some(ttft) = reply.ttft_ns {
                ctx.result.borrow_mut().record_turn(turn, ttft);
            }
        }
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
            write_ns: None,
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
/// What a closed-loop user needs of its request: the reply's text (kept when a tokenizer
/// counts it or a conversation re-sends it) and, for a measured completed request, its
/// TTFT from the intended send.
#[derive(Debug, Default)]
struct Reply {
    text: Option<String>,
    ttft_ns: Option<u64>,
}

async fn request(ctx: &Rc<Ctx>, p: Planned, woken: Option<Woken>, payload: Vec<u8>) -> Reply {
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
        text: (ctx.counter.is_some() || ctx.cfg.workload.turns() > 1).then(String::new),
        ..Exchanged::default()
    };
    let outcome = tokio::select! {
        o = tokio::time::timeout(ctx.timeout, exchange(ctx, p.index, payload, &mut seen)) => {
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
    let mut reply = Reply {
        text: seen.text.take(),
        ttft_ns: None,
    };
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
            write_ns: seen.write.map(rel),
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
        return reply;
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
        reply.ttft_ns = Some(first.saturating_sub(intended));
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
    reply
}
