//! What one event of an OpenAI-compatible stream says, and how a whole stream ended.
//!
//! The data of each event is parsed as the JSON it is (any spacing, any key order, escapes),
//! never matched as a byte pattern of one server's formatting. What is read:
//!
//! * `choices[].text` (completions), `choices[].delta.content`, `delta.reasoning_content`
//!   or `delta.reasoning` (chat; reasoning fields as vLLM, SGLang and Ollama name them):
//!   a chunk that carries one of them as a string carries a generated token, even when the
//!   string is empty (llama.cpp's server streams "" for a token whose text it holds back,
//!   and counts it in its usage). Two kinds of chunk carry no token although they may hold
//!   an empty string: the chat stream's opening chunk (`delta.role`, empty content) and a
//!   closing chunk (a finish reason, empty text).
//! * `choices[].finish_reason`: any non-null value ends the generation.
//! * `usage.completion_tokens` and `usage.prompt_tokens`: the server's own counts (the last
//!   one seen wins; vLLM's continuous usage repeats them on every event).
//! * an `error` member (an object with a `message`, or a string, as TGI writes it), an
//!   object whose `object` is `"error"` (vLLM), or an event of type `error`: the server
//!   failed in mid-stream, with its message.
//! * `heisenbench_sent_ns`: the embedded mock's send stamp.
//!
//! `[DONE]` ends the stream. Anything else (not JSON, not an object) is malformed.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::openai::sse::SseEvent;

/// One event's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// `data: [DONE]`.
    Done,
    /// A chunk of the response.
    Chunk(Chunk),
    /// The server reported an error inside the stream.
    Error(String),
    /// Data that is not an OpenAI stream event.
    Malformed,
    /// An event of a type a completion stream does not use (`event: ping`, ...).
    Ignored,
}

#[derive(Deserialize)]
struct RawChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<RawChoice<'a>>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default, borrow)]
    error: Option<RawError<'a>>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    heisenbench_sent_ns: Option<u64>,
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    #[serde(default)]
    finish_reason: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    role: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<RawPromptDetails>,
}

#[derive(Deserialize)]
struct RawPromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawError<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Object {
        #[serde(default, borrow)]
        message: Option<Cow<'a, str>>,
    },
    Other(IgnoredAny),
}

/// The generated text one event carries (completion text, chat content, reasoning), or
/// `None` when it is no completion chunk. The serde path: it runs only when a tokenizer
/// counts a stream's tokens, never on the default path.
pub fn text_of(data: &[u8]) -> Option<String> {
    let raw = serde_json::from_slice::<RawChunk<'_>>(data).ok()?;
    let mut text = String::new();
    for c in raw.choices.iter().flatten() {
        if let Some(t) = &c.text {
            text.push_str(t);
        }
        if let Some(d) = &c.delta {
            for part in [&d.content, &d.reasoning_content, &d.reasoning]
                .into_iter()
                .flatten()
            {
                text.push_str(part);
            }
        }
    }
    Some(text)
}

/// The longest server message kept, in characters.
pub const MESSAGE_CHARS: usize = 200;

pub use super::scan::{Chunk, RepeatedHead};

/// Reads one event.
pub fn interpret(ev: SseEvent<'_>) -> StreamEvent {
    read_event(ev, None)
}

/// [`interpret`] for the next event of a stream whose earlier events left `head`: the
/// leading members this event repeats from the last one are not read again.
pub fn interpret_after(ev: SseEvent<'_>, head: &mut RepeatedHead) -> StreamEvent {
    read_event(ev, Some(head))
}

/// [`interpret`], with a stream's head to read past and update when there is one.
fn read_event(ev: SseEvent<'_>, head: Option<&mut RepeatedHead>) -> StreamEvent {
    match ev.event {
        b"" | b"message" => {}
        b"error" => return StreamEvent::Error(error_text(ev.data)),
        _ => return StreamEvent::Ignored,
    }
    if ev.data == b"[DONE]" {
        return StreamEvent::Done;
    }
    // The common case in one pass; anything unusual goes to serde (the same answer).
    let fast = match head {
        Some(head) => super::scan::chunk_after(ev.data, head),
        None => super::scan::chunk(ev.data),
    };
    if let Some(c) = fast {
        return StreamEvent::Chunk(c);
    }
    parse(ev.data)
}

/// The serde path of [`interpret`] for a data line that is neither `[DONE]` nor typed.
pub(super) fn parse(data: &[u8]) -> StreamEvent {
    let ev = SseEvent { event: b"", data };
    // serde would also read a struct from a JSON array: only an object is an event.
    if ev.data.trim_ascii_start().first() != Some(&b'{') {
        return StreamEvent::Malformed;
    }
    let Ok(raw) = serde_json::from_slice::<RawChunk<'_>>(ev.data) else {
        return StreamEvent::Malformed;
    };
    if let Some(e) = raw.error {
        let text = match e {
            RawError::Text(t) => t.into_owned(),
            RawError::Object { message: Some(m) } => m.into_owned(),
            _ => String::from_utf8_lossy(ev.data).into_owned(),
        };
        return StreamEvent::Error(clip(&text));
    }
    if raw.object.as_deref() == Some("error") {
        let text = raw.message.map_or_else(
            || String::from_utf8_lossy(ev.data).into_owned(),
            Cow::into_owned,
        );
        return StreamEvent::Error(clip(&text));
    }
    let mut chunk = Chunk {
        usage: raw.usage.as_ref().and_then(|u| u.completion_tokens),
        prompt_usage: raw.usage.as_ref().and_then(|u| u.prompt_tokens),
        cached_usage: raw
            .usage
            .as_ref()
            .and_then(|u| u.prompt_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens),
        sent_ns: raw.heisenbench_sent_ns,
        ..Chunk::default()
    };
    for c in raw.choices.iter().flatten() {
        let finished = c.finish_reason.is_some();
        let texts = [
            c.text.as_deref(),
            c.delta.as_ref().and_then(|d| d.content.as_deref()),
            c.delta
                .as_ref()
                .and_then(|d| d.reasoning_content.as_deref()),
            c.delta.as_ref().and_then(|d| d.reasoning.as_deref()),
        ];
        let any_text = texts.iter().any(Option::is_some);
        let nonempty = texts.iter().flatten().any(|t| !t.is_empty());
        let opening = c.delta.as_ref().is_some_and(|d| d.role.is_some());
        chunk.token |= nonempty || (any_text && !finished && !opening);
        chunk.finished |= finished;
    }
    StreamEvent::Chunk(chunk)
}

/// The message in an error's data (an `event: error`, or an error response's body): its
/// JSON error object's message, or the text itself, clipped.
pub fn error_text(data: &[u8]) -> String {
    match interpret(SseEvent { event: b"", data }) {
        StreamEvent::Error(m) => m,
        _ => clip(&String::from_utf8_lossy(data)),
    }
}

/// Cuts a server's message to [`MESSAGE_CHARS`] characters, on one line.
pub fn clip(text: &str) -> String {
    let one_line: String = crate::net::secret::redact(text)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = one_line.trim();
    match trimmed.char_indices().nth(MESSAGE_CHARS) {
        Some((i, _)) => format!("{}...", &trimmed[..i]),
        None => trimmed.to_string(),
    }
}

/// How a stream ended, from what it carried; the failure classes are
/// the generator's `Outcome`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamState {
    /// Token events.
    pub tokens: u32,
    /// The server's count, when sent.
    pub usage: Option<u64>,
    /// The server's count of prompt tokens, when sent.
    pub prompt_usage: Option<u64>,
    /// The prompt tokens the server's prefix cache served, when its usage says.
    pub cached_usage: Option<u64>,
    /// A finish reason arrived.
    pub finished: bool,
    /// `[DONE]` arrived.
    pub done: bool,
    /// Some event was not an OpenAI stream event.
    pub malformed: bool,
    /// Why, when it can be said in words (a usage past any request's length).
    pub malformed_why: Option<String>,
    /// The server's error message, if it sent one.
    pub error: Option<String>,
}

/// The class of a stream that ended without a transport error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A finish reason arrived and nothing went wrong (tokens may be zero).
    Completed,
    /// The server sent an error object.
    ServerError(String),
    /// Some event was not an OpenAI stream event.
    Malformed,
    /// The stream ended (cleanly, or with `[DONE]`) without a finish reason, or in the
    /// middle of an event.
    Truncated,
}

impl StreamState {
    /// Folds one event in. Returns the event's chunk, if it was one.
    pub fn apply(&mut self, ev: StreamEvent) -> Option<Chunk> {
        match ev {
            StreamEvent::Done => self.done = true,
            StreamEvent::Chunk(c) => {
                if let Some(why) = c.implausible_usage() {
                    self.malformed = true;
                    self.malformed_why.get_or_insert(why);
                    return None;
                }
                if c.token {
                    self.tokens = self.tokens.saturating_add(1);
                }
                self.finished |= c.finished;
                if c.usage.is_some() {
                    self.usage = c.usage;
                }
                if c.prompt_usage.is_some() {
                    self.prompt_usage = c.prompt_usage;
                }
                if c.cached_usage.is_some() {
                    self.cached_usage = c.cached_usage;
                }
                return Some(c);
            }
            StreamEvent::Error(m) => {
                self.error.get_or_insert(m);
            }
            StreamEvent::Malformed => self.malformed = true,
            StreamEvent::Ignored => {}
        }
        None
    }

    /// The class of the stream, once it has ended; `incomplete` says the last event was
    /// cut off.
    pub fn ending(&self, incomplete: bool) -> Ending {
        if let Some(m) = &self.error {
            Ending::ServerError(m.clone())
        } else if self.malformed {
            Ending::Malformed
        } else if self.finished && !incomplete {
            Ending::Completed
        } else {
            Ending::Truncated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(data: &str) -> StreamEvent {
        interpret(SseEvent {
            event: b"",
            data: data.as_bytes(),
        })
    }

    #[test]
    fn a_usage_no_request_can_have_is_malformed_not_clamped() {
        let mut st = StreamState::default();
        st.apply(one(r#"{"choices":[{"text":"a"}]}"#));
        st.apply(one(
            r#"{"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":18446744073709551615,"prompt_tokens":3}}"#,
        ));
        assert_eq!(st.ending(false), Ending::Malformed);
        assert_eq!(st.usage, None);
        let why = st.malformed_why.unwrap();
        assert!(
            why.contains("18446744073709551615 completion tokens, past the 10000000"),
            "{why}"
        );
    }

    #[test]
    fn spacing_and_order_do_not_matter() {
        let compact = one(r#"{"choices":[{"text":"hi","finish_reason":null}]}"#);
        let spaced = one(r#"{ "choices" : [ { "finish_reason" : null , "text" : "hi" } ] }"#);
        assert_eq!(compact, spaced);
        assert_eq!(
            compact,
            StreamEvent::Chunk(Chunk {
                token: true,
                ..Chunk::default()
            })
        );
    }

    #[test]
    fn an_empty_text_mid_stream_is_a_token() {
        let StreamEvent::Chunk(c) = one(r#"{"choices":[{"text":"","finish_reason":null}]}"#) else {
            panic!()
        };
        assert!(c.token && !c.finished);
    }

    #[test]
    fn chunks_that_carry_no_token() {
        for d in [
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
            r#"{"choices":[{"text":"","finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[]}"#,
            r#"{}"#,
        ] {
            let StreamEvent::Chunk(c) = one(d) else {
                panic!("{d}")
            };
            assert!(!c.token, "{d}");
        }
    }

    #[test]
    fn reasoning_usage_finish_and_stamp() {
        let StreamEvent::Chunk(c) = one(
            r#"{"choices":[{"delta":{"reasoning_content":"so"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":7},"heisenbench_sent_ns":42}"#,
        ) else {
            panic!()
        };
        assert_eq!(
            c,
            Chunk {
                cached_usage: None,
                token: true,
                finished: true,
                usage: Some(7),
                prompt_usage: Some(3),
                sent_ns: Some(42)
            }
        );
    }

    #[test]
    fn errors_in_every_shape() {
        for (d, m) in [
            (
                r#"{"error":{"message":"boom","type":"x","code":500}}"#,
                "boom",
            ),
            (
                r#"{"error":"Input validation error","error_type":"validation"}"#,
                "Input validation error",
            ),
            (
                r#"{"object":"error","message":"too long","code":400}"#,
                "too long",
            ),
        ] {
            assert_eq!(one(d), StreamEvent::Error(m.into()), "{d}");
        }
        let typed = interpret(SseEvent {
            event: b"error",
            data: b"overloaded",
        });
        assert_eq!(typed, StreamEvent::Error("overloaded".into()));
    }

    #[test]
    fn not_json_is_malformed() {
        for d in ["{not json}", "[1,2]", "hello", "", "\"text\""] {
            assert_eq!(one(d), StreamEvent::Malformed, "{d:?}");
        }
    }

    #[test]
    fn endings() {
        let mut s = StreamState::default();
        assert_eq!(s.ending(false), Ending::Truncated);
        s.apply(one(r#"{"choices":[{"text":"","finish_reason":"stop"}]}"#));
        assert_eq!(s.ending(false), Ending::Completed);
        assert_eq!(s.tokens, 0);
        assert_eq!(s.ending(true), Ending::Truncated);
        s.apply(StreamEvent::Malformed);
        assert_eq!(s.ending(false), Ending::Malformed);
        s.apply(StreamEvent::Error("x".into()));
        assert_eq!(s.ending(false), Ending::ServerError("x".into()));
    }

    #[test]
    fn clip_keeps_one_short_line() {
        assert_eq!(clip(" a\nb "), "a b");
        let long = "é".repeat(500);
        assert_eq!(clip(&long).chars().count(), MESSAGE_CHARS + 3);
    }

    /// Streams every dialect the fixtures hold, split at `cuts`: (tokens, usage, ending).
    fn read_stream(stream: &[u8], cuts: &[usize]) -> (u32, Option<u64>, Ending) {
        let mut parser = crate::openai::sse::SseParser::new();
        let mut state = StreamState::default();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            let c = c.clamp(last, stream.len());
            parser.feed(&stream[last..c], |ev| {
                state.apply(interpret(ev));
            });
            last = c;
        }
        (state.tokens, state.usage, state.ending(parser.incomplete()))
    }

    macro_rules! fixture {
        ($name:literal) => {
            (
                $name,
                &include_bytes!(concat!("../../tests/fixtures/sse/", $name, ".sse"))[..],
            )
        };
    }

    /// A fixture's name and bytes, and the tokens, usage and ending it must give.
    type Fixture = (&'static str, &'static [u8], u32, Option<u64>, Ending);

    /// Each fixture with what it must give.
    fn fixtures() -> Vec<Fixture> {
        use Ending::*;
        let err = |m: &str| ServerError(m.to_string());
        let table = [
            (fixture!("vllm-completions"), 4, Some(4), Completed),
            (fixture!("vllm-chat-reasoning"), 4, Some(4), Completed),
            (fixture!("sglang-chat"), 3, Some(3), Completed),
            (fixture!("tgi-chat"), 3, None, Completed),
            (
                fixture!("tgi-chat-error"),
                2,
                None,
                err("Request failed during generation: Server error: CUDA out of memory"),
            ),
            (fixture!("llamacpp-python"), 3, None, Completed),
            (fixture!("llamacpp-python-chat"), 2, None, Completed),
            (fixture!("llamacpp-python-interrupted"), 2, None, Truncated),
            (fixture!("llamacpp-python-recorded"), 8, None, Completed),
            (
                fixture!("llamacpp-python-chat-recorded"),
                6,
                None,
                Completed,
            ),
            (fixture!("starlette-crlf"), 5, None, Completed),
            (fixture!("ollama-chat"), 3, Some(3), Completed),
            (fixture!("openai-chat"), 2, Some(2), Completed),
            (
                fixture!("openai-event-error"),
                1,
                None,
                err("The server had an error while processing your request."),
            ),
            (fixture!("garbage"), 1, None, Malformed),
            (fixture!("zero-tokens"), 0, None, Completed),
            (fixture!("cut-mid-event"), 1, None, Truncated),
        ];
        table
            .into_iter()
            .map(|((name, bytes), t, u, e)| (name, bytes, t, u, e))
            .collect()
    }

    #[test]
    fn every_dialect_reads_as_expected() {
        for (name, bytes, tokens, usage, ending) in fixtures() {
            assert_eq!(read_stream(bytes, &[]), (tokens, usage, ending), "{name}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_dialect_reads_the_same_under_any_split(
            cuts in proptest::collection::vec(0usize..3000, 0..40),
        ) {
            let mut cuts = cuts;
            cuts.sort();
            for (name, bytes, tokens, usage, ending) in fixtures() {
                let got = read_stream(bytes, &cuts);
                proptest::prop_assert_eq!(got, (tokens, usage, ending), "{}", name);
            }
        }
    }
}
