//! Reductions and contractions: `reduce_sum`, `reduce_max`, `reduce_min`, `reduce_prod`,
//! `reduce_and`, `reduce_or`, `reduce_xor`, `argmax` and `dot_general`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, JAX's rule from `jax/_src/lax/lax.py`). Results land in device memory.

use std::collections::HashSet;
use std::sync::Arc;

use super::params::{dtype_param, usizes_of, ParamReader, Params};
use super::{call, Primitive};
use crate::jaxpr::{Atom, Jaxpr, Var};
use crate::param::Param;
use crate::param_types::{DotDimensionNumbers, Precision, ReduceOp};
use crate::shape::{arity, bail, device, distinct_axes, ensure, ShapeError};
use crate::types::{Aval, DType, Shape};

fn remove_axes(shape: &[usize], axes: &[usize]) -> Shape {
    shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).collect()
}

// `reduce_sum[axes=(0,) out_sharding=None] x`; `reduce_max[axes=(0,)] x` and `reduce_min`
// accept `out_sharding=None` but do not print it.

pub(super) fn reduce_params(op: ReduceOp, axes: &[usize]) -> Params {
    let mut ps = vec![("axes", Param::ints(axes.iter().copied()))];
    match op {
        ReduceOp::Sum => ps.push(("out_sharding", Param::None)),
        ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod | ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => {}
    }
    ps
}

pub(super) fn parse_reduce(op: ReduceOp, p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("out_sharding")?;
    Ok(Primitive::Reduce { op, axes: p.usizes("axes")? })
}

pub(crate) fn reduce_shape(op: ReduceOp, axes: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x] = arity(name, in_avals)?;
    match op {
        ReduceOp::Sum | ReduceOp::Prod => {
            ensure!(x.dtype.is_numeric(), name, "operand must be a number, found {x}")
        }
        ReduceOp::Max | ReduceOp::Min => {
            ensure!(x.dtype != DType::Key, name, "operand must be a number or boolean, found {x}")
        }
        ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => ensure!(
            x.dtype.is_integer() || x.dtype == DType::Bool,
            name,
            "operand must be an integer or boolean, found {x}"
        ),
    }
    distinct_axes(name, "axes", axes, x)?;
    Ok(device(x.dtype, remove_axes(&x.shape, axes)))
}

// `reduce[computation=<function f.<locals>.<lambda> at 0xXX> dimensions=(1,) jaxpr={...}]
// xs... inits...`: sorted, every parameter printed.

pub(super) fn generic_reduce_params(computation: &Param, dimensions: &[usize], jaxpr: &Arc<Jaxpr>) -> Params {
    vec![
        ("computation", computation.clone()),
        ("dimensions", Param::ints(dimensions.iter().copied())),
        ("jaxpr", Param::Jaxpr(jaxpr.clone())),
    ]
}

pub(super) fn parse_generic_reduce(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::GenericReduce {
        computation: p.take("computation")?,
        dimensions: p.usizes("dimensions")?,
        jaxpr: p.jaxpr("jaxpr")?,
    })
}

/// JAX's `_reduce_shape_rule` and `_reduce_dtype_rule`: `n` operands of one shape, `n`
/// scalar inits of their dtypes, and a combiner `(accs..., xs...) -> accs...` over scalars of
/// those dtypes; the results are the operands' shape without `dimensions`.
pub(crate) fn generic_reduce_shape(
    dimensions: &[usize],
    jaxpr: &Jaxpr,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "reduce";
    let n = in_avals.len() / 2;
    ensure!(
        n > 0 && in_avals.len() == 2 * n,
        name,
        "expects operands then as many init values, found {} values",
        in_avals.len()
    );
    let (xs, inits) = in_avals.split_at(n);
    let x0 = &xs[0];
    for (x, init) in xs.iter().zip(inits) {
        ensure!(x.shape == x0.shape, name, "operands must have one shape, found {x0} and {x}");
        ensure!(init.rank() == 0 && init.dtype == x.dtype, name, "init value {init} does not match operand {x}");
        ensure!(x.dtype != DType::Key, name, "operand must be a number or boolean, found {x}");
    }
    distinct_axes(name, "dimensions", dimensions, x0)?;
    ensure!(jaxpr.constvars.is_empty(), name, "the combiner jaxpr has constants");
    let scalars: Vec<Aval> = inits.iter().chain(inits).cloned().collect();
    let ins = call::inner_avals(name, jaxpr, &jaxpr.invars)?;
    let outs = call::inner_out_avals(name, jaxpr)?;
    ensure!(
        ins.len() == 2 * n && ins.iter().zip(&scalars).all(|(a, b)| a.dtype == b.dtype && a.shape == b.shape),
        name,
        "the combiner's inputs must be two of each init value's type"
    );
    ensure!(
        outs.len() == n && outs.iter().zip(inits).all(|(a, b)| a.dtype == b.dtype && a.shape == b.shape),
        name,
        "the combiner's results must have the init values' types"
    );
    Ok(xs.iter().map(|x| Aval::new(x.dtype, remove_axes(&x.shape, dimensions))).collect())
}

/// The generic `reduce` of operands `in_avals` (operands, then inits) as a jaxpr of two
/// nested `scan`s with the same operands and results: the operands' kept axes moved to the
/// front and flattened into rows of the reduced elements in row-major order, an outer scan
/// over the rows and an inner scan over each row that carries the accumulators from the
/// inits through the combiner. This is XLA's sequential order on CPU for short reductions
/// (for an associative combiner any order gives the same value up to rounding); the
/// interpreter and the JIT both evaluate a generic `reduce` as this jaxpr.
pub fn generic_reduce_as_scans(
    dimensions: &[usize],
    combiner: &Arc<Jaxpr>,
    in_avals: &[Aval],
) -> Result<Jaxpr, ShapeError> {
    let out_avals = generic_reduce_shape(dimensions, combiner, in_avals)?;
    let n = in_avals.len() / 2;
    let x0 = &in_avals[0];
    let kept: Vec<usize> = (0..x0.rank()).filter(|d| !dimensions.contains(d)).collect();
    let n_out: usize = kept.iter().map(|&d| x0.shape[d]).product();
    let n_red: usize = dimensions.iter().map(|&d| x0.shape[d]).product();
    let mut order = kept.clone();
    let mut reduced = dimensions.to_vec();
    reduced.sort_unstable();
    order.extend(&reduced);
    let unknown = crate::jaxpr::SourceInfo::unknown;
    let scan = |jaxpr: Jaxpr, length: usize, num_consts: usize, num_carry: usize| Primitive::Scan {
        jaxpr: crate::jaxpr::ClosedJaxpr::new(Arc::new(jaxpr)),
        length,
        reverse: false,
        num_consts,
        num_carry,
        unroll: 1,
    };
    // The outer body: (inits..., rows...) -> accumulators, one inner scan.
    let mut outer = Jaxpr::default();
    let inits: Vec<Var> = in_avals[n..].iter().map(|a| outer.new_var(a.clone())).collect();
    let rows: Vec<Var> = in_avals[n..].iter().map(|a| outer.new_var(Aval::new(a.dtype, vec![n_red]))).collect();
    let accs: Vec<Var> = in_avals[n..].iter().map(|a| outer.new_var(a.clone())).collect();
    let ins = inits.iter().chain(&rows).map(|&v| Atom::Var(v)).collect();
    outer.eqns.push(crate::jaxpr::Eqn::new(scan((**combiner).clone(), n_red, 0, n), ins, accs.clone(), unknown()));
    outer.invars = inits.iter().chain(&rows).copied().collect();
    outer.outvars = accs.iter().map(|&v| Atom::Var(v)).collect();
    // The whole: (xs..., inits...) -> results.
    let mut whole = Jaxpr::default();
    let xs: Vec<Var> = in_avals[..n].iter().map(|a| whole.new_var(a.clone())).collect();
    let inits: Vec<Var> = in_avals[n..].iter().map(|a| whole.new_var(a.clone())).collect();
    let mut flat = Vec::with_capacity(n);
    for &x in &xs {
        let aval = whole.aval(x).clone();
        let v = whole.new_var(Aval::new(aval.dtype, vec![n_out, n_red]));
        let identity = order.iter().enumerate().all(|(i, &d)| i == d);
        let prim = Primitive::Reshape { new_sizes: vec![n_out, n_red], dimensions: (!identity).then(|| order.clone()) };
        whole.eqns.push(crate::jaxpr::Eqn::new(prim, vec![Atom::Var(x)], vec![v], unknown()));
        flat.push(v);
    }
    let ys: Vec<Var> = out_avals.iter().map(|a| whole.new_var(Aval::new(a.dtype, vec![n_out]))).collect();
    let ins = inits.iter().chain(&flat).map(|&v| Atom::Var(v)).collect();
    whole.eqns.push(crate::jaxpr::Eqn::new(scan(outer, n_out, n, 0), ins, ys.clone(), unknown()));
    let mut outs = Vec::with_capacity(n);
    for (&y, aval) in ys.iter().zip(&out_avals) {
        let v = whole.new_var(aval.clone());
        let prim = Primitive::Reshape { new_sizes: aval.shape.clone(), dimensions: None };
        whole.eqns.push(crate::jaxpr::Eqn::new(prim, vec![Atom::Var(y)], vec![v], unknown()));
        outs.push(Atom::Var(v));
    }
    whole.invars = xs.iter().chain(&inits).copied().collect();
    whole.outvars = outs;
    Ok(whole)
}

// `argmax[axes=(1,) index_dtype=int32] x`.

pub(super) fn argmax_params(axes: &[usize], index_dtype: DType) -> Params {
    vec![("axes", Param::ints(axes.iter().copied())), ("index_dtype", dtype_param(index_dtype))]
}

pub(super) fn parse_argmax(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Argmax { axes: p.usizes("axes")?, index_dtype: p.dtype("index_dtype")? })
}

pub(crate) fn argmax_shape(axes: &[usize], index_dtype: DType, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "argmax";
    let [x] = arity(name, in_avals)?;
    ensure!(index_dtype == DType::I32, name, "index_dtype must be int32, found {}", index_dtype.numpy_name());
    let [axis] = axes else { bail!(name, "expects exactly one axis, found axes {axes:?}") };
    ensure!(*axis < x.rank(), name, "axis {axis} is out of range for {x}");
    ensure!(x.shape[*axis] > 0, name, "the reduced dimension {axis} of {x} is empty");
    Ok(device(index_dtype, remove_axes(&x.shape, axes)))
}

// `dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=(Precision.HIGHEST,
// Precision.HIGHEST) preferred_element_type=float32] lhs rhs`: `precision` and
// `preferred_element_type` hidden when None; `out_sharding=None` is accepted but not printed.

pub(super) fn dot_general_params(
    dn: &DotDimensionNumbers,
    preferred_element_type: Option<DType>,
    precision: Option<(Precision, Precision)>,
) -> Params {
    let pair = |a: &[usize], b: &[usize]| {
        Param::Tuple(vec![Param::int_list(a.iter().copied()), Param::int_list(b.iter().copied())])
    };
    let mut ps = vec![(
        "dimension_numbers",
        Param::Tuple(vec![pair(&dn.lhs_contracting, &dn.rhs_contracting), pair(&dn.lhs_batch, &dn.rhs_batch)]),
    )];
    if let Some((l, r)) = precision {
        ps.push(("precision", Param::Tuple(vec![Param::Word(l.name().into()), Param::Word(r.name().into())])));
    }
    if let Some(t) = preferred_element_type {
        ps.push(("preferred_element_type", dtype_param(t)));
    }
    ps
}

pub(super) fn parse_dot_general(p: &mut ParamReader) -> Result<Primitive, String> {
    let precision = if p.is_none("precision") || !p.has("precision") {
        p.optional_none("precision")?;
        None
    } else {
        let given = p.take("precision")?;
        let word = |q: &Param| match q {
            Param::Word(w) => Precision::from_name(w),
            _ => None,
        };
        match given.as_seq() {
            Some([l, r]) => word(l).zip(word(r)),
            _ => None,
        }
        .map(Some)
        .ok_or_else(|| {
            format!("dot_general: precision must be None or (Precision.X, Precision.Y) with X, Y DEFAULT, HIGH or HIGHEST, found {given}")
        })?
    };
    p.optional_none("out_sharding")?;
    let dn = p.take("dimension_numbers")?;
    let bad = || {
        format!(
            "dot_general: dimension_numbers must be ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), found {dn}"
        )
    };
    let pair = |q: &Param| -> Option<(Vec<usize>, Vec<usize>)> {
        let s = q.as_seq()?;
        if s.len() != 2 {
            return None;
        }
        Some((usizes_of(&s[0])?, usizes_of(&s[1])?))
    };
    let outer = dn.as_seq().filter(|s| s.len() == 2).ok_or_else(bad)?;
    let (lc, rc) = pair(&outer[0]).ok_or_else(bad)?;
    let (lb, rb) = pair(&outer[1]).ok_or_else(bad)?;
    let preferred_element_type = if p.is_none("preferred_element_type") || !p.has("preferred_element_type") {
        p.optional_none("preferred_element_type")?;
        None
    } else {
        Some(p.dtype("preferred_element_type")?)
    };
    let dimension_numbers =
        DotDimensionNumbers { lhs_contracting: lc, rhs_contracting: rc, lhs_batch: lb, rhs_batch: rb };
    Ok(Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision })
}

/// JAX's `_dot_general_shape_rule`: batch dims pair up, contracting dims pair up, no dim
/// is used twice; the output is batch dims, then lhs free dims, then rhs free dims.
pub(crate) fn dot_general_shape(
    dn: &DotDimensionNumbers,
    preferred: Option<DType>,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "dot_general";
    let [lhs, rhs] = arity(name, in_avals)?;
    // JAX accepts operands of different dtypes when the accumulation type is given (the
    // transpose of a bf16 x bf16 -> f32 product multiplies an f32 cotangent by a bf16
    // operand); both are converted to it.
    ensure!(
        lhs.dtype == rhs.dtype || preferred.is_some(),
        name,
        "operand dtypes differ: {lhs} and {rhs} (without a preferred_element_type)"
    );
    ensure!(
        lhs.dtype != DType::Key && rhs.dtype != DType::Key,
        name,
        "operands must be numbers, found {lhs} and {rhs}"
    );
    for (side, x, contracting, batch) in
        [("lhs", lhs, &dn.lhs_contracting, &dn.lhs_batch), ("rhs", rhs, &dn.rhs_contracting, &dn.rhs_batch)]
    {
        let mut used = HashSet::new();
        for &d in contracting.iter().chain(batch) {
            ensure!(d < x.rank(), name, "{side} dimension {d} is out of range for {x}");
            ensure!(used.insert(d), name, "{side} dimension {d} is used twice in dimension_numbers");
        }
    }
    for (kind, l, r) in
        [("contracting", &dn.lhs_contracting, &dn.rhs_contracting), ("batch", &dn.lhs_batch, &dn.rhs_batch)]
    {
        ensure!(l.len() == r.len(), name, "{} lhs {kind} dimensions but {} rhs {kind} dimensions", l.len(), r.len());
        for (&a, &b) in l.iter().zip(r) {
            ensure!(
                lhs.shape[a] == rhs.shape[b],
                name,
                "{kind} dimension sizes differ: lhs dim {a} has {}, rhs dim {b} has {}",
                lhs.shape[a],
                rhs.shape[b]
            );
        }
    }
    let free = |x: &Aval, contracting: &[usize], batch: &[usize]| {
        (0..x.rank()).filter(|d| !contracting.contains(d) && !batch.contains(d)).map(|d| x.shape[d]).collect::<Vec<_>>()
    };
    let mut shape: Shape = dn.lhs_batch.iter().map(|&d| lhs.shape[d]).collect();
    shape.extend(free(lhs, &dn.lhs_contracting, &dn.lhs_batch));
    shape.extend(free(rhs, &dn.rhs_contracting, &dn.rhs_batch));
    Ok(device(preferred.unwrap_or(lhs.dtype), shape))
}
