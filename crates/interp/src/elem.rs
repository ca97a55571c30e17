//! The four dtypes as Rust types: one trait impl per dtype, and macros that pick the Rust
//! type for a runtime [`DType`], so that each rule is written once, generically.
//!
//! Integer arithmetic here is XLA's: `+`, `-`, `*` wrap around; `x / 0` is `-1` and
//! `i32::MIN / -1` is `i32::MIN` (XLA's documented results), so no operation panics.

use std::fmt::Debug;
use std::ops::{Add, Div, Mul, Neg, Sub};

use ndarray::{ArrayD, IxDyn};
use remat_ir::{Array, DType};

/// An element type of an [`Array`].
pub(crate) trait Elem: Copy + PartialOrd + Debug + Send + Sync + 'static {
    const DTYPE: DType;
    /// The identity of `max`: `-inf`, `i32::MIN`, `false`.
    const LOWEST: Self;
    /// The identity of `min`: `+inf`, `i32::MAX`, `true`.
    const HIGHEST: Self;

    fn get(a: &Array) -> Option<&ArrayD<Self>>;
    fn wrap(a: ArrayD<Self>) -> Array;
    fn is_nan(self) -> bool;
    /// Exact for every dtype, so `from_f64(to_f64(x))` is `convert_element_type`.
    fn to_f64(self) -> f64;
    /// `convert_element_type` from `f64`: floats round to nearest, integers truncate and
    /// saturate (NaN gives 0), `bool` is `x != 0` (NaN gives `true`).
    fn from_f64(x: f64) -> Self;

    /// XLA's `max`: NaN if either operand is NaN.
    fn max_nan(self, other: Self) -> Self {
        if self.is_nan() || other.is_nan() {
            if self.is_nan() {
                self
            } else {
                other
            }
        } else if other > self {
            other
        } else {
            self
        }
    }

    /// XLA's `min`: NaN if either operand is NaN.
    fn min_nan(self, other: Self) -> Self {
        if self.is_nan() || other.is_nan() {
            if self.is_nan() {
                self
            } else {
                other
            }
        } else if other < self {
            other
        } else {
            self
        }
    }
}

/// The numeric dtypes (`f32`, `f64`, `i32`), with XLA's arithmetic.
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
    fn powf(self, y: Self) -> Self;
}

macro_rules! float_impls {
    ($t:ident, $variant:ident, $other:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$variant;
            const LOWEST: $t = $t::NEG_INFINITY;
            const HIGHEST: $t = $t::INFINITY;
            fn get(a: &Array) -> Option<&ArrayD<$t>> {
                match a {
                    Array::$variant(a) => Some(a),
                    Array::$other(_) | Array::I32(_) | Array::Bool(_) => None,
                }
            }
            fn wrap(a: ArrayD<$t>) -> Array {
                Array::$variant(a)
            }
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> $t {
                x as $t
            }
        }

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

        impl Float for $t {
            fn abs(self) -> $t {
                $t::abs(self)
            }
            fn exp(self) -> $t {
                $t::exp(self)
            }
            fn ln(self) -> $t {
                $t::ln(self)
            }
            fn ln_1p(self) -> $t {
                $t::ln_1p(self)
            }
            fn exp_m1(self) -> $t {
                $t::exp_m1(self)
            }
            fn sin(self) -> $t {
                $t::sin(self)
            }
            fn cos(self) -> $t {
                $t::cos(self)
            }
            fn tan(self) -> $t {
                $t::tan(self)
            }
            fn tanh(self) -> $t {
                $t::tanh(self)
            }
            fn sqrt(self) -> $t {
                $t::sqrt(self)
            }
            fn powf(self, y: $t) -> $t {
                $t::powf(self, y)
            }
        }
    };
}

float_impls!(f32, F32, F64);
float_impls!(f64, F64, F32);

impl Elem for i32 {
    const DTYPE: DType = DType::I32;
    const LOWEST: i32 = i32::MIN;
    const HIGHEST: i32 = i32::MAX;
    fn get(a: &Array) -> Option<&ArrayD<i32>> {
        match a {
            Array::I32(a) => Some(a),
            Array::F32(_) | Array::F64(_) | Array::Bool(_) => None,
        }
    }
    fn wrap(a: ArrayD<i32>) -> Array {
        Array::I32(a)
    }
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> i32 {
        x as i32
    }
}

impl Num for i32 {
    const ZERO: i32 = 0;
    const ONE: i32 = 1;
    fn add(self, other: i32) -> i32 {
        self.wrapping_add(other)
    }
    fn sub(self, other: i32) -> i32 {
        self.wrapping_sub(other)
    }
    fn mul(self, other: i32) -> i32 {
        self.wrapping_mul(other)
    }
    /// Truncates toward zero; `x / 0 = -1` and `MIN / -1 = MIN`, as XLA defines them.
    fn div(self, other: i32) -> i32 {
        if other == 0 {
            -1
        } else {
            self.wrapping_div(other)
        }
    }
}

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    const LOWEST: bool = false;
    const HIGHEST: bool = true;
    fn get(a: &Array) -> Option<&ArrayD<bool>> {
        match a {
            Array::Bool(a) => Some(a),
            Array::F32(_) | Array::F64(_) | Array::I32(_) => None,
        }
    }
    fn wrap(a: ArrayD<bool>) -> Array {
        Array::Bool(a)
    }
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(x: f64) -> bool {
        x != 0.0
    }
}

/// Runs `$body` with `$T` naming the Rust type of `$dtype`.
macro_rules! any_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}

/// Runs `$body` with `$T` naming the Rust type of a numeric `$dtype`; `$bool` for `bool`.
macro_rules! num_dtype {
    ($dtype:expr, $T:ident => $body:expr, bool => $bool:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::Bool => $bool,
        }
    };
}

/// Maps an [`Array`] of any dtype to one of the same dtype: `$body` sees the inner
/// `ArrayD` as `$a` and must give an `ArrayD` of the same element type.
macro_rules! map_array {
    ($x:expr, $a:ident => $body:expr) => {
        match $x {
            Array::F32($a) => Array::F32($body),
            Array::F64($a) => Array::F64($body),
            Array::I32($a) => Array::I32($body),
            Array::Bool($a) => Array::Bool($body),
        }
    };
}

pub(crate) use {any_dtype, map_array, num_dtype};

/// The operand as an array of `T`, or an error naming what was found.
pub(crate) fn typed<T: Elem>(a: &Array) -> Result<&ArrayD<T>, String> {
    T::get(a).ok_or_else(|| format!("expected a {} operand, got {}", T::DTYPE, a.aval()))
}

/// Exactly `N` operands.
pub(crate) fn operands<'a, const N: usize>(args: &[&'a Array]) -> Result<[&'a Array; N], String> {
    <[&Array; N]>::try_from(args)
        .map_err(|_| format!("expected {N} operand{}, got {}", if N == 1 { "" } else { "s" }, args.len()))
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
