//! heisenbench-model: the queueing theory of a benchmark client.
//!
//! A benchmark client's event loop is a queue: streamed chunks arrive, wait for the loop,
//! and are stamped only after it gets to them. This crate predicts that wait and sizes the
//! client so the wait stays under a budget. Pure math: no I/O, no async, no clock.
//!
//! # Main types
//!
//! * [`service::Service`]: a per-event cost distribution with exact moments.
//! * Queues implementing [`queue::WaitModel`]: [`mg1::Mg1`] (M/M/1, M/D/1, M/G/1),
//!   [`batch::BatchMg1`] (M^X/G/1, token bursts), [`gig1::Gig1`] (GI^X/G/1, E_k/G/1:
//!   round-robin shards, solved on a lattice by [`lindley::LindleyGrid`]), [`mmc::Mgc`] (M/M/c, M/G/c, pooled loops). Each documents its
//!   assumptions and how its tail is computed ([`queue::TailMethod`]).
//! * [`plan::plan_workers`] and [`plan::max_qps`]: how many loops a load needs, and how
//!   much load k loops carry.
//! * [`metrics::Timeline`]: TTFT, TPOT, ITL, E2E and NTPOT of one request, from the
//!   intended or the actual send.
//! * [`compare::compare`]: an observation against the prediction, with a verdict.
//! * [`scenario`] and [`schedule`]: the workload and client types every engine reads, and
//!   the seeded arrival schedule they all replay ([`sample`] holds the seeded streams).
//! * [`stats::Recorder`]: mergeable, serialisable latency histograms for reports.
//! * [`interval::SampleInterval`]: 95 % intervals of a run's mean and a quantile, from its
//!   samples in time order (batch means; order statistics at the effective count).
//!
//! # Example
//!
//! ```
//! use heisenbench_model::mg1::Mg1;
//! use heisenbench_model::queue::WaitModel;
//! use heisenbench_model::units::Quantile;
//!
//! // E\[S\] = 1, rho = 0.8: the textbook M/M/1.
//! let q = Mg1::mm1(0.8, 1.0)?;
//! assert!((q.wait_mean_s() - 4.0).abs() < 1e-12);
//! assert!((q.wait_quantile_s(Quantile::P99) - 21.91).abs() < 0.01);
//!
//! // rho >= 1 is an error that names the fix, never NaN.
//! let err = Mg1::md1(40_000.0, 50e-6).unwrap_err();
//! assert!(err.to_string().contains("at least 3 server(s)"));
//! # Ok::<(), heisenbench_model::ModelError>(())
//! ```
//!
//! # Guarantees
//!
//! Constructors refuse rho >= 1 with [`ModelError::Unstable`], which carries the
//! utilisation and the smallest stable server count; every number a stable model returns
//! is finite. Times are seconds, rates per second, quantile levels in (0, 1).

pub mod batch;
mod burst;
pub mod client_loop;
pub mod compare;
pub mod dataset;
pub mod error;
mod fft;
pub mod gig1;
pub mod interval;
pub mod layout;
pub mod limits;
pub mod lindley;
pub mod metrics;
pub mod mg1;
pub mod mmc;
pub mod plan;
pub mod prefix_cache;
pub mod priority;
pub mod profile;
pub mod queue;
pub mod sample;
pub mod scenario;
pub mod schedule;
pub mod server;
pub mod service;
pub mod slo;
pub mod stats;
pub mod steady;
mod sums;
pub mod table;
pub mod tail;
pub mod units;

pub use error::ModelError;
