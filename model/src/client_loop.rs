//! A benchmark client's loop as an audit sees it: what its CPU costs per request and per
//! streamed chunk, where its TTFT clock starts, and what a simulation of that loop says it
//! reports (the simulation itself is `heisenbench_sim::client_loop`).
//!
//! One number, the CPU per chunk, spreads a request's fixed path (building it, the HTTP
//! library's send, task scheduling) over its chunks and misses where that path falls: a
//! Python client pays it before its first chunk. Two audits that differ only in output
//! length separate the two parts: a request of n chunks costs `a + n b`.

use serde::{Deserialize, Serialize};

use crate::error::{ModelError, Result};

/// The client's CPU per request at one output length, as one audit measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostSample {
    /// Chunks per request (the tokens the server streamed per request).
    pub chunks_per_request: f64,
    /// The client's CPU per request served, seconds.
    pub cpu_per_request_s: f64,
}

/// A client loop's CPU: a fixed part per request and a part per streamed chunk.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoopCosts {
    /// The fixed part of a request: building, sending, finishing it, seconds.
    pub per_request_s: f64,
    /// Reading one streamed chunk, seconds.
    pub per_chunk_s: f64,
}

impl LoopCosts {
    /// The line through two audits' CPU per request against their chunks per request:
    /// its slope is the cost of a chunk, its intercept the cost of a request. Refused when
    /// the lengths are too close to tell apart (less than twice the shorter), or when the
    /// line says a part costs less than nothing, which means the two audits did not measure
    /// the same client (noise larger than a part, or a client whose costs change with load).
    pub fn split(a: CostSample, b: CostSample) -> Result<Self> {
        let (short, long) = if a.chunks_per_request <= b.chunks_per_request {
            (a, b)
        } else {
            (b, a)
        };
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if ![
            short.chunks_per_request,
            long.chunks_per_request,
            short.cpu_per_request_s,
            long.cpu_per_request_s,
        ]
        .into_iter()
        .all(positive)
        {
            return Err(ModelError::invalid(
                "cost split",
                format!("{short:?} {long:?}"),
                "needs two audits that served requests and measured CPU",
            ));
        }
        if long.chunks_per_request < 2.0 * short.chunks_per_request {
            return Err(ModelError::invalid(
                "cost split",
                format!(
                    "{} and {} chunks",
                    short.chunks_per_request, long.chunks_per_request
                ),
                "the output lengths must differ by a factor of two or more",
            ));
        }
        let per_chunk_s = (long.cpu_per_request_s - short.cpu_per_request_s)
            / (long.chunks_per_request - short.chunks_per_request);
        let per_request_s = short.cpu_per_request_s - short.chunks_per_request * per_chunk_s;
        if per_chunk_s <= 0.0 || per_request_s < 0.0 {
            return Err(ModelError::invalid(
                "cost split",
                format!(
                    "{:.3e} s a request at {} chunks, {:.3e} s at {}",
                    short.cpu_per_request_s,
                    short.chunks_per_request,
                    long.cpu_per_request_s,
                    long.chunks_per_request
                ),
                "the longer requests did not cost more per chunk: the audits disagree",
            ));
        }
        Ok(Self {
            per_request_s,
            per_chunk_s,
        })
    }

    /// The CPU of one request of `chunks` chunks, seconds.
    pub fn request_s(&self, chunks: f64) -> f64 {
        self.per_request_s + chunks * self.per_chunk_s
    }

    /// The most requests per second `loops` loops carry at `chunks` chunks a request.
    pub fn saturation_per_s(&self, chunks: f64, loops: u32) -> f64 {
        f64::from(loops) / self.request_s(chunks)
    }
}

/// Where a client starts its TTFT clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockStart {
    /// At the request's intended send (its schedule's time): the loop's backlog is inside
    /// every TTFT (heisenbench).
    Intended,
    /// When the client's loop begins the request (its coroutine or dispatch starts): the
    /// backlog before that is left out (reported apart as lateness, or not at all), the
    /// request's own path before it leaves is in (vLLM's and SGLang's benches,
    /// inference-perf, GuideLLM, AIPerf).
    OwnSend,
}

impl std::fmt::Display for ClockStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Intended => "intended",
            Self::OwnSend => "own-send",
        })
    }
}

impl std::str::FromStr for ClockStart {
    type Err = ModelError;

    /// `intended` or `own-send`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "intended" => Ok(Self::Intended),
            "own-send" => Ok(Self::OwnSend),
            _ => Err(ModelError::invalid("clock", s, "use intended or own-send")),
        }
    }
}

/// What one audit measured of a client's loop: its load, its CPU and the TTFT it added.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AuditedLoad {
    /// The rate the server saw, per second.
    pub rate_per_s: f64,
    /// Chunks per request.
    pub chunks_per_request: f64,
    /// The loops' CPU per request served, seconds.
    pub cpu_per_request_s: f64,
    /// The client's loops.
    pub loops: u32,
    /// The TTFT the client added: its reported minus the server's true mean, p50, p90 and
    /// p99, seconds (None where it reports no such figure).
    pub excess_s: [Option<f64>; 4],
}

impl AuditedLoad {
    /// Its CPU per request at its length.
    pub fn sample(&self) -> CostSample {
        CostSample {
            chunks_per_request: self.chunks_per_request,
            cpu_per_request_s: self.cpu_per_request_s,
        }
    }
}

/// What a simulation of the client's loop predicts it reports, at one audit's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopPrediction {
    /// The costs simulated.
    pub costs: LoopCosts,
    /// The share of a request's fixed cost spent before it leaves (the rest when it
    /// finishes).
    pub before_send: f64,
    /// Where the share came from: fitted on which audit, or given.
    pub before_send_from: String,
    /// The clock simulated.
    pub clock: ClockStart,
    /// Loops simulated (requests dealt at random).
    pub loops: u32,
    /// The load simulated: requests per second and chunks per request.
    pub rate_per_s: f64,
    /// Chunks per request.
    pub chunks_per_request: f64,
    /// The reported TTFT the simulation predicts against a zero-latency server: mean,
    /// p50, p90 and p99, seconds (what the client adds to a server's TTFT).
    pub reported_s: [f64; 4],
    /// The rate the simulated loops achieved.
    pub achieved_per_s: f64,
    /// The most requests per second the loops carry at these costs.
    pub saturation_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: f64, cpu: f64) -> CostSample {
        CostSample {
            chunks_per_request: n,
            cpu_per_request_s: cpu,
        }
    }

    #[test]
    fn two_lengths_give_the_line_back() {
        // a = 1.94 ms, b = 11.6 us: 20 chunks cost 2.172 ms, 200 cost 4.26 ms.
        let (a, b) = (1.94e-3, 11.6e-6);
        let c = LoopCosts::split(sample(200.0, a + 200.0 * b), sample(20.0, a + 20.0 * b)).unwrap();
        assert!((c.per_request_s - a).abs() < 1e-12, "{c:?}");
        assert!((c.per_chunk_s - b).abs() < 1e-15, "{c:?}");
        assert!((c.request_s(100.0) - (a + 100.0 * b)).abs() < 1e-12);
        assert!((c.saturation_per_s(200.0, 2) - 2.0 / (a + 200.0 * b)).abs() < 1e-9);
    }

    #[test]
    fn audits_that_cannot_be_split_are_refused() {
        // Too close in length.
        assert!(LoopCosts::split(sample(150.0, 3e-3), sample(200.0, 4e-3)).is_err());
        // The longer requests cost less: the audits disagree.
        assert!(LoopCosts::split(sample(20.0, 3e-3), sample(200.0, 2e-3)).is_err());
        // A negative fixed part.
        assert!(LoopCosts::split(sample(20.0, 0.1e-3), sample(200.0, 4e-3)).is_err());
        // Nothing measured.
        assert!(LoopCosts::split(sample(20.0, 0.0), sample(200.0, 4e-3)).is_err());
        assert!(LoopCosts::split(sample(20.0, f64::NAN), sample(200.0, 4e-3)).is_err());
    }

    #[test]
    fn the_clock_reads_as_it_prints() {
        for c in [ClockStart::Intended, ClockStart::OwnSend] {
            assert_eq!(c.to_string().parse::<ClockStart>().unwrap(), c);
        }
        assert!("send".parse::<ClockStart>().is_err());
    }
}
