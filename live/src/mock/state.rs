//! The server's state: its config and latency law, the slots, the metrics, the random
//! streams, the clock and the prefix cache; what one request asks of them.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use tokio::sync::Semaphore;

use super::api::Words;
use super::config::MockConfig;
use super::journal::Journal;
use super::metrics::Metrics;
use crate::time::clock::Clock;
use heisenbench_model::prefix_cache::PrefixCache;
use heisenbench_model::sample::{self, SimRng};

pub(super) struct ServerState {
    pub(super) cfg: MockConfig,
    /// The latency law of `cfg`.
    pub(super) law: heisenbench_model::server::ServerModel,
    pub(super) slots: Arc<Semaphore>,
    pub(super) metrics: Metrics,
    /// Failure injection and random text.
    pub(super) rng: Mutex<Pcg64Mcg>,
    /// The latency law's jitter: the stream the simulator's server draws from under the
    /// same seed, so a seed means the same latencies in both.
    pub(super) jitter: Mutex<SimRng>,
    pub(super) next_id: AtomicU64,
    /// Where the mock reads and waits for time.
    pub(super) clock: Clock,
    /// When the server started: [`MockConfig::release_every`]'s periods count from it.
    pub(super) epoch: Instant,
    /// Where served requests are recorded (audits only).
    pub(super) journal: Option<Arc<Journal>>,
    /// The prefix cache, when it is on.
    pub(super) prefix_cache: Option<Mutex<PrefixCache>>,
}

impl ServerState {
    pub(super) fn new(cfg: MockConfig, clock: Clock, journal: Option<Arc<Journal>>) -> Arc<Self> {
        let metrics = Metrics::default();
        let law = cfg.law();
        let prefix_cache = law.prefix_cache.map(|shape| {
            metrics
                .kv_cache_capacity
                .store(u64::from(shape.capacity_blocks), Relaxed);
            Mutex::new(PrefixCache::new(shape))
        });
        Arc::new(ServerState {
            slots: Arc::new(Semaphore::new(cfg.max_num_seqs as usize)),
            metrics,
            prefix_cache,
            rng: Mutex::new(Pcg64Mcg::seed_from_u64(cfg.seed)),
            jitter: Mutex::new(sample::stream(cfg.seed, sample::purpose::SERVER)),
            next_id: AtomicU64::new(0),
            epoch: clock.now(),
            clock,
            law,
            cfg,
            journal,
        })
    }

    /// The prompt tokens of `prompt` the prefix cache serves (0 without a cache), counted
    /// in the metrics; the prompt's blocks are then the most recently used. A word is a
    /// token, as the mock counts them.
    pub(super) fn cached_tokens(&self, prompt: &Words) -> u32 {
        let Some(cache) = &self.prefix_cache else {
            return 0;
        };
        let n = u32::try_from(prompt.len()).unwrap_or(u32::MAX);
        let mut cache = cache.lock().expect("prefix cache lock");
        let blocks = cache.law().block_hashes(prompt.iter().map(word_id));
        let found = cache.admit(n, &blocks);
        let m = &self.metrics;
        m.prefix_cache_queries.fetch_add(u64::from(n), Relaxed);
        m.prefix_cache_hits
            .fetch_add(u64::from(found.cached_tokens), Relaxed);
        m.kv_cache_blocks.store(cache.blocks_used() as u64, Relaxed);
        found.cached_tokens
    }

    /// A standard normal draw for the latency law's jitter.
    pub(super) fn normal(&self) -> f64 {
        sample::standard_normal(&mut *self.jitter.lock().expect("jitter lock"))
    }

    pub(super) fn running(&self) -> u32 {
        u32::try_from(self.metrics.running.load(Relaxed)).unwrap_or(u32::MAX)
    }

    /// The law's first-token latency for a request of `prompt_tokens`, at the batch now.
    pub(super) fn ttft(&self, prompt_tokens: u32) -> Duration {
        Duration::from_secs_f64(
            self.law
                .ttft_s(prompt_tokens, self.running(), || self.normal()),
        )
    }

    /// The first moment at or after `at` a token may leave: `at` itself, or with
    /// [`MockConfig::release_every`] the next whole period since the server started.
    pub(super) fn released(&self, at: Instant) -> Instant {
        let period = self.cfg.release_every.as_nanos();
        if period == 0 {
            return at;
        }
        let since = at.saturating_duration_since(self.epoch).as_nanos();
        let periods = since.div_ceil(period);
        let nanos = u64::try_from(periods * period).unwrap_or(u64::MAX);
        self.epoch + Duration::from_nanos(nanos)
    }

    /// The law's inter-token latency, at the batch now.
    pub(super) fn itl(&self) -> Duration {
        Duration::from_secs_f64(self.law.itl_s(self.running(), || self.normal()))
    }
}

/// A word's token id for the prefix cache: FNV-1a of its bytes (stable across builds).
fn word_id(w: &str) -> u64 {
    w.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
