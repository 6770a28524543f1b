//! The chunk scanner, the fast path of [`super::stream::interpret`]: one pass over the bytes of a chunk, no allocation.
//!
//! It reads the same JSON grammar serde_json does (any spacing and key order, nested values
//! skipped) and answers only when it is sure to give what the serde path gives; on anything
//! it does not handle itself it returns `None` and the serde path decides. Handed back:
//! backslash escapes, bytes outside ASCII and control characters inside strings (serde
//! validates them), a repeated key among those read (serde refuses duplicates), numbers
//! that are not plain u64 where one is read, an `error` member or an `"object"` of
//! `"error"`, and nesting deeper than 64. A property test holds the two paths equal on
//! random chunks.

use heisenbench_model::limits::MAX_TOKENS;

/// The chunk `data` describes, or `None` to let the serde path decide.
pub(super) fn chunk(data: &[u8]) -> Option<Chunk> {
    scan(data, None).map(|(c, _)| c)
}

/// [`chunk`], reading past `head` when `data` starts with it.
pub(super) fn chunk_after(data: &[u8], head: &mut RepeatedHead) -> Option<Chunk> {
    let inside = !head.bytes.is_empty() && data.starts_with(&head.bytes);
    let start = inside.then_some((head.bytes.len(), head.seen));
    let (c, end) = scan(data, start)?;
    if end != start {
        head.bytes.clear();
        if let Some((at, seen)) = end {
            head.bytes.extend_from_slice(&data[..at]);
            head.seen = seen;
        }
    }
    Some(c)
}

/// What a chunk carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chunk {
    /// It carries generated text (or reasoning text).
    pub token: bool,
    /// It carries a finish reason.
    pub finished: bool,
    /// The server's count of completion tokens, when it sends usage.
    pub usage: Option<u64>,
    /// The server's count of prompt tokens, when it sends usage.
    pub prompt_usage: Option<u64>,
    /// Prompt tokens the server's prefix cache served, when its usage says
    /// (`prompt_tokens_details.cached_tokens`).
    pub cached_usage: Option<u64>,
    /// The mock's send stamp (CLOCK_MONOTONIC ns).
    pub sent_ns: Option<u64>,
}

impl Chunk {
    /// Why the chunk's usage cannot be a real count, if it cannot: a count of tokens past
    /// [`MAX_TOKENS`] (a server's `2^64 - 1`, say) is not clamped into a number a report
    /// would print as if it were measured.
    pub fn implausible_usage(&self) -> Option<String> {
        [
            ("completion", self.usage),
            ("prompt", self.prompt_usage),
            ("cached prompt", self.cached_usage),
        ]
        .into_iter()
        .find_map(|(what, n)| {
            n.filter(|n| *n > u64::from(MAX_TOKENS)).map(|n| {
                format!(
                    "malformed: the server's usage counts {n} {what} tokens, past the {MAX_TOKENS} a request may hold"
                )
            })
        })
    }
}

/// The whole of `data` as a chunk, from its start or from `start` (see [`Scan::top`]),
/// and where the run of members that change no answer ended.
fn scan(
    data: &[u8],
    start: Option<(usize, KeysSeen)>,
) -> Option<(Chunk, Option<(usize, KeysSeen)>)> {
    let mut s = Scan {
        b: data,
        i: start.map_or(0, |(at, _)| at),
    };
    let mut end = start;
    let c = s.top(start, &mut end)?;
    s.ws();
    (s.i == s.b.len()).then_some((c, end))
}

/// The run of leading members a stream's chunks repeat (`id`, `object`, `created`,
/// `model`), up to and with the comma after the last, and which keys it holds. Members that
/// leave the chunk's answer unchanged qualify. The scanner's state after those bytes is the
/// same whatever came before them, so a chunk that starts with them is read from there, with
/// the same answer. Each chunk read fast leaves its own run here.
#[derive(Debug, Clone, Default)]
pub struct RepeatedHead {
    bytes: Vec<u8>,
    seen: KeysSeen,
}

/// Marks a key as read; `None` the second time (serde refuses a repeated field).
fn once(flag: &mut bool) -> Option<()> {
    (!std::mem::replace(flag, true)).then_some(())
}

/// The high bit of each byte of `v` (read little-endian) that is a quote, a backslash,
/// below 0x20 or at least 0x80. The classic bit tricks: a byte is zero exactly where its
/// subtraction borrows. A borrow can also flag a byte above a flagged one, never one below,
/// so the lowest flag is exact: it marks the first such byte.
fn special(v: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let quote = zero(v ^ (ONES * u64::from(b'"')));
    let backslash = zero(v ^ (ONES * u64::from(b'\\')));
    let control = v.wrapping_sub(ONES * 0x20) & !v & HIGHS;
    quote | backslash | control | (v & HIGHS)
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

/// Keys of the top-level object that are read; a second occurrence hands back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KeysSeen {
    choices: bool,
    usage: bool,
    sent: bool,
    object: bool,
    error: bool,
    message: bool,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string without escapes or non-ASCII bytes; returns its contents. Eight bytes at a
    /// time while none of them needs a look (a quote, a backslash, a control character or
    /// a byte outside ASCII), then byte by byte.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let b: &'a [u8] = self.b;
        let start = self.i;
        let mut i = start;
        while let Some(word) = b.get(i..i + 8) {
            let flags = special(u64::from_le_bytes(word.try_into().ok()?));
            if flags != 0 {
                // The first flagged byte ends the string or hands it to serde.
                let at = i + (flags.trailing_zeros() / 8) as usize;
                if b[at] != b'"' {
                    return None;
                }
                self.i = at + 1;
                return Some(&b[start..at]);
            }
            i += 8;
        }
        // Fewer than eight bytes left: one at a time.
        for (off, &c) in b[i..].iter().enumerate() {
            if c == b'"' {
                self.i = i + off + 1;
                return Some(&b[start..i + off]);
            }
            // An escape, a control character or a byte outside ASCII: serde's to check.
            if c == b'\\' || !(0x20..0x80).contains(&c) {
                return None;
            }
        }
        None
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `null`, consumed; false (nothing consumed) for any other value.
    fn null(&mut self) -> bool {
        self.ws();
        self.literal(b"null").is_some()
    }

    /// A JSON number by its grammar.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.need_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.need_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn need_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// A plain unsigned integer that fits u64 (no sign, fraction or exponent).
    fn u64(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        self.digits();
        let text = &self.b[start..self.i];
        if text.is_empty() || (text.len() > 1 && text[0] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        // Digits only, so each step is exact until it overflows (then serde decides).
        text.iter().try_fold(0u64, |v, &d| {
            v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
    }

    /// Skips any value.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > 64 {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => self.array(|s| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// Calls `item` for each element of an array (the scanner then at the element, which
    /// the callback must consume).
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            if self.close(b']')? {
                return Some(());
            }
        }
    }

    /// After an element: true at the closing `end`, false after a comma.
    fn close(&mut self, end: u8) -> Option<bool> {
        self.ws();
        let c = self.peek()?;
        self.i += 1;
        if c == end {
            Some(true)
        } else {
            (c == b',').then_some(false)
        }
    }

    /// Calls `field` for each key of an object (the scanner then at its value, which the
    /// callback must consume).
    fn object(&mut self, mut field: impl FnMut(&mut Self, &[u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            field(self, key)?;
            if self.close(b'}')? {
                return Some(());
            }
        }
    }

    /// A string or null: Some(Some(empty?)) for a string, Some(None) for null.
    fn text(&mut self) -> Option<Option<bool>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(|s| Some(s.is_empty()))
    }

    /// The top-level object, from its start or, given `start` (a position just after a
    /// comma within it, and the keys read before), from there. `end` is moved past each
    /// comma while no member so far has changed the answer.
    fn top(
        &mut self,
        start: Option<(usize, KeysSeen)>,
        end: &mut Option<(usize, KeysSeen)>,
    ) -> Option<Chunk> {
        let mut c = Chunk::default();
        let mut seen = KeysSeen::default();
        match start {
            Some((_, before)) => seen = before,
            None => {
                self.eat(b'{')?;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(c);
                }
            }
        }
        let mut unchanged = true;
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            unchanged &= self.member(key, &mut c, &mut seen)?;
            if self.close(b'}')? {
                return Some(c);
            }
            if unchanged {
                *end = Some((self.i, seen));
            }
        }
    }

    /// One member of the top-level object, its key read; true when the chunk's answer is
    /// unchanged by it (only which keys were seen).
    fn member(&mut self, key: &[u8], c: &mut Chunk, seen: &mut KeysSeen) -> Option<bool> {
        match key {
            b"choices" => {
                once(&mut seen.choices)?;
                if !self.null() {
                    self.array(|s| s.choice(c))?;
                }
            }
            b"usage" => {
                once(&mut seen.usage)?;
                if !self.null() {
                    let (mut completion_seen, mut prompt_seen, mut details_seen) =
                        (false, false, false);
                    self.object(|s, k| match k {
                        b"completion_tokens" => {
                            once(&mut completion_seen)?;
                            if !s.null() {
                                c.usage = Some(s.u64()?);
                            }
                            Some(())
                        }
                        b"prompt_tokens" => {
                            once(&mut prompt_seen)?;
                            if !s.null() {
                                c.prompt_usage = Some(s.u64()?);
                            }
                            Some(())
                        }
                        b"prompt_tokens_details" => {
                            once(&mut details_seen)?;
                            if !s.null() {
                                let mut cached_seen = false;
                                s.object(|s, k| match k {
                                    b"cached_tokens" => {
                                        once(&mut cached_seen)?;
                                        if !s.null() {
                                            c.cached_usage = Some(s.u64()?);
                                        }
                                        Some(())
                                    }
                                    _ => s.skip(1),
                                })?;
                            }
                            Some(())
                        }
                        _ => s.skip(1),
                    })?;
                }
            }
            b"heisenbench_sent_ns" => {
                once(&mut seen.sent)?;
                if !self.null() {
                    c.sent_ns = Some(self.u64()?);
                }
            }
            b"object" => {
                once(&mut seen.object)?;
                if !self.null() && self.string()? == b"error" {
                    return None;
                }
                return Some(true);
            }
            // An error is the serde path's to read (and a null one changes nothing).
            b"error" => {
                once(&mut seen.error)?;
                if !self.null() {
                    return None;
                }
                return Some(true);
            }
            // Read only with an error, but serde wants it a string or null.
            b"message" => {
                once(&mut seen.message)?;
                self.text()?;
                return Some(true);
            }
            _ => {
                self.skip(1)?;
                return Some(true);
            }
        }
        Some(false)
    }

    fn choice(&mut self, c: &mut Chunk) -> Option<()> {
        let (mut text, mut finished) = (None, false);
        let (mut delta_texts, mut role) = ([None; 3], false);
        let mut keys = [false; 3];
        self.object(|s, key| match key {
            b"text" => {
                once(&mut keys[0])?;
                text = s.text()?;
                Some(())
            }
            b"finish_reason" => {
                once(&mut keys[1])?;
                if !s.null() {
                    finished = true;
                    s.skip(2)?;
                }
                Some(())
            }
            b"delta" => {
                once(&mut keys[2])?;
                if s.null() {
                    return Some(());
                }
                let mut dkeys = [false; 4];
                s.object(|s, k| {
                    let slot = match k {
                        b"content" => 0,
                        b"reasoning_content" => 1,
                        b"reasoning" => 2,
                        b"role" => 3,
                        _ => return s.skip(2),
                    };
                    once(&mut dkeys[slot])?;
                    if slot == 3 {
                        if !s.null() {
                            role = true;
                            s.skip(3)?;
                        }
                        return Some(());
                    }
                    delta_texts[slot] = s.text()?;
                    Some(())
                })
            }
            _ => s.skip(2),
        })?;
        let texts = [text, delta_texts[0], delta_texts[1], delta_texts[2]];
        let any_text = texts.iter().any(Option::is_some);
        let nonempty = texts.iter().flatten().any(|empty| !empty);
        c.token |= nonempty || (any_text && !finished && !role);
        c.finished |= finished;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::stream::{StreamEvent, interpret_after, parse};
    use super::{RepeatedHead, chunk, chunk_after};
    use crate::openai::sse::SseEvent;
    use proptest::prelude::*;

    /// JSON values a server might put anywhere, awkward ones included.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            Just("\"\"".to_string()),
            Just("\" word\"".to_string()),
            Just("\"caf\u{e9}\"".to_string()),
            Just("\"a\\\"b\\n\"".to_string()),
            Just("\"\\u00e9\"".to_string()),
            Just("\"bad\\q\"".to_string()),
            Just("0".to_string()),
            Just("-1".to_string()),
            Just("01".to_string()),
            Just("1.5e3".to_string()),
            Just("18446744073709551615".to_string()),
            Just("18446744073709551616".to_string()),
            Just("100000000000000000000".to_string()),
            Just("nul".to_string()),
            (0u64..1_000_000_000).prop_map(|n| n.to_string()),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(("[a-z_]{1,6}", inner), 0..3).prop_map(|v| {
                    let fields: Vec<String> =
                        v.into_iter().map(|(k, x)| format!("\"{k}\":{x}")).collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    /// A field of a choice, mostly the ones that matter.
    fn choice_field() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "text",
            "delta",
            "finish_reason",
            "index",
            "logprobs",
            "text",
        ]);
        let delta = proptest::collection::vec(
            (
                prop::sample::select(vec![
                    "content",
                    "reasoning_content",
                    "reasoning",
                    "role",
                    "tool_calls",
                ]),
                value(),
            ),
            0..4,
        )
        .prop_map(|v| {
            let f: Vec<String> = v
                .into_iter()
                .map(|(k, x)| format!("\"{k}\": {x}"))
                .collect();
            format!("{{{}}}", f.join(", "))
        });
        (key, prop_oneof![value(), delta]).prop_map(|(k, v)| format!("\"{k}\" : {v}"))
    }

    fn top_field() -> impl Strategy<Value = String> {
        let choice = proptest::collection::vec(choice_field(), 0..5)
            .prop_map(|f| format!("{{{}}}", f.join(",")));
        prop_oneof![
            proptest::collection::vec(choice, 0..3)
                .prop_map(|c| format!("\"choices\":[{}]", c.join(", "))),
            value().prop_map(|v| format!("\"choices\":{v}")),
            value().prop_map(|v| format!("\"usage\":{v}")),
            (0u64..1000, 0u64..100_000).prop_map(|(n, p)| format!(
                "\"usage\": {{\"prompt_tokens\": {p}, \"completion_tokens\": {n}}}"
            )),
            value().prop_map(|v| format!("\"usage\":{{\"prompt_tokens\":{v}}}")),
            (0u64..1000, value()).prop_map(|(p, v)| format!(
                "\"usage\":{{\"prompt_tokens\":{p},\"prompt_tokens_details\":{{\"cached_tokens\":{v}}}}}"
            )),
            value().prop_map(|v| format!("\"usage\":{{\"prompt_tokens_details\":{v}}}")),
            value().prop_map(|v| format!("\"heisenbench_sent_ns\":{v}")),
            (0u64..u64::MAX).prop_map(|n| format!("\"heisenbench_sent_ns\":{n}")),
            value().prop_map(|v| format!("\"object\":{v}")),
            Just("\"object\":\"error\"".to_string()),
            value().prop_map(|v| format!("\"error\":{v}")),
            value().prop_map(|v| format!("\"message\":{v}")),
            ("[a-z]{1,5}", value()).prop_map(|(k, v)| format!("\"{k}\":{v}")),
        ]
    }

    fn chunk_json() -> impl Strategy<Value = String> {
        (
            proptest::collection::vec(top_field(), 0..6),
            prop::sample::select(vec!["", " ", "\n  ", "\t"]),
        )
            .prop_map(|(f, sp)| format!("{sp}{{{sp}{}{sp}}}{sp}", f.join(&format!(",{sp}"))))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        #[test]
        fn the_fast_path_answers_as_serde_or_not_at_all(data in chunk_json()) {
            if let Some(c) = chunk(data.as_bytes()) {
                prop_assert_eq!(StreamEvent::Chunk(c), parse(data.as_bytes()), "{}", data);
            }
        }
    }

    /// A member whose key the scanner tracks although its value changes no answer.
    fn keyed_text() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "\"object\":\"text_completion\"",
            "\"object\":null",
            "\"message\":\"hi\"",
            "\"message\":null",
        ])
        .prop_map(str::to_string)
    }

    /// A stream's chunks: members they all start with, then each its own. The shared ones
    /// are mostly of the kinds a head can hold (members that change no answer).
    fn stream_json() -> impl Strategy<Value = Vec<String>> {
        let head_field = prop_oneof![
            3 => ("[a-z]{1,5}", value()).prop_map(|(k, v)| format!("\"{k}\":{v}")),
            1 => value().prop_map(|v| format!("\"object\":{v}")),
            1 => value().prop_map(|v| format!("\"message\":{v}")),
            2 => keyed_text(),
            1 => Just("\"error\":null".to_string()),
            1 => top_field(),
        ];
        // Tails repeat those keys often enough to try the refusal of repeated keys.
        let tail_field = prop_oneof![3 => top_field(), 1 => keyed_text()];
        (
            proptest::collection::vec(head_field, 0..4),
            proptest::collection::vec(proptest::collection::vec(tail_field, 0..3), 1..5),
            prop::sample::select(vec!["", " "]),
        )
            .prop_map(|(head, tails, sp)| {
                tails
                    .into_iter()
                    .map(|tail| {
                        let fields: Vec<String> = head.iter().cloned().chain(tail).collect();
                        format!("{{{sp}{}}}", fields.join(&format!(",{sp}")))
                    })
                    .collect()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn reading_past_a_streams_head_answers_as_serde(stream in stream_json()) {
            let mut head = RepeatedHead::default();
            for data in &stream {
                let ev = SseEvent { event: b"", data: data.as_bytes() };
                prop_assert_eq!(interpret_after(ev, &mut head), parse(data.as_bytes()), "{}", data);
            }
        }
    }

    #[test]
    fn a_mock_streams_head_is_read_once() {
        let chunk = |text: &str, sent: u64| {
            format!(
                r#"{{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{{"index":0,"text":"{text}","logprobs":null,"finish_reason":null}}],"heisenbench_sent_ns":{sent}}}"#
            )
        };
        let mut head = RepeatedHead::default();
        let first = chunk_after(chunk("a ", 5).as_bytes(), &mut head).unwrap();
        assert_eq!(
            head.bytes,
            br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","#
        );
        assert!(head.seen.object);
        assert_eq!((first.token, first.sent_ns), (true, Some(5)));
        // The second chunk is read from its choices on.
        let second = chunk_after(chunk("b ", 7).as_bytes(), &mut head).unwrap();
        assert_eq!((second.token, second.sent_ns), (true, Some(7)));
        // A repeated key after the head is still refused.
        let twice = br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","object":"x","choices":[]}"#;
        assert!(chunk_after(twice, &mut head).is_none());
        // A chunk that does not start with the head is read whole, and leaves its own.
        let other = br#"{"id":"cmpl-2","choices":[]}"#;
        assert!(chunk_after(other, &mut head).is_some());
        assert_eq!(head.bytes, br#"{"id":"cmpl-2","#);
    }

    /// The equivalence test above means something only if the fast path answers often.
    #[test]
    fn the_generated_chunks_often_take_the_fast_path() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let (mut fast, mut all) = (0, 0);
        for _ in 0..2000 {
            let data = chunk_json().new_tree(&mut runner).unwrap().current();
            all += 1;
            fast += usize::from(chunk(data.as_bytes()).is_some());
        }
        assert!(fast * 5 > all, "only {fast} of {all} took the fast path");
    }

    #[test]
    fn eight_bytes_at_a_time_flag_what_needs_a_look() {
        // The first byte that is a quote, a backslash, a control character or outside
        // ASCII, by position (8: none).
        for (word, first) in [
            (*b"abcdefgh", 8),
            (*b"abc\"efgh", 3),
            (*b"abcdefg\\", 7),
            (*b"\x1fbcdefgh", 0),
            (*b"abcdefg\x7f", 8),
            (*b"abcdefg\x80", 7),
            (*b" !#$%&'(", 8),
            // A borrow from the zero byte may flag the byte above it, not the one below.
            (*b"a\"\x01\x00\"bcd", 1),
        ] {
            let flags = super::special(u64::from_le_bytes(word));
            assert_eq!(flags.trailing_zeros() / 8, first, "{word:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn the_lowest_flag_is_the_first_byte_needing_a_look(
            // Bytes at the edges of each test, where borrows and carries differ.
            word in proptest::array::uniform8(prop::sample::select(vec![
                0u8, 1, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x61, 0x7f, 0x80, 0xa2,
                0xdc, 0xff,
            ]))
        ) {
            let first = word
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c))
                .unwrap_or(8);
            let flags = super::special(u64::from_le_bytes(word));
            prop_assert_eq!((flags.trailing_zeros() / 8) as usize, first);
        }
    }

    #[test]
    fn the_mock_and_real_servers_take_the_fast_path() {
        for d in [
            r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" w","logprobs":null,"finish_reason":null}],"heisenbench_sent_ns":123}"#,
            r#"{"id": "cmpl-3f", "object": "text_completion", "created": 1, "model": "tiny.gguf", "choices": [{"text": " alpha", "index": 0, "logprobs": null, "finish_reason": null}]}"#,
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}"#,
        ] {
            assert!(chunk(d.as_bytes()).is_some(), "{d}");
        }
    }
}
