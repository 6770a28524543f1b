//! The workload and client parts of a scenario: the types the simulator and the live
//! generator both read, so one file can be predicted, simulated and run live.
//!
//! Plain serde data with validation; sampling lives with whoever draws the numbers.

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{ModelError, Result};
use crate::service::Service;

/// When requests are sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[serde(deny_unknown_fields)]
pub enum Arrivals {
    /// Exponential gaps at `rate_per_s`.
    Poisson {
        /// Requests per second.
        rate_per_s: f64,
    },
    /// Equal gaps of 1 / `rate_per_s`.
    Constant {
        /// Requests per second.
        rate_per_s: f64,
    },
    /// Gamma gaps with mean 1 / `rate_per_s` and shape `shape`: SCV 1 / shape, so shape 1
    /// is Poisson, below 1 burstier, above 1 smoother.
    Gamma {
        /// Requests per second.
        rate_per_s: f64,
        /// Gamma shape (the inverse of the gaps' SCV).
        shape: f64,
    },
    /// Send times read from a trace, seconds from the start, ascending.
    Trace {
        /// The send times.
        send_times_s: Vec<f64>,
        /// Each request's prompt and output tokens, when the trace carries them (mooncake's
        /// JSONL, Azure's CSV); empty: drawn from the workload's lengths.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        lengths: Vec<[u32; 2]>,
        /// Each request's prefix blocks, when the trace names them (mooncake's `hash_ids`):
        /// requests that name the same block send the same tokens there.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocks: Option<TraceBlocks>,
    },
    /// `users` concurrent users, each sending its next request `think_s` after the last
    /// one finished.
    Closed {
        /// Concurrent users.
        users: u32,
        /// Think time between a response and the next request, seconds.
        #[serde(default)]
        think_s: f64,
        /// Turns of each user's conversation (1: every request stands alone): each turn
        /// sends the whole conversation so far, the server's replies in it, and a new user
        /// message of the workload's prompt tokens; after the last turn a new conversation
        /// begins.
        #[serde(default = "one_turn", skip_serializing_if = "is_one_turn")]
        turns: u32,
    },
}

fn one_turn() -> u32 {
    1
}

fn is_one_turn(turns: &u32) -> bool {
    *turns == 1
}

/// The shape of renewal inter-arrival gaps, whatever their rate: the one grammar every
/// command's `--arrival` reads (`poisson`, `constant`, `gamma:shape=X`, `erlang:k=K`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Gaps {
    /// Exponential (M).
    Poisson,
    /// Constant (D).
    Constant,
    /// Gamma with this shape (SCV 1 / shape; Erlang-k for integer k).
    Gamma {
        /// Shape.
        shape: f64,
    },
}

impl std::fmt::Display for Gaps {
    /// The grammar [`Gaps`] parses: `poisson`, `constant`, `gamma:shape=X`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Poisson => write!(f, "poisson"),
            Self::Constant => write!(f, "constant"),
            Self::Gamma { shape } => write!(f, "gamma:shape={shape}"),
        }
    }
}

impl std::str::FromStr for Gaps {
    type Err = ModelError;

    /// `poisson`, `constant`, `gamma:shape=X` (X between 1e-6 and 1e6) or `erlang:k=K`
    /// (a whole K from 1 to 1e6).
    fn from_str(s: &str) -> Result<Self> {
        let value = |prefix: &str| -> Option<Result<f64>> {
            s.strip_prefix(prefix).map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| (1e-6..=1e6).contains(x))
                    .ok_or_else(|| {
                        ModelError::invalid("arrival", s, "the number must be between 1e-6 and 1e6")
                    })
            })
        };
        match s {
            "poisson" => Ok(Self::Poisson),
            "constant" => Ok(Self::Constant),
            _ => {
                if let Some(shape) = value("gamma:shape=") {
                    return Ok(Self::Gamma { shape: shape? });
                }
                if let Some(k) = value("erlang:k=") {
                    let k = k?;
                    if k.fract() != 0.0 {
                        return Err(ModelError::invalid(
                            "arrival",
                            s,
                            "k must be a whole number",
                        ));
                    }
                    return Ok(Self::Gamma { shape: k });
                }
                Err(ModelError::invalid(
                    "arrival",
                    s,
                    "use poisson, constant, gamma:shape=X or erlang:k=K",
                ))
            }
        }
    }
}

impl Arrivals {
    /// Renewal arrivals at `rate_per_s` whose gaps have the shape `gaps`.
    pub fn renewal(gaps: Gaps, rate_per_s: f64) -> Self {
        match gaps {
            Gaps::Poisson => Self::Poisson { rate_per_s },
            Gaps::Constant => Self::Constant { rate_per_s },
            Gaps::Gamma { shape } => Self::Gamma { rate_per_s, shape },
        }
    }

    /// The mean offered rate, when the schedule fixes one (not for closed loops).
    pub fn rate_per_s(&self) -> Option<f64> {
        match self {
            Self::Poisson { rate_per_s }
            | Self::Constant { rate_per_s }
            | Self::Gamma { rate_per_s, .. } => Some(*rate_per_s),
            Self::Trace { send_times_s, .. } => {
                let span = send_times_s.last().copied().unwrap_or(0.0)
                    - send_times_s.first().copied().unwrap_or(0.0);
                (send_times_s.len() > 1 && span > 0.0)
                    .then(|| (send_times_s.len() - 1) as f64 / span)
            }
            Self::Closed { .. } => None,
        }
    }

    /// SCV of the gaps (1 Poisson, 0 constant, 1 / shape gamma), where defined.
    pub fn gap_scv(&self) -> Option<f64> {
        match self {
            Self::Poisson { .. } => Some(1.0),
            Self::Constant { .. } => Some(0.0),
            Self::Gamma { shape, .. } => Some(1.0 / shape),
            _ => None,
        }
    }

    fn validate(&self) -> Result<()> {
        match self {
            Self::Poisson { rate_per_s } | Self::Constant { rate_per_s } => {
                rate("workload.arrivals.rate_per_s", *rate_per_s)
            }
            Self::Gamma { rate_per_s, shape } => {
                rate("workload.arrivals.rate_per_s", *rate_per_s)?;
                positive("workload.arrivals.shape", *shape)?;
                if !(1e-6..=1e6).contains(shape) {
                    return Err(ModelError::invalid(
                        "workload.arrivals.shape",
                        shape,
                        "must be between 1e-6 and 1e6",
                    ));
                }
                Ok(())
            }
            Self::Trace {
                send_times_s,
                lengths,
                blocks,
            } => {
                if let Some(b) = blocks {
                    b.validate(send_times_s.len())?;
                }
                if !lengths.is_empty() && lengths.len() != send_times_s.len() {
                    return Err(ModelError::invalid(
                        "workload.arrivals.lengths",
                        lengths.len(),
                        "a trace's lengths must number its send times",
                    ));
                }
                if let Some(bad) = lengths
                    .iter()
                    .flatten()
                    .find(|n| **n == 0 || **n > crate::limits::MAX_TOKENS)
                {
                    return Err(ModelError::invalid(
                        "workload.arrivals.lengths",
                        bad,
                        "each length must be between 1 and 10,000,000 tokens",
                    ));
                }
                if send_times_s.is_empty() {
                    return Err(ModelError::invalid(
                        "workload.arrivals.send_times_s",
                        "[]",
                        "a trace needs at least one send time",
                    ));
                }
                if let Some((t, reason)) = send_times_s
                    .iter()
                    .find_map(|t| crate::limits::duration_problem(*t).map(|r| (t, r)))
                {
                    return Err(ModelError::invalid(
                        "workload.arrivals.send_times_s",
                        t,
                        reason,
                    ));
                }
                if send_times_s.windows(2).any(|w| w[1] < w[0]) {
                    return Err(ModelError::invalid(
                        "workload.arrivals.send_times_s",
                        "unsorted",
                        "times must be ascending",
                    ));
                }
                Ok(())
            }
            Self::Closed {
                users,
                think_s,
                turns,
            } => {
                if *users == 0 {
                    return Err(ModelError::invalid(
                        "workload.arrivals.users",
                        0,
                        "must be >= 1",
                    ));
                }
                if *turns == 0 || *turns > 10_000 {
                    return Err(ModelError::invalid(
                        "workload.arrivals.turns",
                        turns,
                        "must be between 1 and 10,000",
                    ));
                }
                duration("workload.arrivals.think_s", *think_s)
            }
        }
    }
}

/// When the schedule stops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[serde(deny_unknown_fields)]
pub enum Stop {
    /// After this many requests.
    Count {
        /// Requests.
        requests: u64,
    },
    /// No request is scheduled at or after this time.
    Duration {
        /// Seconds.
        seconds: f64,
    },
}

/// A distribution of token counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[serde(deny_unknown_fields)]
pub enum Lengths {
    /// Always `tokens`.
    Fixed {
        /// Tokens.
        tokens: u32,
    },
    /// Uniform on [min, max].
    Uniform {
        /// Smallest.
        min: u32,
        /// Largest.
        max: u32,
    },
    /// Normal, rounded and clamped to at least 1.
    Normal {
        /// Mean tokens.
        mean: f64,
        /// Standard deviation.
        sd: f64,
    },
    /// Lognormal with the given mean and SCV, rounded, at least 1.
    Lognormal {
        /// Mean tokens.
        mean: f64,
        /// Squared coefficient of variation.
        scv: f64,
    },
}

impl std::str::FromStr for Lengths {
    type Err = ModelError;

    /// `N`, `uniform:MIN,MAX`, `normal:MEAN,SD` or `lognormal:MEAN,SCV` (the values are
    /// checked where a workload is validated).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            ModelError::invalid(
                "tokens",
                s,
                "use N, uniform:MIN,MAX, normal:MEAN,SD or lognormal:MEAN,SCV",
            )
        };
        let num = |x: &str| x.trim().parse::<f64>().map_err(|_| bad());
        // A whole number past u32 is a count too large, not a malformed one.
        let count = |x: &str| {
            let x = x.trim();
            x.parse::<u32>().map_err(|_| match x.parse::<u64>() {
                Ok(_) => {
                    ModelError::invalid("tokens", s, "a request may hold at most 10,000,000 tokens")
                }
                Err(_) => bad(),
            })
        };
        let Some((kind, args)) = s.split_once(':') else {
            return Ok(Self::Fixed { tokens: count(s)? });
        };
        let Some((a, b)) = args.split_once(',') else {
            return Err(bad());
        };
        match kind {
            "uniform" => Ok(Self::Uniform {
                min: count(a)?,
                max: count(b)?,
            }),
            "normal" => Ok(Self::Normal {
                mean: num(a)?,
                sd: num(b)?,
            }),
            "lognormal" => Ok(Self::Lognormal {
                mean: num(a)?,
                scv: num(b)?,
            }),
            _ => Err(bad()),
        }
    }
}

/// The grammar [`Lengths::from_str`](std::str::FromStr) reads.
impl std::fmt::Display for Lengths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed { tokens } => write!(f, "{tokens}"),
            Self::Uniform { min, max } => write!(f, "uniform:{min},{max}"),
            Self::Normal { mean, sd } => write!(f, "normal:{mean},{sd}"),
            Self::Lognormal { mean, scv } => write!(f, "lognormal:{mean},{scv}"),
        }
    }
}

impl Lengths {
    /// The mean (before rounding and clamping).
    pub fn mean(&self) -> f64 {
        match self {
            Self::Fixed { tokens } => f64::from(*tokens),
            Self::Uniform { min, max } => (f64::from(*min) + f64::from(*max)) / 2.0,
            Self::Normal { mean, .. } | Self::Lognormal { mean, .. } => *mean,
        }
    }

    /// The largest count a draw gives with any real chance: exact for fixed and uniform
    /// lengths, six standard deviations above the mean for normal ones and the point six
    /// log-standard-deviations up for lognormal ones (a draw above it has odds below 1e-9),
    /// at most [`crate::limits::MAX_TOKENS`].
    pub fn likely_max(&self) -> u32 {
        let z = match *self {
            Self::Fixed { tokens } => return tokens,
            Self::Uniform { max, .. } => return max,
            Self::Normal { mean, sd } => mean + 6.0 * sd,
            Self::Lognormal { mean, scv } => {
                let s2 = (1.0 + scv).ln();
                (mean.ln() - s2 / 2.0 + 6.0 * s2.sqrt()).exp()
            }
        };
        z.ceil().clamp(1.0, f64::from(crate::limits::MAX_TOKENS)) as u32
    }

    fn validate(&self, field: &'static str) -> Result<()> {
        let max = f64::from(crate::limits::MAX_TOKENS);
        let too_many = match *self {
            Self::Fixed { tokens } => f64::from(tokens) > max,
            Self::Uniform { max: hi, .. } => f64::from(hi) > max,
            Self::Normal { mean, sd } => mean + 6.0 * sd > max,
            Self::Lognormal { mean, .. } => mean > max,
        };
        if too_many {
            return Err(ModelError::invalid(
                field,
                self,
                "asks for more than 10,000,000 tokens per request",
            ));
        }
        match self {
            Self::Fixed { tokens } if *tokens == 0 => {
                Err(ModelError::invalid(field, 0, "must be >= 1 token"))
            }
            Self::Uniform { min, max } if *min == 0 || min > max => Err(ModelError::invalid(
                field,
                format!("[{min}, {max}]"),
                "need 1 <= min <= max",
            )),
            Self::Normal { mean, sd }
                if !(mean.is_finite() && *mean >= 1.0 && sd.is_finite() && *sd >= 0.0) =>
            {
                Err(ModelError::invalid(
                    field,
                    format!("mean {mean}, sd {sd}"),
                    "need mean >= 1 and sd >= 0",
                ))
            }
            Self::Lognormal { mean, scv }
                if !(mean.is_finite() && *mean >= 1.0 && scv.is_finite() && *scv > 0.0) =>
            {
                Err(ModelError::invalid(
                    field,
                    format!("mean {mean}, scv {scv}"),
                    "need mean >= 1 and scv > 0",
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The root seed when none is given, by a flag or a file, in every command and view:
/// "same seed, same plan" holds across `plan`, `sim` and `run` only if they agree on it.
pub const DEFAULT_SEED: u64 = 1;

/// [`DEFAULT_SEED`], for a file's omitted `seed`.
pub fn default_seed() -> u64 {
    DEFAULT_SEED
}

/// What is sent and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// The arrival schedule.
    pub arrivals: Arrivals,
    /// When it stops.
    pub stop: Stop,
    /// Prompt tokens per request.
    pub input_tokens: Lengths,
    /// Output tokens per request (one streamed chunk each).
    pub output_tokens: Lengths,
    /// Prompts that begin with one of a few shared prefixes (a system prompt, a document
    /// several questions are about); `input_tokens` is then each request's own part, after
    /// its prefix. None: every prompt is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<SharedPrefix>,
    /// Prompts from a dataset file: each request's prompt (and, where the dataset gives
    /// it, output length) is a drawn entry's, not `input_tokens`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<Dataset>,
}

/// Shared prompt prefixes: `groups` prefixes of `tokens` tokens, each request's drawn by
/// `popularity` from a stream of its own index (so shards striping one schedule, and the
/// simulator, draw the same group for the same request).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefix {
    /// How many different prefixes.
    pub groups: u32,
    /// Tokens in each prefix.
    pub tokens: u32,
    /// How often each is drawn.
    #[serde(default)]
    pub popularity: Popularity,
}

/// How often each shared prefix is drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Popularity {
    /// Every prefix as often.
    #[default]
    Uniform,
    /// Prefix g (from 0) with weight 1 / (g + 1)^s.
    Zipf {
        /// The exponent, > 0.
        s: f64,
    },
}

impl std::str::FromStr for Popularity {
    type Err = ModelError;
    /// `uniform` or `zipf:S`.
    fn from_str(t: &str) -> Result<Self> {
        if t == "uniform" {
            return Ok(Self::Uniform);
        }
        let s = t
            .strip_prefix("zipf:")
            .and_then(|x| x.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 10.0)
            .ok_or_else(|| {
                ModelError::invalid(
                    "popularity",
                    t,
                    "expected uniform or zipf:S with 0 < S <= 10",
                )
            })?;
        Ok(Self::Zipf { s })
    }
}

impl SharedPrefix {
    /// Checks the shape.
    pub fn validate(&self) -> Result<()> {
        if self.groups == 0 || self.groups > 1_000_000 {
            return Err(ModelError::invalid(
                "workload.prefix.groups",
                self.groups,
                "must be between 1 and 1,000,000",
            ));
        }
        if self.tokens == 0 || self.tokens > 1_000_000 {
            return Err(ModelError::invalid(
                "workload.prefix.tokens",
                self.tokens,
                "must be between 1 and 1,000,000",
            ));
        }
        if let Popularity::Zipf { s } = self.popularity
            && !(s.is_finite() && s > 0.0 && s <= 10.0)
        {
            return Err(ModelError::invalid(
                "workload.prefix.popularity.s",
                s,
                "must be > 0 and at most 10",
            ));
        }
        Ok(())
    }

    /// Each group's probability, by group.
    pub fn probabilities(&self) -> Vec<f64> {
        let w: Vec<f64> = (0..self.groups)
            .map(|g| match self.popularity {
                Popularity::Uniform => 1.0,
                Popularity::Zipf { s } => (f64::from(g) + 1.0).powf(-s),
            })
            .collect();
        let total: f64 = w.iter().sum();
        w.into_iter().map(|x| x / total).collect()
    }

    /// A sampler of groups by request index.
    pub fn sampler(&self) -> GroupSampler {
        let mut acc = 0.0;
        let cumulative = self
            .probabilities()
            .into_iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect();
        GroupSampler { cumulative }
    }
}

/// Draws a request's prefix group from its index and the run's seed.
#[derive(Debug, Clone)]
pub struct GroupSampler {
    cumulative: Vec<f64>,
}

impl GroupSampler {
    /// The group of request `index` in a run seeded `seed`.
    pub fn group_of(&self, seed: u64, index: u64) -> u32 {
        // A SplitMix64 step of (seed, index): the same uniform for the same request, in any
        // process, without a stream to keep in step.
        let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        let g = self.cumulative.partition_point(|c| *c <= u);
        g.min(self.cumulative.len().saturating_sub(1)) as u32
    }
}

impl Workload {
    /// The longest prompt a request may have with any real chance: the lengths' likely
    /// maximum, or the longest a trace gives.
    pub fn longest_prompt(&self) -> u32 {
        match &self.arrivals {
            Arrivals::Trace { lengths, .. } if !lengths.is_empty() => {
                lengths.iter().map(|l| l[0]).max().unwrap_or(1)
            }
            Arrivals::Closed { turns, .. } if *turns > 1 => {
                let (i, o) = (
                    self.input_tokens.likely_max(),
                    self.output_tokens.likely_max(),
                );
                i.saturating_mul(*turns)
                    .saturating_add(o.saturating_mul(turns - 1))
            }
            _ => match &self.dataset {
                Some(d) if !d.entries.is_empty() => {
                    d.entries.iter().map(|e| e[0]).max().unwrap_or(1)
                }
                _ => self.input_tokens.likely_max(),
            },
        }
    }

    /// Request `index`'s prompt and output tokens, given the ones drawn for it: a trace's
    /// lengths when it carries them, else a dataset entry's prompt (and its output, where
    /// it gives one and it is asked for), else the drawn ones. The schedule and every
    /// closed-loop user (in `sim` and `run`) take a request's lengths from here.
    pub fn lengths_of(&self, index: u64, drawn: (u32, u32)) -> (u32, u32) {
        if let Arrivals::Trace { lengths, .. } = &self.arrivals
            && let Some([i, o]) = lengths.get(index as usize)
        {
            return (*i, *o);
        }
        match self.dataset.as_ref().and_then(|d| d.lengths_of(index)) {
            Some((input, output)) => (input, output.unwrap_or(drawn.1)),
            None => drawn,
        }
    }

    /// Turns of a closed-loop user's conversation (1 for anything else).
    pub fn turns(&self) -> u32 {
        match self.arrivals {
            Arrivals::Closed { turns, .. } => turns,
            _ => 1,
        }
    }

    /// The mean prompt and output tokens of a request: of a trace's lengths or a dataset's
    /// drawn entries where they give them, else of the workload's distributions.
    pub fn mean_tokens(&self) -> (f64, f64) {
        let drawn = (self.input_tokens.mean(), self.output_tokens.mean());
        if let Arrivals::Trace { lengths, .. } = &self.arrivals
            && !lengths.is_empty()
        {
            let n = lengths.len() as f64;
            let sum = |k: usize| lengths.iter().map(|l| f64::from(l[k])).sum::<f64>() / n;
            return (sum(0), sum(1));
        }
        if self.turns() > 1 {
            // Turn t re-sends t - 1 messages and replies: on average (T - 1) / 2 of each.
            let history = f64::from(self.turns() - 1) / 2.0 * (drawn.0 + drawn.1);
            return (drawn.0 + history, drawn.1);
        }
        match self.dataset.as_ref().and_then(Dataset::mean_lengths) {
            Some((input, output)) => (input, output.unwrap_or(drawn.1)),
            None => drawn,
        }
    }

    /// The requests the schedule holds: exact for a count (or a trace), the mean (rate x
    /// duration) for a rate over a duration; `None` for a closed loop over a duration
    /// (its count depends on the server).
    pub fn expected_requests(&self) -> Option<f64> {
        let rate = match &self.arrivals {
            Arrivals::Closed { .. } => {
                return match self.stop {
                    Stop::Count { requests } => Some(requests as f64),
                    Stop::Duration { .. } => None,
                };
            }
            Arrivals::Trace { send_times_s, .. } => {
                let n = send_times_s.len() as f64;
                return Some(match self.stop {
                    Stop::Count { requests } => n.min(requests as f64),
                    Stop::Duration { seconds } => {
                        send_times_s.iter().filter(|t| **t < seconds).count() as f64
                    }
                });
            }
            a => a.rate_per_s()?,
        };
        Some(match self.stop {
            Stop::Count { requests } => requests as f64,
            Stop::Duration { seconds } => rate * seconds,
        })
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.arrivals.validate()?;
        if let Some(p) = &self.prefix {
            p.validate()?;
        }
        if self.turns() > 1 && (self.dataset.is_some() || self.prefix.is_some()) {
            return Err(ModelError::invalid(
                "workload.arrivals.turns",
                self.turns(),
                "a conversation's prompt is its history: it takes no dataset or shared prefix",
            ));
        }
        if let Some(d) = &self.dataset {
            d.validate()?;
            if self.prefix.is_some() {
                return Err(ModelError::invalid(
                    "workload.dataset",
                    d.path.display(),
                    "a dataset gives whole prompts: it takes no shared prefixes",
                ));
            }
            if let Arrivals::Trace {
                lengths, blocks, ..
            } = &self.arrivals
                && (!lengths.is_empty() || blocks.is_some())
            {
                return Err(ModelError::invalid(
                    "workload.dataset",
                    d.path.display(),
                    "the trace gives each request's lengths: a dataset cannot give them too",
                ));
            }
        }
        self.validate_stop()?;
        if let Some(n) = self.expected_requests()
            && n > crate::limits::MAX_SCHEDULED_REQUESTS
        {
            return Err(ModelError::invalid(
                "workload",
                format!("{n:.3e} requests"),
                "is more than the 1e9 requests one schedule may hold: lower the rate, the \
                 duration or the count",
            ));
        }
        self.input_tokens.validate("workload.input_tokens")?;
        self.output_tokens.validate("workload.output_tokens")
    }

    fn validate_stop(&self) -> Result<()> {
        match self.stop {
            Stop::Count { requests: 0 } => {
                return Err(ModelError::invalid(
                    "workload.stop.requests",
                    0,
                    "must be >= 1",
                ));
            }
            Stop::Duration { seconds } => {
                positive("workload.stop.seconds", seconds)?;
                duration("workload.stop.seconds", seconds)?;
            }
            Stop::Count { .. } => {}
        }
        Ok(())
    }
}

/// How requests are dealt to the client's loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// In turn.
    #[default]
    RoundRobin,
    /// Uniformly at random.
    Random,
    /// To the loop with the fewest requests in flight (lowest index on ties).
    LeastLoaded,
}

/// When a chunk gets its timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stamp {
    /// When the bytes arrive, before the loop processes them (heisenbench's way).
    NetworkArrival,
    /// After the loop has processed the chunk (a typical asyncio client's way).
    #[default]
    AfterProcessing,
}

/// Per-event costs on a client loop; `None` is free.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventCosts {
    /// Building and writing one request.
    #[serde(default)]
    pub send: Option<Service>,
    /// Reading, splitting and decoding one streamed chunk.
    #[serde(default)]
    pub chunk: Option<Service>,
    /// Finishing a response (the `[DONE]` event, bookkeeping).
    #[serde(default)]
    pub finish: Option<Service>,
    /// The longest a send or finish job runs before the loop's other ready jobs get a
    /// turn, seconds (`None`: a job runs whole). An asyncio client's own path for a request
    /// is many callbacks, one between two awaits each, and a job queued meanwhile runs
    /// between them; a chunk is one read, one callback, and is never sliced. Each slice
    /// counts as a job in the loops' tallies (jobs, waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_s: Option<f64>,
    /// How long a loop woken by work waits for a core before its first job runs (a setup
    /// time): drawn for each job that finds its loop idle, never for one queued behind
    /// another. A client sharing its cores with the server and its own processes waits to
    /// wake; one with a core to itself barely does. `None`: at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake: Option<Service>,
    /// How often a running job loses its core, times a second of its own CPU: the loop is
    /// preempted while it has work, and waits for a core again (as long as `wake` says)
    /// before the job goes on, the jobs behind it waiting too. `None`: never (or without
    /// `wake`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_per_cpu_s: Option<f64>,
}

/// A trace's requests: their send times, seconds from the start, and their prompt and
/// output tokens when the trace carries them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Send times, seconds from the start.
    pub send_times_s: Vec<f64>,
    /// Each request's prompt and output tokens (empty: the trace gives none).
    pub lengths: Vec<[u32; 2]>,
    /// Each request's prefix blocks, when the trace names them.
    pub blocks: Option<TraceBlocks>,
}

/// A trace's prefix blocks: request i's prompt begins with the blocks `hash_ids[i]` names,
/// `block_tokens` each, in order; two requests that name a block send the same tokens in
/// it (a block's hash covers everything before it too, as mooncake's do, so equal ids
/// come after equal prefixes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceBlocks {
    /// Tokens per block (mooncake's traces: 512).
    pub block_tokens: u32,
    /// Each request's block ids, in the order of its prompt.
    pub hash_ids: Vec<Vec<u64>>,
}

/// The block size of mooncake's published traces.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

impl TraceBlocks {
    /// The share of the prompt tokens of `lengths` (the trace's, request by request) that
    /// lie in a block some earlier request named: what a cache that never evicts could
    /// serve, the trace's designed reuse. Blocks are cut by each prompt's length as
    /// [`crate::layout::PromptLayout`] cuts them.
    pub fn reused_share(&self, lengths: &[[u32; 2]]) -> f64 {
        let mut seen = std::collections::HashSet::new();
        let (mut reused, mut total) = (0u64, 0u64);
        for (ids, [input, _]) in self.hash_ids.iter().zip(lengths) {
            total += u64::from(*input);
            let mut left = *input;
            for id in ids {
                let tokens = left.min(self.block_tokens);
                if !seen.insert(*id) {
                    reused += u64::from(tokens);
                }
                left -= tokens;
            }
        }
        if total == 0 {
            0.0
        } else {
            reused as f64 / total as f64
        }
    }

    fn validate(&self, requests: usize) -> Result<()> {
        if self.block_tokens == 0 || self.block_tokens > 1_000_000 {
            return Err(ModelError::invalid(
                "workload.arrivals.blocks.block_tokens",
                self.block_tokens,
                "must be between 1 and 1,000,000",
            ));
        }
        if self.hash_ids.len() != requests {
            return Err(ModelError::invalid(
                "workload.arrivals.blocks.hash_ids",
                self.hash_ids.len(),
                "a trace's block lists must number its send times",
            ));
        }
        Ok(())
    }
}

/// A trace from a file's text, in one of three formats, told by its first line:
///
/// - send times, one per line, seconds from the start (blank lines and `#` comments
///   skipped);
/// - mooncake's JSONL, one request per line: `timestamp` (milliseconds), `input_length`,
///   `output_length` and, when given, `hash_ids` (its prefix blocks of
///   [`MOONCAKE_BLOCK_TOKENS`]; other members are read past);
/// - Azure's LLM inference CSV: a `TIMESTAMP,ContextTokens,GeneratedTokens` header (in any
///   order), then one request per line, its time as `2023-11-16 18:15:46.6805900`.
///
/// The two with lengths are moved to start at 0. The error names the 1-based line and
/// what is wrong with it.
pub fn parse_trace(text: &str) -> std::result::Result<Trace, (usize, String)> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let Some((first_no, first)) = lines.next() else {
        return Ok(Trace::default());
    };
    let rest = std::iter::once((first_no, first)).chain(lines);
    let mut trace = Trace::default();
    if first.starts_with('{') {
        let mut hash_ids = Vec::new();
        for (no, line) in rest {
            let l = mooncake_line(line).map_err(|e| (no, e))?;
            trace.send_times_s.push(l.timestamp * 1e-3);
            trace.lengths.push([l.input_length, l.output_length]);
            hash_ids.push(l.hash_ids);
        }
        if hash_ids.iter().any(|h| !h.is_empty()) {
            trace.blocks = Some(TraceBlocks {
                block_tokens: MOONCAKE_BLOCK_TOKENS,
                hash_ids,
            });
        }
    } else if first.to_ascii_lowercase().contains("timestamp") {
        let columns: Vec<String> = first
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        let at = |name: &str| {
            columns.iter().position(|c| c == name).ok_or((
                first_no,
                format!("an Azure trace's header names TIMESTAMP, ContextTokens and GeneratedTokens; '{first}' lacks {name}"),
            ))
        };
        let (ti, ci, gi) = (
            at("timestamp")?,
            at("contexttokens")?,
            at("generatedtokens")?,
        );
        for (no, line) in rest.skip(1) {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let cell = |i: usize| cells.get(i).copied().unwrap_or("");
            let t = azure_time(cell(ti)).ok_or((
                no,
                format!(
                    "'{}' is not a time like 2023-11-16 18:15:46.6805900",
                    cell(ti)
                ),
            ))?;
            let count = |i: usize| {
                cell(i)
                    .parse::<u32>()
                    .map_err(|_| (no, format!("'{}' is not a token count", cell(i))))
            };
            trace.send_times_s.push(t);
            trace.lengths.push([count(ci)?, count(gi)?]);
        }
    } else {
        for (no, line) in rest {
            trace.send_times_s.push(
                line.parse()
                    .map_err(|_| (no, format!("'{line}' is not a time in seconds")))?,
            );
        }
        return Ok(trace);
    }
    if let Some(&t0) = trace.send_times_s.first() {
        trace.send_times_s.iter_mut().for_each(|t| *t -= t0);
    }
    Ok(trace)
}

/// One request of mooncake's JSONL.
#[derive(Deserialize)]
struct MooncakeLine {
    /// Milliseconds.
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

fn mooncake_line(line: &str) -> std::result::Result<MooncakeLine, String> {
    let l: MooncakeLine = serde_json::from_str(line).map_err(|e| {
        format!("not a mooncake request (timestamp, input_length, output_length): {e}")
    })?;
    if !l.timestamp.is_finite() {
        return Err(format!("timestamp {} is not a time", l.timestamp));
    }
    Ok(l)
}

/// Seconds since 1970-01-01 of an Azure trace's `YYYY-MM-DD hh:mm:ss[.fraction]`.
fn azure_time(s: &str) -> Option<f64> {
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec = t.next()?.parse::<f64>().ok()?;
    if !(0..24).contains(&h) || !(0..60).contains(&min) || !(0.0..61.0).contains(&sec) {
        return None;
    }
    // Days from the civil date (the proleptic Gregorian calendar).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3_600 + min * 60) as f64 + sec)
}

/// Changes to a workload given on the command line, applied the same way by every command
/// (`run`, `sim`): the arrival shape at the given or current rate, or the rate alone; a
/// closed loop of users; a trace of send times (which also sets the request count);
/// then the stop and the token lengths.
#[derive(Debug, Clone, Default)]
pub struct WorkloadFlags {
    /// Requests per second.
    pub qps: Option<f64>,
    /// The gaps' shape (at `qps`, else the workload's rate).
    pub arrival: Option<Gaps>,
    /// A closed loop of this many users instead of a rate.
    pub users: Option<u32>,
    /// Turns of each closed-loop user's conversation.
    pub turns: Option<u32>,
    /// Closed-loop users' think time, seconds.
    pub think_s: Option<f64>,
    /// A trace: send times, and lengths when it carries them.
    pub trace: Option<Trace>,
    /// Schedule length, seconds.
    pub duration_s: Option<f64>,
    /// Request count.
    pub requests: Option<u64>,
    /// Prompt tokens.
    pub input_tokens: Option<Lengths>,
    /// Output tokens.
    pub output_tokens: Option<Lengths>,
    /// Shared prefixes: how many.
    pub prefix_groups: Option<u32>,
    /// Shared prefixes: tokens each.
    pub prefix_tokens: Option<u32>,
    /// Shared prefixes: how often each is drawn.
    pub prefix_popularity: Option<Popularity>,
    /// Prompts from a dataset file (its entries are read later, where files are read).
    pub dataset: Option<Dataset>,
}

impl Workload {
    /// Applies `f`. A rate alone is refused for arrivals that have none to change (a
    /// trace, a closed loop); with a shape (`run --arrival`) it replaces them.
    pub fn apply(&mut self, f: &WorkloadFlags) -> Result<()> {
        // Flags that set the arrivals replace one another, so two of them together would
        // leave one unused: refused, not dropped.
        let rate = match (f.qps, f.arrival) {
            (Some(q), _) => Some(("--qps", q.to_string())),
            (None, Some(g)) => Some(("--arrival", g.to_string())),
            (None, None) => None,
        };
        if let (Some((flag, value)), Some(_)) = (&rate, f.users) {
            return Err(ModelError::invalid(
                flag,
                value,
                "a closed loop of --users sends as each reply ends: it has no rate or gaps",
            ));
        }
        if f.trace.is_some() {
            let users = f.users.map(|u| ("--users", u.to_string()));
            if let Some((flag, value)) = rate.or(users) {
                return Err(ModelError::invalid(
                    flag,
                    value,
                    "--trace gives every send time",
                ));
            }
        }
        if let Some(gaps) = f.arrival {
            let Some(rate) = f.qps.or(self.arrivals.rate_per_s()) else {
                return Err(ModelError::invalid(
                    "--arrival",
                    gaps,
                    "the scenario's arrivals have no rate to keep (a closed loop, or a trace of one send): give --qps too",
                ));
            };
            self.arrivals = Arrivals::renewal(gaps, rate);
        } else if let Some(q) = f.qps {
            match &mut self.arrivals {
                Arrivals::Poisson { rate_per_s }
                | Arrivals::Constant { rate_per_s }
                | Arrivals::Gamma { rate_per_s, .. } => *rate_per_s = q,
                Arrivals::Trace { .. } | Arrivals::Closed { .. } => {
                    return Err(ModelError::invalid(
                        "--qps",
                        q,
                        "needs Poisson, constant or gamma arrivals: a trace or a closed loop has no rate to change",
                    ));
                }
            }
        }
        if let Some(users) = f.users {
            self.arrivals = Arrivals::Closed {
                users,
                think_s: 0.0,
                turns: 1,
            };
        }
        if let Some(t) = f.turns {
            let Arrivals::Closed { turns, .. } = &mut self.arrivals else {
                return Err(ModelError::invalid(
                    "--turns",
                    t,
                    "conversations need a closed loop of users (--users N)",
                ));
            };
            *turns = t;
        }
        if let Some(t) = f.think_s {
            let Arrivals::Closed { think_s, .. } = &mut self.arrivals else {
                return Err(ModelError::invalid(
                    "--think-time",
                    t,
                    "think time needs a closed loop of users (--users N)",
                ));
            };
            *think_s = t;
        }
        if let Some(trace) = &f.trace {
            self.stop = Stop::Count {
                requests: trace.send_times_s.len() as u64,
            };
            self.arrivals = Arrivals::Trace {
                send_times_s: trace.send_times_s.clone(),
                lengths: trace.lengths.clone(),
                blocks: trace.blocks.clone(),
            };
        }
        if let Some(seconds) = f.duration_s {
            self.stop = Stop::Duration { seconds };
        }
        if let Some(requests) = f.requests {
            self.stop = Stop::Count { requests };
        }
        if let Arrivals::Trace { lengths, .. } = &self.arrivals
            && !lengths.is_empty()
            && (f.input_tokens.is_some() || f.output_tokens.is_some())
        {
            return Err(ModelError::invalid(
                "--prompt-tokens/--output-tokens",
                "given",
                "the trace gives each request's lengths",
            ));
        }
        if let Some(d) = &f.dataset {
            self.dataset = Some(d.clone());
        }
        if let Some(d) = &mut self.dataset {
            if f.input_tokens.is_some() {
                return Err(ModelError::invalid(
                    "--prompt-tokens",
                    "given",
                    "the dataset gives each request's prompt (--dataset-min-tokens and --dataset-max-tokens filter its lengths)",
                ));
            }
            if f.output_tokens.is_some() {
                // Asked for by name: the given lengths, not the dataset's.
                d.outputs_from_dataset = false;
            }
        }
        if let Some(l) = f.input_tokens {
            self.input_tokens = l;
        }
        if let Some(l) = f.output_tokens {
            self.output_tokens = l;
        }
        if f.prefix_groups.is_some() || f.prefix_tokens.is_some() || f.prefix_popularity.is_some() {
            let old = self.prefix;
            let groups = f.prefix_groups.or(old.map(|p| p.groups));
            let tokens = f.prefix_tokens.or(old.map(|p| p.tokens));
            let (Some(groups), Some(tokens)) = (groups, tokens) else {
                return Err(ModelError::invalid(
                    "--prefix-groups",
                    groups.map_or("none".to_string(), |g| g.to_string()),
                    "shared prefixes need both --prefix-groups and --prefix-tokens",
                ));
            };
            self.prefix = Some(SharedPrefix {
                groups,
                tokens,
                popularity: f
                    .prefix_popularity
                    .or(old.map(|p| p.popularity))
                    .unwrap_or_default(),
            });
        }
        self.validate()
    }
}

/// The benchmark client: k single-threaded loops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientModel {
    /// Loops (processes or threads, one event loop each).
    pub workers: u32,
    /// How requests are dealt to loops.
    #[serde(default)]
    pub policy: Policy,
    /// What each event costs a loop.
    #[serde(default)]
    pub costs: EventCosts,
    /// When chunks are stamped.
    #[serde(default)]
    pub stamp: Stamp,
    /// Requests one loop keeps in flight at most; further sends wait.
    #[serde(default)]
    pub max_in_flight_per_worker: Option<u32>,
    /// A request not finished this long after its send is abandoned, seconds.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// Whether sending runs on the same loop as reading (true for one asyncio loop).
    #[serde(default = "yes")]
    pub send_shares_loop: bool,
}

fn yes() -> bool {
    true
}

impl ClientModel {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.workers == 0 || self.workers > crate::limits::MAX_SIM_WORKERS {
            return Err(ModelError::invalid(
                "client.workers",
                self.workers,
                "must be between 1 and 100,000",
            ));
        }
        if self.max_in_flight_per_worker == Some(0) {
            return Err(ModelError::invalid(
                "client.max_in_flight_per_worker",
                0,
                "must be >= 1 (or absent)",
            ));
        }
        if let Some(t) = self.timeout_s {
            positive("client.timeout_s", t)?;
            duration("client.timeout_s", t)?;
        }
        if let Some(t) = self.costs.slice_s {
            positive("client.costs.slice_s", t)?;
            duration("client.costs.slice_s", t)?;
        }
        if let Some(r) = self.costs.preempt_per_cpu_s
            && !(r.is_finite() && (0.0..=1e7).contains(&r))
        {
            return Err(ModelError::invalid(
                "client.costs.preempt_per_cpu_s",
                r,
                "must be between 0 and 10,000,000 a second of CPU",
            ));
        }
        for (field, cost) in [
            ("client.costs.send", &self.costs.send),
            ("client.costs.chunk", &self.costs.chunk),
            ("client.costs.finish", &self.costs.finish),
            ("client.costs.wake", &self.costs.wake),
        ] {
            if let Some(s) = cost {
                s.validate().map_err(|e| match e {
                    ModelError::Invalid { value, reason, .. } => ModelError::Invalid {
                        name: field,
                        value,
                        reason,
                    },
                    other => other,
                })?;
            }
        }
        Ok(())
    }
}

fn positive(field: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ModelError::invalid(field, v, "must be a finite number > 0"))
    }
}

/// A duration on the nanosecond clock (0 allowed).
fn duration(field: &'static str, v: f64) -> Result<()> {
    match crate::limits::duration_problem(v) {
        None => Ok(()),
        Some(reason) => Err(ModelError::invalid(field, v, reason)),
    }
}

/// A rate per second, within [`crate::units::Rate::per_s`]'s bounds.
fn rate(field: &'static str, v: f64) -> Result<()> {
    crate::units::Rate::per_s(v)
        .map(|_| ())
        .map_err(|e| match e {
            ModelError::Invalid { value, reason, .. } => ModelError::Invalid {
                name: field,
                value,
                reason,
            },
            other => other,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_change_a_workload_one_way() {
        let base = Workload {
            arrivals: Arrivals::Gamma {
                rate_per_s: 50.0,
                shape: 2.0,
            },
            stop: Stop::Duration { seconds: 10.0 },
            input_tokens: Lengths::Fixed { tokens: 8 },
            output_tokens: Lengths::Fixed { tokens: 4 },
            prefix: None,
            dataset: None,
        };
        // A rate keeps the shape; a shape keeps the rate.
        let mut w = base.clone();
        w.apply(&WorkloadFlags {
            qps: Some(80.0),
            ..WorkloadFlags::default()
        })
        .unwrap();
        assert_eq!(
            w.arrivals,
            Arrivals::Gamma {
                rate_per_s: 80.0,
                shape: 2.0
            }
        );
        let mut w = base.clone();
        w.apply(&WorkloadFlags {
            arrival: Some(Gaps::Constant),
            ..WorkloadFlags::default()
        })
        .unwrap();
        assert_eq!(w.arrivals, Arrivals::Constant { rate_per_s: 50.0 });
        // A trace sets the count, unless a stop is given too.
        let trace = Some(Trace {
            blocks: None,
            send_times_s: vec![0.0, 0.1, 0.3],
            lengths: Vec::new(),
        });
        let mut w = base.clone();
        w.apply(&WorkloadFlags {
            trace: trace.clone(),
            ..WorkloadFlags::default()
        })
        .unwrap();
        assert_eq!(w.stop, Stop::Count { requests: 3 });
        let mut w = base.clone();
        w.apply(&WorkloadFlags {
            trace: trace.clone(),
            duration_s: Some(0.2),
            ..WorkloadFlags::default()
        })
        .unwrap();
        assert_eq!(w.stop, Stop::Duration { seconds: 0.2 });
        // A rate alone cannot change a trace; a bad value is refused by validation.
        let err = w
            .apply(&WorkloadFlags {
                qps: Some(10.0),
                ..WorkloadFlags::default()
            })
            .unwrap_err();
        assert!(err.to_string().contains("--qps"), "{err}");
        // Two flags that set the arrivals are refused, whichever would have won: a closed
        // loop has no rate or gaps, and a trace gives every send time.
        for (flags, refused) in [
            (
                WorkloadFlags {
                    users: Some(2),
                    qps: Some(5.0),
                    ..WorkloadFlags::default()
                },
                "--qps",
            ),
            (
                WorkloadFlags {
                    users: Some(2),
                    arrival: Some(Gaps::Constant),
                    ..WorkloadFlags::default()
                },
                "--arrival",
            ),
            (
                WorkloadFlags {
                    trace: trace.clone(),
                    users: Some(2),
                    ..WorkloadFlags::default()
                },
                "--users",
            ),
            (
                WorkloadFlags {
                    trace: trace.clone(),
                    qps: Some(5.0),
                    ..WorkloadFlags::default()
                },
                "--qps",
            ),
        ] {
            let mut w = base.clone();
            let err = w.apply(&flags).unwrap_err().to_string();
            assert!(err.contains(refused), "{err}");
            assert_eq!(w, base, "a refused change left the workload changed");
        }
        // Gaps alone keep the rate there is; where there is none, they need one.
        let closed = Workload {
            arrivals: Arrivals::Closed {
                users: 3,
                think_s: 0.0,
                turns: 1,
            },
            ..base.clone()
        };
        let gaps = WorkloadFlags {
            arrival: Some(Gaps::Constant),
            ..WorkloadFlags::default()
        };
        let err = closed.clone().apply(&gaps).unwrap_err().to_string();
        assert!(err.contains("give --qps too"), "{err}");
        let mut w = closed;
        w.apply(&WorkloadFlags {
            qps: Some(7.0),
            ..gaps
        })
        .unwrap();
        assert_eq!(w.arrivals, Arrivals::Constant { rate_per_s: 7.0 });
        let mut w = base;
        assert!(
            w.apply(&WorkloadFlags {
                requests: Some(0),
                ..WorkloadFlags::default()
            })
            .is_err()
        );
    }

    /// The three trace formats, told by their first line; lengths where the format has
    /// them; every error names its line.
    #[test]
    fn trace_formats() {
        let plain = parse_trace("# sends\n0\n0.5\n\n1.25\n").unwrap();
        assert_eq!(plain.send_times_s, vec![0.0, 0.5, 1.25]);
        assert!(plain.lengths.is_empty());

        let mooncake = "{\"timestamp\": 1000, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [0, 1]}\n\
                        {\"timestamp\": 1500, \"input_length\": 12, \"output_length\": 3, \"hash_ids\": []}\n";
        let m = parse_trace(mooncake).unwrap();
        assert_eq!(m.send_times_s, vec![0.0, 0.5]);
        assert_eq!(m.lengths, vec![[6955, 52], [12, 3]]);
        assert_eq!(
            m.blocks,
            Some(TraceBlocks {
                block_tokens: 512,
                hash_ids: vec![vec![0, 1], vec![]]
            })
        );
        // Request 2's prompt: 600 of its 1000 tokens in block 1, which request 1 named.
        let reuse = TraceBlocks {
            block_tokens: 600,
            hash_ids: vec![vec![1], vec![1, 2]],
        };
        assert!((reuse.reused_share(&[[100, 1], [1000, 1]]) - 600.0 / 1100.0).abs() < 1e-12);
        let no_blocks =
            parse_trace("{\"timestamp\": 3, \"input_length\": 2, \"output_length\": 1}\n");
        assert_eq!(no_blocks.unwrap().blocks, None);

        let azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                     2023-11-16 18:15:46.6805900,374,44\n\
                     2023-11-16 18:15:50.9951690,396,109\n\
                     2023-11-17 00:00:00,10,1\n";
        let a = parse_trace(azure).unwrap();
        assert_eq!(a.lengths, vec![[374, 44], [396, 109], [10, 1]]);
        assert!(
            (a.send_times_s[1] - 4.314579).abs() < 1e-6,
            "{:?}",
            a.send_times_s
        );
        // Across midnight: 5 h 44 min 13.31941 s after the first.
        assert!((a.send_times_s[2] - 20_653.319_41).abs() < 1e-6);
        // Columns in another order.
        let b = parse_trace("GeneratedTokens,TIMESTAMP,ContextTokens\n7,2023-11-16 00:00:01,9\n")
            .unwrap();
        assert_eq!(b.lengths, vec![[9, 7]]);

        // Against the epoch's own count (1,700,158,546 s for 2023-11-16 18:15:46 UTC; a
        // leap day).
        assert_eq!(azure_time("2023-11-16 18:15:46"), Some(1_700_158_546.0));
        assert_eq!(azure_time("2000-02-29 00:00:00"), Some(951_782_400.0));
        assert_eq!(azure_time("1970-01-01 00:00:00"), Some(0.0));
        for bad in [
            "2023-13-01 00:00:00",
            "2023-11-16",
            "yesterday",
            "2023-11-16 25:00:00",
        ] {
            assert_eq!(azure_time(bad), None, "{bad}");
        }

        for (text, line, says) in [
            ("0\n1\nsoon\n", 3, "not a time in seconds"),
            (
                "{\"timestamp\": 0, \"input_length\": 1}\n",
                1,
                "not a mooncake request",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:00,x,1\n",
                2,
                "not a token count",
            ),
            ("TIMESTAMP,ContextTokens\n", 1, "lacks generatedtokens"),
        ] {
            let (l, why) = parse_trace(text).unwrap_err();
            assert_eq!(l, line, "{text}");
            assert!(why.contains(says), "{text}: {why}");
        }
    }

    /// A trace's lengths number its sends and fit the token limit; length flags cannot
    /// override them.
    #[test]
    fn a_trace_with_lengths_is_checked() {
        let mut w = Workload {
            arrivals: Arrivals::Poisson { rate_per_s: 10.0 },
            stop: Stop::Count { requests: 5 },
            input_tokens: Lengths::Fixed { tokens: 8 },
            output_tokens: Lengths::Fixed { tokens: 8 },
            prefix: None,
            dataset: None,
        };
        let trace = Trace {
            blocks: None,
            send_times_s: vec![0.0, 1.0],
            lengths: vec![[100, 5], [7, 9]],
        };
        w.apply(&WorkloadFlags {
            trace: Some(trace.clone()),
            ..WorkloadFlags::default()
        })
        .unwrap();
        w.validate().unwrap();
        assert_eq!(w.longest_prompt(), 100);
        assert!(
            w.clone()
                .apply(&WorkloadFlags {
                    output_tokens: Some(Lengths::Fixed { tokens: 3 }),
                    ..WorkloadFlags::default()
                })
                .is_err()
        );
        for lengths in [
            vec![[1, 1]],
            vec![[0, 1], [1, 1]],
            vec![[1, 1], [1, 20_000_000]],
        ] {
            let bad = Workload {
                arrivals: Arrivals::Trace {
                    send_times_s: vec![0.0, 1.0],
                    lengths,
                    blocks: None,
                },
                ..w.clone()
            };
            assert!(bad.validate().is_err());
        }
    }

    #[test]
    fn length_grammar() {
        assert_eq!(
            "200".parse::<Lengths>().unwrap(),
            Lengths::Fixed { tokens: 200 }
        );
        assert_eq!(
            "uniform:1,30".parse::<Lengths>().unwrap(),
            Lengths::Uniform { min: 1, max: 30 }
        );
        assert_eq!(
            "lognormal:100,0.5".parse::<Lengths>().unwrap(),
            Lengths::Lognormal {
                mean: 100.0,
                scv: 0.5
            }
        );
        for bad in [
            "many",
            "uniform:1",
            "uniform:1,2,3",
            "poisson:1,2",
            "-3",
            "normal:a,b",
        ] {
            assert!(bad.parse::<Lengths>().is_err(), "{bad}");
        }
        for l in ["200", "uniform:1,30", "normal:50,5.5", "lognormal:100,0.5"] {
            assert_eq!(l.parse::<Lengths>().unwrap().to_string(), l);
        }
        // A count past what the grammar's integer holds is too large, and says so.
        for big in ["99999999999", "uniform:1,99999999999"] {
            let e = big.parse::<Lengths>().unwrap_err().to_string();
            assert!(e.contains("at most 10,000,000 tokens"), "{big}: {e}");
        }
    }

    #[test]
    fn one_arrival_grammar() {
        assert_eq!("poisson".parse::<Gaps>().unwrap(), Gaps::Poisson);
        assert_eq!("constant".parse::<Gaps>().unwrap(), Gaps::Constant);
        assert_eq!(
            "gamma:shape=0.25".parse::<Gaps>().unwrap(),
            Gaps::Gamma { shape: 0.25 }
        );
        assert_eq!(
            "erlang:k=21".parse::<Gaps>().unwrap(),
            Gaps::Gamma { shape: 21.0 }
        );
        for bad in [
            "bursty",
            "gamma:shape=0",
            "gamma:shape=-1",
            "gamma:shape=NaN",
            "erlang:k=2.5",
            "gamma:shape=",
        ] {
            assert!(bad.parse::<Gaps>().is_err(), "{bad}");
        }
        for g in [Gaps::Poisson, Gaps::Constant, Gaps::Gamma { shape: 0.25 }] {
            assert_eq!(g.to_string().parse::<Gaps>().unwrap(), g);
        }
        assert_eq!(
            Arrivals::renewal(Gaps::Gamma { shape: 4.0 }, 10.0),
            Arrivals::Gamma {
                rate_per_s: 10.0,
                shape: 4.0
            }
        );
    }
}
