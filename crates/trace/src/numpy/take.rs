//! Indexing by integer arrays: `jnp.take`, `jnp.take_along_axis`, `x[idx]` and
//! `x.at[idx]` with an integer tensor, recorded as JAX 0.10.2 records them: negative
//! indices wrapped (`lt`, `add`, `select_n`), a trailing index-vector axis, then one
//! `gather` or `scatter`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::Arc;

use remat_ir::{
    CompareOp, DType, FillValue, GatherDimensionNumbers, GatherScatterMode, Jaxpr, Primitive, ScatterDimensionNumbers,
    ScatterOp,
};

use crate::elementwise::{binary_at, compare_at, Arg};
use crate::numpy::{normalize_axes, where_};
use crate::tensor::Tensor;
use crate::trace::Operand;
use crate::trace::{bind, record_error};
use crate::transforms::library_jit;

/// `idx` with negative entries counted from the end of an axis of size `n`. In a `jnp`
/// function (`wrap_in_jit`) the select is `jnp.where`'s call; in `x[idx]` it is inline.
pub(super) fn wrap_negative(idx: &Tensor, n: usize, via_where: bool, loc: &'static Location<'static>) -> Tensor {
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
    unique_indices: bool,
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
        unique_indices,
    };
    bind(prim, &[x.into(), indices.into()], x.is_weak(), loc).remove(0)
}

/// What an out-of-bounds index gathers under JAX's default `mode="fill"`: NaN for floats,
/// the lowest value of a signed integer type and the highest of an unsigned one. (JAX's
/// `True` for booleans has no `FillValue`; that is an error here.)
fn fill_value(what: &str, x: &Tensor, loc: &'static Location<'static>) -> Option<FillValue> {
    let dtype = x.dtype();
    let bits = 8 * dtype.size_in_bytes() as u32;
    if dtype.is_float() {
        Some(FillValue::Float(f64::NAN))
    } else if dtype.is_unsigned() {
        Some(FillValue::Int((1i64 << bits) - 1))
    } else if dtype.is_integer() {
        Some(FillValue::Int(-(1i64 << (bits - 1))))
    } else {
        record_error(loc, format!("{what}: gathering from {} is not supported yet", x.aval()));
        None
    }
}

fn check_indices(what: &str, x: &Tensor, idx: &Tensor, loc: &'static Location<'static>) -> bool {
    if !idx.dtype().is_integer() {
        record_error(loc, format!("{what}: indices must be integers, found {} (indexing {})", idx.aval(), x.aval()));
        return false;
    }
    true
}

/// What `jnp.take` does with an out-of-bounds index (its `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeMode {
    /// `mode="fill"` (the default): negative indices count from the end, others out of
    /// bounds gather the fill value (NaN for floats); `FILL_OR_DROP`.
    Fill,
    /// `mode="clip"`: every index clamped into the axis (negative ones to 0); `CLIP`.
    Clip,
    /// `mode="wrap"`: every index taken modulo the axis size (`jnp.mod`, recorded as
    /// `jit[name=remainder]`); `PROMISE_IN_BOUNDS`.
    Wrap,
}

impl Tensor {
    /// `jnp.take(x, idx, axis=axis)` (`axis: None` takes from the flattened `x`): the
    /// slices of `x` at the integer indices `idx` along `axis`, which `idx`'s axes replace.
    /// Negative indices count from the end; out-of-bounds ones give NaN for floats (JAX's
    /// default `mode="fill"`), and their gradient is dropped. Recorded as
    /// `jit[name=_take]`.
    #[track_caller]
    pub fn take(&self, idx: &Tensor, axis: Option<isize>) -> Tensor {
        self.take_at(idx, axis, TakeMode::Fill, Location::caller())
    }

    /// `jnp.take(x, idx, axis=axis, mode=mode)`: [`Tensor::take`] with out-of-bounds
    /// indices clipped or wrapped instead (see [`TakeMode`]).
    #[track_caller]
    pub fn take_mode(&self, idx: &Tensor, axis: Option<isize>, mode: TakeMode) -> Tensor {
        self.take_at(idx, axis, mode, Location::caller())
    }

    pub(crate) fn take_at(
        &self,
        idx: &Tensor,
        axis: Option<isize>,
        mode: TakeMode,
        loc: &'static Location<'static>,
    ) -> Tensor {
        self.take_unique_at(idx, axis, mode, false, loc)
    }

    /// [`Tensor::take_at`] with JAX's `unique_indices` (the caller promises no index
    /// repeats, as `random.permutation` does), printed on the `gather`.
    pub(crate) fn take_unique_at(
        &self,
        idx: &Tensor,
        axis: Option<isize>,
        mode: TakeMode,
        unique: bool,
        loc: &'static Location<'static>,
    ) -> Tensor {
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
        let fill = match mode {
            TakeMode::Fill => match fill_value("take", self, loc) {
                Some(fill) => Some(fill),
                None => return placeholder(),
            },
            TakeMode::Clip | TakeMode::Wrap => None,
        };
        library_jit(
            "_take",
            &[self.into(), idx.into()],
            |inner| {
                let [x, idx]: [Tensor; 2] = inner.try_into().expect("two inputs");
                let (x, axis) = match axis {
                    Some(a) => (x, a),
                    None => (x.reshape_at(&[x.size()], loc), 0),
                };
                let n = x.shape()[axis];
                let (idx, gather_mode) = match mode {
                    TakeMode::Fill => (wrap_negative(&idx, n, true, loc), GatherScatterMode::FillOrDrop),
                    TakeMode::Clip => (idx, GatherScatterMode::Clip),
                    TakeMode::Wrap => {
                        // `lax._const(indices, n)`: a strongly typed scalar of the indices' dtype.
                        let n = Tensor::literal(remat_ir::LitValue::from_f64(idx.dtype(), n as f64));
                        let idx = crate::numpy::remainder_at((&idx).into(), n.into(), loc);
                        (idx, GatherScatterMode::PromiseInBounds)
                    }
                };
                gather_axis(&x, &idx, axis, gather_mode, fill, unique, loc)
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
        gather_axis(self, &idx, 0, GatherScatterMode::PromiseInBounds, None, false, loc)
    }
}

impl Tensor {
    /// `jnp.take_along_axis(x, idx, axis=axis)`: `out[..., j, ...] = x[..., idx[..., j,
    /// ...], ...]` along `axis`, for `idx` of `x`'s rank whose other axes broadcast against
    /// `x`'s (a size-1 axis of `idx` takes all of `x`'s, a size-1 axis of `x` stretches to
    /// `idx`'s). Negative indices count from the end, out-of-bounds ones give NaN.
    /// Recorded as JAX records it: `jit[name=take_along_axis]`, one `gather` whose equal
    /// axes are batching axes and whose broadcast ones are slices.
    #[track_caller]
    pub fn take_along_axis(&self, idx: &Tensor, axis: isize) -> Tensor {
        let loc = Location::caller();
        let placeholder = || Tensor::placeholder(remat_ir::Aval::new(self.dtype(), idx.shape().to_vec()));
        if !check_indices("take_along_axis", self, idx, loc) {
            return placeholder();
        }
        if idx.ndim() != self.ndim() {
            let message =
                format!("take_along_axis: indices {} and array {} must have the same rank", idx.aval(), self.aval());
            record_error(loc, message);
            return placeholder();
        }
        let Some(axes) = normalize_axes("take_along_axis", self, &[axis], loc) else {
            return placeholder();
        };
        let axis = axes[0];
        let mut arr_shape = self.shape().to_vec();
        arr_shape[axis] = 1;
        let out_shape = match crate::elementwise::broadcast_shapes(&[idx.shape(), &arr_shape]) {
            Ok(s) => s,
            Err(_) => {
                let message = format!(
                    "take_along_axis: indices {} do not broadcast against {} off axis {axis}",
                    idx.aval(),
                    self.aval()
                );
                record_error(loc, message);
                return Tensor::placeholder(remat_ir::Aval::new(self.dtype(), idx.shape().to_vec()));
            }
        };
        let Some(fill) = fill_value("take_along_axis", self, loc) else {
            return placeholder();
        };
        let axis_size = self.shape()[axis];
        library_jit(
            "take_along_axis",
            &[self.into(), idx.into()],
            |inner| {
                let [x, idx]: [Tensor; 2] = inner.try_into().expect("two inputs");
                if axis_size == 0 {
                    return crate::numpy::full_at(&out_shape, remat_ir::LitValue::from_f64(x.dtype(), 0.0), loc);
                }
                let idx = idx.to_type(DType::I32, false, loc);
                let idx = wrap_negative(&idx, axis_size, false, loc);
                let idx_shape = idx.shape().to_vec();
                // JAX's loop over the axes: `i` indexes the array, `new_i` the squeezed
                // array, `j` the gather indices.
                let mut gather_shape: Vec<usize> =
                    (0..idx_shape.len()).filter(|&i| i == axis || idx_shape[i] != 1).map(|i| out_shape[i]).collect();
                gather_shape.push(1);
                let indices = idx.reshape_at(&gather_shape, loc);
                let mut dn = GatherDimensionNumbers {
                    offset_dims: vec![],
                    collapsed_slice_dims: vec![],
                    start_index_map: vec![],
                    operand_batching_dims: vec![],
                    start_indices_batching_dims: vec![],
                };
                let (mut slice_sizes, mut squeezed) = (Vec::new(), Vec::new());
                let (mut new_i, mut j) = (0, 0);
                for i in 0..x.ndim() {
                    if i == axis {
                        slice_sizes.push(1);
                        dn.start_index_map.push(new_i);
                        dn.collapsed_slice_dims.push(new_i);
                        new_i += 1;
                        j += 1;
                    } else if idx_shape[i] == 1 {
                        dn.offset_dims.push(i);
                        slice_sizes.push(arr_shape[i]);
                        new_i += 1;
                    } else if arr_shape[i] == 1 {
                        squeezed.push(i);
                        j += 1;
                    } else {
                        slice_sizes.push(if arr_shape[i] == 0 { 0 } else { 1 });
                        dn.operand_batching_dims.push(new_i);
                        dn.start_indices_batching_dims.push(j);
                        new_i += 1;
                        j += 1;
                    }
                }
                let x = x.squeeze_at(&squeezed, loc);
                let prim = Primitive::Gather {
                    dimension_numbers: dn,
                    fill_value: Some(fill),
                    indices_are_sorted: false,
                    mode: GatherScatterMode::FillOrDrop,
                    slice_sizes,
                    unique_indices: false,
                };
                bind(prim, &[(&x).into(), indices.into()], x.is_weak(), loc).remove(0)
            },
            loc,
        )
    }

    /// `x.at[idx]` for an integer tensor `idx` (rows of axis 0): finish with
    /// [`AtIndex::set`], [`AtIndex::add`] or [`AtIndex::get`].
    pub fn at<'a>(&'a self, idx: &'a Tensor) -> AtIndex<'a> {
        AtIndex { x: self, idx }
    }
}

/// `x.at[idx]`, from [`Tensor::at`]: an out-of-place update of the rows of `x` at the
/// integer indices `idx` (negative ones count from the end). Updates at out-of-bounds
/// indices are dropped (JAX's default mode for `set`/`add`).
#[derive(Debug)]
pub struct AtIndex<'a> {
    x: &'a Tensor,
    idx: &'a Tensor,
}

thread_local! {
    /// JAX's cached `update_jaxpr` of `scatter-add` (and `-mul`, `-min`, `-max`) per
    /// dtype: one object, so that a program with several scatters shares it (and prints it
    /// once, hoisted).
    static UPDATE_JAXPRS: RefCell<HashMap<(ScatterOp, DType), Arc<Jaxpr>>> = RefCell::new(HashMap::new());
}

/// `operand.at[indices].op(updates)` over rows of axis 0, as JAX's `.at[]` and
/// `segment_*` record it: a scatter whose `indices` (`[..., 1]`) pick rows of `operand`
/// and whose `updates` are `indices`' batch shape followed by a row's shape; out-of-range
/// rows dropped (`FILL_OR_DROP`).
pub(crate) fn scatter_rows(
    op: ScatterOp,
    operand: Tensor,
    indices: Tensor,
    updates: Tensor,
    weak: bool,
    loc: &'static Location<'static>,
) -> Tensor {
    let batch = indices.ndim() - 1;
    let prim = Primitive::Scatter {
        op,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: (batch..batch + operand.ndim() - 1).collect(),
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            operand_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        },
        indices_are_sorted: false,
        mode: GatherScatterMode::FillOrDrop,
        unique_indices: false,
        update_jaxpr: update_jaxpr(op, operand.dtype()),
    };
    let operands: [Operand; 3] = [operand.into(), indices.into(), updates.into()];
    bind(prim, &operands, weak, loc).remove(0)
}

/// The `update_jaxpr` JAX gives a scatter combining with `op` (`None` for `scatter`,
/// which replaces).
pub(crate) fn update_jaxpr(op: ScatterOp, dtype: DType) -> Option<Arc<Jaxpr>> {
    let name = match op {
        ScatterOp::Set => return None,
        ScatterOp::Add => "add",
        ScatterOp::Sub => "sub",
        ScatterOp::Mul => "mul",
        ScatterOp::Min => "min",
        ScatterOp::Max => "max",
    };
    let jaxpr = UPDATE_JAXPRS.with(|m| {
        m.borrow_mut()
            .entry((op, dtype))
            .or_insert_with(|| {
                let t = dtype;
                let text = format!("{{ lambda ; a:{t}[] b:{t}[]. let c:{t}[] = {name} a b in (c,) }}");
                Arc::new(remat_ir::parse_jaxpr(&text, "scatter update_jaxpr").expect("a valid jaxpr"))
            })
            .clone()
    });
    Some(jaxpr)
}

impl AtIndex<'_> {
    /// `x.at[idx].get()`: the same as `x[idx]` ([`Tensor::index_array`]).
    #[track_caller]
    pub fn get(&self) -> Tensor {
        let loc = Location::caller();
        if !check_indices("at", self.x, self.idx, loc) || !self.has_axes(loc) {
            return Tensor::placeholder(self.x.aval().clone());
        }
        let idx = wrap_negative(self.idx, self.x.shape()[0], false, loc);
        gather_axis(self.x, &idx, 0, GatherScatterMode::PromiseInBounds, None, false, loc)
    }

    /// `x.at[idx].set(v)`: `x` with the rows at `idx` replaced by `v` (converted to `x`'s
    /// dtype and broadcast to the rows' shape); `scatter`.
    #[track_caller]
    pub fn set(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Set, v.into(), Location::caller())
    }

    /// `x.at[idx].add(v)`: `x` with `v` added to the rows at `idx` (repeated indices add
    /// up); `scatter-add`.
    #[track_caller]
    pub fn add(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Add, v.into(), Location::caller())
    }

    /// `x.at[idx].subtract(v)`: `x` with `v` subtracted from the rows at `idx` (repeated
    /// indices subtract each); `scatter-sub`.
    #[track_caller]
    pub fn subtract(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Sub, v.into(), Location::caller())
    }

    /// `x.at[idx].mul(v)`: `x` with the rows at `idx` multiplied by `v`; `scatter-mul`.
    #[track_caller]
    pub fn mul(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Mul, v.into(), Location::caller())
    }

    /// `x.at[idx].min(v)`: `x` with the rows at `idx` the minimum of theirs and `v`'s;
    /// `scatter-min`.
    #[track_caller]
    pub fn min(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Min, v.into(), Location::caller())
    }

    /// `x.at[idx].max(v)`: `x` with the rows at `idx` the maximum of theirs and `v`'s;
    /// `scatter-max`.
    #[track_caller]
    pub fn max(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Max, v.into(), Location::caller())
    }

    fn has_axes(&self, loc: &'static Location<'static>) -> bool {
        if self.x.ndim() == 0 {
            record_error(loc, format!("at: cannot index {}, which has no axes", self.x.aval()));
            return false;
        }
        true
    }

    pub(crate) fn scatter(&self, op: ScatterOp, v: Arg, loc: &'static Location<'static>) -> Tensor {
        let (x, idx) = (self.x, self.idx);
        if !check_indices("at", x, idx, loc) || !self.has_axes(loc) {
            return Tensor::placeholder(x.aval().clone());
        }
        let r = idx.ndim();
        let rows: Vec<usize> = idx.shape().iter().chain(&x.shape()[1..]).copied().collect();
        // A Rust scalar becomes one `broadcast_in_dim` of a literal, after the indices.
        let v_shape: &[usize] = match &v {
            Arg::Tensor(t) => t.shape(),
            Arg::Scalar(..) => &[],
        };
        if crate::elementwise::broadcast_shapes(&[v_shape, &rows]).ok().as_deref() != Some(&rows[..]) {
            let Arg::Tensor(t) = &v else { unreachable!("a scalar broadcasts") };
            let message =
                format!("at[{}]: updates {} do not broadcast to the rows' shape {rows:?}", idx.aval(), t.aval());
            record_error(loc, message);
            return Tensor::placeholder(x.aval().clone());
        }
        let idx = wrap_negative(idx, x.shape()[0], false, loc);
        let indices = idx.expand_dims_at(&[r], loc);
        let v = match v {
            Arg::Tensor(t) => t.to_type(x.dtype(), x.is_weak(), loc).broadcast_to_at(&rows, loc),
            Arg::Scalar(value, _) => crate::numpy::full_at(&rows, remat_ir::LitValue::from_f64(x.dtype(), value), loc),
        };
        scatter_rows(op, x.clone(), indices, v, x.is_weak(), loc)
    }
}
