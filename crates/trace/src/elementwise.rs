//! [`Tensor`]'s elementwise operations, with JAX's semantics: the operand of an elementwise
//! function ([`Arg`]), type promotion, and the methods and operators that record `add`,
//! `sin`, `lt`, ...
//!
//! - Rank promotion as NumPy: an operand of lower rank gets leading size-1 axes
//!   (`broadcast_in_dim`); size-1 axes then broadcast inside the primitive, as in
//!   `jax.lax`. Scalars (rank 0) are never promoted.
//! - Dtype promotion on JAX's type lattice, restricted to our dtypes:
//!   `bool < int* < i32 < float* < f32 < f64`, where `int*` and `float*` are weakly typed
//!   values (Rust scalars, and tensors computed only from them). The result type is the
//!   join (here: the maximum) of the operands'; a weak result is `i32` or `f32` and stays
//!   weak. Tensors whose type differs are converted (`convert_element_type[new_dtype=...
//!   weak_type=...]`), Rust scalars become literals of the result dtype
//!   (`x * 2.0` records `mul x 2.0:f32[]`).
//! - Operators on owned tensors, references and Rust scalars (`&a + &b`, `a * 2.0`,
//!   `1.0 - &x`), all `#[track_caller]` so recorded equations carry the user's line.

use std::ops;
use std::panic::Location;

use remat_ir::{Aval, BinaryOp, CompareOp, DType, LitValue, Primitive, UnaryOp};

use crate::tensor::Tensor;
use crate::trace::{bind, record_error, spell_last_literals, Operand};

/// One operand of an elementwise operation before promotion: a tensor or a Rust scalar.
/// Every function taking `impl Into<Arg>` accepts `&Tensor`, `Tensor`, `f32`, `f64`, `i32`
/// and `bool`.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A traced value.
    Tensor(Tensor),
    /// A Rust scalar: its value as `f64` and its own dtype (`f32` for floats, `i32` for
    /// integers, `bool`). Numbers are weakly typed.
    Scalar(f64, DType),
}

impl From<&Tensor> for Arg {
    fn from(t: &Tensor) -> Arg {
        Arg::Tensor(t.clone())
    }
}

impl From<Tensor> for Arg {
    fn from(t: Tensor) -> Arg {
        Arg::Tensor(t)
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $d:ident),*) => {$(
        impl From<$t> for Arg {
            fn from(x: $t) -> Arg {
                Arg::Scalar(x as f64, DType::$d)
            }
        }
    )*};
}
scalar_arg!(f32 => F32, f64 => F32, i32 => I32);

impl From<bool> for Arg {
    fn from(x: bool) -> Arg {
        Arg::Scalar(x as u8 as f64, DType::Bool)
    }
}

impl Arg {
    /// The dtype and weak flag of this operand.
    pub(crate) fn typ(&self) -> (DType, bool) {
        match self {
            Arg::Tensor(t) => (t.dtype(), t.is_weak()),
            Arg::Scalar(_, d) => (*d, *d != DType::Bool),
        }
    }

    /// The operand's type for messages: `f32[3,4]`, or `f32 scalar 2.0`.
    fn describe(&self) -> String {
        match self {
            Arg::Tensor(t) => t.aval().to_string(),
            Arg::Scalar(x, d) => format!("the {d} scalar {x}"),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Arg::Tensor(t) => t.shape(),
            Arg::Scalar(..) => &[],
        }
    }

    /// The operand as a literal of its own dtype, or its tensor (for passing to calls).
    pub(crate) fn operand(&self) -> Operand {
        match self {
            Arg::Tensor(t) => Operand::Tensor(t.clone()),
            Arg::Scalar(x, d) => Operand::Literal(LitValue::from_f64(*d, *x)),
        }
    }
}

/// A point of JAX's type promotion lattice (`jax._src.dtypes._type_promotion_lattice`),
/// restricted to our dtypes: a dtype, or a weakly typed Python scalar kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Strong(DType),
    WeakInt,
    WeakFloat,
}

/// The lattice's edges from `k` (JAX's, with `u16`/`u64` absent: `u8` goes to `u32` through
/// the missing `u16`, and `u32` to `i64`, as their upper sets are JAX's). Keys are apart.
fn parents(k: Kind) -> &'static [Kind] {
    use DType::*;
    use Kind::{Strong as S, WeakFloat, WeakInt};
    match k {
        S(Bool) => &[WeakInt],
        WeakInt => &[S(U8), S(I8)],
        S(U8) => &[S(U32), S(I16)],
        S(U32) => &[S(I64)],
        S(I8) => &[S(I16)],
        S(I16) => &[S(I32)],
        S(I32) => &[S(I64)],
        S(I64) => &[WeakFloat],
        WeakFloat => &[S(BF16), S(F16)],
        S(BF16) | S(F16) => &[S(F32)],
        // JAX's `f32 -> [f64, c64]`, `f64 -> c128`, `c64 -> c128` (no weak complex kind).
        S(F32) => &[S(F64), S(C64)],
        S(F64) => &[S(C128)],
        S(C64) => &[S(C128)],
        S(C128) | S(Key) => &[],
    }
}

/// `k` and everything above it.
fn upper_set(k: Kind) -> Vec<Kind> {
    let mut set = vec![k];
    let mut i = 0;
    while i < set.len() {
        for &p in parents(set[i]) {
            if !set.contains(&p) {
                set.push(p);
            }
        }
        i += 1;
    }
    set
}

fn kind((dtype, weak): (DType, bool)) -> Kind {
    match (dtype, weak) {
        (d, true) if d.is_integer() => Kind::WeakInt,
        (d, true) if d.is_float() => Kind::WeakFloat,
        (d, _) => Kind::Strong(d),
    }
}

/// The dtype and weak flag operands of these types are computed in (`jnp.result_type`): the
/// least upper bound in the lattice. A weak int alone is `i32`, a weak float `f32`; an
/// error if there is none (keys mix with nothing else).
pub(crate) fn try_result_type(types: &[(DType, bool)]) -> Result<(DType, bool), String> {
    let kinds: Vec<Kind> = types.iter().map(|&t| kind(t)).collect();
    let Some(&first) = kinds.first() else { return Ok((DType::F32, true)) };
    let mut common = upper_set(first);
    for &k in &kinds[1..] {
        let up = upper_set(k);
        common.retain(|c| up.contains(c));
    }
    // The least element of the common upper set: the one whose own upper set is all of it.
    let lub = common.iter().copied().find(|&c| common.iter().all(|d| upper_set(c).contains(d)));
    match lub {
        Some(Kind::Strong(d)) => Ok((d, false)),
        Some(Kind::WeakInt) => Ok((DType::I32, true)),
        Some(Kind::WeakFloat) => Ok((DType::F32, true)),
        None => {
            let names: Vec<String> = types.iter().map(|(d, _)| d.to_string()).collect();
            Err(format!("no common dtype for {}", names.join(", ")))
        }
    }
}

/// [`try_result_type`] for operands that have one (every pair of value dtypes does).
pub(crate) fn result_type(types: &[(DType, bool)]) -> (DType, bool) {
    try_result_type(types).unwrap_or((DType::F32, false))
}

/// The NumPy broadcast of `shapes` (trailing axes align; size 1 stretches), or an error
/// message naming them.
pub(crate) fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if d != 1 && *o != 1 && d != *o {
                let list: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
                return Err(format!("shapes {} do not broadcast together", list.join(" and ")));
            }
            if d != 1 {
                *o = d;
            }
        }
    }
    Ok(out)
}

impl Tensor {
    /// Converts to `dtype` with weak flag `weak` unless the tensor already has that type.
    pub(crate) fn to_type(&self, dtype: DType, weak: bool, loc: &'static Location<'static>) -> Tensor {
        if self.dtype() == dtype && self.is_weak() == weak {
            return self.clone();
        }
        let prim = Primitive::ConvertElementType { new_dtype: dtype, weak_type: weak };
        bind(prim, &[self.into()], weak, loc).remove(0)
    }

    /// Records `prim` with this tensor as its only operand; the result keeps the weak flag.
    pub(crate) fn apply_at(&self, prim: Primitive, loc: &'static Location<'static>) -> Tensor {
        bind(prim, &[self.into()], self.is_weak(), loc).remove(0)
    }
}

/// Promotes elementwise operands to one dtype and rank, as `jnp`'s binary functions do:
/// returns the operands and the result's dtype and weak flag, or `None` (error recorded)
/// if the shapes do not broadcast.
pub(crate) fn promote(op: &str, args: &[Arg], loc: &'static Location<'static>) -> Option<(Vec<Operand>, DType, bool)> {
    let types: Vec<(DType, bool)> = args.iter().map(Arg::typ).collect();
    let (dtype, weak) = result_type(&types);
    let shapes: Vec<&[usize]> = args.iter().map(Arg::shape).collect();
    if broadcast_shapes(&shapes).is_err() {
        let avals: Vec<String> = args.iter().map(Arg::describe).collect();
        record_error(loc, format!("{op}: operands {} do not broadcast together", avals.join(" and ")));
        return None;
    }
    let out_rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let operands = args
        .iter()
        .map(|a| match a {
            Arg::Scalar(x, _) => Operand::Literal(LitValue::from_f64(dtype, *x)),
            Arg::Tensor(t) => {
                let t = t.to_type(dtype, weak, loc);
                Operand::Tensor(if t.ndim() != 0 && t.ndim() < out_rank { t.lead_ones(out_rank, loc) } else { t })
            }
        })
        .collect();
    Some((operands, dtype, weak))
}

impl Tensor {
    /// Rank promotion: leading size-1 axes up to `rank`.
    fn lead_ones(&self, rank: usize, loc: &'static Location<'static>) -> Tensor {
        let pad = rank - self.ndim();
        let mut shape = vec![1; pad];
        shape.extend_from_slice(self.shape());
        self.apply_at(Primitive::BroadcastInDim { shape, broadcast_dimensions: (pad..rank).collect() }, loc)
    }
}

/// An elementwise binary operation with promotion: `binary(BinaryOp::Add, &x, 1.0)`.
#[track_caller]
pub fn binary(op: BinaryOp, a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    binary_at(op, a.into(), b.into(), Location::caller())
}

pub(crate) fn binary_at(op: BinaryOp, a: Arg, b: Arg, loc: &'static Location<'static>) -> Tensor {
    // A Rust float with a result that stays weakly typed (the other operand a weak tensor
    // or an integer one) stays a Python float in JAX, never rounded to `f32`: it prints as
    // written, `mul 0.1:f32[] j`.
    let with_tensor = [&a, &b].iter().any(|x| matches!(x, Arg::Tensor(_)));
    let floats = if with_tensor { python_floats(&[a.clone(), b.clone()], 0) } else { vec![] };
    match promote(op.name(), &[a, b], loc) {
        Some((ops, _, weak)) => {
            let out = bind(Primitive::Binary(op), &ops, weak, loc).remove(0);
            if weak {
                spell_last_literals(&floats);
            }
            out
        }
        None => Tensor::placeholder(Aval::scalar(DType::F32)),
    }
}

/// An elementwise comparison with promotion; the result is `bool`.
#[track_caller]
pub fn compare(op: CompareOp, a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    compare_at(op, a.into(), b.into(), Location::caller())
}

pub(crate) fn compare_at(op: CompareOp, a: Arg, b: Arg, loc: &'static Location<'static>) -> Tensor {
    match promote(op.name(), &[a, b], loc) {
        Some((ops, ..)) => bind(Primitive::Compare(op), &ops, false, loc).remove(0),
        None => Tensor::placeholder(Aval::scalar(DType::Bool)),
    }
}

/// An elementwise function of a tensor or a Rust scalar: `unary(UnaryOp::Sqrt, 4.0)` is
/// `sqrt 4.0:f32[]`, weakly typed like `jnp.sqrt(4.0)`. Integer operands of
/// floating-point functions are converted to `f32` first.
#[track_caller]
pub fn unary(op: UnaryOp, x: impl Into<Arg>) -> Tensor {
    unary_at(op, x.into(), Location::caller())
}

pub(crate) fn unary_at(op: UnaryOp, x: Arg, loc: &'static Location<'static>) -> Tensor {
    let (dtype, weak) = x.typ();
    let dtype = if op.float_only() && !dtype.is_float() { DType::F32 } else { dtype };
    let operand = match x {
        Arg::Tensor(t) => Operand::Tensor(t.to_type(dtype, weak, loc)),
        Arg::Scalar(v, _) => Operand::Literal(LitValue::from_f64(dtype, v)),
    };
    bind(Primitive::Unary(op), &[operand], weak, loc).remove(0)
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident: $doc:literal),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    unary_at(UnaryOp::$op, self.into(), Location::caller())
                }
            )*
        }
    };
}

unary_methods!(
    sin => Sin: "Elementwise sine (`sin`).",
    cos => Cos: "Elementwise cosine (`cos`).",
    tan => Tan: "Elementwise tangent (`tan`).",
    tanh => Tanh: "Elementwise hyperbolic tangent (`tanh`).",
    exp => Exp: "Elementwise `e^x` (`exp`).",
    log => Log: "Elementwise natural logarithm (`log`).",
    log1p => Log1p: "Elementwise `log(1 + x)`, accurate near 0 (`log1p`).",
    expm1 => Expm1: "Elementwise `e^x - 1`, accurate near 0 (`expm1`).",
    sqrt => Sqrt: "Elementwise square root (`sqrt`).",
    rsqrt => Rsqrt: "Elementwise `1 / sqrt(x)` (`rsqrt`, as `jax.lax.rsqrt`).",
    abs => Abs: "Elementwise absolute value (`abs`).",
    sign => Sign: "Elementwise sign: -1, 0 or 1 (`sign`).",
    logistic => Logistic: "Elementwise `1 / (1 + e^-x)` (`logistic`; `jax.nn.sigmoid`).",
    square => Square: "Elementwise `x * x` (`square`, as `jnp.square`).",
    stop_gradient => StopGradient: "The value, with no gradient flowing back (`stop_gradient`).",
    floor => Floor: "Elementwise floor (`floor`, as `jnp.floor` of a float).",
    ceil => Ceil: "Elementwise ceiling (`ceil`, as `jnp.ceil` of a float).",
    erf => Erf: "Elementwise error function (`erf`; `jax.scipy.special.erf`).",
    erf_inv => ErfInv: "Elementwise inverse error function (`erf_inv`; `jax.scipy.special.erfinv`).",
    lgamma => Lgamma: "Elementwise `log|Γ(x)|` (`lgamma`; `jax.scipy.special.gammaln`).",
    digamma => Digamma: "Elementwise digamma function (`digamma`; `jax.scipy.special.digamma`).",
);

impl Tensor {
    /// `x ** n` for an integer `n`: `integer_pow[y=n]`.
    #[track_caller]
    pub fn powi(&self, n: i32) -> Tensor {
        self.apply_at(Primitive::IntegerPow { y: n }, Location::caller())
    }

    /// `x ** y` elementwise. An `i32` Rust scalar exponent records `integer_pow` (as a
    /// Python `int` does in JAX); anything else records `pow`.
    #[track_caller]
    pub fn pow(&self, y: impl Into<Arg>) -> Tensor {
        let loc = Location::caller();
        match y.into() {
            Arg::Scalar(n, DType::I32) => self.apply_at(Primitive::IntegerPow { y: n as i32 }, loc),
            y => binary_at(BinaryOp::Pow, self.into(), y, loc),
        }
    }

    /// Elementwise maximum (`max`; NaN propagates), as `jnp.maximum`.
    #[track_caller]
    pub fn maximum(&self, y: impl Into<Arg>) -> Tensor {
        binary_at(BinaryOp::Max, self.into(), y.into(), Location::caller())
    }

    /// Elementwise minimum (`min`; NaN propagates), as `jnp.minimum`.
    #[track_caller]
    pub fn minimum(&self, y: impl Into<Arg>) -> Tensor {
        binary_at(BinaryOp::Min, self.into(), y.into(), Location::caller())
    }

    /// `lax.clamp(lo, x, hi)`: `clamp lo x hi`. The bounds are scalars or have `x`'s shape
    /// and take `x`'s dtype.
    #[track_caller]
    pub fn clamp(&self, lo: impl Into<Arg>, hi: impl Into<Arg>) -> Tensor {
        let loc = Location::caller();
        let bound = |b: Arg| match b {
            Arg::Scalar(v, _) => Operand::Literal(LitValue::from_f64(self.dtype(), v)),
            Arg::Tensor(t) => Operand::Tensor(t.to_type(self.dtype(), self.is_weak(), loc)),
        };
        let ops = [bound(lo.into()), self.into(), bound(hi.into())];
        bind(Primitive::Clamp, &ops, self.is_weak(), loc).remove(0)
    }

    /// `lax.reduce_precision`: rounds to a float format with these exponent and mantissa
    /// bits (an identity at `f32`'s own 8 and 23).
    #[track_caller]
    pub fn reduce_precision(&self, exponent_bits: u32, mantissa_bits: u32) -> Tensor {
        self.apply_at(Primitive::ReducePrecision { exponent_bits, mantissa_bits }, Location::caller())
    }

    /// `x.astype(dtype)`: `convert_element_type`; the result is strongly typed. Recorded
    /// even if only the weak flag changes, as in JAX.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        self.to_type(dtype, false, Location::caller())
    }

    /// Records `prim` with this tensor as the only operand, for primitives without a
    /// dedicated method. Its shape rule checks the operand and parameters.
    #[track_caller]
    pub fn apply(&self, prim: Primitive) -> Tensor {
        self.apply_at(prim, Location::caller())
    }
}

macro_rules! comparisons {
    ($($name:ident => $op:ident: $doc:literal),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = $doc]
                #[track_caller]
                pub fn $name(&self, y: impl Into<Arg>) -> Tensor {
                    compare_at(CompareOp::$op, self.into(), y.into(), Location::caller())
                }
            )*
        }
    };
}

comparisons!(
    eq => Eq: "Elementwise `x == y` (`eq`), a `bool` tensor.",
    ne => Ne: "Elementwise `x != y` (`ne`), a `bool` tensor.",
    lt => Lt: "Elementwise `x < y` (`lt`), a `bool` tensor.",
    le => Le: "Elementwise `x <= y` (`le`), a `bool` tensor.",
    gt => Gt: "Elementwise `x > y` (`gt`), a `bool` tensor.",
    ge => Ge: "Elementwise `x >= y` (`ge`), a `bool` tensor.",
);

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        binary_operator!(@tensor $trait, $method, $op);
        binary_operator!(@scalar $trait, $method, $op, f32, f64, i32);
    };
    (@tensor $trait:ident, $method:ident, $op:ident) => {
        impl<R: Into<Arg>> ops::$trait<R> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary_at(BinaryOp::$op, self.into(), rhs.into(), Location::caller())
            }
        }
        impl<R: Into<Arg>> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary_at(BinaryOp::$op, self.into(), rhs.into(), Location::caller())
            }
        }
    };
    (@scalar $trait:ident, $method:ident, $op:ident, $($s:ty),*) => {$(
        impl ops::$trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                binary_at(BinaryOp::$op, self.into(), rhs.into(), Location::caller())
            }
        }
        impl ops::$trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary_at(BinaryOp::$op, self.into(), rhs.into(), Location::caller())
            }
        }
    )*};
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);
// `a & b`, `a | b`, `a ^ b` on `bool` or integer tensors, as JAX's operators (`and`,
// `or`, `xor`); the other operand may be a tensor, a `bool` or an `i32`.
binary_operator!(@tensor BitAnd, bitand, And);
binary_operator!(@tensor BitOr, bitor, Or);
binary_operator!(@tensor BitXor, bitxor, Xor);

impl ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        unary_at(UnaryOp::Neg, self.into(), Location::caller())
    }
}

impl ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        unary_at(UnaryOp::Neg, self.into(), Location::caller())
    }
}

/// The Rust floats among a call's `args` (operand `offset + i`), which JAX passes as
/// Python floats it never rounds, and prints so.
pub(crate) fn python_floats(args: &[Arg], offset: usize) -> Vec<(usize, f64)> {
    args.iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            Arg::Scalar(x, DType::F32) => Some((offset + i, *x)),
            _ => None,
        })
        .collect()
}
