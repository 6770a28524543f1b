//! OpenAI request parsing and response formatting (completions and chat), by hand on the
//! hot path: a streamed chunk is a fixed prefix, the escaped token, a fixed suffix and the
//! send stamp, with no serde per chunk.

use std::fmt::Write as _;

use serde::Deserialize;

use super::config::FailureType;

/// The extra field every streamed chunk carries: CLOCK_MONOTONIC nanoseconds when the
/// server wrote the chunk out. For a zero-latency response that is when the connection asks
/// for the body; for a timed stream, when the token falls due, one channel hop before the
/// connection (a chunk that then waits for a slow client's socket counts as the client's).
pub const SENT_FIELD: &str = "heisenbench_sent_ns";

/// Every [`SENT_FIELD`] stamp in `text` (a response as received), in order: one per chunk
/// the mock streamed, the chat role chunk and the usage chunk included.
pub fn sent_stamps(text: &str) -> Vec<u64> {
    let key = format!("\"{SENT_FIELD}\":");
    text.match_indices(&key)
        .filter_map(|(i, _)| {
            // JSON allows spaces before the number (an instant body's stamps are padded).
            let rest = text[i + key.len()..].trim_start_matches([' ', '\t', '\r', '\n']);
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// Which endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Prompt {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    content: serde_json::Value,
}

#[derive(Debug, Deserialize, Default)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Debug, Deserialize)]
struct RawRequest {
    model: Option<String>,
    prompt: Option<Prompt>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    ignore_eos: bool,
}

/// Words (the mock's tokens) kept end to end in one string: a request's few hundred words
/// cost two allocations, not one each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Words {
    text: String,
    ends: Vec<usize>,
}

impl Words {
    /// Appends one word.
    pub fn push(&mut self, word: &str) {
        self.text.push_str(word);
        self.ends.push(self.text.len());
    }

    /// Appends `word` followed by a space, as one word (a generated token).
    pub fn push_spaced(&mut self, word: &str) {
        self.text.push_str(word);
        self.text.push(' ');
        self.ends.push(self.text.len());
    }

    /// Appends the whitespace-separated words of `s`.
    pub fn extend_split(&mut self, s: &str) {
        for w in s.split_whitespace() {
            self.push(w);
        }
    }

    /// How many words.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No words at all.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Word `i` (panics past the end, as indexing does).
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    /// The words in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Every word joined with nothing between them.
    pub fn concat(&self) -> &str {
        &self.text
    }
}

/// A parsed generation request.
#[derive(Debug, Clone, PartialEq)]
pub struct GenRequest {
    /// Endpoint.
    pub api: Api,
    /// Requested model.
    pub model: Option<String>,
    /// The prompt's words (the mock's tokens: whitespace-separated words).
    pub prompt_words: Words,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// Streamed?
    pub stream: bool,
    /// Usage chunk at the end of a stream?
    pub include_usage: bool,
    /// Generate exactly `max_tokens`.
    pub ignore_eos: bool,
}

/// Default `max_tokens` when the request has none (OpenAI's completions default).
pub const DEFAULT_MAX_TOKENS: u32 = 16;

fn words_of(v: &serde_json::Value, out: &mut Words) {
    match v {
        serde_json::Value::String(s) => out.extend_split(s),
        serde_json::Value::Array(parts) => {
            for p in parts {
                if let Some(t) = p.get("text") {
                    words_of(t, out);
                } else {
                    words_of(p, out);
                }
            }
        }
        _ => {}
    }
}

/// Why a request body is not a generation request; its text is the message of the 400.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// Not JSON, or not the request's shape.
    #[error("invalid JSON body: {0}")]
    Json(#[from] serde_json::Error),
    /// A completion without a prompt.
    #[error("'prompt' is required")]
    NoPrompt,
    /// A chat request without messages.
    #[error("'messages' is required")]
    NoMessages,
    /// A chat request with an empty list of messages.
    #[error("'messages' must not be empty")]
    EmptyMessages,
    /// A request for no tokens.
    #[error("'max_tokens' must be at least 1")]
    NoTokens,
}

/// Parses a request body.
pub fn parse(api: Api, body: &[u8]) -> Result<GenRequest, RequestError> {
    let raw: RawRequest = serde_json::from_slice(body)?;
    let mut prompt_words = Words::default();
    match api {
        Api::Completions => match raw.prompt {
            Some(Prompt::One(s)) => prompt_words.extend_split(&s),
            Some(Prompt::Many(v)) => {
                for s in v {
                    prompt_words.extend_split(&s);
                }
            }
            None => return Err(RequestError::NoPrompt),
        },
        Api::Chat => {
            let messages = raw.messages.ok_or(RequestError::NoMessages)?;
            if messages.is_empty() {
                return Err(RequestError::EmptyMessages);
            }
            for m in &messages {
                words_of(&m.content, &mut prompt_words);
            }
        }
    }
    let max_tokens = raw
        .max_completion_tokens
        .or(raw.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    if max_tokens == 0 {
        return Err(RequestError::NoTokens);
    }
    Ok(GenRequest {
        api,
        model: raw.model,
        prompt_words,
        max_tokens,
        stream: raw.stream,
        include_usage: raw.stream && raw.stream_options.is_some_and(|o| o.include_usage),
        ignore_eos: raw.ignore_eos,
    })
}

/// An OpenAI error body.
pub fn error_body(message: &str, kind: &str, code: &str) -> String {
    serde_json::json!({ "error": { "message": message, "type": kind, "param": null, "code": code } }).to_string()
}

/// The body of an injected failure.
pub fn failure_body(f: FailureType) -> String {
    let (kind, code, message) = f.error();
    error_body(message, kind, code)
}

/// JSON string literal of `s`, quotes included.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Appends the JSON string literal of `s` to `out`: copied as it is when nothing in it needs
/// an escape (every token of the built-in vocabulary), else escaped by serde_json.
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail, and a &str is always valid JSON text.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Formats the SSE stream of one response.
pub struct ChunkWriter {
    api: Api,
    prefix: String,
    id_head: String,
}

impl ChunkWriter {
    /// A writer for response `id` (already unique) of `model`, created at `created`.
    pub fn new(api: Api, id: u64, model: &str, created: u64) -> Self {
        let (object, idp) = match api {
            Api::Completions => ("text_completion", "cmpl"),
            Api::Chat => ("chat.completion.chunk", "chatcmpl"),
        };
        let id_head = format!(
            "{{\"id\":\"{idp}-{id}\",\"object\":\"{object}\",\"created\":{created},\"model\":{}",
            json_str(model)
        );
        let prefix = match api {
            Api::Completions => format!("data: {id_head},\"choices\":[{{\"index\":0,\"text\":"),
            Api::Chat => {
                format!("data: {id_head},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":")
            }
        };
        Self {
            api,
            prefix,
            id_head,
        }
    }

    /// Chat streams open with the assistant's role.
    pub fn role_chunk(&self, out: &mut Vec<u8>, sent_ns: u64) {
        if self.api == Api::Chat {
            let _ = write!(
                Adapter(out),
                "data: {},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}],\"{SENT_FIELD}\":{sent_ns}}}\n\n",
                self.id_head
            );
        }
    }

    /// One token's chunk; `finish` on the last.
    pub fn token_chunk(&self, out: &mut Vec<u8>, token: &str, finish: Option<&str>, sent_ns: u64) {
        out.extend_from_slice(self.prefix.as_bytes());
        push_json_str(out, token);
        if self.api == Api::Chat {
            out.push(b'}');
        }
        out.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":");
        match finish {
            Some(f) => {
                out.push(b'"');
                out.extend_from_slice(f.as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}],\"");
        out.extend_from_slice(SENT_FIELD.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(itoa::Buffer::new().format(sent_ns).as_bytes());
        out.extend_from_slice(b"}\n\n");
    }

    /// The usage chunk (`stream_options.include_usage`).
    pub fn usage_chunk(&self, out: &mut Vec<u8>, usage: Usage, sent_ns: u64) {
        let _ = write!(
            Adapter(out),
            "data: {},\"choices\":[],\"usage\":{},\"{SENT_FIELD}\":{sent_ns}}}\n\n",
            self.id_head,
            usage.json()
        );
    }

    /// The end of the stream.
    pub fn done(out: &mut Vec<u8>) {
        out.extend_from_slice(b"data: [DONE]\n\n");
    }
}

/// The stamps of a body written whole before it is sent, filled in when it is whole: its
/// chunks leave in one piece, so they are stamped once, after the last is formatted, and
/// the time spent formatting them is the server's, not the way's.
///
/// Each chunk is written with [`LateStamps::PENDING`] for its stamp (twenty digits, as
/// wide as any stamp) and noted; [`LateStamps::fill`] writes the stamp over every one,
/// right-aligned after spaces, which JSON reads as whitespace before the number.
#[derive(Debug, Default)]
pub struct LateStamps {
    at: Vec<usize>,
}

impl LateStamps {
    /// The stamp to write in a chunk that [`Self::note`] will note.
    pub const PENDING: u64 = u64::MAX;
    /// Its width.
    const WIDTH: usize = 20;
    /// What follows a chunk's stamp: the object's end and the event's.
    const AFTER: &'static [u8] = b"}\n\n";

    /// Notes the stamp of the chunk written last to `out`, when one was written since
    /// `out` was `before` bytes long (a completion stream's role chunk is nothing).
    pub fn note(&mut self, out: &[u8], before: usize) {
        if out.len() > before {
            let end = out.len() - Self::AFTER.len();
            debug_assert!(out[end..] == *Self::AFTER);
            self.at.push(end - Self::WIDTH);
        }
    }

    /// Writes `sent_ns` over every noted stamp.
    pub fn fill(&self, out: &mut [u8], sent_ns: u64) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(sent_ns).as_bytes();
        let mut padded = [b' '; Self::WIDTH];
        padded[Self::WIDTH - digits.len()..].copy_from_slice(digits);
        for &at in &self.at {
            out[at..at + Self::WIDTH].copy_from_slice(&padded);
        }
    }
}

/// Who a response is: endpoint, id, model and creation time.
pub struct Identity<'a> {
    /// Endpoint.
    pub api: Api,
    /// Unique id.
    pub id: u64,
    /// Model name.
    pub model: &'a str,
    /// Unix seconds.
    pub created: u64,
}

/// A response's token counts, as its `usage` object says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt: u32,
    /// Generated tokens.
    pub completion: u32,
    /// Prompt tokens served from the prefix cache (`None`: no cache, and no
    /// `prompt_tokens_details`).
    pub cached: Option<u32>,
}

impl Usage {
    /// The `usage` object, as vLLM writes it (`prompt_tokens_details.cached_tokens` when
    /// the prefix cache is on).
    pub fn json(&self) -> String {
        serde_json::to_string(&self.wire()).expect("plain numbers serialise")
    }

    /// The same object as a JSON value (for a whole, non-streamed response).
    pub fn value(&self) -> serde_json::Value {
        serde_json::to_value(self.wire()).expect("plain numbers serialise")
    }

    fn wire(&self) -> UsageWire {
        UsageWire {
            prompt_tokens: self.prompt,
            completion_tokens: self.completion,
            total_tokens: self.prompt + self.completion,
            prompt_tokens_details: self
                .cached
                .map(|cached_tokens| CachedWire { cached_tokens }),
        }
    }
}

/// `usage` as it is written, in vLLM's key order.
#[derive(serde::Serialize)]
struct UsageWire {
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens_details: Option<CachedWire>,
}

#[derive(serde::Serialize)]
struct CachedWire {
    cached_tokens: u32,
}

/// The non-streaming response.
pub fn full_response(head: &Identity<'_>, text: &str, finish: &str, usage: Usage) -> String {
    let Identity {
        api,
        id,
        model,
        created,
    } = *head;
    let usage = usage.value();
    let v = match api {
        Api::Completions => serde_json::json!({
            "id": format!("cmpl-{id}"), "object": "text_completion", "created": created, "model": model,
            "choices": [{ "index": 0, "text": text, "logprobs": null, "finish_reason": finish }],
            "usage": usage,
        }),
        Api::Chat => serde_json::json!({
            "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": created, "model": model,
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "logprobs": null, "finish_reason": finish }],
            "usage": usage,
        }),
    };
    v.to_string()
}

/// `std::fmt::Write` into a byte vector.
struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_stamps_are_read_back_in_order() {
        let w = ChunkWriter::new(Api::Chat, 7, "m", 0);
        let mut out = Vec::new();
        w.role_chunk(&mut out, 5);
        w.token_chunk(&mut out, "a ", None, 17);
        w.token_chunk(&mut out, "b ", Some("length"), 123_456_789_012);
        w.usage_chunk(
            &mut out,
            Usage {
                prompt: 3,
                completion: 2,
                cached: None,
            },
            123_456_789_013,
        );
        ChunkWriter::done(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            sent_stamps(&text),
            vec![5, 17, 123_456_789_012, 123_456_789_013]
        );
        assert!(sent_stamps("data: [DONE]").is_empty());
    }

    /// A body written with pending stamps reads back, through JSON and through the stamp
    /// reader, with the one stamp filled in everywhere.
    #[test]
    fn late_stamps_fill_every_chunk() {
        for api in [Api::Completions, Api::Chat] {
            let w = ChunkWriter::new(api, 7, "m", 1);
            let (mut out, mut late) = (Vec::new(), LateStamps::default());
            let mut chunk = |out: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
                let before = out.len();
                write(out);
                late.note(out, before);
            };
            chunk(&mut out, &|o| w.role_chunk(o, LateStamps::PENDING));
            chunk(&mut out, &|o| {
                w.token_chunk(o, "a", None, LateStamps::PENDING)
            });
            chunk(&mut out, &|o| {
                w.token_chunk(o, "}\n\n", Some("length"), LateStamps::PENDING)
            });
            chunk(&mut out, &|o| {
                w.usage_chunk(
                    o,
                    Usage {
                        prompt: 3,
                        completion: 2,
                        cached: None,
                    },
                    LateStamps::PENDING,
                )
            });
            ChunkWriter::done(&mut out);
            late.fill(&mut out, 123_456_789);
            let text = String::from_utf8(out).unwrap();
            let chunks = if api == Api::Chat { 4 } else { 3 };
            assert_eq!(sent_stamps(&text), vec![123_456_789; chunks]);
            for e in text.split("\n\n").filter(|e| e.starts_with("data: {")) {
                let v: serde_json::Value = serde_json::from_str(&e[6..]).unwrap();
                assert_eq!(v[SENT_FIELD], 123_456_789, "{e}");
            }
        }
    }

    #[test]
    fn chunks_are_valid_json_events() {
        for api in [Api::Completions, Api::Chat] {
            let w = ChunkWriter::new(api, 7, "m\"x", 1);
            let mut out = Vec::new();
            w.role_chunk(&mut out, 1);
            w.token_chunk(&mut out, "a \"quoted\" \\ word\u{1} é ", None, 2);
            w.token_chunk(&mut out, "end", Some("length"), 3);
            w.usage_chunk(
                &mut out,
                Usage {
                    prompt: 5,
                    completion: 2,
                    cached: None,
                },
                4,
            );
            ChunkWriter::done(&mut out);
            let text = String::from_utf8(out).unwrap();
            let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
            assert_eq!(events.last(), Some(&"data: [DONE]"));
            let mut text = String::new();
            for e in &events[..events.len() - 1] {
                let v: serde_json::Value =
                    serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap();
                assert!(v[SENT_FIELD].as_u64().is_some(), "{e}");
                assert_eq!(v["model"], "m\"x");
                let choice = &v["choices"][0];
                let piece = match api {
                    Api::Completions => &choice["text"],
                    Api::Chat => &choice["delta"]["content"],
                };
                text.push_str(piece.as_str().unwrap_or(""));
            }
            // The tokens come back as written, escapes and all.
            assert_eq!(text, "a \"quoted\" \\ word\u{1} é end");
        }
    }

    #[test]
    fn parsing_reads_both_apis() {
        let c = parse(Api::Completions, br#"{"model":"m","prompt":"a b  c","max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}"#).unwrap();
        assert_eq!(
            (
                c.prompt_words.len(),
                c.max_tokens,
                c.stream,
                c.include_usage,
                c.ignore_eos
            ),
            (3, 5, true, true, true)
        );
        let h = parse(Api::Chat, br#"{"model":"m","messages":[{"role":"user","content":"x y"},{"role":"user","content":[{"type":"text","text":"z"}]}]}"#).unwrap();
        assert_eq!(
            (h.prompt_words.len(), h.max_tokens, h.stream),
            (3, DEFAULT_MAX_TOKENS, false)
        );
        assert!(parse(Api::Completions, b"{").is_err());
        assert!(parse(Api::Chat, br#"{"model":"m"}"#).is_err());
        assert!(parse(Api::Completions, br#"{"prompt":"a","max_tokens":0}"#).is_err());
    }
}
