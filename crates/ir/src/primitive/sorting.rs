//! Sorting and scanning primitives: `sort`, `top_k`, `argmin`, and the cumulative
//! reductions (`cumsum`, `cumprod`, `cummax`, `cummin`, `cumlogsumexp`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`; `parse_*`)
//! and its shape rule (`*_shape`, JAX's rule from `jax/_src/lax/lax.py` and
//! `control_flow/loops.py`). Results land in device memory.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::jaxpr::{Atom, Eqn, Jaxpr, SourceInfo};
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

// `approx_top_k[aggregate_to_topk=True is_max_k=True k=5 recall_target=0.95
// reduction_dimension=-1 reduction_input_size_override=-1] x`: sorted, every parameter printed.

pub(super) fn approx_top_k_params(p: &Primitive) -> Params {
    let Primitive::ApproxTopK {
        k,
        reduction_dimension,
        recall_target,
        is_max_k,
        reduction_input_size_override,
        aggregate_to_topk,
    } = p
    else {
        return Vec::new();
    };
    vec![
        ("aggregate_to_topk", Param::Bool(*aggregate_to_topk)),
        ("is_max_k", Param::Bool(*is_max_k)),
        ("k", Param::Int(*k as i64)),
        ("recall_target", recall_target.clone()),
        ("reduction_dimension", Param::Int(*reduction_dimension)),
        ("reduction_input_size_override", Param::Int(*reduction_input_size_override)),
    ]
}

pub(super) fn parse_approx_top_k(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::ApproxTopK {
        aggregate_to_topk: p.bool("aggregate_to_topk")?,
        is_max_k: p.bool("is_max_k")?,
        k: p.usize("k")?,
        recall_target: p.take("recall_target")?,
        reduction_dimension: p.int("reduction_dimension")?,
        reduction_input_size_override: p.int("reduction_input_size_override")?,
    })
}

/// The reduced axis of `approx_top_k` on an operand of `rank` (a negative dimension counts
/// from the end), if it is in range.
pub fn approx_top_k_axis(reduction_dimension: i64, rank: usize) -> Option<usize> {
    let d = if reduction_dimension < 0 { reduction_dimension + rank as i64 } else { reduction_dimension };
    usize::try_from(d).ok().filter(|&d| d < rank)
}

/// JAX's `_approx_top_k_abstract_eval` with `aggregate_to_topk=True` (the reduced axis becomes
/// `k`); without aggregation the axis's size is XLA's `ApproxTopKReductionOutputSize`, which
/// remat does not compute.
pub(crate) fn approx_top_k_shape(
    k: usize,
    reduction_dimension: i64,
    aggregate_to_topk: bool,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "approx_top_k";
    let [x] = arity(name, in_avals)?;
    ensure!(x.dtype.is_numeric(), name, "operand {x} is not numeric");
    let Some(axis) = approx_top_k_axis(reduction_dimension, x.rank()) else {
        bail!(name, "reduction_dimension {reduction_dimension} is out of range for {x}")
    };
    ensure!(k <= x.shape[axis], name, "k must be smaller than the size of reduction_dim {}, got {k}", x.shape[axis]);
    ensure!(
        aggregate_to_topk,
        name,
        "aggregate_to_topk=False is not supported: the reduced size is XLA's ApproxTopKReductionOutputSize"
    );
    let mut shape = x.shape.clone();
    shape[axis] = k;
    Ok(vec![Aval::new(x.dtype, shape.clone()), Aval::new(DType::I32, shape)])
}

/// `approx_top_k` as XLA's CPU fallback computes it, exactly, as a jaxpr `x -> (values,
/// indices)`: the `k` largest by `top_k` along the axis (NaN first, ties by index), or the
/// `k` smallest by a stable ascending `sort` of `x` with its indices (NaN last), sliced.
pub fn approx_top_k_as_jaxpr(k: usize, axis: usize, is_max_k: bool, x: &Aval) -> Jaxpr {
    let mut j = Jaxpr::default();
    let input = j.new_var(x.clone());
    j.invars = vec![input];
    let mut out_shape = x.shape.clone();
    out_shape[axis] = k;
    let values = j.new_var(Aval::new(x.dtype, out_shape.clone()));
    let indices = j.new_var(Aval::new(DType::I32, out_shape.clone()));
    let unknown = SourceInfo::unknown;
    if is_max_k {
        j.eqns.push(Eqn::new(Primitive::TopK { axis, k }, vec![Atom::Var(input)], vec![values, indices], unknown()));
    } else {
        let iota = j.new_var(Aval::new(DType::I32, x.shape.clone()));
        let prim = Primitive::Iota { dtype: DType::I32, shape: x.shape.clone(), dimension: axis };
        j.eqns.push(Eqn::new(prim, Vec::new(), vec![iota], unknown()));
        let sorted_x = j.new_var(x.clone());
        let sorted_i = j.new_var(Aval::new(DType::I32, x.shape.clone()));
        let sort = Primitive::Sort { dimension: axis, is_stable: true, num_keys: 1 };
        j.eqns.push(Eqn::new(sort, vec![Atom::Var(input), Atom::Var(iota)], vec![sorted_x, sorted_i], unknown()));
        let slice =
            Primitive::Slice { start_indices: vec![0; x.rank()], limit_indices: out_shape.clone(), strides: None };
        j.eqns.push(Eqn::new(slice.clone(), vec![Atom::Var(sorted_x)], vec![values], unknown()));
        j.eqns.push(Eqn::new(slice, vec![Atom::Var(sorted_i)], vec![indices], unknown()));
    }
    j.outvars = vec![Atom::Var(values), Atom::Var(indices)];
    j
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
