//! Layout primitives, which move elements without computing on them: `broadcast_in_dim`,
//! `reshape` (row-major), `transpose`, `rev`, `squeeze`, `expand_dims`, `slice`, `pad`,
//! `concatenate`, `dynamic_slice`, `dynamic_update_slice`, and `iota`.
//!
//! Every rule checks its parameters against the operand before touching an index, so a
//! malformed equation is an error, never an out-of-bounds panic.

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice};
use remat_ir::{Array, Aval, DType};

use crate::elem::{checked_size, fmt_shape, integer_scalar, map_array, num_dtype, operands, typed, Elem};
use remat_math::element::Element;
use remat_math::with_dtype;

pub(crate) fn broadcast_in_dim(
    shape: &[usize],
    broadcast_dimensions: &[usize],
    args: &[&Array],
) -> Result<Array, String> {
    let [x] = operands(args)?;
    if broadcast_dimensions.len() != x.shape().len() {
        return Err(format!(
            "broadcast_dimensions {broadcast_dimensions:?} must have one entry per axis of the operand {}",
            x.aval()
        ));
    }
    for (i, (&d, &n)) in broadcast_dimensions.iter().zip(x.shape()).enumerate() {
        if d >= shape.len() {
            return Err(format!("broadcast dimension {d} is out of range for output shape {}", fmt_shape(shape)));
        }
        if i > 0 && d <= broadcast_dimensions[i - 1] {
            return Err(format!("broadcast_dimensions {broadcast_dimensions:?} must be strictly increasing"));
        }
        if n != 1 && n != shape[d] {
            return Err(format!(
                "operand axis {i} of {} has extent {n}, which cannot broadcast to output axis {d} of shape {}",
                x.aval(),
                fmt_shape(shape)
            ));
        }
    }
    checked_size(shape)?;
    Ok(map_array!(x, a => {
        let mut v = a.view();
        for k in (0..shape.len()).filter(|k| !broadcast_dimensions.contains(k)) {
            v.insert_axis_inplace(Axis(k));
        }
        v.broadcast(IxDyn(shape)).ok_or("broadcast_in_dim: operand does not broadcast")?.to_owned()
    }))
}

pub(crate) fn reshape(new_sizes: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let n = checked_size(new_sizes)?;
    if n != x.len() {
        return Err(format!(
            "cannot reshape {} ({} elements) to {} ({n} elements)",
            x.aval(),
            x.len(),
            fmt_shape(new_sizes)
        ));
    }
    Ok(map_array!(x, a => reshaped(a, new_sizes)?))
}

/// The elements of `a` in row-major order, laid out in `shape` (same element count).
fn reshaped<T: Clone>(a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, String> {
    ArrayD::from_shape_vec(IxDyn(shape), a.iter().cloned().collect()).map_err(|e| e.to_string())
}

pub(crate) fn transpose(permutation: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let rank = x.shape().len();
    let mut seen = vec![false; rank];
    for &p in permutation {
        if p >= rank || std::mem::replace(&mut seen[p], true) {
            return Err(format!("permutation {permutation:?} is not a permutation of the axes of {}", x.aval()));
        }
    }
    if permutation.len() != rank {
        return Err(format!("permutation {permutation:?} is not a permutation of the axes of {}", x.aval()));
    }
    Ok(map_array!(x, a => a.view().permuted_axes(IxDyn(permutation)).as_standard_layout().into_owned()))
}

/// Reverses the elements along each of `dimensions`.
pub(crate) fn rev(dimensions: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let rank = x.shape().len();
    let mut reversed = vec![false; rank];
    for &d in dimensions {
        if d >= rank || std::mem::replace(&mut reversed[d], true) {
            return Err(format!("dimensions {dimensions:?} must be distinct axes of {}", x.aval()));
        }
    }
    Ok(map_array!(x, a => {
        let mut v = a.view();
        for &d in dimensions {
            v.invert_axis(Axis(d));
        }
        v.as_standard_layout().into_owned()
    }))
}

pub(crate) fn squeeze(dimensions: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let shape = x.shape();
    let mut removed = vec![false; shape.len()];
    for &d in dimensions {
        if d >= shape.len() || std::mem::replace(&mut removed[d], true) {
            return Err(format!("dimensions {dimensions:?} must be distinct axes of {}", x.aval()));
        }
        if shape[d] != 1 {
            return Err(format!("cannot squeeze axis {d} of {}: its extent is {}, not 1", x.aval(), shape[d]));
        }
    }
    let new_shape: Vec<usize> = shape.iter().zip(&removed).filter(|(_, &r)| !r).map(|(&n, _)| n).collect();
    Ok(map_array!(x, a => reshaped(a, &new_shape)?))
}

/// Inserts size-1 axes at `dimensions`, which are positions in the output.
pub(crate) fn expand_dims(dimensions: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let out_rank = x.shape().len() + dimensions.len();
    let mut inserted = vec![false; out_rank];
    for &d in dimensions {
        if d >= out_rank || std::mem::replace(&mut inserted[d], true) {
            return Err(format!("dimensions {dimensions:?} must be distinct axes of the rank-{out_rank} output"));
        }
    }
    let mut dims = x.shape().iter();
    let new_shape: Vec<usize> =
        inserted.iter().map(|&new| if new { 1 } else { dims.next().copied().unwrap_or(1) }).collect();
    Ok(map_array!(x, a => reshaped(a, &new_shape)?))
}

pub(crate) fn slice(
    start: &[usize],
    limit: &[usize],
    strides: Option<&[usize]>,
    args: &[&Array],
) -> Result<Array, String> {
    let [x] = operands(args)?;
    let shape = x.shape();
    let rank = shape.len();
    if start.len() != rank || limit.len() != rank || strides.is_some_and(|s| s.len() != rank) {
        return Err(format!("start_indices, limit_indices and strides need one entry per axis of {}", x.aval()));
    }
    let mut slices = Vec::with_capacity(rank);
    for k in 0..rank {
        let stride = strides.map_or(1, |s| s[k]);
        if start[k] > limit[k] || limit[k] > shape[k] || stride == 0 {
            return Err(format!(
                "axis {k} of {}: need 0 <= start ({}) <= limit ({}) <= {} and stride ({stride}) >= 1",
                x.aval(),
                start[k],
                limit[k],
                shape[k]
            ));
        }
        // A stride beyond the extent picks the same single element as any larger one.
        slices.push(Slice::new(start[k] as isize, Some(limit[k] as isize), stride.min(shape[k].max(1)) as isize));
    }
    Ok(map_array!(x, a => a.slice_each_axis(|ax| slices[ax.axis.index()]).to_owned()))
}

/// `pad operand padding_value`: per axis `(low, high, interior)`; negative `low`/`high`
/// crop. Output extent: `low + high + d + max(d - 1, 0) * interior`.
pub(crate) fn pad(padding_config: &[(i64, i64, i64)], args: &[&Array]) -> Result<Array, String> {
    let [x, value] = operands(args)?;
    if value.dtype() != x.dtype() || !value.shape().is_empty() {
        return Err(format!("the padding value {} must be a {} scalar", value.aval(), x.dtype()));
    }
    if padding_config.len() != x.shape().len() {
        return Err(format!("padding_config needs one (low, high, interior) per axis of {}", x.aval()));
    }
    // i128 arithmetic: no configuration overflows it.
    let mut out_shape = Vec::with_capacity(padding_config.len());
    for (k, (&(lo, hi, interior), &d)) in padding_config.iter().zip(x.shape()).enumerate() {
        let d = d as i128;
        let n = lo as i128 + hi as i128 + d + (d - 1).max(0) * interior as i128;
        if interior < 0 || n < 0 {
            return Err(format!(
                "padding ({lo}, {hi}, {interior}) of axis {k} of {} gives a negative extent",
                x.aval()
            ));
        }
        out_shape.push(usize::try_from(n).map_err(|_| format!("padded axis {k} is too large"))?);
    }
    checked_size(&out_shape)?;
    with_dtype!(x.dtype(), T => {
        let v = typed::<T>(value)?.first().copied().ok_or("the padding value is empty")?;
        Ok(T::wrap(padded(typed::<T>(x)?, v, padding_config, &out_shape)))
    })
}

fn padded<T: Elem>(a: &ArrayD<T>, value: T, config: &[(i64, i64, i64)], out_shape: &[usize]) -> ArrayD<T> {
    let mut out = ArrayD::from_elem(IxDyn(out_shape), value);
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for ((&(lo, _, interior), &d), &n) in config.iter().zip(a.shape()).zip(out_shape) {
        let (lo, step, d, n) = (lo as i128, interior as i128 + 1, d as i128, n as i128);
        // Operand index i lands at lo + i * step; keep the i that land inside 0..n.
        let first = if lo >= 0 { 0 } else { (-lo + step - 1) / step };
        let end = if n > lo { ((n - lo + step - 1) / step).min(d) } else { 0 };
        if first >= end {
            return out;
        }
        src.push(Slice::new(first as isize, Some(end as isize), 1));
        let (p0, p_last) = (lo + first * step, lo + (end - 1) * step);
        // With two or more elements kept, step < n; with one, any step will do.
        dst.push(Slice::new(p0 as isize, Some(p_last as isize + 1), step.min(n.max(1)) as isize));
    }
    out.slice_each_axis_mut(|ax| dst[ax.axis.index()]).assign(&a.slice_each_axis(|ax| src[ax.axis.index()]));
    out
}

pub(crate) fn concatenate(dimension: usize, args: &[&Array]) -> Result<Array, String> {
    let first = args.first().ok_or("expected at least one operand")?;
    let rank = first.shape().len();
    if dimension >= rank {
        return Err(format!("dimension {dimension} is out of range for {}", first.aval()));
    }
    let mut out_shape = first.shape().to_vec();
    out_shape[dimension] = 0;
    for (i, a) in args.iter().enumerate() {
        let compatible = a.dtype() == first.dtype()
            && a.shape().len() == rank
            && a.shape().iter().zip(first.shape()).enumerate().all(|(k, (m, n))| k == dimension || m == n);
        if !compatible {
            return Err(format!(
                "operand {i} is {}, which does not concatenate with {} along axis {dimension}",
                a.aval(),
                first.aval()
            ));
        }
        out_shape[dimension] += a.shape()[dimension];
    }
    checked_size(&out_shape)?;
    with_dtype!(first.dtype(), T => {
        let views = args.iter().map(|a| typed::<T>(a).map(ArrayD::view)).collect::<Result<Vec<ArrayViewD<T>>, String>>()?;
        Ok(T::wrap(ndarray::concatenate(Axis(dimension), &views).map_err(|e| e.to_string())?))
    })
}

/// `dynamic_slice operand i0 i1 ...`: each start is clamped into `0..=extent - size`, as
/// XLA does, so the slice always fits.
pub(crate) fn dynamic_slice(slice_sizes: &[usize], args: &[&Array]) -> Result<Array, String> {
    let (x, indices) = args.split_first().ok_or("expected an operand and start indices, got no operands")?;
    if slice_sizes.len() != x.shape().len() || slice_sizes.iter().zip(x.shape()).any(|(s, d)| s > d) {
        return Err(format!("slice_sizes {slice_sizes:?} do not fit in {}", x.aval()));
    }
    let starts = clamped_starts(indices, x.shape(), slice_sizes)?;
    Ok(map_array!(x, a => a
        .slice_each_axis(|ax| {
            let k = ax.axis.index();
            Slice::new(starts[k] as isize, Some((starts[k] + slice_sizes[k]) as isize), 1)
        })
        .to_owned()))
}

/// `dynamic_update_slice operand update i0 i1 ...`, starts clamped as in `dynamic_slice`.
pub(crate) fn dynamic_update_slice(args: &[&Array]) -> Result<Array, String> {
    let [x, update] = match args {
        [x, update, ..] => [*x, *update],
        _ => return Err(format!("expected an operand, an update and start indices, got {} operands", args.len())),
    };
    let fits = update.shape().len() == x.shape().len() && update.shape().iter().zip(x.shape()).all(|(u, d)| u <= d);
    if update.dtype() != x.dtype() || !fits {
        return Err(format!("update {} does not fit in operand {}", update.aval(), x.aval()));
    }
    let starts = clamped_starts(&args[2..], x.shape(), update.shape())?;
    with_dtype!(x.dtype(), T => {
        let mut out = typed::<T>(x)?.clone();
        let update = typed::<T>(update)?;
        out.slice_each_axis_mut(|ax| {
            let k = ax.axis.index();
            Slice::new(starts[k] as isize, Some((starts[k] + update.shape()[k]) as isize), 1)
        })
        .assign(update);
        Ok(T::wrap(out))
    })
}

/// One scalar `i32` start per axis, clamped into `0..=extent - size`.
fn clamped_starts(indices: &[&Array], shape: &[usize], sizes: &[usize]) -> Result<Vec<usize>, String> {
    if indices.len() != shape.len() {
        return Err(format!("expected {} start indices (one per axis), got {}", shape.len(), indices.len()));
    }
    indices
        .iter()
        .zip(shape.iter().zip(sizes))
        .enumerate()
        .map(|(k, (idx, (&d, &s)))| match integer_scalar(idx) {
            Some(i) => Ok(usize::try_from(i).unwrap_or(0).min(d - s)),
            None => Err(format!("start index {k} must be an integer scalar, got {}", idx.aval())),
        })
        .collect()
}

/// `empty2`: JAX leaves the scalar uninitialised; XLA's lowering, and remat, give zero.
pub(crate) fn empty2(dtype: DType, args: &[&Array]) -> Result<Array, String> {
    operands::<0>(args)?;
    Ok(Array::zeros(&Aval::scalar(dtype)))
}

pub(crate) fn iota(dtype: DType, shape: &[usize], dimension: usize, args: &[&Array]) -> Result<Array, String> {
    operands::<0>(args)?;
    if dimension >= shape.len() {
        return Err(format!("dimension {dimension} is out of range for shape {}", fmt_shape(shape)));
    }
    checked_size(shape)?;
    num_dtype!(dtype, T => Ok(T::wrap(ArrayD::from_shape_fn(IxDyn(shape), |ix| <T as Element>::from_f64(ix[dimension] as f64)))),
        bool => Err("iota is not defined on bool".to_string()))
}
