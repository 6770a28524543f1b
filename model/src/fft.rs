//! A radix-2 fast Fourier transform on complex doubles, for the lattice queues.
//!
//! The lattice solver evaluates generating functions on the unit circle and reads
//! coefficients back; both are discrete Fourier transforms of a few thousand to a few
//! hundred thousand points. This is the textbook iterative Cooley-Tukey transform (bit
//! reversal, then log2 n butterfly passes). Each twiddle factor is computed directly
//! from its angle rather than by repeated multiplication, so the rounding error of a
//! transform stays near machine epsilon times log2 n of the largest magnitude.

use std::ops::{Add, Mul, Sub};
use std::sync::{Arc, Mutex};

/// A complex number.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Complex {
    pub re: f64,
    pub im: f64,
}

impl Complex {
    pub const fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }

    pub fn norm(self) -> f64 {
        self.re.hypot(self.im)
    }

    pub fn arg(self) -> f64 {
        self.im.atan2(self.re)
    }

    /// e^self.
    pub fn exp(self) -> Self {
        let (s, c) = self.im.sin_cos();
        let m = self.re.exp();
        Self::new(m * c, m * s)
    }

    /// 1 / self.
    pub fn recip(self) -> Self {
        let d = self.re * self.re + self.im * self.im;
        Self::new(self.re / d, -self.im / d)
    }

    /// self^n, by repeated squaring.
    pub fn powu(self, mut n: u32) -> Self {
        let (mut base, mut acc) = (self, Self::new(1.0, 0.0));
        while n > 0 {
            if n & 1 == 1 {
                acc = acc * base;
            }
            base = base * base;
            n >>= 1;
        }
        acc
    }

    pub fn scale(self, k: f64) -> Self {
        Self::new(self.re * k, self.im * k)
    }
}

impl Add for Complex {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self::new(self.re + o.re, self.im + o.im)
    }
}

impl Sub for Complex {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Self::new(self.re - o.re, self.im - o.im)
    }
}

impl Mul for Complex {
    type Output = Self;
    fn mul(self, o: Self) -> Self {
        Self::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

/// Transforms of one length n (a power of two).
pub(crate) struct Fft {
    n: usize,
    /// The butterflies' factors, stage by stage: the pass that joins halves of length h
    /// reads e^{2 pi i k / 2h}, k < h, from offset h - 1, contiguous so its inner loop
    /// streams through them. A longer transform's table extends a shorter one's, so one
    /// table, grown on demand, serves every length.
    roots: Arc<[Complex]>,
}

/// The longest table built so far (see [`Fft::roots`]).
static ROOTS: Mutex<Option<Arc<[Complex]>>> = Mutex::new(None);

impl Fft {
    pub fn new(n: usize) -> Self {
        assert!(n.is_power_of_two(), "FFT length {n} is not a power of two");
        let mut shared = ROOTS.lock().unwrap_or_else(|e| e.into_inner());
        let roots = match shared.as_ref() {
            Some(r) if r.len() + 1 >= n => r.clone(),
            _ => {
                let mut roots = Vec::with_capacity(n - 1);
                let mut half = 1;
                while half < n {
                    roots.extend((0..half).map(|k| {
                        let angle = std::f64::consts::PI * k as f64 / half as f64;
                        let (s, c) = angle.sin_cos();
                        Complex::new(c, s)
                    }));
                    half *= 2;
                }
                let roots: Arc<[Complex]> = roots.into();
                *shared = Some(roots.clone());
                roots
            }
        };
        Self { n, roots }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    /// The series sum_m x_m z^m at z = e^{2 pi i j / n}, for every j (in place).
    pub fn evaluate(&self, x: &mut [Complex]) {
        self.transform(x);
    }

    /// The coefficients x_m back from values at the n roots of unity: (1 / n) sum_j
    /// X_j e^{-2 pi i j m / n} (in place; undoes [`Fft::evaluate`]). The transform with
    /// conjugated factors is the conjugate of the transform of the conjugate.
    pub fn coefficients(&self, x: &mut [Complex]) {
        x.iter_mut().for_each(|v| v.im = -v.im);
        self.transform(x);
        let k = 1.0 / self.n as f64;
        x.iter_mut()
            .for_each(|v| *v = Complex::new(v.re * k, -v.im * k));
    }

    fn transform(&self, x: &mut [Complex]) {
        let n = self.n;
        assert_eq!(x.len(), n);
        let bits = n.trailing_zeros();
        if bits == 0 {
            return;
        }
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - bits);
            if i < j {
                x.swap(i, j);
            }
        }
        let mut half = 1;
        while half < n {
            let factors = &self.roots[half - 1..2 * half - 1];
            for block in x.chunks_exact_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                for ((p, q), w) in lo.iter_mut().zip(hi.iter_mut()).zip(factors) {
                    let t = *w * *q;
                    *q = *p - t;
                    *p = *p + t;
                }
            }
            half *= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transform against the defining sum, and back.
    #[test]
    fn matches_the_direct_sum_and_inverts() {
        for n in [1usize, 2, 8, 64, 256] {
            let x: Vec<Complex> = (0..n)
                .map(|m| Complex::new((m as f64 * 0.37).sin(), 1.0 / (1.0 + m as f64)))
                .collect();
            let mut y = x.clone();
            let f = Fft::new(n);
            f.evaluate(&mut y);
            for (j, yj) in y.iter().enumerate() {
                let mut s = Complex::default();
                for (m, xm) in x.iter().enumerate() {
                    let a = std::f64::consts::TAU * (j * m) as f64 / n as f64;
                    s = s + *xm * Complex::new(a.cos(), a.sin());
                }
                assert!((s - *yj).norm() < 1e-12 * n as f64, "n {n} j {j}");
            }
            f.coefficients(&mut y);
            for (a, b) in x.iter().zip(&y) {
                assert!((*a - *b).norm() < 1e-14 * n as f64);
            }
        }
    }
}
