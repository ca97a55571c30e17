//! Elementwise primitives: unary math, binary arithmetic, comparisons, `integer_pow`,
//! `select_n`, `clamp`, `convert_element_type`, `reduce_precision` and `round` (the
//! integer bit operations are in `bits.rs`, the special functions in `remat-math`).
//!
//! Operands of a binary op or comparison have one dtype and shapes that are equal, or one
//! is a rank-0 scalar, or they have equal rank and differ only where one has extent 1 (JAX's
//! lax broadcasts such degenerate axes: `add f32[5,8] f32[1,8]` appears in its jaxprs).
//! Floats compute in their own precision. Dtypes are those JAX's lax allows: arithmetic on
//! numbers, transcendentals on floats, `max`/`min`/comparisons also on `bool`.

use ndarray::{ArrayD, IxDyn, Zip};
use remat_ir::{Array, Aval, BinaryOp, CompareOp, DType, Identity, RoundingMethod, UnaryOp};

use crate::bits::{int_bit_op, Int};
use crate::elem::{broadcast_shapes, map_array, num_dtype, operands, typed, zip_with, Elem, Float, Num};
use remat_math::element::{Element, Narrow};
use remat_math::with_dtype;

pub(crate) fn unary(op: UnaryOp, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    Ok(match x {
        Array::F32(a) if op == UnaryOp::IsFinite => Array::Bool(a.mapv(f32::is_finite)),
        Array::F64(a) if op == UnaryOp::IsFinite => Array::Bool(a.mapv(f64::is_finite)),
        Array::BF16(a) if op == UnaryOp::IsFinite => Array::Bool(a.mapv(|v| v.is_finite())),
        Array::F16(a) if op == UnaryOp::IsFinite => Array::Bool(a.mapv(|v| v.is_finite())),
        Array::F32(a) => Array::F32(a.mapv(float_unary(op).ok_or_else(undefined)?)),
        Array::F64(a) => Array::F64(a.mapv(float_unary(op).ok_or_else(undefined)?)),
        Array::BF16(a) => Array::BF16(narrow_map(a, float_unary::<f32>(op).ok_or_else(undefined)?)),
        Array::F16(a) => Array::F16(narrow_map(a, float_unary::<f32>(op).ok_or_else(undefined)?)),
        Array::I8(a) => Array::I8(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::I16(a) => Array::I16(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::I32(a) => Array::I32(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::I64(a) => Array::I64(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::U8(a) => Array::U8(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::U32(a) => Array::U32(a.mapv(int_unary(op).ok_or_else(undefined)?)),
        Array::Bool(_) | Array::Key(_) if matches!(op, UnaryOp::StopGradient | UnaryOp::Copy) => x.clone(),
        Array::Bool(a) if op == UnaryOp::Not => Array::Bool(a.mapv(|b| !b)),
        Array::Bool(_) | Array::Key(_) => return Err(undefined()),
        Array::C64(_) | Array::C128(_) => return remat_math::complex::unary(op, x),
    })
}

/// A 16-bit float operation: the `f32` rule, rounded once to the storage width (XLA's CPU
/// backend upcasts each such operation to `f32`).
fn narrow_map<T: Narrow>(a: &ArrayD<T>, f: impl Fn(f32) -> f32) -> ArrayD<T> {
    a.mapv(|x| T::from_f32(f(x.to_f32())))
}

/// [`narrow_map`] for two operands.
fn narrow_zip<T: Narrow>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    shape: &[usize],
    f: fn(f32, f32) -> f32,
) -> Result<ArrayD<T>, String> {
    zip_with(a, b, shape, |x, y| T::from_f32(f(x.to_f32(), y.to_f32())))
}

/// `None` for the ops not defined on floats (`not`, and `is_finite`, whose result is bool).
fn float_unary<T: Float>(op: UnaryOp) -> Option<fn(T) -> T> {
    Some(match op {
        UnaryOp::Neg => |x| -x,
        UnaryOp::Sign => T::sign,
        UnaryOp::Abs => T::abs,
        UnaryOp::Exp => T::exp,
        UnaryOp::Log => T::ln,
        UnaryOp::Log1p => T::ln_1p,
        UnaryOp::Expm1 => T::exp_m1,
        UnaryOp::Sin => T::sin,
        UnaryOp::Cos => T::cos,
        UnaryOp::Tan => T::tan,
        UnaryOp::Tanh => T::tanh,
        UnaryOp::Logistic => T::logistic,
        UnaryOp::Sqrt => T::sqrt,
        UnaryOp::Rsqrt => T::rsqrt,
        UnaryOp::Square => T::square,
        UnaryOp::StopGradient | UnaryOp::Copy => |x| x,
        UnaryOp::Not | UnaryOp::IsFinite | UnaryOp::PopulationCount | UnaryOp::Clz => return None,
        // The special functions: one definition shared with the JIT (`remat-math`).
        UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Cbrt
        | UnaryOp::Exp2
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e => return T::unary(op),
    })
}

/// `None` for the ops JAX defines on floats only.
fn int_unary<T: Int + Ord>(op: UnaryOp) -> Option<fn(T) -> T> {
    match op {
        UnaryOp::Neg => Some(|x| T::ZERO.sub(x)),
        UnaryOp::Sign => Some(|x| {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                T::ZERO.sub(T::ONE)
            } else {
                x
            }
        }),
        UnaryOp::Abs => Some(|x| if x < T::ZERO { T::ZERO.sub(x) } else { x }),
        UnaryOp::Square => Some(|x| x.mul(x)),
        UnaryOp::StopGradient | UnaryOp::Copy => Some(|x| x),
        UnaryOp::Not => Some(|x| !x),
        UnaryOp::PopulationCount => Some(T::population_count),
        UnaryOp::Clz => Some(T::clz),
        UnaryOp::Exp
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Expm1
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::IsFinite
        | UnaryOp::Cbrt
        | UnaryOp::Exp2
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e => None,
    }
}

pub(crate) fn binary(op: BinaryOp, args: &[&Array]) -> Result<Array, String> {
    let [x, y] = operands(args)?;
    let shape = broadcast_shapes(x, y)?;
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    let float = || float_binary::<f32>(op).ok_or_else(undefined);
    Ok(match (x, y) {
        (Array::F32(a), Array::F32(b)) => Array::F32(zip_with(a, b, &shape, float_binary(op).ok_or_else(undefined)?)?),
        (Array::F64(a), Array::F64(b)) => Array::F64(zip_with(a, b, &shape, float_binary(op).ok_or_else(undefined)?)?),
        (Array::BF16(a), Array::BF16(b)) => Array::BF16(narrow_zip(a, b, &shape, float()?)?),
        (Array::F16(a), Array::F16(b)) => Array::F16(narrow_zip(a, b, &shape, float()?)?),
        (Array::I8(a), Array::I8(b)) => Array::I8(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::I16(a), Array::I16(b)) => Array::I16(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::I32(a), Array::I32(b)) => Array::I32(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::I64(a), Array::I64(b)) => Array::I64(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::U8(a), Array::U8(b)) => Array::U8(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::U32(a), Array::U32(b)) => Array::U32(zip_with(a, b, &shape, int_binary(op).ok_or_else(undefined)?)?),
        (Array::Bool(a), Array::Bool(b)) => {
            Array::Bool(zip_with(a, b, &shape, bool_binary(op).ok_or_else(undefined)?)?)
        }
        (Array::C64(_), _) | (Array::C128(_), _) => return remat_math::complex::binary(op, x, y),
        // lax.pow also takes an integer exponent, which it converts to the base's dtype.
        (_, _) if op == BinaryOp::Pow && x.dtype().is_float() && y.dtype().is_integer() => {
            let exponent = convert_element_type(x.dtype(), &[y])?;
            return binary(op, &[x, &exponent]);
        }
        _ => return Err(format!("operands have different dtypes: {} and {}", x.aval(), y.aval())),
    })
}

fn float_binary<T: Float>(op: BinaryOp) -> Option<fn(T, T) -> T> {
    Some(match op {
        BinaryOp::Add | BinaryOp::AddAny => |x, y| x + y,
        BinaryOp::Sub => |x, y| x - y,
        BinaryOp::Mul => |x, y| x * y,
        BinaryOp::Div => |x, y| x / y,
        BinaryOp::Pow => T::powf,
        BinaryOp::Max => T::max_nan,
        BinaryOp::Min => T::min_nan,
        BinaryOp::Rem
        | BinaryOp::Atan2
        | BinaryOp::Nextafter
        | BinaryOp::Polygamma
        | BinaryOp::Igamma
        | BinaryOp::Igammac
        | BinaryOp::IgammaGradA
        | BinaryOp::Zeta => return T::binary(op),
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => return None,
    })
}

fn int_binary<T: Int>(op: BinaryOp) -> Option<fn(T, T) -> T> {
    match op {
        BinaryOp::Add | BinaryOp::AddAny => Some(Num::add),
        BinaryOp::Sub => Some(Num::sub),
        BinaryOp::Mul => Some(Num::mul),
        BinaryOp::Div => Some(Num::div),
        BinaryOp::Max => Some(Element::max_nan),
        BinaryOp::Min => Some(Element::min_nan),
        BinaryOp::Pow
        | BinaryOp::Atan2
        | BinaryOp::Nextafter
        | BinaryOp::Polygamma
        | BinaryOp::Igamma
        | BinaryOp::Igammac
        | BinaryOp::IgammaGradA
        | BinaryOp::Zeta => None,
        BinaryOp::Rem
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => int_bit_op(op),
    }
}

fn bool_binary(op: BinaryOp) -> Option<fn(bool, bool) -> bool> {
    match op {
        BinaryOp::Max | BinaryOp::Or => Some(|x, y| x | y),
        BinaryOp::Min | BinaryOp::And => Some(|x, y| x & y),
        BinaryOp::Xor => Some(|x, y| x ^ y),
        BinaryOp::Add
        | BinaryOp::AddAny
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Pow
        | BinaryOp::Rem
        | BinaryOp::Atan2
        | BinaryOp::Nextafter
        | BinaryOp::Polygamma
        | BinaryOp::Igamma
        | BinaryOp::Igammac
        | BinaryOp::IgammaGradA
        | BinaryOp::Zeta
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => None,
    }
}

pub(crate) fn compare(op: CompareOp, args: &[&Array]) -> Result<Array, String> {
    let [x, y] = operands(args)?;
    if x.dtype() != y.dtype() {
        return Err(format!("operands have different dtypes: {} and {}", x.aval(), y.aval()));
    }
    if x.dtype().is_complex() {
        return remat_math::complex::compare(op, x, y);
    }
    let shape = broadcast_shapes(x, y)?;
    with_dtype!(x.dtype(), T => {
        let f = comparison::<T>(op);
        Ok(Array::Bool(zip_with(typed::<T>(x)?, typed::<T>(y)?, &shape, f)?))
    })
}

/// IEEE comparisons: every comparison with NaN is false except `ne`, and a subnormal
/// operand reads as a zero (`Elem::daz`). The `*_to` comparisons are XLA's `TOTALORDER`
/// ones, on the bits ([`Element::total_order_key`]): no DAZ, `-0.0 < +0.0`, NaN by sign.
pub(crate) fn comparison<T: Element>(op: CompareOp) -> fn(T, T) -> bool {
    match op {
        CompareOp::Eq => |x, y| x.daz() == y.daz(),
        CompareOp::Ne => |x, y| x.daz() != y.daz(),
        CompareOp::Lt => |x, y| x.daz() < y.daz(),
        CompareOp::Le => |x, y| x.daz() <= y.daz(),
        CompareOp::Gt => |x, y| x.daz() > y.daz(),
        CompareOp::Ge => |x, y| x.daz() >= y.daz(),
        CompareOp::EqTo => |x, y| x.total_order_key() == y.total_order_key(),
        CompareOp::LeTo => |x, y| x.total_order_key() <= y.total_order_key(),
        CompareOp::LtTo => |x, y| x.total_order_key() < y.total_order_key(),
    }
}

fn broadcast_to<'a, T>(a: &'a ArrayD<T>, shape: &[usize]) -> Result<ndarray::ArrayViewD<'a, T>, String> {
    a.broadcast(IxDyn(shape)).ok_or_else(|| format!("cannot broadcast shape {:?} to {shape:?}", a.shape()))
}

/// An equation XLA's algebraic simplifier deletes under `jit` (`remat_ir::identities`):
/// the operand's bits (or their sign flipped), broadcast or reshaped to the output's shape,
/// without computing anything that could flush a subnormal.
pub(crate) fn identity(identity: Identity, args: &[&Array], out: &Aval) -> Result<Array, String> {
    let (k, negated) = match identity {
        Identity::Operand(k) => (k, false),
        Identity::Negated(k) => (k, true),
    };
    let x = *args.get(k).ok_or_else(|| format!("expected an operand {k}, got {}", args.len()))?;
    let x = if negated { unary(UnaryOp::Neg, &[x])? } else { x.clone() };
    if x.shape() == out.shape.as_slice() {
        Ok(x)
    } else if x.len() == out.size() {
        crate::structural::reshape(&out.shape, &[&x])
    } else {
        Ok(map_array!(&x, a => broadcast_to(a, &out.shape)?.to_owned()))
    }
}

/// `x ** y` by repeated squaring, multiplying in the same order as JAX's `_integer_pow`;
/// a negative `y` gives `1 / x ** -y` (integer division for `i32`).
pub(crate) fn integer_pow(y: i32, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    if x.dtype().is_complex() {
        return remat_math::complex::integer_pow(y, x);
    }
    num_dtype!(x.dtype(), T => Ok(T::wrap(typed::<T>(x)?.mapv(|v| remat_math::arrays::integer_pow(v, y, T::ONE, T::mul, T::div)))),
        bool => Err("integer_pow is not defined on bool".to_string()))
}

/// `select_n pred case0 case1 ...`: `cases[pred]` elementwise. A `bool` predicate picks
/// between at most two cases; an `i32` predicate out of range is clamped into
/// `0..n` (XLA leaves it implementation-defined).
pub(crate) fn select_n(args: &[&Array]) -> Result<Array, String> {
    let (pred, cases) = args.split_first().ok_or("expected a predicate and at least one case, got no operands")?;
    let first = cases.first().ok_or("expected at least one case after the predicate")?;
    for (i, c) in cases.iter().enumerate() {
        if c.dtype() != first.dtype() || c.shape() != first.shape() {
            return Err(format!("case {i} is {}, but case 0 is {}", c.aval(), first.aval()));
        }
    }
    if !pred.shape().is_empty() && pred.shape() != first.shape() {
        return Err(format!("predicate {} must be a scalar or have the cases' shape {}", pred.aval(), first.aval()));
    }
    let n = cases.len();
    let which: ArrayD<usize> = match pred {
        Array::Bool(p) if n <= 2 => p.mapv(|b| usize::from(b).min(n - 1)),
        Array::I32(p) => p.mapv(|i| usize::try_from(i).unwrap_or(0).min(n - 1)),
        Array::Bool(_) => return Err(format!("a bool predicate selects between at most 2 cases, got {n}")),
        Array::F32(_)
        | Array::F64(_)
        | Array::BF16(_)
        | Array::F16(_)
        | Array::I8(_)
        | Array::I16(_)
        | Array::I64(_)
        | Array::U8(_)
        | Array::U32(_)
        | Array::Key(_)
        | Array::C64(_)
        | Array::C128(_) => return Err(format!("the predicate must be bool or i32, got {}", pred.aval())),
    };
    if let Some(&k) = which.first().filter(|_| which.ndim() == 0) {
        return Ok(cases[k].clone());
    }
    with_dtype!(first.dtype(), T => {
        let mut out = typed::<T>(first)?.clone();
        for (k, case) in cases.iter().enumerate().skip(1) {
            Zip::from(&mut out).and(&which).and(typed::<T>(case)?).for_each(|o, &w, &c| {
                if w == k {
                    *o = c;
                }
            });
        }
        Ok(T::wrap(out))
    })
}

/// `clamp lo x hi` = `min(max(x, lo), hi)` with NaN propagating; `lo` and `hi` may be scalars.
pub(crate) fn clamp(args: &[&Array]) -> Result<Array, String> {
    let [lo, x, hi] = operands(args)?;
    for (what, b) in [("lower bound", lo), ("upper bound", hi)] {
        if b.dtype() != x.dtype() || (!b.shape().is_empty() && b.shape() != x.shape()) {
            return Err(format!("{what} {} must be {} or a {} scalar", b.aval(), x.aval(), x.dtype()));
        }
    }
    with_dtype!(x.dtype(), T => {
        let xs = typed::<T>(x)?;
        let lo = broadcast_to(typed::<T>(lo)?, xs.shape())?;
        let hi = broadcast_to(typed::<T>(hi)?, xs.shape())?;
        Ok(T::wrap(Zip::from(xs).and(&lo).and(&hi).map_collect(|&x, &l, &h| x.max_nan(l).min_nan(h))))
    })
}

/// `regularized_incomplete_beta a b x` on floats of one dtype, a scalar operand broadcast
/// (`remat_math::betainc`, the JIT's definition too).
pub(crate) fn regularized_incomplete_beta(args: &[&Array]) -> Result<Array, String> {
    let [a, b, x] = operands(args)?;
    let shape = [a, b, x].iter().map(|v| v.shape().to_vec()).max_by_key(Vec::len).unwrap_or_default();
    for v in [a, b, x] {
        if v.dtype() != a.dtype() || !v.dtype().is_float() || (!v.shape().is_empty() && v.shape() != shape.as_slice()) {
            return Err(format!(
                "operands must be floats of one dtype, each a scalar or of one shape, found {}, {} and {}",
                a.aval(),
                b.aval(),
                x.aval()
            ));
        }
    }
    with_dtype!(a.dtype(), T => {
        let av = broadcast_to(typed::<T>(a)?, &shape)?;
        let bv = broadcast_to(typed::<T>(b)?, &shape)?;
        let xv = broadcast_to(typed::<T>(x)?, &shape)?;
        Ok(T::wrap(Zip::from(&av).and(&bv).and(&xv).map_collect(|&a, &b, &x| remat_math::betainc(a, b, x))))
    })
}

/// Floats to integers truncate toward zero and saturate, NaN gives 0; numbers to `bool`
/// are `x != 0`; `bool` to numbers is 0 or 1; integers to integers wrap to the new width
/// (two's complement, as XLA's convert); floats to floats round to nearest even. (Rust's
/// `as` does exactly this; integers pass through `i128` and floats through `f64`, both
/// exactly, except that `f64` reads a subnormal `f32` as 0 and an `f32` result that would
/// be subnormal is 0, as `cvtss2sd` and `cvtsd2ss` do in XLA's float environment.)
pub(crate) fn convert_element_type(new_dtype: DType, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    if x.dtype() == DType::Key || new_dtype == DType::Key {
        return Err(format!("keys cannot be converted, found {} to {}", x.aval(), new_dtype.numpy_name()));
    }
    if x.dtype().is_complex() || new_dtype.is_complex() {
        return remat_math::complex::convert(new_dtype, x);
    }
    // Between f32 and the 16-bit floats XLA converts without arithmetic (integer rounding
    // of the bits, a shift, F16C), so subnormals survive; through f64 they would not.
    let narrow_or_f32 = |d: DType| matches!(d, DType::F32 | DType::BF16 | DType::F16);
    if narrow_or_f32(x.dtype()) && narrow_or_f32(new_dtype) {
        let wide = match x {
            Array::F32(a) => a.clone(),
            Array::BF16(a) => a.mapv(Narrow::to_f32),
            Array::F16(a) => a.mapv(Narrow::to_f32),
            other => return Err(format!("expected a float operand, got {}", other.aval())),
        };
        return Ok(match new_dtype {
            DType::BF16 => Array::BF16(wide.mapv(Narrow::from_f32)),
            DType::F16 => Array::F16(wide.mapv(Narrow::from_f32)),
            DType::F32
            | DType::F64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => Array::F32(wide),
        });
    }
    with_dtype!(x.dtype(), S => {
        let xs = typed::<S>(x)?;
        // `Elem`'s conversions, not `half`'s inherent ones of the same names.
        with_dtype!(new_dtype, D => Ok(D::wrap(xs.mapv(|v| match v.to_i128() {
            Some(i) => <D as Elem>::from_i128(i),
            None => <D as Element>::from_f64(<S as Element>::to_f64(v)),
        }))))
    })
}

/// `round[rounding_method=m] x`: halves away from zero (0) or to even (1).
pub(crate) fn round(rounding_method: RoundingMethod, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let to_even = rounding_method == RoundingMethod::ToNearestEven;
    Ok(match x {
        Array::F32(a) => Array::F32(a.mapv(|v| remat_math::round_f32(v, to_even))),
        Array::F64(a) => Array::F64(a.mapv(|v| remat_math::round_f64(v, to_even))),
        Array::BF16(a) => Array::BF16(narrow_map(a, |v| remat_math::round_f32(v, to_even))),
        Array::F16(a) => Array::F16(narrow_map(a, |v| remat_math::round_f32(v, to_even))),
        Array::I8(_)
        | Array::I16(_)
        | Array::I32(_)
        | Array::I64(_)
        | Array::U8(_)
        | Array::U32(_)
        | Array::Bool(_)
        | Array::Key(_)
        | Array::C64(_)
        | Array::C128(_) => return Err(format!("round needs a float operand, got {}", x.aval())),
    })
}

/// Rounds each float to `mantissa_bits` (to nearest, ties to even) and clamps its exponent
/// to the range of `exponent_bits` (overflow to ±inf, underflow to ±0), bit for bit as
/// XLA's `ReducePrecision`. At or above the dtype's own widths it is the identity.
pub(crate) fn reduce_precision(exponent_bits: u32, mantissa_bits: u32, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    if exponent_bits < 1 {
        return Err("exponent_bits must be at least 1".to_string());
    }
    Ok(match x {
        Array::F32(a) => Array::F32(a.mapv(|v| reduce_precision_f32(v, exponent_bits, mantissa_bits))),
        Array::F64(a) => Array::F64(a.mapv(|v| {
            let bits = reduce_bits(v.to_bits(), 64, 11, 52, exponent_bits, mantissa_bits);
            if v.is_nan() {
                if mantissa_bits > 0 {
                    v
                } else {
                    f64::INFINITY
                }
            } else {
                f64::from_bits(bits)
            }
        })),
        Array::BF16(a) => Array::BF16(narrow_map(a, |v| reduce_precision_f32(v, exponent_bits, mantissa_bits))),
        Array::F16(a) => Array::F16(narrow_map(a, |v| reduce_precision_f32(v, exponent_bits, mantissa_bits))),
        Array::I8(_)
        | Array::I16(_)
        | Array::I32(_)
        | Array::I64(_)
        | Array::U8(_)
        | Array::U32(_)
        | Array::Bool(_)
        | Array::Key(_) => return Err(format!("reduce_precision needs a float operand, got {}", x.aval())),
        // Each part, as XLA's `ReducePrecision` of a complex value.
        Array::C64(_) | Array::C128(_) => {
            let re = reduce_precision(exponent_bits, mantissa_bits, &[&remat_math::complex::part(false, x)?])?;
            let im = reduce_precision(exponent_bits, mantissa_bits, &[&remat_math::complex::part(true, x)?])?;
            remat_math::complex::complex(&re, &im)?
        }
    })
}

/// `reduce_precision` of one `f32`.
fn reduce_precision_f32(v: f32, exponent_bits: u32, mantissa_bits: u32) -> f32 {
    if v.is_nan() {
        return if mantissa_bits > 0 { v } else { f32::INFINITY };
    }
    f32::from_bits(reduce_bits(v.to_bits() as u64, 32, 8, 23, exponent_bits, mantissa_bits) as u32)
}

/// XLA's bit manipulation for a float of `width` bits with `src_exp`/`src_man` field widths.
fn reduce_bits(mut bits: u64, width: u32, src_exp: u32, src_man: u32, exp_bits: u32, man_bits: u32) -> u64 {
    let width_mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
    if man_bits < src_man {
        let last_mantissa_bit_mask = 1u64 << (src_man - man_bits);
        let base_rounding_bias = (last_mantissa_bit_mask >> 1) - 1;
        let x_last_mantissa_bit = (bits & last_mantissa_bit_mask) >> (src_man - man_bits);
        let x_rounding_bias = x_last_mantissa_bit + base_rounding_bias;
        let truncation_mask = !(last_mantissa_bit_mask - 1);
        bits = (bits.wrapping_add(x_rounding_bias) & truncation_mask) & width_mask;
    }
    if exp_bits < src_exp {
        let sign_bit_mask = 1u64 << (width - 1);
        let exp_bits_mask = ((1u64 << src_exp) - 1) << src_man;
        let exponent_bias = (1u64 << (src_exp - 1)) - 1;
        let reduced_exponent_bias = (1u64 << (exp_bits - 1)) - 1;
        let reduced_max_exponent = exponent_bias + reduced_exponent_bias;
        let reduced_min_exponent = exponent_bias - reduced_exponent_bias;
        let x_exponent = bits & exp_bits_mask;
        let x_overflows = x_exponent > (reduced_max_exponent << src_man);
        let x_underflows = x_exponent <= (reduced_min_exponent << src_man);
        let x_signed_zero = bits & sign_bit_mask;
        let x_signed_inf = x_signed_zero | exp_bits_mask;
        if x_overflows {
            bits = x_signed_inf;
        }
        if x_underflows {
            bits = x_signed_zero;
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_bits_matches_known_roundings() {
        let bf16 = |x: f32| f32::from_bits(reduce_bits(x.to_bits() as u64, 32, 8, 23, 8, 7) as u32);
        assert_eq!(bf16(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(bf16(1.0 + 3.0 / 256.0), 1.015625);
        assert_eq!(bf16(f32::MAX), f32::INFINITY);
        assert_eq!(bf16(-0.0).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn broadcasting_accepts_scalars_and_unit_axes_only() {
        let a = |shape: &[usize]| Array::zeros(&Aval::new(DType::F32, shape.to_vec()));
        assert_eq!(broadcast_shapes(&a(&[2, 3]), &a(&[])), Ok(vec![2, 3]));
        assert_eq!(broadcast_shapes(&a(&[1, 3]), &a(&[2, 1])), Ok(vec![2, 3]));
        assert!(broadcast_shapes(&a(&[3]), &a(&[2, 3])).is_err());
        assert!(broadcast_shapes(&a(&[2, 3]), &a(&[3, 2])).is_err());
    }
}
