//! The textbook engines' histogram of waits: log-linear buckets indexed straight from the
//! bits of the wait as an f64, so recording a customer is a shift, a subtraction and an
//! increment (the general [`heisenbench_model::stats::Recorder`] converts to integer
//! nanoseconds and walks an HDR histogram, which was a third of the Lindley path's time).
//!
//! Each binary octave holds 2^10 buckets of equal width, so a bucket spans at most 2^-10
//! (0.098 %) of its values and a quantile, reported as its bucket's midpoint, is within
//! 0.049 % of the sample quantile: inside the 0.1 % the HDR histogram allowed, and far
//! inside the 1 % the models are checked to. Waits from 2^-40 s (about a picosecond) to
//! 2^30 s (34 years) are resolved; smaller positive ones count in the first bucket, larger
//! ones in the last (the exact maximum is kept and caps every quantile). Zero waits are
//! counted apart by the caller. Mean and maximum are exact sums and comparisons.

/// Buckets per binary octave, as a power of two.
const SUB_BITS: u32 = 10;
/// The bits of an f64 below a bucket's index.
const SHIFT: u32 = 52 - SUB_BITS;
/// Octaves resolved: 2^-40 s to 2^30 s.
const OCTAVES: u64 = 70;
/// The index of 2^-40 s, the first bucket.
const LOW: u64 = ((1023 - 40) << 52) >> SHIFT;
/// Buckets in all.
const BUCKETS: usize = (OCTAVES << SUB_BITS) as usize;

/// Positive waits in seconds. The count is the buckets' sum, taken when asked: one
/// counter fewer to bump per customer. One more bucket past the last takes the zeros a
/// block records, so its loop has no branch to mispredict (a fraction 1 - rho of
/// customers do not wait, at random); they are not counted as waits.
#[derive(Clone)]
pub(super) struct WaitHist {
    counts: Box<[u64; BUCKETS + 1]>,
    sum: f64,
    max: f64,
}

impl Default for WaitHist {
    fn default() -> Self {
        Self {
            counts: vec![0u64; BUCKETS + 1]
                .into_boxed_slice()
                .try_into()
                .expect("the length is BUCKETS"),
            sum: 0.0,
            max: 0.0,
        }
    }
}

impl WaitHist {
    /// Records a positive wait.
    #[inline]
    pub(super) fn record(&mut self, wait_s: f64) {
        let i = ((wait_s.to_bits() >> SHIFT).saturating_sub(LOW) as usize).min(BUCKETS - 1);
        self.counts[i] += 1;
        self.sum += wait_s;
        self.max = self.max.max(wait_s);
    }

    /// Records the positive waits of `waits` (zeros are the caller's to count), with the
    /// sum and maximum carried in registers across the slice.
    #[inline]
    pub(super) fn record_all(&mut self, waits: &[f64]) {
        let (mut sum, mut max) = (self.sum, self.max);
        for &w in waits {
            let i = ((w.to_bits() >> SHIFT).saturating_sub(LOW) as usize).min(BUCKETS - 1);
            self.counts[if w > 0.0 { i } else { BUCKETS }] += 1;
            sum += w;
            max = max.max(w);
        }
        self.sum = sum;
        self.max = max;
    }

    /// Positive waits recorded.
    pub(super) fn count(&self) -> u64 {
        self.counts[..BUCKETS].iter().sum()
    }

    /// Their sum, seconds.
    pub(super) fn sum_s(&self) -> f64 {
        self.sum
    }

    /// Adds `other` in (exact).
    pub(super) fn merge(&mut self, other: &WaitHist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// The q-quantile of all waits, the recorded ones and `zeros` more of zero: the
    /// smallest value with at least q of them at or below it (0 for q = 0), as its bucket's
    /// midpoint, capped by the largest wait; the largest wait itself for the last rank.
    pub(super) fn quantile_s(&self, q: f64, zeros: u64) -> f64 {
        let total = self.count() + zeros;
        let rank = ((q * total as f64).ceil() as u64).max(1);
        if total == 0 || rank <= zeros {
            return 0.0;
        }
        if rank >= total {
            return self.max;
        }
        let mut seen = zeros;
        for (i, c) in self.counts[..BUCKETS].iter().enumerate() {
            seen += c;
            if seen >= rank {
                let at = |j: u64| f64::from_bits((j + LOW) << SHIFT);
                let mid = 0.5 * (at(i as u64) + at(i as u64 + 1));
                return mid.min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_half_a_bucket() {
        let mut h = WaitHist::default();
        // 1..=10,000 microseconds, and 10,000 zeros.
        for i in 1..=10_000u32 {
            h.record(f64::from(i) * 1e-6);
        }
        assert_eq!(h.quantile_s(0.5, 10_000), 0.0);
        for (q, exact) in [(0.75, 5_000e-6), (0.99, 9_800e-6), (0.999, 9_980e-6)] {
            let got = h.quantile_s(q, 10_000);
            assert!((got / exact - 1.0).abs() < 5e-4, "{q}: {got} vs {exact}");
        }
        assert_eq!(h.quantile_s(1.0, 10_000), 10_000e-6);
        assert!((h.sum_s() - 50_005_000e-6).abs() < 1e-9);
    }

    #[test]
    fn the_extremes_land_in_the_end_buckets_and_the_max_caps() {
        let mut h = WaitHist::default();
        h.record(1e-300);
        h.record(1e300);
        assert_eq!(h.count(), 2);
        assert!(h.quantile_s(0.5, 0) < 1e-11);
        assert_eq!(h.quantile_s(1.0, 0), 1e300);
        let mut g = WaitHist::default();
        g.merge(&h);
        assert_eq!(g.count(), 2);
    }
}
