//! A server's prefix cache, as a law the mock and the simulator share: prompts are cut into
//! blocks of `block_tokens`, each full block named by a hash of everything up to its end
//! (so two prompts share a block only when they share the whole prefix before it), and the
//! cache holds at most `capacity_blocks` blocks, evicting the least recently used.
//!
//! A request's cached tokens are its leading blocks found in the cache, a block at a time,
//! stopping at the first miss. The last token of a prompt is always computed (a server
//! needs its logits to start decoding), so a prompt of `n` tokens can have at most
//! `floor((n - 1) / block_tokens)` blocks served from the cache. After the lookup every full
//! block of the prompt is in the cache, the most recently used.
//!
//! This is vLLM's automatic prefix caching reduced to what a benchmark sees: hits, misses
//! and their tokens; no memory is shared with running requests, and a block is evicted only
//! for a newer one.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};

/// The cache's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixCacheLaw {
    /// Tokens per block.
    pub block_tokens: u32,
    /// Blocks the cache holds.
    pub capacity_blocks: u32,
}

impl PrefixCacheLaw {
    /// Checks the shape: both at least 1.
    pub fn validate(&self) -> Result<()> {
        if self.block_tokens == 0 {
            return Err(ModelError::invalid(
                "block size",
                0,
                "must be at least 1 token",
            ));
        }
        if self.capacity_blocks == 0 {
            return Err(ModelError::invalid(
                "cache size",
                0,
                "must be at least 1 block",
            ));
        }
        Ok(())
    }

    /// The chained hashes of the full blocks of `tokens` (each token named by a hash of its
    /// own): block i's hash covers tokens `0..(i + 1) * block_tokens`.
    pub fn block_hashes(&self, tokens: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let b = self.block_tokens as usize;
        let mut out = Vec::new();
        let (mut h, mut in_block) = (FNV_OFFSET, 0usize);
        for t in tokens {
            h = fnv(h, t);
            in_block += 1;
            if in_block == b {
                out.push(h);
                in_block = 0;
            }
        }
        out
    }
}

/// What one lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lookup {
    /// Prompt tokens served from the cache.
    pub cached_tokens: u32,
    /// Prompt tokens the lookup could have served (the full blocks before the last token).
    pub queried_tokens: u32,
}

/// An LRU prefix cache of block hashes.
#[derive(Debug, Clone)]
pub struct PrefixCache {
    law: PrefixCacheLaw,
    /// Block hash to the tick it was last used at.
    last_use: HashMap<u64, u64>,
    /// Tick to block hash: the least recently used first.
    by_age: BTreeMap<u64, u64>,
    tick: u64,
}

impl PrefixCache {
    /// An empty cache of `law`'s shape (which must be valid).
    pub fn new(law: PrefixCacheLaw) -> Self {
        Self {
            law,
            last_use: HashMap::new(),
            by_age: BTreeMap::new(),
            tick: 0,
        }
    }

    /// The cache's shape.
    pub fn law(&self) -> PrefixCacheLaw {
        self.law
    }

    /// Blocks held now.
    pub fn blocks_used(&self) -> usize {
        self.last_use.len()
    }

    /// Looks up a prompt of `prompt_tokens` tokens whose full blocks hash to `blocks`
    /// ([`PrefixCacheLaw::block_hashes`]), then holds all of those blocks as the most
    /// recently used.
    pub fn admit(&mut self, prompt_tokens: u32, blocks: &[u64]) -> Lookup {
        let b = self.law.block_tokens;
        let servable = (prompt_tokens.saturating_sub(1) / b) as usize;
        let servable = servable.min(blocks.len());
        let hit = blocks[..servable]
            .iter()
            .take_while(|h| self.last_use.contains_key(h))
            .count();
        for &h in blocks {
            self.touch(h);
        }
        Lookup {
            cached_tokens: hit as u32 * b,
            queried_tokens: servable as u32 * b,
        }
    }

    fn touch(&mut self, h: u64) {
        self.tick += 1;
        if let Some(old) = self.last_use.insert(h, self.tick) {
            self.by_age.remove(&old);
        }
        self.by_age.insert(self.tick, h);
        while self.last_use.len() > self.law.capacity_blocks as usize {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.last_use.remove(&oldest);
        }
    }
}

/// The hit rate a shared-prefix workload should see in steady state, by Che's
/// approximation for LRU.
///
/// Assumptions, stated: requests are independent draws of their prefix group (the
/// independent reference model); a group's prefix blocks are used together and are lost
/// together (LRU evicts a prefix's first block first, and then the prefix misses); each
/// request also adds its own blocks, used once. Che's approximation gives every block the
/// same characteristic time T, in requests: a block stays while fewer than T requests
/// have come since its last use. T solves
///
/// `sum_g b (1 - exp(-p_g T)) + s T = C`
///
/// (prefix blocks held, plus the one-use blocks of the last T requests, fill the cache of
/// C blocks), and a request of group g finds its prefix with probability `1 - exp(-p_g T)`.
/// It is known to be accurate to a few per cent for LRU under independent requests; the
/// tests hold it against the cache itself. A cache large enough for every prefix and no
/// one-use blocks keeps them all (T infinite).
#[derive(Debug, Clone, PartialEq)]
pub struct CachePrediction {
    /// Che's characteristic time, requests (infinite when everything fits).
    pub characteristic_requests: f64,
    /// Each group's chance of finding its prefix.
    pub group_hit: Vec<f64>,
    /// Prompt tokens a request finds in the cache, on average.
    pub cached_tokens: f64,
    /// Those over a request's prompt tokens.
    pub token_hit_rate: f64,
}

/// Che's prediction for a cache of `law`'s shape under requests whose prompts are one of
/// `probabilities.len()` prefixes of `prefix_tokens` (drawn with those probabilities)
/// followed by `own_tokens` tokens of their own.
pub fn predict(
    law: PrefixCacheLaw,
    probabilities: &[f64],
    prefix_tokens: u32,
    own_tokens: u32,
) -> Result<CachePrediction> {
    law.validate()?;
    let bt = law.block_tokens;
    let prompt = prefix_tokens + own_tokens;
    // Blocks a prefix can be served with (the last token is computed), blocks it holds,
    // and the one-use blocks a request adds after them.
    let served = (prompt.saturating_sub(1) / bt).min(prefix_tokens / bt);
    let b = f64::from(prefix_tokens / bt);
    let s = f64::from(prompt / bt) - b;
    let c = f64::from(law.capacity_blocks);
    let held = |t: f64| -> f64 {
        probabilities
            .iter()
            .map(|p| b * (1.0 - (-p * t).exp()))
            .sum::<f64>()
            + s * t
    };
    let all_prefixes = b * probabilities.len() as f64;
    let t = if s == 0.0 && all_prefixes <= c {
        f64::INFINITY
    } else {
        let mut hi = 1.0;
        while held(hi) < c {
            hi *= 2.0;
            if hi > 1e18 {
                break;
            }
        }
        let mut lo = 0.0;
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if held(mid) < c {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    };
    let group_hit: Vec<f64> = probabilities
        .iter()
        .map(|p| {
            if t.is_infinite() {
                1.0
            } else {
                1.0 - (-p * t).exp()
            }
        })
        .collect();
    let hit: f64 = probabilities
        .iter()
        .zip(&group_hit)
        .map(|(p, h)| p * h)
        .sum();
    let cached_tokens = hit * f64::from(served * bt);
    Ok(CachePrediction {
        characteristic_requests: t,
        group_hit,
        cached_tokens,
        token_hit_rate: if prompt == 0 {
            0.0
        } else {
            cached_tokens / f64::from(prompt)
        },
    })
}

impl CachePrediction {
    /// The mean time to first token this hit rate implies for prompts of `prompt_tokens`
    /// under a prefill law that pays `overhead_s` and `per_token_s` for every token the
    /// cache did not serve: `overhead + per_token x (prompt - cached)`. Exact in the
    /// prediction's mean (the law is linear in the uncached tokens), at a load factor of 1
    /// (no slow-down from a fuller batch) and with no wait for a slot.
    pub fn prefill_ttft_mean_s(
        &self,
        prompt_tokens: u32,
        overhead_s: f64,
        per_token_s: f64,
    ) -> f64 {
        let uncached = (f64::from(prompt_tokens) - self.cached_tokens).max(0.0);
        overhead_s + per_token_s * uncached
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// One FNV-1a step over the eight bytes of `x`: stable across builds and platforms.
fn fnv(mut h: u64, x: u64) -> u64 {
    for byte in x.to_le_bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn law(block_tokens: u32, capacity_blocks: u32) -> PrefixCacheLaw {
        PrefixCacheLaw {
            block_tokens,
            capacity_blocks,
        }
    }

    /// The same prompt twice: the second finds every block but the one holding its last
    /// token; a prompt that differs in its first token finds nothing.
    #[test]
    fn a_repeated_prompt_hits_all_but_its_last_block() {
        let l = law(4, 100);
        let mut c = PrefixCache::new(l);
        let p: Vec<u64> = (0..10).collect();
        let blocks = l.block_hashes(p.iter().copied());
        assert_eq!(blocks.len(), 2);
        assert_eq!(c.admit(10, &blocks).cached_tokens, 0);
        // 10 tokens: the last is computed, so blocks 0..4 and 4..8 may come from the cache.
        assert_eq!(
            c.admit(10, &blocks),
            Lookup {
                cached_tokens: 8,
                queried_tokens: 8
            }
        );
        // Exactly two blocks long: the second block holds the last token.
        assert_eq!(c.admit(8, &blocks).cached_tokens, 4);
        let other = l.block_hashes([99].into_iter().chain(1..10));
        assert_eq!(c.admit(10, &other).cached_tokens, 0);
    }

    /// A shared first block and different second blocks: the prefix is found, the rest is
    /// not (hashes chain, so an equal later block after a different one is no hit).
    #[test]
    fn blocks_chain_so_only_a_shared_prefix_hits() {
        let l = law(2, 100);
        let mut c = PrefixCache::new(l);
        c.admit(7, &l.block_hashes([1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(
            c.admit(7, &l.block_hashes([1, 2, 9, 9, 5, 6, 7]))
                .cached_tokens,
            2
        );
        assert_eq!(
            c.admit(7, &l.block_hashes([8, 8, 3, 4, 5, 6, 7]))
                .cached_tokens,
            0
        );
    }

    /// Least recently used goes first: with room for two blocks, touching A keeps it while
    /// B, then C, come in.
    #[test]
    fn the_least_recently_used_block_is_evicted() {
        let l = law(1, 2);
        let mut c = PrefixCache::new(l);
        let (a, b, cc) = (
            l.block_hashes([1]),
            l.block_hashes([2]),
            l.block_hashes([3]),
        );
        // One-token prompts serve nothing (the last token is computed) but are held.
        c.admit(1, &a);
        c.admit(1, &b);
        c.admit(1, &a);
        c.admit(1, &cc);
        assert_eq!(c.blocks_used(), 2);
        let two = |x: u64| l.block_hashes([x, 0]);
        // [1, 0]'s first block is A's hash: still held. [2, 0]'s is B's: evicted by C.
        assert_eq!(c.admit(2, &two(1)[..1]).cached_tokens, 1);
        assert_eq!(c.admit(2, &two(2)[..1]).cached_tokens, 0);
    }

    /// Che's prediction against the cache itself, driven by independent group draws over
    /// a grid of groups, popularity and capacity: the steady-state token hit rate within 5 %
    /// (relative) or 0.01 (absolute, where the rate is small). The measured rate leaves out
    /// a warm-up of 20,000 requests and counts 200,000 more: its standard error is below
    /// 0.002 here, so the band is the approximation's, not the sampling's.
    #[test]
    fn che_predicts_the_lru_hit_rate() {
        use crate::sample::{purpose, stream};
        use crate::scenario::{Popularity, SharedPrefix};
        use rand::RngExt;
        let bt = 16;
        for (groups, popularity, capacity, prefix, own) in [
            (10, Popularity::Uniform, 200, 256, 64),
            (100, Popularity::Uniform, 400, 128, 32),
            (100, Popularity::Zipf { s: 1.0 }, 400, 128, 32),
            (1000, Popularity::Zipf { s: 0.8 }, 2000, 64, 48),
            (50, Popularity::Zipf { s: 1.2 }, 150, 160, 0),
            (20, Popularity::Uniform, 10_000, 256, 0),
        ] {
            let shape = SharedPrefix {
                groups,
                tokens: prefix,
                popularity,
            };
            let probs = shape.probabilities();
            let law = PrefixCacheLaw {
                block_tokens: bt,
                capacity_blocks: capacity,
            };
            let predicted = predict(law, &probs, prefix, own).unwrap().token_hit_rate;
            let sampler = shape.sampler();
            let mut cache = PrefixCache::new(law);
            let mut rng = stream(3, purpose::LENGTHS);
            let (mut cached, mut total) = (0u64, 0u64);
            for i in 0..220_000u64 {
                let g = sampler.group_of(9, i);
                let own_ids = (0..own).map(|_| rng.random::<u64>());
                let tokens: Vec<u64> = (0..prefix)
                    .map(|k| (u64::from(g) << 32) | u64::from(k))
                    .chain(own_ids)
                    .collect();
                let found = cache.admit(prefix + own, &law.block_hashes(tokens));
                if i >= 20_000 {
                    cached += u64::from(found.cached_tokens);
                    total += u64::from(prefix + own);
                }
            }
            let measured = cached as f64 / total as f64;
            let err = (predicted - measured).abs();
            assert!(
                err <= 0.05 * measured || err <= 0.01,
                "groups {groups}, {popularity:?}, capacity {capacity}: Che {predicted:.4}, LRU {measured:.4}"
            );
        }
    }

    #[test]
    fn a_shape_of_zero_is_refused() {
        assert!(law(0, 1).validate().is_err());
        assert!(law(16, 0).validate().is_err());
        assert!(law(16, 1024).validate().is_ok());
    }
}
