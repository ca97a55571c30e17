//! The elementwise functions XLA's CPU backend computes inline (`exp`, `log`, `tanh`, ...), on
//! `f32` and `f64`, as its instruction sequences treat subnormals: the interpreter's
//! definition, and the JIT's runtime for the `f64` ones (its `f32` code is inline and
//! follows the same rules, `codegen/math.rs`).
//!
//! Each is the platform's function with XLA's float environment made explicit ([`Flush`]),
//! so the result does not depend on the caller's MXCSR: an operand that XLA's code reads
//! with an arithmetic instruction is DAZ'd (`log` of a subnormal is `-inf`, `floor(-1e-40)`
//! is `-0`), a result it writes with one is FTZ'd (`exp(-88)` is `0`), and where XLA's code
//! returns the operand itself for tiny `|x|` (`expm1`, `sin`, `tan`, and `tanh` of `f32`
//! below 4e-4: a select, or libm's small-argument path) so does remat, subnormals included. `exp2` is `exp(x * ln 2)`, JAX's
//! lowering of `exp2_p`.

use crate::flush::Flush;

/// The float dtypes, with the platform's functions.
pub trait Elementary: Flush + std::ops::Neg<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
    const LN_2: Self;
    /// The smallest normal number: below it in magnitude, a value is zero or subnormal.
    const MIN_NORMAL: Self;
    /// Below this magnitude XLA's `tanh` returns its operand (`f32`; none for `f64`, whose
    /// `tanh` XLA computes without that select).
    const TANH_IDENTITY_BELOW: Option<Self>;
    fn abs_value(self) -> Self;
    fn add(self, y: Self) -> Self;
    fn mul(self, y: Self) -> Self;
    fn div(self, y: Self) -> Self;
    fn std_exp(self) -> Self;
    fn std_ln(self) -> Self;
    fn std_ln_1p(self) -> Self;
    fn std_exp_m1(self) -> Self;
    fn std_sin(self) -> Self;
    fn std_cos(self) -> Self;
    fn std_tan(self) -> Self;
    fn std_tanh(self) -> Self;
    fn std_sqrt(self) -> Self;
    fn std_powf(self, y: Self) -> Self;
}

macro_rules! elementary_impl {
    ($t:ident, $tanh_identity:expr) => {
        impl Elementary for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const LN_2: $t = std::$t::consts::LN_2;
            const MIN_NORMAL: $t = $t::MIN_POSITIVE;
            const TANH_IDENTITY_BELOW: Option<$t> = $tanh_identity;
            fn abs_value(self) -> $t {
                self.abs()
            }
            fn add(self, y: $t) -> $t {
                self + y
            }
            fn mul(self, y: $t) -> $t {
                self * y
            }
            fn div(self, y: $t) -> $t {
                self / y
            }
            fn std_exp(self) -> $t {
                self.exp()
            }
            fn std_ln(self) -> $t {
                self.ln()
            }
            fn std_ln_1p(self) -> $t {
                self.ln_1p()
            }
            fn std_exp_m1(self) -> $t {
                self.exp_m1()
            }
            fn std_sin(self) -> $t {
                self.sin()
            }
            fn std_cos(self) -> $t {
                self.cos()
            }
            fn std_tan(self) -> $t {
                self.tan()
            }
            fn std_tanh(self) -> $t {
                self.tanh()
            }
            fn std_sqrt(self) -> $t {
                self.sqrt()
            }
            fn std_powf(self, y: $t) -> $t {
                self.powf(y)
            }
        }
    };
}

// XLA's f32 tanh: `select(|x| < 0.0004, x, rational approximation)`.
elementary_impl!(f32, Some(0.0004));
elementary_impl!(f64, None);

/// Whether `|x|` is below the smallest normal number: a zero or a subnormal (not NaN).
fn tiny<T: Elementary>(x: T) -> bool {
    x.abs_value() < T::MIN_NORMAL
}

/// `e^x`; a subnormal result is zero (`exp(-88f32) = 0`).
pub fn exp<T: Elementary>(x: T) -> T {
    x.std_exp().ftz()
}

/// `2^x` as JAX lowers it, `exp(x * ln 2)` in the dtype (`exp2(-126f32) = 0`: the
/// product rounds below `-126 ln 2`).
pub fn exp2<T: Elementary>(x: T) -> T {
    exp(x.daz().mul(T::LN_2).ftz())
}

/// `ln x` of the DAZ'd operand: `-inf` for a subnormal of either sign.
pub fn log<T: Elementary>(x: T) -> T {
    x.daz().std_ln()
}

/// `ln(1 + x)`; a subnormal operand is a zero of its sign.
pub fn log1p<T: Elementary>(x: T) -> T {
    x.daz().std_ln_1p().ftz()
}

/// `e^x - 1`; the operand itself where it is tiny (XLA's select), subnormals included.
pub fn expm1<T: Elementary>(x: T) -> T {
    if tiny(x) {
        x
    } else {
        x.std_exp_m1().ftz()
    }
}

/// `sin x`; the operand itself where it is tiny, as XLA's (`llvm.sin`'s) small-argument path.
pub fn sin<T: Elementary>(x: T) -> T {
    if tiny(x) {
        x
    } else {
        x.std_sin().ftz()
    }
}

/// `cos x` of the DAZ'd operand.
pub fn cos<T: Elementary>(x: T) -> T {
    x.daz().std_cos()
}

/// `tan x`; the operand itself where it is tiny (`llvm.tan`'s small-argument path).
pub fn tan<T: Elementary>(x: T) -> T {
    if tiny(x) {
        x
    } else {
        x.std_tan().ftz()
    }
}

/// `tanh x`: for `f32` the operand itself below 4e-4 (XLA's select, subnormals included);
/// for `f64` of the DAZ'd operand (a subnormal gives a zero).
pub fn tanh<T: Elementary>(x: T) -> T {
    match T::TANH_IDENTITY_BELOW {
        Some(limit) if x.abs_value() < limit => x,
        _ => x.daz().std_tanh().ftz(),
    }
}

/// `1 / (1 + e^-x)`, XLA's expansion: a subnormal quotient is zero (`logistic(-88f32) = 0`).
pub fn logistic<T: Elementary>(x: T) -> T {
    let e = exp(-x.daz());
    T::ONE.div(T::ONE.add(e)).ftz()
}

/// `sqrt x` of the DAZ'd operand (`sqrt(-1e-40) = -0`).
pub fn sqrt<T: Elementary>(x: T) -> T {
    x.daz().std_sqrt()
}

/// `1 / sqrt x` of the DAZ'd operand (a subnormal gives an infinity of its sign).
pub fn rsqrt<T: Elementary>(x: T) -> T {
    T::ONE.div(sqrt(x))
}

/// `x * x` under DAZ and FTZ.
pub fn square<T: Elementary>(x: T) -> T {
    let x = x.daz();
    x.mul(x).ftz()
}

/// `sign x` of the DAZ'd operand: ±1, or the zero (of a subnormal's sign) or NaN itself.
pub fn sign<T: Elementary>(x: T) -> T {
    let x = x.daz();
    if x > T::ZERO {
        T::ONE
    } else if x < T::ZERO {
        -T::ONE
    } else {
        x
    }
}

/// `x ** y` (glibc's `pow`) of the DAZ'd operands, its subnormal results zero.
pub fn pow<T: Elementary>(x: T, y: T) -> T {
    x.daz().std_powf(y.daz()).ftz()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: f32 = 1e-40;

    fn bits(x: f32) -> u32 {
        x.to_bits()
    }

    /// Values from `tests/data/underflow/cases.json` (JAX 0.10.2 on CPU).
    #[test]
    fn subnormals_as_jax_computes_them() {
        assert_eq!(bits(exp(-88.0f32)), 0);
        assert_eq!(exp(SUB), 1.0);
        assert_eq!([-126.5f32, -130.0, -149.0, -126.0].map(|x| bits(exp2(x))), [0; 4]);
        assert_eq!(log(SUB), f32::NEG_INFINITY);
        assert_eq!(log(-SUB), f32::NEG_INFINITY);
        assert_eq!(bits(log1p(-SUB)), 0x8000_0000);
        assert_eq!(bits(expm1(-SUB)), bits(-SUB));
        assert_eq!(bits(sin(SUB)), bits(SUB));
        assert_eq!(bits(tan(-SUB)), bits(-SUB));
        assert_eq!(sin(-1e-310f64).to_bits(), (-1e-310f64).to_bits());
        assert_eq!(bits(tanh(-SUB)), bits(-SUB));
        assert_eq!(bits(tanh(0.0003f32)), bits(0.0003));
        assert_eq!(tanh(-1e-310f64).to_bits(), 0x8000_0000_0000_0000);
        assert_eq!(bits(logistic(-88.0f32)), 0);
        assert_eq!(bits(sqrt(-SUB)), 0x8000_0000);
        assert_eq!(rsqrt(SUB), f32::INFINITY);
        assert_eq!([SUB, -SUB, 1e-45, 0.5].map(|x| bits(sign(x))), [0, 0x8000_0000, 0, bits(1.0)]);
        assert!(sign(f32::NAN).is_nan());
        assert_eq!(bits(square(1e-20f32)), 0);
        assert_eq!(pow(SUB, 2.0f32), 0.0);
    }
}
