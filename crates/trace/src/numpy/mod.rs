//! A `jax.numpy`-like surface over [`Tensor`], decomposing into the same primitives as
//! JAX's, so traced programs print as JAX's do (each function says what it records).
//!
//! Most of it is methods of [`Tensor`] (`x.sum_axes(&[1], true)`, `w.dot(&x)`,
//! `x.index(idx![1..4])`); this module holds the functions that build tensors or take
//! several (`zeros`, `arange`, `linspace`, `where_`, `einsum`, `concatenate`), and free-function
//! forms of the common elementwise ones for code that reads like `jnp` (`exp(&x)`,
//! `sqrt(4.0)`). Files: `linalg` (products), `einsum` (n-ary einsum with opt_einsum's
//! contraction order), `reduce` (reductions), `shape` (layout),
//! `index` (NumPy indexing), `take` (indexing by integer
//! arrays), `advanced` (NumPy indexing mixing integer arrays with slices), `sort` (scans
//! and sorts), `pad` (`jnp.pad`'s modes), `variance` (`var`, `std`), `round`, `linspace`,
//! `repeat`.

mod advanced;
mod einsum;
mod index;
mod linalg;
mod linspace;
mod pad;
mod reduce;
mod repeat;
mod round;
mod shape;
mod sort;
mod take;
mod variance;

use std::panic::Location;

use remat_ir::{Array, BinaryOp, CompareOp, DType, LitValue, Primitive, UnaryOp};

pub use advanced::{AtIndices, Ix};
pub use einsum::{einsum, einsum_path, einsum_with, EinsumOptions, EinsumPath, EinsumStep, Optimize};
pub use index::{Idx, ELLIPSIS, NEW_AXIS};
pub use linspace::{linspace, linspace_dtype};
pub use pad::{pad, PadMode};
pub use repeat::Repeats;
pub use round::round_decimals;
pub use shape::{concatenate, stack, tile, unstack, Sections};
pub(crate) use take::{scatter_rows, update_jaxpr};
pub use take::{AtIndex, TakeMode};

use crate::elementwise::{binary_at, broadcast_shapes, result_type, unary_at, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error, Operand};
use crate::transforms::library_jit;

/// Resolves possibly negative axes of `x`; records an error if one is out of range or
/// repeated.
pub(crate) fn normalize_axes(
    what: &str,
    x: &Tensor,
    axes: &[isize],
    loc: &'static Location<'static>,
) -> Option<Vec<usize>> {
    let n = x.ndim() as isize;
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = if a < 0 { a + n } else { a };
        if r < 0 || r >= n {
            record_error(loc, format!("{what}: axis {a} is out of bounds for {}, which has {n} axes", x.aval()));
            return None;
        }
        if out.contains(&(r as usize)) {
            record_error(loc, format!("{what}: axis {a} is repeated in {axes:?}"));
            return None;
        }
        out.push(r as usize);
    }
    Some(out)
}

/// `jnp.where(cond, x, y)`: `x` where `cond` is true, else `y`, all three broadcast
/// together; `x` and `y` may be Rust scalars. JAX records it as a call,
/// `jit[name=_where]`, around `select_n cond y x` (a non-`bool` `cond` is compared with 0).
#[track_caller]
pub fn where_(cond: &Tensor, x: impl Into<Arg>, y: impl Into<Arg>) -> Tensor {
    where_at(cond, x.into(), y.into(), Location::caller())
}

pub(crate) fn where_at(cond: &Tensor, x: Arg, y: Arg, loc: &'static Location<'static>) -> Tensor {
    let args = [cond.into(), x, y];
    library_jit(
        "_where",
        &args,
        |inner| {
            let [c, x, y]: [Tensor; 3] = inner.try_into().expect("three inputs");
            let c = if c.dtype() == DType::Bool {
                c
            } else {
                crate::elementwise::compare_at(CompareOp::Ne, c.into(), 0.into(), loc)
            };
            let (dtype, weak) = result_type(&[(x.dtype(), x.is_weak()), (y.dtype(), y.is_weak())]);
            let (x, y) = (x.to_type(dtype, weak, loc), y.to_type(dtype, weak, loc));
            let shape = match broadcast_shapes(&[c.shape(), x.shape(), y.shape()]) {
                Ok(s) => s,
                Err(_) => {
                    let types = format!("condition {}, x {} and y {}", c.aval(), x.aval(), y.aval());
                    record_error(loc, format!("where: {types} do not broadcast together"));
                    return Tensor::placeholder(x.aval().clone());
                }
            };
            // A scalar condition stays scalar: `select_n` takes it as it is (JAX's `_where`).
            let c = if c.ndim() == 0 { c } else { c.broadcast_to_at(&shape, loc) };
            let [x, y] = [x, y].map(|t| t.broadcast_to_at(&shape, loc));
            bind(Primitive::SelectN, &[c.into(), y.into(), x.into()], weak, loc).remove(0)
        },
        loc,
    )
}

/// `jnp.remainder(x, y)` (`jnp.mod`, Python's `%`): the remainder with the sign of `y`,
/// recorded as JAX's `jit[name=remainder]`: `rem`, then `y` added where the signs of the
/// remainder and `y` differ (an integer `y` of 0 is taken as 1 first, through `_where`).
#[track_caller]
pub fn remainder(x: impl Into<Arg>, y: impl Into<Arg>) -> Tensor {
    remainder_at(x.into(), y.into(), Location::caller())
}

pub(crate) fn remainder_at(x: Arg, y: Arg, loc: &'static Location<'static>) -> Tensor {
    library_jit(
        "remainder",
        &[x, y],
        |inner| {
            let [x, y]: [Tensor; 2] = inner.try_into().expect("two inputs");
            let (dtype, weak) = result_type(&[(x.dtype(), x.is_weak()), (y.dtype(), y.is_weak())]);
            let (x, y) = (x.to_type(dtype, weak, loc), y.to_type(dtype, weak, loc));
            let y = if dtype.is_integer() {
                let zero = crate::elementwise::compare_at(CompareOp::Eq, (&y).into(), 0.into(), loc);
                where_at(&zero, Tensor::literal(LitValue::from_f64(dtype, 1.0)).into(), (&y).into(), loc)
            } else {
                y
            };
            let trunc = binary_at(BinaryOp::Rem, (&x).into(), (&y).into(), loc);
            let not_zero = crate::elementwise::compare_at(CompareOp::Ne, (&trunc).into(), 0.into(), loc);
            let trunc_neg = crate::elementwise::compare_at(CompareOp::Lt, (&trunc).into(), 0.into(), loc);
            let y_neg = crate::elementwise::compare_at(CompareOp::Lt, (&y).into(), 0.into(), loc);
            let differ = crate::elementwise::compare_at(CompareOp::Ne, trunc_neg.into(), y_neg.into(), loc);
            let plus = binary_at(BinaryOp::And, differ.into(), not_zero.into(), loc);
            let sum = binary_at(BinaryOp::Add, (&trunc).into(), y.into(), loc);
            bind(Primitive::SelectN, &[plus.into(), trunc.into(), sum.into()], weak, loc).remove(0)
        },
        loc,
    )
}

impl Tensor {
    /// `jnp.clip(x, lo, hi)`: `maximum(lo, x)` then `minimum(hi, ...)`, which JAX records
    /// as a call, `jit[name=clip]`. (For the `clamp` primitive, see [`Tensor::clamp`].)
    #[track_caller]
    pub fn clip(&self, lo: impl Into<Arg>, hi: impl Into<Arg>) -> Tensor {
        let loc = Location::caller();
        library_jit(
            "clip",
            &[self.into(), lo.into(), hi.into()],
            |inner| {
                let [x, lo, hi]: [Tensor; 3] = inner.try_into().expect("three inputs");
                let x = binary_at(BinaryOp::Max, lo.into(), x.into(), loc);
                binary_at(BinaryOp::Min, hi.into(), x.into(), loc)
            },
            loc,
        )
    }
}

pub(crate) fn full_at(shape: &[usize], value: LitValue, loc: &'static Location<'static>) -> Tensor {
    let prim = Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: vec![] };
    bind(prim, &[Operand::Literal(value)], false, loc).remove(0)
}

/// `jnp.full(shape, value, dtype)`: `broadcast_in_dim` of a literal.
#[track_caller]
pub fn full(shape: &[usize], value: f64, dtype: DType) -> Tensor {
    full_at(shape, LitValue::from_f64(dtype, value), Location::caller())
}

/// `jnp.int32(v)`: a concrete `i32` scalar, recorded as the literal `v:i32[]` where it
/// is used (see [`Tensor::literal`]); for example a `while_loop` counter started at 0.
pub fn int32(v: i32) -> Tensor {
    Tensor::literal(LitValue::I32(v))
}

/// `jnp.float32(v)`: a concrete `f32` scalar, recorded as a literal where it is used (see
/// [`Tensor::literal`]).
pub fn float32(v: f32) -> Tensor {
    Tensor::literal(LitValue::F32(v))
}

/// `jnp.bfloat16(v)`: a concrete `bf16` scalar, recorded as the literal `v:bf16[]` where it
/// is used (`x * jnp.bfloat16(2.5)` prints `mul a 2.5:bf16[]`).
pub fn bfloat16(v: impl Into<f64>) -> Tensor {
    Tensor::literal(LitValue::BF16(remat_ir::bf16::from_f64(v.into())))
}

/// `jnp.float16(v)`: a concrete `f16` scalar, recorded as a literal where it is used.
pub fn float16(v: impl Into<f64>) -> Tensor {
    Tensor::literal(LitValue::F16(remat_ir::f16::from_f64(v.into())))
}

/// `jnp.int8(v)`: a concrete `i8` scalar, recorded as a literal where it is used.
pub fn int8(v: i8) -> Tensor {
    Tensor::literal(LitValue::I8(v))
}

/// `jnp.int16(v)`: a concrete `i16` scalar, recorded as a literal where it is used.
pub fn int16(v: i16) -> Tensor {
    Tensor::literal(LitValue::I16(v))
}

/// `jnp.uint8(v)`: a concrete `u8` scalar, recorded as a literal where it is used.
pub fn uint8(v: u8) -> Tensor {
    Tensor::literal(LitValue::U8(v))
}

/// `jnp.uint32(v)`: a concrete `u32` scalar, recorded as a literal where it is used.
pub fn uint32(v: u32) -> Tensor {
    Tensor::literal(LitValue::U32(v))
}

/// `jnp.bool_(v)`: a concrete `bool` scalar, recorded as a literal where it is used.
pub fn bool_(v: bool) -> Tensor {
    Tensor::literal(LitValue::Bool(v))
}

/// `jnp.zeros(shape, dtype)`.
#[track_caller]
pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
    full_at(shape, LitValue::from_f64(dtype, 0.0), Location::caller())
}

/// `jnp.ones(shape, dtype)`.
#[track_caller]
pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
    full_at(shape, LitValue::from_f64(dtype, 1.0), Location::caller())
}

/// `jnp.zeros_like(x)`.
#[track_caller]
pub fn zeros_like(x: &Tensor) -> Tensor {
    full_at(x.shape(), LitValue::from_f64(x.dtype(), 0.0), Location::caller())
}

/// `jnp.ones_like(x)`.
#[track_caller]
pub fn ones_like(x: &Tensor) -> Tensor {
    full_at(x.shape(), LitValue::from_f64(x.dtype(), 1.0), Location::caller())
}

/// `jnp.arange(n, dtype=dtype)`: `0, 1, ..., n-1` (`iota`).
#[track_caller]
pub fn arange(n: usize, dtype: DType) -> Tensor {
    iota_at(n, dtype, Location::caller())
}

fn iota_at(n: usize, dtype: DType, loc: &'static Location<'static>) -> Tensor {
    bind(Primitive::Iota { dtype, shape: vec![n], dimension: 0 }, &[], false, loc).remove(0)
}

/// `jnp.arange(start, stop, dtype=dtype)`: `start, start+1, ...` below `stop`; records
/// `iota` then `add start`.
#[track_caller]
pub fn arange_from(start: f64, stop: f64, dtype: DType) -> Tensor {
    let loc = Location::caller();
    if start == 0.0 {
        return iota_at((stop.ceil().max(0.0)) as usize, dtype, loc);
    }
    let iota = iota_at(((stop - start).ceil().max(0.0)) as usize, dtype, loc);
    let ops = [Operand::Literal(LitValue::from_f64(dtype, start)), iota.into()];
    bind(Primitive::Binary(BinaryOp::Add), &ops, false, loc).remove(0)
}

/// `jnp.arange(start, stop, step, dtype=dtype)`: records `iota`, `mul step`, `add start`.
#[track_caller]
pub fn arange_step(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
    let loc = Location::caller();
    if step == 0.0 {
        record_error(loc, "arange: step must not be 0".into());
        return Tensor::placeholder(remat_ir::Aval::new(dtype, vec![0]));
    }
    let iota = iota_at(((stop - start) / step).ceil().max(0.0) as usize, dtype, loc);
    let lit = |v: f64| Operand::Literal(LitValue::from_f64(dtype, v));
    let scaled = bind(Primitive::Binary(BinaryOp::Mul), &[lit(step), iota.into()], false, loc).remove(0);
    bind(Primitive::Binary(BinaryOp::Add), &[lit(start), scaled.into()], false, loc).remove(0)
}

/// A concrete array used inside a traced function (`jnp.asarray(a)`): it becomes a
/// constvar of the traced jaxpr, with `a` as its value ([`crate::Traced::jaxpr`]'s
/// `consts`).
#[track_caller]
pub fn constant(value: Array) -> Tensor {
    let aval = value.aval();
    crate::trace::constant(value, Location::caller()).unwrap_or_else(|| Tensor::placeholder(aval))
}

/// `jnp.dot(a, b)`; see [`Tensor::dot`].
#[track_caller]
pub fn dot(a: &Tensor, b: &Tensor) -> Tensor {
    linalg::dot_general_at(a, b, linalg::dot_numbers(a, b), Location::caller())
}

/// `jnp.matmul(a, b)` (`a @ b`); see [`Tensor::matmul`].
#[track_caller]
pub fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    linalg::matmul_at(a, b, Location::caller())
}

/// `jnp.maximum(a, b)`: elementwise maximum with promotion and broadcasting.
#[track_caller]
pub fn maximum(a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Max, a.into(), b.into(), Location::caller())
}

/// `jnp.minimum(a, b)`: elementwise minimum with promotion and broadcasting.
#[track_caller]
pub fn minimum(a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Min, a.into(), b.into(), Location::caller())
}

/// `jnp.power(a, b)`: `a ** b`; either may be a Rust scalar (`power(2.0, &x)` is
/// `pow 2.0:f32[] x`). A tensor to an `i32` scalar power records `integer_pow`.
#[track_caller]
pub fn power(a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    match (a.into(), b.into()) {
        (Arg::Tensor(a), Arg::Scalar(n, DType::I32)) => a.apply_at(Primitive::IntegerPow { y: n as i32 }, loc),
        (a, b) => binary_at(BinaryOp::Pow, a, b, loc),
    }
}

macro_rules! unary_functions {
    ($($name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("`jnp.", stringify!($name), "(x)` of a tensor or a Rust scalar (a scalar gives a weakly typed result, `",
            stringify!($name), " 2.0:f32[]`).")]
        #[track_caller]
        pub fn $name(x: impl Into<Arg>) -> Tensor {
            unary_at(UnaryOp::$op, x.into(), Location::caller())
        }
    )*};
}

unary_functions!(
    sin => Sin, cos => Cos, tan => Tan, tanh => Tanh, exp => Exp, log => Log, log1p => Log1p, expm1 => Expm1,
    sqrt => Sqrt, abs => Abs, sign => Sign, square => Square, floor => Floor, ceil => Ceil,
);

/// `jnp.arctan2(y, x)` of two floats: `atan2` (operands promoted and broadcast as for
/// `+`).
#[track_caller]
pub fn arctan2(y: impl Into<Arg>, x: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Atan2, y.into(), x.into(), Location::caller())
}

/// `jnp.round(x)` (`decimals=0`): halves to the even neighbour, recorded as JAX records
/// it, `jit[name=round]` around `round[rounding_method=1]` (see [`round_decimals`]).
#[track_caller]
pub fn round(x: &Tensor) -> Tensor {
    round::round_at(x, 0, Location::caller())
}

/// `jax.lax.rsqrt(x)`: `1 / sqrt(x)` of a tensor or a Rust scalar.
#[track_caller]
pub fn rsqrt(x: impl Into<Arg>) -> Tensor {
    unary_at(UnaryOp::Rsqrt, x.into(), Location::caller())
}
