//! A timer with microsecond resolution for the async runtime.
//!
//! tokio's timer wheel ticks in whole milliseconds, so a 250 us inter-token latency would
//! become 1 ms. This timer keeps deadlines in a heap on one thread that sleeps on a
//! condition-variable timeout (a futex wait with nanosecond resolution) and wakes the
//! waiting task through a oneshot channel; it fires late by a wake-up's time, never early
//! (bench/RESULTS.md, "The mock's timers in real time").

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Instant;

use tokio::sync::oneshot;

/// Handle to the timer thread; cheap to clone. The thread ends when every handle is gone.
#[derive(Clone, Debug)]
pub struct PreciseTimer {
    tx: mpsc::Sender<(Instant, u64, oneshot::Sender<()>)>,
}

impl Default for PreciseTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl PreciseTimer {
    /// Starts the timer thread.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel::<(Instant, u64, oneshot::Sender<()>)>();
        thread::Builder::new()
            .name("heisenbench-timer".into())
            .spawn(move || {
                let mut heap: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
                let mut waiters = std::collections::HashMap::new();
                loop {
                    let next = heap.peek().map(|Reverse((d, _))| *d);
                    let msg = match next {
                        Some(deadline) => {
                            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        }
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match msg {
                        Ok((deadline, id, tx)) => {
                            heap.push(Reverse((deadline, id)));
                            waiters.insert(id, tx);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => {
                            if heap.is_empty() {
                                return;
                            }
                            // No new sleepers can come; sleep out the ones we have.
                            if let Some(Reverse((d, _))) = heap.peek() {
                                thread::sleep(d.saturating_duration_since(Instant::now()));
                            }
                        }
                    }
                    let now = Instant::now();
                    while let Some(Reverse((d, id))) = heap.peek().copied() {
                        if d > now {
                            break;
                        }
                        heap.pop();
                        if let Some(tx) = waiters.remove(&id) {
                            let _ = tx.send(());
                        }
                    }
                }
            })
            .expect("spawning the timer thread");
        Self { tx }
    }

    /// Completes at `deadline` (immediately if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        if deadline <= Instant::now() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.tx.send((deadline, id, tx)).is_err() {
            // The thread is gone (process shutting down): fall back to tokio's timer.
            tokio::time::sleep_until(deadline.into()).await;
            return;
        }
        let _ = rx.await;
    }
}

/// One deadline at a time, woken by the kernel on the waiting task's own thread: a
/// `timerfd` in the runtime's epoll set, armed at an absolute CLOCK_MONOTONIC time. Where
/// [`PreciseTimer`] needs its thread to get a core and then wake the waiting runtime (two
/// wake-ups, each of which waits for a core on a loaded machine), this is one: the epoll
/// wait the runtime is already in returns at the deadline. For a loop with one sleeper at
/// a time (a shard's schedule); a timed stream's many sleepers share [`PreciseTimer`].
///
/// The kernel fires it [`LoopTimer::LEAD_NS`] before the deadline, and the wait then yields
/// to the runtime (which goes on running its other tasks and polling its epoll set) until
/// the deadline passes. A core asleep in a VM takes tens of microseconds to come back;
/// woken early, the shard has its core when the send falls due.
#[derive(Debug)]
pub struct LoopTimer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl LoopTimer {
    /// How long before a deadline the kernel wakes the waiting thread: about twice the
    /// typical wake-up of an idle core on the machine it was tuned on (bench/RESULTS.md,
    /// "The mock hands the core to its reader; the schedule wakes early"). It costs a shard
    /// at most this much polling per send while its loop has nothing else to do.
    pub const LEAD_NS: u64 = 30_000;

    /// A disarmed timer on the current tokio runtime (which must have I/O enabled).
    pub fn new() -> std::io::Result<Self> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // tokio deprecates the safe constructor because a descriptor given by a bare
        // `AsRawFd` may be closed under the reactor; an `OwnedFd` moved in stays open for
        // the `AsyncFd`'s whole life, which is the condition its `unsafe` successor asks of
        // the caller (and this workspace forbids `unsafe`).
        #[allow(deprecated)]
        let fd = tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)?;
        Ok(Self { fd })
    }

    /// Completes at `deadline_ns` (CLOCK_MONOTONIC, [`crate::time::mono_ns`]) and returns
    /// when it was first seen passed; None, at once, when it had passed already. Never
    /// early: the wait ends only once the clock reads the deadline. Dropping the future leaves
    /// the timer armed, and the next call re-arms it.
    pub async fn until(&self, deadline_ns: u64) -> std::io::Result<Option<u64>> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        if deadline_ns <= crate::time::mono_ns() {
            return Ok(None);
        }
        let wake_ns = deadline_ns.saturating_sub(Self::LEAD_NS);
        let at = Timespec {
            tv_sec: (wake_ns / 1_000_000_000) as _,
            tv_nsec: (wake_ns % 1_000_000_000) as _,
        };
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Re-arming clears an expiry a dropped wait left unread.
        timerfd_settime(
            self.fd.get_ref(),
            TimerfdTimerFlags::ABSTIME,
            &Itimerspec {
                it_interval: zero,
                it_value: at,
            },
        )?;
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(self.fd.get_ref(), &mut expirations) {
                Ok(_) => {
                    // The last stretch: yield to the loop (which keeps reading) and look
                    // again, until the deadline passes.
                    std::future::poll_fn(|cx| {
                        if crate::time::mono_ns() >= deadline_ns {
                            std::task::Poll::Ready(())
                        } else {
                            cx.waker().wake_by_ref();
                            std::task::Poll::Pending
                        }
                    })
                    .await;
                    return Ok(Some(crate::time::mono_ns()));
                }
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn the_loop_timer_never_fires_early_and_rearms() {
        let timer = LoopTimer::new().unwrap();
        let now = crate::time::mono_ns();
        assert_eq!(timer.until(now).await.unwrap(), None, "a passed deadline");
        // A wait dropped before its deadline leaves nothing behind for the next one.
        // (Its deadline is far enough away that no stall of a loaded machine reaches it.)
        let dropped =
            tokio::time::timeout(Duration::from_millis(1), timer.until(now + 10_000_000_000));
        assert!(dropped.await.is_err());
        // An expiry nobody read (its wait armed, then dropped after the deadline) is not
        // taken for the next deadline's.
        {
            let stale = timer.until(crate::time::mono_ns() + 100_000);
            tokio::pin!(stale);
            // One poll arms it; then its deadline passes with nobody reading.
            let armed = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(std::future::Future::poll(stale.as_mut(), cx).is_pending())
            });
            assert!(armed.await);
            std::thread::sleep(Duration::from_millis(2));
        }
        let deadline = crate::time::mono_ns() + 5_000_000;
        timer.until(deadline).await.unwrap();
        assert!(
            crate::time::mono_ns() >= deadline,
            "a stale expiry woke it early"
        );
        for us in [300u64, 50, 1_000, 0, 700] {
            let deadline = crate::time::mono_ns() + us * 1_000 + 1;
            let seen = timer.until(deadline).await.unwrap();
            let after = crate::time::mono_ns();
            assert!(
                after >= deadline,
                "{us} us: woke {} ns early",
                deadline - after
            );
            if let Some(seen) = seen {
                assert!(seen >= deadline);
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn never_fires_early() {
        // How late it fires depends on the machine's load and is measured by
        // `cargo run --release -p heisenbench-live --example timer` (bench/RESULTS.md);
        // never early holds under any load. Deadlines out of order, and some equal.
        let timer = PreciseTimer::new();
        let start = Instant::now() + Duration::from_millis(1);
        let mut tasks = tokio::task::JoinSet::new();
        for us in [700u64, 250, 500, 250, 0, 1_300, 900, 260] {
            let timer = timer.clone();
            let deadline = start + Duration::from_micros(us);
            tasks.spawn(async move {
                timer.sleep_until(deadline).await;
                assert!(
                    Instant::now() >= deadline,
                    "the {us} us deadline fired early"
                );
            });
        }
        let mut done = 0;
        while let Some(t) = tasks.join_next().await {
            t.unwrap();
            done += 1;
        }
        assert_eq!(done, 8);
    }
}
