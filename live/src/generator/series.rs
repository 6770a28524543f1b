//! A run second by second: what was offered, sent and finished in each one-second window
//! of the run's clock, mergeable across shards (every shard shares the run's start).
//!
//! Each count goes to the window of the moment it describes: a request is *offered* in
//! the window of its intended send, *sent* in that of its actual send, and *completed* or
//! *failed* in that of its end; a token in that of its chunk's arrival. Its TTFT and send
//! lag, both measured from the intended send, go to the window of the intended send, so a
//! window says what the users who asked then were served; their sums go to the window of
//! the first token's arrival, where a server's own histograms count the same requests. The in-flight count is
//! time-weighted: each request adds the part of its life (actual send to end) that falls in
//! the window.

use heisenbench_model::stats::LogHist;
use serde::{Deserialize, Serialize};

/// The width of a window, nanoseconds.
pub const WINDOW_NS: u64 = 1_000_000_000;

/// Windows a series holds at most (a day of them); anything later counts in the last, so a
/// stamp from a broken clock cannot allocate without bound.
pub const MAX_WINDOWS: usize = 86_400;

/// One window's counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Requests whose intended send fell in the window.
    pub offered: u64,
    /// Requests actually sent in it.
    pub sent: u64,
    /// Requests that completed in it.
    pub completed: u64,
    /// Requests that ended in it any other way (failed, timed out, cancelled).
    pub failed: u64,
    /// Output tokens that arrived in it (a chunk's tokens at its arrival; what the
    /// server's usage counted beyond the chunks, at the response's end).
    pub output_tokens: u64,
    /// Requests in flight, integrated over the window (request-nanoseconds).
    pub in_flight_ns: u64,
    /// TTFT from the intended send of the requests offered in it, nanoseconds.
    pub ttft: LogHist,
    /// Send lag of the requests offered in it, nanoseconds.
    pub send_lag: LogHist,
    /// Completed requests whose first token arrived in it (the moment a server's own
    /// TTFT histogram observes them too).
    #[serde(default)]
    pub first_tokens: u64,
    /// Their TTFTs from the intended send, summed (exact), nanoseconds.
    #[serde(default)]
    pub ttft_sum_ns: u64,
    /// Their send lags, summed, nanoseconds: the client's part of that sum.
    #[serde(default)]
    pub ttft_send_lag_sum_ns: u64,
}

/// A run's windows, from its start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Window `i` covers `[i, i + 1)` seconds after the run's start.
    pub windows: Vec<Window>,
}

impl Series {
    /// The window holding `rel_ns` (nanoseconds after the run's start), made if new.
    pub fn at(&mut self, rel_ns: u64) -> &mut Window {
        let i = ((rel_ns / WINDOW_NS) as usize).min(MAX_WINDOWS - 1);
        if i >= self.windows.len() {
            self.windows.resize_with(i + 1, Window::default);
        }
        &mut self.windows[i]
    }

    /// Counts one request in flight from `from_ns` to `to_ns` (after the start).
    pub fn in_flight(&mut self, from_ns: u64, to_ns: u64) {
        let mut t = from_ns;
        while t < to_ns {
            let end = ((t / WINDOW_NS + 1) * WINDOW_NS).min(to_ns);
            let w = self.at(t);
            w.in_flight_ns = w.in_flight_ns.saturating_add(end - t);
            if (t / WINDOW_NS) as usize >= MAX_WINDOWS - 1 {
                // The last window takes the rest at once.
                w.in_flight_ns = w.in_flight_ns.saturating_add(to_ns - end);
                break;
            }
            t = end;
        }
    }

    /// Adds another shard's windows into these.
    pub fn merge(&mut self, o: &Series) {
        if o.windows.len() > self.windows.len() {
            self.windows.resize_with(o.windows.len(), Window::default);
        }
        for (a, b) in self.windows.iter_mut().zip(&o.windows) {
            let add = |x: &mut u64, y: u64| *x = x.saturating_add(y);
            add(&mut a.offered, b.offered);
            add(&mut a.sent, b.sent);
            add(&mut a.completed, b.completed);
            add(&mut a.failed, b.failed);
            add(&mut a.output_tokens, b.output_tokens);
            add(&mut a.in_flight_ns, b.in_flight_ns);
            add(&mut a.first_tokens, b.first_tokens);
            add(&mut a.ttft_sum_ns, b.ttft_sum_ns);
            add(&mut a.ttft_send_lag_sum_ns, b.ttft_send_lag_sum_ns);
            a.ttft.merge(&b.ttft);
            a.send_lag.merge(&b.send_lag);
        }
    }

    /// The windows as a report shows them.
    pub fn points(&self) -> Vec<SeriesPoint> {
        let w = WINDOW_NS as f64;
        let q = |h: &LogHist, q: f64| h.quantile(q).map(|ns| ns * 1e-9);
        self.windows
            .iter()
            .enumerate()
            .map(|(i, x)| SeriesPoint {
                t_s: i as f64,
                offered_per_s: x.offered as f64,
                sent_per_s: x.sent as f64,
                completed_per_s: x.completed as f64,
                failed_per_s: x.failed as f64,
                output_tokens_per_s: x.output_tokens as f64,
                in_flight_mean: x.in_flight_ns as f64 / w,
                ttft_p50_s: q(&x.ttft, 0.5),
                ttft_p99_s: q(&x.ttft, 0.99),
                send_lag_p99_s: q(&x.send_lag, 0.99),
            })
            .collect()
    }
}

/// One window in a report (rates per second of the window; quantiles from the requests
/// offered in it, within 1.6 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// The window's start, seconds after the run's.
    pub t_s: f64,
    /// Requests whose intended send fell in it.
    pub offered_per_s: f64,
    /// Requests sent in it.
    pub sent_per_s: f64,
    /// Requests completed in it.
    pub completed_per_s: f64,
    /// Requests that ended otherwise in it.
    pub failed_per_s: f64,
    /// Output tokens that arrived in it.
    pub output_tokens_per_s: f64,
    /// Time-weighted mean of the requests in flight.
    pub in_flight_mean: f64,
    /// TTFT from the intended send, median.
    pub ttft_p50_s: Option<f64>,
    /// TTFT from the intended send, 99th percentile.
    pub ttft_p99_s: Option<f64>,
    /// Send lag, 99th percentile.
    pub send_lag_p99_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's life is split exactly at window edges; the area over every window is its
    /// length.
    #[test]
    fn in_flight_is_split_at_window_edges() {
        let mut s = Series::default();
        s.in_flight(500_000_000, 2_250_000_000);
        let got: Vec<u64> = s.windows.iter().map(|w| w.in_flight_ns).collect();
        assert_eq!(got, vec![500_000_000, 1_000_000_000, 250_000_000]);
        s.in_flight(3_000_000_000, 3_000_000_000);
        assert_eq!(s.windows.len(), 3, "an empty life adds nothing");
    }

    /// Merging is a window-by-window sum, whichever series is longer.
    #[test]
    fn merge_adds_window_by_window() {
        let (mut a, mut b) = (Series::default(), Series::default());
        a.at(0).offered = 2;
        b.at(0).offered = 3;
        b.at(2_500_000_000).completed = 7;
        b.at(2_500_000_000).ttft.record(1_000);
        a.merge(&b);
        assert_eq!(a.windows.len(), 3);
        assert_eq!((a.windows[0].offered, a.windows[2].completed), (5, 7));
        let p = a.points();
        // 1 us lands in a bucket 16 ns wide, reported at its middle.
        assert!((p[2].ttft_p50_s.unwrap() - 1e-6).abs() < 1e-8);
        assert_eq!(p[1].ttft_p50_s, None);
    }

    /// A stamp from far in the future lands in the last window, not in a huge allocation.
    #[test]
    fn a_wild_stamp_is_bounded() {
        let mut s = Series::default();
        s.at(u64::MAX).failed += 1;
        assert_eq!(s.windows.len(), MAX_WINDOWS);
        s.in_flight(u64::MAX - 10 * WINDOW_NS, u64::MAX);
        assert!(s.windows[MAX_WINDOWS - 1].in_flight_ns > 0);
    }
}
