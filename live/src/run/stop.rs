//! Stopping a run early without losing what it measured.
//!
//! A [`StopSignal`] is shared by whoever may stop a run (Ctrl-C, SIGTERM, a test) and the
//! shards that must obey. On the first stop a shard sends nothing more (the rest of its
//! slice counts as not sent), gives the requests in flight [`GRACE`] to finish, then cuts
//! them off (they count as `cancelled`) and reports. [`listen_for_signals`] makes SIGINT
//! and SIGTERM the first stop, and a second one exit at once with status 130.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long requests in flight may go on after a stop.
pub const GRACE: Duration = Duration::from_secs(2);

/// A one-way switch from running to stopping, cheap to clone and to share across threads
/// and runtimes.
#[derive(Debug, Clone)]
pub struct StopSignal {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for StopSignal {
    fn default() -> Self {
        Self::new()
    }
}

impl StopSignal {
    /// A switch that has not been thrown.
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::channel(false).0),
        }
    }

    /// Throws the switch (again is harmless).
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the switch has been thrown.
    pub fn is_stopped(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once the switch is thrown (at once if it already is).
    pub async fn stopped(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Starts a thread that throws `stop` on the first SIGINT or SIGTERM (saying so on stderr
/// if `announce`) and exits the process with status 130 on the second.
pub fn listen_for_signals(stop: StopSignal, announce: bool) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Register before returning, so a signal that comes right after is not missed.
    let (mut int, mut term) = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("heisenbench-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                for n in 0.. {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                    if n == 0 {
                        if announce {
                            eprintln!(
                            "heisenbench: stopping: no new requests, {} s for those in flight, then the report (again to quit at once)",
                            GRACE.as_secs()
                            );
                        }
                        stop.stop();
                    } else {
                        std::process::exit(130);
                    }
                }
            })
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reaches_every_clone_and_waiter() {
        let s = StopSignal::new();
        let c = s.clone();
        assert!(!c.is_stopped());
        let waiter = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(c.stopped());
            c.is_stopped()
        });
        s.stop();
        assert!(waiter.join().unwrap());
        // Waiting after the fact returns at once.
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(s.stopped());
    }
}
