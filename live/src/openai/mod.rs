//! The OpenAI-compatible wire format as a client reads and writes it, without I/O.
//!
//! * [`sse`]: the server-sent-events parser, bytes in, events out, under any split.
//! * [`stream`]: what each event of a completion stream says, and how a stream ended.
//! * `scan`: the chunk scanner, the allocation-free fast path of [`stream::interpret`].
//! * [`prompt`]: prompts of an exact token count (a Hugging Face tokenizer file) or of words.
//! * [`dataset`]: prompts from a dataset file (ShareGPT, JSONL), counted and drawn.
//!
//! Uses nothing else of this crate.

pub mod dataset;
pub mod prompt;
mod scan;
pub mod sse;
pub mod stream;
