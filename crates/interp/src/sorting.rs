//! Sorting and scanning primitives: `sort`, `top_k`, `argmin` and the cumulative
//! reductions.
//!
//! Order is JAX's total order: NaN sorts after everything (NaNs are equal to each other),
//! `-0.0` equals `0.0`. `sort` is always stable (a valid result when `is_stable=False` too);
//! `top_k` breaks ties by the lower index; subnormals compare as zeros (XLA's float
//! environment). Cumulative reductions accumulate sequentially in the dtype's own
//! precision, from the operation's identity.

use std::cmp::Ordering;

use ndarray::{ArrayD, Axis, IxDyn};
use remat_ir::{Array, CumulativeOp, DType, Primitive};

use crate::elem::{float_dtype, map_array, num_dtype, typed, Elem, Float, Num};
use crate::indexing::check;
use remat_math::{element, with_dtype};

/// For every lane along `axis` (in `lanes` order), the dense rank of each element.
fn lane_ranks<T: Elem>(a: &ArrayD<T>, axis: usize) -> Vec<Vec<usize>> {
    a.lanes(Axis(axis)).into_iter().map(element::dense_ranks).collect()
}

/// `out[.., j, ..] = a[.., perm[j], ..]` along `axis`, one permutation per lane.
fn permute_lanes<T: Clone>(a: &ArrayD<T>, axis: usize, perms: &[Vec<usize>]) -> ArrayD<T> {
    let mut out = a.clone();
    for ((mut o, i), perm) in out.lanes_mut(Axis(axis)).into_iter().zip(a.lanes(Axis(axis))).zip(perms) {
        for (j, &p) in perm.iter().enumerate() {
            o[j] = i[p].clone();
        }
    }
    out
}

pub(crate) fn sort(dimension: usize, is_stable: bool, num_keys: usize, args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Sort { dimension, is_stable, num_keys }, args)?;
    let keys: Vec<Vec<Vec<usize>>> = args[..num_keys]
        .iter()
        .map(|k| with_dtype!(k.dtype(), T => Ok::<_, String>(lane_ranks(typed::<T>(k)?, dimension))))
        .collect::<Result<_, _>>()?;
    let n = args[0].shape()[dimension];
    let perms: Vec<Vec<usize>> = (0..keys[0].len())
        .map(|lane| {
            let mut perm: Vec<usize> = (0..n).collect();
            perm.sort_by(|&i, &j| {
                keys.iter().map(|k| k[lane][i].cmp(&k[lane][j])).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
            });
            perm
        })
        .collect();
    Ok(args.iter().map(|x| map_array!(x, a => permute_lanes(a, dimension, &perms))).collect())
}

pub(crate) fn top_k(axis: usize, k: usize, args: &[&Array]) -> Result<Vec<Array>, String> {
    let avals = check(&Primitive::TopK { axis, k }, args)?;
    let x = args[0];
    let shape = IxDyn(&avals[0].shape);
    let mut indices = ArrayD::<i32>::zeros(shape.clone());
    let values = with_dtype!(x.dtype(), T => {
        let a = typed::<T>(x)?;
        let mut values = ArrayD::from_elem(shape, T::LOWEST);
        let outs = values.lanes_mut(Axis(axis)).into_iter().zip(indices.lanes_mut(Axis(axis)));
        for (lane, (mut v, mut i)) in a.lanes(Axis(axis)).into_iter().zip(outs) {
            for (j, &p) in element::descending(lane).iter().take(k).enumerate() {
                v[j] = lane[p];
                i[j] = i32::try_from(p).unwrap_or(i32::MAX);
            }
        }
        T::wrap(values)
    });
    Ok(vec![values, Array::I32(indices)])
}

/// `argmin[axes=(k,)]`: the index of the first minimum along axis `k`, NaN counting as
/// smaller than everything (the first NaN wins), as JAX defines it.
pub(crate) fn argmin(axes: &[usize], index_dtype: DType, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Argmin { axes: axes.to_vec(), index_dtype }, args)?;
    let x = args[0];
    with_dtype!(x.dtype(), T => {
        let a = typed::<T>(x)?;
        Ok(Array::I32(a.map_axis(Axis(axes[0]), |lane| i32::try_from(element::first_min(lane)).unwrap_or(i32::MAX))))
    })
}

/// `logaddexp` as JAX's `cumlogsumexp` combines: `max + log1p(exp(-|x - y|))`, or `x + y`
/// where the difference is NaN (equal infinities, or a NaN).
fn logaddexp<T: Float>(x: T, y: T) -> T {
    let amax = x.max_nan(y);
    let delta = x - y;
    if delta.is_nan() {
        x + y
    } else {
        amax + (-delta.abs()).exp().ln_1p()
    }
}

/// The cumulative reduction of `a` along `axis` (`remat_math::element::accumulate`).
fn accumulate<T: Copy>(a: &ArrayD<T>, axis: usize, reverse: bool, identity: T, f: fn(T, T) -> T) -> ArrayD<T> {
    let mut out = a.clone();
    element::accumulate(&mut out.view_mut(), axis, reverse, identity, f);
    out
}

pub(crate) fn cumulative(op: CumulativeOp, axis: usize, reverse: bool, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Cumulative { op, axis, reverse }, args)?;
    let x = args[0];
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    match op {
        CumulativeOp::Sum => num_dtype!(x.dtype(), T =>
            Ok(T::wrap(accumulate(typed::<T>(x)?, axis, reverse, T::ZERO, <T as Num>::add))), bool => Err(undefined())),
        CumulativeOp::Prod => num_dtype!(x.dtype(), T =>
            Ok(T::wrap(accumulate(typed::<T>(x)?, axis, reverse, T::ONE, <T as Num>::mul))), bool => Err(undefined())),
        CumulativeOp::Max => {
            with_dtype!(x.dtype(), T => Ok(T::wrap(accumulate(typed::<T>(x)?, axis, reverse, T::LOWEST, T::max_nan))))
        }
        CumulativeOp::Min => {
            with_dtype!(x.dtype(), T => Ok(T::wrap(accumulate(typed::<T>(x)?, axis, reverse, T::HIGHEST, T::min_nan))))
        }
        CumulativeOp::LogSumExp => float_dtype!(x.dtype(), T =>
            Ok(T::wrap(accumulate(typed::<T>(x)?, axis, reverse, T::LOWEST, logaddexp))), other => Err(undefined())),
    }
}
