//! The server's side of a run: its Prometheus endpoint read on the run's clock.
//!
//! A scraper is one thread with its own single-threaded runtime, apart from the shards:
//! it reads each target once before the run starts (the baseline), then at every tick of
//! its interval counted from the run's time zero, until the run ends, and once more after
//! the last shard has reported. Each answer is stamped when it arrived, on the run's clock,
//! parsed ([`exposition`]) and reduced to the engines' shared vocabulary ([`engines`]);
//! [`view`] turns the snapshots into per-window series, run totals and the split of TTFT
//! between the client and the server.
//!
//! A body is read up to [`MAX_EXPOSITION_BYTES`]; a longer one, an error status, a timeout
//! (the interval, at least a second) or text that does not parse counts as a failed scrape
//! with its reason, and the run goes on.

pub mod engines;
pub mod exposition;
pub mod view;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use engines::Snapshot;

use crate::net::client::{Server, authorization, client, error_chain, redact_url};
use crate::time::mono_ns;

/// The largest exposition read (vLLM's is about 100 kB with a few models).
pub const MAX_EXPOSITION_BYTES: usize = 16 << 20;

/// Snapshots kept per target; past it every other one is dropped (the span is kept, the
/// resolution halved), so a long run at a short interval stays bounded.
pub const MAX_SNAPSHOTS: usize = 50_000;

/// The scraper thread's nice value: it yields the cores to the shards.
const SCRAPER_NICE: i32 = 10;

/// The shortest interval between scrapes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// What to scrape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Targets {
    /// The `--url`'s `/metrics` when it answers with an exposition; nothing otherwise.
    Auto,
    /// Nothing.
    Off,
    /// These endpoints (every one is reported, answering or not).
    Urls(Vec<String>),
}

/// One target's scrapes.
#[derive(Debug, Clone, Default)]
pub struct TargetScrapes {
    /// The endpoint (credentials redacted).
    pub url: String,
    /// Snapshots and their arrival, nanoseconds from the run's start (negative: before).
    pub snapshots: Vec<(i64, Snapshot)>,
    /// Scrapes that failed.
    pub failures: u64,
    /// The last failure's reason.
    pub last_error: Option<String>,
    /// Whether snapshots were thinned to stay under [`MAX_SNAPSHOTS`].
    pub thinned: bool,
    /// Wall time of the scrapes, summed, nanoseconds.
    pub busy_ns: u64,
}

/// Every target's scrapes, and what they cost.
#[derive(Debug, Clone, Default)]
pub struct Scrapes {
    /// Per target, in the order given.
    pub targets: Vec<TargetScrapes>,
    /// The interval asked for.
    pub interval: Duration,
    /// The scraper thread's CPU time, nanoseconds.
    pub cpu_ns: u64,
}

/// An in-process server's exposition, rendered on the scraper's thread.
#[derive(Clone)]
pub struct InProcess(pub Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcess(..)")
    }
}

/// A running scraper.
#[derive(Debug)]
pub struct Scraper {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Scrapes>,
}

impl Scraper {
    /// Starts scraping `urls` (full endpoint URLs) every `interval` from `start_mono_ns`,
    /// with the TLS trust of `server`; the bearer token goes only to endpoints on the
    /// `server`'s own origin.
    pub fn start(
        server: Server<'_>,
        urls: Vec<String>,
        interval: Duration,
        start_mono_ns: u64,
    ) -> std::io::Result<Scraper> {
        let interval = interval.max(MIN_INTERVAL);
        let http = client(server).map_err(std::io::Error::other)?;
        let auth = authorization(server);
        let origin = origin(server.url).map(str::to_string);
        let labels = urls.iter().map(|u| redact_url(u)).collect();
        Self::spawn(labels, interval, move |stopped, out| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                for t in &mut out.targets {
                    t.last_error = Some("cannot start the scraper's runtime".into());
                }
                return;
            };
            let auths: Vec<Option<String>> = urls
                .iter()
                .map(|u| {
                    (origin.is_some() && origin.as_deref() == self::origin(u))
                        .then(|| auth.clone())
                        .flatten()
                })
                .collect();
            // Plain http:// goes through the shards' own HTTP/1.1 client (a scrape then
            // costs a parse and a few system calls); TLS and credentials through reqwest.
            let wires: Vec<Option<crate::net::http1::Wire>> = urls
                .iter()
                .zip(&auths)
                .map(|(u, a)| crate::net::http1::Wire::for_get(u, a.as_deref(), ACCEPT))
                .collect();
            let timeout = interval.max(Duration::from_secs(1));
            let scrape_all = |out: &mut Scrapes| {
                rt.block_on(async {
                    for (i, url) in urls.iter().enumerate() {
                        let t0 = mono_ns();
                        let got = match &wires[i] {
                            Some(w) => get_plain(w, timeout).await,
                            None => get(&http, url, auths[i].as_deref(), timeout).await,
                        };
                        // Stamped on arrival; the parse is the scraper's own time.
                        let t1 = mono_ns();
                        let parsed = got.and_then(|text| {
                            exposition::parse(&text).map_err(|e| format!("not an exposition: {e}"))
                        });
                        record(&mut out.targets[i], (t0, t1), start_mono_ns, parsed);
                    }
                });
            };
            ticks(stopped, start_mono_ns, interval, out, scrape_all);
        })
    }

    /// Reads an in-process server's exposition (`source`) on the same ticks as
    /// [`Scraper::start`] does an endpoint; `label` names it in the report.
    pub fn start_in_process(
        source: InProcess,
        label: String,
        interval: Duration,
        start_mono_ns: u64,
    ) -> std::io::Result<Scraper> {
        let interval = interval.max(MIN_INTERVAL);
        Self::spawn(vec![label], interval, move |stopped, out| {
            let scrape = |out: &mut Scrapes| {
                let t0 = mono_ns();
                let parsed =
                    exposition::parse(&(source.0)()).map_err(|e| format!("not an exposition: {e}"));
                record(&mut out.targets[0], (t0, mono_ns()), start_mono_ns, parsed);
            };
            ticks(stopped, start_mono_ns, interval, out, scrape);
        })
    }

    /// Runs `scrape` on the scraper's own thread, below the shards' priority, with the
    /// targets named by `labels`; the thread's CPU time is what the scrapes cost.
    fn spawn(
        labels: Vec<String>,
        interval: Duration,
        scrape: impl FnOnce(&AtomicBool, &mut Scrapes) + Send + 'static,
    ) -> std::io::Result<Scraper> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::Builder::new()
            .name("heisenbench-scrape".into())
            .spawn(move || {
                // Below the shards: a scrape waits for a core rather than take one from
                // a shard's loop (Linux's nice applies to a thread by its id).
                let _ = rustix::process::setpriority_process(
                    Some(rustix::thread::gettid()),
                    SCRAPER_NICE,
                );
                let mut out = Scrapes {
                    targets: labels
                        .into_iter()
                        .map(|url| TargetScrapes {
                            url,
                            ..Default::default()
                        })
                        .collect(),
                    interval,
                    cpu_ns: 0,
                };
                let cpu0 = crate::time::thread_cpu_ns();
                scrape(&stopped, &mut out);
                out.cpu_ns = crate::time::thread_cpu_ns().saturating_sub(cpu0);
                out
            })?;
        Ok(Scraper { stop, handle })
    }

    /// Stops (after one last scrape) and returns what was scraped.
    pub fn finish(self) -> Scrapes {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// The environment variable that, set to 1, keeps the scrape to the run's odd seconds.
pub const ODD_SECONDS_ONLY: &str = "HEISENBENCH_SCRAPE_ODD_SECONDS_ONLY";

/// Calls `scrape` once now (the baseline), at every tick of `interval` from
/// `start_mono_ns` until `stopped`, and once more at the end. Ticks missed by a slow scrape
/// are skipped, not made up; a stop is seen within 50 ms.
fn ticks(
    stopped: &AtomicBool,
    start_mono_ns: u64,
    interval: Duration,
    out: &mut Scrapes,
    mut scrape: impl FnMut(&mut Scrapes),
) {
    scrape(out);
    let step = interval.as_nanos() as u64;
    // A measurement knob (bench/scrape-interleaved.sh): scrape in the run's odd seconds
    // only, so one run holds windows with the scrape and windows without, side by side.
    let odd_seconds_only = std::env::var_os(ODD_SECONDS_ONLY).is_some_and(|v| v == "1");
    let mut k: u64 = 1;
    while !stopped.load(Ordering::Relaxed) {
        let due = start_mono_ns.saturating_add(k.saturating_mul(step));
        let now = mono_ns();
        if now < due {
            std::thread::sleep(Duration::from_nanos((due - now).min(50_000_000)));
            continue;
        }
        if odd_seconds_only && in_even_second(due - start_mono_ns) {
            k += 1;
            continue;
        }
        scrape(out);
        let after = mono_ns();
        k = (after.saturating_sub(start_mono_ns) / step + 1).max(k + 1);
    }
    scrape(out);
}

/// Whether `rel_ns` after the run's start falls in an even second (0, 2, 4, ...).
fn in_even_second(rel_ns: u64) -> bool {
    (rel_ns / 1_000_000_000).is_multiple_of(2)
}

/// One scrape of `target`, begun at `t0` and answered at `t1`: its time, and its snapshot
/// stamped at `t1` (on the run's clock, from `start_mono_ns`) or why there is none.
fn record(
    target: &mut TargetScrapes,
    (t0, t1): (u64, u64),
    start_mono_ns: u64,
    parsed: Result<exposition::Exposition, String>,
) {
    target.busy_ns += t1 - t0;
    match parsed {
        Ok(e) => push(target, t1 as i64 - start_mono_ns as i64, Snapshot::of(&e)),
        Err(reason) => {
            target.failures += 1;
            target.last_error = Some(reason);
        }
    }
}

fn push(t: &mut TargetScrapes, at: i64, s: Snapshot) {
    if t.snapshots.len() >= MAX_SNAPSHOTS {
        // Keep the first (the baseline) and every other one after it.
        let mut i = 0;
        t.snapshots.retain(|_| {
            i += 1;
            i == 1 || i % 2 == 0
        });
        t.thinned = true;
    }
    t.snapshots.push((at, s));
}

/// `scheme://host:port` of a URL.
fn origin(url: &str) -> Option<&str> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&url[..scheme_end + end])
}

/// The `/metrics` endpoint beside a server's base URL (`http://h:p/v1` -> `http://h:p/metrics`).
pub fn metrics_url(base: &str) -> String {
    crate::net::client::at_path(base, "/metrics")
}

/// What a scrape asks for: the text format (servers that also speak OpenMetrics or
/// protobuf answer with text then).
const ACCEPT: &str = "text/plain;version=0.0.4";

/// One GET over plain HTTP/1.1, as [`get`].
async fn get_plain(w: &crate::net::http1::Wire, timeout: Duration) -> Result<String, String> {
    let read = async {
        let mut resp = w.get().await.map_err(|e| e.to_string())?;
        if !(200..300).contains(&resp.status) {
            return Err(format!("HTTP {}", resp.status));
        }
        let mut body = Vec::new();
        while let Some(piece) = resp.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + piece.bytes.len() > MAX_EXPOSITION_BYTES {
                return Err(too_long());
            }
            body.extend_from_slice(piece.bytes);
        }
        String::from_utf8(body).map_err(|_| "the exposition is not UTF-8".to_string())
    };
    tokio::time::timeout(timeout, read).await.map_err(|_| {
        format!(
            "no whole answer within {}",
            heisenbench_model::units::format_seconds(timeout.as_secs_f64())
        )
    })?
}

fn too_long() -> String {
    format!(
        "the exposition is longer than {} MiB",
        MAX_EXPOSITION_BYTES >> 20
    )
}

/// One GET, its body read up to [`MAX_EXPOSITION_BYTES`] as UTF-8 text.
async fn get(
    http: &reqwest::Client,
    url: &str,
    auth: Option<&str>,
    timeout: Duration,
) -> Result<String, String> {
    let mut req = http.get(url).timeout(timeout).header("accept", ACCEPT);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let mut resp = req.send().await.map_err(|e| error_chain(&e))?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("HTTP {status}"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| error_chain(&e))? {
        if body.len() + chunk.len() > MAX_EXPOSITION_BYTES {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "the exposition is not UTF-8".to_string())
}

/// Whether `url` answers now with an exposition (one GET, 2 s at most): how `auto` decides.
pub fn answers(server: Server<'_>, url: &str) -> Result<(), String> {
    let http = client(server).map_err(|e| e.to_string())?;
    let auth = authorization(server);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let text = rt.block_on(get(&http, url, auth.as_deref(), Duration::from_secs(2)))?;
    let e = exposition::parse(&text).map_err(|e| format!("not an exposition: {e}"))?;
    if e.samples.is_empty() {
        return Err("an empty exposition".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement knob keeps the scrape to odd seconds: ticks in [0, 1) s, [2, 3) s
    /// are skipped, ticks in [1, 2) s are taken.
    #[test]
    fn odd_seconds_are_told_from_even_ones() {
        let s = 1_000_000_000;
        assert!(in_even_second(0) && in_even_second(s - 1) && in_even_second(2 * s));
        assert!(!in_even_second(s) && !in_even_second(2 * s - 1) && !in_even_second(3 * s));
    }

    #[test]
    fn the_metrics_endpoint_sits_beside_the_api() {
        assert_eq!(metrics_url("http://h:1/v1/"), "http://h:1/metrics");
        assert_eq!(metrics_url("http://h:1"), "http://h:1/metrics");
        assert_eq!(origin("https://a:2/x?y"), Some("https://a:2"));
        assert_eq!(origin("nope"), None);
    }

    #[test]
    fn thinning_keeps_the_baseline_and_halves_the_rest() {
        let mut t = TargetScrapes::default();
        for i in 0..MAX_SNAPSHOTS as i64 + 1 {
            push(&mut t, i, Snapshot::default());
        }
        assert!(t.thinned);
        assert_eq!(t.snapshots[0].0, 0);
        assert_eq!(t.snapshots.len(), MAX_SNAPSHOTS / 2 + 2);
        assert_eq!(t.snapshots.last().unwrap().0, MAX_SNAPSHOTS as i64);
    }
}
