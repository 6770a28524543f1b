//! The HTTP/1.1 server loop the mock and the page server share: accept, serve each
//! connection on its own task through a connection that yields after each write, close
//! connections that send no request head in time, and drain on shutdown. Asked to, it
//! stamps each request with the kernel's arrival time of its head (`Arrived`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use tokio::sync::watch;

use super::yielding::HandOff;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A non-blocking listener on `addr` (port 0: any free port), and the address it got.
pub(crate) fn bind(addr: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), ServeError> {
    let fail = |source| ServeError::Bind { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(fail)?;
    // std listens with a backlog of 128: a load generator opening thousands of
    // connections at once overflows it, and each connection dropped there waits a second
    // or more for its SYN to be sent again. Listening again sets the backlog to the
    // kernel's cap (somaxconn).
    nix::sys::socket::listen(&listener, nix::sys::socket::Backlog::MAXCONN)
        .map_err(|e| fail(std::io::Error::from(e)))?;
    listener.set_nonblocking(true).map_err(fail)?;
    let bound = listener.local_addr().map_err(fail)?;
    Ok((listener, bound))
}

/// How long the accept loop waits after running out of descriptors before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// How long the mock's open connections get to finish after a shutdown request.
pub(crate) const DRAIN: Duration = Duration::from_secs(2);

/// When the request's head reached the server's socket, by the kernel's stamp of the read
/// that brought it (CLOCK_MONOTONIC ns): in each request's extensions when the server was
/// asked to stamp arrivals. Before any thread of the server woke for it, so a server's
/// latency counted from it includes its own wake-up and parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrived(pub(crate) u64);

/// The kernel's stamp of the connection's latest read, as it changes (CLOCK_MONOTONIC ns):
/// in each request's extensions beside [`Arrived`]. Read once the request's body has been
/// collected, it is when the whole request had reached the server, which is later than its
/// head where the client wrote the body apart and late.
#[derive(Debug, Clone)]
pub(crate) struct LatestRead(pub(crate) Arc<AtomicU64>);

impl LatestRead {
    /// The latest read's stamp (0: none yet).
    pub(crate) fn ns(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Serves `handler` on `listener` until `shutdown` turns true, then lets open connections
/// finish for up to `drain`. With `hand_off`, each connection yields the thread after its
/// writes ([`HandOff`]); with `stamp_arrivals`, each request carries its [`Arrived`].
pub(crate) async fn serve<H, F, B>(
    listener: std::net::TcpListener,
    header_timeout: Duration,
    drain: Duration,
    hand_off: bool,
    stamp_arrivals: bool,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(_) => return,
    };
    let open = Arc::new(AtomicU64::new(0));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors (EMFILE, ENFILE) or another failed accept: the
                        // connection waits in the backlog, so wait too rather than retry at
                        // once, which would spin a core until a descriptor is free.
                        let out_of_descriptors = [rustix::io::Errno::MFILE, rustix::io::Errno::NFILE]
                            .iter()
                            .any(|n| e.raw_os_error() == Some(n.raw_os_error()));
                        let pause = if out_of_descriptors {
                            ACCEPT_BACKOFF
                        } else {
                            ACCEPT_BACKOFF / 10
                        };
                        tokio::select! {
                            () = tokio::time::sleep(pause) => continue,
                            _ = shutdown.changed() => break,
                        }
                    }
                };
                let _ = stream.set_nodelay(true);
                let arrived = (stamp_arrivals && super::receive_stamps::stamp_arrivals(&stream))
                    .then(|| Arc::new(AtomicU64::new(0)));
                let handler = handler.clone();
                let mut stop = shutdown.clone();
                let open = open.clone();
                open.fetch_add(1, Relaxed);
                tokio::spawn(async move {
                    let last_read = arrived.clone();
                    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                        // The head is parsed once the read that completed it returned: that
                        // read's stamp is the request's arrival.
                        if let Some(cell) = &last_read {
                            let ns = cell.load(Relaxed);
                            if ns > 0 {
                                req.extensions_mut().insert(Arrived(ns));
                            }
                            req.extensions_mut().insert(LatestRead(cell.clone()));
                        }
                        handler(req)
                    });
                    // The header timer also runs while a kept-alive connection waits for its
                    // next request, so it closes idle and half-sent connections alike.
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(hyper_util::rt::TokioIo::new(HandOff::new(stream, hand_off, arrived)), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = stop.changed() => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                    open.fetch_sub(1, Relaxed);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    let deadline = tokio::time::Instant::now() + drain;
    while open.load(Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A server running on a thread of its own, with its runtime. Dropping it shuts it down.
pub struct Running {
    addr: SocketAddr,
    shutdown: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Runs `serve(listener, shutdown)` on `runtime`, on a thread called `name`.
    pub(crate) fn spawn<S, F>(
        name: &str,
        runtime: tokio::runtime::Runtime,
        listener: std::net::TcpListener,
        addr: SocketAddr,
        serve: S,
    ) -> Result<Self, ServeError>
    where
        S: FnOnce(std::net::TcpListener, watch::Receiver<bool>) -> F + Send + 'static,
        F: std::future::Future<Output = ()>,
    {
        let (shutdown, rx) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                runtime.block_on(serve(listener, rx));
                // Blocking work still running (a page being drawn for a client that left)
                // is not waited for: the server has stopped answering.
                runtime.shutdown_background();
            })
            .map_err(ServeError::Runtime)?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets open connections finish (up to the drain its server was given), and returns.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// 600 connections opened at once all reach the accept queue: none waits for its SYN
    /// to be sent again, as the 129th and later would behind std's backlog of 128.
    #[test]
    fn a_burst_of_connections_fits_the_backlog() {
        let (listener, addr) = super::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let clients: Vec<TcpStream> = (0..600)
            .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
            .collect();
        assert_eq!(clients.len(), 600);
        let t0 = Instant::now();
        let mut accepted = 0;
        while accepted < 600 && t0.elapsed() < Duration::from_millis(500) {
            match listener.accept() {
                Ok(_) => accepted += 1,
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        assert_eq!(accepted, 600, "only {accepted} in the accept queue at once");
    }

    /// A request that reaches the server while its only thread is busy carries the
    /// kernel's arrival stamp, not the time the server got to it: its head is written
    /// while the thread sleeps 150 ms in another request's handler, and its `Arrived` is
    /// within a few milliseconds of the write.
    #[test]
    fn a_request_carries_its_arrival_not_its_handling() {
        use std::io::{Read, Write};

        use bytes::Bytes;
        use http_body_util::Full;
        use hyper::body::Incoming;
        use hyper::{Request, Response};

        use super::Arrived;
        use crate::time::mono_ns;

        let _stamping =
            crate::net::receive_stamps::Stamping::start().expect("this kernel stamps arrivals");
        let (listener, addr) = super::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handler = |req: Request<Incoming>| async move {
            let handled = mono_ns();
            if req.uri().path() == "/block" {
                std::thread::sleep(Duration::from_millis(150));
            }
            let arrived = req.extensions().get::<Arrived>().map_or(0, |a| a.0);
            Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(format!(
                "{arrived} {handled}"
            )))))
        };
        let server = super::Running::spawn("test-server", runtime, listener, addr, move |l, rx| {
            super::serve(
                l,
                Duration::from_secs(5),
                Duration::ZERO,
                false,
                true,
                handler,
                rx,
            )
        })
        .unwrap();
        let ask = |path: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let sent = mono_ns();
            write!(
                c,
                "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
            )
            .unwrap();
            (c, sent)
        };
        let body = |mut c: TcpStream| {
            let mut text = String::new();
            c.read_to_string(&mut text).unwrap();
            let nums: Vec<u64> = text
                .rsplit("\r\n\r\n")
                .next()
                .unwrap()
                .split(' ')
                .map(|x| x.parse().unwrap())
                .collect();
            (nums[0], nums[1])
        };
        let (blocker, _) = ask("/block");
        std::thread::sleep(Duration::from_millis(30));
        let (waiting, sent) = ask("/stamp");
        let (arrived, handled) = body(waiting);
        drop(blocker);
        server.shutdown();
        assert!(
            arrived >= sent,
            "arrived {arrived} before it was sent {sent}"
        );
        // It was written 30 ms into a 150 ms stall: handled 100 ms or more after it came.
        assert!(
            handled - arrived >= 100_000_000,
            "arrived {arrived}, handled {handled}: the stamp is the handling time"
        );
        assert!(
            arrived - sent < 50_000_000,
            "the kernel stamped it {} ms after the write",
            (arrived - sent) / 1_000_000
        );
    }
}
