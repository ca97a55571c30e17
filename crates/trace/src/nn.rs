//! `jax.nn`: activations and normalizers, recorded as JAX records them (`relu` as a
//! `custom_jvp_call` around `jit[name=relu]`, `log_softmax` as `jit[name=log_softmax]`,
//! `softmax` inline with the max-subtraction under `stop_gradient`). Initializers are in
//! [`initializers`]; `dropout` draws its mask with [`crate::random::bernoulli`].

use std::panic::Location;

use remat_ir::{BinaryOp, CompareOp, DType, LitValue, Primitive, ReduceOp, UnaryOp};

use crate::elementwise::{binary_at, compare_at, unary_at};
use crate::tensor::Tensor;
use crate::trace::{bind, Operand};
use crate::transforms::{library_custom_jvp, library_jit};

pub mod initializers;

/// `jax.nn.relu(x)`: `max(x, 0)`. JAX defines it with a custom derivative (0 at 0), so it
/// records `custom_jvp_call[name=relu call_jaxpr={ jit[name=relu] } jvp=jvp]`.
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    let loc = Location::caller();
    library_custom_jvp(
        "relu",
        "jvp",
        &[(x.into(), x.is_weak())],
        |x| {
            library_jit(
                "relu",
                &[x[0].clone().into()],
                |inner| binary_at(BinaryOp::Max, inner[0].clone().into(), 0.0.into(), loc),
                loc,
            )
        },
        loc,
    )
}

/// `jax.nn.sigmoid(x)`: `1 / (1 + e^-x)` (`logistic`).
#[track_caller]
pub fn sigmoid(x: &Tensor) -> Tensor {
    unary_at(UnaryOp::Logistic, x.into(), Location::caller())
}

/// `jax.nn.silu(x)` (swish): `x * sigmoid(x)`, recorded as `jit[name=silu]`.
#[track_caller]
pub fn silu(x: &Tensor) -> Tensor {
    let loc = Location::caller();
    library_jit(
        "silu",
        &[x.into()],
        |inner| {
            let s = unary_at(UnaryOp::Logistic, inner[0].clone().into(), loc);
            binary_at(BinaryOp::Mul, inner[0].clone().into(), s.into(), loc)
        },
        loc,
    )
}

/// `jax.nn.gelu(x)` (the default tanh approximation):
/// `x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
#[track_caller]
pub fn gelu(x: &Tensor) -> Tensor {
    let loc = Location::caller();
    let cube = x.apply_at(Primitive::IntegerPow { y: 3 }, loc);
    let inner = binary_at(BinaryOp::Mul, 0.044715.into(), cube.into(), loc);
    let inner = binary_at(BinaryOp::Add, x.into(), inner.into(), loc);
    let inner = binary_at(BinaryOp::Mul, (2.0 / std::f64::consts::PI).sqrt().into(), inner.into(), loc);
    let t = unary_at(UnaryOp::Tanh, inner.into(), loc);
    let t = binary_at(BinaryOp::Add, 1.0.into(), t.into(), loc);
    let t = binary_at(BinaryOp::Mul, 0.5.into(), t.into(), loc);
    binary_at(BinaryOp::Mul, x.into(), t.into(), loc)
}

/// `jnp.max(x, axis, keepdims=True, initial=-inf)` under `stop_gradient`: the shift that
/// keeps `exp` from overflowing in `softmax` and `log_softmax`.
fn shifted(x: &Tensor, axis: usize, loc: &'static Location<'static>) -> Tensor {
    let m = x.apply_at(Primitive::Reduce { op: ReduceOp::Max, axes: vec![axis] }, loc);
    let m = binary_at(BinaryOp::Max, f64::NEG_INFINITY.into(), m.into(), loc);
    let m = m.expand_dims_at(&[axis], loc);
    let m = unary_at(UnaryOp::StopGradient, m.into(), loc);
    binary_at(BinaryOp::Sub, x.into(), m.into(), loc)
}

fn sum_keepdims(x: &Tensor, axis: usize, loc: &'static Location<'static>) -> Tensor {
    x.reduce_sum_at(&[axis], loc).expand_dims_at(&[axis], loc)
}

fn axis_of(what: &str, x: &Tensor, axis: isize, loc: &'static Location<'static>) -> Option<usize> {
    crate::numpy::normalize_axes(what, x, &[axis], loc).map(|a| a[0])
}

/// `jax.nn.softmax(x, axis)`: `exp(x - max) / sum(exp(x - max))` along `axis` (negative
/// counts from the end; JAX's default is `-1`), recorded inline.
#[track_caller]
pub fn softmax(x: &Tensor, axis: isize) -> Tensor {
    let loc = Location::caller();
    let Some(axis) = axis_of("softmax", x, axis, loc) else { return Tensor::placeholder(x.aval().clone()) };
    let e = unary_at(UnaryOp::Exp, shifted(x, axis, loc).into(), loc);
    let s = sum_keepdims(&e, axis, loc);
    binary_at(BinaryOp::Div, e.into(), s.into(), loc)
}

/// `jax.nn.log_softmax(x, axis)`: `x - max - log(sum(exp(x - max)))` along `axis`,
/// recorded as `jit[name=log_softmax]`.
#[track_caller]
pub fn log_softmax(x: &Tensor, axis: isize) -> Tensor {
    let loc = Location::caller();
    let Some(axis) = axis_of("log_softmax", x, axis, loc) else { return Tensor::placeholder(x.aval().clone()) };
    library_jit(
        "log_softmax",
        &[x.into()],
        |inner| {
            let s = shifted(&inner[0], axis, loc);
            let e = unary_at(UnaryOp::Exp, s.clone().into(), loc);
            let l = unary_at(UnaryOp::Log, sum_keepdims(&e, axis, loc).into(), loc);
            binary_at(BinaryOp::Sub, s.into(), l.into(), loc)
        },
        loc,
    )
}

/// `jax.nn.logsumexp(x, axis=axes, keepdims=keepdims)` (`axes: None` reduces all):
/// `log(sum(exp(x - m))) + m` with `m` the maximum, replaced by 0 where it is not finite
/// (`is_finite`). As JAX's, it also records the `sign` of the sum, which it does not use
/// (the top level prints that binder `_`).
#[track_caller]
pub fn logsumexp(x: &Tensor, axes: Option<&[isize]>, keepdims: bool) -> Tensor {
    let loc = Location::caller();
    let all: Vec<isize> = (0..x.ndim() as isize).collect();
    let Some(mut axes) = crate::numpy::normalize_axes("logsumexp", x, axes.unwrap_or(&all), loc) else {
        return Tensor::placeholder(x.aval().clone());
    };
    let m = x.apply_at(Primitive::Reduce { op: ReduceOp::Max, axes: axes.clone() }, loc);
    let m = binary_at(BinaryOp::Max, f64::NEG_INFINITY.into(), m.into(), loc);
    axes.sort_unstable();
    let m = if keepdims { m.expand_dims_at(&axes, loc) } else { m };
    let finite = unary_at(UnaryOp::IsFinite, m.clone().into(), loc);
    let zero = if m.ndim() == 0 {
        Operand::Literal(LitValue::from_f64(m.dtype(), 0.0))
    } else {
        crate::numpy::full_at(m.shape(), LitValue::from_f64(m.dtype(), 0.0), loc).into()
    };
    let m = bind(Primitive::SelectN, &[finite.into(), zero, m.into()], false, loc).remove(0);
    let m = unary_at(UnaryOp::StopGradient, m.into(), loc);
    let m_dims = if keepdims { m.clone() } else { m.expand_dims_at(&axes, loc) };
    let e = unary_at(UnaryOp::Exp, binary_at(BinaryOp::Sub, x.into(), m_dims.into(), loc).into(), loc);
    let s = e.reduce_sum_at(&axes, loc);
    let s = if keepdims { s.expand_dims_at(&axes, loc) } else { s };
    unary_at(UnaryOp::Sign, s.clone().into(), loc);
    let l = unary_at(UnaryOp::Log, unary_at(UnaryOp::Abs, s.into(), loc).into(), loc);
    binary_at(BinaryOp::Add, l.into(), m.into(), loc)
}

/// `jax.nn.one_hot(x, num_classes, dtype=dtype)`: for integer labels `x`, a new last axis
/// with 1 at each label and 0 elsewhere. Recorded as `jit[name=_one_hot]` around an `eq`
/// of the labels against an `iota`.
#[track_caller]
pub fn one_hot(x: &Tensor, num_classes: usize, dtype: DType) -> Tensor {
    let loc = Location::caller();
    library_jit(
        "_one_hot",
        &[x.into()],
        |inner| {
            let x = &inner[0];
            let r = x.ndim();
            let labels = x.expand_dims_at(&[r], loc);
            let mut shape = vec![1; r];
            shape.push(num_classes);
            let iota = bind(Primitive::Iota { dtype: x.dtype(), shape, dimension: r }, &[], false, loc).remove(0);
            compare_at(CompareOp::Eq, labels.into(), iota.into(), loc).to_type(dtype, false, loc)
        },
        loc,
    )
}

/// `jax.nn.softplus(x)`: `log(1 + e^x)`, recorded as JAX records it:
/// `jit[name=softplus]` around `jnp.logaddexp(x, 0)`, a
/// `custom_jvp_call[name=logaddexp ... jvp=_logaddexp_jvp]`.
#[track_caller]
pub fn softplus(x: &Tensor) -> Tensor {
    let loc = Location::caller();
    library_jit(
        "softplus",
        &[x.into()],
        |inner| {
            library_custom_jvp(
                "logaddexp",
                "_logaddexp_jvp",
                // `jnp.logaddexp` promotes its operands first: the 0 is a strong literal.
                &[(inner[0].clone().into(), false), (Operand::Literal(LitValue::from_f64(x.dtype(), 0.0)), false)],
                |ab| {
                    let (a, b) = (&ab[0], &ab[1]);
                    let amax = binary_at(BinaryOp::Max, a.into(), b.into(), loc);
                    let delta = binary_at(BinaryOp::Sub, a.into(), b.into(), loc);
                    let is_nan = compare_at(CompareOp::Ne, delta.clone().into(), delta.clone().into(), loc);
                    let sum = binary_at(BinaryOp::Add, a.into(), b.into(), loc);
                    let t = unary_at(UnaryOp::Abs, delta.into(), loc);
                    let t = unary_at(UnaryOp::Neg, t.into(), loc);
                    let t = unary_at(UnaryOp::Exp, t.into(), loc);
                    let t = unary_at(UnaryOp::Log1p, t.into(), loc);
                    let out = binary_at(BinaryOp::Add, amax.into(), t.into(), loc);
                    bind(Primitive::SelectN, &[is_nan.into(), out.into(), sum.into()], false, loc).remove(0)
                },
                loc,
            )
        },
        loc,
    )
}

/// `jax.nn.gelu(x, approximate=False)`: `x * (1 + erf(x / sqrt(2))) / 2`, which JAX
/// records through `erfc`: `0.5 x * erfc(-x / sqrt(2))`, then a `copy`.
#[track_caller]
pub fn gelu_erf(x: &Tensor) -> Tensor {
    let loc = Location::caller();
    let half = binary_at(BinaryOp::Mul, 0.5.into(), x.into(), loc);
    let neg = unary_at(UnaryOp::Neg, x.into(), loc);
    let scaled = binary_at(BinaryOp::Mul, neg.into(), std::f64::consts::FRAC_1_SQRT_2.into(), loc);
    let e = unary_at(UnaryOp::Erfc, scaled.into(), loc);
    let out = binary_at(BinaryOp::Mul, half.into(), e.into(), loc);
    unary_at(UnaryOp::Copy, out.into(), loc)
}

/// `jax.nn.standardize(x, axis, epsilon=epsilon)`: `(x - mean) / sqrt(var + epsilon)`
/// along `axis`, the variance as `mean(x^2) - mean(x)^2` clipped at 0; recorded as
/// `jit[name=standardize]`.
#[track_caller]
pub fn standardize(x: &Tensor, axis: isize, epsilon: f64) -> Tensor {
    let loc = Location::caller();
    let Some(axis) = axis_of("standardize", x, axis, loc) else { return Tensor::placeholder(x.aval().clone()) };
    let n = x.shape()[axis] as f64;
    library_jit(
        "standardize",
        &[x.into(), epsilon.into()],
        |inner| {
            let (x, eps) = (&inner[0], &inner[1]);
            let mean_of = |t: &Tensor| binary_at(BinaryOp::Div, sum_keepdims(t, axis, loc).into(), n.into(), loc);
            let mean = mean_of(x);
            let sq = unary_at(UnaryOp::Square, x.into(), loc);
            let var = binary_at(
                BinaryOp::Sub,
                mean_of(&sq).into(),
                unary_at(UnaryOp::Square, mean.clone().into(), loc).into(),
                loc,
            );
            let var = library_jit(
                "clip",
                &[var.into(), 0.into()],
                |vz| binary_at(BinaryOp::Max, vz[1].clone().into(), vz[0].clone().into(), loc),
                loc,
            );
            let centered = binary_at(BinaryOp::Sub, x.into(), mean.into(), loc);
            let eps = eps.to_type(DType::F32, false, loc);
            let r = unary_at(UnaryOp::Rsqrt, binary_at(BinaryOp::Add, var.into(), eps.into(), loc).into(), loc);
            binary_at(BinaryOp::Mul, centered.into(), r.into(), loc)
        },
        loc,
    )
}

/// Layer normalization over the last axis: `standardize(x, -1, epsilon) * scale + bias`
/// (`scale` and `bias` broadcast against `x`, as flax's `LayerNorm` parameters do).
#[track_caller]
pub fn layer_norm(x: &Tensor, scale: &Tensor, bias: &Tensor, epsilon: f64) -> Tensor {
    let loc = Location::caller();
    let y = standardize(x, -1, epsilon);
    let y = binary_at(BinaryOp::Mul, y.into(), scale.into(), loc);
    binary_at(BinaryOp::Add, y.into(), bias.into(), loc)
}

/// Inverted dropout: each element of `x` kept with probability `1 - rate` (a mask from
/// `random::bernoulli(key, 1 - rate, x.shape)`) and scaled by `1 / (1 - rate)`, the others
/// 0: `jnp.where(keep, x / (1 - rate), 0)`.
#[track_caller]
pub fn dropout(key: &Tensor, x: &Tensor, rate: f64) -> Tensor {
    let loc = Location::caller();
    if !(0.0..1.0).contains(&rate) {
        crate::trace::record_error(loc, format!("dropout: the rate must be in [0, 1), found {rate}"));
        return Tensor::placeholder(x.aval().clone());
    }
    let keep = crate::random::bernoulli(key, 1.0 - rate, Some(x.shape()));
    let scaled = binary_at(BinaryOp::Div, x.into(), (1.0 - rate).into(), loc);
    crate::numpy::where_(&keep, &scaled, 0)
}
