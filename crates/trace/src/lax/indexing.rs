//! `lax.gather` and the `lax.scatter*` family with explicit dimension numbers: XLA's
//! indexing in its own terms, recorded as JAX 0.10.2 records them. The numpy indexing of
//! `crate::numpy` (`take`, `x[idx]`, `.at[]`) builds the same primitives for its cases;
//! these are for everything else (windows of several axes, points, batching dimensions).
//!
//! The dimension numbers, slice sizes and operand shapes are checked by the primitives'
//! shape rules: a wrong one is a located [`TraceError`](crate::TraceError) naming the
//! caller's line.

use std::panic::Location;

use remat_ir::{FillValue, GatherDimensionNumbers, GatherScatterMode, Primitive, ScatterDimensionNumbers, ScatterOp};

use crate::numpy::update_jaxpr;
use crate::tensor::Tensor;
use crate::trace::{bind, Operand};

/// `lax.gather`'s keyword arguments. The default is JAX's: indices promised in bounds
/// (`mode=None`, XLA clamps), no fill value, nothing promised about the indices' order or
/// uniqueness.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatherOptions {
    /// `None` is JAX's `mode=None` (`PROMISE_IN_BOUNDS`); `Clip` clamps indices so the
    /// slice is in bounds; `FillOrDrop` (`mode="fill"`) gathers `fill_value` for a slice
    /// that is not.
    pub mode: Option<GatherScatterMode>,
    /// Under `FillOrDrop`, what an out-of-bounds slice holds (`None`: NaN for floats, the
    /// lowest value for signed integers, the highest for unsigned ones).
    pub fill_value: Option<FillValue>,
    /// The caller promises the index vectors are sorted (printed; XLA may use it).
    pub indices_are_sorted: bool,
    /// The caller promises no two index vectors are equal (printed; XLA may use it).
    pub unique_indices: bool,
}

/// `lax.scatter*`'s keyword arguments. The default is JAX's: out-of-bounds updates dropped
/// (`mode=None` is `FILL_OR_DROP` for a scatter), nothing promised about the indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScatterOptions {
    /// `None` and `FillOrDrop` (`mode="drop"`) drop an update whose window is out of
    /// bounds; `Clip` clamps its indices; `PromiseInBounds` lets XLA do either.
    pub mode: Option<GatherScatterMode>,
    /// The caller promises the index vectors are sorted (printed; XLA may use it).
    pub indices_are_sorted: bool,
    /// The caller promises no two windows overlap (printed; what `scatter_mul`'s and
    /// `scatter`'s gradients need).
    pub unique_indices: bool,
}

/// `lax.gather(operand, start_indices, dimension_numbers, slice_sizes, ...)`: the slices
/// of `operand` of `slice_sizes` starting at each index vector (the last axis of
/// `start_indices`), laid out as `dimension_numbers` says.
#[track_caller]
pub fn gather(
    operand: &Tensor,
    start_indices: &Tensor,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: &[usize],
    options: GatherOptions,
) -> Tensor {
    let prim = Primitive::Gather {
        dimension_numbers,
        fill_value: options.fill_value,
        indices_are_sorted: options.indices_are_sorted,
        mode: options.mode.unwrap_or(GatherScatterMode::PromiseInBounds),
        slice_sizes: slice_sizes.to_vec(),
        unique_indices: options.unique_indices,
    };
    bind(prim, &[operand.into(), start_indices.into()], operand.is_weak(), Location::caller()).remove(0)
}

fn scatter_op(
    op: ScatterOp,
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
    loc: &'static Location<'static>,
) -> Tensor {
    let prim = Primitive::Scatter {
        op,
        dimension_numbers,
        indices_are_sorted: options.indices_are_sorted,
        mode: options.mode.unwrap_or(GatherScatterMode::FillOrDrop),
        unique_indices: options.unique_indices,
        update_jaxpr: update_jaxpr(op, operand.dtype()),
    };
    let operands: [Operand; 3] = [operand.into(), scatter_indices.into(), updates.into()];
    bind(prim, &operands, operand.is_weak(), loc).remove(0)
}

/// `lax.scatter`: `operand` with the windows at `scatter_indices` replaced by `updates`
/// (which of two updates of one element wins is unspecified unless `unique_indices`).
#[track_caller]
pub fn scatter(
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
) -> Tensor {
    scatter_op(ScatterOp::Set, operand, scatter_indices, updates, dimension_numbers, options, Location::caller())
}

/// `lax.scatter_add`: `updates` added into the windows of `operand` at `scatter_indices`.
#[track_caller]
pub fn scatter_add(
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
) -> Tensor {
    scatter_op(ScatterOp::Add, operand, scatter_indices, updates, dimension_numbers, options, Location::caller())
}

/// `lax.scatter_mul`: the windows multiplied by `updates` (JAX differentiates it only with
/// `unique_indices`).
#[track_caller]
pub fn scatter_mul(
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
) -> Tensor {
    scatter_op(ScatterOp::Mul, operand, scatter_indices, updates, dimension_numbers, options, Location::caller())
}

/// `lax.scatter_min`: the elementwise minimum of the windows and `updates`.
#[track_caller]
pub fn scatter_min(
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
) -> Tensor {
    scatter_op(ScatterOp::Min, operand, scatter_indices, updates, dimension_numbers, options, Location::caller())
}

/// `lax.scatter_max`: the elementwise maximum of the windows and `updates`.
#[track_caller]
pub fn scatter_max(
    operand: &Tensor,
    scatter_indices: &Tensor,
    updates: &Tensor,
    dimension_numbers: ScatterDimensionNumbers,
    options: ScatterOptions,
) -> Tensor {
    scatter_op(ScatterOp::Max, operand, scatter_indices, updates, dimension_numbers, options, Location::caller())
}
