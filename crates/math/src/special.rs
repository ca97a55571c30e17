//! `digamma`, `polygamma` (through the Hurwitz zeta function) and `erf_inv` in `f64`,
//! with XLA's values at the poles and domain edges (measured on JAX 0.10.2).

use std::f64::consts::PI;

/// `(2j)! / B_2j` for j = 1..=12 (Cephes' and XLA's table for the Euler-Maclaurin tail of
/// zeta).
const FACTORIAL_OVER_BERNOULLI: [f64; 12] = [
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.892_437_580_318_379_2e9,
    7.47242496e10,
    -2.950_130_727_918_164e12,
    1.164_678_281_435_006_7e14,
    -4_597_978_722_407_473.0,
    1.815_210_540_194_354_7e17,
    -7.166_165_256_175_667e18,
];

/// ψ(x), the logarithmic derivative of Γ. XLA gives NaN at 0 and the negative integers
/// (not ±inf), and at `-inf`.
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        // Reflection: ψ(x) = ψ(1 - x) - π / tan(πx), with tan's period taken out first.
        let frac = x - x.round(); // exact
        return digamma(1.0 - x) - PI / (PI * frac).tan();
    }
    // Recurrence ψ(x) = ψ(x + 1) - 1/x up to x >= 10, then the asymptotic series (its
    // first omitted term is below 1e-17 there).
    let mut acc = 0.0;
    let mut x = x;
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    // Σ B_2k / (2k x^2k) for k = 1..=6.
    let series = r
        * (1.0 / 12.0
            - r * (1.0 / 120.0 - r * (1.0 / 252.0 - r * (1.0 / 240.0 - r * (1.0 / 132.0 - r * (691.0 / 32760.0))))));
    acc + x.ln() - 0.5 / x - series
}

/// ψ⁽ᵐ⁾(x) for a non-negative integer order `m` (NaN otherwise, as XLA): `digamma` for
/// `m = 0`, else `(-1)^(m+1) m! ζ(m+1, x)`.
pub fn polygamma(m: f64, x: f64) -> f64 {
    if m.is_nan() || x.is_nan() || m < 0.0 || m != m.floor() || m.is_infinite() {
        return f64::NAN;
    }
    if m == 0.0 {
        return digamma(x);
    }
    let sign = if m % 2.0 == 0.0 { -1.0 } else { 1.0 };
    let factorial = libm::tgamma(m + 1.0);
    sign * factorial * hurwitz_zeta(m + 1.0, x)
}

/// ζ(s, q) = Σ_k (q + k)^-s for an integer `s >= 2`, as XLA computes it. At the poles (q a non-positive
/// integer, or `-inf`) it is `inf` for even `s` and NaN for odd `s` (the terms' signs
/// disagree there), and NaN at `q = inf`, as XLA's `Zeta`.
fn hurwitz_zeta(s: f64, q: f64) -> f64 {
    if q == f64::INFINITY {
        return f64::NAN;
    }
    if q <= 0.0 && q == q.floor() {
        return if s % 2.0 == 0.0 { f64::INFINITY } else { f64::NAN };
    }
    // XLA's evaluation: ten direct terms, then the Euler-Maclaurin tail at a = q + 10 with
    // all twelve Bernoulli terms. It is accurate for q > -8 or so; further left it gives what
    // XLA gives (not ζ), and it always takes the same, bounded time.
    let mut sum = 0.0;
    for k in 0..10 {
        sum += (q + k as f64).powf(-s);
    }
    let a = q + 10.0;
    let b = a.powf(-s);
    let mut tail = b * a / (s - 1.0) + 0.5 * b;
    // Σ_j s(s+1)…(s+2j-2) · a^(-s-2j+1) / ((2j)!/B_2j).
    let (mut rising, mut power, mut k) = (1.0, b, 0.0);
    for c in FACTORIAL_OVER_BERNOULLI {
        rising *= s + k;
        power /= a;
        tail += rising * power / c;
        k += 1.0;
        rising *= s + k;
        power /= a;
        k += 1.0;
    }
    sum + tail
}

/// The inverse of `erf` on `[-1, 1]`: `±inf` at `±1`, NaN outside. Giles' single-precision
/// approximation ("Approximating the erfinv function", the one XLA uses for f32) refined
/// by two Halley steps on `erf` (or `erfc` near ±1, where `1 - |x|` is exact).
pub fn erf_inv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return x * f64::INFINITY;
    }
    if x == 0.0 {
        return x;
    }
    let mut w = -((1.0 - x) * (1.0 + x)).ln();
    let p = if w < 5.0 {
        w -= 2.5;
        [
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ]
        .iter()
        .fold(0.0, |p, c| c + p * w)
    } else {
        w = w.sqrt() - 3.0;
        [
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ]
        .iter()
        .fold(0.0, |p, c| c + p * w)
    };
    let (a, mut y) = (x.abs(), (p * x).abs());
    for _ in 0..2 {
        // f(y) = erf(y) - a, computed as (1 - a) - erfc(y) near 1 to keep its digits.
        let f = if a > 0.5 { (1.0 - a) - libm::erfc(y) } else { libm::erf(y) - a };
        let df = 2.0 / PI.sqrt() * (-y * y).exp();
        if df == 0.0 || !f.is_finite() {
            break;
        }
        // Halley: f'' = -2y f'.
        y -= f / (df + y * f);
    }
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    // Reference values printed by JAX 0.10.2 with x64 enabled.
    #[test]
    fn digamma_matches_jax() {
        for (x, want) in [
            (-2.5, 1.10315664e+00),
            (1e-30, -1e30),
            (1e-8, -1.00000001e+08),
            (0.5, -1.96351003e+00),
            (1.0, -5.77215665e-01),
            (2.5, 7.03156641e-01),
            (10.0, 2.25175259e+00),
            (1e5, 1.15129205e+01),
            (1e30, 6.90775528e+01),
            (-1e-8, 9.99999994e+07),
            (-0.3, 2.11330978e+00),
        ] {
            assert!(close(digamma(x), want, 1e-8), "digamma({x}) = {} != {want}", digamma(x));
        }
        // Within a few ulps at 1, 2 and 1/2: -γ, 1 - γ and -γ - 2 ln 2.
        let euler = 0.577_215_664_901_532_9_f64;
        for (x, want) in [(1.0, -euler), (2.0, 1.0 - euler), (0.5, -euler - 2.0 * std::f64::consts::LN_2)] {
            assert!(close(digamma(x), want, 4e-15), "digamma({x}) = {} != {want}", digamma(x));
        }
        for x in [0.0, -0.0, -1.0, -2.0, -1e30, f64::NEG_INFINITY, f64::NAN] {
            assert!(digamma(x).is_nan(), "digamma({x})");
        }
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn polygamma_matches_jax() {
        for (m, x, want) in [
            (1.0, -2.5, 9.53924664e+00),
            (1.0, 1e-30, 1e60),
            (1.0, 0.5, 4.93480220e+00),
            (1.0, 1.0, 1.64493407e+00),
            (1.0, 2.5, 4.90357756e-01),
            (1.0, 1e5, 1.00000500e-05),
            (1.0, 1e30, 1e-30),
            (1.0, -0.3, 1.39451603e+01),
            (2.0, -2.5, -1.08204052e-01),
            (2.0, 1e-8, -2.0e24),
            (2.0, 0.5, -1.68287966e+01),
            (2.0, 1.0, -2.40411381e+00),
            (2.0, 10.0, -1.10498350e-02),
            (2.0, -0.3, 6.76390812e+01),
            (0.0, 2.5, 7.03156641e-01),
            // Far left of 0, XLA's fixed-length evaluation is not ψ⁽ᵐ⁾, and this is what it gives.
            (1.0, -100.5, -9.90090922e-03),
            (1.0, -20.3, -4.80676702e-02),
            (2.0, -20.3, -2.31005670e-03),
            (3.0, -0.5, 1.93409091e+02),
            (1.0, -1e10 + 0.5, -1.0e-10),
        ] {
            assert!(close(polygamma(m, x), want, 1e-8), "polygamma({m}, {x}) = {} != {want}", polygamma(m, x));
        }
        assert_eq!(polygamma(1.0, 0.0), f64::INFINITY);
        assert_eq!(polygamma(1.0, -2.0), f64::INFINITY);
        assert_eq!(polygamma(1.0, f64::NEG_INFINITY), f64::INFINITY);
        for (m, x) in [(2.0, 0.0), (2.0, -1.0), (1.0, f64::INFINITY), (1.5, 1.0), (-1.0, 1.0), (1.0, f64::NAN)] {
            assert!(polygamma(m, x).is_nan(), "polygamma({m}, {x})");
        }
    }

    #[test]
    fn erf_inv_inverts_erf_and_matches_jax_at_the_edges() {
        for (x, want) in
            [(0.5, 4.76936276e-01), (0.999999, 3.45891074e+00), (-0.9999999, -3.76656258e+00), (1e-30, 8.86226925e-31)]
        {
            assert!(close(erf_inv(x), want, 1e-8), "erf_inv({x}) = {} != {want}", erf_inv(x));
        }
        for i in 1..2000 {
            let x = -1.0 + i as f64 / 1000.0;
            assert!(close(libm::erf(erf_inv(x)), x, 1e-14) || (x.abs() < 1e-12), "erf(erf_inv({x}))");
        }
        assert_eq!(erf_inv(1.0), f64::INFINITY);
        assert_eq!(erf_inv(-1.0), f64::NEG_INFINITY);
        assert!(erf_inv(1.5).is_nan() && erf_inv(f64::NAN).is_nan());
        assert!(erf_inv(-0.0).is_sign_negative());
    }
}
