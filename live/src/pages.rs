//! The page server: GET requests answered by a function of the path and the query, each
//! on a blocking thread so that a page's computation never holds up the connections.
//! `heisenbench explore` serves its page with it; it shares the mock's HTTP/1.1 server loop
//! ([`crate::net::server`]) and nothing else of the mock.
//!
//! Its work is bounded: at most one page is computed per core at a time, at most
//! [`WAITING_PER_CORE`] per core wait for their turn (more are answered 503 at once), a
//! request whose client leaves while it waits is never computed, and one whose client
//! leaves while it is computed is told so ([`Abandoned`]) and may stop between its steps. It answers only its
//! own origin: a request that names another host (DNS rebinding) or comes from another
//! site's page (its `Origin` or `Sec-Fetch-Site` says so) is refused 403, so no web page
//! can set the machine's cores to work through loopback.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use crate::net::server::{Running, ServeError, bind, serve};

/// How long a connection may take to send a request head (and may stay idle between
/// requests).
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// One answer: HTTP status, content type and body.
pub type Answer = (u16, &'static str, Vec<u8>);

/// Whether the client of a page being computed has gone (closed its connection): a long
/// computation asks between its steps and gives up, so an abandoned page stops costing a
/// core.
#[derive(Debug, Clone, Default)]
pub struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    /// Whether the client has gone.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets its [`Abandoned`] when dropped before [`Watch::answered`]: the future that holds it
/// is dropped when the connection closes before the answer.
struct Watch(Option<Abandoned>);

impl Watch {
    fn answered(mut self) {
        self.0 = None;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Binds `addr` (port 0 picks a free port) and answers each GET of its own origin with
/// `pages(path, query, abandoned)` on threads of its own, within the bounds above; any
/// other method gets 405, a page that panics 500.
pub fn serve_pages<P>(addr: SocketAddr, pages: P) -> Result<Running, ServeError>
where
    P: Fn(&str, &str, &Abandoned) -> Answer + Send + Sync + 'static,
{
    let (listener, addr) = bind(addr)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let pages = Arc::new(pages);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let work = Arc::new(Work {
        cores: tokio::sync::Semaphore::new(cores),
        waiting: std::sync::atomic::AtomicUsize::new(0),
        max_waiting: cores * WAITING_PER_CORE,
    });
    let handler = move |req: Request<Incoming>| {
        let (pages, work) = (pages.clone(), work.clone());
        async move { Ok::<_, Infallible>(answer(req, pages, work, addr).await) }
    };
    Running::spawn("heisenbench-pages", runtime, listener, addr, |l, rx| {
        // No drain: a page still being drawn at shutdown is for nobody.
        serve(
            l,
            HEADER_TIMEOUT,
            std::time::Duration::ZERO,
            false,
            false,
            handler,
            rx,
        )
    })
}

/// Requests that may wait for a core, per core, before more are refused.
pub const WAITING_PER_CORE: usize = 4;

/// What bounds the page server's work: a permit per core, and the count waiting.
struct Work {
    cores: tokio::sync::Semaphore,
    waiting: std::sync::atomic::AtomicUsize,
    max_waiting: usize,
}

/// A request counted among those waiting or running, until it is dropped (answered, or
/// abandoned by its client).
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    /// Counts one more, unless [`Work::max_waiting`] are counted already.
    fn enter(work: &'a Work) -> Option<Self> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = work.waiting.fetch_add(1, Relaxed);
        let w = Self(&work.waiting);
        (n < work.max_waiting).then_some(w)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `req` comes from this server's own page or a user's address bar: its Host is
/// `addr` (or `localhost` at its port), and neither `Origin` nor `Sec-Fetch-Site` names
/// another site.
fn own_origin(req: &Request<Incoming>, addr: SocketAddr) -> bool {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let ours = [addr.to_string(), format!("localhost:{}", addr.port())];
    let host_ok = header("host").is_some_and(|h| ours.contains(&h));
    let origin_ok =
        header("origin").is_none_or(|o| ours.iter().any(|h| o == format!("http://{h}")));
    let site_ok = header("sec-fetch-site").is_none_or(|s| s == "same-origin" || s == "none");
    host_ok && origin_ok && site_ok
}

async fn answer<P>(
    req: Request<Incoming>,
    pages: Arc<P>,
    work: Arc<Work>,
    addr: SocketAddr,
) -> Response<Full<Bytes>>
where
    P: Fn(&str, &str, &Abandoned) -> Answer + Send + Sync + 'static,
{
    let (status, content_type, body) = if req.method() != Method::GET {
        (405, "text/plain", b"method not allowed".to_vec())
    } else if !own_origin(&req, addr) {
        (
            403,
            "text/plain",
            b"this server answers its own page only".to_vec(),
        )
    } else if let Some(waiting) = Waiting::enter(&work) {
        // Dropped with the request if its client leaves first: then it never starts.
        let permit = work.cores.acquire().await;
        drop(waiting);
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let abandoned = Abandoned::default();
        let watch = Watch(Some(abandoned.clone()));
        let answer = tokio::task::spawn_blocking(move || pages(&path, &query, &abandoned))
            .await
            .unwrap_or((500, "text/plain", b"the page failed".to_vec()));
        watch.answered();
        drop(permit);
        answer
    } else {
        (
            503,
            "text/plain",
            b"busy: every core is drawing a page".to_vec(),
        )
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(body)))
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn get(addr: SocketAddr, head: &str) -> u16 {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        write!(s, "GET /x HTTP/1.1\r\n{head}connection: close\r\n\r\n").unwrap();
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        got.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0)
    }

    /// Requests of other sites are refused before any work; past the cores and the queue,
    /// requests are answered 503 at once; every page computed was one that was asked for.
    #[test]
    fn the_page_server_answers_its_own_origin_within_its_bounds() {
        let computed = Arc::new(AtomicUsize::new(0));
        let c = computed.clone();
        let server = serve_pages(SocketAddr::from(([127, 0, 0, 1], 0)), move |_, _, _| {
            c.fetch_add(1, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(600));
            (200, "text/plain", b"ok".to_vec())
        })
        .unwrap();
        let addr = server.addr();
        let host = format!("host: {addr}\r\n");
        for foreign in [
            "host: evil.example:80\r\n".to_string(),
            format!("{host}origin: http://evil.example\r\n"),
            format!("{host}sec-fetch-site: cross-site\r\n"),
        ] {
            assert_eq!(get(addr, &foreign), 403, "{foreign}");
        }
        assert_eq!(computed.load(SeqCst), 0, "a refused request costs no page");
        assert_eq!(
            get(addr, &format!("{host}sec-fetch-site: same-origin\r\n")),
            200
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let asked = cores * (1 + WAITING_PER_CORE) + 4;
        let answers: Vec<u16> = (0..asked)
            .map(|_| {
                let h = host.clone();
                std::thread::spawn(move || get(addr, &h))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let busy = answers.iter().filter(|s| **s == 503).count();
        let ok = answers.iter().filter(|s| **s == 200).count();
        assert_eq!(busy + ok, asked, "{answers:?}");
        assert!(busy >= 1, "past the bound some are refused: {answers:?}");
        assert_eq!(computed.load(SeqCst), 1 + ok);
        server.shutdown();
    }

    /// A page whose client closes its connection while the page is computed is told so;
    /// one whose client waits is not.
    #[test]
    fn a_page_being_computed_learns_that_its_client_left() {
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        let tx = std::sync::Mutex::new(tx);
        let server = serve_pages(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            move |path, _, gone| {
                // A page of steps, each asking whether its client is still there; a hang guard
                // ends it after 20 s either way.
                let started = std::time::Instant::now();
                let wait = if path == "/long" { 20.0 } else { 0.3 };
                while started.elapsed().as_secs_f64() < wait && !gone.is_set() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                let _ = tx.lock().unwrap().send(gone.is_set());
                (200, "text/plain", b"ok".to_vec())
            },
        )
        .unwrap();
        let addr = server.addr();
        assert_eq!(get(addr, &format!("host: {addr}\r\n")), 200);
        assert!(!rx.recv().unwrap(), "a client that waited is there");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET /long HTTP/1.1\r\nhost: {addr}\r\n\r\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let left = std::time::Instant::now();
        drop(s);
        let told = rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap();
        assert!(
            told,
            "the page ran its 20 s without being told its client left"
        );
        assert!(
            left.elapsed().as_secs_f64() < 10.0,
            "told only after {:?}",
            left.elapsed()
        );
        server.shutdown();
    }
}
