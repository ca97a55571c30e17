//! `jax.nn.initializers`: parameter initializers drawing from a key, recorded as JAX 0.10.2
//! records them, so that they give JAX's values for the same key. Fans follow JAX's
//! `_compute_fans` with its defaults: `in_axis=-2`, `out_axis=-1`, the other axes a
//! receptive field.

use std::panic::Location;

use remat_ir::{Aval, BinaryOp, DType, LitValue, Primitive, UnaryOp};

use crate::elementwise::{binary_at, unary_at};
use crate::random;
use crate::tensor::Tensor;
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

/// Which fan [`variance_scaling`] divides its scale by (JAX's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// `"fan_in"`.
    FanIn,
    /// `"fan_out"`.
    FanOut,
    /// `"fan_avg"`: the mean of the two.
    FanAvg,
}

/// What [`variance_scaling`] draws from (JAX's `distribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// `"truncated_normal"`: a standard normal truncated to ±2, rescaled to unit variance.
    TruncatedNormal,
    /// `"normal"`.
    Normal,
    /// `"uniform"`: uniform in `±sqrt(3 * variance)`.
    Uniform,
}

/// `jax.nn.initializers.variance_scaling(scale, mode, distribution)(key, shape, dtype)`:
/// samples of variance `scale / fan` (`fan` as `mode` says), recorded as JAX records them
/// (the variance a strongly typed `f32`; the truncated normal's standard deviation is
/// computed before the draw, the others' scale after it).
#[track_caller]
pub fn variance_scaling(
    key: &Tensor,
    shape: &[usize],
    dtype: DType,
    scale: f64,
    mode: FanMode,
    distribution: Distribution,
) -> Tensor {
    variance_scaling_at("variance_scaling", key, shape, dtype, (scale, mode, distribution), Location::caller())
}

#[track_caller]
fn variance_scaling_at(
    what: &str,
    key: &Tensor,
    shape: &[usize],
    dtype: DType,
    (scale, mode, distribution): (f64, FanMode, Distribution),
    loc: &'static Location<'static>,
) -> Tensor {
    let Some((fan_in, fan_out)) = fans(what, shape, loc) else {
        return Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    };
    let denominator = match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
        FanMode::FanAvg => (fan_in + fan_out) / 2.0,
    };
    let variance = scale / denominator;
    match distribution {
        Distribution::TruncatedNormal => {
            // The standard deviation of a standard normal truncated to (-2, 2), as JAX writes it.
            let stddev = bind(Primitive::Unary(UnaryOp::Sqrt), &[f32_lit(variance)], false, loc).remove(0);
            let stddev = binary_at(BinaryOp::Div, stddev.into(), 0.879_625_661_034_239_8.into(), loc);
            let t = random::truncated_normal(key, -2, 2, shape, dtype);
            binary_at(BinaryOp::Mul, t.into(), stddev.into(), loc)
        }
        Distribution::Normal => {
            let n = random::normal(key, shape, dtype);
            let stddev = bind(Primitive::Unary(UnaryOp::Sqrt), &[f32_lit(variance)], false, loc).remove(0);
            binary_at(BinaryOp::Mul, n.into(), stddev.into(), loc)
        }
        Distribution::Uniform => {
            let u = random::uniform(key, shape, dtype, -1, 1.0);
            // JAX's variance is a float32 array, so the scale is strongly typed.
            let scale =
                bind(Primitive::Binary(BinaryOp::Mul), &[f32_lit(3.0), f32_lit(variance)], false, loc).remove(0);
            let scale = unary_at(UnaryOp::Sqrt, scale.into(), loc);
            binary_at(BinaryOp::Mul, u.into(), scale.into(), loc)
        }
    }
}

macro_rules! initializers {
    ($($(#[$doc:meta])* $name:ident => ($scale:expr, $mode:ident, $dist:ident);)*) => {$(
        $(#[$doc])*
        #[track_caller]
        pub fn $name(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
            let how = ($scale, FanMode::$mode, Distribution::$dist);
            variance_scaling_at(stringify!($name), key, shape, dtype, how, Location::caller())
        }
    )*};
}

initializers! {
    /// `jax.nn.initializers.glorot_uniform()(key, shape, dtype)` (Xavier): uniform in
    /// `±sqrt(3 * 2 / (fan_in + fan_out))`.
    glorot_uniform => (1.0, FanAvg, Uniform);
    /// `jax.nn.initializers.glorot_normal()` (`xavier_normal`): a truncated normal of
    /// variance `2 / (fan_in + fan_out)`.
    glorot_normal => (1.0, FanAvg, TruncatedNormal);
    /// `jax.nn.initializers.xavier_normal()`, JAX's other name for [`glorot_normal`].
    xavier_normal => (1.0, FanAvg, TruncatedNormal);
    /// `jax.nn.initializers.xavier_uniform()`, JAX's other name for [`glorot_uniform`].
    xavier_uniform => (1.0, FanAvg, Uniform);
    /// `jax.nn.initializers.he_normal()(key, shape, dtype)` (Kaiming): a normal truncated
    /// to ±2 standard deviations, scaled to variance `2 / fan_in`.
    he_normal => (2.0, FanIn, TruncatedNormal);
    /// `jax.nn.initializers.he_uniform()`: uniform of variance `2 / fan_in`.
    he_uniform => (2.0, FanIn, Uniform);
    /// `jax.nn.initializers.lecun_normal()`: a truncated normal of variance `1 / fan_in`.
    lecun_normal => (1.0, FanIn, TruncatedNormal);
    /// `jax.nn.initializers.lecun_uniform()`: uniform of variance `1 / fan_in`.
    lecun_uniform => (1.0, FanIn, Uniform);
}

/// `jax.nn.initializers.normal(stddev)(key, shape, dtype)`: `stddev * normal(key, shape)`.
#[track_caller]
pub fn normal(key: &Tensor, shape: &[usize], dtype: DType, stddev: f64) -> Tensor {
    let loc = Location::caller();
    let n = random::normal(key, shape, dtype);
    binary_at(BinaryOp::Mul, n.into(), stddev.into(), loc)
}
