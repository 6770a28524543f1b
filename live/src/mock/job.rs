//! One admitted generation, from its slot to its last token: written at once, streamed on
//! its latency law's times, or answered whole.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::api::{self, ChunkWriter, GenRequest, LateStamps, Words};
use super::state::ServerState;

/// One admitted request; holds its slot until dropped.
pub(super) struct Job {
    pub(super) state: Arc<ServerState>,
    pub(super) g: GenRequest,
    pub(super) tokens: Words,
    pub(super) finish: &'static str,
    pub(super) prompt_tokens: u32,
    /// Prompt tokens the prefix cache served (their prefill is not paid).
    pub(super) cached_tokens: u32,
    pub(super) id: u64,
    pub(super) created: u64,
    /// When the request was admitted to the waiting line (the server's TTFT counts from it).
    pub(super) arrived: Instant,
    /// When it took its slot (the prefill counts from it).
    pub(super) start: Instant,
    pub(super) _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Job {
    fn drop(&mut self) {
        self.state.metrics.running.fetch_sub(1, Relaxed);
    }
}

impl Job {
    /// The usage of this response once `completion` tokens are out.
    fn usage(&self, completion: u32) -> api::Usage {
        api::Usage {
            prompt: self.prompt_tokens,
            completion,
            cached: self
                .state
                .prefix_cache
                .is_some()
                .then_some(self.cached_tokens),
        }
    }

    pub(super) fn finished(&self, emitted: usize, end: Instant) {
        let m = &self.state.metrics;
        m.generation_tokens.fetch_add(emitted as u64, Relaxed);
        m.e2e.observe_ns((end - self.arrived).as_nanos() as u64);
        if emitted == self.tokens.len() {
            let counter = if self.finish == "stop" {
                &m.success_stop
            } else {
                &m.success_length
            };
            counter.fetch_add(1, Relaxed);
        }
    }

    /// The first token is out at `at`: the server's TTFT (from arrival, the queue
    /// included, as vLLM counts it) and the prefill (from the slot).
    fn first_token(&self, at: Instant) {
        let m = &self.state.metrics;
        m.ttft.observe_ns((at - self.arrived).as_nanos() as u64);
        m.prefill.observe_ns((at - self.start).as_nanos() as u64);
    }

    /// The whole SSE body at once (every latency zero).
    pub(super) fn instant_stream(self) -> Bytes {
        let w = ChunkWriter::new(self.g.api, self.id, &self.state.cfg.model, self.created);
        let mut out = Vec::with_capacity(256 * (self.tokens.len() + 2));
        let clock = &self.state.clock;
        let mut late = LateStamps::default();
        let pending = LateStamps::PENDING;
        let mut before = out.len();
        w.role_chunk(&mut out, pending);
        late.note(&out, before);
        let n = self.tokens.len();
        for (i, t) in self.tokens.iter().enumerate() {
            let finish = (i + 1 == n).then_some(self.finish);
            before = out.len();
            w.token_chunk(&mut out, t, finish, pending);
            late.note(&out, before);
        }
        if self.g.include_usage {
            before = out.len();
            w.usage_chunk(&mut out, self.usage(n as u32), pending);
            late.note(&out, before);
        }
        ChunkWriter::done(&mut out);
        late.fill(&mut out, clock.stamp_ns());
        let now = clock.now();
        self.first_token(now);
        self.state.metrics.decode.observe_ns(0);
        for _ in 1..n {
            self.state.metrics.itl.observe_ns(0);
        }
        self.finished(n, now);
        Bytes::from(out)
    }

    /// Streams with the configured delays; stops when the client goes away.
    pub(super) async fn timed_stream(self, tx: mpsc::Sender<Bytes>) {
        let w = ChunkWriter::new(self.g.api, self.id, &self.state.cfg.model, self.created);
        let clock = &self.state.clock;
        let mut buf = Vec::with_capacity(512);
        w.role_chunk(&mut buf, clock.stamp_ns());
        if !buf.is_empty() && tx.send(Bytes::copy_from_slice(&buf)).await.is_err() {
            return;
        }
        buf.clear();
        let n = self.tokens.len();
        let mut deadline = self
            .state
            .released(self.start + self.state.ttft(self.prompt_tokens - self.cached_tokens));
        let mut last = self.start;
        let mut first = self.start;
        // When the previous token was handed over.
        let mut handed = self.start;
        for i in 0..n {
            if i > 0 {
                deadline += self.state.itl();
                if handed >= deadline {
                    self.state.metrics.due_together.fetch_add(1, Relaxed);
                }
            }
            clock.sleep_until(deadline).await;
            let now = clock.now();
            self.state
                .metrics
                .lateness
                .observe_ns(now.saturating_duration_since(deadline).as_nanos() as u64);
            if i == 0 {
                self.first_token(now);
                first = now;
            } else {
                self.state
                    .metrics
                    .itl
                    .observe_ns((now - last).as_nanos() as u64);
            }
            last = now;
            let finish = (i + 1 == n).then_some(self.finish);
            w.token_chunk(&mut buf, self.tokens.get(i), finish, clock.stamp_ns());
            if i + 1 == n {
                if self.g.include_usage {
                    w.usage_chunk(&mut buf, self.usage(n as u32), clock.stamp_ns());
                }
                ChunkWriter::done(&mut buf);
            }
            // One allocation of the chunk's size; `buf` keeps its capacity for the next.
            let chunk = Bytes::copy_from_slice(&buf);
            buf.clear();
            if tx.send(chunk).await.is_err() {
                self.finished(i + 1, now);
                return;
            }
            handed = clock.now();
        }
        self.state
            .metrics
            .decode
            .observe_ns((last - first).as_nanos() as u64);
        self.finished(n, last);
    }

    /// The non-streaming answer's JSON, after the whole generation time.
    pub(super) async fn whole(self) -> Bytes {
        let n = self.tokens.len();
        let mut ttft = Duration::ZERO;
        let mut total = Duration::ZERO;
        if !self.state.cfg.is_instant() {
            ttft = self.state.ttft(self.prompt_tokens - self.cached_tokens);
            total = ttft;
            for _ in 1..n {
                let itl = self.state.itl();
                self.state.metrics.itl.observe_ns(itl.as_nanos() as u64);
                total += itl;
            }
            self.state.clock.sleep_until(self.start + total).await;
        }
        let text = self.tokens.concat();
        let body = api::full_response(
            &api::Identity {
                api: self.g.api,
                id: self.id,
                model: &self.state.cfg.model,
                created: self.created,
            },
            text,
            self.finish,
            self.usage(n as u32),
        );
        // Nothing is sent before the end: the TTFT recorded is the generation's own.
        self.first_token(self.start + ttft);
        self.state
            .metrics
            .decode
            .observe_ns((total - ttft).as_nanos() as u64);
        self.finished(n, self.state.clock.now());
        body.into()
    }
}
