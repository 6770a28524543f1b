//! The embedded OpenAI-compatible mock LLM server.
//!
//! A server whose every delay is known, so that whatever a client measures above it is
//! the client. It follows llm-d-inference-sim's behaviour and flag names (see
//! [`config::MockConfig`]): batch slots with a bounded waiting line (429 beyond it),
//! TTFT or prefill time, inter-token latency with jitter, slow-down under load, failure
//! injection, a context-length limit, echo or random text. Unlike it, sub-millisecond
//! latencies are kept exact ([`crate::time::timer::Pacer`], behind [`crate::time::clock::Clock`],
//! which tests swap for tokio's paused clock), and every streamed chunk
//! carries [`api::SENT_FIELD`], the CLOCK_MONOTONIC nanoseconds when it was handed to
//! the connection, so a client on the same host can measure each chunk's delay.
//!
//! With every latency at zero a response is formatted and written in one piece, which is
//! what lets one core serve thousands of 200-token streams per second; its chunks are then
//! stamped once, when the last of them is formatted ([`api::LateStamps`]).

pub mod api;
mod body;
pub mod config;
mod handler;
mod job;
mod journal;
pub mod metrics;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

pub use body::MockBody;
use config::MockConfig;
pub use journal::{Journal, RequestTag, Served};
use state::ServerState;

use crate::net::server::{Running, ServeError, bind};
use crate::time::clock::Clock;

/// Largest request body accepted.
const MAX_BODY_BYTES: usize = 16 << 20;

/// Words of the random mode.
const VOCABULARY: [&str; 32] = [
    "the", "queue", "client", "server", "token", "latency", "stream", "loop", "event", "wait",
    "bias", "measure", "load", "rate", "burst", "worker", "chunk", "model", "time", "first",
    "mean", "tail", "shard", "plan", "honest", "bench", "batch", "slot", "decode", "prefill",
    "arrival", "service",
];

/// Why the mock could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    /// A flag is out of range.
    #[error(transparent)]
    Config(#[from] heisenbench_model::ModelError),
    /// The address could not be bound, or the runtime not started.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// A running mock server on its own threads. Dropping it shuts it down.
pub struct MockServer {
    server: Running,
    state: Arc<ServerState>,
    /// Keeps the kernel stamping arrivals while a journal's mock runs.
    _stamping: Option<crate::net::receive_stamps::Stamping>,
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
        .map_err(ServeError::Runtime)?;
        let stamping = journal
            .is_some()
            .then(crate::net::receive_stamps::Stamping::start)
            .flatten();
        let state = ServerState::new(cfg, Clock::host(), journal);
        let serving = state.clone();
        let server = Running::spawn("heisenbench-mock", runtime, listener, addr, |l, rx| {
            handler::serve(serving, l, rx)
        })?;
        Ok(Self {
            server,
            state,
            _stamping: stamping,
        })
    }

    /// Its `/metrics` exposition, rendered by the caller's thread from the mock's counters
    /// (an embedded mock's metrics read without asking its loop to answer a request).
    pub fn exposition(&self) -> impl Fn() -> String + Send + Sync + 'static {
        let state = self.state.clone();
        move || state.metrics.render(&state.cfg.model)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The base URL, `http://host:port`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Stops accepting, lets open responses finish (up to two seconds), and returns.
    pub fn shutdown(self) {
        self.server.shutdown();
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
        .map_err(|source| ServeError::Bind {
            addr: listener
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        })?;
    handler::serve(ServerState::new(cfg, clock, journal), listener, shutdown).await;
    Ok(())
}
