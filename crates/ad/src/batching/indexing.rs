//! The batching rules of the indexing primitives, each the equations JAX 0.10.2's rule
//! emits (`jax/_src/lax/slicing.py`): `dynamic_slice` becomes a `gather` and
//! `dynamic_update_slice` a `scatter` (`_dynamic_slice_batching_rule`,
//! `_dynamic_update_slice_batching_rule`), `gather` and the scatters gain the batch axis as
//! an offset or batching dimension (`_gather_batching_rule`, `_scatter_batching_rule`);
//! `expand_dims`, a primitive of remat only (JAX's `lax.expand_dims` is a
//! `broadcast_in_dim`), moves the batch axis to the front as `squeeze`'s rule does.
//!
//! The dimension numbers are carried as `Spelled` tuples: each entry with whether JAX
//! computed it with NumPy (`np.add(1, dims)` prints `np.int64(..)`), so that the rewritten
//! equation prints as JAX's does.

use remat_ir::{
    Array, Aval, DType, Eqn, GatherDimensionNumbers, GatherScatterMode, Primitive, ScatterDimensionNumbers, ScatterOp,
};

use super::{bdim_at_front, moveaxis, Batched};
use crate::builder::Builder;
use crate::AdError;

/// A tuple of integers, each with whether NumPy made it (see the module comment).
type Spelled = Vec<(usize, bool)>;

fn text(items: &[(usize, bool)]) -> String {
    let parts: Vec<String> =
        items.iter().map(|&(k, np)| if np { format!("np.int64({k})") } else { k.to_string() }).collect();
    match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    }
}

fn values(items: &[(usize, bool)]) -> Vec<usize> {
    items.iter().map(|x| x.0).collect()
}

/// `tuple(np.add(1, dims))`.
fn np_add1(items: &[(usize, bool)]) -> Spelled {
    items.iter().map(|&(d, _)| (d + 1, true)).collect()
}

/// `(0,) + rest`.
fn zero_then(rest: Spelled) -> Spelled {
    std::iter::once((0, false)).chain(rest).collect()
}

/// Python ints, as a rule that builds a tuple with `range` writes them.
fn plain(items: &[usize]) -> Spelled {
    items.iter().map(|&d| (d, false)).collect()
}

/// Field `field` of the parameter `key` as `eqn` spelled it (`np.int64(..)` entries
/// flagged); plain Python ints when it was not spelled.
fn spelled_field(eqn: Option<&Eqn>, key: &str, field: &str, items: &[usize]) -> Spelled {
    let flags = eqn
        .and_then(|e| e.spelling.params.iter().find(|(k, _)| k == key))
        .and_then(|(_, raw)| field_flags(raw, field))
        .filter(|f| f.len() == items.len());
    match flags {
        Some(flags) => items.iter().copied().zip(flags).collect(),
        None => plain(items),
    }
}

/// Which entries of `field=(..)` in a spelled `Name(field=(..), ...)` are `np.int64(..)`.
fn field_flags(raw: &str, field: &str) -> Option<Vec<bool>> {
    let start = raw.find(&format!("{field}=("))? + field.len() + 2;
    let mut depth = 0usize;
    let mut end = None;
    for (i, ch) in raw[start..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = Some(start + i);
                break;
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let inner = &raw[start..end?];
    Some(inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.starts_with("np.int64(")).collect())
}

/// Gather dimension numbers with their spelling.
struct GatherDims {
    offset_dims: Spelled,
    collapsed_slice_dims: Spelled,
    start_index_map: Spelled,
    operand_batching_dims: Spelled,
    start_indices_batching_dims: Spelled,
}

impl GatherDims {
    fn of(dn: &GatherDimensionNumbers, eqn: Option<&Eqn>) -> GatherDims {
        let f = |field: &str, items: &[usize]| spelled_field(eqn, "dimension_numbers", field, items);
        GatherDims {
            offset_dims: f("offset_dims", &dn.offset_dims),
            collapsed_slice_dims: f("collapsed_slice_dims", &dn.collapsed_slice_dims),
            start_index_map: f("start_index_map", &dn.start_index_map),
            operand_batching_dims: f("operand_batching_dims", &dn.operand_batching_dims),
            start_indices_batching_dims: f("start_indices_batching_dims", &dn.start_indices_batching_dims),
        }
    }

    fn value(&self) -> GatherDimensionNumbers {
        GatherDimensionNumbers {
            offset_dims: values(&self.offset_dims),
            collapsed_slice_dims: values(&self.collapsed_slice_dims),
            start_index_map: values(&self.start_index_map),
            operand_batching_dims: values(&self.operand_batching_dims),
            start_indices_batching_dims: values(&self.start_indices_batching_dims),
        }
    }

    fn text(&self) -> String {
        format!(
            "GatherDimensionNumbers(offset_dims={}, collapsed_slice_dims={}, start_index_map={}, operand_batching_dims={}, start_indices_batching_dims={})",
            text(&self.offset_dims),
            text(&self.collapsed_slice_dims),
            text(&self.start_index_map),
            text(&self.operand_batching_dims),
            text(&self.start_indices_batching_dims)
        )
    }
}

/// Scatter dimension numbers with their spelling.
struct ScatterDims {
    update_window_dims: Spelled,
    inserted_window_dims: Spelled,
    scatter_dims_to_operand_dims: Spelled,
    operand_batching_dims: Spelled,
    scatter_indices_batching_dims: Spelled,
}

impl ScatterDims {
    fn of(dn: &ScatterDimensionNumbers, eqn: Option<&Eqn>) -> ScatterDims {
        let f = |field: &str, items: &[usize]| spelled_field(eqn, "dimension_numbers", field, items);
        ScatterDims {
            update_window_dims: f("update_window_dims", &dn.update_window_dims),
            inserted_window_dims: f("inserted_window_dims", &dn.inserted_window_dims),
            scatter_dims_to_operand_dims: f("scatter_dims_to_operand_dims", &dn.scatter_dims_to_operand_dims),
            operand_batching_dims: f("operand_batching_dims", &dn.operand_batching_dims),
            scatter_indices_batching_dims: f("scatter_indices_batching_dims", &dn.scatter_indices_batching_dims),
        }
    }

    fn value(&self) -> ScatterDimensionNumbers {
        ScatterDimensionNumbers {
            update_window_dims: values(&self.update_window_dims),
            inserted_window_dims: values(&self.inserted_window_dims),
            scatter_dims_to_operand_dims: values(&self.scatter_dims_to_operand_dims),
            operand_batching_dims: values(&self.operand_batching_dims),
            scatter_indices_batching_dims: values(&self.scatter_indices_batching_dims),
        }
    }

    fn text(&self) -> String {
        format!(
            "ScatterDimensionNumbers(update_window_dims={}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, operand_batching_dims={}, scatter_indices_batching_dims={})",
            text(&self.update_window_dims),
            text(&self.inserted_window_dims),
            text(&self.scatter_dims_to_operand_dims),
            text(&self.operand_batching_dims),
            text(&self.scatter_indices_batching_dims)
        )
    }
}

/// `expand_dims`: the batch axis to the front, the new axes one further out.
pub(super) fn expand_dims(b: &mut Builder, dimensions: &[usize], x: Batched) -> Result<Batched, AdError> {
    let x0 = moveaxis(b, x.0, batched(x.1)?, 0)?;
    let dims = dimensions.iter().map(|d| d + 1).collect();
    Ok((b.bind1(Primitive::ExpandDims { dimensions: dims }, vec![x0])?, Some(0)))
}

/// The parameters of a `gather` other than its dimension numbers.
pub(super) struct GatherParams<'a> {
    pub slice_sizes: &'a [usize],
    pub fill_value: Option<remat_ir::FillValue>,
    pub indices_are_sorted: bool,
    pub unique_indices: bool,
    pub mode: GatherScatterMode,
}

/// JAX's `_gather_batching_rule` (`eqn` gives the spelling of the dimension numbers).
pub(super) fn gather(
    b: &mut Builder,
    eqn: Option<&Eqn>,
    dn: &GatherDimensionNumbers,
    params: &GatherParams<'_>,
    operand: Batched,
    indices: Batched,
) -> Result<Batched, AdError> {
    let old = GatherDims::of(dn, eqn);
    let (sorted, unique) = (params.indices_are_sorted, params.unique_indices);
    let (operand, indices, dims, slice_sizes, sorted, unique) = match (operand.1, indices.1) {
        (Some(od), None) => {
            let x = moveaxis(b, operand.0, od, 0)?;
            let sizes: Vec<usize> = std::iter::once(b.aval(&x).shape[0]).chain(params.slice_sizes.to_vec()).collect();
            let dims = GatherDims {
                offset_dims: zero_then(np_add1(&old.offset_dims)),
                collapsed_slice_dims: np_add1(&old.collapsed_slice_dims),
                start_index_map: np_add1(&old.start_index_map),
                operand_batching_dims: np_add1(&old.operand_batching_dims),
                start_indices_batching_dims: old.start_indices_batching_dims,
            };
            (x, indices.0, dims, sizes, sorted, unique)
        }
        (None, Some(id)) => {
            let i = moveaxis(b, indices.0, id, 0)?;
            let dims = GatherDims {
                // `1 + d`: NumPy's where `d` was.
                offset_dims: old.offset_dims.iter().map(|&(d, np)| (d + 1, np)).collect(),
                collapsed_slice_dims: old.collapsed_slice_dims,
                start_index_map: old.start_index_map,
                operand_batching_dims: old.operand_batching_dims,
                start_indices_batching_dims: np_add1(&old.start_indices_batching_dims),
            };
            (operand.0, i, dims, params.slice_sizes.to_vec(), false, false)
        }
        (Some(od), Some(id)) => {
            let x = moveaxis(b, operand.0, od, 0)?;
            let i = moveaxis(b, indices.0, id, 0)?;
            let first = usize::from(b.aval(&x).shape[0] != 0);
            let sizes: Vec<usize> = std::iter::once(first).chain(params.slice_sizes.to_vec()).collect();
            let dims = GatherDims {
                offset_dims: np_add1(&old.offset_dims),
                collapsed_slice_dims: np_add1(&old.collapsed_slice_dims),
                start_index_map: np_add1(&old.start_index_map),
                operand_batching_dims: zero_then(np_add1(&old.operand_batching_dims)),
                start_indices_batching_dims: zero_then(np_add1(&old.start_indices_batching_dims)),
            };
            (x, i, dims, sizes, sorted, unique)
        }
        (None, None) => return Err(AdError::Internal("vmap: gather without a batched operand".into())),
    };
    let prim = Primitive::Gather {
        dimension_numbers: dims.value(),
        fill_value: params.fill_value,
        indices_are_sorted: sorted,
        mode: params.mode,
        slice_sizes,
        unique_indices: unique,
    };
    let out = b.bind1(prim, vec![operand, indices])?;
    b.spell_last_param("dimension_numbers", dims.text());
    Ok((out, Some(0)))
}

/// The parameters of a scatter other than its dimension numbers.
pub(super) struct ScatterParams {
    pub op: ScatterOp,
    pub indices_are_sorted: bool,
    pub unique_indices: bool,
    pub mode: GatherScatterMode,
    pub update_jaxpr: Option<std::sync::Arc<remat_ir::Jaxpr>>,
}

/// JAX's `_scatter_batching_rule` (`eqn` gives the spelling of the dimension numbers).
pub(super) fn scatter(
    b: &mut Builder,
    eqn: Option<&Eqn>,
    dn: &ScatterDimensionNumbers,
    params: &ScatterParams,
    ins: [Batched; 3],
    size: usize,
) -> Result<Batched, AdError> {
    let [operand, indices, updates] = ins;
    let old = ScatterDims::of(dn, eqn);
    let operand = bdim_at_front(b, operand.0, operand.1, size)?;
    let updates = bdim_at_front(b, updates.0, updates.1, size)?;
    let (indices, dims) = match indices.1 {
        None => {
            let dims = ScatterDims {
                update_window_dims: zero_then(np_add1(&old.update_window_dims)),
                inserted_window_dims: np_add1(&old.inserted_window_dims),
                scatter_dims_to_operand_dims: np_add1(&old.scatter_dims_to_operand_dims),
                operand_batching_dims: np_add1(&old.operand_batching_dims),
                scatter_indices_batching_dims: old.scatter_indices_batching_dims,
            };
            (indices.0, dims)
        }
        Some(_) => {
            let i = bdim_at_front(b, indices.0, indices.1, size)?;
            let dims = ScatterDims {
                update_window_dims: np_add1(&old.update_window_dims),
                inserted_window_dims: np_add1(&old.inserted_window_dims),
                scatter_dims_to_operand_dims: np_add1(&old.scatter_dims_to_operand_dims),
                operand_batching_dims: zero_then(np_add1(&old.operand_batching_dims)),
                scatter_indices_batching_dims: zero_then(np_add1(&old.scatter_indices_batching_dims)),
            };
            (i, dims)
        }
    };
    let prim = Primitive::Scatter {
        op: params.op,
        dimension_numbers: dims.value(),
        indices_are_sorted: params.indices_are_sorted,
        mode: params.mode,
        unique_indices: params.unique_indices,
        update_jaxpr: params.update_jaxpr.clone(),
    };
    let out = b.bind1(prim, vec![operand, indices, updates])?;
    b.spell_last_param("dimension_numbers", dims.text());
    Ok((out, Some(0)))
}

/// JAX's `_batch_dynamic_slice_indices`: the start indices as one `i32[n]` index vector,
/// or `i32[size,n]` batched at axis 0 when any is batched; no start indices (a rank-0
/// operand) are the constant `np.array([], 'int32')`, a constvar of its own.
fn dynamic_slice_indices(b: &mut Builder, starts: &[Batched], size: usize) -> Result<Batched, AdError> {
    if starts.is_empty() {
        return Ok((b.const_array(Array::zeros(&Aval::new(DType::I32, vec![0]))), None));
    }
    let any_batched = starts.iter().any(|s| s.1.is_some());
    let mut parts = Vec::with_capacity(starts.len());
    for &(x, d) in starts {
        let (shape, dims) =
            if any_batched { (vec![size, 1], if d.is_some() { vec![0] } else { vec![] }) } else { (vec![1], vec![]) };
        parts.push(b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, vec![x])?);
    }
    let dimension = usize::from(any_batched);
    Ok((b.bind1(Primitive::Concatenate { dimension }, parts)?, any_batched.then_some(0)))
}

/// JAX's `_dynamic_slice_batching_rule`: a `gather` with `CLIP`.
pub(super) fn dynamic_slice(
    b: &mut Builder,
    slice_sizes: &[usize],
    ins: &[Batched],
    size: usize,
) -> Result<Batched, AdError> {
    let operand = ins[0];
    let index = dynamic_slice_indices(b, &ins[1..], size)?;
    let dims: Vec<usize> = (0..ins.len() - 1).collect();
    let dn = GatherDimensionNumbers {
        offset_dims: dims.clone(),
        collapsed_slice_dims: vec![],
        start_index_map: dims,
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
    };
    let params = GatherParams {
        slice_sizes,
        fill_value: None,
        indices_are_sorted: true,
        unique_indices: true,
        mode: GatherScatterMode::Clip,
    };
    gather(b, None, &dn, &params, operand, index)
}

/// JAX's `_dynamic_update_slice_batching_rule`: a `scatter` with `CLIP`.
pub(super) fn dynamic_update_slice(b: &mut Builder, ins: &[Batched], size: usize) -> Result<Batched, AdError> {
    let (operand, update) = (ins[0], ins[1]);
    let rank = b.aval(&update.0).rank() - usize::from(update.1.is_some());
    let index = dynamic_slice_indices(b, &ins[2..], size)?;
    let dims: Vec<usize> = (0..rank).collect();
    let dn = ScatterDimensionNumbers {
        update_window_dims: dims.clone(),
        inserted_window_dims: vec![],
        scatter_dims_to_operand_dims: dims,
        operand_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
    };
    let params = ScatterParams {
        op: ScatterOp::Set,
        indices_are_sorted: true,
        unique_indices: true,
        mode: GatherScatterMode::Clip,
        update_jaxpr: None,
    };
    scatter(b, None, &dn, &params, [operand, index, update], size)
}

fn batched(d: Option<usize>) -> Result<usize, AdError> {
    d.ok_or_else(|| AdError::Internal("vmap: a rule of one operand called on an unbatched one".into()))
}
