//! The embedded OpenAI-compatible mock LLM server.
//!
//! A server whose every delay is known, so that whatever a client measures above it is
//! the client. It follows llm-d-inference-sim's behaviour and flag names (see
//! [`config::MockConfig`]): batch slots with a bounded waiting line (429 beyond it),
//! TTFT or prefill time, inter-token latency with jitter, slow-down under load, failure
//! injection, a context-length limit, echo or random text. Unlike it, sub-millisecond
//! latencies are kept exact ([`crate::time::timer::PreciseTimer`], behind [`crate::time::clock::Clock`],
//! which tests swap for tokio's paused clock), and every streamed chunk
//! carries [`api::SENT_FIELD`], the CLOCK_MONOTONIC nanoseconds when it was handed to
//! the connection, so a client on the same host can measure each chunk's delay.
//!
//! With every latency at zero a response is formatted and written in one piece, which is
//! what lets one core serve thousands of 200-token streams per second; its chunks are then
//! stamped once, when the last of them is formatted ([`api::LateStamps`]).

pub mod api;
pub mod config;
pub mod metrics;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::net::yielding::HandOff;
use crate::time::clock::Clock;
use api::{Api, ChunkWriter, GenRequest, LateStamps, Words};
use config::{MockConfig, Mode};
use heisenbench_model::sample::{self, SimRng};
use metrics::Metrics;

/// Largest request body accepted.
const MAX_BODY_BYTES: usize = 16 << 20;

/// Words of the random mode.
const VOCABULARY: [&str; 32] = [
    "the", "queue", "client", "server", "token", "latency", "stream", "loop", "event", "wait",
    "bias", "measure", "load", "rate", "burst", "worker", "chunk", "model", "time", "first",
    "mean", "tail", "shard", "plan", "honest", "bench", "batch", "slot", "decode", "prefill",
    "arrival", "service",
];

/// The response body: written at once, or streamed from a generator task.
pub struct MockBody {
    kind: Kind,
    /// Tokens inside a whole body (its one frame holds them all).
    tokens: u32,
    /// Stream frames before the first token's (the chat role chunk).
    lead: u32,
    prompt_tokens: u32,
    /// Set when the server records what it served.
    track: Option<Track>,
}

enum Kind {
    /// The whole body.
    Full(Option<Bytes>),
    /// A zero-latency stream, written (and its chunks stamped) when the connection asks
    /// for it, so the stamps are taken at the hand-off and not before the response's head.
    Instant(Option<Job>),
    /// Chunks from a generator task.
    Stream(mpsc::Receiver<Bytes>),
}

impl MockBody {
    fn full(b: impl Into<Bytes>) -> Self {
        Self::of(Kind::Full(Some(b.into())))
    }

    fn of(kind: Kind) -> Self {
        Self {
            kind,
            tokens: 0,
            lead: 0,
            prompt_tokens: 0,
            track: None,
        }
    }
}

/// What the server recorded of one response while it handed it to the connection.
struct Track {
    journal: Arc<Journal>,
    clock: Clock,
    served: Served,
    frames: u32,
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
            t.journal.push(t.served);
        }
    }
}

/// One generation request as the server saw it: the server-side truth an audit holds a
/// client's own report against. Times are CLOCK_MONOTONIC nanoseconds
/// ([`crate::time::mono_ns`]), or the scale of the [`Clock`] the mock was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Served {
    /// When the request's head had been read.
    pub arrival_ns: u64,
    /// The response status.
    pub status: u16,
    /// When the frame holding the first token was handed to the connection.
    pub first_token_ns: Option<u64>,
    /// When the frame holding the last token was handed to the connection.
    pub last_token_ns: Option<u64>,
    /// Tokens handed to the connection.
    pub tokens: u32,
    /// Prompt tokens, as the mock counts them (words).
    pub prompt_tokens: u32,
    /// Body bytes handed to the connection.
    pub bytes: u64,
    /// Whether the whole body was handed over (false: the client left early).
    pub complete: bool,
}

/// Every generation request the server answered, in the order their bodies ended.
#[derive(Debug, Default)]
pub struct Journal {
    served: Mutex<Vec<Served>>,
}

impl Journal {
    fn push(&self, s: Served) {
        self.served.lock().expect("journal lock").push(s);
    }

    /// Everything recorded so far, in arrival order.
    pub fn snapshot(&self) -> Vec<Served> {
        let mut v = self.served.lock().expect("journal lock").clone();
        v.sort_by_key(|s| s.arrival_ns);
        v
    }
}

struct State {
    cfg: MockConfig,
    /// The latency law of `cfg`.
    law: heisenbench_model::server::ServerModel,
    slots: Arc<Semaphore>,
    metrics: Metrics,
    /// Failure injection and random text.
    rng: Mutex<Pcg64Mcg>,
    /// The latency law's jitter: the stream the simulator's server draws from under the
    /// same seed, so a seed means the same latencies in both.
    jitter: Mutex<SimRng>,
    next_id: AtomicU64,
    /// Where the mock reads and waits for time.
    clock: Clock,
    /// Where served requests are recorded (audits only).
    journal: Option<Arc<Journal>>,
}

impl State {
    fn new(cfg: MockConfig, clock: Clock, journal: Option<Arc<Journal>>) -> Arc<Self> {
        Arc::new(State {
            slots: Arc::new(Semaphore::new(cfg.max_num_seqs as usize)),
            metrics: Metrics::default(),
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(cfg.seed)),
            jitter: Mutex::new(sample::stream(cfg.seed, sample::purpose::SERVER)),
            next_id: AtomicU64::new(0),
            clock,
            law: cfg.law(),
            cfg,
            journal,
        })
    }

    /// Serves on `listener` until `shutdown` turns true, then lets open responses finish.
    async fn serve(
        self: Arc<Self>,
        listener: std::net::TcpListener,
        shutdown: watch::Receiver<bool>,
    ) {
        let header_timeout = self.cfg.header_timeout;
        let handler = move |req| handle(req, self.clone());
        serve(listener, header_timeout, handler, shutdown).await;
    }

    /// A standard normal draw for the latency law's jitter.
    fn normal(&self) -> f64 {
        sample::standard_normal(&mut *self.jitter.lock().expect("jitter lock"))
    }

    fn running(&self) -> u32 {
        u32::try_from(self.metrics.running.load(Relaxed)).unwrap_or(u32::MAX)
    }

    /// The law's first-token latency for a request of `prompt_tokens`, at the batch now.
    fn ttft(&self, prompt_tokens: u32) -> Duration {
        Duration::from_secs_f64(
            self.law
                .ttft_s(prompt_tokens, self.running(), || self.normal()),
        )
    }

    /// The law's inter-token latency, at the batch now.
    fn itl(&self) -> Duration {
        Duration::from_secs_f64(self.law.itl_s(self.running(), || self.normal()))
    }
}

fn response(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<MockBody> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(MockBody::full(body))
        .expect("static response parts are valid")
}

fn error(status: StatusCode, message: &str, kind: &str, code: &str) -> Response<MockBody> {
    response(
        status,
        "application/json",
        api::error_body(message, kind, code),
    )
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<MockBody>, Infallible> {
    let arrival_ns = state.clock.stamp_ns();
    let generation = req.method() == Method::POST
        && matches!(req.uri().path(), "/v1/completions" | "/v1/chat/completions");
    let mut r = route(req, &state).await;
    if let Some(journal) = &state.journal
        && generation
    {
        let status = r.status().as_u16();
        r.body_mut().track = Some(Track {
            journal: journal.clone(),
            clock: state.clock.clone(),
            served: Served {
                arrival_ns,
                status,
                first_token_ns: None,
                last_token_ns: None,
                tokens: 0,
                prompt_tokens: 0,
                bytes: 0,
                complete: false,
            },
            frames: 0,
        });
    }
    Ok(r)
}

async fn route(req: Request<Incoming>, state: &Arc<State>) -> Response<MockBody> {
    let api = match (req.method(), req.uri().path()) {
        (&Method::GET, "/health") => return response(StatusCode::OK, "text/plain", "OK"),
        (&Method::GET, "/metrics") => {
            return response(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                state.metrics.render(&state.cfg.model),
            );
        }
        (&Method::GET, "/v1/models") => {
            let body = serde_json::json!({
                "object": "list",
                "data": [{ "id": state.cfg.model, "object": "model", "created": 0, "owned_by": "heisenbench" }],
            });
            return response(StatusCode::OK, "application/json", body.to_string());
        }
        (&Method::POST, "/v1/completions") => Api::Completions,
        (&Method::POST, "/v1/chat/completions") => Api::Chat,
        (_, "/v1/completions" | "/v1/chat/completions" | "/v1/models" | "/health" | "/metrics") => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                "invalid_request_error",
                "method_not_allowed",
            );
        }
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "no such endpoint",
                "invalid_request_error",
                "not_found",
            );
        }
    };
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read body: {e}"),
                "invalid_request_error",
                "invalid_request_error",
            );
        }
    };
    generate(api, &body, state.clone()).await
}

async fn generate(api: Api, body: &[u8], state: Arc<State>) -> Response<MockBody> {
    let cfg = &state.cfg;
    // Injected failures come first, as if the server had failed before doing any work.
    if cfg.failure_injection_rate > 0.0 {
        let mut rng = state.rng.lock().expect("rng lock");
        if rng.random::<f64>() * 100.0 < cfg.failure_injection_rate {
            let f = cfg.failure_types[rng.random_range(0..cfg.failure_types.len())];
            drop(rng);
            state.metrics.injected.fetch_add(1, Relaxed);
            let status = StatusCode::from_u16(f.status()).expect("known statuses");
            return response(status, "application/json", api::failure_body(f));
        }
    }
    let g = match api::parse(api, body) {
        Ok(g) => g,
        Err(m) => {
            return error(
                StatusCode::BAD_REQUEST,
                &m,
                "invalid_request_error",
                "invalid_request_error",
            );
        }
    };
    if let Some(m) = &g.model
        && m != &cfg.model
    {
        return error(
            StatusCode::NOT_FOUND,
            &format!("The model '{m}' does not exist"),
            "invalid_request_error",
            "model_not_found",
        );
    }
    let prompt_tokens = u32::try_from(g.prompt_words.len()).unwrap_or(u32::MAX);
    if u64::from(prompt_tokens) + u64::from(g.max_tokens) > u64::from(cfg.max_model_len) {
        let m = format!(
            "This model's maximum context length is {} tokens; the request asks for {} ({} in the prompt, {} to generate)",
            cfg.max_model_len,
            u64::from(prompt_tokens) + u64::from(g.max_tokens),
            prompt_tokens,
            g.max_tokens
        );
        return error(
            StatusCode::BAD_REQUEST,
            &m,
            "invalid_request_error",
            "context_length_exceeded",
        );
    }
    // Admission: a free slot, else a place in the waiting line, else 429.
    let arrived = state.clock.now();
    let permit = match state.slots.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => {
            let waiting = state.metrics.waiting.fetch_add(1, Relaxed);
            if waiting >= u64::from(cfg.max_waiting_queue_length) {
                state.metrics.waiting.fetch_sub(1, Relaxed);
                state.metrics.rejected.fetch_add(1, Relaxed);
                return error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "the waiting queue is full",
                    "rate_limit_exceeded",
                    "rate_limit_exceeded",
                );
            }
            let p = state
                .slots
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            state.metrics.waiting.fetch_sub(1, Relaxed);
            p
        }
    };
    let start = state.clock.now();
    state
        .metrics
        .queue
        .observe_ns((start - arrived).as_nanos() as u64);
    state.metrics.running.fetch_add(1, Relaxed);
    state
        .metrics
        .prompt_tokens
        .fetch_add(u64::from(prompt_tokens), Relaxed);
    let (tokens, finish) = text(&g, &state);
    let id = state.next_id.fetch_add(1, Relaxed);
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let job = Job {
        state: state.clone(),
        g,
        tokens,
        finish,
        prompt_tokens,
        id,
        created,
        start,
        _permit: permit,
    };
    let n = u32::try_from(job.tokens.len()).unwrap_or(u32::MAX);
    if !job.g.stream {
        let mut r = job.whole().await;
        r.body_mut().tokens = n;
        r.body_mut().prompt_tokens = prompt_tokens;
        return r;
    }
    if cfg.is_instant() {
        let mut body = MockBody::of(Kind::Instant(Some(job)));
        body.tokens = n;
        body.prompt_tokens = prompt_tokens;
        return sse(body);
    }
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(job.timed_stream(tx));
    let mut body = MockBody::of(Kind::Stream(rx));
    body.lead = u32::from(api == Api::Chat);
    body.prompt_tokens = prompt_tokens;
    sse(body)
}

fn sse(body: MockBody) -> Response<MockBody> {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .expect("static response parts are valid")
}

/// The tokens of the response (each with its trailing space) and the finish reason.
fn text(g: &GenRequest, state: &State) -> (Words, &'static str) {
    let n_max = g.max_tokens as usize;
    let mut tokens = Words::default();
    match state.cfg.mode {
        Mode::Echo => {
            // An empty prompt echoes one empty word.
            let words = g.prompt_words.len().max(1);
            let n = if g.ignore_eos {
                n_max
            } else {
                n_max.min(words)
            };
            let finish = if g.ignore_eos || words > n_max {
                "length"
            } else {
                "stop"
            };
            for i in 0..n {
                tokens.push_spaced(if g.prompt_words.is_empty() {
                    ""
                } else {
                    g.prompt_words.get(i % words)
                });
            }
            (tokens, finish)
        }
        Mode::Random => {
            let mut rng = state.rng.lock().expect("rng lock");
            let n = if g.ignore_eos {
                n_max
            } else {
                rng.random_range(1..=n_max)
            };
            let finish = if n == n_max { "length" } else { "stop" };
            for _ in 0..n {
                tokens.push_spaced(VOCABULARY[rng.random_range(0..VOCABULARY.len())]);
            }
            (tokens, finish)
        }
    }
}

/// One admitted request; holds its slot until dropped.
struct Job {
    state: Arc<State>,
    g: GenRequest,
    tokens: Words,
    finish: &'static str,
    prompt_tokens: u32,
    id: u64,
    created: u64,
    start: Instant,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Job {
    fn drop(&mut self) {
        self.state.metrics.running.fetch_sub(1, Relaxed);
    }
}

impl Job {
    fn finished(&self, emitted: usize, end: Instant) {
        let m = &self.state.metrics;
        m.generation_tokens.fetch_add(emitted as u64, Relaxed);
        m.e2e.observe_ns((end - self.start).as_nanos() as u64);
        if emitted == self.tokens.len() {
            let counter = if self.finish == "stop" {
                &m.success_stop
            } else {
                &m.success_length
            };
            counter.fetch_add(1, Relaxed);
        }
    }

    /// The whole SSE body at once (every latency zero).
    fn instant_stream(self) -> Bytes {
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
            w.usage_chunk(&mut out, self.prompt_tokens, n as u32, pending);
            late.note(&out, before);
        }
        ChunkWriter::done(&mut out);
        late.fill(&mut out, clock.stamp_ns());
        let now = clock.now();
        self.state
            .metrics
            .ttft
            .observe_ns((now - self.start).as_nanos() as u64);
        for _ in 1..n {
            self.state.metrics.itl.observe_ns(0);
        }
        self.finished(n, now);
        Bytes::from(out)
    }

    /// Streams with the configured delays; stops when the client goes away.
    async fn timed_stream(self, tx: mpsc::Sender<Bytes>) {
        let w = ChunkWriter::new(self.g.api, self.id, &self.state.cfg.model, self.created);
        let clock = &self.state.clock;
        let mut buf = Vec::with_capacity(512);
        w.role_chunk(&mut buf, clock.stamp_ns());
        if !buf.is_empty()
            && tx
                .send(Bytes::from(std::mem::take(&mut buf)))
                .await
                .is_err()
        {
            return;
        }
        let n = self.tokens.len();
        let mut deadline = self.start + self.state.ttft(self.prompt_tokens);
        let mut last = self.start;
        for i in 0..n {
            if i > 0 {
                deadline += self.state.itl();
            }
            clock.sleep_until(deadline).await;
            let now = clock.now();
            if i == 0 {
                self.state
                    .metrics
                    .ttft
                    .observe_ns((now - self.start).as_nanos() as u64);
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
                    w.usage_chunk(&mut buf, self.prompt_tokens, n as u32, clock.stamp_ns());
                }
                ChunkWriter::done(&mut buf);
            }
            if tx
                .send(Bytes::from(std::mem::take(&mut buf)))
                .await
                .is_err()
            {
                self.finished(i + 1, now);
                return;
            }
        }
        self.finished(n, last);
    }

    /// The non-streaming answer, after the whole generation time.
    async fn whole(self) -> Response<MockBody> {
        let n = self.tokens.len();
        let mut ttft = Duration::ZERO;
        if !self.state.cfg.is_instant() {
            ttft = self.state.ttft(self.prompt_tokens);
            let mut total = ttft;
            for _ in 1..n {
                let itl = self.state.itl();
                self.state.metrics.itl.observe_ns(itl.as_nanos() as u64);
                total += itl;
            }
            self.state.clock.sleep_until(self.start + total).await;
        }
        let text = self.tokens.concat();
        let body = api::full_response(
            &api::Head {
                api: self.g.api,
                id: self.id,
                model: &self.state.cfg.model,
                created: self.created,
            },
            text,
            self.finish,
            self.prompt_tokens,
            n as u32,
        );
        // Nothing is sent before the end: the TTFT recorded is the generation's own.
        self.state.metrics.ttft.observe_ns(ttft.as_nanos() as u64);
        self.finished(n, self.state.clock.now());
        response(StatusCode::OK, "application/json", body)
    }
}

/// One answer of a page server ([`MockServer::serve_pages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

/// Why the mock could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    /// A flag is out of range.
    #[error(transparent)]
    Config(#[from] heisenbench_model::ModelError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A running mock server on its own threads. Dropping it shuts it down.
pub struct MockServer {
    addr: SocketAddr,
    shutdown: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockServer {
    /// Binds (port 0 picks a free port) and starts serving on a runtime of
    /// `cfg.threads` threads.
    pub fn start(cfg: MockConfig) -> Result<Self, MockError> {
        Self::start_with(cfg, None)
    }

    /// Starts like [`MockServer::start`], recording every generation request it answers
    /// in the journal returned.
    pub fn start_recorded(cfg: MockConfig) -> Result<(Self, Arc<Journal>), MockError> {
        let journal = Arc::new(Journal::default());
        Ok((Self::start_with(cfg, Some(journal.clone()))?, journal))
    }

    fn start_with(cfg: MockConfig, journal: Option<Arc<Journal>>) -> Result<Self, MockError> {
        cfg.validate()?;
        let addr = SocketAddr::new(cfg.host, cfg.port);
        let (listener, addr) = bind(addr)?;
        let runtime = if cfg.threads == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cfg.threads)
                .enable_all()
                .build()
        }
        .map_err(MockError::Runtime)?;
        let (shutdown, rx) = watch::channel(false);
        let state = State::new(cfg, Clock::host(), journal);
        let thread = std::thread::Builder::new()
            .name("heisenbench-mock".into())
            .spawn(move || runtime.block_on(state.serve(listener, rx)))
            .map_err(MockError::Runtime)?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Serves `pages` (a path and a query in, a [`Page`] out) on the mock's HTTP server code
    /// instead of the mock: GET requests only, each answered on a blocking thread so that a
    /// page's computation never holds up the connections.
    pub fn serve_pages<P>(addr: SocketAddr, pages: P) -> Result<Self, MockError>
    where
        P: Fn(&str, &str) -> Page + Send + Sync + 'static,
    {
        let (listener, addr) = bind(addr)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(MockError::Runtime)?;
        let (shutdown, rx) = watch::channel(false);
        let pages = Arc::new(pages);
        let handler = move |req: Request<Incoming>| {
            let pages = pages.clone();
            async move {
                if req.method() != Method::GET {
                    return Ok(error(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "method not allowed",
                        "invalid_request_error",
                        "method_not_allowed",
                    ));
                }
                let path = req.uri().path().to_string();
                let query = req.uri().query().unwrap_or("").to_string();
                let page = tokio::task::spawn_blocking(move || pages(&path, &query))
                    .await
                    .unwrap_or_else(|_| Page {
                        status: 500,
                        content_type: "text/plain",
                        body: b"the page failed".to_vec(),
                    });
                Ok(Response::builder()
                    .status(
                        StatusCode::from_u16(page.status)
                            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    )
                    .header("content-type", page.content_type)
                    .header("cache-control", "no-store")
                    .body(MockBody::full(page.body))
                    .expect("static response parts are valid"))
            }
        };
        let thread = std::thread::Builder::new()
            .name("heisenbench-pages".into())
            .spawn(move || runtime.block_on(serve(listener, config::HEADER_TIMEOUT, handler, rx)))
            .map_err(MockError::Runtime)?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets open responses finish (up to two seconds), and returns.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves the mock on the caller's tokio runtime, reading time from `clock`, until
/// `shutdown` turns true; returns once open responses have finished (at most two seconds
/// later). [`MockServer`] is this on runtime threads of its own with the host's clock;
/// tests give it [`Clock::tokio`] under paused time, where every latency is exact virtual
/// time. With a journal, every generation request is recorded in it, on `clock`'s scale.
pub async fn serve_with(
    cfg: MockConfig,
    listener: std::net::TcpListener,
    clock: Clock,
    journal: Option<Arc<Journal>>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), MockError> {
    cfg.validate()?;
    listener
        .set_nonblocking(true)
        .map_err(|source| MockError::Bind {
            addr: listener
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        })?;
    State::new(cfg, clock, journal)
        .serve(listener, shutdown)
        .await;
    Ok(())
}

/// A non-blocking listener on `addr` (port 0: any free port), and the address it got.
fn bind(addr: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), MockError> {
    let fail = |source| MockError::Bind { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(fail)?;
    listener.set_nonblocking(true).map_err(fail)?;
    let bound = listener.local_addr().map_err(fail)?;
    Ok((listener, bound))
}

/// How long open connections get to finish after a shutdown request.
const DRAIN: Duration = Duration::from_secs(2);

async fn serve<H, F>(
    listener: std::net::TcpListener,
    header_timeout: Duration,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Result<Response<MockBody>, Infallible>> + Send + 'static,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(_) => return,
    };
    let open = Arc::new(AtomicU64::new(0));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let mut stop = shutdown.clone();
                let open = open.clone();
                open.fetch_add(1, Relaxed);
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(handler);
                    // The header timer also runs while a kept-alive connection waits for its
                    // next request, so it closes idle and half-sent connections alike.
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(hyper_util::rt::TokioIo::new(HandOff::new(stream)), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                    open.fetch_sub(1, Relaxed);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    let deadline = tokio::time::Instant::now() + DRAIN;
    while open.load(Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
