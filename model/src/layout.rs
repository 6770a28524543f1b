//! How a request's prompt is laid out: the parts it shares with other requests (a shared
//! prefix's group, a trace's prefix blocks) and the part that is its own.
//!
//! The live generator turns each part into words and the simulator into token names, both
//! from the same [`PromptLayout`], so two requests share prompt tokens in the simulator
//! exactly when they share words on the wire, and a prefix cache finds the same hits in
//! both.

use crate::scenario::{Arrivals, GroupSampler, TraceBlocks, Workload};

/// One stretch of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptPart {
    /// Tokens every request with the same `key` has at this place: the first `tokens` of
    /// the key's own endless sequence (a shorter part is a prefix of a longer one).
    Shared {
        /// Names the sequence: a shared prefix's group, or a trace's block hash (the two
        /// kinds never collide, see [`PromptLayout::parts`]).
        key: u64,
        /// How many of its tokens.
        tokens: u32,
    },
    /// Tokens of this request alone.
    Own {
        /// How many.
        tokens: u32,
    },
}

impl PromptPart {
    /// Its tokens.
    pub fn tokens(&self) -> u32 {
        match *self {
            Self::Shared { tokens, .. } | Self::Own { tokens } => tokens,
        }
    }
}

/// Keys of trace blocks have this bit set, shared prefixes' groups do not.
const BLOCK_KEY: u64 = 1 << 63;

/// A workload's prompt layout, prepared once (the group draw's table, the trace's blocks).
#[derive(Debug, Clone, Default)]
pub struct PromptLayout {
    prefix: Option<(u32, GroupSampler)>,
    blocks: Option<TraceBlocks>,
    /// A dataset's pool size: a request's own tokens are its entry's, shared with every
    /// request that takes the same entry.
    dataset_entries: Option<u64>,
    /// Closed-loop users' conversations (users, turns): a request's prompt is its
    /// conversation's history, position by position.
    conversations: Option<(u64, u64)>,
}

impl PromptLayout {
    /// The layout of `workload`'s prompts.
    pub fn new(workload: &Workload) -> Self {
        Self {
            prefix: workload.prefix.map(|p| (p.tokens, p.sampler())),
            blocks: match &workload.arrivals {
                Arrivals::Trace { blocks, .. } => blocks.clone(),
                _ => None,
            },
            dataset_entries: workload
                .dataset
                .as_ref()
                .map(|d| d.entries.len() as u64)
                .filter(|n| *n > 0),
            conversations: match workload.arrivals {
                Arrivals::Closed { users, turns, .. } if turns > 1 => {
                    Some((u64::from(users), u64::from(turns)))
                }
                _ => None,
            },
        }
    }

    /// Whether every prompt is its own (no part is shared).
    pub fn is_plain(&self) -> bool {
        self.prefix.is_none() && self.blocks.is_none()
    }

    /// The prompt tokens of a request whose drawn (or traced) prompt length is `input`: a
    /// shared prefix comes on top of it; a trace's blocks are part of it.
    pub fn total(&self, input: u32) -> u32 {
        input.saturating_add(self.prefix.as_ref().map_or(0, |(t, _)| *t))
    }

    /// The parts of request `index`'s prompt, in order, in a run seeded `seed`, its drawn
    /// length `input`: its shared prefix's group then `input` own tokens; or, in a trace
    /// with prefix blocks, its blocks of `block_tokens` each (the last one cut where the
    /// prompt ends) and then its own tokens for whatever the blocks do not cover.
    pub fn parts(&self, seed: u64, index: u64, input: u32) -> Vec<PromptPart> {
        let mut parts = Vec::new();
        if let Some((tokens, groups)) = &self.prefix {
            parts.push(PromptPart::Shared {
                key: u64::from(groups.group_of(seed, index)) & !BLOCK_KEY,
                tokens: *tokens,
            });
        }
        let mut own = input;
        if let Some(b) = &self.blocks
            && let Some(ids) = b.hash_ids.get(index as usize)
        {
            for &id in ids {
                if own == 0 {
                    break;
                }
                let tokens = own.min(b.block_tokens);
                parts.push(PromptPart::Shared {
                    key: id | BLOCK_KEY,
                    tokens,
                });
                own -= tokens;
            }
        }
        if own > 0 {
            parts.push(PromptPart::Own { tokens: own });
        }
        parts
    }

    /// The names of request `index`'s prompt tokens, for a prefix cache: token `k` of a
    /// shared part named by its key and `k`, an own token by the request's index and its
    /// place, so no two requests share an own token (with a dataset, by its entry's: two
    /// requests of one entry send the same prompt).
    pub fn token_names(&self, seed: u64, index: u64, input: u32) -> Vec<u64> {
        if let Some((users, turns)) = self.conversations {
            // Request k of user u (index u + k * users) is turn k mod T of its conversation
            // k / T: the same history at the same positions as the turns before it.
            let (user, k) = (index % users, index / users);
            let key = mix(mix(user, k / turns), CONVERSATION_SALT);
            return (0..u64::from(input)).map(|pos| mix(key, pos)).collect();
        }
        let mut names = Vec::with_capacity(self.total(input) as usize);
        let mut own_at = 0u64;
        for part in self.parts(seed, index, input) {
            match part {
                PromptPart::Shared { key, tokens } => {
                    names.extend((0..u64::from(tokens)).map(|k| mix(key, k)));
                }
                PromptPart::Own { tokens } => {
                    let base = match self.dataset_entries {
                        Some(n) => mix(index % n, DATASET_SALT),
                        None => mix(index, u64::MAX),
                    };
                    names.extend((0..u64::from(tokens)).map(|k| mix(base, own_at + k)));
                    own_at += u64::from(tokens);
                }
            }
        }
        names
    }
}

/// Tells a dataset entry's own tokens from a request's.
const DATASET_SALT: u64 = 0x6461_7461_7365_7401;

/// Tells a conversation's tokens from anything else's.
const CONVERSATION_SALT: u64 = 0x636f_6e76_6572_7301;

/// A closed-loop user's conversation, turn by turn: what each request asks, given the
/// lengths drawn for its new message and its reply. The simulator and the live generator
/// both step one for every user, so a turn's prompt tokens are the same in both (live, the
/// history holds the server's actual replies, which `ignore_eos` makes as long as asked).
#[derive(Debug, Clone)]
pub struct Conversation {
    turns: u32,
    turn: u32,
    history: u32,
}

/// One request of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// Its turn, from 1.
    pub turn: u32,
    /// Its prompt tokens: the history's and the new message's.
    pub input: u32,
    /// The new message's tokens.
    pub message: u32,
    /// The reply's tokens asked for.
    pub output: u32,
}

impl Conversation {
    /// A user's conversations of `turns` turns each.
    pub fn new(turns: u32) -> Self {
        Self {
            turns: turns.max(1),
            turn: 0,
            history: 0,
        }
    }

    /// The next request, its new message `drawn.0` tokens and its reply `drawn.1`: the
    /// first turn of a new conversation after the last one's last.
    pub fn next(&mut self, drawn: (u32, u32)) -> Turn {
        if self.turn == self.turns {
            (self.turn, self.history) = (0, 0);
        }
        self.turn += 1;
        let input = self.history.saturating_add(drawn.0);
        self.history = input.saturating_add(drawn.1);
        Turn {
            turn: self.turn,
            input,
            message: drawn.0,
            output: drawn.1,
        }
    }
}

/// A SplitMix64 finaliser of `(a, b)`: distinct pairs get distinct names with odds of a
/// collision near 2^-64.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Lengths, Popularity, SharedPrefix, Stop};

    fn trace(hash_ids: Vec<Vec<u64>>, block_tokens: u32) -> Workload {
        Workload {
            arrivals: Arrivals::Trace {
                send_times_s: (0..hash_ids.len()).map(|i| i as f64).collect(),
                lengths: Vec::new(),
                blocks: Some(TraceBlocks {
                    block_tokens,
                    hash_ids,
                }),
            },
            stop: Stop::Count { requests: 3 },
            input_tokens: Lengths::Fixed { tokens: 1 },
            output_tokens: Lengths::Fixed { tokens: 1 },
            prefix: None,
            dataset: None,
        }
    }

    #[test]
    fn a_conversation_resends_its_history() {
        let mut c = Conversation::new(3);
        let turns: Vec<Turn> = [(5, 2), (4, 3), (1, 1), (6, 6)]
            .into_iter()
            .map(|d| c.next(d))
            .collect();
        let got: Vec<(u32, u32)> = turns.iter().map(|t| (t.turn, t.input)).collect();
        // 5; 5 + 2 + 4; 11 + 3 + 1; then a new conversation.
        assert_eq!(got, vec![(1, 5), (2, 11), (3, 15), (1, 6)]);

        let mut w = trace(vec![], 1);
        w.arrivals = Arrivals::Closed {
            users: 2,
            think_s: 0.0,
            turns: 3,
        };
        let l = PromptLayout::new(&w);
        // User 0's requests are indices 0, 2, 4 (one conversation), then 6 (the next).
        let (t1, t2, t4) = (
            l.token_names(0, 0, 5),
            l.token_names(0, 2, 11),
            l.token_names(0, 6, 6),
        );
        assert_eq!(t1[..], t2[..5], "turn 2 begins with turn 1's prompt");
        assert_ne!(t4[0], t1[0], "a new conversation shares nothing");
        assert_ne!(l.token_names(0, 1, 5)[0], t1[0], "nor does another user's");
    }

    #[test]
    fn blocks_fill_the_prompt_from_its_start() {
        let l = PromptLayout::new(&trace(vec![vec![7, 8], vec![7], vec![]], 4));
        let shared = |key, tokens| PromptPart::Shared {
            key: key | BLOCK_KEY,
            tokens,
        };
        // Two blocks, the second cut at the prompt's end.
        assert_eq!(l.parts(0, 0, 6), vec![shared(7, 4), shared(8, 2)]);
        // More prompt than blocks: the rest is its own.
        assert_eq!(
            l.parts(0, 1, 9),
            vec![shared(7, 4), PromptPart::Own { tokens: 5 }]
        );
        assert_eq!(l.parts(0, 2, 3), vec![PromptPart::Own { tokens: 3 }]);
        assert_eq!(l.total(9), 9, "blocks are part of the traced length");

        let a = l.token_names(0, 0, 6);
        let b = l.token_names(0, 1, 9);
        assert_eq!(a[..4], b[..4], "block 7 names the same tokens in both");
        assert_ne!(a[4], b[4]);
        let c = l.token_names(0, 2, 3);
        assert!(c.iter().all(|t| !a.contains(t) && !b.contains(t)));
    }

    #[test]
    fn a_shared_prefix_comes_before_the_requests_own_tokens() {
        let w = Workload {
            prefix: Some(SharedPrefix {
                groups: 1,
                tokens: 5,
                popularity: Popularity::Uniform,
            }),
            ..trace(vec![], 1)
        };
        let w = Workload {
            arrivals: Arrivals::Poisson { rate_per_s: 1.0 },
            ..w
        };
        let l = PromptLayout::new(&w);
        assert_eq!(l.total(3), 8);
        let (x, y) = (l.token_names(9, 0, 3), l.token_names(9, 1, 3));
        assert_eq!((x.len(), x[..5] == y[..5]), (8, true));
        assert!(x[5..].iter().all(|t| !y.contains(t)));
        assert!(PromptLayout::new(&trace(vec![], 1)).blocks.is_some());
        assert!(!PromptLayout::new(&w).is_plain());
    }
}
