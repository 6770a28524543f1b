//! heisenbench-live: the sharded live load generator and the embedded OpenAI-compatible
//! mock server.
//!
//! Not built yet: this crate reserves its place in the workspace.
