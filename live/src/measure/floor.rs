//! The machine's floor: how late a message written on one loop arrives on another, and how
//! late that loop reads it, over loopback TCP on this machine, when nothing else is in the
//! way.
//!
//! The observer overhead a report prints is the mock's send stamp subtracted from the
//! kernel's arrival stamp of the read that brought the chunk (`SO_TIMESTAMPNS`); its
//! read lag is that read's return minus the arrival stamp. The floor is the same two
//! quantities for a sender and a reader that do nothing else, so a report can say how far
//! it is from what the machine allows. The method is fixed (its [`REVISION`] is stored with
//! it, and a floor of another revision is not compared), so a noisier floor cannot make a
//! goal easier:
//!
//! * two threads, each running a current-thread tokio runtime (as the mock and a shard do),
//!   one TCP connection between them on 127.0.0.1 with `TCP_NODELAY`;
//! * the sender's side of it yields the thread after each write, as the mock's connections
//!   do (the `net::yielding` module), so a run's overhead and the floor are held to the same writer;
//! * the sender wakes every millisecond and writes its messages for that millisecond, each
//!   with its own `write` call, each 16 bytes holding the CLOCK_MONOTONIC time of its write;
//! * the reader reads into a 16 KiB buffer, with the kernel stamping arrivals, and gives every
//!   message in a read that read's stamps (as a shard does its chunks); the floor's sample is
//!   arrival stamp minus write stamp, its read lag the read's return minus the arrival stamp;
//! * **idle**: one message a millisecond for [`IDLE_S`] seconds; **loaded**: a given rate
//!   (the run's chunk rate) for [`LOADED_S`] seconds. The first 100 ms of each are not kept.

use std::io;
use std::time::Duration;

use heisenbench_model::stats::{Dist, Recorder};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use crate::net::receive_stamps;
use crate::net::yielding::HandOff;
use crate::time::mono_ns;

/// Length of the idle measurement, seconds.
pub const IDLE_S: f64 = 2.0;
/// Length of the loaded measurement, seconds.
pub const LOADED_S: f64 = 2.0;
/// Highest loaded rate measured, messages per second (beyond it the two threads would
/// measure their own saturation, not the floor).
pub const MAX_RATE: f64 = 2_000_000.0;
/// Bytes per message.
const MESSAGE: usize = 16;
/// Samples before this are warm-up, not kept.
const WARMUP_NS: u64 = 100_000_000;
/// The method's revision: 2 since arrivals are the kernel's stamps (1 read them from the
/// read's return).
pub const REVISION: u32 = 2;

/// The floor measured on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// One message a millisecond: one-way delay to the arrival stamp.
    pub idle: Dist,
    /// At `loaded_rate_per_s`: one-way delay to the arrival stamp.
    pub loaded: Dist,
    /// Messages per second of the loaded measurement.
    pub loaded_rate_per_s: f64,
    /// One message a millisecond: the reader's read lag.
    #[serde(default)]
    pub idle_read_lag: Dist,
    /// At `loaded_rate_per_s`: the reader's read lag.
    #[serde(default)]
    pub loaded_read_lag: Dist,
    /// The method, in one line.
    pub method: String,
    /// The method's revision ([`REVISION`] when measured by this build; 1 for a floor
    /// stored without one).
    #[serde(default = "first_revision")]
    pub revision: u32,
}

fn first_revision() -> u32 {
    1
}

impl Floor {
    /// Whether this floor was measured by this build's method.
    pub fn current(&self) -> bool {
        self.revision == REVISION
    }

    /// A read lag's p50 and p99 as multiples of the floor's reader's, in one line (idle,
    /// and loaded when it was measured near `rate_per_s` chunks a second).
    pub fn read_lag_over(&self, p50_s: f64, p99_s: f64, rate_per_s: f64) -> String {
        let against = [&self.idle_read_lag, &self.loaded_read_lag];
        self.compare(
            "read lag over the floor's reader",
            against,
            p50_s,
            p99_s,
            rate_per_s,
        )
    }

    /// Whether the loaded floor was measured at a rate within a factor of two of
    /// `rate_per_s` (a floor under another load says nothing about this one).
    fn near(&self, rate_per_s: f64) -> bool {
        rate_per_s > 0.0
            && (0.5..=2.0).contains(&(self.loaded_rate_per_s / rate_per_s.max(1_000.0)))
    }

    /// `value` as a multiple of `floor`, when the floor is positive.
    pub fn ratio(value: f64, floor: f64) -> Option<f64> {
        (floor > 0.0 && value.is_finite()).then(|| value / floor)
    }

    /// An observer overhead's p50 and p99 as multiples of this floor, in one line, for a
    /// run that received `rate_per_s` chunks a second. The loaded floor is compared only
    /// when it was measured near the run's rate.
    pub fn over(&self, p50_s: f64, p99_s: f64, rate_per_s: f64) -> String {
        let against = [&self.idle, &self.loaded];
        let what = "observer overhead over this machine's loopback floor";
        self.compare(what, against, p50_s, p99_s, rate_per_s)
    }

    /// `what`'s p50 and p99 over the idle and the loaded distribution of `against`, the
    /// loaded one only when it was measured near `rate_per_s`.
    fn compare(
        &self,
        what: &str,
        against: [&Dist; 2],
        p50_s: f64,
        p99_s: f64,
        rate_per_s: f64,
    ) -> String {
        let x = |v: f64, f: f64| Self::ratio(v, f).map_or("-".into(), |r| format!("{r:.2}x"));
        let [idle, loaded] = against;
        if self.near(rate_per_s) {
            format!(
                "{what}: p50 {} idle / {} at {:.0} msg/s, p99 {} / {}",
                x(p50_s, idle.p50_s),
                x(p50_s, loaded.p50_s),
                self.loaded_rate_per_s,
                x(p99_s, idle.p99_s),
                x(p99_s, loaded.p99_s)
            )
        } else {
            format!(
                "{what}, idle: p50 {}, p99 {} (the loaded floor was measured at {:.0} msg/s, not this run's {:.0}: --floor measures it at this rate)",
                x(p50_s, idle.p50_s),
                x(p99_s, idle.p99_s),
                self.loaded_rate_per_s,
                rate_per_s
            )
        }
    }
}

/// Measures the idle floor and the floor under `loaded_rate_per_s` messages per second
/// (clamped to 1,000..[`MAX_RATE`]).
pub fn measure(loaded_rate_per_s: f64) -> io::Result<Floor> {
    let rate = if loaded_rate_per_s.is_finite() {
        loaded_rate_per_s.clamp(1_000.0, MAX_RATE)
    } else {
        1_000.0
    };
    let idle = stream(1_000.0, IDLE_S)?;
    let loaded = stream(rate, LOADED_S)?;
    Ok(Floor {
        idle: idle.delay.summary(),
        loaded: loaded.delay.summary(),
        loaded_rate_per_s: rate,
        idle_read_lag: idle.read_lag.summary(),
        loaded_read_lag: loaded.read_lag.summary(),
        method: format!(
            "loopback TCP, two current-thread runtimes, 16-byte stamped writes every 1 ms (the writer yields its thread after each), the kernel's arrival stamp minus the write stamp, and the read's return minus the arrival stamp; idle 1,000/s for {IDLE_S} s, loaded {rate:.0}/s for {LOADED_S} s"
        ),
        revision: REVISION,
    })
}

/// One way over loopback at `rate_per_s` lone messages a second for `seconds`, by this
/// floor's method (a 16-byte write, the kernel's arrival stamp; the first 100 ms not
/// kept): the crossing a client's request, or a response's first chunk, makes when nothing
/// else is on the wire. Rates below one a second, or non-finite, are taken as one.
pub fn one_way(rate_per_s: f64, seconds: f64) -> io::Result<Dist> {
    let rate = if rate_per_s.is_finite() {
        rate_per_s.clamp(1.0, MAX_RATE)
    } else {
        1.0
    };
    Ok(stream(rate, seconds)?.delay.summary())
}

/// One measurement's samples (nanoseconds).
struct Samples {
    /// Arrival stamp minus write stamp.
    delay: Recorder,
    /// The read's return minus the arrival stamp.
    read_lag: Recorder,
    /// Messages read, the warm-up's included.
    received: u64,
}

/// One measurement: `rate` messages per second for `seconds`.
fn stream(rate: f64, seconds: f64) -> io::Result<Samples> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let ticks = (seconds * 1e3).round() as u64;
    let sender = std::thread::Builder::new()
        .name("floor-sender".into())
        .spawn(move || -> io::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let (sock, _) = listener.accept().await?;
                sock.set_nodelay(true)?;
                let mut sock = HandOff::new(sock, true, None);
                let mut tick = tokio::time::interval(Duration::from_millis(1));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                // Messages due by the end of each tick, so fractional rates come out right.
                let mut sent = 0u64;
                for t in 1..=ticks {
                    tick.tick().await;
                    let due = (rate * t as f64 / 1e3) as u64;
                    while sent < due {
                        let mut m = [0u8; MESSAGE];
                        m[..8].copy_from_slice(&mono_ns().to_le_bytes());
                        m[8..].copy_from_slice(&sent.to_le_bytes());
                        sock.write_all(&m).await?;
                        sent += 1;
                    }
                }
                sock.shutdown().await
            })
        })?;
    let stamping = receive_stamps::Stamping::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rec = rt.block_on(async move {
        let sock = tokio::net::TcpStream::connect(addr).await?;
        sock.set_nodelay(true)?;
        if !receive_stamps::stamp_arrivals(&sock) {
            return Err(io::Error::other(
                "this kernel does not stamp TCP arrivals (SO_TIMESTAMPNS)",
            ));
        }
        let mut rec = Samples {
            delay: Recorder::default(),
            read_lag: Recorder::default(),
            received: 0,
        };
        let mut buf = vec![0u8; 16 * 1024];
        let (mut filled, mut start) = (0usize, None::<u64>);
        loop {
            let read = receive_stamps::read(&sock, &mut buf[filled..]).await?;
            if read.n == 0 {
                break;
            }
            let arrived = read.stamps.arrival_ns();
            filled += read.n;
            let whole = filled / MESSAGE * MESSAGE;
            for m in buf[..whole].chunks_exact(MESSAGE) {
                let mut stamp = [0u8; 8];
                stamp.copy_from_slice(&m[..8]);
                let sent = u64::from_le_bytes(stamp);
                rec.received += 1;
                let first = *start.get_or_insert(sent);
                if sent.saturating_sub(first) >= WARMUP_NS {
                    rec.delay.record(arrived.saturating_sub(sent));
                    if let Some(lag) = read.stamps.read_lag_ns() {
                        rec.read_lag.record(lag);
                    }
                }
            }
            buf.copy_within(whole..filled, 0);
            filled -= whole;
        }
        io::Result::Ok(rec)
    })?;
    sender
        .join()
        .map_err(|_| io::Error::other("the floor's sender thread panicked"))??;
    drop(stamping);
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement reads every message it sent, keeps those past the warm-up, and gives
    /// plausible delays: positive, and far below the length of the run. How many fall in the
    /// warm-up depends on when the sender's ticks ran (a busy machine delays and bunches
    /// them), so only the bounds that hold however they ran are asserted; nothing about the
    /// delays' size is (that is the machine's, measured in bench/).
    #[test]
    fn counts_every_message_after_the_warm_up() {
        let r = stream(20_000.0, 0.3).unwrap();
        // 0.3 s at 20,000/s: 6,000 messages, all read. The first tick's 20 are always in
        // the warm-up. The 300 ticks take at least 0.299 s, so the last tick's messages are
        // past the warm-up unless a stall of the sender bunched every tick after the first
        // message; that takes a 0.2 s stall, which a test run does not see.
        assert_eq!(r.received, 6_000);
        let n = r.delay.count();
        assert!((20..=5_980).contains(&n), "{n}");
        assert_eq!(r.read_lag.count(), n);
        let (d, lag) = (r.delay.summary(), r.read_lag.summary());
        assert!(d.p50_s > 0.0 && d.max_s < 0.3, "{d:?}");
        // A message is read after it arrives.
        assert!(lag.p50_s > 0.0 && lag.max_s < 0.3, "{lag:?}");
    }

    /// Lone messages at 200 a second for 0.4 s: 80 written, one every 5 ms, those of the
    /// first 100 ms left out; the rest kept, each a positive delay below the run's length.
    /// The bounds hold however the sender's ticks ran (a late tick sends what fell due).
    #[test]
    fn one_way_keeps_lone_messages_past_the_warm_up() {
        let d = one_way(200.0, 0.4).unwrap();
        assert!((20..=79).contains(&d.count), "{d:?}");
        assert!(d.p50_s > 0.0 && d.max_s < 0.4, "{d:?}");
    }

    #[test]
    fn ratios_need_a_positive_floor() {
        assert_eq!(Floor::ratio(2e-4, 1e-4), Some(2.0));
        assert_eq!(Floor::ratio(2e-4, 0.0), None);
    }
}
