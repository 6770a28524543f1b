//! Whether a run reached a steady state: MSER truncation of a per-window series.
//!
//! MSER (White, 1997) deletes the first d observations of an output series where
//! deleting them minimises the squared standard error of the mean of what is left,
//!
//! ```text
//! MSER(d) = sum_{i > d} (x_i - mean_{>d})^2 / (n - d)^2,
//! ```
//!
//! searched over d up to half the series. A minimum in the first half marks the end of a
//! warm-up transient; a minimum at the half-way bound means the series never settled (it
//! drifted for the whole run), the usual rule being that such a run has no steady state to
//! report.

/// MSER's verdict on one series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truncation {
    /// Observations to delete from the start.
    pub delete: usize,
    /// Whether the minimum lies before the half-way bound: the series settled.
    pub settled: bool,
}

/// MSER over `x` (one value per window, in order). `None` for fewer than four windows,
/// too few to tell a transient from noise.
pub fn mser(x: &[f64]) -> Option<Truncation> {
    let n = x.len();
    if n < 4 {
        return None;
    }
    // Suffix sums give each candidate's mean and squared deviations in O(1).
    let mut sum = vec![0.0; n + 1];
    let mut sq = vec![0.0; n + 1];
    for i in (0..n).rev() {
        sum[i] = sum[i + 1] + x[i];
        sq[i] = sq[i + 1] + x[i] * x[i];
    }
    let last = n / 2;
    let (mut best, mut best_d) = (f64::INFINITY, 0);
    for d in 0..=last {
        let m = (n - d) as f64;
        let dev = (sq[d] - sum[d] * sum[d] / m).max(0.0);
        let stat = dev / (m * m);
        if stat < best {
            best = stat;
            best_d = d;
        }
    }
    Some(Truncation {
        delete: best_d,
        settled: best_d < last,
    })
}

/// Whether `x` grew over the run: the mean of its last third exceeds `factor` times the
/// mean of its first third and the rise is above `floor` (so noise on a tiny value is not
/// growth). `false` for fewer than three windows.
pub fn grew(x: &[f64], factor: f64, floor: f64) -> bool {
    let third = x.len() / 3;
    if third == 0 {
        return false;
    }
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let (first, last) = (mean(&x[..third]), mean(&x[x.len() - third..]));
    last > first * factor && last - first > floor
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic, zero-mean wobble (no generator needed for a test of shape).
    fn noise(i: usize) -> f64 {
        ((i * 7919) % 13) as f64 / 13.0 - 6.0 / 13.0
    }

    /// A transient of eight windows, then noise about a level: MSER deletes the transient
    /// (and no more than a window or two of noise) and calls the rest settled.
    #[test]
    fn deletes_a_warm_up_transient() {
        let x: Vec<f64> = (0..60)
            .map(|i| if i < 8 { 10.0 - i as f64 } else { 1.0 } + 0.1 * noise(i))
            .collect();
        let t = mser(&x).unwrap();
        assert!(t.settled);
        assert!((7..=10).contains(&t.delete), "{t:?}");
        let flat: Vec<f64> = (0..60).map(|i| 1.0 + 0.1 * noise(i)).collect();
        let t = mser(&flat).unwrap();
        assert!(t.settled && t.delete <= 5, "{t:?}");
    }

    /// A series that rises for the whole run never settles, and it grew.
    #[test]
    fn a_ramp_has_no_steady_state() {
        let x: Vec<f64> = (0..40).map(|i| i as f64 + 0.1 * noise(i)).collect();
        assert_eq!(mser(&x).map(|t| t.settled), Some(false));
        assert!(grew(&x, 1.5, 0.0));
        let flat: Vec<f64> = (0..40).map(|i| 5.0 + 0.1 * noise(i)).collect();
        assert!(!grew(&flat, 1.5, 0.0));
        // The floor: a doubling of nothing much is not growth.
        let tiny: Vec<f64> = (0..40).map(|i| 1e-6 * (1.0 + i as f64)).collect();
        assert!(grew(&tiny, 1.5, 0.0) && !grew(&tiny, 1.5, 1e-3));
        assert_eq!(mser(&[1.0, 2.0, 3.0]), None);
    }
}
