//! LLM latency metrics from one request's timeline.
//!
//! Every metric can be taken from two origins: the **intended** send time (what the
//! schedule asked for) or the **actual** send time (when the client got round to it). The
//! difference is the send lag; measuring from the intended time means a client that falls
//! behind cannot hide it (coordinated omission).
//!
//! With o the origin, t_1..t_N the arrival times of the N output tokens, and t_end the end
//! of the response:
//!
//! * TTFT = t_1 - o
//! * E2E = t_end - o
//! * ITL_i = t_i - t_{i-1}, i = 2..N
//! * TPOT = (t_end - t_1) / (N - 1) (vLLM's definition: E2E minus TTFT over the remaining
//!   tokens; undefined for N = 1)
//! * NTPOT = E2E / N (the paper's normalised time per output token)
//! * NTPOT = (queue + prefill + decode) / N with queue = t_actual - t_intended (zero from
//!   the actual origin), prefill = t_1 - t_actual (the server's queue and prefill, which a
//!   client cannot tell apart), decode = t_end - t_1.
//!
//! [`Convention::InferencePerf`] reproduces inference-perf: NTPOT = (t_end - t_actual) / N
//! always from the actual send, and TPOT = (t_N - t_1) / (N - 1), from the last token
//! rather than the end of the response.

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};

/// Which send time latencies are measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The schedule's intended send time (coordinated-omission free).
    Intended,
    /// When the request was actually written.
    Actual,
}

/// Whose formulas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Convention {
    /// This crate's definitions (see the module docs).
    #[default]
    Heisenbench,
    /// inference-perf's: NTPOT from the actual send, TPOT from the last token.
    InferencePerf,
}

/// One request's timeline, in nanoseconds on one monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// When the schedule wanted the request sent.
    pub intended_send_ns: u64,
    /// When it was sent.
    pub actual_send_ns: u64,
    /// Arrival of each output token (or chunk carrying tokens), ascending.
    pub token_ns: Vec<u64>,
    /// End of the response (last byte or `[DONE]`).
    pub end_ns: u64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Output tokens.
    pub output_tokens: u32,
}

/// NTPOT's parts, each already divided by the output tokens (so they add up to NTPOT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NtpotParts {
    /// Client send lag per output token, seconds (0 from the actual origin).
    pub queue_s: f64,
    /// Server queue plus prefill per output token, seconds.
    pub prefill_s: f64,
    /// Decode per output token, seconds.
    pub decode_s: f64,
}

impl NtpotParts {
    /// Adds `o`'s parts to these (a sum over requests).
    pub fn add(&mut self, o: &NtpotParts) {
        self.queue_s += o.queue_s;
        self.prefill_s += o.prefill_s;
        self.decode_s += o.decode_s;
    }

    /// The mean parts from their sums over `n` requests.
    pub fn mean(sums: NtpotParts, n: f64) -> Self {
        Self {
            queue_s: sums.queue_s / n,
            prefill_s: sums.prefill_s / n,
            decode_s: sums.decode_s / n,
        }
    }
}

/// The metrics of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestMetrics {
    /// The origin they are measured from.
    pub origin: Origin,
    /// Time to first token, seconds.
    pub ttft_s: f64,
    /// End to end, seconds.
    pub e2e_s: f64,
    /// Time per output token after the first, seconds; `None` for a single token.
    pub tpot_s: Option<f64>,
    /// Inter-token latencies, seconds.
    pub itl_s: Vec<f64>,
    /// Normalised time per output token, seconds.
    pub ntpot_s: f64,
    /// NTPOT's decomposition.
    pub ntpot_parts: NtpotParts,
}

/// The instants of one request that every scalar metric needs (nanoseconds, one clock).
/// Streaming consumers (the simulator) keep these instead of every token time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Marks {
    /// Intended send.
    pub intended_send_ns: u64,
    /// Actual send.
    pub actual_send_ns: u64,
    /// First token.
    pub first_token_ns: u64,
    /// Last token.
    pub last_token_ns: u64,
    /// End of the response.
    pub end_ns: u64,
    /// Output tokens (>= 1).
    pub output_tokens: u32,
}

/// The scalar metrics of one request (everything but the inter-token latencies).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scalars {
    /// Time to first token, seconds.
    pub ttft_s: f64,
    /// End to end, seconds.
    pub e2e_s: f64,
    /// Time per output token after the first, seconds; `None` for one token.
    pub tpot_s: Option<f64>,
    /// Normalised time per output token, seconds.
    pub ntpot_s: f64,
    /// NTPOT's decomposition.
    pub ntpot_parts: NtpotParts,
}

impl Marks {
    /// The scalar metrics from `origin` by `convention` (formulas in the module docs).
    pub fn scalars(&self, origin: Origin, convention: Convention) -> Scalars {
        let o = match origin {
            Origin::Intended => self.intended_send_ns,
            Origin::Actual => self.actual_send_ns,
        };
        let n = f64::from(self.output_tokens.max(1));
        let tpot_end = match convention {
            Convention::Heisenbench => self.end_ns,
            Convention::InferencePerf => self.last_token_ns,
        };
        let tpot_s =
            (self.output_tokens > 1).then(|| secs(self.first_token_ns, tpot_end) / (n - 1.0));
        let e2e_s = secs(o, self.end_ns);
        let ntpot_s = match convention {
            Convention::Heisenbench => e2e_s / n,
            Convention::InferencePerf => secs(self.actual_send_ns, self.end_ns) / n,
        };
        let queue = match (origin, convention) {
            (Origin::Intended, Convention::Heisenbench) => {
                secs(self.intended_send_ns, self.actual_send_ns)
            }
            _ => 0.0,
        };
        Scalars {
            ttft_s: secs(o, self.first_token_ns),
            e2e_s,
            tpot_s,
            ntpot_s,
            ntpot_parts: NtpotParts {
                queue_s: queue / n,
                prefill_s: secs(self.actual_send_ns, self.first_token_ns) / n,
                decode_s: secs(self.first_token_ns, self.end_ns) / n,
            },
        }
    }
}

fn secs(from: u64, to: u64) -> f64 {
    // Signed: a sender that fires early gives a negative lag, which must show.
    (i128::from(to) - i128::from(from)) as f64 * 1e-9
}

impl Timeline {
    /// Checks that the timeline is ordered and has at least one token.
    pub fn validate(&self) -> Result<()> {
        let first = *self
            .token_ns
            .first()
            .ok_or_else(|| ModelError::invalid("timeline", "no tokens", "needs one token"))?;
        if self.output_tokens == 0 {
            return Err(ModelError::invalid("output tokens", 0, "must be >= 1"));
        }
        if first < self.actual_send_ns {
            return Err(ModelError::invalid(
                "timeline",
                first,
                "first token before the send",
            ));
        }
        if self.token_ns.windows(2).any(|w| w[1] < w[0]) {
            return Err(ModelError::invalid(
                "timeline",
                "tokens",
                "token times must not decrease",
            ));
        }
        if self.end_ns < *self.token_ns.last().unwrap_or(&first) {
            return Err(ModelError::invalid(
                "timeline",
                self.end_ns,
                "end before the last token",
            ));
        }
        Ok(())
    }

    /// Every metric from `origin`, by `convention`.
    pub fn metrics(&self, origin: Origin, convention: Convention) -> Result<RequestMetrics> {
        self.validate()?;
        let first = self.token_ns[0];
        let marks = Marks {
            intended_send_ns: self.intended_send_ns,
            actual_send_ns: self.actual_send_ns,
            first_token_ns: first,
            last_token_ns: *self.token_ns.last().unwrap_or(&first),
            end_ns: self.end_ns,
            output_tokens: self.output_tokens,
        };
        let sc = marks.scalars(origin, convention);
        let itl_s = self.token_ns.windows(2).map(|w| secs(w[0], w[1])).collect();
        Ok(RequestMetrics {
            origin,
            ttft_s: sc.ttft_s,
            e2e_s: sc.e2e_s,
            tpot_s: sc.tpot_s,
            itl_s,
            ntpot_s: sc.ntpot_s,
            ntpot_parts: sc.ntpot_parts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline() -> Timeline {
        // Intended at 0, sent 2 ms late, tokens at 10, 12, 15 ms, end at 16 ms.
        Timeline {
            intended_send_ns: 0,
            actual_send_ns: 2_000_000,
            token_ns: vec![10_000_000, 12_000_000, 15_000_000],
            end_ns: 16_000_000,
            input_tokens: 320,
            output_tokens: 3,
        }
    }

    #[test]
    fn hand_computed_values() {
        let t = timeline();
        let i = t
            .metrics(Origin::Intended, Convention::Heisenbench)
            .unwrap();
        assert!((i.ttft_s - 0.010).abs() < 1e-12);
        assert!((i.e2e_s - 0.016).abs() < 1e-12);
        assert!((i.tpot_s.unwrap() - 0.003).abs() < 1e-12); // (16 - 10) / 2
        assert_eq!(i.itl_s.len(), 2);
        assert!((i.itl_s[1] - 0.003).abs() < 1e-12);
        assert!((i.ntpot_s - 0.016 / 3.0).abs() < 1e-12);
        let p = i.ntpot_parts;
        assert!((p.queue_s + p.prefill_s + p.decode_s - i.ntpot_s).abs() < 1e-15);
        assert!((p.queue_s - 0.002 / 3.0).abs() < 1e-12);

        let a = t.metrics(Origin::Actual, Convention::Heisenbench).unwrap();
        assert!((a.ttft_s - 0.008).abs() < 1e-12);
        assert_eq!(a.ntpot_parts.queue_s, 0.0);
        assert!((a.ntpot_parts.prefill_s + a.ntpot_parts.decode_s - a.ntpot_s).abs() < 1e-15);

        let ip = t
            .metrics(Origin::Intended, Convention::InferencePerf)
            .unwrap();
        assert!((ip.tpot_s.unwrap() - 0.0025).abs() < 1e-12); // (15 - 10) / 2
        assert!((ip.ntpot_s - 0.014 / 3.0).abs() < 1e-12); // from the actual send
    }

    #[test]
    fn disordered_timelines_are_refused() {
        let mut t = timeline();
        t.token_ns = vec![12_000_000, 10_000_000];
        assert!(t.metrics(Origin::Actual, Convention::Heisenbench).is_err());
        let mut t = timeline();
        t.end_ns = 1;
        assert!(t.validate().is_err());
        let mut t = timeline();
        t.token_ns.clear();
        assert!(t.validate().is_err());
    }
}
