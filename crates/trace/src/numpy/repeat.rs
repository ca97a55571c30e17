//! `jnp.repeat`, as JAX 0.10.2 lowers it: with a static count, one `broadcast_in_dim`
//! (a new axis of `repeats` copies after `axis`) and one `reshape` that merges it; with a
//! `total_repeat_length`, JAX's gather of cumulative counts.

use std::panic::Location;

use remat_ir::{
    Array, Aval, BinaryOp, CumulativeOp, DType, GatherScatterMode, LitValue, Primitive, ScatterDimensionNumbers,
    ScatterOp,
};

use super::normalize_axes;
use crate::elementwise::{binary_at, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error, Operand};
use crate::transforms::library_jit;

impl Tensor {
    /// The tensor `repeat` works on and its axis: `x` and its normalized `axis`, or the
    /// flattened `x` and 0 for `None`; `None` after recording the error of an axis `x`
    /// does not have.
    fn repeat_axis(&self, axis: Option<isize>, loc: &'static Location<'static>) -> Option<(Tensor, usize)> {
        match axis {
            None => Some((self.reshape_at(&[self.size()], loc), 0)),
            Some(a) if self.ndim() == 0 => {
                record_error(loc, format!("repeat: {} has no axis {a} (a scalar repeats along axis 0)", self.aval()));
                None
            }
            Some(a) => normalize_axes("repeat", self, &[a], loc).map(|a| (self.clone(), a[0])),
        }
    }

    /// `jnp.repeat(x, repeats, axis)` with a static count: each element of `x` repeated
    /// `repeats` times along `axis` (`None`: along the flattened `x`), so
    /// `repeat([a, b], 2, 0)` is `[a, a, b, b]` (nearest-neighbour upsampling when used on
    /// the spatial axes). Records `broadcast_in_dim` then `reshape`; a scalar `x` along
    /// axis 0 (or -1, as NumPy allows) is one `broadcast_in_dim` to `[repeats]`, as JAX's
    /// `full` (JAX ignores the axis of a scalar; NumPy, and remat, reject any other).
    #[track_caller]
    pub fn repeat(&self, repeats: usize, axis: Option<isize>) -> Tensor {
        let loc = Location::caller();
        if let (0, Some(0 | -1)) = (self.ndim(), axis) {
            let prim = Primitive::BroadcastInDim { shape: vec![repeats], broadcast_dimensions: vec![] };
            return self.apply_at(prim, loc);
        }
        let Some((x, axis)) = self.repeat_axis(axis, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        x.repeat_at(repeats, axis, loc)
    }

    /// `repeat` of each element `repeats` times along the (existing) `axis`.
    pub(crate) fn repeat_at(&self, repeats: usize, axis: usize, loc: &'static Location<'static>) -> Tensor {
        let x = self;
        let mut aux_shape = x.shape().to_vec();
        aux_shape.insert(axis + 1, repeats);
        let dims: Vec<usize> = (0..aux_shape.len()).filter(|&i| i != axis + 1).collect();
        let aux = x.apply_at(Primitive::BroadcastInDim { shape: aux_shape, broadcast_dimensions: dims }, loc);
        let mut out_shape = x.shape().to_vec();
        out_shape[axis] *= repeats;
        aux.reshape_at(&out_shape, loc)
    }
}

/// How many times [`Tensor::repeat_with_total`] repeats each element.
#[derive(Clone, Debug)]
pub enum Repeats {
    /// A Rust count for every element (JAX's Python int: a weakly typed `i32`).
    Count(usize),
    /// A count per element along the axis, known when tracing (JAX's NumPy array: a
    /// constant of the program).
    Each(Vec<usize>),
    /// Traced integer counts: a scalar, or one per element along the axis.
    Traced(Tensor),
}

impl Tensor {
    /// `jnp.repeat(x, repeats, axis, total_repeat_length=total)`: each element of `x`
    /// along `axis` (`None`: of the flattened `x`) repeated `repeats` times, the result's
    /// axis having `total` elements (cut short, or padded with the last element, if the
    /// counts add up to something else, as in JAX). Counts may be traced. Recorded as JAX
    /// lowers it: `_roll_static` and `.at[0].set(0)` make the exclusive counts, a `cumsum`
    /// their starts, a `scatter-add` of ones at the starts and a second `cumsum` the index
    /// of each output element, which `jnp.take` gathers.
    #[track_caller]
    pub fn repeat_with_total(&self, repeats: Repeats, axis: Option<isize>, total: usize) -> Tensor {
        let loc = Location::caller();
        let Some((x, axis)) = self.repeat_axis(axis, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        let n = x.shape()[axis];
        let mut out_shape = x.shape().to_vec();
        out_shape[axis] = total;
        let placeholder = || Tensor::placeholder(Aval::new(x.dtype(), out_shape.clone()));
        if total == 0 {
            record_error(loc, "repeat: a total_repeat_length of 0 is not supported".into());
            return placeholder();
        }
        if n == 0 {
            return x;
        }
        // `ravel(repeats)` then `broadcast_to(repeats, [n])`.
        let repeats = match repeats {
            Repeats::Count(k) => {
                let prim = Primitive::Reshape { new_sizes: vec![1], dimensions: None };
                bind(prim, &[Operand::Literal(LitValue::I32(k as i32))], true, loc).remove(0)
            }
            Repeats::Each(counts) => {
                if counts.len() != n {
                    let message = format!("repeat: {} counts for an axis of {n} elements", counts.len());
                    record_error(loc, message);
                    return placeholder();
                }
                let data: Vec<i32> = counts.iter().map(|&c| c as i32).collect();
                let array = Array::I32(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n]), data).expect("n counts"));
                crate::trace::constant(array, loc)
                    .unwrap_or_else(|| Tensor::placeholder(Aval::new(DType::I32, vec![n])))
            }
            Repeats::Traced(t) => {
                if !t.dtype().is_integer() || t.ndim() > 1 {
                    record_error(
                        loc,
                        format!("repeat: counts must be an integer scalar or vector, found {}", t.aval()),
                    );
                    return placeholder();
                }
                t.reshape_at(&[t.size()], loc)
            }
        };
        if repeats.size() != 1 && repeats.size() != n {
            let message =
                format!("repeat: counts {} do not broadcast to the {n} elements of axis {axis}", repeats.aval());
            record_error(loc, message);
            return placeholder();
        }
        let repeats = repeats.broadcast_to_at(&[n], loc);
        let exclusive = set_first_to_zero(&roll_by_one(&repeats, loc), loc);
        let starts = exclusive.cumulative_at(CumulativeOp::Sum, "cumsum", Some(0), false, loc);
        let blocks = super::full_at(&[total], LitValue::I32(0), loc).at(&starts).scatter(
            ScatterOp::Add,
            Arg::Scalar(1.0, DType::I32),
            loc,
        );
        let gather_indices = binary_at(
            BinaryOp::Sub,
            blocks.cumulative_at(CumulativeOp::Sum, "cumsum", Some(0), false, loc).into(),
            Arg::Scalar(1.0, DType::I32),
            loc,
        );
        x.take_at(&gather_indices, Some(axis as isize), super::TakeMode::Fill, loc)
    }
}

impl Tensor {
    /// `jnp.repeat(x, np.array(counts), axis)`: element `i` along `axis` repeated
    /// `counts[i]` times, the counts known when tracing (a constant of the program, as
    /// JAX's NumPy array is); [`Tensor::repeat_with_total`] with their sum as the total.
    #[track_caller]
    pub fn repeat_each(&self, counts: &[usize], axis: Option<isize>) -> Tensor {
        let total = counts.iter().sum();
        self.repeat_with_total(Repeats::Each(counts.to_vec()), axis, total)
    }
}

/// `jnp.roll(v, 1)` of a vector: `jit[name=_roll_static]` around two slices and a
/// `concatenate`.
fn roll_by_one(v: &Tensor, loc: &'static Location<'static>) -> Tensor {
    library_jit(
        "_roll_static",
        &[v.into()],
        |inner| {
            let v = &inner[0];
            let n = v.shape()[0];
            let slice = |start: usize, limit: usize| {
                let prim =
                    Primitive::Slice { start_indices: vec![start], limit_indices: vec![limit], strides: Some(vec![1]) };
                v.apply_at(prim, loc)
            };
            let (last, rest) = (slice(n - 1, n), slice(0, n - 1));
            bind(Primitive::Concatenate { dimension: 0 }, &[last.into(), rest.into()], v.is_weak(), loc).remove(0)
        },
        loc,
    )
}

/// `v.at[0].set(0)` of an integer vector: one `scatter` with sorted, unique indices and a
/// literal update; a weakly typed `v` is made strong around it and weak again, as JAX does.
fn set_first_to_zero(v: &Tensor, loc: &'static Location<'static>) -> Tensor {
    let indices = super::full_at(&[1], LitValue::I32(0), loc);
    let operand = v.to_type(v.dtype(), false, loc);
    let prim = Primitive::Scatter {
        op: ScatterOp::Set,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: vec![],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            operand_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        },
        indices_are_sorted: true,
        mode: GatherScatterMode::FillOrDrop,
        unique_indices: true,
        update_jaxpr: None,
    };
    let zero = Operand::Literal(LitValue::from_f64(v.dtype(), 0.0));
    let out = bind(prim, &[operand.into(), indices.into(), zero], false, loc).remove(0);
    out.to_type(v.dtype(), v.is_weak(), loc)
}
