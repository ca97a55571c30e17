//! Shape and indexing primitives: `broadcast_in_dim`, `reshape`, `transpose`, `rev`, `squeeze`,
//! `expand_dims`, `slice`, `pad`, `concatenate`, `dynamic_slice`, `dynamic_update_slice`
//! and `iota`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, the
//! `key=value` pairs in printing order; `parse_*`, the same read back) and its shape rule
//! (`*_shape`, JAX's rule from `jax/_src/lax/lax.py` and `slicing.py`). Results keep the
//! operand's dtype and land in device memory.

use std::collections::HashSet;

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::shape::{arity, bail, device, distinct_axes, ensure, ShapeError};
use crate::types::{Aval, DType};

// `broadcast_in_dim[broadcast_dimensions=(1,)] x`: hidden when `()`; `shape` is not
// printed (the binder's aval gives it); `sharding=None` is accepted.

pub(super) fn broadcast_in_dim_params(broadcast_dimensions: &[usize]) -> Params {
    if broadcast_dimensions.is_empty() {
        Vec::new()
    } else {
        vec![("broadcast_dimensions", Param::ints(broadcast_dimensions.iter().copied()))]
    }
}

pub(super) fn parse_broadcast_in_dim(p: &mut ParamReader, out_avals: &[Aval]) -> Result<Primitive, String> {
    p.optional_none("sharding")?;
    let broadcast_dimensions =
        if p.has("broadcast_dimensions") { p.usizes("broadcast_dimensions")? } else { Vec::new() };
    let shape = match (p.has("shape"), out_avals.first()) {
        (true, _) => p.usizes("shape")?,
        (false, Some(aval)) => aval.shape.clone(),
        (false, None) => return Err("broadcast_in_dim needs an output binder".into()),
    };
    Ok(Primitive::BroadcastInDim { shape, broadcast_dimensions })
}

pub(crate) fn broadcast_in_dim_shape(
    shape: &[usize],
    dims: &[usize],
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "broadcast_in_dim";
    let [x] = arity(name, in_avals)?;
    ensure!(
        dims.len() == x.rank(),
        name,
        "operand {x} has rank {} but broadcast_dimensions {dims:?} has {} entries",
        x.rank(),
        dims.len()
    );
    ensure!(dims.windows(2).all(|w| w[0] < w[1]), name, "broadcast_dimensions {dims:?} must be strictly increasing");
    for (i, &bd) in dims.iter().enumerate() {
        ensure!(bd < shape.len(), name, "broadcast dimension {bd} is out of range for shape {shape:?}");
        ensure!(
            x.shape[i] == 1 || x.shape[i] == shape[bd],
            name,
            "operand dimension {i} of {x} has size {}, which is neither 1 nor the target size {} of dimension {bd}",
            x.shape[i],
            shape[bd]
        );
    }
    Ok(device(x.dtype, shape.to_vec()))
}

// `reshape[dimensions=None new_sizes=(6,) sharding=None] x`; `dimensions=(0, 2, 1)`
// transposes the operand by that permutation first (JAX's `lax.reshape(x, sizes, dims)`).

pub(super) fn reshape_params(new_sizes: &[usize], dimensions: Option<&[usize]>) -> Params {
    vec![
        ("dimensions", dimensions.map_or(Param::None, |d| Param::ints(d.iter().copied()))),
        ("new_sizes", Param::ints(new_sizes.iter().copied())),
        ("sharding", Param::None),
    ]
}

pub(super) fn parse_reshape(p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("sharding")?;
    let dimensions = if p.has("dimensions") && !p.is_none("dimensions") {
        Some(p.usizes("dimensions")?)
    } else {
        p.optional_none("dimensions")?;
        None
    };
    Ok(Primitive::Reshape { new_sizes: p.usizes("new_sizes")?, dimensions })
}

pub(crate) fn reshape_shape(
    new_sizes: &[usize],
    dimensions: Option<&[usize]>,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "reshape";
    let [x] = arity(name, in_avals)?;
    if let Some(d) = dimensions {
        let mut sorted = d.to_vec();
        sorted.sort_unstable();
        ensure!(
            sorted == (0..x.rank()).collect::<Vec<_>>(),
            name,
            "dimensions {d:?} is not a permutation of the axes of {x}"
        );
    }
    let (from, to) = (element_count(&x.shape), element_count(new_sizes));
    let count = |n: Option<usize>| n.map_or("too many".to_string(), |n| n.to_string());
    ensure!(
        from.is_some() && from == to,
        name,
        "cannot reshape {x} ({} elements) to new_sizes {new_sizes:?} ({} elements)",
        count(from),
        count(to)
    );
    Ok(device(x.dtype, new_sizes.to_vec()))
}

fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

// `transpose[permutation=(1, 0)] x`.

pub(super) fn transpose_params(permutation: &[usize]) -> Params {
    vec![("permutation", Param::ints(permutation.iter().copied()))]
}

pub(super) fn parse_transpose(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Transpose { permutation: p.usizes("permutation")? })
}

pub(crate) fn transpose_shape(permutation: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "transpose";
    let [x] = arity(name, in_avals)?;
    ensure!(
        is_permutation(permutation, x.rank()),
        name,
        "permutation {permutation:?} is not a permutation of the {} axes of {x}",
        x.rank()
    );
    Ok(device(x.dtype, permutation.iter().map(|&p| x.shape[p]).collect()))
}

// `rev[dimensions=(0, 1)] x`: JAX's `_rev_shape_rule` (distinct axes of x; same type).

pub(super) fn rev_params(dimensions: &[usize]) -> Params {
    vec![("dimensions", Param::ints(dimensions.iter().copied()))]
}

pub(super) fn parse_rev(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Rev { dimensions: p.usizes("dimensions")? })
}

pub(crate) fn rev_shape(dimensions: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "rev";
    let [x] = arity(name, in_avals)?;
    distinct_axes(name, "dimensions", dimensions, x)?;
    Ok(device(x.dtype, x.shape.clone()))
}

fn is_permutation(p: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    p.len() == rank && p.iter().all(|&i| i < rank && !std::mem::replace(&mut seen[i], true))
}

// `squeeze[dimensions=(0,)] x` and `expand_dims[dimensions=(0,)] x`: one text form.

pub(super) fn dimensions_params(dimensions: &[usize]) -> Params {
    vec![("dimensions", Param::ints(dimensions.iter().copied()))]
}

pub(super) fn parse_squeeze(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Squeeze { dimensions: p.usizes("dimensions")? })
}

pub(crate) fn squeeze_shape(dimensions: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "squeeze";
    let [x] = arity(name, in_avals)?;
    distinct_axes(name, "dimensions", dimensions, x)?;
    for &d in dimensions {
        ensure!(x.shape[d] == 1, name, "dimension {d} of {x} has size {}, not 1", x.shape[d]);
    }
    let shape = (0..x.rank()).filter(|d| !dimensions.contains(d)).map(|d| x.shape[d]).collect();
    Ok(device(x.dtype, shape))
}

pub(super) fn parse_expand_dims(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::ExpandDims { dimensions: p.usizes("dimensions")? })
}

pub(crate) fn expand_dims_shape(dimensions: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "expand_dims";
    let [x] = arity(name, in_avals)?;
    let out_rank = x.rank() + dimensions.len();
    let set: HashSet<usize> = dimensions.iter().copied().collect();
    ensure!(set.len() == dimensions.len(), name, "dimensions {dimensions:?} are not distinct");
    ensure!(
        dimensions.iter().all(|&d| d < out_rank),
        name,
        "dimensions {dimensions:?} must be positions in the output rank {out_rank}"
    );
    let mut rest = x.shape.iter();
    let shape = (0..out_rank).map(|d| if set.contains(&d) { 1 } else { *rest.next().unwrap_or(&1) }).collect();
    Ok(device(x.dtype, shape))
}

// `slice[limit_indices=(4,) start_indices=(1,) strides=None] x` (or `strides=(2,)`).

pub(super) fn slice_params(start_indices: &[usize], limit_indices: &[usize], strides: Option<&[usize]>) -> Params {
    vec![
        ("limit_indices", Param::ints(limit_indices.iter().copied())),
        ("start_indices", Param::ints(start_indices.iter().copied())),
        ("strides", strides.map_or(Param::None, |s| Param::ints(s.iter().copied()))),
    ]
}

pub(super) fn parse_slice(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Slice {
        start_indices: p.usizes("start_indices")?,
        limit_indices: p.usizes("limit_indices")?,
        strides: if p.is_none("strides") {
            p.optional_none("strides")?;
            None
        } else {
            Some(p.usizes("strides")?)
        },
    })
}

pub(crate) fn slice_shape(
    start: &[usize],
    limit: &[usize],
    strides: Option<&[usize]>,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "slice";
    let [x] = arity(name, in_avals)?;
    let r = x.rank();
    ensure!(
        start.len() == r && limit.len() == r,
        name,
        "start_indices and limit_indices need one entry per axis of {x}"
    );
    if let Some(s) = strides {
        ensure!(s.len() == r, name, "strides {s:?} need one entry per axis of {x}");
    }
    let mut shape = Vec::with_capacity(r);
    for d in 0..r {
        let stride = strides.map_or(1, |s| s[d]);
        ensure!(stride >= 1, name, "stride {stride} in dimension {d} must be at least 1");
        ensure!(
            start[d] <= limit[d] && limit[d] <= x.shape[d],
            name,
            "dimension {d}: need start <= limit <= size, found start {} limit {} size {}",
            start[d],
            limit[d],
            x.shape[d]
        );
        shape.push((limit[d] - start[d]).div_ceil(stride));
    }
    Ok(device(x.dtype, shape))
}

// `pad[padding_config=((1, 2, 0),)] x padding_value`: (low, high, interior) per axis.

pub(super) fn pad_params(padding_config: &[(i64, i64, i64)]) -> Params {
    let entry = |&(lo, hi, interior): &(i64, i64, i64)| {
        Param::Tuple(vec![Param::Int(lo), Param::Int(hi), Param::Int(interior)])
    };
    vec![("padding_config", Param::Tuple(padding_config.iter().map(entry).collect()))]
}

pub(super) fn parse_pad(p: &mut ParamReader) -> Result<Primitive, String> {
    let cfg = p.take("padding_config")?;
    let entries = cfg.as_seq().ok_or("pad: padding_config must be a tuple of (low, high, interior)")?;
    let mut padding_config = Vec::new();
    for e in entries {
        match e.as_seq().map(|t| t.iter().map(Param::as_int).collect::<Option<Vec<i64>>>()) {
            Some(Some(t)) if t.len() == 3 && t[2] >= 0 => padding_config.push((t[0], t[1], t[2])),
            _ => return Err(format!("pad: bad padding_config entry {e}")),
        }
    }
    Ok(Primitive::Pad { padding_config })
}

pub(crate) fn pad_shape(config: &[(i64, i64, i64)], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "pad";
    let [x, padding_value] = arity(name, in_avals)?;
    ensure!(
        padding_value.dtype == x.dtype,
        name,
        "operand {x} and padding value {padding_value} have different dtypes"
    );
    ensure!(padding_value.rank() == 0, name, "the padding value must be a scalar, found {padding_value}");
    ensure!(config.len() == x.rank(), name, "padding_config has {} entries for {x}", config.len());
    let mut shape = Vec::with_capacity(config.len());
    for (d, (&(lo, hi, interior), &n)) in config.iter().zip(&x.shape).enumerate() {
        ensure!(interior >= 0, name, "interior padding {interior} in dimension {d} is negative");
        let n = n as i128;
        let size = lo as i128 + hi as i128 + n + (n - 1).max(0) * interior as i128;
        ensure!(size >= 0, name, "dimension {d} of {x} padded by ({lo}, {hi}, {interior}) has negative size {size}");
        let size = usize::try_from(size).map_err(|_| ShapeError::new(name, format!("dimension {d} is too large")))?;
        shape.push(size);
    }
    Ok(device(x.dtype, shape))
}

// `concatenate[dimension=0] x0 x1 ...`.

pub(super) fn concatenate_params(dimension: usize) -> Params {
    vec![("dimension", Param::Int(dimension as i64))]
}

pub(super) fn parse_concatenate(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Concatenate { dimension: p.usize("dimension")? })
}

pub(crate) fn concatenate_shape(dimension: usize, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "concatenate";
    let Some(first) = in_avals.first() else { bail!(name, "expected at least one operand") };
    ensure!(dimension < first.rank(), name, "dimension {dimension} is out of range for {first}");
    let mut shape = first.shape.clone();
    for (i, x) in in_avals.iter().enumerate().skip(1) {
        ensure!(x.dtype == first.dtype, name, "operand {i} {x} and operand 0 {first} have different dtypes");
        let same_elsewhere = x.rank() == first.rank()
            && x.shape.iter().zip(&first.shape).enumerate().all(|(d, (a, b))| d == dimension || a == b);
        ensure!(same_elsewhere, name, "operand {i} {x} and operand 0 {first} differ outside dimension {dimension}");
        shape[dimension] += x.shape[dimension];
    }
    Ok(device(first.dtype, shape))
}

// `dynamic_slice[slice_sizes=(2, 3)] x i0 i1 ...`.

pub(super) fn dynamic_slice_params(slice_sizes: &[usize]) -> Params {
    vec![("slice_sizes", Param::ints(slice_sizes.iter().copied()))]
}

pub(super) fn parse_dynamic_slice(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::DynamicSlice { slice_sizes: p.usizes("slice_sizes")? })
}

pub(crate) fn dynamic_slice_shape(slice_sizes: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "dynamic_slice";
    let Some((x, indices)) = in_avals.split_first() else { bail!(name, "expected an operand and start indices") };
    start_indices(name, x, indices)?;
    ensure!(slice_sizes.len() == x.rank(), name, "slice_sizes {slice_sizes:?} must have one entry per axis of {x}");
    for (d, (&size, &dim)) in slice_sizes.iter().zip(&x.shape).enumerate() {
        ensure!(size <= dim, name, "slice size {size} exceeds dimension {d} of {x}");
    }
    Ok(device(x.dtype, slice_sizes.to_vec()))
}

// `dynamic_update_slice x update i0 i1 ...`: no parameters.

pub(crate) fn dynamic_update_slice_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "dynamic_update_slice";
    let [x, update, indices @ ..] = in_avals else { bail!(name, "expected an operand, an update and start indices") };
    ensure!(update.dtype == x.dtype, name, "update {update} and operand {x} have different dtypes");
    ensure!(update.rank() == x.rank(), name, "update {update} and operand {x} have different ranks");
    for (d, (&u, &dim)) in update.shape.iter().zip(&x.shape).enumerate() {
        ensure!(u <= dim, name, "update {update} is larger than operand {x} in dimension {d}");
    }
    start_indices(name, x, indices)?;
    Ok(device(x.dtype, x.shape.clone()))
}

/// `dynamic_slice` and `dynamic_update_slice` start indices: one scalar i32 per axis.
fn start_indices(name: &str, x: &Aval, indices: &[Aval]) -> Result<(), ShapeError> {
    ensure!(indices.len() == x.rank(), name, "{} start indices for {x}; expected one per axis", indices.len());
    for (i, idx) in indices.iter().enumerate() {
        ensure!(idx.dtype == DType::I32 && idx.rank() == 0, name, "start index {i} must be a scalar i32, found {idx}");
    }
    Ok(())
}

// `iota[dimension=0 dtype=float32 shape=(2,) sharding=None]`.

pub(super) fn iota_params(dtype: DType, shape: &[usize], dimension: usize) -> Params {
    vec![
        ("dimension", Param::Int(dimension as i64)),
        ("dtype", dtype_param(dtype)),
        ("shape", Param::ints(shape.iter().copied())),
        ("sharding", Param::None),
    ]
}

pub(super) fn parse_iota(p: &mut ParamReader) -> Result<Primitive, String> {
    p.optional_none("sharding")?;
    Ok(Primitive::Iota { dtype: p.dtype("dtype")?, shape: p.usizes("shape")?, dimension: p.usize("dimension")? })
}

pub(crate) fn iota_shape(
    dtype: DType,
    shape: &[usize],
    dimension: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "iota";
    let [] = arity(name, in_avals)?;
    ensure!(dimension < shape.len(), name, "dimension {dimension} is out of range for shape {shape:?}");
    Ok(device(dtype, shape.to_vec()))
}
