//! Sorting and scanning primitives: `sort`, `top_k`, `argmin`, and the cumulative
//! reductions (`cumsum`, `cumprod`, `cummax`, `cummin`, `cumlogsumexp`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`; `parse_*`)
//! and its shape rule (`*_shape`, JAX's rule from `jax/_src/lax/lax.py` and
//! `control_flow/loops.py`). Results land in device memory.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::CumulativeOp;
use crate::shape::{arity, bail, device, ensure, ShapeError};
use crate::types::{Aval, DType};

// `sort[dimension=1 is_stable=True num_keys=1] k0 ... v0 ...`: every operand is sorted by
// the first `num_keys` operands, lexicographically.

pub(super) fn sort_params(dimension: usize, is_stable: bool, num_keys: usize) -> Params {
    vec![
        ("dimension", Param::Int(dimension as i64)),
        ("is_stable", Param::Bool(is_stable)),
        ("num_keys", Param::Int(num_keys as i64)),
    ]
}

pub(super) fn parse_sort(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Sort {
        dimension: p.usize("dimension")?,
        is_stable: p.bool("is_stable")?,
        num_keys: p.usize("num_keys")?,
    })
}

pub(crate) fn sort_shape(dimension: usize, num_keys: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "sort";
    let Some(first) = in_avals.first() else { bail!(name, "expected at least one operand") };
    ensure!(
        (1..=in_avals.len()).contains(&num_keys),
        name,
        "num_keys={num_keys} must be between 1 and the operand count {}",
        in_avals.len()
    );
    ensure!(dimension < first.rank(), name, "dimension {dimension} is out of range for {first}");
    for (i, x) in in_avals.iter().enumerate() {
        ensure!(x.shape == first.shape, name, "operand {i} {x} and operand 0 {first} differ in shape");
        ensure!(i >= num_keys || x.dtype != DType::Key, name, "sort key {i} {x} cannot be compared");
    }
    Ok(in_avals.iter().map(|x| Aval::new(x.dtype, x.shape.clone())).collect())
}

// `top_k[axis=1 k=3] x`: the `k` largest along `axis`, and their i32 indices.

pub(super) fn top_k_params(axis: usize, k: usize) -> Params {
    vec![("axis", Param::Int(axis as i64)), ("k", Param::Int(k as i64))]
}

pub(super) fn parse_top_k(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::TopK { axis: p.usize("axis")?, k: p.usize("k")? })
}

pub(crate) fn top_k_shape(axis: usize, k: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "top_k";
    let [x] = arity(name, in_avals)?;
    ensure!(axis < x.rank(), name, "axis {axis} is out of range for {x}");
    ensure!(k <= x.shape[axis], name, "k={k} exceeds dimension {axis} of {x}");
    ensure!(x.dtype.is_numeric(), name, "operand {x} is not numeric");
    let mut shape = x.shape.clone();
    shape[axis] = k;
    Ok(vec![Aval::new(x.dtype, shape.clone()), Aval::new(DType::I32, shape)])
}

// `argmin[axes=(1,) index_dtype=int32] x`: as `argmax`, the first minimum.

pub(super) fn argmin_params(axes: &[usize], index_dtype: DType) -> Params {
    vec![("axes", Param::ints(axes.iter().copied())), ("index_dtype", dtype_param(index_dtype))]
}

pub(super) fn parse_argmin(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Argmin { axes: p.usizes("axes")?, index_dtype: p.dtype("index_dtype")? })
}

pub(crate) fn argmin_shape(axes: &[usize], index_dtype: DType, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "argmin";
    let [x] = arity(name, in_avals)?;
    ensure!(index_dtype == DType::I32, name, "index_dtype must be int32, found {}", index_dtype.numpy_name());
    let [axis] = axes else { bail!(name, "expects exactly one axis, found axes {axes:?}") };
    ensure!(*axis < x.rank(), name, "axis {axis} is out of range for {x}");
    ensure!(x.shape[*axis] > 0, name, "the reduced dimension {axis} of {x} is empty");
    ensure!(x.dtype != DType::Key, name, "operand {x} is not a number or boolean");
    let shape = x.shape.iter().enumerate().filter(|(d, _)| d != axis).map(|(_, &n)| n).collect();
    Ok(device(index_dtype, shape))
}

// `cumsum[axis=1 reverse=False] x` and the other cumulative reductions.

pub(super) fn cumulative_params(axis: usize, reverse: bool) -> Params {
    vec![("axis", Param::Int(axis as i64)), ("reverse", Param::Bool(reverse))]
}

pub(super) fn parse_cumulative(op: CumulativeOp, p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Cumulative { op, axis: p.usize("axis")?, reverse: p.bool("reverse")? })
}

pub(crate) fn cumulative_shape(op: CumulativeOp, axis: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x] = arity(name, in_avals)?;
    ensure!(axis < x.rank(), name, "axis {axis} is out of range for {x}");
    match op {
        CumulativeOp::LogSumExp => ensure!(x.dtype.is_float(), name, "operand {x} must be a float"),
        CumulativeOp::Sum | CumulativeOp::Prod => ensure!(x.dtype.is_numeric(), name, "operand {x} is not numeric"),
        CumulativeOp::Max | CumulativeOp::Min => {
            ensure!(x.dtype != DType::Key, name, "operand {x} is not a number or boolean")
        }
    }
    Ok(device(x.dtype, x.shape.clone()))
}
