//! Elementwise primitives: the unary, binary and comparison ops, `integer_pow`,
//! `select_n`, `clamp`, `convert_element_type`, `reduce_precision`, `round` and
//! `bitcast_convert_type`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, JAX's rule from `jax/_src/lax/lax.py`). Results keep the operands' shape
//! (or broadcast it) and land in device memory.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::{BinaryOp, CompareOp, FftType, RoundingMethod, UnaryDomain, UnaryOp};
use crate::shape::{arity, bail, broadcast_shapes, device, ensure, same_dtype, ShapeError};
use crate::types::{Aval, DType};

// Unary ops: no parameters printed; `accuracy=None` is accepted.

pub(super) fn parse_unary(op: UnaryOp, p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("accuracy")?;
    Ok(Primitive::Unary(op))
}

pub(crate) fn unary_shape(op: UnaryOp, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x] = arity(name, in_avals)?;
    match op.domain() {
        UnaryDomain::Any => {}
        UnaryDomain::Number => ensure!(x.dtype.is_numeric(), name, "operand must be a number, found {x}"),
        UnaryDomain::IntOrBool => {
            ensure!(
                x.dtype.is_integer() || x.dtype == DType::Bool,
                name,
                "operand must be an integer or bool, found {x}"
            )
        }
        UnaryDomain::Int => ensure!(x.dtype.is_integer(), name, "operand must be an integer, found {x}"),
        UnaryDomain::Float => ensure!(x.dtype.is_float(), name, "operand must be a float, found {x}"),
        UnaryDomain::FloatOrComplex => {
            ensure!(x.dtype.is_inexact(), name, "operand must be a float or complex, found {x}")
        }
    }
    let dtype = match op {
        UnaryOp::IsFinite => DType::Bool,
        // `abs` of a complex number is its real magnitude.
        UnaryOp::Abs => x.dtype.real_dtype(),
        _ => x.dtype,
    };
    Ok(device(dtype, x.shape.clone()))
}

// Binary ops: no parameters printed; `out_dtype=None` is accepted.

pub(super) fn parse_binary(op: BinaryOp, p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("out_dtype")?;
    Ok(Primitive::Binary(op))
}

pub(crate) fn binary_shape(op: BinaryOp, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x, y] = arity(name, in_avals)?;
    match op {
        // JAX's pow takes a float base and a float exponent of the same dtype or an
        // integer exponent.
        BinaryOp::Pow => {
            ensure!(x.dtype.is_inexact(), name, "the base must be a float or complex, found {x}");
            ensure!(
                y.dtype == x.dtype || y.dtype.is_integer(),
                name,
                "the exponent {y} must be an integer or have the base's dtype {}",
                x.dtype
            );
        }
        BinaryOp::Add | BinaryOp::AddAny | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
            same_dtype(name, x, y)?;
            ensure!(x.dtype.is_numeric(), name, "operands must be numbers, found {x} and {y}");
        }
        BinaryOp::Max | BinaryOp::Min => {
            same_dtype(name, x, y)?;
            ensure!(
                x.dtype != DType::Key && !x.dtype.is_complex(),
                name,
                "operands must be real numbers or booleans, found {x} and {y}"
            );
        }
        BinaryOp::Rem => {
            same_dtype(name, x, y)?;
            ensure!(x.dtype.is_numeric(), name, "operands must be numbers, found {x} and {y}");
            ensure!(!x.dtype.is_complex(), name, "operands must be real numbers, found {x} and {y}");
        }
        BinaryOp::Atan2
        | BinaryOp::Nextafter
        | BinaryOp::Polygamma
        | BinaryOp::Igamma
        | BinaryOp::Igammac
        | BinaryOp::IgammaGradA
        | BinaryOp::Zeta => {
            same_dtype(name, x, y)?;
            ensure!(x.dtype.is_float(), name, "operands must be floats, found {x} and {y}");
        }
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => {
            same_dtype(name, x, y)?;
            ensure!(
                x.dtype.is_integer() || x.dtype == DType::Bool,
                name,
                "operands must be integers or bool, found {x} and {y}"
            );
        }
        BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic | BinaryOp::Mulhi => {
            same_dtype(name, x, y)?;
            ensure!(x.dtype.is_integer(), name, "operands must be integers, found {x} and {y}");
        }
    }
    Ok(device(x.dtype, broadcast_shapes(name, x, y)?))
}

// Comparisons: no parameters.

pub(crate) fn compare_shape(op: CompareOp, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x, y] = arity(name, in_avals)?;
    same_dtype(name, x, y)?;
    ensure!(
        !(x.dtype == DType::Key || x.dtype.is_complex()) || matches!(op, CompareOp::Eq | CompareOp::Ne),
        name,
        "keys and complex numbers can only be compared with eq and ne, found {x} and {y}"
    );
    Ok(device(DType::Bool, broadcast_shapes(name, x, y)?))
}

// Complex numbers: `complex x y`, `real z`, `imag z` (no parameters) and
// `conj[input_dtype=complex64] z`.

pub(crate) fn complex_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "complex";
    let [x, y] = arity(name, in_avals)?;
    same_dtype(name, x, y)?;
    let Some(dtype) = x.dtype.complex_dtype().filter(|_| x.dtype.is_float()) else {
        bail!(name, "operands must be f32 or f64, found {x} and {y}")
    };
    Ok(device(dtype, broadcast_shapes(name, x, y)?))
}

pub(crate) fn real_imag_shape(name: &'static str, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [z] = arity(name, in_avals)?;
    ensure!(z.dtype.is_complex(), name, "operand must be complex, found {z}");
    Ok(device(z.dtype.real_dtype(), z.shape.clone()))
}

pub(super) fn conj_params(input_dtype: DType) -> Params {
    vec![("input_dtype", dtype_param(input_dtype))]
}

pub(crate) fn conj_shape(input_dtype: DType, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "conj";
    let [z] = arity(name, in_avals)?;
    ensure!(z.dtype == input_dtype, name, "input_dtype={} but the operand is {z}", input_dtype.numpy_name());
    let Some(dtype) = z.dtype.complex_dtype() else { bail!(name, "operand must be f32, f64 or complex, found {z}") };
    Ok(device(dtype, z.shape.clone()))
}

// `fft[fft_lengths=(4, 8) fft_type=2] x` (JAX's `fft_abstract_eval`).

pub(super) fn fft_params(fft_type: FftType, fft_lengths: &[usize]) -> Params {
    vec![("fft_lengths", Param::ints(fft_lengths.iter().copied())), ("fft_type", Param::Int(fft_type as i64))]
}

pub(super) fn parse_fft(p: &mut ParamReader) -> Result<Primitive, String> {
    let fft_lengths = p.usizes("fft_lengths")?;
    let t = p.int("fft_type")?;
    let fft_type = FftType::from_int(t).ok_or_else(|| format!("fft: fft_type={t} is not 0, 1, 2 or 3"))?;
    Ok(Primitive::Fft { fft_type, fft_lengths })
}

pub(crate) fn fft_shape(fft_type: FftType, fft_lengths: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "fft";
    let [x] = arity(name, in_avals)?;
    let k = fft_lengths.len();
    ensure!((1..=3).contains(&k), name, "fft_lengths must have 1 to 3 entries, found {fft_lengths:?}");
    ensure!(!fft_lengths.contains(&0), name, "fft_lengths must be positive, found {fft_lengths:?}");
    ensure!(k <= x.rank(), name, "the operand {x} has fewer than {k} axes");
    let (batch, minor) = x.shape.split_at(x.rank() - k);
    let (last, leading) = fft_lengths.split_last().expect("1 to 3 lengths");
    let (shape, dtype) = match fft_type {
        FftType::Fft | FftType::Ifft => {
            ensure!(x.dtype.is_complex(), name, "the operand must be complex, found {x}");
            ensure!(
                minor == fft_lengths,
                name,
                "the operand's minor axes {minor:?} must be fft_lengths {fft_lengths:?}"
            );
            (x.shape.clone(), x.dtype)
        }
        FftType::Rfft => {
            ensure!(matches!(x.dtype, DType::F32 | DType::F64), name, "the operand must be f32 or f64, found {x}");
            ensure!(
                minor == fft_lengths,
                name,
                "the operand's minor axes {minor:?} must be fft_lengths {fft_lengths:?}"
            );
            let shape = [batch, leading, &[last / 2 + 1]].concat();
            (shape, x.dtype.complex_dtype().expect("f32 or f64"))
        }
        FftType::Irfft => {
            ensure!(x.dtype.is_complex(), name, "the operand must be complex, found {x}");
            ensure!(
                &minor[..k - 1] == leading && minor[k - 1] == last / 2 + 1,
                name,
                "the operand's minor axes {minor:?} must be fft_lengths {fft_lengths:?} with the last one n / 2 + 1"
            );
            ([batch, fft_lengths].concat(), x.dtype.real_dtype())
        }
    };
    Ok(device(dtype, shape))
}

// `integer_pow[y=2] x`.

pub(super) fn integer_pow_params(y: i32) -> Params {
    vec![("y", Param::Int(y as i64))]
}

pub(super) fn parse_integer_pow(p: &mut ParamReader) -> Result<Primitive, String> {
    let y = p.int("y")?;
    Ok(Primitive::IntegerPow { y: i32::try_from(y).map_err(|_| format!("integer_pow: y={y} is out of range"))? })
}

pub(crate) fn integer_pow_shape(y: i32, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "integer_pow";
    let [x] = arity(name, in_avals)?;
    ensure!(x.dtype.is_numeric(), name, "operand must be a number, found {x}");
    ensure!(x.dtype.is_inexact() || y >= 0, name, "integers cannot be raised to negative powers (y={y})");
    Ok(device(x.dtype, x.shape.clone()))
}

// `select_n pred case0 case1 ...`: no parameters.

pub(crate) fn select_n_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "select_n";
    let Some((pred, cases)) = in_avals.split_first() else { bail!(name, "expected a predicate and at least one case") };
    let Some(first) = cases.first() else { bail!(name, "expected at least one case") };
    ensure!(matches!(pred.dtype, DType::Bool | DType::I32), name, "the predicate must be bool or i32, found {pred}");
    ensure!(
        pred.dtype != DType::Bool || cases.len() <= 2,
        name,
        "a bool predicate selects between at most 2 cases, found {}",
        cases.len()
    );
    for (i, case) in cases.iter().enumerate() {
        ensure!(case.same_type(first), name, "case {i} is {case} but case 0 is {first}; all cases must have one type");
    }
    ensure!(
        pred.rank() == 0 || pred.shape == first.shape,
        name,
        "the predicate {pred} must be a scalar or have the cases' shape {first}"
    );
    Ok(device(first.dtype, first.shape.clone()))
}

// `clamp lo x hi`: no parameters.

pub(crate) fn clamp_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "clamp";
    let [lo, x, hi] = arity(name, in_avals)?;
    for (what, bound) in [("lo", lo), ("hi", hi)] {
        ensure!(bound.dtype == x.dtype, name, "{what} {bound} and operand {x} have different dtypes");
        ensure!(
            bound.rank() == 0 || bound.shape == x.shape,
            name,
            "{what} {bound} must be a scalar or have the operand's shape {x}"
        );
    }
    Ok(device(x.dtype, x.shape.clone()))
}

/// `regularized_incomplete_beta a b x`: three real floats of one dtype; each operand is a
/// scalar or has the result's shape (JAX's naryop over `_float` operands).
pub(crate) fn regularized_incomplete_beta_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "regularized_incomplete_beta";
    let [a, b, x] = arity(name, in_avals)?;
    let shape = [a, b, x].iter().map(|v| &v.shape).max_by_key(|s| s.len()).cloned().unwrap_or_default();
    for v in [a, b, x] {
        ensure!(v.dtype == a.dtype, name, "operands must have one dtype, found {a}, {b} and {x}");
        ensure!(v.rank() == 0 || v.shape == shape, name, "operand {v} must be a scalar or have the shape {shape:?}");
    }
    ensure!(a.dtype.is_float(), name, "operands must be real floats, found {a}, {b} and {x}");
    Ok(device(a.dtype, shape))
}

// `convert_element_type[new_dtype=float32 weak_type=False] x`; `sharding=None` is accepted.

pub(super) fn convert_element_type_params(new_dtype: DType, weak_type: bool) -> Params {
    vec![("new_dtype", dtype_param(new_dtype)), ("weak_type", Param::Bool(weak_type))]
}

pub(super) fn parse_convert_element_type(p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("sharding")?;
    Ok(Primitive::ConvertElementType { new_dtype: p.dtype("new_dtype")?, weak_type: p.bool("weak_type")? })
}

pub(crate) fn convert_element_type_shape(new_dtype: DType, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "convert_element_type";
    let [x] = arity(name, in_avals)?;
    ensure!(
        x.dtype != DType::Key && new_dtype != DType::Key,
        name,
        "keys cannot be converted (random_wrap and random_unwrap make and take keys), found {x} to {}",
        new_dtype.numpy_name()
    );
    Ok(device(new_dtype, x.shape.clone()))
}

// `round[rounding_method=0] x`: 0 rounds halves away from zero, 1 to even.

pub(super) fn round_params(rounding_method: RoundingMethod) -> Params {
    vec![("rounding_method", Param::Int(rounding_method as i64))]
}

pub(super) fn parse_round(p: &mut ParamReader) -> Result<Primitive, String> {
    let m = p.int("rounding_method")?;
    let rounding_method = match m {
        0 => RoundingMethod::AwayFromZero,
        1 => RoundingMethod::ToNearestEven,
        _ => return Err(format!("round: rounding_method={m} must be 0 (away from zero) or 1 (to nearest even)")),
    };
    Ok(Primitive::Round { rounding_method })
}

pub(crate) fn round_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "round";
    let [x] = arity(name, in_avals)?;
    ensure!(x.dtype.is_float(), name, "operand must be a float, found {x}");
    Ok(device(x.dtype, x.shape.clone()))
}

// `bitcast_convert_type[new_dtype=int32] x`: the same bits as another dtype. A narrower
// target adds a trailing axis of the width ratio; a wider one removes it.

pub(super) fn bitcast_convert_type_params(new_dtype: DType) -> Params {
    vec![("new_dtype", dtype_param(new_dtype))]
}

pub(super) fn parse_bitcast_convert_type(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::BitcastConvertType { new_dtype: p.dtype("new_dtype")? })
}

pub(crate) fn bitcast_convert_type_shape(new_dtype: DType, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "bitcast_convert_type";
    let [x] = arity(name, in_avals)?;
    ensure!(
        x.dtype != DType::Bool && new_dtype != DType::Bool,
        name,
        "cannot bitcast {x} to {new_dtype}: bool has no bit width"
    );
    let (from, to) = (x.dtype.size_in_bytes(), new_dtype.size_in_bytes());
    let mut shape = x.shape.clone();
    if from > to {
        shape.push(from / to);
    } else if from < to {
        ensure!(
            shape.last() == Some(&(to / from)),
            name,
            "bitcasting {x} to the wider {new_dtype} needs a last axis of {}",
            to / from
        );
        shape.pop();
    }
    Ok(device(new_dtype, shape))
}

// `reduce_precision[exponent_bits=8 mantissa_bits=23] x`.

pub(super) fn reduce_precision_params(exponent_bits: u32, mantissa_bits: u32) -> Params {
    vec![("exponent_bits", Param::Int(exponent_bits as i64)), ("mantissa_bits", Param::Int(mantissa_bits as i64))]
}

pub(super) fn parse_reduce_precision(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::ReducePrecision {
        exponent_bits: p.usize("exponent_bits")? as u32,
        mantissa_bits: p.usize("mantissa_bits")? as u32,
    })
}

pub(crate) fn reduce_precision_shape(exponent_bits: u32, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "reduce_precision";
    let [x] = arity(name, in_avals)?;
    ensure!(x.dtype.is_inexact(), name, "operand must be a float or complex, found {x}");
    ensure!(exponent_bits >= 1, name, "exponent_bits must be at least 1");
    Ok(device(x.dtype, x.shape.clone()))
}
