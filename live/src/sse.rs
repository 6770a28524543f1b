//! A sans-IO framer for server-sent events: bytes in, complete events out.
//!
//! Events end at a blank line (`\n\n`, or `\r\n\r\n`); the framer keeps any partial event
//! across reads, so the events it yields do not depend on how the stream was split.
//! Only `data:` lines matter to an OpenAI stream; an event's data lines are joined with
//! `\n` as the SSE specification says.

/// Splits a byte stream into SSE events' data.
#[derive(Debug, Default)]
pub struct SseFramer {
    buf: Vec<u8>,
    /// Where to resume the search for a boundary in `buf`.
    scanned: usize,
}

impl SseFramer {
    /// An empty framer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`; calls `on_event` with the data of each event completed by them.
    pub fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(&[u8])) {
        if self.buf.is_empty() {
            // The common case: frame straight from the read, keep only the unfinished tail.
            let used = frame(bytes, 0, &mut on_event);
            self.buf.extend_from_slice(&bytes[used..]);
        } else {
            self.buf.extend_from_slice(bytes);
            let used = frame(&self.buf, self.scanned, &mut on_event);
            self.buf.drain(..used);
        }
        // A boundary may straddle the next read: look again from two bytes back.
        self.scanned = self.buf.len().saturating_sub(2);
    }

    /// Bytes of an unfinished event held back.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Emits every complete event in `buf`, searching for boundaries from `from`; returns how
/// many bytes were consumed.
fn frame(buf: &[u8], from: usize, on_event: &mut impl FnMut(&[u8])) -> usize {
    let mut start = 0;
    let mut search = from;
    while let Some(off) = memchr::memchr(b'\n', &buf[search..]) {
        let i = search + off;
        // A blank line: "\n\n" or "\n\r\n".
        let end = match (buf.get(i + 1), buf.get(i + 2)) {
            (Some(b'\n'), _) => Some(i + 2),
            (Some(b'\r'), Some(b'\n')) => Some(i + 3),
            _ => None,
        };
        match end {
            Some(end) => {
                emit(&buf[start..i + 1], on_event);
                start = end;
                search = end;
            }
            None => search = i + 1,
        }
    }
    start
}

/// Extracts and joins the `data:` lines of one event; comments and other fields are skipped.
fn emit(event: &[u8], on_event: &mut impl FnMut(&[u8])) {
    let mut data: Option<Vec<u8>> = None;
    let mut single: Option<&[u8]> = None;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"data:") else {
            continue;
        };
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        match (&mut data, single) {
            (None, None) => single = Some(rest),
            (None, Some(first)) => {
                let mut v = first.to_vec();
                v.push(b'\n');
                v.extend_from_slice(rest);
                data = Some(v);
            }
            (Some(v), _) => {
                v.push(b'\n');
                v.extend_from_slice(rest);
            }
        }
    }
    match (data, single) {
        (Some(v), _) => on_event(&v),
        (None, Some(s)) => on_event(s),
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn events(stream: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
            let c = c.clamp(last, stream.len());
            f.feed(&stream[last..c], |e| out.push(e.to_vec()));
            last = c;
        }
        out
    }

    #[test]
    fn basic_framing() {
        let s =
            b"data: {\"a\":1}\n\ndata: x\r\n\r\n: comment\ndata: y\ndata: z\n\ndata: [DONE]\n\n";
        let got = events(s, &[]);
        assert_eq!(
            got,
            vec![
                b"{\"a\":1}".to_vec(),
                b"x".to_vec(),
                b"y\nz".to_vec(),
                b"[DONE]".to_vec()
            ]
        );
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            payloads in proptest::collection::vec("[a-z0-9{}\":, ]{0,30}", 1..20),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(0usize..2000, 0..30),
        ) {
            let sep = if crlf { "\r\n" } else { "\n" };
            let stream: String = payloads.iter().map(|p| format!("data: {p}{sep}{sep}")).collect();
            let mut cuts = cuts;
            cuts.sort();
            let whole = events(stream.as_bytes(), &[]);
            prop_assert_eq!(whole.len(), payloads.len());
            let split = events(stream.as_bytes(), &cuts);
            prop_assert_eq!(split, whole);
        }
    }
}
