//! `jnp.pad` with its modes, recorded as JAX 0.10.2 records them: one `jit[name=_pad]`
//! taking the array and the constant value(s) (`0:i32[]` when the mode has none), whose
//! body pads one axis after the other, as `jax/_src/numpy/lax_numpy.py`'s `_pad_*` do
//! (slices, `jit[name=_flip]` reversals, `repeat`s and `concatenate`s; `lax.pad` for
//! constants). Widths are `usize`, so a negative width cannot be asked for.

use std::panic::Location;

use remat_ir::{DType, Primitive, ReduceOp};

use crate::elementwise::Arg;
use crate::tensor::Tensor;
use crate::trace::{bind, record_error, spell_last_params};
use crate::transforms::library_jit;

/// What [`pad`] fills the new elements with (`jnp.pad`'s `mode`).
#[derive(Clone, Debug)]
pub enum PadMode {
    /// `mode="constant"`, `constant_values=v`: one value everywhere (`0.into()` is JAX's
    /// default `0`, a Python int; `1.5.into()` a Python float; a tensor is traced).
    Constant(Arg),
    /// `mode="constant"`, `constant_values=((before, after), ...)`: a value per side of
    /// each axis (one pair for every axis, or a single pair used for all).
    ConstantPerAxis(Vec<(f64, f64)>),
    /// `mode="edge"`: copies of the first and last element along each axis.
    Edge,
    /// `mode="reflect"` (`reflect_type="even"`): the mirror image without the edge element.
    Reflect,
    /// `mode="symmetric"` (`reflect_type="even"`): the mirror image including the edge.
    Symmetric,
    /// `mode="wrap"`: the array repeated periodically.
    Wrap,
    /// `mode="maximum"`: the largest element along each axis (`stat_length=None`).
    Maximum,
    /// `mode="minimum"`: the smallest element along each axis.
    Minimum,
    /// `mode="mean"`: the mean along each axis (floats only).
    Mean,
}

impl PadMode {
    fn name(&self) -> &'static str {
        match self {
            PadMode::Constant(_) | PadMode::ConstantPerAxis(_) => "constant",
            PadMode::Edge => "edge",
            PadMode::Reflect => "reflect",
            PadMode::Symmetric => "symmetric",
            PadMode::Wrap => "wrap",
            PadMode::Maximum => "maximum",
            PadMode::Minimum => "minimum",
            PadMode::Mean => "mean",
        }
    }
}

/// `jnp.pad(x, widths, mode=...)`: `x` with `widths[i] = (before, after)` new elements on
/// the two sides of axis `i` (one pair for every axis, or a single pair used for all, as
/// JAX's `((before, after),)`), filled as `mode` says.
#[track_caller]
pub fn pad(x: &Tensor, widths: &[(usize, usize)], mode: PadMode) -> Tensor {
    let loc = Location::caller();
    let nd = x.ndim();
    let widths: Vec<(usize, usize)> = match widths.len() {
        1 => vec![widths[0]; nd],
        n if n == nd => widths.to_vec(),
        n => {
            let message = format!("pad: {n} (before, after) widths for {}, which has {nd} axes", x.aval());
            record_error(loc, message);
            return Tensor::placeholder(x.aval().clone());
        }
    };
    let name = mode.name();
    for (i, &(before, after)) in widths.iter().enumerate() {
        if x.shape()[i] == 0 && before + after > 0 && !matches!(name, "constant") {
            record_error(loc, format!("pad: cannot apply '{name}' padding to empty axis {i} of {}", x.aval()));
            return Tensor::placeholder(x.aval().clone());
        }
    }
    if matches!(mode, PadMode::Mean) && !x.dtype().is_float() {
        record_error(loc, format!("pad: mode 'mean' of {} is not supported (floats only)", x.aval()));
        return Tensor::placeholder(x.aval().clone());
    }
    let values: Vec<Arg> = match &mode {
        PadMode::Constant(v) => vec![v.clone()],
        PadMode::ConstantPerAxis(pairs) => {
            match pairs.len() {
                n if n == 1 || n == nd => {}
                n => {
                    let message =
                        format!("pad: {n} (before, after) constant values for {}, which has {nd} axes", x.aval());
                    record_error(loc, message);
                    return Tensor::placeholder(x.aval().clone());
                }
            }
            pairs.iter().flat_map(|&(a, b)| [Arg::Scalar(a, DType::F32), Arg::Scalar(b, DType::F32)]).collect()
        }
        _ => vec![Arg::Scalar(0.0, DType::I32)],
    };
    let mut args = vec![Arg::from(x)];
    args.extend(values);
    library_jit(
        "_pad",
        &args,
        |inner| {
            let x = inner[0].clone();
            if nd == 0 {
                return x;
            }
            match &mode {
                PadMode::Constant(_) => pad_constant(&x, &inner[1], &widths, loc),
                PadMode::ConstantPerAxis(_) => pad_constant_per_axis(&x, &inner[1..], &widths, loc),
                PadMode::Edge => pad_edge(x, &widths, loc),
                PadMode::Reflect => pad_reflect(x, &widths, false, loc),
                PadMode::Symmetric => pad_reflect(x, &widths, true, loc),
                PadMode::Wrap => pad_wrap(x, &widths, loc),
                PadMode::Maximum => pad_stat(x, &widths, Some(ReduceOp::Max), loc),
                PadMode::Minimum => pad_stat(x, &widths, Some(ReduceOp::Min), loc),
                PadMode::Mean => pad_stat(x, &widths, None, loc),
            }
        },
        loc,
    )
}

/// JAX's widths are NumPy integers, except the zeros `_pad_constant` writes itself.
fn np_int(v: usize) -> String {
    format!("np.int64({v})")
}

fn spelled_config(config: &[(String, String)]) -> String {
    let axes: Vec<String> = config.iter().map(|(lo, hi)| format!("({lo}, {hi}, 0)")).collect();
    if axes.len() == 1 {
        format!("({},)", axes[0])
    } else {
        format!("({})", axes.join(", "))
    }
}

/// `lax.pad` of `x` with the scalar `value` and `config`, spelled as JAX prints it.
fn lax_pad(
    x: &Tensor,
    value: &Tensor,
    config: &[(usize, usize)],
    spelled: &[(String, String)],
    loc: &'static Location<'static>,
) -> Tensor {
    let padding_config = config.iter().map(|&(lo, hi)| (lo as i64, hi as i64, 0)).collect();
    let out = bind(Primitive::Pad { padding_config }, &[x.into(), value.into()], x.is_weak(), loc).remove(0);
    spell_last_params(&[("padding_config", spelled_config(spelled))]);
    out
}

fn pad_constant(x: &Tensor, value: &Tensor, widths: &[(usize, usize)], loc: &'static Location<'static>) -> Tensor {
    let value = value.to_type(x.dtype(), x.is_weak(), loc);
    let spelled: Vec<(String, String)> = widths.iter().map(|&(lo, hi)| (np_int(lo), np_int(hi))).collect();
    lax_pad(x, &value, widths, &spelled, loc)
}

/// `_pad_constant` with an array of values: `jnp.asarray` of the pairs (each value
/// converted and made `[1]`, pairs concatenated to `[2]`, stacked to `[pairs, 2]`),
/// converted to `x`'s dtype and broadcast to `[nd, 2]`, then one `lax.pad` per non-zero
/// side with the value sliced out of it.
fn pad_constant_per_axis(
    x: &Tensor,
    values: &[Tensor],
    widths: &[(usize, usize)],
    loc: &'static Location<'static>,
) -> Tensor {
    let nd = x.ndim();
    let rows: Vec<Tensor> = values
        .chunks(2)
        .map(|pair| {
            let parts: Vec<Tensor> = pair
                .iter()
                .map(|v| {
                    let v = v.to_type(DType::F32, false, loc);
                    let prim = Primitive::BroadcastInDim { shape: vec![1], broadcast_dimensions: vec![] };
                    v.apply_at(prim, loc)
                })
                .collect();
            let row =
                bind(Primitive::Concatenate { dimension: 0 }, &[(&parts[0]).into(), (&parts[1]).into()], false, loc)
                    .remove(0);
            row.apply_at(Primitive::BroadcastInDim { shape: vec![1, 2], broadcast_dimensions: vec![1] }, loc)
        })
        .collect();
    let table = concatenate(&rows, 0, loc).to_type(x.dtype(), x.is_weak(), loc);
    // A single pair is `broadcast_to` every axis.
    let table = if rows.len() == nd {
        table
    } else {
        table.apply_at(Primitive::BroadcastInDim { shape: vec![nd, 2], broadcast_dimensions: vec![0, 1] }, loc)
    };
    let mut array = x.clone();
    for (i, &(before, after)) in widths.iter().enumerate() {
        for (side, width) in [(0, before), (1, after)] {
            if width == 0 {
                continue;
            }
            let prim =
                Primitive::Slice { start_indices: vec![i, side], limit_indices: vec![i + 1, side + 1], strides: None };
            let value = table.apply_at(prim, loc).apply_at(Primitive::Squeeze { dimensions: vec![0, 1] }, loc);
            let mut config = vec![(0, 0); nd];
            let mut spelled = vec![("0".to_string(), "0".to_string()); nd];
            if side == 0 {
                config[i].0 = width;
                spelled[i].0 = np_int(width);
            } else {
                config[i].1 = width;
                spelled[i].1 = np_int(width);
            }
            array = lax_pad(&array, &value, &config, &spelled, loc);
        }
    }
    array
}

/// `lax.slice_in_dim(x, start, stop, axis=axis)` (unit strides, printed).
fn slice_in_dim(x: &Tensor, start: usize, stop: usize, axis: usize, loc: &'static Location<'static>) -> Tensor {
    let mut start_indices = vec![0; x.ndim()];
    let mut limit_indices = x.shape().to_vec();
    start_indices[axis] = start;
    limit_indices[axis] = stop;
    x.apply_at(Primitive::Slice { start_indices, limit_indices, strides: Some(vec![1; x.ndim()]) }, loc)
}

/// `lax.concatenate`, which returns a single operand as it is.
fn concatenate(parts: &[Tensor], axis: usize, loc: &'static Location<'static>) -> Tensor {
    if let [only] = parts {
        return only.clone();
    }
    let operands: Vec<_> = parts.iter().map(Into::into).collect();
    let weak = parts.iter().all(Tensor::is_weak);
    bind(Primitive::Concatenate { dimension: axis }, &operands, weak, loc).remove(0)
}

/// `jnp.flip(x, axis)`: `jit[name=_flip]` around `rev`.
fn flip(x: &Tensor, axis: usize, loc: &'static Location<'static>) -> Tensor {
    library_jit("_flip", &[x.into()], |inner| inner[0].apply_at(Primitive::Rev { dimensions: vec![axis] }, loc), loc)
}

/// `_pad_symmetric_or_reflect` with `reflect_type="even"`: per side, the edge slice JAX
/// takes (and does not use for "even"), then mirrored slices concatenated until the
/// width is reached (several rounds when it passes the axis).
fn pad_reflect(
    mut array: Tensor,
    widths: &[(usize, usize)],
    symmetric: bool,
    loc: &'static Location<'static>,
) -> Tensor {
    for (i, &(before, after)) in widths.iter().enumerate() {
        let axis_size = array.shape()[i];
        if axis_size == 0 || (before == 0 && after == 0) {
            continue;
        }
        let offset = if !symmetric && axis_size > 1 { 1 } else { 0 };
        for (mut padding, is_before) in [(before, true), (after, false)] {
            let n = array.shape()[i];
            if is_before {
                slice_in_dim(&array, 0, 1, i, loc);
            } else {
                slice_in_dim(&array, n - 1, n, i, loc);
            }
            while padding > 0 {
                let curr = padding.min(axis_size - offset);
                padding -= curr;
                let n = array.shape()[i];
                let (start, stop) = if is_before {
                    (offset, offset + curr)
                } else {
                    let stop = if symmetric || axis_size == 1 { n } else { n - 1 };
                    (n - (curr + offset), stop)
                };
                let piece = flip(&slice_in_dim(&array, start, stop, i, loc), i, loc);
                array =
                    if is_before { concatenate(&[piece, array], i, loc) } else { concatenate(&[array, piece], i, loc) };
            }
        }
    }
    array
}

/// `_pad_edge`: the first and last slices of each axis `repeat`ed (`broadcast_in_dim`
/// and `reshape`, even for a width of 0) and concatenated around the array.
fn pad_edge(mut array: Tensor, widths: &[(usize, usize)], loc: &'static Location<'static>) -> Tensor {
    for (i, &(before, after)) in widths.iter().enumerate() {
        let n = array.shape()[i];
        if n == 0 {
            continue;
        }
        let first = slice_in_dim(&array, 0, 1, i, loc).repeat_at(before, i, loc);
        let last = slice_in_dim(&array, n - 1, n, i, loc).repeat_at(after, i, loc);
        array = concatenate(&[first, array, last], i, loc);
    }
    array
}

/// `_pad_wrap`: the trailing remainder, whole copies, the leading remainder.
fn pad_wrap(mut array: Tensor, widths: &[(usize, usize)], loc: &'static Location<'static>) -> Tensor {
    for (i, &(before, after)) in widths.iter().enumerate() {
        let size = array.shape()[i];
        if size == 0 {
            continue;
        }
        let (left_repeats, left_remainder) = (before / size, before % size);
        let (right_repeats, right_remainder) = (after / size, after % size);
        let mut parts = Vec::new();
        if left_remainder > 0 {
            parts.push(slice_in_dim(&array, size - left_remainder, size, i, loc));
        }
        parts.extend(std::iter::repeat_n(array.clone(), left_repeats + right_repeats + 1));
        if right_remainder > 0 {
            parts.push(slice_in_dim(&array, 0, right_remainder, i, loc));
        }
        array = concatenate(&parts, i, loc);
    }
    array
}

/// `_pad_stats` without `stat_length`: the statistic along the axis (kept as a size-1
/// axis) `repeat`ed on both sides. JAX rounds an integer statistic (`jit[name=round]`,
/// the identity for integers) before converting it back.
fn pad_stat(
    mut array: Tensor,
    widths: &[(usize, usize)],
    op: Option<ReduceOp>,
    loc: &'static Location<'static>,
) -> Tensor {
    for (i, &(before, after)) in widths.iter().enumerate() {
        let axis = [i as isize];
        let stat = match op {
            Some(op) => array.reduce_at(op, Some(&axis), true, loc),
            None => array.mean_at(Some(&axis), true, loc),
        };
        let (stat_before, stat_after) = if array.dtype().is_float() {
            (stat.clone(), stat)
        } else {
            (super::round::round_at(&stat, 0, loc), super::round::round_at(&stat, 0, loc))
        };
        let stat_before = stat_before.to_type(array.dtype(), array.is_weak(), loc);
        let stat_after = stat_after.to_type(array.dtype(), array.is_weak(), loc);
        let first = stat_before.repeat_at(before, i, loc);
        let last = stat_after.repeat_at(after, i, loc);
        array = concatenate(&[first, array, last], i, loc);
    }
    array
}
