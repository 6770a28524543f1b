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
    /// The client's own name for the request, its `x-request-id` header (vLLM's bench
    /// and AIPerf send one), as [`RequestTag::of`] reads it: what ties the tool's record
    /// of a request to this one where the response's id is not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tag: Option<RequestTag>,
}

/// A request's `x-request-id`, kept small: its FNV-1a hash, and the number it ends with
/// where it ends with one (vLLM's bench names its requests `PREFIX` + their index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestTag {
    /// FNV-1a (64 bits) of the header's bytes.
    pub hash: u64,
    /// The decimal number the header ends with, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
}

impl RequestTag {
    /// The tag of a request named `id`.
    pub fn of(id: &str) -> Self {
        let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        Self {
            hash: fnv1a(id.as_bytes()),
            index: id[id.len() - digits..].parse().ok(),
        }
    }
}

/// The 64-bit FNV-1a hash: stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a's published 64-bit values, and the number a request id ends with.
    #[test]
    fn a_request_tag_is_the_ids_hash_and_its_closing_number() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        let t = RequestTag::of("bench-1a2b3c4d-17");
        assert_eq!((t.hash, t.index), (fnv1a(b"bench-1a2b3c4d-17"), Some(17)));
        assert_eq!(RequestTag::of("3ff53315-15e9-dfd4").index, Some(4));
        assert_eq!(RequestTag::of("no-number-").index, None);
        assert_eq!(RequestTag::of("99999999999999999999999").index, None);
    }
}
