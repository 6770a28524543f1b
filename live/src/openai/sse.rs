//! A sans-IO parser for server-sent events: bytes in, complete events out.
//!
//! It follows the event-stream grammar of the HTML specification (section 9.2.6), which is
//! what every OpenAI-compatible server writes, each with its own habits:
//!
//! * lines end in CRLF, LF or a lone CR (sse-starlette, used by several Python servers,
//!   writes CRLF; llama.cpp's Python server LF), and a CRLF split across two reads is one
//!   line end;
//! * a UTF-8 byte-order mark at the very start of the stream is dropped;
//! * a line that starts with `:` is a comment (`: ping`, `: keep-alive`) and is ignored;
//! * `field: value` (one space after the colon is dropped) or a bare `field` (empty value);
//!   `data` lines accumulate joined by `\n`, `event` sets the event's type, `id` and `retry`
//!   are read past, unknown fields are ignored;
//! * a blank line dispatches the event, if it has any data; an event whose last blank line
//!   never came (the stream ended first) is not dispatched, and [`SseParser::incomplete`]
//!   says so.
//!
//! The events it yields do not depend on how the stream was split into reads: the
//! tests check that under every split.

/// One dispatched event, borrowed from the parser until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, or empty for the default type (`message`).
    pub event: &'a [u8],
    /// The `data:` lines joined by `\n`.
    pub data: &'a [u8],
}

/// Splits a byte stream into server-sent events.
#[derive(Debug, Default)]
pub struct SseParser {
    /// An unfinished line carried over from the previous read.
    line: Vec<u8>,
    /// The data buffer of the event being built (each data line followed by `\n`).
    data: Vec<u8>,
    /// The event type buffer.
    event: Vec<u8>,
    /// Whether any data line arrived for the event being built.
    has_data: bool,
    /// The previous read ended in CR: an LF at the start of the next one ends nothing.
    after_cr: bool,
    /// Bytes seen so far, up to 3 (for the byte-order mark).
    seen: u8,
    /// A line or an event outgrew its bound: everything after is ignored.
    overflowed: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// An empty parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`; calls `on_event` for each event completed by them. A line longer
    /// than [`MAX_SSE_LINE_BYTES`] or an event's data longer than [`MAX_SSE_EVENT_BYTES`]
    /// stops the parser ([`SseParser::overflowed`]): what is held is dropped and nothing
    /// more is read, so a stream without line ends costs a bounded memory.
    ///
    /// [`MAX_SSE_LINE_BYTES`]: heisenbench_model::limits::MAX_SSE_LINE_BYTES
    /// [`MAX_SSE_EVENT_BYTES`]: heisenbench_model::limits::MAX_SSE_EVENT_BYTES
    pub fn feed(&mut self, mut bytes: &[u8], mut on_event: impl FnMut(SseEvent<'_>)) {
        use heisenbench_model::limits::{MAX_SSE_EVENT_BYTES, MAX_SSE_LINE_BYTES};
        if self.overflowed {
            return;
        }
        if self.seen < 3 {
            bytes = self.skip_bom(bytes);
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while !bytes.is_empty() {
            let Some(i) = memchr::memchr2(b'\n', b'\r', bytes) else {
                if self.line.len() + bytes.len() > MAX_SSE_LINE_BYTES {
                    self.overflow();
                } else {
                    self.line.extend_from_slice(bytes);
                }
                return;
            };
            if self.line.len() + i > MAX_SSE_LINE_BYTES || self.data.len() > MAX_SSE_EVENT_BYTES {
                self.overflow();
                return;
            }
            let mut next = i + 1;
            if bytes[i] == b'\r' {
                match bytes.get(i + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.line.is_empty() {
                self.process_line(&bytes[..i], &mut on_event);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..i]);
                self.process_line(&line, &mut on_event);
                line.clear();
                self.line = line;
            }
            bytes = &bytes[next..];
        }
    }

    /// Whether a line or an event outgrew its bound (the stream is then malformed).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        self.line = Vec::new();
        self.data = Vec::new();
        self.event = Vec::new();
        self.has_data = false;
    }

    /// Whether the stream, if it ended now, would leave an event (or a line) unfinished.
    pub fn incomplete(&self) -> bool {
        !self.line.is_empty() || self.has_data || !self.event.is_empty()
    }

    /// Drops a byte-order mark at the start of the stream, even one split across reads.
    fn skip_bom<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        let mut out = bytes;
        while self.seen < 3 {
            let Some((&b, rest)) = out.split_first() else {
                return out;
            };
            if b != BOM[self.seen as usize] {
                // Not a BOM after all: give back what was held as its prefix.
                let held = &BOM[..self.seen as usize];
                self.seen = 3;
                self.line.extend_from_slice(held);
                return out;
            }
            self.seen += 1;
            out = rest;
        }
        out
    }

    fn process_line(&mut self, line: &[u8], on_event: &mut impl FnMut(SseEvent<'_>)) {
        if line.is_empty() {
            if self.has_data {
                // The data buffer ends in the newline of its last line: not part of the data.
                let data = &self.data[..self.data.len() - 1];
                on_event(SseEvent {
                    event: &self.event,
                    data,
                });
            }
            self.data.clear();
            self.event.clear();
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            // `id` and `retry` matter to a reconnecting browser, not to a benchmark.
            _ => {}
        }
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;
    use heisenbench_model::limits::{MAX_SSE_EVENT_BYTES, MAX_SSE_LINE_BYTES};

    /// A line without an end, fed in pieces, stops the parser at the bound and holds
    /// nothing after; an event whose data lines never end in a blank line does too.
    #[test]
    fn endless_lines_and_events_stop_at_their_bounds() {
        let mut p = SseParser::new();
        let piece = vec![b'a'; 64 * 1024];
        let mut fed = 0;
        while !p.overflowed() {
            p.feed(&piece, |_| panic!("no event"));
            fed += piece.len();
            assert!(fed <= MAX_SSE_LINE_BYTES + piece.len());
        }
        assert!(p.line.capacity() == 0);
        let mut p = SseParser::new();
        let line = format!("data: {}\n", "b".repeat(1000));
        let mut fed = 0;
        while !p.overflowed() {
            p.feed(line.as_bytes(), |_| panic!("no event"));
            fed += line.len();
            // The data held is the lines less their "data: " prefixes.
            assert!(fed <= MAX_SSE_EVENT_BYTES / 100 * 101 + 2 * line.len());
        }
        // A stream within the bounds is untouched.
        let mut p = SseParser::new();
        let mut n = 0;
        p.feed(b"data: x\n\n", |_| n += 1);
        assert_eq!((n, p.overflowed()), (1, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An event's type and data, owned.
    type Owned = (Vec<u8>, Vec<u8>);

    /// (event type, data) of every event, feeding `stream` cut at `cuts`, and whether an
    /// event was left unfinished.
    fn events(stream: &[u8], cuts: &[usize]) -> (Vec<Owned>, bool) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            let c = c.clamp(last, stream.len());
            p.feed(&stream[last..c], |e| {
                out.push((e.event.to_vec(), e.data.to_vec()))
            });
            last = c;
        }
        (out, p.incomplete())
    }

    fn data_only(stream: &[u8]) -> Vec<Vec<u8>> {
        events(stream, &[]).0.into_iter().map(|(_, d)| d).collect()
    }

    #[test]
    fn line_ends_of_every_kind() {
        for sep in ["\n", "\r\n", "\r"] {
            let s = format!("data: a{sep}{sep}data:b{sep}data:  c{sep}{sep}");
            assert_eq!(
                data_only(s.as_bytes()),
                vec![b"a".to_vec(), b"b\n c".to_vec()],
                "{sep:?}"
            );
        }
    }

    #[test]
    fn comments_fields_and_types() {
        let s = b": ping - 2026\nevent: error\nid: 7\nretry: 10\ndata: {\"e\":1}\n\ndata\n\nfoo: bar\n\n";
        let (ev, incomplete) = events(s, &[]);
        assert_eq!(
            ev,
            vec![
                (b"error".to_vec(), b"{\"e\":1}".to_vec()),
                (Vec::new(), Vec::new())
            ]
        );
        assert!(!incomplete);
    }

    #[test]
    fn byte_order_mark_is_dropped_once() {
        let s = b"\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n";
        // The second BOM is inside the stream: it makes an unknown field, ignored.
        assert_eq!(data_only(s), vec![b"x".to_vec()]);
        for cut in 0..4 {
            assert_eq!(events(s, &[cut]).0.len(), 1);
        }
        // Bytes that only start like a BOM are kept.
        assert_eq!(data_only(b"\xEFdata: x\n\n"), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn an_unfinished_event_is_not_dispatched() {
        let (ev, incomplete) = events(b"data: a\n\ndata: b\n", &[]);
        assert_eq!(ev.len(), 1);
        assert!(incomplete);
        let (_, incomplete) = events(b"data: a\n\ndata: b", &[]);
        assert!(incomplete);
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        let s = b"data: a\r\n\r\ndata: b\r\n\r\n";
        for cut in 0..s.len() {
            assert_eq!(events(s, &[cut]).0.len(), 2, "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            payloads in proptest::collection::vec("[a-z0-9{}\":, ]{0,30}", 1..20),
            sep in 0usize..3,
            bom in any::<bool>(),
            cuts in proptest::collection::vec(0usize..2000, 0..30),
        ) {
            let sep = ["\n", "\r\n", "\r"][sep];
            let mut stream: String = if bom { "\u{feff}".into() } else { String::new() };
            for p in &payloads {
                stream.push_str(&format!(": note{sep}data: {p}{sep}{sep}"));
            }
            let mut cuts = cuts;
            cuts.sort();
            let whole = events(stream.as_bytes(), &[]);
            prop_assert_eq!(whole.0.len(), payloads.len());
            let split = events(stream.as_bytes(), &cuts);
            prop_assert_eq!(split, whole);
        }
    }
}
