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

/// Makes the first SIGINT or SIGTERM throw `stop` (saying so on stderr if `announce`) and
/// the second exit the process with status 130. One listener thread serves the whole
/// process, started by the first call; each call adds its switch (a switch already thrown
/// is dropped at the next signal).
pub fn listen_for_signals(stop: StopSignal, announce: bool) -> std::io::Result<()> {
    use std::sync::{Mutex, OnceLock};
    static WATCHED: OnceLock<Mutex<Vec<(StopSignal, bool)>>> = OnceLock::new();
    static STARTED: OnceLock<std::io::Result<()>> = OnceLock::new();
    WATCHED
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((stop, announce));
    let started = STARTED.get_or_init(|| {
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
                    loop {
                        tokio::select! {
                            _ = int.recv() => {}
                            _ = term.recv() => {}
                        }
                        let mut watched = WATCHED
                            .get_or_init(|| Mutex::new(Vec::new()))
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let running: Vec<_> =
                            watched.iter().filter(|(s, _)| !s.is_stopped()).cloned().collect();
                        if running.is_empty() {
                            // Nothing left to stop gracefully: this is the second signal.
                            std::process::exit(130);
                        }
                        for (s, announce) in &running {
                            if *announce {
                                eprintln!(
                                    "heisenbench: stopping: no new requests, {} s for those in flight, then the report (again to quit at once)",
                                    GRACE.as_secs()
                                );
                            }
                            s.stop();
                        }
                        *watched = running;
                    }
                })
            })?;
        Ok(())
    });
    match started {
        Ok(()) => Ok(()),
        Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
    }
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
