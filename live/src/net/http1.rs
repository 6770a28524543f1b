//! HTTP/1.1 over plain TCP, read by the request's own task.
//!
//! Through reqwest, a response's bytes are read by hyper's connection task, decoded, and
//! handed through a channel to the request's task, which stamps them a task switch later.
//! Here the request's task reads the socket itself, and each read carries the kernel's
//! stamp of when its bytes arrived ([`crate::net::receive_stamps`]) as well as the time it returned,
//! so nothing in this process stands between the network and a chunk's stamp. It serves plain
//! `http://` URLs without credentials in them (the embedded mock, and a server on a private
//! network); anything else (TLS, a user in the URL) goes through reqwest.
//!
//! What it speaks: one request per connection at a time, kept alive and reused while the
//! server allows (a connection the server closed while idle is noticed before reuse, and
//! a request the server closed unanswered on a reused connection is sent again on a new
//! one); response bodies framed by chunked encoding, by a length, or by the connection's
//! end.

use std::cell::RefCell;
use std::io;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::net::receive_stamps;

/// Largest response head read.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes asked of each read.
const READ_SIZE: usize = 16 * 1024;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    /// No connection could be made.
    #[error("{0}")]
    Connect(io::Error),
    /// The connection failed or closed before the response was whole.
    #[error("{0}")]
    Broken(String),
}

/// One server's endpoint, and the shard's idle connections to it.
#[derive(Debug)]
pub(crate) struct Wire {
    /// `host:port`, to connect to.
    addr: String,
    /// The request line and the fixed headers, up to the content length.
    head: Vec<u8>,
    idle: RefCell<Vec<TcpStream>>,
}

impl Wire {
    /// The endpoint `url` if it is plain `http://` without credentials; `authorization`
    /// is sent with every request.
    pub(crate) fn for_url(url: &str, authorization: Option<&str>) -> Option<Self> {
        Self::with_head(
            url,
            authorization,
            "POST",
            "*/*\r\ncontent-type: application/json",
        )
    }

    /// The endpoint `url` for `GET`s (a metrics scrape), as [`Wire::for_url`].
    pub(crate) fn for_get(url: &str, authorization: Option<&str>, accept: &str) -> Option<Self> {
        Self::with_head(url, authorization, "GET", accept)
    }

    fn with_head(
        url: &str,
        authorization: Option<&str>,
        method: &str,
        accept: &str,
    ) -> Option<Self> {
        let u = reqwest::Url::parse(url).ok()?;
        if u.scheme() != "http" || !u.username().is_empty() || u.password().is_some() {
            return None;
        }
        let host = u.host_str()?;
        let port = u.port_or_known_default()?;
        let target = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        let authority = match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let mut head =
            format!("{method} {target} HTTP/1.1\r\nhost: {authority}\r\naccept: {accept}\r\n");
        if let Some(a) = authorization {
            head.push_str(&format!("authorization: {a}\r\n"));
        }
        Some(Self {
            addr: format!("{host}:{port}"),
            head: head.into_bytes(),
            idle: RefCell::new(Vec::new()),
        })
    }

    /// Sends `body`, named `request_id` (an `x-request-id` header) where one is given, and
    /// reads the response's head.
    pub(crate) async fn post(
        &self,
        body: &[u8],
        request_id: Option<&str>,
    ) -> Result<Response<'_>, WireError> {
        let mut request = Vec::with_capacity(self.head.len() + 80 + body.len());
        request.extend_from_slice(&self.head);
        if let Some(id) = request_id {
            request.extend_from_slice(b"x-request-id: ");
            request.extend_from_slice(id.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"content-length: ");
        request.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        request.extend_from_slice(b"\r\n\r\n");
        request.extend_from_slice(body);
        self.exchange(&request).await
    }

    /// Sends a `GET` (no body) and reads the response's head.
    pub(crate) async fn get(&self) -> Result<Response<'_>, WireError> {
        let mut request = Vec::with_capacity(self.head.len() + 2);
        request.extend_from_slice(&self.head);
        request.extend_from_slice(b"\r\n");
        self.exchange(&request).await
    }

    /// Writes `request` on an idle connection or a new one and reads the response's head.
    async fn exchange(&self, request: &[u8]) -> Result<Response<'_>, WireError> {
        loop {
            let reused = self.idle.borrow_mut().pop();
            let fresh = reused.is_none();
            let mut sock = match reused {
                Some(s) if open_since_idle(&s) => s,
                Some(_) => continue,
                None => {
                    let s = TcpStream::connect(&self.addr)
                        .await
                        .map_err(WireError::Connect)?;
                    s.set_nodelay(true).map_err(WireError::Connect)?;
                    receive_stamps::stamp_arrivals(&s);
                    s
                }
            };
            let write_ns = crate::time::mono_ns();
            if let Err(e) = sock.write_all(request).await {
                if fresh {
                    return Err(WireError::Broken(format!("writing the request: {e}")));
                }
                continue;
            }
            let mut buf = Inbox::default();
            match read_head(&mut sock, &mut buf).await {
                Ok(head) => return Ok(Response::new(self, sock, buf, head, write_ns)),
                // The server closed a kept-alive connection as the request went out: it was
                // not answered, so it goes again on a new connection.
                Err(Unanswered) if !fresh => continue,
                Err(Unanswered) => {
                    return Err(WireError::Broken(
                        "the connection closed before a response".into(),
                    ));
                }
                Err(HeadError(m)) => return Err(WireError::Broken(m)),
            }
        }
    }
}

/// Whether a connection is open with nothing unread: a closed one reads its end at once.
/// A read that finds nothing also clears the reactor's readiness, which
/// [`open_since_idle`] then reads.
fn still_open(s: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(s.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Whether an idle connection, probed by [`still_open`] as it went idle, is still open.
/// Where the reactor has seen nothing arrive on it since, it is, and no system call is
/// made on the request's way to its write; else it is probed again. A close the reactor
/// has not yet seen is met as a request unanswered, and the request goes again on a new
/// connection.
fn open_since_idle(s: &TcpStream) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    s.poll_read_ready(&mut cx).is_pending() || still_open(s)
}

/// What a response's head says.
struct ResponseHead {
    status: u16,
    date: Option<String>,
    content_type: Option<String>,
    content_encoding: Option<String>,
    framing: Framing,
    keep_alive: bool,
    /// Bytes of the head in the buffer.
    len: usize,
}

use HeadFailure::{HeadError, Unanswered};

enum HeadFailure {
    /// Closed before any byte of a response.
    Unanswered,
    HeadError(String),
}

async fn read_head(sock: &mut TcpStream, buf: &mut Inbox) -> Result<ResponseHead, HeadFailure> {
    loop {
        if !buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut headers);
            match r.parse(buf.bytes()) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = r.code.unwrap_or(0);
                    if (100..200).contains(&status) {
                        // An interim response (100 Continue): the real one follows.
                        buf.consume(len);
                        continue;
                    }
                    return head_of(&r, len).map_err(HeadError);
                }
                Ok(httparse::Status::Partial) if buf.bytes().len() < MAX_HEAD => {}
                Ok(httparse::Status::Partial) => {
                    return Err(HeadError(format!("a response head over {MAX_HEAD} bytes")));
                }
                Err(e) => return Err(HeadError(format!("not an HTTP/1.1 response: {e}"))),
            }
        }
        let was_empty = buf.is_empty();
        match buf.read_from(sock).await {
            Ok(0) if was_empty => return Err(Unanswered),
            Ok(0) => {
                return Err(HeadError(
                    "the connection closed in the response's head".into(),
                ));
            }
            Ok(_) => {}
            Err(e) if was_empty && e.kind() == io::ErrorKind::ConnectionReset => {
                return Err(Unanswered);
            }
            Err(e) => return Err(HeadError(format!("reading the response: {e}"))),
        }
    }
}

fn head_of(r: &httparse::Response<'_, '_>, len: usize) -> Result<ResponseHead, String> {
    let status = r.code.unwrap_or(0);
    let mut length = None;
    let mut chunked = false;
    let mut close = r.version == Some(0);
    let mut date = None;
    let (mut content_type, mut content_encoding) = (None, None);
    for h in r.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: u64 = value
                .parse()
                .map_err(|_| format!("a content-length of '{value}'"))?;
            if length.is_some_and(|l| l != n) {
                return Err("two different content-lengths".into());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',') {
                let t = token.trim();
                if t.eq_ignore_ascii_case("close") {
                    close = true;
                } else if t.eq_ignore_ascii_case("keep-alive") {
                    close = false;
                }
            }
        } else if h.name.eq_ignore_ascii_case("date") {
            date = Some(value.to_string());
        } else if h.name.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.to_string());
        } else if h.name.eq_ignore_ascii_case("content-encoding") {
            content_encoding = Some(value.to_string());
        }
    }
    // No body for these, whatever the headers say.
    let framing = if status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked(Chunk::Size)
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::UntilClose
    };
    Ok(ResponseHead {
        status,
        date,
        content_type,
        content_encoding,
        framing,
        keep_alive: !close,
        len,
    })
}

/// Bytes read and not yet decoded, and the stamps of the read that brought the latest.
///
/// The storage stays initialised as it is reused, so a read costs no zeroing: `bytes`
/// holds `start..end` of it.
#[derive(Default)]
struct Inbox {
    store: Vec<u8>,
    start: usize,
    end: usize,
    last: Option<receive_stamps::Stamps>,
}

impl Inbox {
    fn bytes(&self) -> &[u8] {
        &self.store[self.start..self.end]
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Drops the first `n` bytes.
    fn consume(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.end);
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
    }

    /// Appends one read's bytes; 0 at the connection's end.
    async fn read_from(&mut self, sock: &TcpStream) -> io::Result<usize> {
        if self.store.len() - self.end < READ_SIZE {
            // Move what is left to the front, and grow when that is not room enough.
            self.store.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
            if self.store.len() - self.end < READ_SIZE {
                self.store.resize(self.end + READ_SIZE, 0);
            }
        }
        let mut r = receive_stamps::read(sock, &mut self.store[self.end..]).await?;
        self.end += r.n;
        if r.n > 0 {
            // Each read's stamp is converted to the monotonic clock on its own, which can
            // put it a few nanoseconds before the previous one; bytes in order arrive in
            // order.
            let before = self.last.and_then(|l| l.arrived_ns);
            let s = &mut r.stamps;
            s.arrived_ns = s.arrived_ns.map(|a| before.map_or(a, |b| a.max(b)));
            self.last = Some(r.stamps);
        }
        Ok(r.n)
    }
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    /// Chunked encoding, in this state.
    Chunked(Chunk),
    /// The body ends with the connection.
    UntilClose,
}

/// Where a chunked body's decoder is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Chunk {
    /// At a chunk's size line.
    Size,
    /// In a chunk's data, this many bytes left.
    Data(u64),
    /// At the line end after a chunk's data.
    DataEnd,
    /// In the trailer, after the last chunk.
    Trailer,
    /// Whole.
    Done,
}

/// A piece of a response's body, and when it came (CLOCK_MONOTONIC ns).
#[derive(Debug)]
pub(crate) struct Piece<'a> {
    /// The bytes.
    pub(crate) bytes: &'a [u8],
    /// When the read that brought them returned, and when the latest of them reached the
    /// socket.
    pub(crate) stamps: receive_stamps::Stamps,
}

/// A response being read.
pub(crate) struct Response<'w> {
    wire: &'w Wire,
    sock: Option<TcpStream>,
    /// Bytes read and not yet decoded.
    buf: Inbox,
    /// The last piece of body decoded.
    out: Vec<u8>,
    framing: Framing,
    keep_alive: bool,
    done: bool,
    /// When the write of the request that was answered began ([`crate::time::mono_ns`]):
    /// the end of the client's own path before the wire.
    pub(crate) write_ns: u64,
    /// The status code.
    pub(crate) status: u16,
    /// The Date header, if any.
    pub(crate) date: Option<String>,
    /// The Content-Type header, if any.
    pub(crate) content_type: Option<String>,
    /// The Content-Encoding header, if any.
    pub(crate) content_encoding: Option<String>,
}

impl<'w> Response<'w> {
    fn new(
        wire: &'w Wire,
        sock: TcpStream,
        mut buf: Inbox,
        head: ResponseHead,
        write_ns: u64,
    ) -> Self {
        buf.consume(head.len);
        let mut r = Self {
            write_ns,
            wire,
            sock: Some(sock),
            buf,
            out: Vec::new(),
            framing: head.framing,
            keep_alive: head.keep_alive,
            done: false,
            status: head.status,
            date: head.date,
            content_type: head.content_type,
            content_encoding: head.content_encoding,
        };
        r.check_done();
        r
    }

    /// The body's next piece, as it arrived: what the read that returned last holds of
    /// it (and whatever came before it undecoded), stamped with that read's times. None at
    /// the body's end, when the connection goes back to the idle ones if the server keeps
    /// it.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Piece<'_>>, WireError> {
        loop {
            self.out.clear();
            self.decode()?;
            if !self.out.is_empty() {
                // Body bytes only come from reads, so there was a last read.
                let stamps = self.buf.last.unwrap_or_else(receive_stamps::Stamps::now);
                return Ok(Some(Piece {
                    bytes: &self.out,
                    stamps,
                }));
            }
            if self.done {
                return Ok(None);
            }
            let Some(sock) = self.sock.as_mut() else {
                return Ok(None);
            };
            let n = self
                .buf
                .read_from(sock)
                .await
                .map_err(|e| WireError::Broken(format!("reading the body: {e}")))?;
            if n == 0 {
                self.sock = None;
                return match self.framing {
                    Framing::UntilClose => {
                        self.done = true;
                        Ok(None)
                    }
                    Framing::Length(left) => Err(WireError::Broken(format!(
                        "the connection closed {left} bytes before the body's end"
                    ))),
                    Framing::Chunked(_) => Err(WireError::Broken(
                        "the connection closed before the body's last chunk".into(),
                    )),
                };
            }
        }
    }

    /// Moves the body's bytes in `buf` to `out`, as far as they go.
    fn decode(&mut self) -> Result<(), WireError> {
        let mut at = 0;
        let buf = self.buf.bytes();
        loop {
            let rest = &buf[at..];
            match &mut self.framing {
                Framing::UntilClose => {
                    self.out.extend_from_slice(rest);
                    at = buf.len();
                    break;
                }
                Framing::Length(left) => {
                    let take = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    self.out.extend_from_slice(&rest[..take]);
                    *left -= take as u64;
                    at += take;
                    break;
                }
                Framing::Chunked(state) => match *state {
                    Chunk::Size => {
                        let Some(end) = memchr::memchr(b'\n', rest) else {
                            break;
                        };
                        let line = std::str::from_utf8(&rest[..end]).unwrap_or("");
                        let digits = line.split(';').next().unwrap_or("").trim();
                        let size = u64::from_str_radix(digits, 16).map_err(|_| {
                            WireError::Broken(format!(
                                "a chunk size of '{}'",
                                digits.escape_debug()
                            ))
                        })?;
                        at += end + 1;
                        *state = if size == 0 {
                            Chunk::Trailer
                        } else {
                            Chunk::Data(size)
                        };
                    }
                    Chunk::Data(left) => {
                        if rest.is_empty() {
                            break;
                        }
                        let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                        self.out.extend_from_slice(&rest[..take]);
                        at += take;
                        *state = match left - take as u64 {
                            0 => Chunk::DataEnd,
                            n => Chunk::Data(n),
                        };
                    }
                    Chunk::DataEnd => {
                        let Some(end) = memchr::memchr(b'\n', rest) else {
                            break;
                        };
                        if !rest[..end].iter().all(|b| *b == b'\r') {
                            return Err(WireError::Broken("a chunk longer than its size".into()));
                        }
                        at += end + 1;
                        *state = Chunk::Size;
                    }
                    Chunk::Trailer => {
                        let Some(end) = memchr::memchr(b'\n', rest) else {
                            break;
                        };
                        let blank = rest[..end].iter().all(|b| *b == b'\r');
                        at += end + 1;
                        if blank {
                            *state = Chunk::Done;
                        }
                    }
                    Chunk::Done => break,
                },
            }
        }
        self.buf.consume(at);
        self.check_done();
        Ok(())
    }

    /// Marks the body whole when its framing says so, and gives a connection the server
    /// keeps (with nothing unread on it) back to the idle ones.
    fn check_done(&mut self) {
        let whole = matches!(
            self.framing,
            Framing::Length(0) | Framing::Chunked(Chunk::Done)
        );
        if whole && !self.done {
            self.done = true;
            if let Some(sock) = self.sock.take()
                && self.keep_alive
                && self.buf.is_empty()
                && still_open(&sock)
            {
                self.wire.idle.borrow_mut().push(sock);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Reads one request (head and content-length body); false at the connection's end.
    fn read_request(s: &mut std::net::TcpStream) -> bool {
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
                Ok(1) => got.push(byte[0]),
                _ => return false,
            }
        }
        let head = String::from_utf8_lossy(&got).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).is_ok()
    }

    /// A server answering each connection's requests with `replies` in turn (one byte a
    /// write when `trickle`), closing the connection after them. Counts connections.
    fn server(replies: Vec<&'static [u8]>, trickle: bool) -> (String, Arc<AtomicUsize>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/completions", l.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming().take(8) {
                let Ok(mut s) = s else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                s.set_nodelay(true).unwrap();
                for reply in &replies {
                    if !read_request(&mut s) {
                        break;
                    }
                    if trickle {
                        for b in reply.iter() {
                            let _ = s.write_all(std::slice::from_ref(b));
                        }
                    } else {
                        let _ = s.write_all(reply);
                    }
                }
            }
        });
        (url, accepted)
    }

    async fn body(w: &Wire) -> Result<(u16, Vec<u8>), WireError> {
        let mut r = w.post(b"{}", None).await?;
        let mut all = Vec::new();
        while let Some(piece) = r.chunk().await? {
            let s = piece.stamps;
            assert!(s.arrived_ns.is_none_or(|a| a > 0 && a <= s.read_ns));
            all.extend_from_slice(piece.bytes);
        }
        Ok((r.status, all))
    }

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n";

    #[tokio::test(flavor = "current_thread")]
    async fn chunks_split_anywhere_read_whole_on_one_kept_connection() {
        let (url, accepted) = server(vec![CHUNKED, CHUNKED], true);
        let w = Wire::for_url(&url, None).unwrap();
        for _ in 0..2 {
            assert_eq!(body(&w).await.unwrap(), (200, b"hello world".to_vec()));
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "the connection was kept"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lengths_closes_and_a_connection_closed_while_idle() {
        let length: &[u8] =
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\nconnection: close\r\n\r\nnope";
        let (url, accepted) = server(vec![length], false);
        let w = Wire::for_url(&url, None).unwrap();
        assert_eq!(body(&w).await.unwrap(), (404, b"nope".to_vec()));
        assert_eq!(body(&w).await.unwrap(), (404, b"nope".to_vec()));
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "connection: close is obeyed"
        );
        // Kept alive by the head, then closed by the server after one answer: the next
        // request notices (or is answered by nothing) and goes on a new connection.
        let (url, accepted) = server(vec![CHUNKED], false);
        let w = Wire::for_url(&url, None).unwrap();
        for _ in 0..3 {
            assert_eq!(body(&w).await.unwrap().1, b"hello world");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        // The same without a pause: the close may arrive after the request went out, which
        // is then sent again on a new connection.
        let (url, accepted) = server(vec![CHUNKED], false);
        let w = Wire::for_url(&url, None).unwrap();
        for _ in 0..3 {
            assert_eq!(body(&w).await.unwrap().1, b"hello world");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        // No length and no chunks: the body ends with the connection.
        let until: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nall of it";
        let (url, _) = server(vec![until], true);
        let w = Wire::for_url(&url, None).unwrap();
        assert_eq!(body(&w).await.unwrap().1, b"all of it");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_body_cut_short_or_a_server_away_is_an_error() {
        let cut: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel";
        let short: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhel";
        let not_http: &[u8] = b"SSH-2.0-OpenSSH\r\n\r\n";
        let bad_size: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        for reply in [cut, short, not_http, bad_size] {
            let (url, _) = server(vec![reply], false);
            let w = Wire::for_url(&url, None).unwrap();
            let e = body(&w).await.unwrap_err();
            assert!(matches!(e, WireError::Broken(_)), "{e}");
        }
        let gone = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let w = Wire::for_url(&format!("http://{gone}/v1/completions"), None).unwrap();
        assert!(matches!(body(&w).await, Err(WireError::Connect(_))));
    }

    #[test]
    fn only_plain_http_without_credentials_is_taken() {
        assert!(Wire::for_url("https://h/v1/completions", None).is_none());
        assert!(Wire::for_url("http://u:p@h/v1/completions", None).is_none());
        let w = Wire::for_url("http://h:81/v1/completions?x=1", Some("Bearer k")).unwrap();
        let head = String::from_utf8(w.head.clone()).unwrap();
        assert!(
            head.starts_with("POST /v1/completions?x=1 HTTP/1.1\r\nhost: h:81\r\n"),
            "{head}"
        );
        assert!(head.contains("authorization: Bearer k\r\n"));
        assert_eq!(w.addr, "h:81");
        assert_eq!(Wire::for_url("http://h/v1", None).unwrap().addr, "h:80");
    }
}
