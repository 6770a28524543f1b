//! The response body: written at once, a zero-latency stream formatted when the
//! connection asks for it, or a timed stream from a generator task; recorded in the journal
//! as it is handed over.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

use super::job::Job;
use super::journal::{Journal, Served};
use crate::time::clock::Clock;

/// The response body: written at once, or streamed from a generator task.
pub struct MockBody {
    pub(super) kind: Kind,
    /// Tokens inside a whole body (its one frame holds them all).
    pub(super) tokens: u32,
    /// Stream frames before the first token's (the chat role chunk).
    pub(super) lead: u32,
    pub(super) prompt_tokens: u32,
    /// The response's id (`cmpl-ID`, `chatcmpl-ID`), where it got one.
    pub(super) id: Option<u64>,
    /// Set when the server records what it served.
    pub(super) track: Option<Track>,
}

pub(super) enum Kind {
    /// The whole body.
    Full(Option<Bytes>),
    /// A zero-latency stream, written (and its chunks stamped) when the connection asks
    /// for it, so the stamps are taken at the hand-off and not before the response's head.
    Instant(Option<Job>),
    /// Chunks from a generator task.
    Stream(mpsc::Receiver<Bytes>),
}

impl MockBody {
    pub(super) fn full(b: impl Into<Bytes>) -> Self {
        Self::of(Kind::Full(Some(b.into())))
    }

    pub(super) fn of(kind: Kind) -> Self {
        Self {
            kind,
            tokens: 0,
            lead: 0,
            prompt_tokens: 0,
            id: None,
            track: None,
        }
    }
}

/// What the server recorded of one response while it handed it to the connection.
pub(super) struct Track {
    pub(super) journal: Arc<Journal>,
    pub(super) clock: Clock,
    pub(super) served: Served,
    pub(super) frames: u32,
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let (polled, whole) = match &mut this.kind {
            Kind::Full(b) => (Poll::Ready(b.take()), true),
            Kind::Instant(job) => (Poll::Ready(job.take().map(Job::instant_stream)), true),
            Kind::Stream(rx) => (rx.poll_recv(cx), false),
        };
        if let (Some(t), Poll::Ready(o)) = (&mut this.track, &polled) {
            match o {
                Some(b) => {
                    let now = t.clock.stamp_ns();
                    t.frames += 1;
                    t.served.bytes += b.len() as u64;
                    if whole {
                        t.served.tokens = this.tokens;
                    } else if t.frames > this.lead {
                        t.served.tokens += 1;
                    }
                    if t.served.tokens > 0 {
                        t.served.first_token_ns.get_or_insert(now);
                        t.served.last_token_ns = Some(now);
                    }
                }
                None => t.served.complete = true,
            }
        }
        polled.map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

impl Drop for MockBody {
    fn drop(&mut self) {
        if let Some(mut t) = self.track.take() {
            if matches!(self.kind, Kind::Full(None) | Kind::Instant(None)) {
                t.served.complete = true;
            }
            t.served.prompt_tokens = self.prompt_tokens;
            t.served.id = self.id;
            t.journal.push(t.served);
        }
    }
}
