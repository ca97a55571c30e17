//! `jax.nn.initializers`: parameter initializers drawing from a key, recorded as JAX 0.10.2
//! records them, so that they give JAX's values for the same key. Fans follow JAX's
//! `_compute_fans` with its defaults: `in_axis=-2`, `out_axis=-1`, the other axes a
//! receptive field.

use std::panic::Location;

use remat_ir::{Aval, BinaryOp, DType, LitValue, Primitive, UnaryOp};

use crate::random;
use crate::tensor::{binary_at, unary_at, Tensor};
use crate::trace::{bind, record_error, Operand};

/// A strongly typed `f32` constant, as JAX's `jnp.array(x, dtype)`.
fn f32_lit(x: f64) -> Operand {
    Operand::Literal(LitValue::from_f64(DType::F32, x))
}

/// `(fan_in, fan_out)` of a kernel of `shape`, or an error for fewer than two axes.
fn fans(what: &str, shape: &[usize], loc: &'static Location<'static>) -> Option<(f64, f64)> {
    let n = shape.len();
    if n < 2 {
        record_error(loc, format!("{what}: a kernel needs at least two axes (in and out), found shape {shape:?}"));
        return None;
    }
    let receptive: usize = shape[..n - 2].iter().product();
    Some(((shape[n - 2] * receptive) as f64, (shape[n - 1] * receptive) as f64))
}

/// `jax.nn.initializers.glorot_uniform()(key, shape, dtype)` (Xavier): uniform in
/// `±sqrt(3 * 2 / (fan_in + fan_out))`.
#[track_caller]
pub fn glorot_uniform(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let Some((fan_in, fan_out)) = fans("glorot_uniform", shape, loc) else {
        return Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    };
    let variance = 1.0 / ((fan_in + fan_out) / 2.0);
    let u = random::uniform(key, shape, dtype, -1, 1.0);
    // JAX's variance is a float32 array, so the scale is strongly typed.
    let scale = bind(Primitive::Binary(BinaryOp::Mul), &[f32_lit(3.0), f32_lit(variance)], false, loc).remove(0);
    let scale = unary_at(UnaryOp::Sqrt, scale.into(), loc);
    binary_at(BinaryOp::Mul, u.into(), scale.into(), loc)
}

/// `jax.nn.initializers.he_normal()(key, shape, dtype)` (Kaiming): a normal truncated to
/// ±2 standard deviations, scaled to variance `2 / fan_in`.
#[track_caller]
pub fn he_normal(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let Some((fan_in, _)) = fans("he_normal", shape, loc) else {
        return Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    };
    let variance = 2.0 / fan_in;
    // The standard deviation of a standard normal truncated to (-2, 2), as JAX writes it.
    let stddev = bind(Primitive::Unary(UnaryOp::Sqrt), &[f32_lit(variance)], false, loc).remove(0);
    let stddev = binary_at(BinaryOp::Div, stddev.into(), 0.879_625_661_034_239_8.into(), loc);
    let t = random::truncated_normal(key, -2, 2, shape, dtype);
    binary_at(BinaryOp::Mul, t.into(), stddev.into(), loc)
}

/// `jax.nn.initializers.normal(stddev)(key, shape, dtype)`: `stddev * normal(key, shape)`.
#[track_caller]
pub fn normal(key: &Tensor, shape: &[usize], dtype: DType, stddev: f64) -> Tensor {
    let loc = Location::caller();
    let n = random::normal(key, shape, dtype);
    binary_at(BinaryOp::Mul, n.into(), stddev.into(), loc)
}
