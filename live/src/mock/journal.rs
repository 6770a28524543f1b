//! What the server served, request by request: the truth an audit reads.

use std::sync::Mutex;

/// One generation request as the server saw it: the server-side truth an audit holds a
/// client's own report against. Times are CLOCK_MONOTONIC nanoseconds
/// ([`crate::time::mono_ns`]), or the scale of the [`Clock`] the mock was given.
///
/// [`Clock`]: crate::time::clock::Clock
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Served {
    /// When the request's head had been read.
    pub arrival_ns: u64,
    /// When the whole request (head and body) had reached the server: the kernel's stamp of
    /// the read that completed its body where the server stamps arrivals, else when the
    /// body had been collected. Later than `arrival_ns` by the time the client took to
    /// write its body after its head; the server can start no earlier. Files written
    /// before it was recorded read it as `arrival_ns`.
    #[serde(default)]
    pub received_ns: u64,
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
    /// The response's id, as its body carried it (`cmpl-ID`): what ties a client's record
    /// of a request to this one. None for a response the server answered without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
}

impl Served {
    /// When the server had the whole request: where its latency starts.
    pub fn received(&self) -> u64 {
        self.received_ns.max(self.arrival_ns)
    }

    /// How long the request's body trailed its head at the server (the client's own
    /// writing), ns.
    pub fn upload_ns(&self) -> u64 {
        self.received() - self.arrival_ns
    }
}

/// Every generation request the server answered, in the order their bodies ended.
#[derive(Debug, Default)]
pub struct Journal {
    served: Mutex<Vec<Served>>,
}

impl Journal {
    pub(super) fn push(&self, s: Served) {
        self.served.lock().expect("journal lock").push(s);
    }

    /// Everything recorded so far, in arrival order.
    pub fn snapshot(&self) -> Vec<Served> {
        let mut v = self.served.lock().expect("journal lock").clone();
        v.sort_by_key(|s| s.arrival_ns);
        v
    }
}
