//! Timers with microsecond resolution for the async runtime.
//!
//! tokio's timer wheel ticks in whole milliseconds, so a 250 us inter-token latency would
//! become 1 ms. [`Pacer`] keeps many sleepers' deadlines in a heap served by one task of
//! their own runtime, woken by a `timerfd`; [`LoopTimer`] is one such `timerfd` for a loop
//! with one deadline at a time. Both fire late by a wake-up's time, never early
//! (bench/RESULTS.md, "The mock's timers in real time" and "Timed streams paced on the
//! mock's own thread").

use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tokio::sync::Notify;

/// Many sleepers' deadlines, kept in one heap and served by one task on the runtime that
/// first sleeps on it (the driver, started then). The driver waits on a `timerfd` armed
/// for the earliest deadline, in the runtime's own epoll wait, and wakes every sleeper
/// whose deadline has passed. A sleeper costs a heap push and a wake on its own runtime,
/// with no thread in between: an earlier design woke sleepers from a timer thread of its
/// own, two wake-ups a deadline, each waiting for a core, and the mock's timed streams fell
/// behind sooner (bench/RESULTS.md, "Timed streams paced on the mock's own thread").
///
/// Cheap to clone. Without a `timerfd` (out of descriptors) it falls back to tokio's
/// millisecond timer: late by up to a tick, still never early.
#[derive(Clone, Debug, Default)]
pub struct Pacer {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Told when a deadline earlier than the one the driver waits for arrives.
    earlier: Notify,
}

#[derive(Debug, Default)]
struct Queue {
    due: BinaryHeap<Due>,
    next_id: u64,
    /// The deadline the driver waits for (None: it waits to be told).
    armed: Option<Instant>,
    /// Whether a driver task is running.
    driving: bool,
}

/// One sleeper's deadline; the heap's top is the earliest (and among equals, the first
/// queued).
#[derive(Debug)]
struct Due {
    at: Instant,
    id: u64,
    waker: Waker,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.id) == (other.at, other.id)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.id).cmp(&(self.at, self.id))
    }
}

impl Pacer {
    /// A pacer with no sleepers; its driver starts with the first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Completes at `deadline` (at once if it has passed). Must be polled inside a tokio
    /// runtime with I/O and time enabled.
    pub fn sleep_until(&self, deadline: Instant) -> PacedSleep {
        PacedSleep {
            shared: self.shared.clone(),
            at: deadline,
        }
    }
}

/// The future of [`Pacer::sleep_until`]. Dropped before its deadline, it leaves its entry
/// in the heap until then; the wake it gets is a no-op.
#[derive(Debug)]
pub struct PacedSleep {
    shared: Arc<Shared>,
    at: Instant,
}

impl Future for PacedSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let earlier = {
            let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            if !q.driving {
                q.driving = true;
                tokio::spawn(drive(self.shared.clone()));
            }
            let id = q.next_id;
            q.next_id += 1;
            q.due.push(Due {
                at: self.at,
                id,
                waker: cx.waker().clone(),
            });
            q.armed.is_none_or(|armed| self.at < armed)
        };
        if earlier {
            self.shared.earlier.notify_one();
        }
        Poll::Pending
    }
}

/// Marks the pacer driverless when its driver ends (its runtime shut down), so that the
/// next sleeper starts another.
struct Driving(Arc<Shared>);

impl Drop for Driving {
    fn drop(&mut self) {
        let mut q = self.0.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.driving = false;
        q.armed = None;
    }
}

/// The driver: wakes the sleepers whose deadlines have passed, then waits for the next
/// deadline or for an earlier one to arrive.
async fn drive(shared: Arc<Shared>) {
    let _driving = Driving(shared.clone());
    let mut timer = LoopTimer::with_lead(0).ok();
    let mut woken: Vec<Waker> = Vec::new();
    loop {
        let next = {
            let mut q = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            while q.due.peek().is_some_and(|d| d.at <= now) {
                if let Some(d) = q.due.pop() {
                    woken.push(d.waker);
                }
            }
            q.armed = q.due.peek().map(|d| d.at);
            q.armed
        };
        woken.drain(..).for_each(Waker::wake);
        let Some(at) = next else {
            shared.earlier.notified().await;
            continue;
        };
        // The kernel's clock and `Instant` are the same (CLOCK_MONOTONIC); reading
        // `Instant` first puts the armed time a few nanoseconds after `at`, never before.
        let now = Instant::now();
        let at_ns = super::mono_ns() + at.saturating_duration_since(now).as_nanos() as u64;
        let fired = async {
            match &timer {
                Some(t) if t.until(at_ns).await.is_ok() => false,
                _ => {
                    tokio::time::sleep_until(at.into()).await;
                    true
                }
            }
        };
        tokio::select! {
            fell_back = fired => {
                if fell_back {
                    timer = None;
                }
            }
            () = shared.earlier.notified() => {}
        }
    }
}

/// One deadline at a time, woken by the kernel on the waiting task's own thread: a
/// `timerfd` in the runtime's epoll set, armed at an absolute CLOCK_MONOTONIC time. A
/// timer thread would need a core for itself and then wake the waiting runtime (two
/// wake-ups, each of which waits for a core on a loaded machine); this is one: the epoll
/// wait the runtime is already in returns at the deadline. For a loop with one sleeper at
/// a time (a shard's schedule, [`Pacer`]'s driver).
///
/// The kernel fires it a lead before the deadline, and the wait then yields to the
/// runtime (which goes on running its other tasks and polling its epoll set) until the
/// deadline passes. A core asleep in a VM takes tens to hundreds of microseconds to come
/// back; woken early, the shard has its core when the send falls due.
///
/// The lead of [`LoopTimer::new`] follows the machine: twice how late the kernel's
/// wake-ups have come (a moving mean), at least [`LoopTimer::LEAD_NS`], and at most a
/// fiftieth of the mean gap between deadlines, so the polling costs a loop at most 2 % of
/// its core (at high rates the lead stays at its floor; a loop that busy does not sleep
/// deeply anyway).
#[derive(Debug)]
pub struct LoopTimer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    /// The least lead, ns.
    min_lead_ns: u64,
    /// Whether the lead follows the wake-ups seen.
    adaptive: bool,
    /// The lead now, ns.
    lead_ns: AtomicU64,
    /// A moving mean of how late the kernel's wake-ups came after their armed time, ns.
    late_ns: AtomicU64,
    /// A moving mean of the gaps between successive deadlines, ns (0: none yet).
    gap_ns: AtomicU64,
    /// The latest deadline waited for, ns.
    last_deadline_ns: AtomicU64,
}

impl LoopTimer {
    /// The least lead before a deadline at which the kernel wakes the waiting thread:
    /// about twice the typical wake-up of an idle core on the machine it was first tuned
    /// on (bench/RESULTS.md, "The mock hands the core to its reader; the schedule wakes
    /// early").
    pub const LEAD_NS: u64 = 30_000;
    /// The most lead, ns.
    const MAX_LEAD_NS: u64 = 1_000_000;

    /// A disarmed timer on the current tokio runtime (which must have I/O enabled), whose
    /// lead follows the machine's wake-ups (see the type).
    pub fn new() -> std::io::Result<Self> {
        let mut t = Self::with_lead(Self::LEAD_NS)?;
        t.adaptive = true;
        Ok(t)
    }

    /// A disarmed timer whose kernel wake-up comes `lead_ns` before each deadline (0: at
    /// it, for a loop that has other work to do and no reason to poll).
    pub fn with_lead(lead_ns: u64) -> std::io::Result<Self> {
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
        Ok(Self {
            fd,
            min_lead_ns: lead_ns,
            adaptive: false,
            lead_ns: AtomicU64::new(lead_ns),
            late_ns: AtomicU64::new(0),
            gap_ns: AtomicU64::new(0),
            last_deadline_ns: AtomicU64::new(0),
        })
    }

    /// The lead the next wait will take, ns.
    pub fn lead_ns(&self) -> u64 {
        self.lead_ns.load(Relaxed)
    }

    /// Folds a new deadline's gap and a wake-up's lateness into the moving means (weight
    /// 1/8), and sets the lead from them.
    fn learn(&self, deadline_ns: Option<u64>, late_ns: Option<u64>) {
        if !self.adaptive {
            return;
        }
        let mean = |cell: &AtomicU64, x: u64| {
            let m = cell.load(Relaxed);
            let next = if m == 0 { x } else { m - m / 8 + x / 8 };
            cell.store(next, Relaxed);
        };
        if let Some(d) = deadline_ns {
            let last = self.last_deadline_ns.swap(d, Relaxed);
            if last != 0 && d > last {
                mean(&self.gap_ns, d - last);
            }
        }
        if let Some(l) = late_ns {
            mean(&self.late_ns, l.min(10 * Self::MAX_LEAD_NS));
        }
        let gap = self.gap_ns.load(Relaxed);
        let cap = (gap / 50).clamp(self.min_lead_ns, Self::MAX_LEAD_NS);
        let lead = (2 * self.late_ns.load(Relaxed)).clamp(self.min_lead_ns, cap);
        self.lead_ns.store(lead, Relaxed);
    }

    /// Completes at `deadline_ns` (CLOCK_MONOTONIC, [`crate::time::mono_ns`]) and returns
    /// when it was first seen passed; None, at once, when it had passed already. Never
    /// early: the wait ends only once the clock reads the deadline. Dropping the future leaves
    /// the timer armed, and the next call re-arms it.
    pub async fn until(&self, deadline_ns: u64) -> std::io::Result<Option<u64>> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        self.learn(Some(deadline_ns), None);
        if deadline_ns <= crate::time::mono_ns() {
            return Ok(None);
        }
        let wake_ns = deadline_ns.saturating_sub(self.lead_ns());
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
                    let woke_ns = crate::time::mono_ns();
                    // A wake-up that came before its time was not armed by this wait.
                    if woke_ns >= wake_ns {
                        self.learn(None, Some(woke_ns - wake_ns));
                    }
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

    /// The lead follows the wake-ups: twice their moving mean where the gaps between
    /// deadlines leave room (a fiftieth of them), the floor where they do not, and nothing
    /// for a timer given a fixed lead.
    #[tokio::test(flavor = "current_thread")]
    async fn the_lead_follows_the_wake_ups_within_its_budget() {
        let t = LoopTimer::new().unwrap();
        assert_eq!(t.lead_ns(), LoopTimer::LEAD_NS);
        // 100 sends a second, wake-ups 100 us late: a lead of 200 us (of 200 allowed).
        for i in 1..=100u64 {
            t.learn(Some(i * 10_000_000), Some(100_000));
        }
        assert_eq!(t.lead_ns(), 200_000);
        // Wake-ups 150 us late at 10 ms gaps: the lead is capped at 200 us.
        for i in 101..=200u64 {
            t.learn(Some(i * 10_000_000), Some(150_000));
        }
        assert_eq!(t.lead_ns(), 200_000);
        // 2,500 sends a second (400 us gaps): the budget is 8 us, under the floor.
        let mut at = 200 * 10_000_000;
        for _ in 0..200 {
            at += 400_000;
            t.learn(Some(at), Some(150_000));
        }
        assert_eq!(t.lead_ns(), LoopTimer::LEAD_NS);
        let fixed = LoopTimer::with_lead(0).unwrap();
        for i in 1..=100u64 {
            fixed.learn(Some(i * 10_000_000), Some(100_000));
        }
        assert_eq!(fixed.lead_ns(), 0);
    }

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

    /// A pacer outlives the runtime its driver ran on: the next runtime's first sleeper
    /// starts a driver there. A sleeper dropped before its deadline leaves nothing that
    /// holds up the others.
    #[test]
    fn the_pacer_starts_a_driver_on_each_runtime_it_sleeps_on() {
        let pacer = Pacer::new();
        for _ in 0..2 {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let far = pacer.sleep_until(Instant::now() + Duration::from_secs(3600));
                assert!(
                    tokio::time::timeout(Duration::from_millis(5), far)
                        .await
                        .is_err()
                );
                let deadline = Instant::now() + Duration::from_micros(300);
                // A guard against a hang only: the sleep is due in 300 us.
                tokio::time::timeout(Duration::from_secs(30), pacer.sleep_until(deadline))
                    .await
                    .expect("the sleeper was woken");
                assert!(Instant::now() >= deadline);
            });
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn never_fires_early() {
        // How late it fires depends on the machine's load and is measured by
        // `cargo run --release -p heisenbench-live --example timer` (bench/RESULTS.md);
        // never early holds under any load. Deadlines out of order, and some equal.
        let timer = Pacer::new();
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
