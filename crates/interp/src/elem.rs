//! The dtypes as Rust types: one trait impl per dtype, and macros that pick the Rust type
//! for a runtime [`DType`], so that each rule is written once, generically.
//!
//! Integer arithmetic here is XLA's: `+`, `-`, `*` wrap around; `x / 0` is all ones (`-1`
//! signed, the maximum unsigned) and `MIN / -1` is `MIN` (XLA's documented results), so no
//! operation panics. `bf16` and `f16` compute in `f32` and round to their own width at each
//! operation's result, as XLA does on CPU. Keys (`key<fry>`) are elements only for the
//! structural rules (reshape, slice, select, ...); the shape rules keep them out of
//! arithmetic and conversions.
//!
//! Floats compute in XLA's float environment (the evaluation runs under
//! `remat_math::XlaFloatEnv`, so each arithmetic instruction flushes as XLA's does); what
//! is not one instruction says so itself: `max`/`min`, conversions and the functions are
//! `remat_math`'s, with DAZ and FTZ on bits.

use std::ops::{Add, Div, Mul, Neg, Sub};

use ndarray::{ArrayD, IxDyn};
use remat_ir::{bf16, c128, c64, f16, Array, PrngKey};
pub(crate) use remat_math::arrays::{broadcast_shapes, zip_with};
use remat_math::complex::ComplexElement;
use remat_math::element::Element;
use remat_math::elementary;

/// An element type of an [`Array`]: the element rules both backends share
/// ([`Element`]: identities, XLA's `max`/`min`, compares and conversions through `f64`)
/// and the interpreter's own link to [`Array`] and exact integer conversions.
pub(crate) trait Elem: Element {
    /// Integers and `bool` as an exact `i128` (`None` for floats and keys), so that
    /// integer-to-integer conversions are exact and wrap as XLA's do.
    fn to_i128(self) -> Option<i128> {
        None
    }
    /// `convert_element_type` from an integer: integers wrap to their width, `bool` is
    /// `x != 0`, floats round.
    fn from_i128(x: i128) -> Self {
        Self::from_f64(x as f64)
    }
}

/// The numeric dtypes (floats and integers), with XLA's arithmetic.
pub(crate) trait Num: Elem {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn div(self, other: Self) -> Self;
}

/// The float dtypes, with their own-precision math.
pub(crate) trait Float:
    Num
    + remat_math::MathFloat
    + Neg<Output = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
{
    fn abs(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn sqrt(self) -> Self;
    fn rsqrt(self) -> Self;
    fn sign(self) -> Self;
    fn square(self) -> Self;
    fn logistic(self) -> Self;
    fn powf(self, y: Self) -> Self;
}

macro_rules! float_impls {
    ($t:ident, $variant:ident) => {
        impl Elem for $t {}

        impl Num for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            fn add(self, other: $t) -> $t {
                self + other
            }
            fn sub(self, other: $t) -> $t {
                self - other
            }
            fn mul(self, other: $t) -> $t {
                self * other
            }
            fn div(self, other: $t) -> $t {
                self / other
            }
        }

        /// The functions as XLA computes them where subnormals arise (`remat_math::elementary`).
        impl Float for $t {
            fn abs(self) -> $t {
                $t::abs(self)
            }
            fn exp(self) -> $t {
                elementary::exp(self)
            }
            fn ln(self) -> $t {
                elementary::log(self)
            }
            fn ln_1p(self) -> $t {
                elementary::log1p(self)
            }
            fn exp_m1(self) -> $t {
                elementary::expm1(self)
            }
            fn sin(self) -> $t {
                elementary::sin(self)
            }
            fn cos(self) -> $t {
                elementary::cos(self)
            }
            fn tan(self) -> $t {
                elementary::tan(self)
            }
            fn tanh(self) -> $t {
                elementary::tanh(self)
            }
            fn sqrt(self) -> $t {
                elementary::sqrt(self)
            }
            fn rsqrt(self) -> $t {
                elementary::rsqrt(self)
            }
            fn sign(self) -> $t {
                elementary::sign(self)
            }
            fn square(self) -> $t {
                elementary::square(self)
            }
            fn logistic(self) -> $t {
                elementary::logistic(self)
            }
            fn powf(self, y: $t) -> $t {
                elementary::pow(self, y)
            }
        }
    };
}

float_impls!(f32, F32);
float_impls!(f64, F64);

/// The 16-bit floats: every operation computes in `f32` (the `f32` rule, so results agree
/// with the `f32` interpreter before rounding) and rounds once to the storage width.
macro_rules! narrow_float_impls {
    ($t:ident, $variant:ident) => {
        impl Elem for $t {}

        impl Num for $t {
            const ZERO: $t = $t::ZERO;
            const ONE: $t = $t::ONE;
            fn add(self, other: $t) -> $t {
                $t::from_f32(self.to_f32() + other.to_f32())
            }
            fn sub(self, other: $t) -> $t {
                $t::from_f32(self.to_f32() - other.to_f32())
            }
            fn mul(self, other: $t) -> $t {
                $t::from_f32(self.to_f32() * other.to_f32())
            }
            fn div(self, other: $t) -> $t {
                $t::from_f32(self.to_f32() / other.to_f32())
            }
        }

        narrow_float_impls!(@float $t; abs exp ln ln_1p exp_m1 sin cos tan tanh sqrt rsqrt sign square logistic);
    };
    (@float $t:ident; $($f:ident)*) => {
        impl Float for $t {
            $(fn $f(self) -> $t {
                $t::from_f32(Float::$f(self.to_f32()))
            })*
            fn powf(self, y: $t) -> $t {
                $t::from_f32(Float::powf(self.to_f32(), y.to_f32()))
            }
        }
    };
}

narrow_float_impls!(bf16, BF16);
narrow_float_impls!(f16, F16);

macro_rules! int_impls {
    ($t:ident, $variant:ident) => {
        impl Elem for $t {
            fn to_i128(self) -> Option<i128> {
                Some(self as i128)
            }
            fn from_i128(x: i128) -> $t {
                x as $t
            }
        }

        impl Num for $t {
            const ZERO: $t = 0;
            const ONE: $t = 1;
            fn add(self, other: $t) -> $t {
                self.wrapping_add(other)
            }
            fn sub(self, other: $t) -> $t {
                self.wrapping_sub(other)
            }
            fn mul(self, other: $t) -> $t {
                self.wrapping_mul(other)
            }
            /// Truncates toward zero; `x / 0` is all ones and `MIN / -1 = MIN`, as XLA
            /// defines them.
            fn div(self, other: $t) -> $t {
                if other == 0 {
                    !0
                } else {
                    self.wrapping_div(other)
                }
            }
        }
    };
}

int_impls!(i8, I8);
int_impls!(i16, I16);
int_impls!(i32, I32);
int_impls!(i64, I64);
int_impls!(u8, U8);
int_impls!(u32, U32);

impl Elem for bool {
    fn to_i128(self) -> Option<i128> {
        Some(self as i128)
    }
    fn from_i128(x: i128) -> bool {
        x != 0
    }
}

/// Keys only move: the shape rules reject every numeric use of them, so the numeric
/// methods below are never reached on a verified program; they give the all-zero key.
impl Elem for PrngKey {}

/// Complex elements move through the generic rules (reshape, slice, select, gather,
/// scatter, sort's payload); what they compute is `remat_math::complex`'s.
impl Elem for c64 {}
impl Elem for c128 {}

macro_rules! complex_num {
    ($t:ident) => {
        /// `remat_math::complex`'s arithmetic, which the JIT's native steps run too.
        impl Num for $t {
            const ZERO: $t = <$t as ComplexElement>::ZERO;
            const ONE: $t = <$t as ComplexElement>::ONE;
            fn add(self, o: $t) -> $t {
                ComplexElement::add(self, o)
            }
            fn sub(self, o: $t) -> $t {
                ComplexElement::sub(self, o)
            }
            fn mul(self, o: $t) -> $t {
                ComplexElement::mul(self, o)
            }
            fn div(self, o: $t) -> $t {
                ComplexElement::div(self, o)
            }
        }
    };
}

complex_num!(c64);
complex_num!(c128);

/// Runs `$body` with `$T` naming the Rust type of a numeric `$dtype` (complex included);
/// `$other` for `bool` and keys.
macro_rules! num_dtype {
    ($dtype:expr, $T:ident => $body:expr, bool => $other:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::BF16 => {
                type $T = remat_ir::bf16;
                $body
            }
            DType::F16 => {
                type $T = remat_ir::f16;
                $body
            }
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::I16 => {
                type $T = i16;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::C64 => {
                type $T = remat_ir::c64;
                $body
            }
            DType::C128 => {
                type $T = remat_ir::c128;
                $body
            }
            DType::Bool | DType::Key => $other,
        }
    };
}

pub(crate) use remat_ir::map_array;
/// Runs `$body` with `$T` naming the Rust type of a float `$dtype`; `$other` for the rest.
macro_rules! float_dtype {
    ($dtype:expr, $T:ident => $body:expr, other => $other:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::BF16 => {
                type $T = remat_ir::bf16;
                $body
            }
            DType::F16 => {
                type $T = remat_ir::f16;
                $body
            }
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => $other,
        }
    };
}

pub(crate) use {float_dtype, num_dtype};

/// The operand as an array of `T`, or an error naming what was found.
pub(crate) fn typed<T: Elem>(a: &Array) -> Result<&ArrayD<T>, String> {
    T::get(a).ok_or_else(|| format!("expected a {} operand, got {}", T::DTYPE, a.aval()))
}

/// Exactly `N` operands.
pub(crate) fn operands<'a, const N: usize>(args: &[&'a Array]) -> Result<[&'a Array; N], String> {
    <[&Array; N]>::try_from(args)
        .map_err(|_| format!("expected {N} operand{}, got {}", if N == 1 { "" } else { "s" }, args.len()))
}

/// The value of a rank-0 integer array (an index operand), as `i128`; `None` for any
/// other array.
pub(crate) fn integer_scalar(a: &Array) -> Option<i128> {
    if !a.shape().is_empty() || !a.dtype().is_integer() {
        return None;
    }
    remat_math::with_dtype!(a.dtype(), T => T::get(a).and_then(|x| x.first().copied()).and_then(Elem::to_i128))
}

/// A rank-0 array.
pub(crate) fn scalar<T: Elem>(x: T) -> Array {
    T::wrap(ArrayD::from_elem(IxDyn(&[]), x))
}

/// The element count of `shape`, or an error if it overflows what an array can hold.
pub(crate) fn checked_size(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| format!("shape {shape:?} is too large"))
}

/// Formats a shape as avals do: `[5,4]`.
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}
