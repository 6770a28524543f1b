//! One exchange: the request written, its response read to the end through the shard's
//! own HTTP/1.1 reader (or reqwest), each read stamped and each event interpreted as it
//! arrives; what it saw is kept for the recording.

use std::rc::Rc;

use heisenbench_model::limits::{MAX_RESPONSE_BYTES, MAX_SSE_EVENT_BYTES, MAX_SSE_LINE_BYTES};

use super::Ctx;
use crate::generator::result::{Outcome, ShardResult};
use crate::net::http1::{Piece, WireError};
use crate::net::receive_stamps::Stamps;
use crate::openai::sse::{SseEvent, SseParser};
use crate::openai::stream::{
    Ending, RepeatedHead, StreamEvent, StreamState, clip, error_text, interpret, interpret_after,
    text_of,
};
use crate::time::mono_ns;

/// What one exchange saw (CLOCK_MONOTONIC ns).
#[derive(Default)]
pub(super) struct Exchanged {
    pub(super) headers: Option<u64>,
    /// When the write of the request began, where the shard's own reader wrote it.
    pub(super) write: Option<u64>,
    pub(super) first_arrival: Option<u64>,
    /// The server's stamp on the first token's chunk, when it sends one.
    pub(super) first_sent: Option<u64>,
    pub(super) first_processed: Option<u64>,
    pub(super) last_arrival: u64,
    /// The largest gap between two token chunks' arrivals.
    pub(super) max_gap: Option<u64>,
    /// When the response's end arrived.
    pub(super) end: Option<u64>,
    /// When the read that brought its end returned: the client has it all from then (the
    /// run's duration ends at the last of these, so a loop's backlog counts against its
    /// rate).
    pub(super) end_read: Option<u64>,
    pub(super) stream: StreamState,
    /// The leading members this stream's chunks repeat, read once.
    pub(super) head: RepeatedHead,
    /// The streamed text, kept when a tokenizer is to count its tokens.
    pub(super) text: Option<String>,
}

pub(super) fn classify(e: &reqwest::Error) -> Outcome {
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
async fn send<'c>(
    ctx: &'c Ctx,
    payload: Vec<u8>,
    request_id: &str,
) -> Result<Reply<'c>, (Outcome, String)> {
    if let Some(wire) = &ctx.wire {
        return match wire.post(&payload, Some(request_id)).await {
            Ok(r) => Ok(Reply::Own(r)),
            Err(e) => Err((broken(&e), e.to_string())),
        };
    }
    let mut req = ctx
        .client
        .post(&ctx.endpoint)
        .header("content-type", "application/json")
        .header("x-request-id", request_id)
        .body(payload);
    if let Some(a) = &ctx.auth {
        req = req.header("authorization", a);
    }
    match req.send().await {
        Ok(r) => Ok(Reply::Pooled(r, bytes::Bytes::new())),
        Err(e) => Err((classify(&e), crate::net::client::error_chain(&e))),
    }
}

/// Sends request `index` of the schedule and reads its answer into `seen`.
pub(super) async fn exchange(
    ctx: &Rc<Ctx>,
    index: u64,
    payload: Vec<u8>,
    seen: &mut Exchanged,
) -> Outcome {
    let mut resp = match send(ctx, payload, &super::super::request_id(index)).await {
        Ok(r) => r,
        Err((outcome, cause)) => {
            seen.stream.error = Some(format!("{}: {cause}", outcome.key()));
            return outcome;
        }
    };
    seen.headers = Some(mono_ns());
    if let Reply::Own(r) = &resp {
        seen.write = Some(r.write_ns);
    }
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
