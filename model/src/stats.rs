//! Streaming statistics: an HDR histogram plus exact count, sum and max.
//!
//! Memory does not grow with the number of samples, so 1e8 events fit in a fixed budget.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::units::Quantile;

/// Samples in nanoseconds: HDR histogram (3 significant digits, so quantiles are within
/// 0.1 %) with the mean and max kept exactly.
///
/// Mergeable ([`Recorder::merge`] is associative and exact, `Default` is its identity) and
/// serialisable: it travels as its non-empty buckets, `[value, count]` pairs, which
/// rebuild the same histogram bucket for bucket.
#[derive(Clone, Serialize, Deserialize)]
#[serde(into = "RecorderWire", try_from = "RecorderWire")]
pub struct Recorder {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        let mut hist = Histogram::new(3).expect("3 significant digits is valid");
        hist.auto(true);
        Self {
            hist,
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl Recorder {
    /// Records one sample.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        // Auto-resizing histograms accept any u64 up to their trackable maximum.
        let _ = self.hist.record(ns);
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Records `n` samples of the same value.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let _ = self.hist.record_n(ns, n);
        self.count += n;
        self.sum_ns += u128::from(ns) * u128::from(n);
        self.max_ns = self.max_ns.max(ns);
    }

    /// The share of samples at most `ns` (within the histogram's 3 significant digits);
    /// None without samples.
    pub fn fraction_at_most(&self, ns: u64) -> Option<f64> {
        (self.count > 0).then(|| self.hist.count_between(0, ns) as f64 / self.count as f64)
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean, seconds (0 when empty).
    pub fn mean_s(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64 * 1e-9
        }
    }

    /// Standard deviation, seconds (from the histogram, so within its 0.1 % resolution).
    pub fn sd_s(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.hist.stdev() * 1e-9
        }
    }

    /// The q-quantile, seconds. The histogram answers with the top of a bucket, which can
    /// lie above the largest sample; the exact maximum caps it, so no quantile is ever
    /// reported above the max (and, the cap being one number, quantiles stay monotone).
    pub fn quantile_s(&self, q: f64) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.hist.value_at_quantile(q).min(self.max_ns) as f64 * 1e-9
        }
    }

    /// The q-quantile, seconds, of a sample plus a time drawn independently from an
    /// exponential of mean `mean_s`: each sample with a random latency added. A `mean_s`
    /// of 0 or less is [`Recorder::quantile_s`]. Several quantiles of the same sum are
    /// cheaper through [`Recorder::quantiles_plus_exponential_s`].
    pub fn quantile_plus_exponential_s(&self, q: f64, mean_s: f64) -> f64 {
        self.quantiles_plus_exponential_s([q], mean_s)[0]
    }

    /// [`Recorder::quantile_plus_exponential_s`] at each of `qs`, over one pass of the
    /// histogram. The sum's distribution function at `t` is each bucket's share times the
    /// chance that the exponential makes up the rest; each quantile is found by bisection
    /// between 0 and the largest sample plus the exponential's own q-quantile (the sum is
    /// below that with chance at least q).
    pub fn quantiles_plus_exponential_s<const N: usize>(
        &self,
        qs: [f64; N],
        mean_s: f64,
    ) -> [f64; N] {
        if mean_s <= 0.0 || self.count == 0 {
            return qs.map(|q| self.quantile_s(q));
        }
        let n = self.count as f64;
        let buckets: Vec<(f64, f64)> = self
            .hist
            .iter_recorded()
            .map(|v| {
                let at = v.value_iterated_to().min(self.max_ns) as f64 * 1e-9;
                (at, v.count_at_value() as f64 / n)
            })
            .collect();
        let below = |t: f64| -> f64 {
            buckets
                .iter()
                .take_while(|(at, _)| *at <= t)
                .map(|(at, share)| share * -(-(t - at) / mean_s).exp_m1())
                .sum()
        };
        qs.map(|q| {
            let (mut lo, mut hi) = (0.0, self.max_ns as f64 * 1e-9 - mean_s * (-q).ln_1p());
            // Sixty halvings take any bracket below a second to far under a nanosecond.
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if below(mid) < q {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            hi
        })
    }

    /// The CDF as (value in seconds, cumulative probability) at `n` evenly spaced
    /// probabilities plus the tail levels 0.99, 0.999 and 1 (empty when no samples).
    pub fn cdf(&self, n: usize) -> Vec<(f64, f64)> {
        if self.count == 0 {
            return Vec::new();
        }
        let mut qs: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
        qs.extend([0.99, 0.999, 1.0]);
        qs.into_iter().map(|q| (self.quantile_s(q), q)).collect()
    }

    /// Adds another recorder's samples (exact for counts, sum and max).
    pub fn merge(&mut self, other: &Recorder) {
        let _ = self.hist.add(&other.hist);
        // Saturating: counts read from files may be anything; a wrapped sum would lie.
        self.count = self.count.saturating_add(other.count);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The summary for a report.
    pub fn summary(&self) -> Dist {
        let [p50, p90, p99, p999] = Quantile::STANDARD.map(|q| self.quantile_s(q.get()));
        Dist {
            count: self.count,
            mean_s: self.mean_s(),
            p50_s: p50,
            p90_s: p90,
            p99_s: p99,
            p999_s: p999,
            max_s: self.max_ns as f64 * 1e-9,
        }
    }
}

/// The summary, not the histogram's thousands of buckets.
impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("count", &self.count)
            .field("mean_s", &self.mean_s())
            .field("p50_s", &self.quantile_s(0.5))
            .field("p99_s", &self.quantile_s(0.99))
            .field("max_ns", &self.max_ns)
            .finish()
    }
}

impl PartialEq for Recorder {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.sum_ns == other.sum_ns
            && self.max_ns == other.max_ns
            && self.hist == other.hist
    }
}

/// The wire form of a [`Recorder`].
#[derive(Serialize, Deserialize)]
struct RecorderWire {
    count: u64,
    sum_ns: u128,
    max_ns: u64,
    /// Non-empty buckets: (the bucket's highest equivalent value, count).
    buckets: Vec<(u64, u64)>,
}

impl From<Recorder> for RecorderWire {
    fn from(r: Recorder) -> Self {
        let buckets = r
            .hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        Self {
            count: r.count,
            sum_ns: r.sum_ns,
            max_ns: r.max_ns,
            buckets,
        }
    }
}

impl TryFrom<RecorderWire> for Recorder {
    type Error = String;
    fn try_from(w: RecorderWire) -> Result<Self, String> {
        let mut r = Recorder::default();
        for (v, n) in w.buckets {
            r.hist
                .record_n(v, n)
                .map_err(|e| format!("histogram bucket {v}: {e:?}"))?;
        }
        if r.hist.len() != w.count {
            return Err(format!(
                "histogram holds {} samples, count says {}",
                r.hist.len(),
                w.count
            ));
        }
        r.count = w.count;
        r.sum_ns = w.sum_ns;
        r.max_ns = w.max_ns;
        Ok(r)
    }
}

/// A distribution's summary in a report.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Dist {
    /// Samples.
    pub count: u64,
    /// Mean, seconds.
    pub mean_s: f64,
    /// Median, seconds.
    pub p50_s: f64,
    /// 90th percentile, seconds.
    pub p90_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
    /// 99.9th percentile, seconds.
    pub p999_s: f64,
    /// Largest, seconds.
    pub max_s: f64,
}

/// A coarse, compact histogram of non-negative integers: exact below 64, then 32
/// buckets per power of two, so a quantile is within 1.6 % of a value it holds. It keeps
/// only its non-empty buckets, so a run's per-second windows each hold one cheaply, and
/// merging adds bucket counts (exact, associative; `Default` is its identity).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Vec<(u16, u64)>", try_from = "Vec<(u16, u64)>")]
pub struct LogHist {
    buckets: std::collections::BTreeMap<u16, u64>,
    count: u64,
}

impl LogHist {
    /// The highest bucket index (the one holding `u64::MAX`).
    const MAX_INDEX: u16 = 64 + 57 * 32 + 31;

    fn index(v: u64) -> u16 {
        if v < 64 {
            return v as u16;
        }
        let e = 63 - v.leading_zeros();
        let mantissa = (v >> (e - 5)) & 31;
        (64 + (e - 6) * 32) as u16 + mantissa as u16
    }

    /// The middle of bucket `i`.
    fn value(i: u16) -> f64 {
        if i < 64 {
            return f64::from(i);
        }
        let e = u32::from(i - 64) / 32 + 6;
        let mantissa = u64::from(i - 64) % 32;
        let low = (32 + mantissa) << (e - 5);
        low as f64 + ((1u64 << (e - 5)) - 1) as f64 / 2.0
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        let n = self.buckets.entry(Self::index(v)).or_default();
        *n = n.saturating_add(1);
        self.count = self.count.saturating_add(1);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value at quantile `q` (0 to 1), as its bucket's middle; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, n) in &self.buckets {
            seen = seen.saturating_add(*n);
            if seen >= rank {
                return Some(Self::value(*i));
            }
        }
        self.buckets.keys().next_back().map(|i| Self::value(*i))
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, o: &LogHist) {
        for (i, n) in &o.buckets {
            let m = self.buckets.entry(*i).or_default();
            *m = m.saturating_add(*n);
        }
        self.count = self.count.saturating_add(o.count);
    }
}

impl From<LogHist> for Vec<(u16, u64)> {
    fn from(h: LogHist) -> Self {
        h.buckets.into_iter().collect()
    }
}

impl TryFrom<Vec<(u16, u64)>> for LogHist {
    type Error = String;
    fn try_from(pairs: Vec<(u16, u64)>) -> Result<Self, String> {
        let mut h = LogHist::default();
        for (i, n) in pairs {
            if i > Self::MAX_INDEX {
                return Err(format!(
                    "histogram bucket {i} is past the last, {}",
                    Self::MAX_INDEX
                ));
            }
            let m = h.buckets.entry(i).or_default();
            *m = m.saturating_add(n);
            h.count = h.count.saturating_add(n);
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_share_at_most_a_value_counts_the_samples_below_it() {
        let mut r = Recorder::default();
        assert_eq!(r.fraction_at_most(10), None);
        for ns in 1..=100 {
            r.record(ns);
        }
        assert_eq!(r.fraction_at_most(50), Some(0.5));
        assert_eq!(r.fraction_at_most(1_000), Some(1.0));
        assert_eq!(r.fraction_at_most(0), Some(0.0));
    }

    /// Checked against closed forms: a point mass at c plus an exponential of mean m has
    /// its q-quantile at c - m ln(1 - q); two equal point masses at 0 and at c mix two such.
    #[test]
    fn a_sample_plus_an_exponential_has_the_closed_forms_quantiles() {
        let mut point = Recorder::default();
        point.record_n(1_000_000, 1000);
        let m = 2e-3;
        for q in [0.5_f64, 0.9, 0.99] {
            let want = 1e-3 - m * (-q).ln_1p();
            let got = point.quantile_plus_exponential_s(q, m);
            assert!(
                (got / want - 1.0).abs() < 1e-6,
                "q {q}: {got} against {want}"
            );
        }
        assert_eq!(
            point.quantile_plus_exponential_s(0.9, 0.0),
            point.quantile_s(0.9)
        );
        // Half at 0 and half at 10 ms, plus an exponential of mean 1 ms: the sum's
        // distribution function is known, and each quantile found must sit where it is q.
        let mut two = Recorder::default();
        two.record_n(0, 500);
        two.record_n(10_000_000, 500);
        let (c, m) = (two.quantile_s(1.0), 1e-3);
        let cdf = |t: f64| {
            0.5 * (1.0 - (-t / m).exp())
                + if t > c {
                    0.5 * (1.0 - (-(t - c) / m).exp())
                } else {
                    0.0
                }
        };
        // The several-quantile form, in one pass, against the same truth.
        let qs = [0.3, 0.5, 0.75, 0.99];
        for (q, got) in qs.into_iter().zip(two.quantiles_plus_exponential_s(qs, m)) {
            assert!(
                (cdf(got) - q).abs() < 1e-9,
                "q {q}: F({got}) = {}",
                cdf(got)
            );
        }
        // Below a half the mass at 10 ms plays no part: t = -m ln(1 - 2q).
        let q = 0.3;
        let want = -m * (1.0 - q / 0.5_f64).ln();
        assert!((two.quantile_plus_exponential_s(q, m) / want - 1.0).abs() < 1e-6);
    }

    fn rec(values: &[u64]) -> Recorder {
        let mut r = Recorder::default();
        for v in values {
            r.record(*v);
        }
        r
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_matches_recording_everything(
            a in proptest::collection::vec(0u64..10_000_000_000, 0..50),
            b in proptest::collection::vec(0u64..10_000_000_000, 0..50),
            c in proptest::collection::vec(0u64..10_000_000_000, 0..50),
        ) {
            let (ra, rb, rc) = (rec(&a), rec(&b), rec(&c));
            let mut left = ra.clone();
            left.merge(&rb);
            left.merge(&rc);
            let mut bc = rb.clone();
            bc.merge(&rc);
            let mut right = ra.clone();
            right.merge(&bc);
            prop_assert_eq!(&left, &right);
            let all: Vec<u64> = a.iter().chain(&b).chain(&c).copied().collect();
            prop_assert_eq!(&left, &rec(&all));
            let mut id = Recorder::default();
            id.merge(&ra);
            prop_assert_eq!(&id, &ra);
        }

        #[test]
        fn wire_round_trip_is_exact(values in proptest::collection::vec(0u64..u64::MAX / 4, 0..100)) {
            let r = rec(&values);
            let json = serde_json::to_string(&r).unwrap();
            let back: Recorder = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, &r);
            prop_assert_eq!(back.summary(), r.summary());
        }
    }

    /// Every value lands in a bucket whose middle is within 1.6 % of it (exact below 64),
    /// the buckets are ordered like the values, and the last holds u64::MAX.
    #[test]
    fn log_buckets_are_ordered_and_tight() {
        let mut last = 0;
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            for x in [v, v + v / 3, v * 2 - 1] {
                let i = LogHist::index(x);
                assert!(i >= last, "{x}");
                last = i;
                let mid = LogHist::value(i);
                assert!((mid - x as f64).abs() <= x as f64 * 0.016, "{x}: {mid}");
            }
            v *= 2;
        }
        assert_eq!(LogHist::index(u64::MAX), LogHist::MAX_INDEX);
        assert_eq!(LogHist::value(LogHist::index(63)), 63.0);
    }

    /// Quantiles against the exact order statistics of a known sample; merging two halves
    /// is the whole; the wire form round-trips and refuses a bucket past the last.
    #[test]
    fn log_quantiles_merge_and_round_trip() {
        let mut whole = LogHist::default();
        let (mut a, mut b) = (LogHist::default(), LogHist::default());
        for v in 1..=10_000u64 {
            let x = v * 1_000;
            whole.record(x);
            if v % 2 == 0 { a.record(x) } else { b.record(x) }
        }
        for (q, exact) in [(0.5, 5e6), (0.99, 9.9e6), (1.0, 1e7)] {
            let got = whole.quantile(q).unwrap();
            assert!((got - exact).abs() <= exact * 0.016, "q{q}: {got}");
        }
        a.merge(&b);
        assert_eq!(a, whole);
        assert_eq!(LogHist::default().quantile(0.5), None);
        let json = serde_json::to_string(&whole).unwrap();
        assert_eq!(serde_json::from_str::<LogHist>(&json).unwrap(), whole);
        assert!(serde_json::from_str::<LogHist>("[[9999,1]]").is_err());
    }
}
