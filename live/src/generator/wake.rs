//! When the schedule's next send is due, and the two ways the shard learns it: the kernel
//! wakes the thread through the schedule's timerfd ([`LoopTimer`]), or a chunk handler of a
//! busy loop sees the due time pass first and wakes the schedule itself. One protocol, in
//! one place: the schedule waits in [`ScheduleWake::until_due`], marks each wake-up
//! ([`ScheduleWake::woken`]) and each send's start ([`ScheduleWake::started`]); chunk
//! handlers ask [`ScheduleWake::send_due`] before each read's events and step aside when
//! it holds.

use std::cell::Cell;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::time::mono_ns;
use crate::time::timer::LoopTimer;

/// The schedule's wake-up state (one shard, one thread: plain cells).
pub(super) struct ScheduleWake {
    /// The kernel wakes this thread at the next send's due time.
    timer: LoopTimer,
    /// An `Instant` and the CLOCK_MONOTONIC time read with it, to convert between them.
    base: (Instant, u64),
    /// When the schedule's next request is due (CLOCK_MONOTONIC ns; MAX: none waiting).
    next_due_ns: Cell<u64>,
    /// Scheduled requests woken but not yet at their send.
    unstarted: Cell<u32>,
    /// Wakes the schedule when a chunk handler sees the next send due before the loop
    /// gets to the timer's wake-up (a busy loop looks at its epoll only between rounds).
    due_now: Notify,
    /// When a chunk handler first saw the pending send due (0: not yet).
    noticed_ns: Cell<u64>,
}

impl ScheduleWake {
    /// Nothing due yet.
    pub(super) fn new() -> std::io::Result<Self> {
        Ok(Self {
            timer: LoopTimer::new()?,
            base: (Instant::now(), mono_ns()),
            next_due_ns: Cell::new(u64::MAX),
            unstarted: Cell::new(0),
            due_now: Notify::new(),
            noticed_ns: Cell::new(0),
        })
    }

    /// The schedule woke for its send: none is due until it asks again, and one more is
    /// on its way to its send.
    pub(super) fn woken(&self) {
        self.next_due_ns.set(u64::MAX);
        self.unstarted.set(self.unstarted.get() + 1);
    }

    /// The schedule stopped waiting: nothing is due.
    pub(super) fn none_due(&self) {
        self.next_due_ns.set(u64::MAX);
    }

    /// A woken send reached its start.
    pub(super) fn started(&self) {
        self.unstarted.set(self.unstarted.get().saturating_sub(1));
    }

    /// Whether a send is due at `now` (or woken and waiting for its task to run). The
    /// shard's loop runs ready tasks in turn, a batch of dozens per round, and a task
    /// handling a response's chunks takes tens of microseconds; a due send would wait
    /// behind all of them. So chunk handlers step aside (once per read) while this holds.
    pub(super) fn send_due(&self, now: u64) -> bool {
        self.unstarted.get() > 0 || now >= self.next_due_ns.get()
    }

    /// Called by a chunk handler about to step aside: if the schedule's next send is due by
    /// `now`, wake the schedule without waiting for the loop's next look at its timer.
    pub(super) fn wake_schedule_if_due(&self, now: u64) {
        if now >= self.next_due_ns.get() {
            if self.noticed_ns.get() == 0 {
                self.noticed_ns.set(now);
            }
            self.due_now.notify_one();
        }
    }

    /// Completes when the send due at `due_ns` may go: the timer's wake-up was seen, or a
    /// chunk handler saw it due first. Returns when it was first known due (None: it had
    /// passed when the schedule got to it).
    pub(super) async fn until_due(&self, due_ns: u64) -> Option<u64> {
        self.noticed_ns.set(0);
        self.next_due_ns.set(due_ns);
        let timer = async {
            match self.timer.until(due_ns).await {
                Ok(seen) => seen,
                // The timer could not be armed: tokio's millisecond timer is late, never
                // early.
                Err(_) => {
                    tokio::time::sleep_until(self.instant_of(due_ns).into()).await;
                    None
                }
            }
        };
        tokio::pin!(timer);
        loop {
            tokio::select! {
                biased;
                fired = &mut timer => {
                    let noticed = self.noticed_ns.get();
                    return match fired {
                        Some(f) if noticed != 0 => Some(f.min(noticed)),
                        other => other,
                    };
                }
                () = self.due_now.notified() => {
                    // A wake-up left over from an earlier send is no reason to go early.
                    let noticed = self.noticed_ns.get();
                    if noticed != 0 && noticed >= due_ns {
                        return Some(noticed);
                    }
                }
            }
        }
    }

    /// The Instant of a CLOCK_MONOTONIC time.
    fn instant_of(&self, mono: u64) -> Instant {
        self.base.0 + Duration::from_nanos(mono.saturating_sub(self.base.1))
    }
}
