//! heisenbench-live: the live side of heisenbench, one room per product.
//!
//! Products:
//! * [`mock`]: the embedded OpenAI-compatible mock LLM server (`heisenbench mock`), with
//!   llm-d-inference-sim's behaviour and flags and a monotonic send stamp on every chunk.
//! * [`generator`]: the sharded live load generator (`heisenbench run`): one seeded
//!   schedule striped over shards (threads or processes), each measuring from the intended
//!   send time; exact merge of their results, Kubernetes manifests, stopping without loss,
//!   its own cost calibration and the default shard count.
//! * [`audit`]: another benchmark client run against the mock, whose truth is known.
//! * [`measure`]: this machine's loopback floor and the generator's stored cost curve.
//! * [`pages`]: the page server `heisenbench explore` serves its page with.
//! * [`scrape`]: the server's side of a run: its Prometheus endpoint read on the run's
//!   clock, the engines' families in one vocabulary, and TTFT split between the client and
//!   the server.
//!
//! What they share:
//! * [`openai`]: the wire format without I/O: server-sent events, what a stream's events
//!   say, prompts of an exact token count.
//! * [`net`]: the shard's HTTP/1.1 client, the reqwest client, the kernel's receive stamps.
//! * [`time`]: the one place time is read, and the timers.
//! * [`files`]: the one atomic file writer.
//!
//! Arrows point one way: `time` and `openai` use nothing here; `net` uses them; `measure`
//! uses `net` and `time`; the mock uses `net` and `time`; the generator uses all of them
//! (the mock only to calibrate against it and for its model name); the audit uses the mock; `scrape` uses `net` and `time`, and the generator's
//! series for the client's side. The mock never
//! knows the generator, the generator never knows the audit.
//!
//! Reading a server's stream: the bytes as they come (split anywhere), each event's meaning,
//! and how the stream ended.
//!
//! ```
//! use heisenbench_live::openai::sse::SseParser;
//! use heisenbench_live::openai::stream::{Ending, StreamState, interpret};
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

pub mod audit;
pub mod files;
pub mod generator;
pub mod measure;
pub mod mock;
pub mod net;
pub mod openai;
pub mod pages;
pub mod scrape;
pub mod time;
