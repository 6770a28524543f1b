//! The server's latency law, the one the embedded mock serves and the simulator models
//! (llm-d-inference-sim's): how long a request waits for its first token and between
//! tokens, and how the batch slows both down.

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// The server in front of the client, with llm-d-inference-sim's semantics.
///
/// A request takes one of `max_num_seqs` slots when one is free, else waits in a FIFO
/// queue of at most `max_waiting_queue_length` (beyond it: 429). Its first token comes
/// `prefill_overhead_s + prefill_time_per_token_s x input tokens` after it starts when
/// either prefill parameter is non-zero, else `time_to_first_token_s` (with normal jitter
/// of the given standard deviation, clamped at zero). Each later token follows one
/// inter-token latency. Every latency is multiplied by the load factor
/// f = 1 + (F - 1)(running - 1)/(max_num_seqs - 1), F = `time_factor_under_load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[serde(deny_unknown_fields)]
pub struct ServerModel {
    /// Time to first token, seconds.
    pub time_to_first_token_s: f64,
    /// Its jitter's standard deviation, seconds.
    pub time_to_first_token_std_dev_s: f64,
    /// Fixed prefill cost, seconds.
    pub prefill_overhead_s: f64,
    /// Prefill cost per input token, seconds.
    pub prefill_time_per_token_s: f64,
    /// Inter-token latency, seconds.
    pub inter_token_latency_s: f64,
    /// Its jitter's standard deviation, seconds.
    pub inter_token_latency_std_dev_s: f64,
    /// Concurrent sequences (batch slots).
    pub max_num_seqs: u32,
    /// Waiting requests beyond which the server answers 429.
    pub max_waiting_queue_length: u32,
    /// F in the load factor; 1 disables slow-down.
    pub time_factor_under_load: f64,
    /// A prefix cache: prompt tokens it serves skip `prefill_time_per_token_s`
    /// ([`crate::prefix_cache`]). None: every prompt is prefilled whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<crate::prefix_cache::PrefixCacheLaw>,
}

impl Default for ServerModel {
    fn default() -> Self {
        Self {
            time_to_first_token_s: 0.0,
            time_to_first_token_std_dev_s: 0.0,
            prefill_overhead_s: 0.0,
            prefill_time_per_token_s: 0.0,
            inter_token_latency_s: 0.0,
            inter_token_latency_std_dev_s: 0.0,
            max_num_seqs: 5,
            max_waiting_queue_length: 1000,
            time_factor_under_load: 1.0,
            prefix_cache: None,
        }
    }
}

impl ServerModel {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (name, v) in [
            ("server.time_to_first_token_s", self.time_to_first_token_s),
            (
                "server.time_to_first_token_std_dev_s",
                self.time_to_first_token_std_dev_s,
            ),
            ("server.prefill_overhead_s", self.prefill_overhead_s),
            (
                "server.prefill_time_per_token_s",
                self.prefill_time_per_token_s,
            ),
            ("server.inter_token_latency_s", self.inter_token_latency_s),
            (
                "server.inter_token_latency_std_dev_s",
                self.inter_token_latency_std_dev_s,
            ),
        ] {
            if let Some(reason) = crate::limits::duration_problem(v) {
                return Err(ModelError::Invalid {
                    name,
                    value: format!("{v:e}"),
                    reason,
                });
            }
        }
        if self.max_num_seqs == 0 {
            return Err(ModelError::Invalid {
                name: "server.max_num_seqs",
                value: "0".into(),
                reason: "must be >= 1",
            });
        }
        if !(self.time_factor_under_load.is_finite()
            && (1.0..=crate::limits::MAX_LOAD_FACTOR).contains(&self.time_factor_under_load))
        {
            return Err(ModelError::Invalid {
                name: "server.time_factor_under_load",
                value: format!("{:e}", self.time_factor_under_load),
                reason: "must be between 1 and 1e6",
            });
        }
        Ok(())
    }

    /// Whether every latency is zero: a response is there the moment its request is.
    pub fn is_instant(&self) -> bool {
        [
            self.time_to_first_token_s,
            self.time_to_first_token_std_dev_s,
            self.prefill_overhead_s,
            self.prefill_time_per_token_s,
            self.inter_token_latency_s,
            self.inter_token_latency_std_dev_s,
        ]
        .iter()
        .all(|v| *v == 0.0)
    }

    /// Whether a response's tokens all leave at once (zero inter-token latency): the
    /// client then sees bursts.
    pub fn streams_in_bursts(&self) -> bool {
        self.inter_token_latency_s == 0.0 && self.inter_token_latency_std_dev_s == 0.0
    }

    /// The load factor with `running` sequences in the batch:
    /// f = 1 + (F - 1)(running - 1)/(max_num_seqs - 1) (1 with one slot or F = 1).
    pub fn load_factor(&self, running: u32) -> f64 {
        if self.max_num_seqs <= 1 || self.time_factor_under_load == 1.0 {
            return 1.0;
        }
        let running = f64::from(running.max(1));
        1.0 + (self.time_factor_under_load - 1.0) * (running - 1.0)
            / f64::from(self.max_num_seqs - 1)
    }

    /// A latency of mean `mean_s` with normal jitter of standard deviation `sd_s`
    /// (`normal` gives a standard normal draw; it is asked for only when there is
    /// jitter), clamped at zero, times the load factor; seconds. Every latency the law gives
    /// is at most [`crate::limits::MAX_SECONDS`] (a request that long never ends in any run).
    fn jittered_s(
        &self,
        mean_s: f64,
        sd_s: f64,
        running: u32,
        normal: impl FnOnce() -> f64,
    ) -> f64 {
        let base = if sd_s > 0.0 {
            (mean_s + sd_s * normal()).max(0.0)
        } else {
            mean_s
        };
        (base * self.load_factor(running)).min(crate::limits::MAX_SECONDS)
    }

    /// The time to the first token of a request of `prompt_tokens` that starts with
    /// `running` sequences in the batch (itself included), seconds.
    pub fn ttft_s(&self, prompt_tokens: u32, running: u32, normal: impl FnOnce() -> f64) -> f64 {
        if self.prefill_overhead_s > 0.0 || self.prefill_time_per_token_s > 0.0 {
            ((self.prefill_overhead_s + self.prefill_time_per_token_s * f64::from(prompt_tokens))
                * self.load_factor(running))
            .min(crate::limits::MAX_SECONDS)
        } else {
            self.jittered_s(
                self.time_to_first_token_s,
                self.time_to_first_token_std_dev_s,
                running,
                normal,
            )
        }
    }

    /// One inter-token latency with `running` sequences in the batch, seconds.
    pub fn itl_s(&self, running: u32, normal: impl FnOnce() -> f64) -> f64 {
        self.jittered_s(
            self.inter_token_latency_s,
            self.inter_token_latency_std_dev_s,
            running,
            normal,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_law_by_hand() {
        let s = ServerModel {
            time_to_first_token_s: 0.02,
            inter_token_latency_s: 0.001,
            max_num_seqs: 5,
            time_factor_under_load: 3.0,
            ..ServerModel::default()
        };
        // f = 1 + (3 - 1)(running - 1)/4: 1 alone, 2 with 3 running, 3 full.
        assert_eq!(s.load_factor(1), 1.0);
        assert_eq!(s.load_factor(3), 2.0);
        assert_eq!(s.load_factor(5), 3.0);
        let never = || -> f64 { panic!("no jitter, no draw") };
        assert!((s.ttft_s(100, 3, never) - 0.04).abs() < 1e-15);
        assert!((s.itl_s(5, never) - 0.003).abs() < 1e-15);
        // Prefill replaces the fixed TTFT: 1 ms + 10 us x 100 tokens, at f = 1.
        let p = ServerModel {
            prefill_overhead_s: 1e-3,
            prefill_time_per_token_s: 10e-6,
            ..s.clone()
        };
        assert!((p.ttft_s(100, 1, never) - 2e-3).abs() < 1e-15);
        // Jitter: the draw shifts the mean by sd per unit, never below zero.
        let j = ServerModel {
            time_to_first_token_std_dev_s: 0.01,
            ..s.clone()
        };
        assert!((j.ttft_s(0, 1, || 1.5) - 0.035).abs() < 1e-15);
        assert_eq!(j.ttft_s(0, 1, || -5.0), 0.0);
    }
}
