//! Reductions: `reduce_sum`, `reduce_max`, `reduce_min`, `reduce_prod` and the bitwise
//! (logical on `bool`) `reduce_and`, `reduce_or`, `reduce_xor` over a set of axes, and
//! `argmax`.
//!
//! An empty reduction gives the operation's identity: 0, 1, `-inf`/`+inf` for floats,
//! `i32::MIN`/`i32::MAX` for integers, `false`/`true` for `bool`, all ones for `and`. `reduce_max`/`reduce_min`
//! propagate NaN. Sums accumulate sequentially in the dtype's own precision, except that
//! 16-bit floats accumulate in `f32` and round once, as XLA's CPU backend does.

use std::ops::{BitAnd, BitOr, BitXor};

use ndarray::{ArrayView1, Axis};
use remat_ir::{Array, DType, ReduceOp};

use crate::elem::{num_dtype, operands, typed, Elem, Num};
use crate::elementwise::convert_element_type;
use remat_math::arrays::fold_axes;
use remat_math::element::Element;
use remat_math::with_dtype;

pub(crate) fn reduce(op: ReduceOp, axes: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let rank = x.shape().len();
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != axes.len() || sorted.last().is_some_and(|&a| a >= rank) {
        return Err(format!("axes {axes:?} must be distinct axes of {}", x.aval()));
    }
    match op {
        _ if x.dtype().is_complex() => remat_math::complex::reduce(op, &sorted, x),
        ReduceOp::Sum if x.dtype().is_narrow_float() => {
            // XLA's CPU backend sums 16-bit floats in an f32 accumulator and rounds once.
            let wide = convert_element_type(DType::F32, &[x])?;
            let sum = fold_axes(typed::<f32>(&wide)?, &sorted, 0.0, |a, b| a + b);
            convert_element_type(x.dtype(), &[&Array::F32(sum)])
        }
        ReduceOp::Sum => {
            num_dtype!(x.dtype(), T => Ok(T::wrap(fold_axes(typed::<T>(x)?, &sorted, T::ZERO, <T as Num>::add))),
            bool => Err("reduce_sum is not defined on bool".to_string()))
        }
        ReduceOp::Max => {
            with_dtype!(x.dtype(), T => Ok(T::wrap(fold_axes(typed::<T>(x)?, &sorted, T::LOWEST, T::max_nan))))
        }
        ReduceOp::Min => {
            with_dtype!(x.dtype(), T => Ok(T::wrap(fold_axes(typed::<T>(x)?, &sorted, T::HIGHEST, T::min_nan))))
        }
        ReduceOp::Prod if x.dtype().is_narrow_float() => {
            // As `reduce_sum`: the f32 product rounded once.
            let wide = convert_element_type(DType::F32, &[x])?;
            let prod = fold_axes(typed::<f32>(&wide)?, &sorted, 1.0, |a, b| a * b);
            convert_element_type(x.dtype(), &[&Array::F32(prod)])
        }
        ReduceOp::Prod => {
            num_dtype!(x.dtype(), T => Ok(T::wrap(fold_axes(typed::<T>(x)?, &sorted, T::ONE, <T as Num>::mul))),
            bool => Err("reduce_prod is not defined on bool".to_string()))
        }
        ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => {
            let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
            macro_rules! bitwise_arrays {
                ($($variant:ident),+) => {
                    match x {
                        $(Array::$variant(a) => {
                            let (init, f) = bitwise(op, !0, 0).ok_or_else(undefined)?;
                            Ok(Array::$variant(fold_axes(a, &sorted, init, f)))
                        })+
                        Array::Bool(a) => {
                            let (init, f) = bitwise(op, true, false).ok_or_else(undefined)?;
                            Ok(Array::Bool(fold_axes(a, &sorted, init, f)))
                        }
                        _ => Err(undefined()),
                    }
                };
            }
            bitwise_arrays!(I8, I16, I32, I64, U8, U32)
        }
    }
}

/// A reduction's identity and combining function.
type Fold<T> = (T, fn(T, T) -> T);

/// The identity and the combining function of a bitwise (on `bool`, logical) reduction,
/// given the dtype's all-ones and zero; `None` for the other reductions.
fn bitwise<T: Copy + BitAnd<Output = T> + BitOr<Output = T> + BitXor<Output = T>>(
    op: ReduceOp,
    ones: T,
    zero: T,
) -> Option<Fold<T>> {
    match op {
        ReduceOp::And => Some((ones, |p, q| p & q)),
        ReduceOp::Or => Some((zero, |p, q| p | q)),
        ReduceOp::Xor => Some((zero, |p, q| p ^ q)),
        ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod => None,
    }
}

/// `argmax[axes=(k,)]`: the index of the first maximum along axis `k`, where NaN counts as
/// larger than everything (so the first NaN wins), as JAX defines it.
pub(crate) fn argmax(axes: &[usize], index_dtype: DType, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let &[axis] = axes else {
        return Err(format!("argmax takes exactly one axis, got {axes:?}"));
    };
    if axis >= x.shape().len() {
        return Err(format!("axis {axis} is out of range for {}", x.aval()));
    }
    if x.shape()[axis] == 0 {
        return Err(format!("argmax over the empty axis {axis} of {} has no result", x.aval()));
    }
    if index_dtype != DType::I32 {
        return Err(format!("index_dtype must be an integer type, got {}", index_dtype.numpy_name()));
    }
    with_dtype!(x.dtype(), T => {
        let a = typed::<T>(x)?;
        Ok(Array::I32(a.map_axis(Axis(axis), |lane| i32::try_from(first_max(lane)).unwrap_or(i32::MAX))))
    })
}

/// The index of the first maximum of a non-empty lane, NaN being the largest value.
fn first_max<T: Elem>(lane: ArrayView1<T>) -> usize {
    let mut best = 0;
    for (i, &v) in lane.iter().enumerate() {
        let b = lane[best];
        if !b.is_nan() && (v.is_nan() || v.daz() > b.daz()) {
            best = i;
        }
    }
    best
}
