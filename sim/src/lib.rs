//! heisenbench-sim: the deterministic discrete-event simulator of a benchmark client and
//! the server in front of it.
//!
//! Not built yet: this crate reserves its place in the workspace (it depends on
//! `heisenbench-model` only, never on tokio or reqwest).
