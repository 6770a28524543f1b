//! heisenbench-live: the live side of heisenbench.
//!
//! * [`mock`]: the embedded OpenAI-compatible mock LLM server (`heisenbench mock`), with
//!   llm-d-inference-sim's behaviour and flags and a monotonic send stamp on every chunk.
//! * [`clock`]: the one place live code reads time (CLOCK_MONOTONIC).
//! * [`timer`]: a microsecond-resolution timer for the async runtime.
//!
//! The sharded load generator (`heisenbench run`) is the next piece to land here.

pub mod clock;
pub mod mock;
pub mod timer;
