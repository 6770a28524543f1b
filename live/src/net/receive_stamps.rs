//! Where a chunk's arrival is stamped: by the kernel, as its bytes reach the socket.
//!
//! A read stamped when it returns is late by however long the reading thread was busy,
//! asleep or queued behind another thread on its core: on one loop that sends as well as
//! reads, a response that lands during a send waits for the send's system call. The
//! kernel stamps every incoming packet as it enters the receiving stack (`SO_TIMESTAMPNS`),
//! before any thread of this process is involved, and a TCP read returns the stamp of the
//! latest packet it copied from. That stamp is a chunk's
//! arrival; the time the read returned is kept as well, and their difference is the
//! reader's own lateness (a run's *read lag*).
//!
//! The kernel's stamps are on CLOCK_REALTIME. Each read converts its stamp to
//! CLOCK_MONOTONIC by its age: the realtime clock read as the read returns, minus the stamp,
//! taken from the monotonic clock read at the same moment. A step of the realtime clock
//! can only disturb a read it happens during, and an age is clamped to be non-negative.
//!
//! Linux turns its stamping on for the whole host when a first socket asks for it, a
//! moment later (from a work queue), and off again when the last such socket closes. A
//! process that reads stamped arrivals holds a [`Stamping`] for its life, so the first
//! packets of each new connection are stamped too. When the kernel gives no stamp (the
//! option refused, or stamping not yet on), the caller falls back to the time the read
//! returned.

use std::io::{self, IoSliceMut};
use std::os::fd::AsRawFd;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::time::{mono_ns, realtime_ns};

/// Keeps the kernel's stamping of arrivals on while it lives: a socket that asks for it
/// and is never read.
#[derive(Debug)]
pub(crate) struct Stamping {
    _socket: std::net::UdpSocket,
}

impl Stamping {
    /// Turns stamping on (None when the kernel refuses), and gives the kernel a moment to
    /// do it.
    pub(crate) fn start() -> Option<Self> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        setsockopt(&socket, sockopt::ReceiveTimestampns, &true).ok()?;
        std::thread::sleep(std::time::Duration::from_millis(5));
        Some(Self { _socket: socket })
    }
}

/// Asks the kernel to stamp the packets `sock` receives. False when it refuses (reads are
/// then stamped as they return).
pub(crate) fn stamp_arrivals(sock: &TcpStream) -> bool {
    setsockopt(sock, sockopt::ReceiveTimestampns, &true).is_ok()
}

/// When a read's bytes came (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamps {
    /// When the latest of them reached the socket, by the kernel's stamp (None without
    /// one).
    pub(crate) arrived_ns: Option<u64>,
    /// When the read returned.
    pub(crate) read_ns: u64,
}

impl Stamps {
    /// A read returning now, without a kernel stamp.
    pub(crate) fn now() -> Self {
        Self {
            arrived_ns: None,
            read_ns: mono_ns(),
        }
    }

    /// The bytes' arrival: the kernel's stamp, or the read's return without one.
    pub(crate) fn arrival_ns(&self) -> u64 {
        self.arrived_ns.unwrap_or(self.read_ns)
    }

    /// How late the read returned after the arrival (None without a kernel stamp).
    pub(crate) fn read_lag_ns(&self) -> Option<u64> {
        self.arrived_ns.map(|a| self.read_ns.saturating_sub(a))
    }
}

/// One read: how many bytes, and when they came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Read {
    /// Bytes read; 0 at the connection's end.
    pub(crate) n: usize,
    /// Their stamps.
    pub(crate) stamps: Stamps,
}

/// Reads what `sock` has into `into`, waiting until it has something.
pub(crate) async fn read(sock: &TcpStream, into: &mut [u8]) -> io::Result<Read> {
    loop {
        sock.readable().await?;
        match sock.try_io(Interest::READABLE, || read_now(sock, into)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            done => return done,
        }
    }
}

/// One `recvmsg` on the non-blocking socket.
pub(crate) fn read_now(sock: &TcpStream, into: &mut [u8]) -> io::Result<Read> {
    let mut control = [0u8; 64];
    let mut iov = [IoSliceMut::new(into)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut control),
        MsgFlags::empty(),
    )?;
    let read_ns = mono_ns();
    let real_ns = realtime_ns();
    // The realtime reading pairs with the midpoint of the two monotonic ones.
    let paired_ns = read_ns + mono_ns().saturating_sub(read_ns) / 2;
    let mut arrived_ns = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                let stamp = (ts.tv_sec() as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(ts.tv_nsec() as u64);
                arrived_ns = Some(on_monotonic(stamp, real_ns, paired_ns).min(read_ns));
            }
        }
    }
    Ok(Read {
        n: msg.bytes,
        stamps: Stamps {
            arrived_ns,
            read_ns,
        },
    })
}

/// A realtime `stamp`, seen at `real_now` (realtime) = `mono_now` (monotonic), on the
/// monotonic clock. A stamp from the future (a clock step) is taken as now; one older than
/// `mono_now` itself is clamped to the monotonic origin.
fn on_monotonic(stamp: u64, real_now: u64, mono_now: u64) -> u64 {
    mono_now.saturating_sub(real_now.saturating_sub(stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn a_stamp_is_moved_by_its_age() {
        assert_eq!(on_monotonic(1_000, 1_500, 10_000), 9_500);
        // From the future (the realtime clock stepped back): now.
        assert_eq!(on_monotonic(2_000, 1_500, 10_000), 10_000);
        // Older than the monotonic origin: the origin.
        assert_eq!(on_monotonic(0, 50_000, 10_000), 0);
    }

    /// Bytes written, then read 30 ms later: the arrival lies between the write and the
    /// read, close to the write (the loopback's few microseconds, allowed 10 ms on a busy
    /// machine), and the read lag is the wait (at least the 30 ms slept). A read stamped as
    /// it returns would fail the first check; a wrong clock conversion would fail either.
    #[tokio::test(flavor = "current_thread")]
    async fn the_kernel_stamps_arrival_not_the_read() {
        let _on = Stamping::start().expect("this kernel stamps arrivals");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (reader, (mut writer, _)) = (client.unwrap(), server.unwrap());
        assert!(stamp_arrivals(&reader), "this kernel stamps TCP arrivals");
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            let before = mono_ns();
            writer.write_all(b"hello").await.unwrap();
            let written = mono_ns();
            std::thread::sleep(Duration::from_millis(30));
            let r = read(&reader, &mut buf).await.unwrap();
            assert_eq!(r.n, 5);
            let arrived = r.stamps.arrived_ns.expect("a kernel stamp");
            assert!(
                arrived >= before.saturating_sub(1_000) && arrived <= written + 10_000_000,
                "arrival {} ns after the write began",
                arrived as i64 - before as i64
            );
            assert!(r.stamps.read_lag_ns() >= Some(30_000_000), "{r:?}");
        }
        // Without the option, no stamp.
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (reader, (mut writer, _)) = (client.unwrap(), server.unwrap());
        writer.write_all(b"x").await.unwrap();
        let r = read(&reader, &mut buf).await.unwrap();
        assert_eq!(
            (r.n, r.stamps.arrived_ns, r.stamps.read_lag_ns()),
            (1, None, None)
        );
        drop(writer);
        assert_eq!(read(&reader, &mut buf).await.unwrap().n, 0);
    }
}
