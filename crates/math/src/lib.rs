//! The scalar functions behind remat's elementwise special functions, one definition for
//! every backend: the interpreter maps them over arrays and the JIT calls them from its
//! runtime, so both compute the same bits. `element` does the same for what both do with
//! an element outside arithmetic: its identities, XLA's `max`/`min` and conversions, and the
//! element rules of sorting, `argmin`, the cumulative reductions and gather/scatter starts.
//!
//! [`MathFloat::unary`] and [`MathFloat::binary`] give the function of an op on `f32` or
//! `f64`, or `None` for the ops that backends compute inline (`neg`, `exp`, `add`, ...).
//! Values follow XLA CPU (JAX 0.10.2) at special points: `digamma` is NaN at the poles,
//! `polygamma` needs a non-negative integer order, `erf_inv(±1) = ±inf`, `rem` is C's
//! `fmod`. Elsewhere these are accurate to about an ulp of the dtype: the f32 functions
//! without an f32 libm counterpart are computed in f64 and rounded once. Where subnormals
//! arise they give XLA's bits (`flush`: what XLA's float environment does to the operands
//! and results of its own instruction sequences, and `elementary`, the functions backends
//! compute inline, with the same rules).

use remat_ir::{BinaryOp, UnaryOp};

pub mod arrays;
pub mod complex;
pub mod element;
pub mod elementary;
pub mod fenv;
pub mod fft;
pub mod flush;
pub mod linalg;
mod rng_bit_generator;
mod special;
mod threefry;

pub use fenv::XlaFloatEnv;
pub use flush::{maximum, minimum, Flush};
pub use rng_bit_generator::{philox4x32, rbg_key_of_state, rbg_state_of_key, rng_bit_generator, rng_bit_generator_key};
pub use special::{
    bessel_i0e, bessel_i1e, digamma, erf_inv, igamma, igamma_grad_a, igammac, polygamma, random_gamma_grad,
    regularized_incomplete_beta, zeta, Limits,
};
pub use threefry::{iota_2x32, threefry2x32, threefry2x32_arrays, threefry_bits, threefry_counter, threefry_seed};

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
                    $(UnaryOp::$U => Some(|x: $t| {
                        let f: fn(f32) -> f32 = $uf32;
                        <$t>::from_f32(f(x.to_f32()))
                    }),)+
                    _ => None,
                }
            }
            fn binary(op: BinaryOp) -> Option<fn($t, $t) -> $t> {
                match op {
                    $(BinaryOp::$B => Some(|x: $t, y: $t| {
                        let f: fn(f32, f32) -> f32 = $bf32;
                        <$t>::from_f32(f(x.to_f32(), y.to_f32()))
                    }),)+
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
        Floor => |x| x.daz().floor(), |x| x.daz().floor();
        Ceil => |x| x.daz().ceil(), |x| x.daz().ceil();
        Cbrt => |x| daz_ftz(libm::cbrt, x), |x| daz_ftz(libm::cbrtf, x);
        Exp2 => elementary::exp2, elementary::exp2;
        Asin => |x| daz_ftz(libm::asin, x), |x| daz_ftz(libm::asinf, x);
        Acos => |x| libm::acos(x.daz()), |x| libm::acosf(x.daz());
        Atan => |x| identity_if_tiny(libm::atan, x), |x| identity_if_tiny(libm::atanf, x);
        Sinh => |x| daz_ftz(libm::sinh, x), |x| daz_ftz(libm::sinhf, x);
        Cosh => |x| libm::cosh(x.daz()), |x| libm::coshf(x.daz());
        Asinh => |x| daz_ftz(libm::asinh, x), |x| daz_ftz(libm::asinhf, x);
        Acosh => |x| acosh(x.daz()), |x| if x < 1.0 { f32::NAN } else { libm::acoshf(x) };
        Atanh => |x| daz_ftz(libm::atanh, x), |x| daz_ftz(libm::atanhf, x);
        Erf => |x| daz_ftz(libm::erf, x), |x| daz_ftz(libm::erff, x);
        Erfc => |x| daz_ftz(libm::erfc, x), |x| daz_ftz(libm::erfcf, x);
        ErfInv => |x| daz_ftz(erf_inv, x), |x| daz_ftz(|x| erf_inv(f64::from(x)) as f32, x);
        Lgamma => |x| daz_ftz(libm::lgamma, x), |x| daz_ftz(|x| libm::lgamma(f64::from(x)) as f32, x);
        Digamma => |x| daz_ftz(digamma, x), |x| daz_ftz(|x| digamma(f64::from(x)) as f32, x);
        BesselI0e => |x| daz_ftz(bessel_i0e, x), |x| daz_ftz(|x| bessel_i0e(f64::from(x)) as f32, x);
        BesselI1e => |x| daz_ftz(bessel_i1e, x), |x| daz_ftz(|x| bessel_i1e(f64::from(x)) as f32, x);
    }
    binary {
        Rem => |x, y| libm::fmod(x, y.daz()), |x, y| libm::fmodf(x, y.daz());
        Atan2 => |y, x| in_xla_env(|| libm::atan2(y, x)), |y, x| in_xla_env(|| libm::atan2f(y, x));
        Nextafter => nextafter, nextafter;
        Polygamma => |m, x| polygamma(m.daz(), x.daz()).ftz(),
            |m, x| (polygamma(f64::from(m.daz()), f64::from(x.daz())) as f32).ftz();
        Igamma => |a, x| igamma(a.daz(), x.daz(), Limits::F64).ftz(), |a, x| f32_of(igamma, a, x);
        Igammac => |a, x| igammac(a.daz(), x.daz(), Limits::F64).ftz(), |a, x| f32_of(igammac, a, x);
        IgammaGradA => |a, x| igamma_grad_a(a.daz(), x.daz(), Limits::F64).ftz(), |a, x| f32_of(igamma_grad_a, a, x);
        Zeta => |s, q| zeta(s.daz(), q.daz()).ftz(), |s, q| (zeta(f64::from(s.daz()), f64::from(q.daz())) as f32).ftz();
    }
}

/// A function of two floats and a dtype's [`Limits`] on `f32` operands: computed in `f64`
/// with `f32`'s limits, rounded once, on DAZ'd operands and FTZ'd.
fn f32_of(f: fn(f64, f64, Limits) -> f64, a: f32, x: f32) -> f32 {
    (f(f64::from(a.daz()), f64::from(x.daz()), Limits::F32) as f32).ftz()
}

/// `regularized_incomplete_beta` of one element of a float dtype, as XLA computes it: on
/// DAZ'd operands (`Element::to_f64`), in `f64` with `f64`'s limits for `f64` and `f32`'s for
/// the others (XLA computes the 16-bit floats in `f32`), rounded once (FTZ'd).
pub fn betainc<T: element::Element>(a: T, b: T, x: T) -> T {
    let lim = if T::DTYPE == remat_ir::DType::F64 { Limits::F64 } else { Limits::F32 };
    let r = regularized_incomplete_beta(a.to_f64(), b.to_f64(), x.to_f64(), lim);
    if T::DTYPE == remat_ir::DType::F64 {
        T::from_f64(r.ftz())
    } else {
        T::from_f64(f64::from(r as f32))
    }
}

/// `f` as XLA's code computes it: a subnormal operand read as a zero of its sign, a
/// subnormal result written as one (the rule for every function XLA computes with its own
/// arithmetic: `erf(1e-40) = 0`, `lgamma(1e-40) = inf`, `erfc(10) = 0`).
fn daz_ftz<T: Flush>(f: fn(T) -> T, x: T) -> T {
    f(x.daz()).ftz()
}

/// `f`, but the operand itself where it is zero or subnormal: XLA's `atan` is libm's
/// `atan2f(x, 1)`, whose first test returns a tiny `x` as it is.
fn identity_if_tiny<T: Flush + Default>(f: fn(T) -> T, x: T) -> T {
    if x.daz() == T::default() {
        x
    } else {
        f(x).ftz()
    }
}

/// A bit-level libm function run as XLA runs it on CPU, inside its float environment: XLA's
/// `atan2` is a call of the platform's `atan2f`, whose tests read bits (`atan2(1e-40, 0) =
/// pi/2`, `atan2(1e-40, 1) = 1e-40`) and whose arithmetic flushes (`atan2(3e-40, 2e-40)`
/// divides zero by zero: NaN); libm's `atan2` is the same algorithm.
fn in_xla_env<T>(f: impl FnOnce() -> T) -> T {
    let _env = XlaFloatEnv::enter();
    f()
}

/// `nextafter` as XLA computes it: bit arithmetic (a subnormal steps to its neighbour), but
/// `x == y` is a compare, which reads subnormals as zeros: then the result is `y`.
fn nextafter<T: Flush + NextAfter>(x: T, y: T) -> T {
    if x.daz() == y.daz() {
        y
    } else {
        T::next_after(x, y)
    }
}

/// libm's `nextafter` for each float dtype.
trait NextAfter {
    fn next_after(x: Self, y: Self) -> Self;
}

impl NextAfter for f32 {
    fn next_after(x: f32, y: f32) -> f32 {
        libm::nextafterf(x, y)
    }
}

impl NextAfter for f64 {
    fn next_after(x: f64, y: f64) -> f64 {
        libm::nextafter(x, y)
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

/// `round[rounding_method=0]` (halves away from zero) or `=1` (halves to even), of the
/// DAZ'd operand.
pub fn round_f64(x: f64, to_even: bool) -> f64 {
    let x = x.daz();
    if to_even {
        x.round_ties_even()
    } else {
        x.round()
    }
}

/// [`round_f64`] on `f32`.
pub fn round_f32(x: f32, to_even: bool) -> f32 {
    let x = x.daz();
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

    /// JAX 0.10.2's bits on CPU (`tests/data/underflow/measure_functions.py`).
    #[test]
    fn library_functions_treat_subnormals_as_jax() {
        let sub = 1e-40f32;
        let u = |op, x: f32| f32::unary(op).unwrap()(x).to_bits();
        let b = |op, x: f32, y: f32| f32::binary(op).unwrap()(x, y).to_bits();
        let neg = |x: f32| (-x).to_bits();
        // DAZ'd operands, FTZ'd results.
        for op in [UnaryOp::Asin, UnaryOp::Sinh, UnaryOp::Asinh, UnaryOp::Atanh, UnaryOp::Erf, UnaryOp::ErfInv] {
            assert_eq!((u(op, sub), u(op, -sub)), (0, 0x8000_0000), "{op:?}");
        }
        assert_eq!([u(UnaryOp::Floor, -sub), u(UnaryOp::Ceil, sub)], [0x8000_0000, 0]);
        assert_eq!(u(UnaryOp::Lgamma, sub), f32::INFINITY.to_bits());
        assert!(f32::unary(UnaryOp::Digamma).unwrap()(sub).is_nan());
        assert_eq!([u(UnaryOp::Cosh, sub), u(UnaryOp::Erfc, -sub)], [1f32.to_bits(); 2]);
        assert_eq!(u(UnaryOp::Erfc, 10.0), 0, "erfc(10) is subnormal: 0");
        // atan returns a tiny operand itself.
        assert_eq!((u(UnaryOp::Atan, sub), u(UnaryOp::Atan, -sub)), (sub.to_bits(), neg(sub)));
        // rem: the divisor is DAZ'd (a subnormal one gives NaN), the rest is exact.
        assert_eq!(b(BinaryOp::Rem, sub, 1.0), sub.to_bits());
        assert_eq!(b(BinaryOp::Rem, 1.5e-38, 1.4e-38), 0x000A_E398);
        assert!(f32::binary(BinaryOp::Rem).unwrap()(5.0, sub).is_nan());
        // atan2: libm's, in XLA's float environment.
        assert_eq!(b(BinaryOp::Atan2, sub, 1.0), sub.to_bits());
        assert_eq!(b(BinaryOp::Atan2, sub, 0.0), std::f32::consts::FRAC_PI_2.to_bits());
        assert_eq!(b(BinaryOp::Atan2, 5.0, sub), std::f32::consts::FRAC_PI_2.to_bits());
        assert_eq!(b(BinaryOp::Atan2, -0.0, 0.0), 0x8000_0000);
        assert!(f32::binary(BinaryOp::Atan2).unwrap()(3e-40, 2e-40).is_nan());
        // nextafter steps bits, but returns y where x == y under DAZ.
        assert_eq!(b(BinaryOp::Nextafter, sub, 1.0), 0x0001_16C3);
        assert_eq!(b(BinaryOp::Nextafter, -sub, 1.0), 0x8001_16C1);
        assert_eq!(b(BinaryOp::Nextafter, sub, 3e-40), 3e-40f32.to_bits());
        assert_eq!(b(BinaryOp::Nextafter, 0.0, 1.0), 1);
        assert_eq!(u(UnaryOp::Exp2, -126.0), 0);
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
