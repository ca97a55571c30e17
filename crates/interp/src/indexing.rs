//! Indexing primitives: `split`, `gather` and the scatters, with XLA's semantics.
//!
//! The index vector is the last axis of the indices. Out-of-bounds starts follow the mode:
//! `gather` clamps them so the whole slice is in bounds (`CLIP`, `PROMISE_IN_BOUNDS`, as
//! XLA does) or gives `fill_value` for the whole slice (`FILL_OR_DROP`); a scatter clamps
//! them (`CLIP`) or drops the whole update window (otherwise, as XLA does). The caller
//! checks the operands against the shape rule first (`check`), so no index here is out of
//! range.

use ndarray::{ArrayD, Axis, IxDyn, Slice};
use remat_ir::{
    Array, Aval, DType, FillValue, GatherDimensionNumbers, GatherScatterMode, Primitive, ScatterDimensionNumbers,
    ScatterOp,
};

use crate::elem::{map_array, num_dtype, typed, Elem, Num};
use remat_math::element::Element;
use remat_math::with_dtype;

/// The operands' avals checked against `prim`'s shape rule: the result avals.
pub(crate) fn check(prim: &Primitive, args: &[&Array]) -> Result<Vec<Aval>, String> {
    let avals: Vec<Aval> = args.iter().map(|a| a.aval()).collect();
    remat_ir::shape_rule(prim, &avals).map_err(|e| e.message)
}

pub(crate) fn split(axis: usize, sizes: &[usize], args: &[&Array]) -> Result<Vec<Array>, String> {
    let prim = Primitive::Split { axis, sizes: sizes.to_vec() };
    check(&prim, args)?;
    let x = args[0];
    let mut start = 0;
    let mut out = Vec::with_capacity(sizes.len());
    for &n in sizes {
        let s = Slice::from(start..start + n);
        out.push(map_array!(x, a => a.slice_axis(Axis(axis), s).to_owned()));
        start += n;
    }
    Ok(out)
}

/// `stack[axis=k]`: each operand with a new axis `k`, concatenated along it.
pub(crate) fn stack(axis: usize, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Stack { axis }, args)?;
    let expanded =
        args.iter().map(|x| crate::structural::expand_dims(&[axis], &[*x])).collect::<Result<Vec<Array>, String>>()?;
    let refs: Vec<&Array> = expanded.iter().collect();
    crate::structural::concatenate(axis, &refs)
}

/// `unstack[axis=k]`: the operand's slices along axis `k`, that axis removed.
pub(crate) fn unstack(axis: usize, args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Unstack { axis }, args)?;
    let n = args[0].shape()[axis];
    split(axis, &vec![1; n], args)?.iter().map(|piece| crate::structural::squeeze(&[axis], &[piece])).collect()
}

/// `tile[reps=...]`: the operand repeated `reps[k]` times along each axis `k`.
pub(crate) fn tile(reps: &[usize], args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Tile { reps: reps.to_vec() }, args)?;
    let mut out = args[0].clone();
    for (axis, &r) in reps.iter().enumerate() {
        if r != 1 {
            let copies = vec![&out; r];
            out = crate::structural::concatenate(axis, &copies)?;
        }
    }
    Ok(out)
}

/// JAX's default `fill_value`: NaN for floats, the lowest value of a signed integer, the
/// highest of an unsigned one, `true` for `bool`.
fn default_fill<T: Elem>() -> T {
    if T::DTYPE.is_float() {
        T::from_f64(f64::NAN)
    } else if T::LOWEST.to_f64() < 0.0 || T::DTYPE == DType::Bool {
        if T::DTYPE == DType::Bool {
            T::HIGHEST
        } else {
            T::LOWEST
        }
    } else {
        T::HIGHEST
    }
}

/// Index operands of any integer dtype, as exact `i64`s (an unsigned index beyond `i64`
/// cannot address any array, and stays out of bounds).
fn indices(a: &Array) -> Result<ArrayD<i64>, String> {
    if !a.dtype().is_integer() {
        return Err(format!("indices must be integers, found {}", a.aval()));
    }
    with_dtype!(a.dtype(), T => Ok(typed::<T>(a)?.mapv(|v| v.to_i128().map_or(i64::MAX, |i| i64::try_from(i).unwrap_or(i64::MAX)))))
}

/// The clamped start of the slice or window for the index vector at batch position `g`,
/// and whether it was in bounds (`remat_math::element::clamped_start`).
fn start_of(
    idx: &ArrayD<i64>,
    g: &[usize],
    index_map: &[usize],
    batching: (&[usize], &[usize]),
    hi: &[i64],
) -> (Vec<usize>, bool) {
    remat_math::element::clamped_start(|at| idx[IxDyn(at)], g, index_map, batching, hi)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn gather(
    dn: &GatherDimensionNumbers,
    fill_value: Option<FillValue>,
    mode: GatherScatterMode,
    slice_sizes: &[usize],
    prim: &Primitive,
    args: &[&Array],
) -> Result<Array, String> {
    let out_shape = check(prim, args)?.remove(0).shape;
    let (x, idx) = (args[0], &indices(args[1])?);
    let rank = x.shape().len();
    let hi: Vec<i64> = x.shape().iter().zip(slice_sizes).map(|(&n, &s)| n as i64 - s as i64).collect();
    let batch_dims: Vec<usize> = (0..out_shape.len()).filter(|d| !dn.offset_dims.contains(d)).collect();
    let kept: Vec<usize> =
        (0..rank).filter(|d| !dn.collapsed_slice_dims.contains(d) && !dn.operand_batching_dims.contains(d)).collect();
    let batching = (dn.operand_batching_dims.as_slice(), dn.start_indices_batching_dims.as_slice());
    with_dtype!(x.dtype(), T => {
        let a = typed::<T>(x)?;
        let fill = fill_value.map_or_else(default_fill::<T>, |f| T::from_f64(f.to_f64()));
        let out = ArrayD::from_shape_fn(IxDyn(&out_shape), |o| {
            let g: Vec<usize> = batch_dims.iter().map(|&d| o[d]).collect();
            let (mut pos, in_bounds) = start_of(idx, &g, &dn.start_index_map, batching, &hi);
            if mode == GatherScatterMode::FillOrDrop && !in_bounds {
                return fill;
            }
            for (&od, &d) in kept.iter().zip(&dn.offset_dims) {
                pos[od] += o[d];
            }
            a[IxDyn(&pos)]
        });
        Ok(T::wrap(out))
    })
}

pub(crate) fn scatter(
    op: ScatterOp,
    dn: &ScatterDimensionNumbers,
    mode: GatherScatterMode,
    prim: &Primitive,
    args: &[&Array],
) -> Result<Array, String> {
    check(prim, args)?;
    let (x, idx, upd) = (args[0], &indices(args[1])?, args[2]);
    let geometry = Window::new(dn, x.shape(), upd.shape());
    let run = Scatter { dn, mode, idx, geometry: &geometry };
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    if x.dtype() == DType::Key {
        // Keys are only set (the shape rule keeps them from the combiners).
        let (a, u) = (typed::<remat_ir::PrngKey>(x)?, typed::<remat_ir::PrngKey>(upd)?);
        return match op {
            ScatterOp::Set => Ok(Array::Key(run.apply(a, u, |_, u| u))),
            ScatterOp::Add | ScatterOp::Sub | ScatterOp::Mul | ScatterOp::Min | ScatterOp::Max => Err(undefined()),
        };
    }
    num_dtype!(x.dtype(), T => {
        let (a, u) = (typed::<T>(x)?, typed::<T>(upd)?);
        let combine: fn(T, T) -> T = match op {
            ScatterOp::Set => |_, u| u,
            ScatterOp::Add => <T as Num>::add,
            ScatterOp::Sub => <T as Num>::sub,
            ScatterOp::Mul => <T as Num>::mul,
            ScatterOp::Min => T::min_nan,
            ScatterOp::Max => T::max_nan,
        };
        Ok(T::wrap(run.apply(a, u, combine)))
    }, bool => {
        let (a, u) = (typed::<bool>(x)?, typed::<bool>(upd)?);
        let combine: fn(bool, bool) -> bool = match op {
            ScatterOp::Set => |_, u| u,
            ScatterOp::Min => |a, u| a & u,
            ScatterOp::Max => |a, u| a | u,
            ScatterOp::Add | ScatterOp::Sub | ScatterOp::Mul => return Err(undefined()),
        };
        Ok(Array::Bool(run.apply(a, u, combine)))
    })
}

/// Where an update lands: which update axes are scatter axes, which operand axes the
/// window axes fill, and the largest in-bounds start of each operand axis (negative when
/// no window fits, as when an inserted axis is empty).
struct Window {
    scatter_dims: Vec<usize>,
    window_operand_dims: Vec<usize>,
    hi: Vec<i64>,
}

impl Window {
    fn new(dn: &ScatterDimensionNumbers, operand: &[usize], updates: &[usize]) -> Window {
        let window_operand_dims: Vec<usize> = (0..operand.len())
            .filter(|d| !dn.inserted_window_dims.contains(d) && !dn.operand_batching_dims.contains(d))
            .collect();
        let mut size = vec![1usize; operand.len()];
        for (&od, &ud) in window_operand_dims.iter().zip(&dn.update_window_dims) {
            size[od] = updates[ud];
        }
        Window {
            scatter_dims: (0..updates.len()).filter(|d| !dn.update_window_dims.contains(d)).collect(),
            window_operand_dims,
            hi: operand.iter().zip(&size).map(|(&n, &s)| n as i64 - s as i64).collect(),
        }
    }
}

struct Scatter<'a> {
    dn: &'a ScatterDimensionNumbers,
    mode: GatherScatterMode,
    idx: &'a ArrayD<i64>,
    geometry: &'a Window,
}

impl Scatter<'_> {
    /// Updates in row-major order of the updates, so later updates to one element combine
    /// after earlier ones (for `scatter`, the last one wins).
    fn apply<T: Copy>(&self, a: &ArrayD<T>, u: &ArrayD<T>, combine: fn(T, T) -> T) -> ArrayD<T> {
        let (dn, w) = (self.dn, self.geometry);
        let mut out = a.clone();
        let batching = (dn.operand_batching_dims.as_slice(), dn.scatter_indices_batching_dims.as_slice());
        for (ui, &v) in u.indexed_iter() {
            let g: Vec<usize> = w.scatter_dims.iter().map(|&d| ui[d]).collect();
            let (mut pos, in_bounds) = start_of(self.idx, &g, &dn.scatter_dims_to_operand_dims, batching, &w.hi);
            let fits = w.hi.iter().all(|&h| h >= 0);
            if !fits || (!in_bounds && self.mode != GatherScatterMode::Clip) {
                continue;
            }
            for (&od, &ud) in w.window_operand_dims.iter().zip(&dn.update_window_dims) {
                pos[od] += ui[ud];
            }
            let slot = &mut out[IxDyn(&pos)];
            *slot = combine(*slot, v);
        }
        out
    }
}
