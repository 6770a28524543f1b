//! heisenbench-model: queueing theory of the benchmark client.
//!
//! Pure math: no I/O, no async, no clock.
pub mod error;
pub mod mg1;
pub mod queue;
pub mod service;
pub mod tail;
pub mod units;
