//! Indexing primitives: `split`, `gather`, and the scatters (`scatter`, `scatter-add`,
//! `scatter-mul`, `scatter-min`, `scatter-max`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, JAX's rule from `jax/_src/lax/slicing.py`). The index vector of `gather` and
//! the scatters is always the last axis of the indices, as JAX emits them. Results land in
//! device memory.

use std::sync::Arc;

use super::params::{usizes_of, ParamReader, Params};
use super::Primitive;
use crate::jaxpr::Jaxpr;
use crate::param::Param;
use crate::param_types::{FillValue, GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers, ScatterOp};
use crate::shape::{arity, bail, device, distinct_axes, ensure, ShapeError};
use crate::types::{Aval, DType};

impl FillValue {
    /// `fill_value` (or `symmetric_product`'s `alpha`/`beta`) as JAX prints it.
    pub(super) fn param(self) -> Param {
        match self {
            FillValue::Int(x) => Param::Int(x),
            FillValue::Float(x) => Param::Float(x),
        }
    }
}

// `split[axis=1 sizes=(1, 3)] x`.

pub(super) fn split_params(axis: usize, sizes: &[usize]) -> Params {
    vec![("axis", Param::Int(axis as i64)), ("sizes", Param::ints(sizes.iter().copied()))]
}

pub(super) fn parse_split(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Split { axis: p.usize("axis")?, sizes: p.usizes("sizes")? })
}

pub(crate) fn split_shape(axis: usize, sizes: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "split";
    let [x] = arity(name, in_avals)?;
    ensure!(axis < x.rank(), name, "axis {axis} is out of range for {x}");
    let total = sizes.iter().try_fold(0usize, |n, &s| n.checked_add(s));
    ensure!(total == Some(x.shape[axis]), name, "sizes {sizes:?} do not add up to dimension {axis} of {x}");
    Ok(sizes
        .iter()
        .map(|&s| {
            let mut shape = x.shape.clone();
            shape[axis] = s;
            Aval::new(x.dtype, shape)
        })
        .collect())
}

// `stack[axis=0] x y`, `unstack[axis=0] x` and `tile[reps=(2, 1)] x` (JAX's `stack_p`,
// `unstack_p`, `tile_p` in `lax.py`).

pub(super) fn axis_params(axis: usize) -> Params {
    vec![("axis", Param::Int(axis as i64))]
}

pub(super) fn tile_params(reps: &[usize]) -> Params {
    vec![("reps", Param::ints(reps.iter().copied()))]
}

pub(super) fn parse_tile(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Tile { reps: p.usizes("reps")? })
}

pub(crate) fn stack_shape(axis: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "stack";
    let Some(first) = in_avals.first() else { bail!(name, "expects at least one operand, got 0") };
    for x in &in_avals[1..] {
        ensure!(x.same_type(first), name, "all operands must have one type, found {first} and {x}");
    }
    ensure!(axis <= first.rank(), name, "axis {axis} is out of range for stacking {first}");
    let mut shape = first.shape.clone();
    shape.insert(axis, in_avals.len());
    Ok(device(first.dtype, shape))
}

pub(crate) fn unstack_shape(axis: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "unstack";
    let [x] = arity(name, in_avals)?;
    ensure!(axis < x.rank(), name, "axis {axis} is out of range for {x}");
    let mut shape = x.shape.clone();
    let n = shape.remove(axis);
    Ok(vec![Aval::new(x.dtype, shape); n])
}

pub(crate) fn tile_shape(reps: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "tile";
    let [x] = arity(name, in_avals)?;
    ensure!(
        reps.len() == x.rank(),
        name,
        "reps length must be equal to the ndim of x, got {} reps for {x}",
        reps.len()
    );
    let shape = x.shape.iter().zip(reps).map(|(&n, &r)| n.checked_mul(r)).collect::<Option<Vec<usize>>>();
    let Some(shape) = shape else { bail!(name, "{x} tiled {reps:?} times overflows") };
    Ok(device(x.dtype, shape))
}

/// A `Name(key=(...), ...)` call of tuples of integers, read in `keys` order.
fn dims_call(p: &mut ParamReader, key: &str, func: &str, keys: &[&str]) -> Result<Vec<Vec<usize>>, String> {
    let v = p.take(key)?;
    let wrong = || format!("{}: parameter `{key}` must be {func}({}=...), found {v}", p.prim(), keys.join("=..., "));
    let Param::Call { func: f, args, kwargs } = &v else { return Err(wrong()) };
    if f != func || !args.is_empty() || kwargs.len() != keys.len() {
        return Err(wrong());
    }
    keys.iter()
        .zip(kwargs)
        .map(|(want, (k, x))| if k == want { usizes_of(x).ok_or_else(wrong) } else { Err(wrong()) })
        .collect()
}

fn dims_param(func: &str, fields: [(&str, &[usize]); 5]) -> Param {
    Param::Call {
        func: func.into(),
        args: Vec::new(),
        kwargs: fields.iter().map(|(k, v)| (k.to_string(), Param::ints(v.iter().copied()))).collect(),
    }
}

fn parse_mode(p: &mut ParamReader) -> Result<GatherScatterMode, String> {
    let mode = p.word("mode")?;
    GatherScatterMode::from_name(&mode).ok_or_else(|| {
        format!("{}: unknown mode `{mode}` (GatherScatterMode.CLIP, FILL_OR_DROP or PROMISE_IN_BOUNDS)", p.prim())
    })
}

const GATHER_KEYS: [&str; 5] =
    ["offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims", "start_indices_batching_dims"];
const SCATTER_KEYS: [&str; 5] = [
    "update_window_dims",
    "inserted_window_dims",
    "scatter_dims_to_operand_dims",
    "operand_batching_dims",
    "scatter_indices_batching_dims",
];

// `gather[dimension_numbers=GatherDimensionNumbers(...) fill_value=None
// indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 5)
// unique_indices=False] operand indices`.

pub(super) fn gather_params(
    dn: &GatherDimensionNumbers,
    fill_value: Option<FillValue>,
    indices_are_sorted: bool,
    mode: GatherScatterMode,
    slice_sizes: &[usize],
    unique_indices: bool,
) -> Params {
    let fields: [(&str, &[usize]); 5] = [
        (GATHER_KEYS[0], &dn.offset_dims),
        (GATHER_KEYS[1], &dn.collapsed_slice_dims),
        (GATHER_KEYS[2], &dn.start_index_map),
        (GATHER_KEYS[3], &dn.operand_batching_dims),
        (GATHER_KEYS[4], &dn.start_indices_batching_dims),
    ];
    vec![
        ("dimension_numbers", dims_param("GatherDimensionNumbers", fields)),
        ("fill_value", fill_value.map_or(Param::None, FillValue::param)),
        ("indices_are_sorted", Param::Bool(indices_are_sorted)),
        ("mode", Param::Word(mode.name().into())),
        ("slice_sizes", Param::ints(slice_sizes.iter().copied())),
        ("unique_indices", Param::Bool(unique_indices)),
    ]
}

pub(super) fn parse_gather(p: &mut ParamReader) -> Result<Primitive, String> {
    let [offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims, start_indices_batching_dims] =
        <[Vec<usize>; 5]>::try_from(dims_call(p, "dimension_numbers", "GatherDimensionNumbers", &GATHER_KEYS)?)
            .map_err(|_| "gather: malformed dimension_numbers".to_string())?;
    let fill_value = match p.take("fill_value")? {
        Param::None => None,
        Param::Float(x) => Some(FillValue::Float(x)),
        Param::Word(w) if w == "nan" => Some(FillValue::Float(f64::NAN)),
        Param::Word(w) if w == "inf" => Some(FillValue::Float(f64::INFINITY)),
        v if v.as_int().is_some() => v.as_int().map(FillValue::Int),
        v => return Err(format!("gather: parameter `fill_value` must be None or a number, found {v}")),
    };
    Ok(Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims,
            collapsed_slice_dims,
            start_index_map,
            operand_batching_dims,
            start_indices_batching_dims,
        },
        fill_value,
        indices_are_sorted: p.bool("indices_are_sorted")?,
        mode: parse_mode(p)?,
        slice_sizes: p.usizes("slice_sizes")?,
        unique_indices: p.bool("unique_indices")?,
    })
}

/// The indices operand: an integer array whose last axis is the index vector.
fn index_vectors<'a>(name: &str, indices: &'a Aval, len: usize) -> Result<&'a [usize], ShapeError> {
    ensure!(indices.dtype.is_integer(), name, "indices must be integers, found {indices}");
    let Some((&last, batch)) = indices.shape.split_last() else {
        bail!(name, "indices {indices} must have an index vector axis (the last)")
    };
    ensure!(last == len, name, "the index vectors of {indices} have {last} entries, expected {len}");
    Ok(batch)
}

/// The batching dimensions pair up operand axes with index batch axes of equal size.
fn batching(
    name: &str,
    x: &Aval,
    operand_dims: &[usize],
    index_batch: &[usize],
    index_dims: &[usize],
) -> Result<(), ShapeError> {
    ensure!(
        operand_dims.len() == index_dims.len(),
        name,
        "operand_batching_dims {operand_dims:?} and the indices' batching dims {index_dims:?} differ in length"
    );
    for (&o, &i) in operand_dims.iter().zip(index_dims) {
        ensure!(i < index_batch.len(), name, "indices batching dim {i} is out of range");
        ensure!(x.shape[o] == index_batch[i], name, "batching dims {o} of {x} and {i} of the indices differ in size");
    }
    Ok(())
}

pub(crate) fn gather_shape(
    dn: &GatherDimensionNumbers,
    slice_sizes: &[usize],
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "gather";
    let [x, indices] = arity(name, in_avals)?;
    ensure!(slice_sizes.len() == x.rank(), name, "slice_sizes {slice_sizes:?} must have one entry per axis of {x}");
    for (d, (&s, &n)) in slice_sizes.iter().zip(&x.shape).enumerate() {
        ensure!(s <= n, name, "slice size {s} exceeds dimension {d} of {x}");
    }
    distinct_axes(name, "start_index_map", &dn.start_index_map, x)?;
    let mut dropped = dn.collapsed_slice_dims.clone();
    dropped.extend(&dn.operand_batching_dims);
    distinct_axes(name, "collapsed_slice_dims and operand_batching_dims", &dropped, x)?;
    // JAX's rule: a collapsed dimension's slice is exactly one element (a slice of none,
    // collapsed, would leave output elements that read nothing); a batching dimension's
    // bound is 0 or 1.
    for &d in &dn.collapsed_slice_dims {
        ensure!(slice_sizes[d] == 1, name, "collapsed dimension {d} must have slice size 1, got {}", slice_sizes[d]);
    }
    for &d in &dn.operand_batching_dims {
        ensure!(
            slice_sizes[d] <= 1,
            name,
            "batching dimension {d} must have slice size 0 or 1, got {}",
            slice_sizes[d]
        );
    }
    let batch = index_vectors(name, indices, dn.start_index_map.len())?;
    batching(name, x, &dn.operand_batching_dims, batch, &dn.start_indices_batching_dims)?;
    let offsets: Vec<usize> = (0..x.rank()).filter(|d| !dropped.contains(d)).map(|d| slice_sizes[d]).collect();
    ensure!(
        offsets.len() == dn.offset_dims.len(),
        name,
        "offset_dims {:?} must name one output axis per kept slice axis ({})",
        dn.offset_dims,
        offsets.len()
    );
    let rank = offsets.len() + batch.len();
    ensure!(
        dn.offset_dims.windows(2).all(|w| w[0] < w[1]) && dn.offset_dims.iter().all(|&d| d < rank),
        name,
        "offset_dims {:?} must be increasing and below the output rank {rank}",
        dn.offset_dims
    );
    let (mut offsets, mut batch) = (offsets.into_iter(), batch.iter());
    let shape = (0..rank)
        .map(|d| if dn.offset_dims.contains(&d) { offsets.next() } else { batch.next().copied() })
        .collect::<Option<Vec<usize>>>();
    let Some(shape) = shape else { bail!(name, "malformed dimension_numbers") };
    Ok(device(x.dtype, shape))
}

// `scatter-add[dimension_numbers=ScatterDimensionNumbers(...) indices_are_sorted=False
// mode=GatherScatterMode.FILL_OR_DROP unique_indices=False update_consts=()
// update_jaxpr={ lambda ; a:f32[] b:f32[]. let c:f32[] = add a b in (c,) }] x idx upd`.
// `scatter` (`.at[].set`) prints `update_jaxpr=None`.

pub(super) fn scatter_params(
    dn: &ScatterDimensionNumbers,
    indices_are_sorted: bool,
    mode: GatherScatterMode,
    unique_indices: bool,
    update_jaxpr: Option<&Arc<Jaxpr>>,
) -> Params {
    let fields: [(&str, &[usize]); 5] = [
        (SCATTER_KEYS[0], &dn.update_window_dims),
        (SCATTER_KEYS[1], &dn.inserted_window_dims),
        (SCATTER_KEYS[2], &dn.scatter_dims_to_operand_dims),
        (SCATTER_KEYS[3], &dn.operand_batching_dims),
        (SCATTER_KEYS[4], &dn.scatter_indices_batching_dims),
    ];
    vec![
        ("dimension_numbers", dims_param("ScatterDimensionNumbers", fields)),
        ("indices_are_sorted", Param::Bool(indices_are_sorted)),
        ("mode", Param::Word(mode.name().into())),
        ("unique_indices", Param::Bool(unique_indices)),
        ("update_consts", Param::Tuple(Vec::new())),
        ("update_jaxpr", update_jaxpr.map_or(Param::None, |j| Param::Jaxpr(j.clone()))),
    ]
}

pub(super) fn parse_scatter(op: ScatterOp, p: &mut ParamReader) -> Result<Primitive, String> {
    let [update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, operand_batching_dims, scatter_indices_batching_dims] =
        <[Vec<usize>; 5]>::try_from(dims_call(p, "dimension_numbers", "ScatterDimensionNumbers", &SCATTER_KEYS)?)
            .map_err(|_| format!("{}: malformed dimension_numbers", op.name()))?;
    if !p.seq("update_consts")?.is_empty() {
        return Err(format!("{}: only update_consts=() is supported", op.name()));
    }
    let update_jaxpr = match p.take("update_jaxpr")? {
        Param::None => None,
        Param::Jaxpr(j) => Some(j),
        v => return Err(format!("{}: parameter `update_jaxpr` must be None or a jaxpr, found {v}", op.name())),
    };
    Ok(Primitive::Scatter {
        op,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims,
            inserted_window_dims,
            scatter_dims_to_operand_dims,
            operand_batching_dims,
            scatter_indices_batching_dims,
        },
        indices_are_sorted: p.bool("indices_are_sorted")?,
        mode: parse_mode(p)?,
        unique_indices: p.bool("unique_indices")?,
        update_jaxpr,
    })
}

pub(crate) fn scatter_shape(
    op: ScatterOp,
    dn: &ScatterDimensionNumbers,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x, indices, updates] = arity(name, in_avals)?;
    ensure!(updates.dtype == x.dtype, name, "updates {updates} and operand {x} have different dtypes");
    if matches!(op, ScatterOp::Add | ScatterOp::Sub | ScatterOp::Mul) {
        ensure!(x.dtype.is_numeric(), name, "operand {x} is not numeric");
    }
    if op != ScatterOp::Set {
        ensure!(x.dtype != DType::Key, name, "keys can only be scattered by `scatter` (a set), found {x}");
    }
    distinct_axes(name, "scatter_dims_to_operand_dims", &dn.scatter_dims_to_operand_dims, x)?;
    let mut inserted = dn.inserted_window_dims.clone();
    inserted.extend(&dn.operand_batching_dims);
    distinct_axes(name, "inserted_window_dims and operand_batching_dims", &inserted, x)?;
    let batch = index_vectors(name, indices, dn.scatter_dims_to_operand_dims.len())?;
    batching(name, x, &dn.operand_batching_dims, batch, &dn.scatter_indices_batching_dims)?;
    let window_operand_dims: Vec<usize> = (0..x.rank()).filter(|d| !inserted.contains(d)).collect();
    ensure!(
        window_operand_dims.len() == dn.update_window_dims.len(),
        name,
        "update_window_dims {:?} must name one update axis per operand window axis ({})",
        dn.update_window_dims,
        window_operand_dims.len()
    );
    ensure!(
        updates.rank() == dn.update_window_dims.len() + batch.len(),
        name,
        "updates {updates} must have rank {} (window axes and the indices' batch axes)",
        dn.update_window_dims.len() + batch.len()
    );
    distinct_axes(name, "update_window_dims", &dn.update_window_dims, updates)?;
    ensure!(dn.update_window_dims.windows(2).all(|w| w[0] < w[1]), name, "update_window_dims must be increasing");
    for (&u, &o) in dn.update_window_dims.iter().zip(&window_operand_dims) {
        ensure!(updates.shape[u] <= x.shape[o], name, "update window axis {u} of {updates} exceeds axis {o} of {x}");
    }
    let scatter_dims = (0..updates.rank()).filter(|d| !dn.update_window_dims.contains(d));
    for (u, &n) in scatter_dims.zip(batch) {
        ensure!(updates.shape[u] == n, name, "scatter axis {u} of {updates} and the indices' batch axes differ");
    }
    Ok(device(x.dtype, x.shape.clone()))
}
