//! A connection that gives up the core after each write, so the reader it woke runs first.
//!
//! The mock's connections are these, and so is the writer of the loopback floor
//! (`measure::floor`), which must be measured as the mock writes. When the mock and a
//! client share a machine, a write on loopback wakes the client's thread, and Linux usually
//! queues that thread on the writer's own core (the wake-up is marked synchronous: the
//! writer is expected to sleep soon). The mock often does not: at any load another request
//! may already be waiting, and its parsing and formatting run before the client gets the
//! core, tens of microseconds the client then reports as the server's. Yielding the thread
//! after a write lets the woken client read its bytes at once; with nothing else runnable
//! the yield returns straight away.
//!
//! What it changes is measured in bench/RESULTS.md ("The mock hands the core to its
//! reader; the schedule wakes early"). A mock serving clients on other machines only pays
//! the yield's system call.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use super::receive_stamps;

/// A TCP connection that yields the thread after every write that moved bytes (when
/// `yields`; otherwise a plain connection), and keeps the kernel's arrival stamp of its
/// latest read (when given a cell for it).
pub(crate) struct HandOff {
    stream: TcpStream,
    yields: bool,
    arrived: Option<Arc<AtomicU64>>,
}

impl HandOff {
    /// `stream`, yielding after its writes when `yields`. A server of timed streams should
    /// not: its next work is other streams' tokens, due now, and a yield on a core the
    /// clients want can cost them a whole time slice (bench/RESULTS.md, "Timed streams").
    /// With `arrived`, every read that brings bytes stores their arrival there
    /// (CLOCK_MONOTONIC ns; the kernel's stamp where the socket asked for them).
    pub(crate) fn new(stream: TcpStream, yields: bool, arrived: Option<Arc<AtomicU64>>) -> Self {
        Self {
            stream,
            yields,
            arrived,
        }
    }

    /// Passes a write's result through, yielding the thread when it moved bytes.
    fn after_write(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if self.yields && matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            std::thread::yield_now();
        }
        written
    }
}

impl AsyncRead for HandOff {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(cell) = &this.arrived else {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        };
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            let into = buf.initialize_unfilled();
            let stream = &this.stream;
            match stream.try_io(Interest::READABLE, || {
                receive_stamps::read_now(stream, into)
            }) {
                Ok(read) => {
                    buf.advance(read.n);
                    if read.n > 0 {
                        cell.store(read.stamps.arrival_ns(), Relaxed);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for HandOff {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.after_write(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.after_write(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The wrapper is transparent: what is written through it arrives whole, in order,
    /// and what the peer writes reads back through it, vectored or not.
    #[tokio::test]
    async fn passes_bytes_through_both_ways() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(b"request").await.unwrap();
            let mut got = Vec::new();
            c.read_to_end(&mut got).await.unwrap();
            got
        });
        let (s, _) = listener.accept().await.unwrap();
        let mut conn = HandOff::new(s, true, None);
        let mut req = [0u8; 7];
        conn.read_exact(&mut req).await.unwrap();
        assert_eq!(&req, b"request");
        conn.write_all(b"head ").await.unwrap();
        let bufs = [IoSlice::new(b"body "), IoSlice::new(b"end")];
        let n = conn.write_vectored(&bufs).await.unwrap();
        // A vectored write may take only part; the rest goes by plain writes.
        let rest: Vec<u8> = b"body end"[n..].to_vec();
        conn.write_all(&rest).await.unwrap();
        conn.shutdown().await.unwrap();
        drop(conn);
        assert_eq!(peer.await.unwrap(), b"head body end");
    }
}
