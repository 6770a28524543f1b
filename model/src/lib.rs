//! heisenbench-model: queueing theory of the benchmark client.
//!
//! Pure math: no I/O, no async, no clock.
pub mod error;
pub use error::ModelError;
pub mod mg1;
pub mod queue;
pub mod service;
pub mod tail;
pub mod units;
pub mod batch;
mod burst;
pub mod kingman;
pub mod mmc;
pub mod plan;
pub mod compare;
pub mod metrics;
