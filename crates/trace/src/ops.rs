//! `jax.ops`: segment reductions, recorded as JAX 0.10.2 records them: a buffer of the
//! reduction's identity (`broadcast_in_dim` of a literal), the segment ids as a trailing
//! index-vector axis, then one `scatter-add` (`-max`, `-min`, `-mul`) in `FILL_OR_DROP`
//! mode: ids outside `[0, num_segments)` are dropped, and negative ids are not wrapped.

use std::panic::Location;

use remat_ir::{DType, LitValue, ScatterOp};

use crate::numpy::{full_at, scatter_rows};
use crate::tensor::Tensor;
use crate::trace::record_error;

/// `jax.ops.segment_sum(data, segment_ids, num_segments)`: `out[s] = sum of data[i] over
/// the i with segment_ids[i] == s`, for `out` of shape `[num_segments, *data.shape[1:]]`
/// (empty segments are 0). `num_segments` is static, as JAX needs it under `jit`.
#[track_caller]
pub fn segment_sum(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    segment_update("segment_sum", ScatterOp::Add, data, segment_ids, num_segments, Location::caller())
}

/// `jax.ops.segment_max`: the largest `data[i]` of each segment (`-inf`, or the lowest
/// integer, for an empty one).
#[track_caller]
pub fn segment_max(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    segment_update("segment_max", ScatterOp::Max, data, segment_ids, num_segments, Location::caller())
}

/// `jax.ops.segment_min`: the smallest `data[i]` of each segment (`inf`, or the highest
/// integer, for an empty one).
#[track_caller]
pub fn segment_min(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    segment_update("segment_min", ScatterOp::Min, data, segment_ids, num_segments, Location::caller())
}

/// `jax.ops.segment_prod`: the product of each segment's `data[i]` (1 for an empty one).
#[track_caller]
pub fn segment_prod(data: &Tensor, segment_ids: &Tensor, num_segments: usize) -> Tensor {
    segment_update("segment_prod", ScatterOp::Mul, data, segment_ids, num_segments, Location::caller())
}

/// JAX's `_get_identity`: the value a segment with no entries holds.
fn identity(op: ScatterOp, dtype: DType) -> Option<LitValue> {
    let float = dtype.is_float();
    let bits = 8 * dtype.size_in_bytes() as u32;
    let (lowest, highest) = if dtype.is_unsigned() {
        (0.0, ((1u64 << bits) - 1) as f64)
    } else {
        (-((1i64 << (bits - 1)) as f64), ((1i64 << (bits - 1)) - 1) as f64)
    };
    let value = match op {
        ScatterOp::Add => 0.0,
        ScatterOp::Mul => 1.0,
        ScatterOp::Max if float => f64::NEG_INFINITY,
        ScatterOp::Min if float => f64::INFINITY,
        ScatterOp::Max => lowest,
        ScatterOp::Min => highest,
        // No segment reduction subtracts; `segment_update` is given the others only.
        ScatterOp::Set | ScatterOp::Sub => return None,
    };
    Some(LitValue::from_f64(dtype, value))
}

fn segment_update(
    what: &str,
    op: ScatterOp,
    data: &Tensor,
    ids: &Tensor,
    num_segments: usize,
    loc: &'static Location<'static>,
) -> Tensor {
    let mut out_shape = vec![num_segments];
    out_shape.extend(data.shape().iter().skip(1));
    let placeholder = || Tensor::placeholder(remat_ir::Aval::new(data.dtype(), out_shape.clone()));
    if !ids.dtype().is_integer() || ids.ndim() != 1 {
        record_error(loc, format!("{what}: segment ids must be a vector of integers, found {}", ids.aval()));
        return placeholder();
    }
    if data.ndim() == 0 || data.shape()[0] != ids.shape()[0] {
        let message =
            format!("{what}: data {} needs a leading axis of the {} segment ids' length", data.aval(), ids.aval());
        record_error(loc, message);
        return placeholder();
    }
    let Some(init) = (data.dtype() != DType::Bool).then(|| identity(op, data.dtype())).flatten() else {
        record_error(loc, format!("{what}: {} data is not supported", data.aval()));
        return placeholder();
    };
    let buffer = full_at(&out_shape, init, loc);
    let indices = ids.expand_dims_at(&[1], loc);
    scatter_rows(op, buffer, indices, data.clone(), false, loc)
}
