//! NumPy advanced indexing: an index whose entries mix integer arrays with integers,
//! slices, `None` and `...` (`x[:, idx]`, `x[i, j]`, `x[1:3, idx]`, `x[i, :, j]`), and the
//! same for `x.at[...]`. Recorded as JAX 0.10.2's `_rewriting_take` and `_scatter_update`
//! record it (`_index_to_gather` in `jax/_src/numpy/indexing.py`):
//!
//! ```text
//! negative entries of each index array wrapped (lt, add, select_n), in index order
//! the index arrays (and integers) broadcast together, converted to i32
//! one i32 index vector per gathered axis (slice starts broadcast), concatenated
//! gather (PROMISE_IN_BOUNDS) or scatter / scatter-add / -mul / -min / -max (FILL_OR_DROP)
//! ```
//!
//! The broadcast index arrays' axes replace the indexed axes where the arrays are
//! adjacent in the index, and come first otherwise (NumPy's rule). A slice with a step other
//! than 1 is gathered element by element (`start + step * iota`; a negative step reverses
//! those indices and the result, `rev`).

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::panic::Location;

use remat_ir::{
    BinaryOp, DType, GatherDimensionNumbers, GatherScatterMode, LitValue, Primitive, ScatterDimensionNumbers, ScatterOp,
};

use super::index::Idx;
use super::take::{update_jaxpr, wrap_negative};
use crate::elementwise::{binary_at, broadcast_shapes, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error, Operand};

/// One entry of a NumPy index that may be an integer array: a static entry ([`Idx`]:
/// an integer, a range, [`NEW_AXIS`](crate::NEW_AXIS), [`ELLIPSIS`](crate::ELLIPSIS)) or
/// an integer tensor. Build them with `From`, usually through [`ix!`](crate::ix!).
#[derive(Clone, Copy, Debug)]
pub enum Ix<'a> {
    /// A static entry.
    Static(Idx),
    /// An integer array (NumPy's advanced index).
    Array(&'a Tensor),
}

impl From<Idx> for Ix<'_> {
    fn from(i: Idx) -> Self {
        Ix::Static(i)
    }
}

impl<'a> From<&'a Tensor> for Ix<'a> {
    fn from(t: &'a Tensor) -> Self {
        Ix::Array(t)
    }
}

impl From<RangeFull> for Ix<'_> {
    fn from(r: RangeFull) -> Self {
        Ix::Static(r.into())
    }
}

macro_rules! ix_from_static {
    ($($t:ty),*) => {$(
        impl From<$t> for Ix<'_> {
            fn from(i: $t) -> Self { Ix::Static(i.into()) }
        }
        impl From<Range<$t>> for Ix<'_> {
            fn from(r: Range<$t>) -> Self { Ix::Static(r.into()) }
        }
        impl From<RangeInclusive<$t>> for Ix<'_> {
            fn from(r: RangeInclusive<$t>) -> Self { Ix::Static(r.into()) }
        }
        impl From<RangeFrom<$t>> for Ix<'_> {
            fn from(r: RangeFrom<$t>) -> Self { Ix::Static(r.into()) }
        }
        impl From<RangeTo<$t>> for Ix<'_> {
            fn from(r: RangeTo<$t>) -> Self { Ix::Static(r.into()) }
        }
        impl From<RangeToInclusive<$t>> for Ix<'_> {
            fn from(r: RangeToInclusive<$t>) -> Self { Ix::Static(r.into()) }
        }
    )*};
}
ix_from_static!(i32, i64, isize, usize);

/// A NumPy index with integer arrays as a slice of [`Ix`]: `ix![.., &i]` is `[:, i]`,
/// `ix![&i, 1..3, &j]` is `[i, 1:3, j]`.
///
/// ```
/// use remat_ir::{Aval, DType};
/// use remat_trace::{ix, make_jaxpr, Tensor};
///
/// let f = |(x, i): (Tensor, Tensor)| x.index_with(ix![.., &i]);
/// let avals = (Aval::new(DType::F32, vec![4, 5]), Aval::new(DType::I32, vec![3]));
/// let traced = make_jaxpr(f, &avals).unwrap();
/// assert_eq!(traced.jaxpr.jaxpr.out_avals()[0].shape, [4, 3]);
/// ```
#[macro_export]
macro_rules! ix {
    ($($e:expr),* $(,)?) => {
        &[$($crate::Ix::from($e)),*]
    };
}

/// One entry after the ellipsis is expanded and the integers normalized.
#[derive(Clone)]
enum Entry {
    /// An integer array, its negative entries wrapped (or a static integer, as an
    /// advanced index of rank 0).
    Advanced(Advanced),
    /// `start:start+size` (step 1).
    Slice {
        start: usize,
        size: usize,
    },
    /// `size` elements from `start` by `step` (not 1; Python's `slice.indices`).
    Strided {
        start: i64,
        step: i64,
        size: usize,
    },
    NewAxis,
}

#[derive(Clone)]
enum Advanced {
    Array(Tensor),
    Int(i64),
}

/// A part of the gather indices: a tensor whose axes start at `start_dim` of the
/// indices' batch shape, or a slice's start (a scalar).
enum Part {
    Tensor(Tensor, usize),
    Start(usize, usize),
}

/// What JAX's `_GatherIndexer` holds: the gather (or scatter) of `x` it amounts to.
struct Gather {
    /// The result's shape before `None` axes are inserted (the scatter's updates).
    slice_shape: Vec<usize>,
    slice_sizes: Vec<usize>,
    indices: Tensor,
    offset_dims: Vec<usize>,
    collapsed_slice_dims: Vec<usize>,
    start_index_map: Vec<usize>,
    newaxis_dims: Vec<usize>,
    /// Axes of the gathered values to reverse (slices with a negative step).
    reversed_y_dims: Vec<usize>,
}

/// Python's `slice(start, stop, step).indices(size)` (`step` not 0) and the slice's length
/// (JAX's `canonicalize_slice`).
fn slice_bounds(start: Option<i64>, stop: Option<i64>, step: i64, size: usize) -> (i64, usize) {
    let n = size as i64;
    let (lo, hi) = if step < 0 { (-1, n - 1) } else { (0, n) };
    let clamp = |v: Option<i64>, default: i64| match v {
        None => default,
        Some(v) if v < 0 => (v + n).max(lo),
        Some(v) => v.min(hi),
    };
    let (b, e) = if step < 0 { (clamp(start, n - 1), clamp(stop, -1)) } else { (clamp(start, 0), clamp(stop, n)) };
    let len = if step > 0 { (e - b + step - 1) / step } else { (b - e + (-step) - 1) / (-step) };
    (b, len.max(0) as usize)
}

/// The entries of `index` into `shape` (ellipsis expanded, trailing full slices added,
/// integers normalized, arrays' negative entries wrapped in index order), the positions
/// of the advanced entries and whether they are adjacent in `index` as written.
fn parse(
    shape: &[usize],
    index: &[Ix],
    loc: &'static Location<'static>,
) -> Result<(Vec<Entry>, Vec<usize>, bool), String> {
    let ellipses = index.iter().filter(|i| matches!(i, Ix::Static(Idx::Ellipsis))).count();
    if ellipses > 1 {
        return Err("an index can only have a single ellipsis ('...')".into());
    }
    let consumed = index.iter().filter(|i| !matches!(i, Ix::Static(Idx::Ellipsis | Idx::NewAxis))).count();
    if consumed > shape.len() {
        return Err(format!("too many indices: {consumed} for {} axes", shape.len()));
    }
    // JAX decides adjacency on the index as written (before the ellipsis is expanded).
    let written: Vec<usize> = index
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Ix::Array(_) | Ix::Static(Idx::At(_))))
        .map(|(k, _)| k)
        .collect();
    let contiguous = written.windows(2).all(|w| w[1] == w[0] + 1);
    if !index.iter().any(|i| matches!(i, Ix::Array(t) if t.ndim() > 0)) {
        return Err("no index array of rank 1 or more: use `index` (static) or `dynamic_slice` (rank 0)".into());
    }
    for i in index {
        if let Ix::Array(t) = i {
            if !t.dtype().is_integer() {
                return Err(format!("index arrays must be integers, found {}", t.aval()));
            }
        }
    }
    let full = Ix::Static(Idx::slice(None, None, 1));
    let mut expanded: Vec<Ix> = Vec::with_capacity(index.len() + shape.len());
    for &i in index {
        if matches!(i, Ix::Static(Idx::Ellipsis)) {
            expanded.extend(std::iter::repeat_n(full, shape.len() - consumed));
        } else {
            expanded.push(i);
        }
    }
    if ellipses == 0 {
        expanded.extend(std::iter::repeat_n(full, shape.len() - consumed));
    }
    let mut entries = Vec::with_capacity(expanded.len());
    let mut advanced_pos = Vec::new();
    let mut axis = 0;
    for (pos, i) in expanded.into_iter().enumerate() {
        let entry = match i {
            Ix::Static(Idx::NewAxis) => Entry::NewAxis,
            Ix::Static(Idx::At(k)) => {
                let size = shape[axis] as i64;
                if k < -size || k >= size {
                    return Err(format!("index {k} is out of bounds for axis {axis} with size {size}"));
                }
                advanced_pos.push(pos);
                Entry::Advanced(Advanced::Int(if k < 0 { k + size } else { k }))
            }
            Ix::Static(Idx::Slice { start, stop, step }) => {
                if step == 0 {
                    return Err("slice step cannot be zero".into());
                }
                let (start, size) = slice_bounds(start, stop, step, shape[axis]);
                if step == 1 {
                    Entry::Slice { start: start as usize, size }
                } else {
                    Entry::Strided { start, step, size }
                }
            }
            Ix::Static(Idx::Ellipsis) => unreachable!("expanded above"),
            Ix::Array(t) => {
                advanced_pos.push(pos);
                let t = if t.dtype().is_unsigned() { t.clone() } else { wrap_negative(t, shape[axis], false, loc) };
                Entry::Advanced(Advanced::Array(t))
            }
        };
        if !matches!(entry, Entry::NewAxis) {
            axis += 1;
        }
        entries.push(entry);
    }
    Ok((entries, advanced_pos, contiguous))
}

/// JAX's `_index_to_gather`: records the index arithmetic and says what to gather.
fn index_to_gather(shape: &[usize], index: &[Ix], loc: &'static Location<'static>) -> Result<Gather, String> {
    let (entries, advanced_pos, contiguous) = parse(shape, index, loc)?;
    let advanced: Vec<Advanced> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Advanced(a) => Some(a.clone()),
            Entry::Slice { .. } | Entry::Strided { .. } | Entry::NewAxis => None,
        })
        .collect();
    // Each advanced entry's axis of `x` (`None` entries do not count).
    let x_advanced_axes: Vec<usize> = entries
        .iter()
        .filter(|e| !matches!(e, Entry::NewAxis))
        .enumerate()
        .filter(|(_, e)| matches!(e, Entry::Advanced(_)))
        .map(|(j, _)| j)
        .collect();
    let (mut x_axis, mut y_axis, mut collapsed_y_axis) = (0, 0, 0);
    let (mut offset_dims, mut collapsed_slice_dims, mut start_index_map) = (vec![], vec![], vec![]);
    let (mut parts, mut indices_shape): (Vec<Part>, Vec<usize>) = (vec![], vec![]);
    let (mut slice_shape, mut newaxis_dims, mut slice_sizes) = (vec![], vec![], vec![]);
    let mut reversed_y_dims = vec![];
    for (pos, entry) in entries.iter().enumerate() {
        let first_advanced = if contiguous { advanced_pos[0] } else { 0 };
        if pos == first_advanced {
            let arrays = broadcast_advanced(&advanced, loc)?;
            let start_dim = indices_shape.len();
            let batch = arrays[0].shape().to_vec();
            parts.extend(arrays.into_iter().map(|a| Part::Tensor(a, start_dim)));
            indices_shape.extend(&batch);
            start_index_map.extend(&x_advanced_axes);
            collapsed_slice_dims.extend(&x_advanced_axes);
            slice_shape.extend(&batch);
            y_axis += batch.len();
            collapsed_y_axis += batch.len();
        }
        match *entry {
            Entry::Advanced(_) => {
                x_axis += 1;
                slice_sizes.push(1);
            }
            Entry::NewAxis => {
                slice_shape.push(1);
                newaxis_dims.push(y_axis);
                y_axis += 1;
            }
            Entry::Slice { start, size } => {
                slice_shape.push(size);
                if size != shape[x_axis] {
                    parts.push(Part::Start(start, indices_shape.len()));
                    start_index_map.push(x_axis);
                }
                slice_sizes.push(size);
                offset_dims.push(collapsed_y_axis);
                collapsed_y_axis += 1;
                y_axis += 1;
                x_axis += 1;
            }
            Entry::Strided { start, step, size } => {
                slice_shape.push(size);
                // `array(start) + array(step) * iota(size)`, strongly typed `i32`.
                let lit = |v: i64| Tensor::literal(LitValue::I32(v as i32));
                let iota = Primitive::Iota { dtype: DType::I32, shape: vec![size], dimension: 0 };
                let iota = bind(iota, &[], false, loc).remove(0);
                let steps = binary_at(BinaryOp::Mul, lit(step).into(), iota.into(), loc);
                let mut idx = binary_at(BinaryOp::Add, lit(start).into(), steps.into(), loc);
                if step < 0 {
                    reversed_y_dims.push(collapsed_y_axis);
                    idx = idx.apply_at(Primitive::Rev { dimensions: vec![0] }, loc);
                }
                slice_sizes.push(1);
                parts.push(Part::Tensor(idx, indices_shape.len()));
                start_index_map.push(x_axis);
                indices_shape.push(size);
                collapsed_slice_dims.push(x_axis);
                collapsed_y_axis += 1;
                y_axis += 1;
                x_axis += 1;
            }
        }
    }
    let indices = match parts.as_slice() {
        [Part::Tensor(g, _)] => g.expand_dims_at(&[g.ndim()], loc),
        _ => {
            let last = indices_shape.len();
            indices_shape.push(1);
            let pieces: Vec<Operand> = parts
                .iter()
                .map(|p| {
                    let (operand, rank, at, weak) = match p {
                        Part::Tensor(g, at) => (Operand::Tensor(g.clone()), g.ndim(), *at, g.is_weak()),
                        Part::Start(s, at) => (Operand::Literal(LitValue::I32(*s as i32)), 0, *at, false),
                    };
                    let prim = Primitive::BroadcastInDim {
                        shape: indices_shape.clone(),
                        broadcast_dimensions: (at..at + rank).collect(),
                    };
                    Operand::Tensor(bind(prim, &[operand], weak, loc).remove(0))
                })
                .collect();
            bind(Primitive::Concatenate { dimension: last }, &pieces, false, loc).remove(0)
        }
    };
    collapsed_slice_dims.sort_unstable();
    Ok(Gather {
        slice_shape,
        slice_sizes,
        indices,
        offset_dims,
        collapsed_slice_dims,
        start_index_map,
        newaxis_dims,
        reversed_y_dims,
    })
}

/// JAX's `_broadcast_arrays` of the advanced entries, then each converted to `i32` (a
/// static integer is a weakly typed scalar until then).
fn broadcast_advanced(advanced: &[Advanced], loc: &'static Location<'static>) -> Result<Vec<Tensor>, String> {
    let shapes: Vec<&[usize]> = advanced
        .iter()
        .map(|a| match a {
            Advanced::Array(t) => t.shape(),
            Advanced::Int(_) => &[],
        })
        .collect();
    let shape = broadcast_shapes(&shapes)
        .map_err(|_| format!("the index arrays of shapes {shapes:?} do not broadcast together"))?;
    let all_equal = shapes.iter().all(|s| *s == shapes[0]);
    let mut out = Vec::with_capacity(advanced.len());
    for a in advanced {
        let t = match a {
            Advanced::Array(t) if all_equal => t.clone(),
            Advanced::Array(t) => t.broadcast_to_at(&shape, loc),
            Advanced::Int(k) => {
                let prim = Primitive::BroadcastInDim { shape: shape.clone(), broadcast_dimensions: vec![] };
                bind(prim, &[Operand::Literal(LitValue::I32(*k as i32))], true, loc).remove(0)
            }
        };
        out.push(t.to_type(DType::I32, false, loc));
    }
    Ok(out)
}

impl Tensor {
    /// NumPy indexing with integer arrays among the entries (`x[:, idx]`, `x[i, j]`,
    /// `x[1:3, idx]`, `x[i, :, j]`; see [`ix!`](crate::ix!)): the index arrays (and
    /// integers) broadcast together, and their shape replaces the axes they index (in
    /// place when they are adjacent, in front otherwise); slices (any step), `None` and
    /// `...` as in [`Tensor::index`]. Negative indices count from the end; as in JAX,
    /// indices are promised in bounds (`PROMISE_IN_BOUNDS`: an out-of-bounds one is
    /// clamped). One `gather`, recorded as JAX records it.
    #[track_caller]
    pub fn index_with(&self, index: &[Ix]) -> Tensor {
        self.index_with_at(index, Location::caller())
    }

    fn index_with_at(&self, index: &[Ix], loc: &'static Location<'static>) -> Tensor {
        let g = match index_to_gather(self.shape(), index, loc) {
            Ok(g) => g,
            Err(message) => {
                record_error(loc, format!("index into {}: {message}", self.aval()));
                return Tensor::placeholder(self.aval().clone());
            }
        };
        if g.slice_shape.contains(&0) {
            return super::full_at(&g.slice_shape, LitValue::from_f64(self.dtype(), 0.0), loc);
        }
        let prim = Primitive::Gather {
            dimension_numbers: GatherDimensionNumbers {
                offset_dims: g.offset_dims,
                collapsed_slice_dims: g.collapsed_slice_dims,
                start_index_map: g.start_index_map,
                operand_batching_dims: vec![],
                start_indices_batching_dims: vec![],
            },
            fill_value: None,
            indices_are_sorted: false,
            mode: GatherScatterMode::PromiseInBounds,
            slice_sizes: g.slice_sizes,
            unique_indices: false,
        };
        let mut y = bind(prim, &[self.into(), g.indices.into()], self.is_weak(), loc).remove(0);
        if !g.reversed_y_dims.is_empty() {
            y = y.apply_at(Primitive::Rev { dimensions: g.reversed_y_dims }, loc);
        }
        if g.newaxis_dims.is_empty() {
            y
        } else {
            y.expand_dims_at(&g.newaxis_dims, loc)
        }
    }

    /// `x.at[...]` with integer arrays among the entries (see [`Tensor::index_with`]):
    /// finish with [`AtIndices::get`], [`AtIndices::set`], [`AtIndices::add`],
    /// [`AtIndices::mul`], [`AtIndices::min`] or [`AtIndices::max`].
    pub fn at_with<'a>(&'a self, index: &'a [Ix<'a>]) -> AtIndices<'a> {
        AtIndices { x: self, index }
    }
}

/// `x.at[...]` with integer arrays, from [`Tensor::at_with`]: an out-of-place update of
/// the elements [`Tensor::index_with`] gathers. Updates at out-of-bounds indices are
/// dropped (JAX's default mode for scatters); repeated indices combine (`add`, `mul`,
/// `min`, `max`) or one of them wins (`set`).
#[derive(Debug)]
pub struct AtIndices<'a> {
    x: &'a Tensor,
    index: &'a [Ix<'a>],
}

impl AtIndices<'_> {
    /// `x.at[...].get()`: the same as [`Tensor::index_with`].
    #[track_caller]
    pub fn get(&self) -> Tensor {
        self.x.index_with_at(self.index, Location::caller())
    }

    /// `x.at[...].set(v)`: `scatter`.
    #[track_caller]
    pub fn set(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Set, v.into(), Location::caller())
    }

    /// `x.at[...].add(v)`: `scatter-add`.
    #[track_caller]
    pub fn add(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Add, v.into(), Location::caller())
    }

    /// `x.at[...].subtract(v)`: `scatter-sub`.
    #[track_caller]
    pub fn subtract(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Sub, v.into(), Location::caller())
    }

    /// `x.at[...].mul(v)`: `scatter-mul`.
    #[track_caller]
    pub fn mul(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Mul, v.into(), Location::caller())
    }

    /// `x.at[...].min(v)`: `scatter-min`.
    #[track_caller]
    pub fn min(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Min, v.into(), Location::caller())
    }

    /// `x.at[...].max(v)`: `scatter-max`.
    #[track_caller]
    pub fn max(&self, v: impl Into<Arg>) -> Tensor {
        self.scatter(ScatterOp::Max, v.into(), Location::caller())
    }

    /// JAX's `_scatter_impl`: the indices first, then `v` converted to `x`'s dtype,
    /// broadcast to the gathered shape and squeezed of its `None` axes.
    fn scatter(&self, op: ScatterOp, v: Arg, loc: &'static Location<'static>) -> Tensor {
        let x = self.x;
        let placeholder = || Tensor::placeholder(x.aval().clone());
        let g = match index_to_gather(x.shape(), self.index, loc) {
            Ok(g) => g,
            Err(message) => {
                record_error(loc, format!("at[...] into {}: {message}", x.aval()));
                return placeholder();
            }
        };
        if g.slice_shape.contains(&0) {
            return x.clone();
        }
        let y = match v {
            Arg::Tensor(t) => {
                if broadcast_shapes(&[t.shape(), &g.slice_shape]).ok().as_deref() != Some(&g.slice_shape[..]) {
                    let message = format!("at[...]: updates {} do not broadcast to {:?}", t.aval(), g.slice_shape);
                    record_error(loc, message);
                    return placeholder();
                }
                t.to_type(x.dtype(), x.is_weak(), loc).broadcast_to_at(&g.slice_shape, loc)
            }
            Arg::Scalar(value, _) => super::full_at(&g.slice_shape, LitValue::from_f64(x.dtype(), value), loc),
        };
        let mut y = if g.newaxis_dims.is_empty() { y } else { y.squeeze_at(&g.newaxis_dims, loc) };
        if !g.reversed_y_dims.is_empty() {
            y = y.apply_at(Primitive::Rev { dimensions: g.reversed_y_dims }, loc);
        }
        let prim = Primitive::Scatter {
            op,
            dimension_numbers: ScatterDimensionNumbers {
                update_window_dims: g.offset_dims,
                inserted_window_dims: g.collapsed_slice_dims,
                scatter_dims_to_operand_dims: g.start_index_map,
                operand_batching_dims: vec![],
                scatter_indices_batching_dims: vec![],
            },
            indices_are_sorted: false,
            mode: GatherScatterMode::FillOrDrop,
            unique_indices: false,
            update_jaxpr: update_jaxpr(op, x.dtype()),
        };
        let operands: [Operand; 3] = [x.into(), g.indices.into(), y.into()];
        bind(prim, &operands, x.is_weak(), loc).remove(0)
    }
}
