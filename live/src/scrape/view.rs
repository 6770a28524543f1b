//! Scrapes turned into what a report shows: the server's quantities window by window on
//! the run's clock, its totals over the measured part of the run, and the split of the
//! client's TTFT into the client's part, the server's queue, its prefill and the rest.
//!
//! **The split.** A request's TTFT from its intended send is its send lag (the client's own
//! queue: the generator was late) plus its TTFT from the actual send. The server states,
//! for the same requests, how long they waited to be scheduled (the queue) and how long
//! from scheduling to the first token (the prefill). What is left is the wire both ways,
//! the server's front end (parsing, tokenizing) and framing. Means add, so the split is of
//! means: the client's mean TTFT over a span against the server's histogram deltas over it
//! (sum over count). Quantiles do not add and are shown beside it, not split.
//!
//! Where an engine lacks a histogram the split says how it was had instead: the prefill
//! as the server's TTFT less its queue; the queue by Little's law (the waiting gauge's mean
//! over the client's completion rate); llama.cpp's prefill as its prompt-processing seconds
//! over the client's completions.
//!
//! Windows are one second of the run's clock. The client's side of a window is the
//! requests whose first token arrived in it, the moment the server's TTFT and prefill
//! histograms observe them (its queue histogram a prefill earlier); the server's side is
//! what its counters gained in it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::engines::{Buckets, Quantity, Value};
use super::{Scrapes, TargetScrapes};
use crate::generator::series::{MAX_WINDOWS, Series, WINDOW_NS};

/// The server's side of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    /// Each endpoint scraped.
    pub targets: Vec<TargetReport>,
    /// The interval between scrapes, seconds.
    pub interval_s: f64,
    /// What scraping cost this process.
    pub cost: ScrapeCost,
    /// Over the measured part of the run.
    pub totals: Totals,
    /// Second by second on the run's clock.
    pub windows: Vec<ServerPoint>,
    /// TTFT split between the client and the server (None: the server states neither its
    /// queue nor its prefill).
    pub attribution: Option<Attribution>,
}

/// One endpoint: what it answered and what was found in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// The endpoint (credentials redacted).
    pub url: String,
    /// The engine whose names were found.
    pub engine: Option<String>,
    /// Each quantity found and the family it was read from.
    pub found: BTreeMap<Quantity, String>,
    /// Families outside the vocabulary, with their last value (summed over label sets;
    /// a histogram's by its count).
    pub raw: BTreeMap<String, f64>,
    /// Scrapes that answered.
    pub scrapes: u64,
    /// Scrapes that failed.
    pub failures: u64,
    /// The last failure's reason.
    pub last_error: Option<String>,
    /// Snapshots were thinned to stay bounded (a long run at a short interval).
    pub thinned: bool,
}

/// The scrape's own cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScrapeCost {
    /// The scraper thread's CPU, seconds.
    pub cpu_s: f64,
    /// One scrape's mean wall time (request to parsed snapshot), seconds.
    pub mean_scrape_s: f64,
}

/// A histogram's summary over a span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistSummary {
    /// Observations.
    pub count: f64,
    /// Their mean, seconds.
    pub mean_s: f64,
    /// Median, from the buckets (linear within one).
    pub p50_s: Option<f64>,
    /// 99th percentile, from the buckets.
    pub p99_s: Option<f64>,
}

impl HistSummary {
    fn of(b: &Buckets) -> Option<HistSummary> {
        Some(HistSummary {
            count: b.count,
            mean_s: b.mean()?,
            p50_s: b.quantile(0.5),
            p99_s: b.quantile(0.99),
        })
    }
}

/// The server's totals over the measured part of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Histograms (TTFT, queue, prefill, decode, E2E, ITL) over the span.
    pub histograms: BTreeMap<Quantity, HistSummary>,
    /// Counters' gains over the span.
    pub counters: BTreeMap<Quantity, f64>,
    /// Gauges' mean over the span's scrapes.
    pub gauges_mean: BTreeMap<Quantity, f64>,
    /// Gauges' largest value seen.
    pub gauges_max: BTreeMap<Quantity, f64>,
    /// Prefix-cache hits over queries in the span (tokens).
    pub prefix_hit_rate: Option<f64>,
}

/// One window of the server's side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerPoint {
    /// The window's start, seconds after the run's.
    pub t_s: f64,
    /// Gauges' mean over the window's scrapes.
    pub gauges: BTreeMap<Quantity, f64>,
    /// Counters' gain in the window, per second.
    pub rates: BTreeMap<Quantity, f64>,
    /// Histograms' mean over the observations made in the window, seconds.
    pub means_s: BTreeMap<Quantity, f64>,
}

/// The client's TTFT split into its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// Mean TTFT from the intended send over the measured span, seconds.
    pub ttft_mean_s: f64,
    /// The parts, adding up to it.
    pub parts: Vec<Part>,
    /// Window by window (the parts' means in each).
    pub windows: Vec<SplitPoint>,
    /// In words.
    pub verdict: String,
}

/// One part of TTFT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// `client`, `queue`, `prefill` or `rest`.
    pub name: String,
    /// Its mean, seconds.
    pub mean_s: f64,
    /// Its share of the mean TTFT.
    pub share: f64,
    /// How it was had.
    pub how: String,
}

/// The split in one window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitPoint {
    /// The window's start, seconds after the run's.
    pub t_s: f64,
    /// Mean TTFT from the intended send of the requests whose first token arrived in it.
    pub ttft_mean_s: f64,
    /// Their mean send lag (the client's part).
    pub client_s: f64,
    /// The server's mean queue time in it.
    pub queue_s: Option<f64>,
    /// The server's mean prefill in it.
    pub prefill_s: Option<f64>,
    /// What is left.
    pub rest_s: f64,
}

/// The client's side of a span: its completed requests' mean TTFT from the intended send
/// and their mean send lag, and how many completed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientSide {
    /// Mean TTFT from the intended send, seconds.
    pub ttft_mean_s: f64,
    /// Mean send lag of the same requests, seconds.
    pub send_lag_mean_s: f64,
    /// Requests completed in the span.
    pub completed: f64,
    /// The span's length, seconds.
    pub span_s: f64,
}

/// A part's mean, seconds, and how it was had.
type Estimate = (f64, String);

/// What the server's counters, histograms and gauges did over a span.
#[derive(Debug, Clone, Default)]
struct Span {
    hists: BTreeMap<Quantity, Buckets>,
    counters: BTreeMap<Quantity, f64>,
    gauges_mean: BTreeMap<Quantity, f64>,
    gauges_max: BTreeMap<Quantity, f64>,
}

impl Span {
    /// Over `(from, to]` nanoseconds of the run's clock in one target's snapshots.
    fn of(t: &TargetScrapes, from: i64, to: i64) -> Option<Span> {
        let s = &t.snapshots;
        let end = s.partition_point(|(at, _)| *at <= to).checked_sub(1)?;
        let start = s.partition_point(|(at, _)| *at <= from).checked_sub(1);
        let mut span = Span::default();
        let (last, first) = (&s[end].1, start.map(|i| &s[i].1));
        for (q, v) in &last.values {
            match v {
                Value::Histogram(b) => {
                    let d = match first.and_then(|f| f.values.get(q)) {
                        Some(Value::Histogram(a)) => b.since(a),
                        _ => b.clone(),
                    };
                    span.hists.insert(*q, d);
                }
                Value::Scalar(x) if !q.is_gauge() => {
                    let before = match first.and_then(|f| f.values.get(q)) {
                        Some(Value::Scalar(a)) if a <= x => *a,
                        _ => 0.0,
                    };
                    span.counters.insert(*q, x - before);
                }
                Value::Scalar(_) => {}
            }
        }
        let lo = start.map_or(0, |i| i + 1);
        let mut n: BTreeMap<Quantity, f64> = BTreeMap::new();
        for (_, snap) in &s[lo..=end] {
            for (q, v) in &snap.values {
                if let (true, Value::Scalar(x)) = (q.is_gauge(), v) {
                    *span.gauges_mean.entry(*q).or_default() += x;
                    *n.entry(*q).or_default() += 1.0;
                    let m = span.gauges_max.entry(*q).or_insert(*x);
                    *m = m.max(*x);
                }
            }
        }
        for (q, total) in span.gauges_mean.iter_mut() {
            *total /= n[q];
        }
        Some(span)
    }

    /// Adds another target's span (a second server behind the same run).
    fn add(&mut self, o: Span) {
        for (q, b) in o.hists {
            self.hists.entry(q).or_default().add(&b);
        }
        for (q, x) in o.counters {
            *self.counters.entry(q).or_default() += x;
        }
        for (q, x) in o.gauges_mean {
            // Counts of requests add across servers; a usage fraction is their mean.
            let e = self.gauges_mean.entry(q).or_insert(0.0);
            *e = if q == Quantity::KvCacheUsage {
                e.max(x)
            } else {
                *e + x
            };
        }
        for (q, x) in o.gauges_max {
            let e = self.gauges_max.entry(q).or_insert(0.0);
            *e = if q == Quantity::KvCacheUsage {
                e.max(x)
            } else {
                *e + x
            };
        }
    }

    fn mean(&self, q: Quantity) -> Option<f64> {
        self.hists.get(&q).and_then(Buckets::mean)
    }

    /// The queue and prefill means over this span and how each was had.
    fn split(&self, client: &ClientSide) -> (Option<Estimate>, Option<Estimate>) {
        let queue = self
            .mean(Quantity::Queue)
            .map(|m| (m, "the server's queue-time histogram".to_string()))
            .or_else(|| {
                let waiting = *self.gauges_mean.get(&Quantity::Waiting)?;
                (client.completed > 0.0).then(|| {
                    (
                        waiting * client.span_s / client.completed,
                        "Little's law: the waiting gauge's mean over the completion rate"
                            .to_string(),
                    )
                })
            });
        let prefill = self
            .mean(Quantity::Prefill)
            .map(|m| (m, "the server's prefill-time histogram".to_string()))
            .or_else(|| {
                let ttft = self.mean(Quantity::Ttft)?;
                let (q, _) = queue.as_ref()?;
                Some((ttft - q, "the server's TTFT less its queue".to_string()))
            })
            .or_else(|| {
                let busy = *self.counters.get(&Quantity::PrefillBusySeconds)?;
                (client.completed > 0.0).then(|| {
                    (
                        busy / client.completed,
                        "prompt-processing seconds over the completions".to_string(),
                    )
                })
            });
        (queue, prefill)
    }
}

fn span_all(scrapes: &Scrapes, from: i64, to: i64) -> Option<Span> {
    let mut out: Option<Span> = None;
    for t in &scrapes.targets {
        if let Some(s) = Span::of(t, from, to) {
            match &mut out {
                Some(o) => o.add(s),
                None => out = Some(s),
            }
        }
    }
    out
}

/// The server's side of a run: `scrapes` against the client's `series` and its measured
/// span (`from_ns` and `to_ns` after the start) with the client's totals over it.
pub fn view(
    scrapes: &Scrapes,
    series: &Series,
    from_ns: u64,
    to_ns: u64,
    client: ClientSide,
) -> ServerView {
    let targets = scrapes
        .targets
        .iter()
        .map(|t| {
            let last = t.snapshots.last().map(|(_, s)| s);
            TargetReport {
                url: t.url.clone(),
                engine: last.and_then(|s| s.engine).map(|e| e.name().to_string()),
                found: last
                    .map(|s| {
                        s.sources
                            .iter()
                            .map(|(q, f)| (*q, (*f).to_string()))
                            .collect()
                    })
                    .unwrap_or_default(),
                raw: last.map(|s| s.raw.clone()).unwrap_or_default(),
                scrapes: t.snapshots.len() as u64,
                failures: t.failures,
                last_error: t.last_error.clone(),
                thinned: t.thinned,
            }
        })
        .collect();
    let answered: u64 = scrapes
        .targets
        .iter()
        .map(|t| t.snapshots.len() as u64 + t.failures)
        .sum();
    let busy: u64 = scrapes.targets.iter().map(|t| t.busy_ns).sum();
    let cost = ScrapeCost {
        cpu_s: scrapes.cpu_ns as f64 * 1e-9,
        mean_scrape_s: if answered == 0 {
            0.0
        } else {
            busy as f64 * 1e-9 / answered as f64
        },
    };
    // The whole measured span ends with the last scrape (after every shard reported).
    let total = span_all(scrapes, from_ns as i64, i64::MAX).unwrap_or_default();
    let totals = Totals {
        histograms: total
            .hists
            .iter()
            .filter_map(|(q, b)| HistSummary::of(b).map(|s| (*q, s)))
            .collect(),
        counters: total.counters.clone(),
        gauges_mean: total.gauges_mean.clone(),
        gauges_max: total.gauges_max.clone(),
        prefix_hit_rate: match (
            total.counters.get(&Quantity::PrefixHits),
            total.counters.get(&Quantity::PrefixQueries),
        ) {
            (Some(h), Some(q)) if *q > 0.0 => Some(h / q),
            _ => None,
        },
    };
    let last_at = scrapes
        .targets
        .iter()
        .filter_map(|t| t.snapshots.last().map(|(at, _)| *at))
        .max()
        .unwrap_or(0)
        .max(0) as u64;
    let n_windows = (series.windows.len())
        .max(to_ns.max(last_at).div_ceil(WINDOW_NS) as usize)
        .min(MAX_WINDOWS);
    let mut windows = Vec::new();
    let mut splits = Vec::new();
    for i in 0..n_windows {
        let (a, b) = (
            i as i64 * WINDOW_NS as i64,
            (i as i64 + 1) * WINDOW_NS as i64,
        );
        let Some(span) = span_all(scrapes, a, b) else {
            continue;
        };
        let secs = WINDOW_NS as f64 * 1e-9;
        windows.push(ServerPoint {
            t_s: i as f64,
            gauges: span.gauges_mean.clone(),
            rates: span.counters.iter().map(|(q, x)| (*q, x / secs)).collect(),
            means_s: span
                .hists
                .iter()
                .filter_map(|(q, h)| h.mean().map(|m| (*q, m)))
                .collect(),
        });
        if let Some(w) = series.windows.get(i)
            && w.first_tokens > 0
        {
            let n = w.first_tokens as f64;
            let c = ClientSide {
                ttft_mean_s: w.ttft_sum_ns as f64 * 1e-9 / n,
                send_lag_mean_s: w.ttft_send_lag_sum_ns as f64 * 1e-9 / n,
                completed: w.completed as f64,
                span_s: secs,
            };
            let (queue, prefill) = span.split(&c);
            let (q, p) = (queue.map(|x| x.0), prefill.map(|x| x.0));
            splits.push(SplitPoint {
                t_s: i as f64,
                ttft_mean_s: c.ttft_mean_s,
                client_s: c.send_lag_mean_s,
                queue_s: q,
                prefill_s: p,
                rest_s: c.ttft_mean_s - c.send_lag_mean_s - q.unwrap_or(0.0) - p.unwrap_or(0.0),
            });
        }
    }
    let (queue, prefill) = total.split(&client);
    let attribution = (queue.is_some() || prefill.is_some()).then(|| {
        let t = client.ttft_mean_s;
        let share = |x: f64| if t > 0.0 { x / t } else { 0.0 };
        let mut parts = vec![Part {
            name: "client".into(),
            mean_s: client.send_lag_mean_s,
            share: share(client.send_lag_mean_s),
            how: "the send lag: actual minus intended send".into(),
        }];
        let mut rest = t - client.send_lag_mean_s;
        for (name, x) in [("queue", &queue), ("prefill", &prefill)] {
            if let Some((m, how)) = x {
                rest -= m;
                parts.push(Part {
                    name: name.into(),
                    mean_s: *m,
                    share: share(*m),
                    how: how.clone(),
                });
            }
        }
        parts.push(Part {
            name: "rest".into(),
            mean_s: rest,
            share: share(rest),
            how: "what is left: the wire both ways, the server's front end, framing".into(),
        });
        let verdict = verdict(t, &parts, series, from_ns);
        Attribution {
            ttft_mean_s: t,
            parts,
            windows: splits,
            verdict,
        }
    });
    ServerView {
        targets,
        interval_s: scrapes.interval.as_secs_f64(),
        cost,
        totals,
        windows,
        attribution,
    }
}

/// The split in words, led by how TTFT moved over the run when it moved.
fn verdict(ttft: f64, parts: &[Part], series: &Series, from_ns: u64) -> String {
    let label = |name: &str| match name {
        "client" => "the client's send lag",
        "queue" => "the server's queue",
        "prefill" => "the server's prefill",
        _ => "the wire and the rest",
    };
    let mut by_share: Vec<&Part> = parts.iter().collect();
    by_share.sort_by(|a, b| b.share.total_cmp(&a.share));
    let listed: Vec<String> = by_share
        .iter()
        .map(|p| format!("{:.0} % {}", p.share * 100.0, label(&p.name)))
        .collect();
    // The median TTFT of the first and last few measured windows.
    let p50s: Vec<f64> = series
        .windows
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as u64 * WINDOW_NS >= from_ns / WINDOW_NS * WINDOW_NS)
        .filter_map(|(_, w)| w.ttft.quantile(0.5))
        .collect();
    let k = (p50s.len() / 4).max(1);
    let trend = if p50s.len() >= 4 {
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        let (a, b) = (mean(&p50s[..k]), mean(&p50s[p50s.len() - k..]));
        (b > 2.0 * a && b > a + 1e6).then(|| {
            format!(
                "TTFT p50 rose from {} to {} over the run; ",
                ms(a * 1e-9),
                ms(b * 1e-9)
            )
        })
    } else {
        None
    };
    format!(
        "{}TTFT from the intended send, mean {}: {}",
        trend.unwrap_or_default(),
        ms(ttft),
        listed.join(", ")
    )
}

fn ms(s: f64) -> String {
    if s.abs() >= 0.1 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::engines::Snapshot;

    fn snap(queue_sum: f64, queue_n: f64, waiting: f64) -> Snapshot {
        let mut s = Snapshot::default();
        s.values.insert(
            Quantity::Queue,
            Value::Histogram(Buckets {
                bounds: vec![1.0, f64::INFINITY],
                cumulative: vec![queue_n, queue_n],
                sum: queue_sum,
                count: queue_n,
            }),
        );
        s.values.insert(Quantity::Waiting, Value::Scalar(waiting));
        s
    }

    /// Window deltas are differences of the cumulative values, gauges are window means,
    /// and the split's parts add up to the client's mean TTFT.
    #[test]
    fn windows_are_deltas_and_the_parts_add_up() {
        let t = TargetScrapes {
            url: "u".into(),
            snapshots: vec![
                (-1, snap(0.0, 0.0, 0.0)),
                (500_000_000, snap(1.0, 10.0, 4.0)),
                (1_000_000_000, snap(2.0, 20.0, 6.0)),
                (1_500_000_000, snap(5.0, 30.0, 1.0)),
            ],
            ..Default::default()
        };
        let scrapes = Scrapes {
            targets: vec![t],
            interval: std::time::Duration::from_millis(500),
            cpu_ns: 0,
        };
        let mut series = Series::default();
        for _ in 0..4 {
            let w = series.at(0);
            w.ttft.record(400_000_000);
            w.first_tokens += 1;
            w.ttft_sum_ns += 400_000_000;
            w.ttft_send_lag_sum_ns += 100_000_000;
        }
        let client = ClientSide {
            ttft_mean_s: 0.4,
            send_lag_mean_s: 0.1,
            completed: 30.0,
            span_s: 1.5,
        };
        let v = view(&scrapes, &series, 0, 1_500_000_000, client);
        assert_eq!(v.windows.len(), 2);
        assert_eq!(v.windows[0].means_s[&Quantity::Queue], 0.1);
        assert_eq!(v.windows[0].gauges[&Quantity::Waiting], 5.0);
        assert!((v.windows[1].means_s[&Quantity::Queue] - 0.3).abs() < 1e-12);
        let a = v.attribution.unwrap();
        let sum: f64 = a.parts.iter().map(|p| p.mean_s).sum();
        assert!((sum - 0.4).abs() < 1e-12);
        let queue = a.parts.iter().find(|p| p.name == "queue").unwrap();
        assert!((queue.mean_s - 5.0 / 30.0).abs() < 1e-12);
        assert_eq!(a.windows[0].client_s, 0.1);
        assert!(a.verdict.contains("mean 400 ms"), "{}", a.verdict);
    }

    /// Without a queue histogram the queue comes from Little's law: L = 2 waiting on
    /// average at 10 completions/s is 0.2 s each.
    #[test]
    fn littles_law_stands_in_for_a_missing_queue_histogram() {
        let mut a = Snapshot::default();
        a.values.insert(Quantity::Waiting, Value::Scalar(2.0));
        let t = TargetScrapes {
            snapshots: vec![(-1, a.clone()), (1_000_000_000, a)],
            ..Default::default()
        };
        let span = Span::of(&t, 0, 2_000_000_000).unwrap();
        let c = ClientSide {
            ttft_mean_s: 1.0,
            send_lag_mean_s: 0.0,
            completed: 10.0,
            span_s: 1.0,
        };
        let (q, p) = span.split(&c);
        let (q, how) = q.unwrap();
        assert!((q - 0.2).abs() < 1e-12 && how.contains("Little"));
        assert!(p.is_none());
    }
}
