//! The discrete Fourier transforms of `fft` (JAX's `FftType`: `FFT`, `IFFT`, `RFFT`,
//! `IRFFT`) over the last 1 to 3 axes, in `f64` whatever the element type (a `c64`
//! transform rounds once at the end), so that both backends give the same bits and the
//! result is within a few `f32` ulps of XLA's. Along each axis: an iterative radix-2
//! transform for a power-of-two length, a direct sum with exact twiddle indices otherwise.

use std::f64::consts::PI;

use ndarray::{ArrayD, Axis, IxDyn, Slice};
use num_complex::Complex64;

/// Which transform (JAX's `FftType`, printed as its number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Complex to complex, `exp(-2 pi i jk / n)`.
    Fft,
    /// Complex to complex, `exp(+2 pi i jk / n) / n`.
    Ifft,
    /// Real to complex: the forward transform's first `n / 2 + 1` terms on the last axis.
    Rfft,
    /// Complex to real: the inverse of `Rfft`, the last axis holding `n / 2 + 1` terms.
    Irfft,
}

/// The transform of `x` (real input for `Rfft`, given as complex numbers with zero
/// imaginary parts) over its last `lengths.len()` axes; for `Irfft` the result's real parts
/// are the values (its imaginary parts are 0).
pub fn transform(x: &ArrayD<Complex64>, kind: Kind, lengths: &[usize]) -> ArrayD<Complex64> {
    let rank = x.ndim();
    let first = rank - lengths.len();
    let mut a = x.to_owned();
    match kind {
        Kind::Fft | Kind::Ifft => {
            for ax in first..rank {
                along(&mut a, ax, kind == Kind::Ifft);
            }
            a
        }
        Kind::Rfft => {
            // The last axis first, keeping its first n / 2 + 1 terms; then the others.
            along(&mut a, rank - 1, false);
            let m = lengths[lengths.len() - 1] / 2 + 1;
            let mut a = a.slice_axis(Axis(rank - 1), Slice::from(0..m)).to_owned();
            for ax in first..rank - 1 {
                along(&mut a, ax, false);
            }
            a
        }
        Kind::Irfft => {
            for ax in first..rank - 1 {
                along(&mut a, ax, true);
            }
            // The last axis: the Hermitian extension of its n / 2 + 1 terms, inverted, real.
            let n = lengths[lengths.len() - 1];
            let mut shape = a.shape().to_vec();
            shape[rank - 1] = n;
            let mut out = ArrayD::<Complex64>::zeros(IxDyn(&shape));
            let m = a.shape()[rank - 1];
            for (lane, mut o) in a.lanes(Axis(rank - 1)).into_iter().zip(out.lanes_mut(Axis(rank - 1))) {
                let mut full = vec![Complex64::new(0.0, 0.0); n];
                for (k, f) in full.iter_mut().enumerate() {
                    *f = if k < m {
                        lane[k]
                    } else {
                        // n - k < m for every k >= m (m = n / 2 + 1).
                        lane[n - k].conj()
                    };
                }
                dft(&mut full, true);
                for (o, f) in o.iter_mut().zip(full) {
                    *o = Complex64::new(f.re, 0.0);
                }
            }
            out
        }
    }
}

/// The transform along axis `ax` of every lane, scaled by `1 / n` when `inverse`.
fn along(a: &mut ArrayD<Complex64>, ax: usize, inverse: bool) {
    let n = a.shape()[ax];
    let mut buf = vec![Complex64::new(0.0, 0.0); n];
    for mut lane in a.lanes_mut(Axis(ax)) {
        for (b, &x) in buf.iter_mut().zip(lane.iter()) {
            *b = x;
        }
        dft(&mut buf, inverse);
        for (l, &b) in lane.iter_mut().zip(&buf) {
            *l = b;
        }
    }
}

/// The DFT of `x` in place (`inverse`: the conjugate kernel and a `1 / n` scale).
fn dft(x: &mut [Complex64], inverse: bool) {
    let n = x.len();
    if n <= 1 {
        return;
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    // The twiddles exp(sign 2 pi i k / n), k < n: `(j * k) % n` indexes them exactly.
    let twiddle: Vec<Complex64> =
        (0..n).map(|k| Complex64::from_polar(1.0, sign * 2.0 * PI * k as f64 / n as f64)).collect();
    if n.is_power_of_two() {
        radix2(x, &twiddle);
    } else {
        let y: Vec<Complex64> =
            (0..n).map(|k| (0..n).fold(Complex64::new(0.0, 0.0), |acc, j| acc + x[j] * twiddle[(j * k) % n])).collect();
        x.copy_from_slice(&y);
    }
    if inverse {
        let scale = 1.0 / n as f64;
        x.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Iterative radix-2 Cooley-Tukey on a power-of-two length (bit-reversed order in,
/// natural order out), with `twiddle[k] = exp(sign 2 pi i k / n)`.
fn radix2(x: &mut [Complex64], twiddle: &[Complex64]) {
    let n = x.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            x.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let step = n / len;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let w = twiddle[k * step];
                let (a, b) = (x[start + k], x[start + k + len / 2] * w);
                x[start + k] = a + b;
                x[start + k + len / 2] = a - b;
            }
        }
        len *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(x: &[Complex64], inverse: bool) -> Vec<Complex64> {
        let n = x.len();
        let s = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                let sum = (0..n).fold(Complex64::new(0.0, 0.0), |acc, j| {
                    acc + x[j] * Complex64::from_polar(1.0, s * 2.0 * PI * (j * k) as f64 / n as f64)
                });
                if inverse {
                    sum / n as f64
                } else {
                    sum
                }
            })
            .collect()
    }

    #[test]
    fn radix2_and_direct_sums_agree_with_the_definition() {
        for n in [1usize, 2, 3, 4, 5, 8, 12, 16, 17] {
            let x: Vec<Complex64> =
                (0..n).map(|j| Complex64::new((j as f64 * 0.7).sin(), (j as f64 * 1.3).cos())).collect();
            for inverse in [false, true] {
                let mut y = x.clone();
                dft(&mut y, inverse);
                for (a, b) in y.iter().zip(direct(&x, inverse)) {
                    assert!((a - b).norm() < 1e-12, "n={n} inverse={inverse}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn rfft_then_irfft_is_the_identity() {
        for n in [4usize, 5] {
            let x = ArrayD::from_shape_fn(IxDyn(&[3, n]), |ix| Complex64::new((ix[0] * 7 + ix[1]) as f64 * 0.1, 0.0));
            let r = transform(&x, Kind::Rfft, &[3, n]);
            assert_eq!(r.shape(), &[3, n / 2 + 1]);
            let back = transform(&r, Kind::Irfft, &[3, n]);
            for (a, b) in back.iter().zip(x.iter()) {
                assert!((a - b).norm() < 1e-12);
            }
        }
    }
}
