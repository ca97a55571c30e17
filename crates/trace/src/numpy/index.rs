//! NumPy basic indexing with static indices: `x.index(idx![1.., NEW_AXIS, 2])` is
//! `x[1:, None, 2]`. Recorded as JAX records it: one `slice` for all slices and integers,
//! a `squeeze` of the integer-indexed axes, then a `broadcast_in_dim` for new axes. (Traced
//! indices go through [`Tensor::dynamic_slice`].)

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};
use std::panic::Location;

use crate::tensor::Tensor;
use crate::trace::record_error;

/// One entry of a NumPy index. Build them with `From` (integers, ranges, `..`) or the
/// constants [`NEW_AXIS`] and [`ELLIPSIS`], usually through the [`idx!`](crate::idx!)
/// macro.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idx {
    /// `x[i]`: one element of an axis, which disappears (negative counts from the end).
    At(i64),
    /// `x[start:stop:step]`, Python's slice (bounds clamp; negative ones count from the
    /// end). A negative step walks backwards (`Idx::slice(None, None, -1)` is `x[::-1]`):
    /// recorded as JAX records it, a `slice` with the positive step, then `rev`.
    Slice {
        /// First index (default 0).
        start: Option<i64>,
        /// One past the last index (default: the axis size).
        stop: Option<i64>,
        /// Step (default 1).
        step: i64,
    },
    /// `None` / `np.newaxis`: a new axis of size 1.
    NewAxis,
    /// `...`: as many full slices as needed.
    Ellipsis,
}

/// `None` in a NumPy index: a new size-1 axis.
pub const NEW_AXIS: Idx = Idx::NewAxis;
/// `...` in a NumPy index.
pub const ELLIPSIS: Idx = Idx::Ellipsis;

impl Idx {
    /// `start:stop:step`.
    pub fn slice(start: Option<i64>, stop: Option<i64>, step: i64) -> Idx {
        Idx::Slice { start, stop, step }
    }
}

macro_rules! idx_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Idx {
            fn from(i: $t) -> Idx {
                Idx::At(i as i64)
            }
        }
        impl From<Range<$t>> for Idx {
            fn from(r: Range<$t>) -> Idx {
                Idx::slice(Some(r.start as i64), Some(r.end as i64), 1)
            }
        }
        impl From<RangeInclusive<$t>> for Idx {
            fn from(r: RangeInclusive<$t>) -> Idx {
                Idx::slice(Some(*r.start() as i64), Some(*r.end() as i64 + 1), 1)
            }
        }
        impl From<RangeFrom<$t>> for Idx {
            fn from(r: RangeFrom<$t>) -> Idx {
                Idx::slice(Some(r.start as i64), None, 1)
            }
        }
        impl From<RangeTo<$t>> for Idx {
            fn from(r: RangeTo<$t>) -> Idx {
                Idx::slice(None, Some(r.end as i64), 1)
            }
        }
        impl From<RangeToInclusive<$t>> for Idx {
            fn from(r: RangeToInclusive<$t>) -> Idx {
                Idx::slice(None, Some(r.end as i64 + 1), 1)
            }
        }
    )*};
}
idx_from_int!(i32, i64, isize, usize);

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Idx {
        Idx::slice(None, None, 1)
    }
}

/// A NumPy index as a slice of [`Idx`]: `idx![1..4]` is `[1:4]`, `idx![.., NEW_AXIS]` is
/// `[:, None]`, `idx![-1]` is `[-1]`.
///
/// ```
/// use remat_ir::{Aval, DType};
/// use remat_trace::{idx, make_jaxpr, Tensor, NEW_AXIS};
///
/// let f = |x: Tensor| x.index(idx![1.., NEW_AXIS, 2]);
/// let traced = make_jaxpr(f, &Aval::new(DType::F32, vec![3, 4])).unwrap();
/// assert_eq!(traced.jaxpr.jaxpr.out_avals()[0].shape, [2, 1]);
/// ```
#[macro_export]
macro_rules! idx {
    ($($e:expr),* $(,)?) => {
        &[$($crate::Idx::from($e)),*]
    };
}

/// The static slice an index amounts to (JAX's `_StaticSliceIndexer`).
struct StaticSlice {
    start: Vec<usize>,
    limit: Vec<usize>,
    strides: Vec<usize>,
    squeeze: Vec<usize>,
    new_axes: Vec<usize>,
    /// Axes sliced with a negative step, reversed after the slice.
    rev: Vec<usize>,
}

fn to_static_slice(shape: &[usize], index: &[Idx]) -> Result<StaticSlice, String> {
    let ellipses = index.iter().filter(|i| **i == Idx::Ellipsis).count();
    if ellipses > 1 {
        return Err("an index can only have a single ellipsis ('...')".into());
    }
    let consumed = index.iter().filter(|i| matches!(i, Idx::At(_) | Idx::Slice { .. })).count();
    if consumed > shape.len() {
        return Err(format!("too many indices: {consumed} for {} axes", shape.len()));
    }
    // Expand the ellipsis (or pad the end) with full slices.
    let full = Idx::slice(None, None, 1);
    let mut expanded = Vec::with_capacity(index.len() + shape.len());
    for i in index {
        if *i == Idx::Ellipsis {
            expanded.extend(std::iter::repeat_n(full, shape.len() - consumed));
        } else {
            expanded.push(*i);
        }
    }
    if ellipses == 0 {
        expanded.extend(std::iter::repeat_n(full, shape.len() - consumed));
    }
    let mut s =
        StaticSlice { start: vec![], limit: vec![], strides: vec![], squeeze: vec![], new_axes: vec![], rev: vec![] };
    let mut axis = 0;
    for i in expanded {
        match i {
            Idx::NewAxis => s.new_axes.push(s.start.len() - s.squeeze.len() + s.new_axes.len()),
            Idx::At(k) => {
                let size = shape[axis] as i64;
                if k < -size || k >= size {
                    return Err(format!("index {k} is out of bounds for axis {axis} with size {size}"));
                }
                let k = if k < 0 { k + size } else { k } as usize;
                s.start.push(k);
                s.limit.push(k + 1);
                s.strides.push(1);
                s.squeeze.push(axis);
                axis += 1;
            }
            Idx::Slice { start, stop, step } => {
                if step == 0 {
                    return Err("slice step cannot be zero".into());
                }
                let size = shape[axis] as i64;
                if step < 0 {
                    // Python's slice.indices for a negative step, then the same elements
                    // in increasing order: the lowest one up to `start`.
                    let clamp = |v: Option<i64>, default: i64| match v {
                        None => default,
                        Some(v) if v < 0 => (v + size).max(-1),
                        Some(v) => v.min(size - 1),
                    };
                    let (b, e) = (clamp(start, size - 1), clamp(stop, -1));
                    let n = if b > e { (b - e - 1) / -step + 1 } else { 0 };
                    let (lo, hi) = if n > 0 { (b + (n - 1) * step, b + 1) } else { (0, 0) };
                    s.start.push(lo as usize);
                    s.limit.push(hi as usize);
                    s.strides.push((-step) as usize);
                    s.rev.push(axis);
                    axis += 1;
                    continue;
                }
                // Python's slice.indices for a positive step.
                let clamp = |v: Option<i64>, default: i64| match v {
                    None => default,
                    Some(v) if v < 0 => (v + size).max(0),
                    Some(v) => v.min(size),
                };
                let (b, e) = (clamp(start, 0), clamp(stop, size));
                s.start.push(b as usize);
                s.limit.push(e.max(b) as usize);
                s.strides.push(step as usize);
                axis += 1;
            }
            Idx::Ellipsis => unreachable!("expanded above"),
        }
    }
    Ok(s)
}

impl Tensor {
    /// NumPy basic indexing, `x[...]`, with static indices (see [`idx!`](crate::idx!)):
    /// integers pick an element (the axis disappears), ranges slice, [`NEW_AXIS`] inserts
    /// a size-1 axis and [`ELLIPSIS`] stands for the remaining axes. An out-of-bounds
    /// integer is an error; slice bounds clamp, as in Python.
    #[track_caller]
    pub fn index(&self, index: &[Idx]) -> Tensor {
        let loc = Location::caller();
        let s = match to_static_slice(self.shape(), index) {
            Ok(s) => s,
            Err(message) => {
                record_error(loc, format!("index {index:?} into {}: {message}", self.aval()));
                return Tensor::placeholder(self.aval().clone());
            }
        };
        let trivial = s.start.iter().all(|&b| b == 0) && s.limit == self.shape() && s.strides.iter().all(|&k| k == 1);
        let mut x = if trivial { self.clone() } else { self.slice_strided_at(&s, loc) };
        if !s.rev.is_empty() {
            x = x.apply_at(remat_ir::Primitive::Rev { dimensions: s.rev.clone() }, loc);
        }
        x = x.squeeze_at(&s.squeeze, loc);
        if !s.new_axes.is_empty() {
            x = x.expand_dims_at(&s.new_axes, loc);
        }
        x
    }

    fn slice_strided_at(&self, s: &StaticSlice, loc: &'static Location<'static>) -> Tensor {
        let strides = if s.strides.iter().all(|&k| k == 1) { None } else { Some(s.strides.clone()) };
        let prim =
            remat_ir::Primitive::Slice { start_indices: s.start.clone(), limit_indices: s.limit.clone(), strides };
        self.apply_at(prim, loc)
    }
}
