//! heisenbench-live: the live side of heisenbench.
//!
//! * [`mock`]: the embedded OpenAI-compatible mock LLM server (`heisenbench mock`), with
//!   llm-d-inference-sim's behaviour and flags and a monotonic send stamp on every chunk.
//! * [`clock`]: the one place live code reads time (CLOCK_MONOTONIC).
//! * [`timer`]: a microsecond-resolution timer for the async runtime.
//!
//! * [`run`]: the sharded live load generator (`heisenbench run`): one seeded schedule,
//!   striped over shards (threads or processes), each stamping every read as it
//!   returns and measuring from the intended send time; exact merge of their results.
//! * [`sse`]: the sans-IO server-sent-events parser.
//! * [`stream`]: what each event of an OpenAI-compatible stream says, and how a stream ended.
//!   [`run::stop`] stops a run without losing what it measured; [`run::http`] builds the
//!   client (TLS trust) and asks a server which model it serves.
//! * [`prompt`]: prompts of an exact token count (a Hugging Face tokenizer file) or of words.
//! * [`files`]: the one atomic file writer.
//! * [`floor`]: this machine's loopback floor, the least observer overhead it allows.
//! * [`calibrate`]: the generator's measured per-event cost on this machine.
//!
//! Reading a server's stream: the bytes as they come (split anywhere), each event's meaning,
//! and how the stream ended.
//!
//! ```
//! use heisenbench_live::sse::SseParser;
//! use heisenbench_live::stream::{Ending, StreamState, interpret};
//!
//! let bytes = b"data: {\"choices\":[{\"text\":\"Hi\"}]}\r\n\r\n: keep-alive\n\n\
//!               data: {\"choices\":[{\"text\":\"!\",\"finish_reason\":\"stop\"}],\
//!               \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
//! let (mut parser, mut state) = (SseParser::new(), StreamState::default());
//! for piece in bytes.chunks(7) {
//!     parser.feed(piece, |event| {
//!         state.apply(interpret(event));
//!     });
//! }
//! assert_eq!((state.tokens, state.usage, state.prompt_usage), (2, Some(2), Some(3)));
//! assert_eq!(state.ending(parser.incomplete()), Ending::Completed);
//! ```

mod arrival;
pub mod audit;
pub mod calibrate;
pub mod clock;
pub mod files;
pub mod floor;
mod handoff;
pub mod mock;
pub mod prompt;
pub mod run;
pub mod sse;
pub mod stream;
pub mod timer;

/// What a set of flags gives when none of them is passed: each field at its flag's default.
/// The `Default` of a config whose fields are its flags, so the two cannot drift apart.
pub(crate) fn flag_defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    heisenbench_model::cli::parse_flags(&[]).expect("every flag has a default that parses")
}
