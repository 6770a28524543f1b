//! heisenbench-sim: a deterministic discrete-event simulator of an LLM benchmark client
//! and the server in front of it.
//!
//! Two engines:
//!
//! * [`engine::Simulation`]: k client loops (FIFO servers of send, chunk and finish jobs)
//!   in front of an llm-d-inference-sim-like server ([`scenario::ServerModel`]), driven by
//!   the shared workload and client types of `heisenbench-model`. It shows the paper's
//!   collapse (a single loop at 1,000 requests/s x 200 tokens) and its cure.
//! * [`textbook`]: one queue, by the Lindley recursion and by an explicit event engine,
//!   with batch-means confidence intervals, to check the theory where it holds;
//!   [`plancheck`] uses its recursions to check plans and to size pooled loops.
//!
//! # Example
//!
//! ```
//! use heisenbench_sim::{engine::Simulation, scenario::preset};
//!
//! let runs = preset("paper-1000", 0.5, 1)?;
//! let single = Simulation::new(runs[0].clone()).run();
//! assert!(single.is_balanced());
//! assert!(single.achieved_qps < 0.5 * single.offered_qps); // the single loop collapses
//! # Ok::<(), heisenbench_sim::scenario::ScenarioError>(())
//! ```
//!
//! # Guarantees
//!
//! * Time is integer nanoseconds ([`time::SimTime`]); no wall clock is read anywhere.
//! * Events are ordered by (time, insertion sequence) ([`events::EventQueue`]).
//! * All randomness comes from PCG streams derived from the scenario's seed
//!   (`heisenbench_model::sample::stream`); the same scenario and seed give a
//!   byte-identical report.
//! * Statistics stream into HDR histograms: memory does not grow with events.

pub mod client_loop;
pub mod engine;
pub mod events;
pub mod plancheck;
pub mod report;
pub mod scenario;
pub mod textbook;
pub mod time;
