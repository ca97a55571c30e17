//! The jvp rules of the indexing, sorting and cumulative primitives, each JAX 0.10.2's
//! (`jax/_src/lax/slicing.py`, `lax.py`, `control_flow/loops.py`).
//!
//! `gather` and `scatter-add` are linear in their arrays (the indices are integers);
//! `sort` and `top_k` gather the tangents through the permutation the primal computes;
//! `cumprod`, `cummax` and `cummin` differentiate JAX's `associative_scan` expansion, so
//! the forward half saves the same slices JAX's does.

use std::sync::Arc;

use remat_ir::{
    Atom, Aval, BinaryOp, ClosedJaxpr, CompareOp, CumulativeOp, DType, Eqn, FillValue, GatherDimensionNumbers,
    GatherScatterMode, Jaxpr, Primitive, ScatterDimensionNumbers, ScatterOp, UnaryOp,
};

use super::{emit_primal, instantiate, jvp_eqns, JvpOut, Tangent};
use crate::builder::{lit, Builder, VarMap};
use crate::AdError;

fn unsupported(prim: &Primitive, message: &str) -> AdError {
    AdError::Unsupported { primitive: prim.name(), message: message.into() }
}

/// `_gather_jvp_rule`: the same gather of the operand's tangent, with `fill_value=0`.
pub(super) fn gather(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let out = emit_primal(b, old, eqn, primals);
    let Tangent::Nz(g) = tangents[0] else { return Ok((out, vec![Tangent::Zero])) };
    let Primitive::Gather { dimension_numbers, indices_are_sorted, mode, slice_sizes, unique_indices, .. } =
        &eqn.primitive
    else {
        return Err(unsupported(&eqn.primitive, "is not a gather"));
    };
    let prim = Primitive::Gather {
        dimension_numbers: dimension_numbers.clone(),
        fill_value: Some(FillValue::Int(0)),
        indices_are_sorted: *indices_are_sorted,
        mode: *mode,
        slice_sizes: slice_sizes.clone(),
        unique_indices: *unique_indices,
    };
    let t = b.bind1(prim, vec![g, primals[1]])?;
    Ok((out, vec![Tangent::Nz(t)]))
}

/// `_scatter_add_jvp`: `scatter-add` of the tangents, zeros instantiated; `scatter`'s
/// (`.at[].set`) is the same with unique indices, else `_scatter_jvp`'s id trick
/// (`scatter_set`); `scatter-mul`'s and `scatter-min`/`-max`'s below.
pub(super) fn scatter(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::Scatter { op, unique_indices, .. } = &eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a scatter"));
    };
    match op {
        // `_scatter_addsub_jvp`: the same scatter of the tangents.
        ScatterOp::Add | ScatterOp::Sub => {}
        ScatterOp::Set if !*unique_indices => return scatter_set(b, eqn, primals, tangents),
        ScatterOp::Set => {}
        ScatterOp::Mul => return scatter_mul(b, old, eqn, primals, tangents),
        ScatterOp::Min | ScatterOp::Max => return scatter_extremal(b, old, eqn, primals, tangents),
    }
    let out = emit_primal(b, old, eqn, primals);
    let (op_aval, up_aval) = (b.aval(&primals[0]), b.aval(&primals[2]));
    let t_op = instantiate(b, tangents[0], &op_aval)?;
    let t_up = instantiate(b, tangents[2], &up_aval)?;
    let t = b.bind1(eqn.primitive.clone(), vec![t_op, primals[1], t_up])?;
    Ok((out, vec![Tangent::Nz(t)]))
}

/// `scatter-mul`'s `defjvp`: `scatter-mul(g, i, y)` for the operand; for the updates
/// (`_scatter_mul_jvp_rhs`, unique indices only, as in JAX) `x * scatter-add(0, i, g)`;
/// the two summed with `add_any`.
fn scatter_mul(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::Scatter { dimension_numbers, indices_are_sorted, mode, unique_indices, .. } = &eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a scatter"));
    };
    if !tangents[2].is_zero() && !*unique_indices {
        return Err(unsupported(
            &eqn.primitive,
            "is differentiated in its updates only with unique_indices=True, as in JAX",
        ));
    }
    let out = emit_primal(b, old, eqn, primals);
    let (x, indices, y) = (primals[0], primals[1], primals[2]);
    let mut acc = None;
    if let Tangent::Nz(g) = tangents[0] {
        acc = Some(b.bind1(eqn.primitive.clone(), vec![g, indices, y])?);
    }
    if let Tangent::Nz(g) = tangents[2] {
        let aval = b.aval(&x);
        let zeros = b.zeros(&aval)?;
        let add = Primitive::Scatter {
            op: ScatterOp::Add,
            dimension_numbers: dimension_numbers.clone(),
            indices_are_sorted: *indices_are_sorted,
            mode: *mode,
            unique_indices: *unique_indices,
            update_jaxpr: Some(add_jaxpr(aval.dtype)?),
        };
        let s = b.bind1(add, vec![zeros, indices, g])?;
        let t = b.mul(x, s)?;
        acc = Some(match acc {
            Some(a) => b.add_any(a, t)?,
            None => t,
        });
    }
    Ok((out, vec![acc.map_or(Tangent::Zero, Tangent::Nz)]))
}

/// `_scatter_extremal_jvp` (`scatter-min`, `scatter-max`): the tangent of each element
/// averages the tangents of the values that tie for it (the operand's and the winning
/// updates'), through gathers of `scatter-add`ed counts.
fn scatter_extremal(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::Scatter { dimension_numbers: dn, indices_are_sorted, mode, unique_indices, .. } = &eqn.primitive
    else {
        return Err(unsupported(&eqn.primitive, "is not a scatter"));
    };
    let out = emit_primal(b, old, eqn, primals);
    let (operand, indices, updates) = (primals[0], primals[1], primals[2]);
    let (op_aval, up_aval) = (b.aval(&operand), b.aval(&updates));
    let g_operand = instantiate(b, tangents[0], &op_aval)?;
    let g_updates = instantiate(b, tangents[2], &up_aval)?;
    let dt = op_aval.dtype;
    let gather = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: dn.update_window_dims.clone(),
            collapsed_slice_dims: dn.inserted_window_dims.clone(),
            start_index_map: dn.scatter_dims_to_operand_dims.clone(),
            operand_batching_dims: dn.operand_batching_dims.clone(),
            start_indices_batching_dims: dn.scatter_indices_batching_dims.clone(),
        },
        fill_value: None,
        indices_are_sorted: false,
        mode: GatherScatterMode::PromiseInBounds,
        slice_sizes: window_slice_sizes(&op_aval, &up_aval, dn),
        unique_indices: false,
    };
    let add = |sorted, unique, mode| -> Result<Primitive, AdError> {
        Ok(Primitive::Scatter {
            op: ScatterOp::Add,
            dimension_numbers: dn.clone(),
            indices_are_sorted: sorted,
            mode,
            unique_indices: unique,
            update_jaxpr: Some(add_jaxpr(dt)?),
        })
    };
    let initial_vals = b.bind1(gather.clone(), vec![operand, indices])?;
    let target_vals = b.bind1(gather.clone(), vec![out[0], indices])?;
    let successful = b.compare(CompareOp::Eq, updates, target_vals)?;
    let retained = b.compare(CompareOp::Eq, initial_vals, target_vals)?;
    let zeros = b.zeros(&op_aval)?;
    let ones = b.full(&up_aval, 1.0)?;
    let up_zeros = b.zeros(&up_aval)?;
    let won = b.select_n(successful, vec![up_zeros, ones])?;
    let counts = b.bind1(add(false, false, GatherScatterMode::FillOrDrop)?, vec![zeros, indices, won])?;
    let num_updates = b.bind1(gather.clone(), vec![counts, indices])?;
    let zeros = b.zeros(&op_aval)?;
    let ones = b.full(&up_aval, 1.0)?;
    let refs = b.bind1(add(false, false, GatherScatterMode::FillOrDrop)?, vec![zeros, indices, ones])?;
    let num_refs = b.bind1(gather.clone(), vec![refs, indices])?;
    let one = lit(dt, 1.0);
    let n1 = b.add(num_updates, one)?;
    let inv_n1 = b.div(one, n1)?;
    let inv_n = b.div(one, num_updates)?;
    let updates_normalizer = b.select_n(retained, vec![inv_n, inv_n1])?;
    let up_zeros = b.zeros(&up_aval)?;
    let updates_coef = b.select_n(successful, vec![up_zeros, updates_normalizer])?;
    let n1 = b.add(num_updates, one)?;
    let inv_n1 = b.div(one, n1)?;
    let n_aval = b.aval(&num_updates);
    let n_zeros = b.zeros(&n_aval)?;
    let operand_normalizer = b.select_n(retained, vec![n_zeros, inv_n1])?;
    let shifted = b.add(lit(dt, -1.0), operand_normalizer)?;
    let operand_coef = b.div(shifted, num_refs)?;
    let target_tangents = b.bind1(gather, vec![g_operand, indices])?;
    let from_operand = b.mul(target_tangents, operand_coef)?;
    let from_updates = b.mul(g_updates, updates_coef)?;
    let tangent_updates = b.add(from_operand, from_updates)?;
    let t = b.bind1(add(*indices_are_sorted, *unique_indices, *mode)?, vec![g_operand, indices, tangent_updates])?;
    Ok((out, vec![Tangent::Nz(t)]))
}

/// `_scatter_jvp` for possibly repeated indices: scatter ids of the updates, gather them
/// back, and keep only the operand elements no update hit and the updates that won; the
/// primal and the tangent are then `scatter-add`s of the masked values. JAX's ids are
/// unsigned (`u32`); until that dtype exists here they are `i32`.
fn scatter_set(b: &mut Builder, eqn: &Eqn, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let Primitive::Scatter { dimension_numbers: dn, indices_are_sorted, mode, unique_indices, .. } = &eqn.primitive
    else {
        return Err(unsupported(&eqn.primitive, "is not a scatter"));
    };
    let (operand, indices, updates) = (primals[0], primals[1], primals[2]);
    let (op_aval, up_aval) = (b.aval(&operand), b.aval(&updates));
    let g_operand = instantiate(b, tangents[0], &op_aval)?;
    let g_updates = instantiate(b, tangents[2], &up_aval)?;
    let ids_shape: Vec<usize> =
        (0..up_aval.rank()).map(|d| if dn.update_window_dims.contains(&d) { 1 } else { up_aval.shape[d] }).collect();
    let num_ids = ids_shape.iter().product();
    let id = DType::U32;
    let iota = b.bind1(Primitive::Iota { dtype: id, shape: vec![num_ids], dimension: 0 }, Vec::new())?;
    let iota = b.reshape(iota, &ids_shape)?;
    let ones = b.full(&Aval::new(id, up_aval.shape.clone()), 1.0)?;
    let update_ids = b.add(iota, ones)?;
    let id_zeros = b.zeros(&Aval::new(id, op_aval.shape.clone()))?;
    let scatter = |op| Primitive::Scatter {
        op,
        dimension_numbers: dn.clone(),
        indices_are_sorted: *indices_are_sorted,
        mode: *mode,
        unique_indices: *unique_indices,
        update_jaxpr: None,
    };
    let scattered_ids = b.bind1(scatter(ScatterOp::Set), vec![id_zeros, indices, update_ids])?;
    let gather = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: dn.update_window_dims.clone(),
            collapsed_slice_dims: dn.inserted_window_dims.clone(),
            start_index_map: dn.scatter_dims_to_operand_dims.clone(),
            operand_batching_dims: dn.operand_batching_dims.clone(),
            start_indices_batching_dims: dn.scatter_indices_batching_dims.clone(),
        },
        fill_value: None,
        indices_are_sorted: false,
        mode: GatherScatterMode::PromiseInBounds,
        slice_sizes: window_slice_sizes(&op_aval, &up_aval, dn),
        unique_indices: false,
    };
    let gathered_ids = b.bind1(gather, vec![scattered_ids, indices])?;
    // `lax.select(ids == other, x, zeros)`, each predicate computed afresh as JAX does.
    let masked = |b: &mut Builder, ids: Atom, other: Atom, x: Atom| -> Result<Atom, AdError> {
        let eq = b.compare(CompareOp::Eq, ids, other)?;
        let aval = b.aval(&x);
        let zeros = b.zeros(&aval)?;
        b.select_n(eq, vec![zeros, x])
    };
    let id_aval = Aval::new(id, op_aval.shape.clone());
    let z = b.zeros(&id_aval)?;
    let masked_operand = masked(b, scattered_ids, z, operand)?;
    let masked_updates = masked(b, update_ids, gathered_ids, updates)?;
    let z = b.zeros(&id_aval)?;
    let masked_g_operand = masked(b, scattered_ids, z, g_operand)?;
    let masked_g_updates = masked(b, update_ids, gathered_ids, g_updates)?;
    let mut add = scatter(ScatterOp::Add);
    if let Primitive::Scatter { update_jaxpr, .. } = &mut add {
        *update_jaxpr = Some(add_jaxpr(op_aval.dtype)?);
    }
    let out = b.bind1(add.clone(), vec![masked_operand, indices, masked_updates])?;
    let t = b.bind1(add, vec![masked_g_operand, indices, masked_g_updates])?;
    Ok((vec![out], vec![Tangent::Nz(t)]))
}

/// The slice sizes of the gather that reads a scatter's windows back.
pub(crate) fn window_slice_sizes(operand: &Aval, updates: &Aval, dn: &ScatterDimensionNumbers) -> Vec<usize> {
    let mut window = dn.update_window_dims.iter();
    (0..operand.rank())
        .map(|i| {
            if dn.inserted_window_dims.contains(&i) || dn.operand_batching_dims.contains(&i) {
                1
            } else {
                window.next().map_or(1, |&u| updates.shape[u])
            }
        })
        .collect()
}

/// `{ lambda ; a:T[] b:T[]. let c:T[] = add a b in (c,) }`, `scatter_add`'s
/// `update_jaxpr`: one per dtype, shared (as JAX caches it, so it prints hoisted).
pub(crate) fn add_jaxpr(dtype: DType) -> Result<Arc<Jaxpr>, AdError> {
    thread_local! {
        static CACHE: std::cell::RefCell<Vec<(DType, Arc<Jaxpr>)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    if let Some(j) = CACHE.with(|c| c.borrow().iter().find(|(d, _)| *d == dtype).map(|(_, j)| j.clone())) {
        return Ok(j);
    }
    let mut b = Builder::new();
    let scalar = Aval::new(dtype, Vec::new());
    let x = Atom::Var(b.invar(scalar.clone()));
    let y = Atom::Var(b.invar(scalar));
    let z = b.add(x, y)?;
    let j = Arc::new(b.finish(vec![z]));
    CACHE.with(|c| c.borrow_mut().push((dtype, j.clone())));
    Ok(j)
}

/// A gather along `axis` of an operand shaped like `indices` (without its trailing 1),
/// every other axis a batching axis: `x[..., indices[...], ...]` elementwise.
fn take_along(b: &mut Builder, x: Atom, indices: Atom, axis: usize, mode: GatherScatterMode) -> Result<Atom, AdError> {
    let rank = b.aval(&x).rank();
    let batch: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    let prim = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: Vec::new(),
            collapsed_slice_dims: vec![axis],
            start_index_map: vec![axis],
            operand_batching_dims: batch.clone(),
            start_indices_batching_dims: batch,
        },
        fill_value: None,
        indices_are_sorted: false,
        mode,
        slice_sizes: vec![1; rank],
        unique_indices: false,
    };
    b.bind1(prim, vec![x, indices])
}

/// `_sort_jvp`: sorts an unsigned (`u32`) iota along, as JAX does, then gathers each
/// nonzero tangent by it.
pub(super) fn sort(b: &mut Builder, eqn: &Eqn, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let Primitive::Sort { dimension, is_stable, num_keys } = eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a sort"));
    };
    let shape = b.aval(&primals[0]).shape;
    let iota = b.bind1(Primitive::Iota { dtype: DType::U32, shape: shape.clone(), dimension }, Vec::new())?;
    let mut ins = primals.to_vec();
    ins.push(iota);
    let sorted = b.bind(Primitive::Sort { dimension, is_stable, num_keys }, ins)?;
    let (perm, outs) = sorted.split_last().expect("sort has the iota's output");
    let mut idx_shape = shape.clone();
    idx_shape.push(1);
    let idx = b.expand_dims(Atom::Var(*perm), &[shape.len()])?;
    let mut ts = Vec::with_capacity(tangents.len());
    for t in tangents {
        ts.push(match t {
            Tangent::Zero => Tangent::Zero,
            Tangent::Nz(t) => Tangent::Nz(take_along(b, *t, idx, dimension, GatherScatterMode::PromiseInBounds)?),
        });
    }
    Ok((outs.iter().map(|v| Atom::Var(*v)).collect(), ts))
}

/// `_top_k_jvp`: the tangent gathered at the indices (reshaped with a trailing 1).
pub(super) fn top_k(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::TopK { axis, .. } = eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not top_k"));
    };
    let out = emit_primal(b, old, eqn, primals);
    let Tangent::Nz(g) = tangents[0] else { return Ok((out, vec![Tangent::Zero, Tangent::Zero])) };
    let mut shape = b.aval(&out[1]).shape;
    shape.push(1);
    let idx = b.reshape(out[1], &shape)?;
    let t = take_along(b, g, idx, axis, GatherScatterMode::PromiseInBounds)?;
    Ok((out, vec![Tangent::Nz(t), Tangent::Zero]))
}

/// `approx_top_k`: `_approx_top_k_jvp`, the primitive again and the tangent taken along the
/// reduced axis at the indices by `jnp.take_along_axis` (a `jit` that wraps negative indices,
/// reshapes them with a trailing 1 and gathers with `fill_value=nan` under `FILL_OR_DROP`).
pub(super) fn approx_top_k(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::ApproxTopK { reduction_dimension, .. } = eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not approx_top_k"));
    };
    let out = emit_primal(b, old, eqn, primals);
    let Tangent::Nz(t) = tangents[0] else { return Ok((out, vec![Tangent::Zero, Tangent::Zero])) };
    let t_aval = b.aval(&t);
    let idx_aval = b.aval(&out[1]);
    let axis = remat_ir::approx_top_k_axis(reduction_dimension, t_aval.rank())
        .ok_or_else(|| unsupported(&eqn.primitive, "has its reduction_dimension out of range"))?;
    let body = take_along_axis_body(&t_aval, &idx_aval, axis)?;
    let jit = Primitive::Jit {
        name: "take_along_axis".into(),
        jaxpr: ClosedJaxpr::new(Arc::new(body)),
        options: remat_ir::JitOptions::default(),
    };
    let taken = b.bind1(jit, vec![t, out[1]])?;
    Ok((out, vec![Tangent::Nz(taken), Tangent::Zero]))
}

/// JAX's `jnp.take_along_axis(x, indices, axis)` body for in-range rank-equal operands:
/// negative indices wrapped, a trailing 1 appended, a batched gather along `axis`.
fn take_along_axis_body(x: &Aval, indices: &Aval, axis: usize) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    let xv = Atom::Var(b.invar(x.clone()));
    let iv = Atom::Var(b.invar(indices.clone()));
    let negative = b.compare(CompareOp::Lt, iv, lit(DType::I32, 0.0))?;
    let wrapped = b.add(iv, lit(DType::I32, x.shape[axis] as f64))?;
    let index = b.select_n(negative, vec![iv, wrapped])?;
    let mut shape = indices.shape.clone();
    shape.push(1);
    let index = b.bind1(Primitive::Reshape { new_sizes: shape, dimensions: None }, vec![index])?;
    let rank = x.rank();
    let batch: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
    let prim = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: Vec::new(),
            collapsed_slice_dims: vec![axis],
            start_index_map: vec![axis],
            operand_batching_dims: batch.clone(),
            start_indices_batching_dims: batch,
        },
        fill_value: Some(FillValue::Float(f64::NAN)),
        indices_are_sorted: false,
        mode: GatherScatterMode::FillOrDrop,
        slice_sizes: vec![1; rank],
        unique_indices: false,
    };
    let out = b.bind1(prim, vec![xv, index])?;
    Ok(b.finish(vec![out]))
}

/// `cumprod`, `cummax`, `cummin`, `cumlogsumexp`: `_cumulative_jvp_rule`, the jvp of
/// `associative_scan` with the combining function, inlined.
pub(super) fn cumulative(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::Cumulative { op, axis, reverse } = eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a cumulative reduction"));
    };
    let combine = match op {
        CumulativeOp::Prod => Combine::Binary(BinaryOp::Mul),
        CumulativeOp::Max => Combine::Binary(BinaryOp::Max),
        CumulativeOp::Min => Combine::Binary(BinaryOp::Min),
        CumulativeOp::LogSumExp => Combine::LogAddExp,
        CumulativeOp::Sum => return Err(unsupported(&eqn.primitive, "is linear")),
    };
    let aval = b.aval(&primals[0]);
    let inner = associative_scan(&aval, combine, axis, reverse, eqn)?;
    jvp_inlined(b, &inner, primals[0], tangents[0])
}

/// The jvp of the one-input, one-output jaxpr `inner` (a rule JAX writes as a traced
/// function) at `primal` with `tangent`, its equations emitted inline.
fn jvp_inlined(b: &mut Builder, inner: &Jaxpr, primal: Atom, tangent: Tangent) -> Result<JvpOut, AdError> {
    jvp_inlined_many(b, inner, &[primal], &[tangent])
}

/// [`jvp_inlined`] of a jaxpr with any number of inputs and outputs.
fn jvp_inlined_many(b: &mut Builder, inner: &Jaxpr, primal: &[Atom], tangent: &[Tangent]) -> Result<JvpOut, AdError> {
    let mut primals = VarMap::new(inner);
    let mut ts = vec![Tangent::Zero; inner.vars.len()];
    for ((&v, &p), &t) in inner.invars.iter().zip(primal).zip(tangent) {
        primals.set(v, p);
        ts[v.index()] = t;
    }
    jvp_eqns(b, inner, &mut primals, &mut ts)?;
    let outs = primals.get_all(&inner.outvars);
    let touts = inner
        .outvars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => ts[v.index()],
            Atom::Lit(_) => Tangent::Zero,
        })
        .collect();
    Ok((outs, touts))
}

/// The generic `reduce`: `_reduce_jvp_rule`, the jvp of JAX's `_reduce_jvp` tree (as for
/// `reduce_prod`, with the combiner vmapped over the kept axes and the halves for the
/// operands together, an odd second half padded with the init values), inlined. As in JAX,
/// an init value's tangent must be zero, and every operand must have a tangent (JAX's rule
/// fails on a symbolic zero).
pub(super) fn generic_reduce(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::GenericReduce { dimensions, jaxpr, .. } = &eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a generic reduction"));
    };
    let n = primals.len() / 2;
    if tangents[n..].iter().any(|t| !t.is_zero()) {
        return Err(unsupported(
            &eqn.primitive,
            "Gradient of general lax.reduce with non-zero tangents for initial values to reduction not implemented",
        ));
    }
    if tangents[..n].iter().any(Tangent::is_zero) {
        return Err(unsupported(
            &eqn.primitive,
            "an operand has no tangent beside operands that have one: JAX's `_reduce_jvp` fails on it (a symbolic zero passed to reshape)",
        ));
    }
    let avals: Vec<Aval> = primals.iter().map(|p| b.aval(p)).collect();
    let inner = generic_reduce_tree(&avals, dimensions, jaxpr, eqn)?;
    let mut ts = tangents[..n].to_vec();
    ts.extend(vec![Tangent::Zero; n]);
    jvp_inlined_many(b, &inner, primals, &ts)
}

/// The scalar combiner `combiner` applied to arrays `args` of one shape, each equation
/// bound on them (what `vmap` makes of elementwise equations, literals staying scalars); a
/// combiner equation that is not elementwise is an error.
fn elementwise_over(b: &mut Builder, combiner: &Jaxpr, args: &[Atom], eqn: &Eqn) -> Result<Vec<Atom>, AdError> {
    let mut map = VarMap::new(combiner);
    for (&v, &a) in combiner.invars.iter().zip(args) {
        map.set(v, a);
    }
    for e in &combiner.eqns {
        let ins = map.get_all(&e.invars);
        let saved = b.set_source(Some(e.source.clone()));
        let outs = b.bind(e.primitive.clone(), ins).map_err(|err| {
            unsupported(
                &eqn.primitive,
                &format!("its combiner's `{}` does not apply elementwise to the halves: {err}", e.primitive.name()),
            )
        })?;
        b.set_source(saved);
        for (&o, v) in e.outvars.iter().zip(outs) {
            map.set(o, Atom::Var(v));
        }
    }
    Ok(map.get_all(&combiner.outvars))
}

/// The generic `reduce_window`: JAX's `reduce_window_jvp`, one `reduce_window` over the
/// operands and their tangents (an operand without one gets zeros) from the inits and zero
/// tangent inits, whose combiner is the jvp of the combiner with its inputs ordered
/// `(accs, acc tangents, xs, x tangents)` (JAX's `wrapper`). Primal and tangent results come
/// from one equation, so reverse mode fails, as in JAX.
pub(super) fn generic_reduce_window(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::GenericReduceWindow { jaxpr, window } = &eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a generic window reduction"));
    };
    let n = primals.len() / 2;
    if tangents[n..].iter().any(|t| !t.is_zero()) {
        return Err(unsupported(&eqn.primitive, "reduce_window jvp does not support non-zero init_value_tangent."));
    }
    let avals: Vec<Aval> = primals.iter().map(|p| b.aval(p)).collect();
    if let Some(a) = avals.iter().find(|a| !a.dtype.is_inexact()) {
        return Err(unsupported(
            &eqn.primitive,
            &format!("an operand of {a} has no tangent to reduce: JAX's `reduce_window_jvp` fails on it"),
        ));
    }
    let jvp = crate::jvp::jvp_jaxpr(jaxpr, &vec![true; 2 * n], &vec![true; n])?;
    let mut combiner = jvp.jaxpr;
    let ins = combiner.invars.clone();
    // (accs, xs, acc tangents, x tangents) -> (accs, acc tangents, xs, x tangents).
    combiner.invars = [&ins[..n], &ins[2 * n..3 * n], &ins[n..2 * n], &ins[3 * n..]].concat();
    let mut operands = primals[..n].to_vec();
    for (t, a) in tangents[..n].iter().zip(&avals) {
        operands.push(instantiate(b, *t, a)?);
    }
    operands.extend_from_slice(&primals[n..]);
    operands.extend(avals[n..].iter().map(|a| lit(a.dtype, 0.0)));
    let prim = Primitive::GenericReduceWindow { jaxpr: Arc::new(combiner), window: window.clone() };
    let outs: Vec<Atom> = b.bind(prim, operands)?.into_iter().map(Atom::Var).collect();
    Ok((outs[..n].to_vec(), outs[n..].iter().map(|&t| Tangent::Nz(t)).collect()))
}

/// JAX's `_reduce_jvp(reducer, init_values, ...)` before its `api.jvp`, as a jaxpr
/// `(xs..., inits...) -> results`.
fn generic_reduce_tree(avals: &[Aval], axes: &[usize], combiner: &Arc<Jaxpr>, eqn: &Eqn) -> Result<Jaxpr, AdError> {
    let n = avals.len() / 2;
    let mut b = Builder::new();
    b.set_source(Some(eqn.source.clone()));
    let ins: Vec<Atom> = avals.iter().map(|a| Atom::Var(b.invar(a.clone()))).collect();
    let (xs, inits) = ins.split_at(n);
    let aval = &avals[0];
    let non_axes: Vec<usize> = (0..aval.rank()).filter(|d| !axes.contains(d)).collect();
    let kept: Vec<usize> = non_axes.iter().map(|&d| aval.shape[d]).collect();
    let count: usize = axes.iter().map(|&d| aval.shape[d]).product();
    let permutation: Vec<usize> = axes.iter().chain(&non_axes).copied().collect();
    let mut new_shape = vec![count];
    new_shape.extend(&kept);
    let same_order = permutation.iter().enumerate().all(|(i, &p)| i == p);
    let mut xs: Vec<Atom> = xs
        .iter()
        .map(|&x| {
            if same_order && new_shape == aval.shape {
                Ok(x)
            } else {
                let dimensions = (!same_order).then(|| permutation.clone());
                b.bind1(Primitive::Reshape { new_sizes: new_shape.clone(), dimensions }, vec![x])
            }
        })
        .collect::<Result<_, _>>()?;
    if count == 0 {
        let outs = inits.iter().map(|&i| b.broadcast_in_dim(i, &kept, &[])).collect::<Result<_, _>>()?;
        return Ok(b.finish(outs));
    }
    loop {
        let m = b.aval(&xs[0]).shape[0];
        if m <= 1 {
            break;
        }
        let m1 = m.div_ceil(2);
        let firsts: Vec<Atom> = xs.iter().map(|&x| slice_in_dim(&mut b, x, 0, m1, 1, 0)).collect::<Result<_, _>>()?;
        let mut seconds: Vec<Atom> =
            xs.iter().map(|&x| slice_in_dim(&mut b, x, m1, m, 1, 0)).collect::<Result<_, _>>()?;
        if m - m1 != m1 {
            let mut padding_config = vec![(0, 0, 0); kept.len() + 1];
            padding_config[0] = (0, 1, 0);
            for (x, &i) in seconds.iter_mut().zip(inits) {
                *x = b.bind1(Primitive::Pad { padding_config: padding_config.clone() }, vec![*x, i])?;
            }
        }
        // `api.vmap(reducer)` over every axis of the halves: the combiner's equations on
        // the halves themselves, as vmap gives them for elementwise equations.
        let args: Vec<Atom> = firsts.into_iter().chain(seconds).collect();
        xs = elementwise_over(&mut b, combiner, &args, eqn)?;
    }
    let outs = xs
        .into_iter()
        .map(|x| b.bind1(Primitive::Squeeze { dimensions: vec![0] }, vec![x]))
        .collect::<Result<_, _>>()?;
    Ok(b.finish(outs))
}

/// `reduce_prod`: `_reduce_prod_jvp_rule`, the jvp of JAX's `_reduce_jvp` tree (the
/// reduced axes moved to the front and flattened, then halves multiplied until one row is
/// left, an odd second half padded with 1), inlined; its primal is the tree's product.
pub(super) fn reduce_prod(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let Primitive::Reduce { axes, .. } = &eqn.primitive else {
        return Err(unsupported(&eqn.primitive, "is not a reduction"));
    };
    let aval = b.aval(&primals[0]);
    let inner = reduce_prod_tree(&aval, axes, eqn)?;
    jvp_inlined(b, &inner, primals[0], tangents[0])
}

/// JAX's `_reduce_jvp(mul, [1], ...)` before its `api.jvp`, as a jaxpr `x -> product`.
fn reduce_prod_tree(aval: &Aval, axes: &[usize], eqn: &Eqn) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    b.set_source(Some(eqn.source.clone()));
    let x = Atom::Var(b.invar(aval.clone()));
    let non_axes: Vec<usize> = (0..aval.rank()).filter(|d| !axes.contains(d)).collect();
    let kept: Vec<usize> = non_axes.iter().map(|&d| aval.shape[d]).collect();
    let n: usize = axes.iter().map(|&d| aval.shape[d]).product();
    let permutation: Vec<usize> = axes.iter().chain(&non_axes).copied().collect();
    let mut new_shape = vec![n];
    new_shape.extend(&kept);
    // `lax.reshape` binds nothing for the same shape in the same order, and prints
    // `dimensions` only when it permutes.
    let same_order = permutation.iter().enumerate().all(|(i, &p)| i == p);
    let mut x = if same_order && new_shape == aval.shape {
        x
    } else {
        let dimensions = (!same_order).then_some(permutation);
        b.bind1(Primitive::Reshape { new_sizes: new_shape, dimensions }, vec![x])?
    };
    if n == 0 {
        let out = b.full(&Aval::new(aval.dtype, kept), 1.0)?;
        return Ok(b.finish(vec![out]));
    }
    loop {
        let m = b.aval(&x).shape[0];
        if m <= 1 {
            break;
        }
        let m1 = m.div_ceil(2);
        let first = slice_in_dim(&mut b, x, 0, m1, 1, 0)?;
        let mut second = slice_in_dim(&mut b, x, m1, m, 1, 0)?;
        if m - m1 != m1 {
            let mut padding_config = vec![(0, 0, 0); kept.len() + 1];
            padding_config[0] = (0, 1, 0);
            second = b.bind1(Primitive::Pad { padding_config }, vec![second, lit(aval.dtype, 1.0)])?;
        }
        x = b.mul(first, second)?;
    }
    let out = b.bind1(Primitive::Squeeze { dimensions: vec![0] }, vec![x])?;
    Ok(b.finish(vec![out]))
}

/// `associative_scan`'s combining function: a binary op, or JAX's `logaddexp` (a
/// `custom_jvp_call` whose rule `KnownCustomJvp::LogAddExp` knows).
#[derive(Clone, Copy)]
enum Combine {
    Binary(BinaryOp),
    LogAddExp,
}

impl Combine {
    fn apply(self, b: &mut Builder, x: Atom, y: Atom) -> Result<Atom, AdError> {
        match self {
            Combine::Binary(op) => b.binary(op, x, y),
            Combine::LogAddExp => {
                let aval = b.aval(&x);
                let call_jaxpr = ClosedJaxpr::new(Arc::new(logaddexp_body(&aval)?));
                let prim = Primitive::CustomJvpCall {
                    name: "logaddexp".into(),
                    call_jaxpr,
                    jvp: "_logaddexp_jvp".into(),
                    num_consts: 0,
                    symbolic_zeros: false,
                };
                b.bind1(prim, vec![x, y])
            }
        }
    }
}

/// JAX's `logaddexp(x1, x2)`: `select(isnan(x1 - x2), x1 + x2, max + log1p(exp(-|x1 - x2|)))`.
fn logaddexp_body(aval: &Aval) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    let x1 = Atom::Var(b.invar(aval.clone()));
    let x2 = Atom::Var(b.invar(aval.clone()));
    let amax = b.binary(BinaryOp::Max, x1, x2)?;
    let delta = b.sub(x1, x2)?;
    let is_nan = b.compare(CompareOp::Ne, delta, delta)?;
    let sum = b.add(x1, x2)?;
    let abs = b.unary(UnaryOp::Abs, delta)?;
    let neg = b.neg(abs)?;
    let exp = b.unary(UnaryOp::Exp, neg)?;
    let log1p = b.unary(UnaryOp::Log1p, exp)?;
    let out = b.add(amax, log1p)?;
    let out = b.select_n(is_nan, vec![out, sum])?;
    Ok(b.finish(vec![out]))
}

/// JAX's `associative_scan(fn, x, reverse, axis)` as a jaxpr `x -> scan`: combine pairs,
/// recurse on the half, interleave (with the source of `eqn` on every equation).
fn associative_scan(aval: &Aval, combine: Combine, axis: usize, reverse: bool, eqn: &Eqn) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    b.set_source(Some(eqn.source.clone()));
    let x = Atom::Var(b.invar(aval.clone()));
    let x = if reverse { b.bind1(Primitive::Rev { dimensions: vec![axis] }, vec![x])? } else { x };
    let out = scan_level(&mut b, x, combine, axis)?;
    let out = if reverse { b.bind1(Primitive::Rev { dimensions: vec![axis] }, vec![out])? } else { out };
    Ok(b.finish(vec![out]))
}

/// `slicing.slice_in_dim(x, start, limit, stride, axis)`.
fn slice_in_dim(
    b: &mut Builder,
    x: Atom,
    start: usize,
    limit: usize,
    stride: usize,
    axis: usize,
) -> Result<Atom, AdError> {
    let shape = b.aval(&x).shape;
    let mut starts = vec![0; shape.len()];
    let mut limits = shape.clone();
    let mut strides = vec![1; shape.len()];
    starts[axis] = start.min(limit);
    limits[axis] = limit;
    strides[axis] = stride;
    b.bind1(Primitive::Slice { start_indices: starts, limit_indices: limits, strides: Some(strides) }, vec![x])
}

/// `_scan` inside `associative_scan`.
fn scan_level(b: &mut Builder, x: Atom, combine: Combine, axis: usize) -> Result<Atom, AdError> {
    let n = b.aval(&x).shape[axis];
    if n < 2 {
        return Ok(x);
    }
    let evens = slice_in_dim(b, x, 0, n - 1, 2, axis)?;
    let odds = slice_in_dim(b, x, 1, n, 2, axis)?;
    let reduced = combine.apply(b, evens, odds)?;
    let odd_elems = scan_level(b, reduced, combine, axis)?;
    let even_elems = if n.is_multiple_of(2) {
        let m = b.aval(&odd_elems).shape[axis];
        let head = slice_in_dim(b, odd_elems, 0, m.saturating_sub(1), 1, axis)?;
        let tail = slice_in_dim(b, x, 2, n, 2, axis)?;
        combine.apply(b, head, tail)?
    } else {
        let tail = slice_in_dim(b, x, 2, n, 2, axis)?;
        combine.apply(b, odd_elems, tail)?
    };
    let first = slice_in_dim(b, x, 0, 1, 1, axis)?;
    let even_elems = b.bind1(Primitive::Concatenate { dimension: axis }, vec![first, even_elems])?;
    interleave(b, even_elems, odd_elems, axis)
}

/// `_interleave(a, b, axis)`: `a`'s elements at even positions, `b`'s at odd ones.
fn interleave(b: &mut Builder, x: Atom, y: Atom, axis: usize) -> Result<Atom, AdError> {
    let xa = b.aval(&x);
    let rank = xa.rank();
    let (nx, ny) = (xa.shape[axis], b.aval(&y).shape[axis]);
    let mut x_pad = vec![(0, 0, 0); rank];
    let mut y_pad = vec![(0, 0, 0); rank];
    if nx == ny {
        x_pad[axis] = (0, 1, 1);
        y_pad[axis] = (1, 0, 1);
    } else {
        x_pad[axis] = (0, 0, 1);
        y_pad[axis] = (1, 1, 1);
    }
    let zero = lit(xa.dtype, 0.0);
    let px = b.bind1(Primitive::Pad { padding_config: x_pad }, vec![x, zero])?;
    let py = b.bind1(Primitive::Pad { padding_config: y_pad }, vec![y, zero])?;
    b.add(px, py)
}
