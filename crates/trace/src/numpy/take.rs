//! Indexing by integer arrays: `jnp.take` and `x[idx]` with an integer tensor, recorded as
//! JAX 0.10.2 records them: negative indices wrapped (`lt`, `add`, `select_n`), a trailing
//! index-vector axis (`broadcast_in_dim`), then one `gather`.

use std::panic::Location;

use remat_ir::{CompareOp, FillValue, GatherDimensionNumbers, GatherScatterMode, Primitive};

use crate::numpy::{normalize_axes, where_};
use crate::tensor::{binary_at, compare_at, Arg, Tensor};
use crate::trace::{bind, record_error};
use crate::transforms::library_jit;

/// `idx` with negative entries counted from the end of an axis of size `n`. In a `jnp`
/// function (`wrap_in_jit`) the select is `jnp.where`'s call; in `x[idx]` it is inline.
fn wrap_negative(idx: &Tensor, n: usize, via_where: bool, loc: &'static Location<'static>) -> Tensor {
    let neg = compare_at(CompareOp::Lt, idx.into(), 0.into(), loc);
    let shifted = binary_at(remat_ir::BinaryOp::Add, idx.into(), Arg::Scalar(n as f64, idx.dtype()), loc);
    if via_where {
        where_(&neg, &shifted, idx)
    } else {
        bind(Primitive::SelectN, &[neg.into(), idx.into(), shifted.into()], idx.is_weak(), loc).remove(0)
    }
}

/// The `gather` of the slices of `x` at `idx` along `axis` (one index per slice).
fn gather_axis(
    x: &Tensor,
    idx: &Tensor,
    axis: usize,
    mode: GatherScatterMode,
    fill_value: Option<FillValue>,
    loc: &'static Location<'static>,
) -> Tensor {
    let r = idx.ndim();
    let indices = idx.expand_dims_at(&[r], loc);
    let out_rank = x.ndim() - 1 + r;
    let offset_dims = (0..axis).chain(axis + r..out_rank).collect();
    let mut slice_sizes = x.shape().to_vec();
    slice_sizes[axis] = 1;
    let prim = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims,
            collapsed_slice_dims: vec![axis],
            start_index_map: vec![axis],
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
        },
        fill_value,
        indices_are_sorted: false,
        mode,
        slice_sizes,
        unique_indices: false,
    };
    bind(prim, &[x.into(), indices.into()], x.is_weak(), loc).remove(0)
}

fn check_indices(what: &str, x: &Tensor, idx: &Tensor, loc: &'static Location<'static>) -> bool {
    if !idx.dtype().is_integer() {
        record_error(loc, format!("{what}: indices must be integers, found {} (indexing {})", idx.aval(), x.aval()));
        return false;
    }
    true
}

impl Tensor {
    /// `jnp.take(x, idx, axis=axis)` (`axis: None` takes from the flattened `x`): the
    /// slices of `x` at the integer indices `idx` along `axis`, which `idx`'s axes replace.
    /// Negative indices count from the end; out-of-bounds ones give NaN for floats (JAX's
    /// default `mode="fill"`), and their gradient is dropped. Recorded as
    /// `jit[name=_take]`.
    #[track_caller]
    pub fn take(&self, idx: &Tensor, axis: Option<isize>) -> Tensor {
        let loc = Location::caller();
        let placeholder = || Tensor::placeholder(self.aval().clone());
        if !check_indices("take", self, idx, loc) {
            return placeholder();
        }
        let axis = match axis {
            None => None,
            Some(a) => match normalize_axes("take", self, &[a], loc) {
                Some(a) => Some(a[0]),
                None => return placeholder(),
            },
        };
        let fill = if self.dtype().is_float() { FillValue::Float(f64::NAN) } else { FillValue::Int(i64::MIN) };
        library_jit(
            "_take",
            &[self.into(), idx.into()],
            |inner| {
                let [x, idx]: [Tensor; 2] = inner.try_into().expect("two inputs");
                let (x, axis) = match axis {
                    Some(a) => (x, a),
                    None => (x.reshape_at(&[x.size()], loc), 0),
                };
                let idx = wrap_negative(&idx, x.shape()[axis], true, loc);
                gather_axis(&x, &idx, axis, GatherScatterMode::FillOrDrop, Some(fill), loc)
            },
            loc,
        )
    }

    /// `x[idx]` with an integer tensor `idx`: the rows of `x` at `idx` (axis 0, which
    /// `idx`'s axes replace); negative indices count from the end. As in JAX, indices are
    /// promised in bounds (`PROMISE_IN_BOUNDS`: an out-of-bounds one is clamped).
    #[track_caller]
    pub fn index_array(&self, idx: &Tensor) -> Tensor {
        let loc = Location::caller();
        if !check_indices("index_array", self, idx, loc) {
            return Tensor::placeholder(self.aval().clone());
        }
        if self.ndim() == 0 {
            record_error(loc, format!("index_array: cannot index {}, which has no axes", self.aval()));
            return Tensor::placeholder(self.aval().clone());
        }
        let idx = wrap_negative(idx, self.shape()[0], false, loc);
        gather_axis(self, &idx, 0, GatherScatterMode::PromiseInBounds, None, loc)
    }
}
