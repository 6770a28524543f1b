//! The page server: GET requests answered by a function of the path and the query, each
//! on a blocking thread so that a page's computation never holds up the connections.
//! `heisenbench explore` serves its page with it; it shares the mock's HTTP/1.1 server loop
//! ([`crate::net::server`]) and nothing else of the mock.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

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

/// Binds `addr` (port 0 picks a free port) and answers each GET with `pages(path, query)`
/// on threads of its own; any other method gets 405, a page that panics 500.
pub fn serve_pages<P>(addr: SocketAddr, pages: P) -> Result<Running, ServeError>
where
    P: Fn(&str, &str) -> Answer + Send + Sync + 'static,
{
    let (listener, addr) = bind(addr)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let pages = Arc::new(pages);
    let handler = move |req: Request<Incoming>| {
        let pages = pages.clone();
        async move { Ok::<_, Infallible>(answer(req, pages).await) }
    };
    Running::spawn("heisenbench-pages", runtime, listener, addr, |l, rx| {
        serve(l, HEADER_TIMEOUT, false, handler, rx)
    })
}

async fn answer<P>(req: Request<Incoming>, pages: Arc<P>) -> Response<Full<Bytes>>
where
    P: Fn(&str, &str) -> Answer + Send + Sync + 'static,
{
    let (status, content_type, body) = if req.method() == Method::GET {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        tokio::task::spawn_blocking(move || pages(&path, &query))
            .await
            .unwrap_or((500, "text/plain", b"the page failed".to_vec()))
    } else {
        (405, "text/plain", b"method not allowed".to_vec())
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(body)))
        .expect("static response parts are valid")
}
