//! The scalar functions behind remat's elementwise special functions, one definition for
//! every backend: the interpreter maps them over arrays and the JIT calls them from its
//! runtime, so both compute the same bits.
//!
//! [`MathFloat::unary`] and [`MathFloat::binary`] give the function of an op on `f32` or
//! `f64`, or `None` for the ops that backends compute inline (`neg`, `exp`, `add`, ...).
//! Values follow XLA CPU (JAX 0.10.2) at special points: `digamma` is NaN at the poles,
//! `polygamma` needs a non-negative integer order, `erf_inv(±1) = ±inf`, `rem` is C's
//! `fmod`. Elsewhere these are accurate to about an ulp of the dtype: the f32 functions
//! without an f32 libm counterpart are computed in f64 and rounded once.

use remat_ir::{BinaryOp, UnaryOp};

pub mod fenv;
mod special;
mod threefry;

pub use fenv::XlaFloatEnv;
pub use special::{digamma, erf_inv, polygamma};
pub use threefry::{threefry2x32, threefry_bits, threefry_counter, threefry_seed};

/// A float dtype's library functions.
pub trait MathFloat: Copy {
    /// The function of a unary op computed by this library, if it is one.
    fn unary(op: UnaryOp) -> Option<fn(Self) -> Self>;
    /// The function of a binary op computed by this library, if it is one.
    fn binary(op: BinaryOp) -> Option<fn(Self, Self) -> Self>;
}

/// The 16-bit floats' library functions: the `f32` function, rounded once to the storage
/// width (XLA's CPU backend computes each 16-bit operation in `f32`).
macro_rules! narrow_math {
    ($t:ty; unary { $($U:ident => $uf32:expr;)+ } binary { $($B:ident => $bf32:expr;)+ }) => {
        impl MathFloat for $t {
            fn unary(op: UnaryOp) -> Option<fn($t) -> $t> {
                match op {
                    $(UnaryOp::$U => Some(|x: $t| <$t>::from_f32(($uf32)(x.to_f32()))),)+
                    _ => None,
                }
            }
            fn binary(op: BinaryOp) -> Option<fn($t, $t) -> $t> {
                match op {
                    $(BinaryOp::$B => Some(|x: $t, y: $t| <$t>::from_f32(($bf32)(x.to_f32(), y.to_f32()))),)+
                    _ => None,
                }
            }
        }
    };
}

/// Declares which ops are library functions, with each one's `f64` and `f32` definition.
macro_rules! library {
    (
        unary { $($U:ident => $uf64:expr, $uf32:expr;)+ }
        binary { $($B:ident => $bf64:expr, $bf32:expr;)+ }
    ) => {
        impl MathFloat for f64 {
            fn unary(op: UnaryOp) -> Option<fn(f64) -> f64> {
                match op {
                    $(UnaryOp::$U => Some($uf64),)+
                    _ => None,
                }
            }
            fn binary(op: BinaryOp) -> Option<fn(f64, f64) -> f64> {
                match op {
                    $(BinaryOp::$B => Some($bf64),)+
                    _ => None,
                }
            }
        }

        impl MathFloat for f32 {
            fn unary(op: UnaryOp) -> Option<fn(f32) -> f32> {
                match op {
                    $(UnaryOp::$U => Some($uf32),)+
                    _ => None,
                }
            }
            fn binary(op: BinaryOp) -> Option<fn(f32, f32) -> f32> {
                match op {
                    $(BinaryOp::$B => Some($bf32),)+
                    _ => None,
                }
            }
        }

        narrow_math!(remat_ir::bf16; unary { $($U => $uf32;)+ } binary { $($B => $bf32;)+ });
        narrow_math!(remat_ir::f16; unary { $($U => $uf32;)+ } binary { $($B => $bf32;)+ });

        /// The unary ops this library defines.
        pub const UNARY_OPS: &[UnaryOp] = &[$(UnaryOp::$U),+];
        /// The binary ops this library defines.
        pub const BINARY_OPS: &[BinaryOp] = &[$(BinaryOp::$B),+];
    };
}

library! {
    unary {
        Floor => f64::floor, f32::floor;
        Ceil => f64::ceil, f32::ceil;
        Cbrt => libm::cbrt, libm::cbrtf;
        Exp2 => libm::exp2, libm::exp2f;
        Asin => libm::asin, libm::asinf;
        Acos => libm::acos, libm::acosf;
        Atan => libm::atan, libm::atanf;
        Sinh => libm::sinh, libm::sinhf;
        Cosh => libm::cosh, libm::coshf;
        Asinh => libm::asinh, libm::asinhf;
        Acosh => acosh, |x| if x < 1.0 { f32::NAN } else { libm::acoshf(x) };
        Atanh => libm::atanh, libm::atanhf;
        Erf => libm::erf, libm::erff;
        Erfc => libm::erfc, libm::erfcf;
        ErfInv => erf_inv, |x| erf_inv(x as f64) as f32;
        Lgamma => libm::lgamma, |x| libm::lgamma(x as f64) as f32;
        Digamma => digamma, |x| digamma(x as f64) as f32;
    }
    binary {
        Rem => libm::fmod, libm::fmodf;
        Atan2 => libm::atan2, libm::atan2f;
        Nextafter => libm::nextafter, libm::nextafterf;
        Polygamma => polygamma, |m, x| polygamma(m as f64, x as f64) as f32;
    }
}

/// `acosh`, NaN below 1 (where libm's gives a number).
fn acosh(x: f64) -> f64 {
    if x < 1.0 {
        f64::NAN
    } else {
        libm::acosh(x)
    }
}

/// `round[rounding_method=0]` (halves away from zero) or `=1` (halves to even).
pub fn round_f64(x: f64, to_even: bool) -> f64 {
    if to_even {
        x.round_ties_even()
    } else {
        x.round()
    }
}

/// [`round_f64`] on `f32`.
pub fn round_f32(x: f32, to_even: bool) -> f32 {
    if to_even {
        x.round_ties_even()
    } else {
        x.round()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_op_has_both_definitions() {
        for &op in UNARY_OPS {
            assert!(f64::unary(op).is_some() && f32::unary(op).is_some(), "{op:?}");
        }
        for &op in BINARY_OPS {
            assert!(f64::binary(op).is_some() && f32::binary(op).is_some(), "{op:?}");
        }
        assert!(f32::unary(UnaryOp::Exp).is_none());
        assert!(f64::binary(BinaryOp::Add).is_none());
    }

    #[test]
    fn acosh_is_nan_below_one() {
        assert!(f64::unary(UnaryOp::Acosh).unwrap()(0.5).is_nan());
        assert!(f32::unary(UnaryOp::Acosh).unwrap()(-100.5).is_nan());
        assert_eq!(f32::unary(UnaryOp::Acosh).unwrap()(1.0), 0.0);
    }

    #[test]
    fn rem_is_fmod_and_round_has_both_methods() {
        let rem = f64::binary(BinaryOp::Rem).unwrap();
        assert_eq!(rem(7.5, -2.0), 1.5);
        assert_eq!(rem(-7.5, 2.0), -1.5);
        assert!(rem(1.0, 0.0).is_nan() && rem(f64::INFINITY, 2.0).is_nan());
        assert_eq!(rem(1.0, f64::INFINITY), 1.0);
        let halves = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5];
        assert_eq!(halves.map(|x| round_f64(x, false)), [1.0, 2.0, 3.0, -1.0, -2.0, -3.0]);
        assert_eq!(halves.map(|x| round_f32(x as f32, true)), [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]);
        assert!(round_f32(-0.5, true).is_sign_negative());
    }
}
