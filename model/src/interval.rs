//! How far a run's mean and one quantile of its samples could have come out otherwise:
//! 95 % intervals read from the samples in the order they were taken.
//!
//! Latencies taken one after another are not independent: a client's garbage collection,
//! or a core its loop waits for, delays several requests in a row. The mean's interval is
//! read from batch means: the samples are cut into [`BATCHES`] consecutive batches, and the
//! half-width is t(0.975, B - 1) times the batch means' standard deviation over sqrt(B).
//! How much larger that variance of the mean is than independent samples would give (the
//! ratio, at least 1) divides the sample count into an effective count. A quantile's
//! interval is then the distribution-free one of order statistics at that count: the
//! number of samples below the true quantile is binomial, taken in its normal
//! approximation, and its bounds are read as ranks among all the samples.
//!
//! The quantile's interval assumes the tail is as correlated as the mean. Where the
//! correlation lies in the level of whole stretches of the run (a slow minute), it is wider
//! than it needs to be; where single slow samples come in clusters shorter than a batch,
//! the batch means see it. Either way it holds the run's own sampling noise only: not a
//! second run on a machine in another state.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Consecutive batches the samples are cut into.
pub const BATCHES: usize = 20;

/// Fewest samples an interval is read from: ten a batch.
pub const MIN_SAMPLES: usize = 10 * BATCHES;

/// The normal's 0.975 quantile as conventionally rounded: a 95 % range is this many
/// standard errors either side of a mean.
pub const Z_975: f64 = 1.96;

/// The 0.975 quantile of Student's t with `dof` degrees of freedom (at least 1): the
/// factor of a 95 % interval's half-width.
pub fn student_t_975(dof: usize) -> f64 {
    StudentsT::new(0.0, 1.0, dof.max(1) as f64)
        .expect("a t distribution with positive degrees of freedom")
        .inverse_cdf(0.975)
}

/// Which of a [`SampleInterval`]'s two statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statistic {
    /// The mean.
    Mean,
    /// The quantile the interval was read at.
    Quantile,
}

/// The 95 % intervals of a run's mean and of one quantile of its samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampleInterval {
    /// Samples read.
    pub samples: u64,
    /// Consecutive batches the mean's interval was read from.
    pub batches: u32,
    /// The batch means' variance of the mean over what independent samples would give, at
    /// least 1: the samples count as `samples / inflation` independent ones.
    pub inflation: f64,
    /// The mean's interval: lower and upper end.
    pub mean: [f64; 2],
    /// The quantile whose interval `quantile` is (0.99: the p99).
    pub q: f64,
    /// The quantile's interval: lower and upper end.
    pub quantile: [f64; 2],
    /// Whether the quantile's interval reaches past the largest sample, its upper end then
    /// being that sample: the run holds too few samples beyond the quantile to bound it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_above: bool,
}

impl SampleInterval {
    /// The intervals of `in_order` (the samples in the order they were taken) at the
    /// quantile `q` (strictly between 0 and 1). None with fewer than [`MIN_SAMPLES`]
    /// samples, or any that is not finite.
    pub fn of(in_order: &[f64], q: f64) -> Option<Self> {
        let n = in_order.len();
        if n < MIN_SAMPLES || !(q > 0.0 && q < 1.0) || !in_order.iter().all(|x| x.is_finite()) {
            return None;
        }
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
        let variance = |xs: &[f64], m: f64| {
            xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
        };
        let batch_means: Vec<f64> = (0..BATCHES)
            .map(|i| mean(&in_order[i * n / BATCHES..(i + 1) * n / BATCHES]))
            .collect();
        let m = mean(in_order);
        // The mean's variance two ways: from the batches, and as if the samples were
        // independent.
        let of_batches = variance(&batch_means, mean(&batch_means)) / BATCHES as f64;
        let independent = variance(in_order, m) / n as f64;
        let inflation = if independent > 0.0 {
            (of_batches / independent).max(1.0)
        } else {
            1.0
        };
        let half = student_t_975(BATCHES - 1) * of_batches.sqrt();
        let mut sorted = in_order.to_vec();
        sorted.sort_by(f64::total_cmp);
        let z = Normal::standard().inverse_cdf(0.975);
        let effective = n as f64 / inflation;
        let reach = z * (q * (1.0 - q) / effective).sqrt();
        // Ranks counted from 1: the lower end is the sample at the lower rank, the upper
        // the sample at the upper rank, both among all n.
        let lower = ((n as f64 * (q - reach)).floor() as usize).clamp(1, n);
        let upper_rank = (n as f64 * (q + reach)).ceil();
        let open_above = upper_rank > n as f64;
        let upper = (upper_rank as usize).clamp(1, n);
        Some(Self {
            samples: n as u64,
            batches: BATCHES as u32,
            inflation,
            mean: [m - half, m + half],
            q,
            quantile: [sorted[lower - 1], sorted[upper - 1]],
            open_above,
        })
    }

    /// The interval of `which`: lower and upper end.
    pub fn ends(&self, which: Statistic) -> [f64; 2] {
        match which {
            Statistic::Mean => self.mean,
            Statistic::Quantile => self.quantile,
        }
    }

    /// Whether `x` lies inside the interval of `which` (for the quantile, at or above its
    /// upper end too where that end is open).
    pub fn holds(&self, which: Statistic, x: f64) -> bool {
        let [low, high] = self.ends(which);
        x >= low && (x <= high || (which == Statistic::Quantile && self.open_above))
    }

    /// Whether `x` lies inside the mean's interval.
    pub fn holds_mean(&self, x: f64) -> bool {
        self.holds(Statistic::Mean, x)
    }

    /// Whether `x` lies inside the quantile's interval (at or above its upper end too,
    /// where that end is open).
    pub fn holds_quantile(&self, x: f64) -> bool {
        self.holds(Statistic::Quantile, x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::SimRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp1, Uniform};

    fn exp(rng: &mut SimRng) -> f64 {
        Distribution::<f64>::sample(&Exp1, rng)
    }

    /// Over `runs` seeded runs of `draw`, the share whose mean's interval holds `mean` and
    /// whose quantile's holds `quantile`, and the runs' median inflation.
    fn coverage(
        runs: u64,
        q: f64,
        mean: f64,
        quantile: f64,
        draw: impl Fn(&mut SimRng) -> Vec<f64>,
    ) -> (f64, f64, f64) {
        let (mut held_mean, mut held_quantile, mut inflations) = (0, 0, Vec::new());
        for seed in 0..runs {
            let mut rng = SimRng::seed_from_u64(seed);
            let i = SampleInterval::of(&draw(&mut rng), q).expect("enough samples");
            held_mean += u64::from(i.holds_mean(mean));
            held_quantile += u64::from(i.holds_quantile(quantile));
            inflations.push(i.inflation);
        }
        inflations.sort_by(f64::total_cmp);
        (
            held_mean as f64 / runs as f64,
            held_quantile as f64 / runs as f64,
            inflations[inflations.len() / 2],
        )
    }

    /// Independent exponential samples: the intervals hold the true mean (1) and p99
    /// (ln 100) about 95 % of the time. Over 400 runs a true coverage of 0.95 lands within
    /// 0.92-0.98 with probability above 0.99 (binomial, sd 0.011).
    #[test]
    fn independent_samples_are_covered_as_often_as_stated() {
        let (mean, p99, inflation) = coverage(400, 0.99, 1.0, 100f64.ln(), |rng| {
            (0..2000).map(|_| exp(rng)).collect()
        });
        assert!((0.92..=0.98).contains(&mean), "mean covered {mean}");
        assert!((0.92..=0.98).contains(&p99), "p99 covered {p99}");
        // Independent samples: the batches see no more variance than the samples do.
        assert!(inflation < 1.3, "{inflation}");
    }

    /// Stretches of 100 samples each shifted by its own uniform level on [0, 4] (a slow
    /// stretch of a run): the mean is 3 and the p99 solves e^-x (e^4 - 1) / 4 = 0.01. The
    /// samples' own spread would hold the mean in about a quarter of the runs; the batch
    /// means hold it about 95 % of the time, and the p99's interval, read at the effective
    /// count, holds it at least as often (wider than it needs: the level's spread moves the
    /// mean more than the tail).
    #[test]
    fn runs_whose_stretches_differ_widen_to_hold_their_truth() {
        let level = Uniform::new(0.0, 4.0).expect("a valid range");
        let p99 = (100.0 * (4f64.exp() - 1.0) / 4.0).ln();
        let (mean, tail, inflation) = coverage(400, 0.99, 3.0, p99, |rng| {
            (0..20)
                .flat_map(|_| {
                    let shift = level.sample(rng);
                    (0..100).map(|_| shift + exp(rng)).collect::<Vec<f64>>()
                })
                .collect()
        });
        assert!((0.90..=0.99).contains(&mean), "mean covered {mean}");
        assert!(tail >= 0.92, "p99 covered {tail}");
        // The level's variance over a stretch (16/12 / 100 a sample's worth, against 1 of
        // noise) makes the mean's variance about 1 + 100 x 1.33 / 2.33 = 58 times what
        // independent samples give, which is how often the plain interval misses.
        assert!((25.0..=120.0).contains(&inflation), "{inflation}");
    }

    #[test]
    fn too_few_or_broken_samples_give_no_interval() {
        assert!(SampleInterval::of(&[1.0; MIN_SAMPLES - 1], 0.99).is_none());
        assert!(SampleInterval::of(&[1.0; MIN_SAMPLES], 1.0).is_none());
        let mut broken = vec![1.0; MIN_SAMPLES];
        broken[7] = f64::NAN;
        assert!(SampleInterval::of(&broken, 0.99).is_none());
        // One value throughout: both intervals are that value.
        let flat = SampleInterval::of(&[2.5; MIN_SAMPLES], 0.99).expect("enough");
        assert_eq!(
            (flat.mean, flat.quantile, flat.inflation),
            ([2.5; 2], [2.5; 2], 1.0)
        );
    }

    /// 1,000 samples 1..=1000, in an even order (each batch of 50 spans the range, so the
    /// batches vary less than independent samples and the inflation stays 1): the p99's
    /// ranks are 1000 x (0.99 -+ 1.96 x sqrt(0.0099 / 1000)) = 983.8 and 996.2, so the
    /// 983rd and the 997th. At the p99.9 the upper rank, 1001, is past the last sample.
    #[test]
    fn a_quantile_near_the_last_sample_says_its_end_is_open() {
        let mixed: Vec<f64> = (0..1000).map(|i| f64::from((i * 777) % 1000 + 1)).collect();
        let i = SampleInterval::of(&mixed, 0.99).expect("enough");
        assert_eq!((i.quantile, i.inflation), ([983.0, 997.0], 1.0), "{i:?}");
        assert!(!i.open_above && !i.holds_quantile(998.0) && i.holds_quantile(990.0));
        let wide = SampleInterval::of(&mixed, 0.999).expect("enough");
        assert!(wide.open_above && wide.holds_quantile(1e9), "{wide:?}");
    }
}
