//! The batching rules of the windowed primitives, JAX 0.10.2's: `conv_general_dilated`
//! (`_conv_general_dilated_batch_rule` in `jax/_src/lax/convolution.py`), whose batch axis
//! is reshaped into the lhs batch or feature axis, or the rhs output-feature axis (with the
//! group counts scaled), and back out of the result; the window reductions and their
//! derivatives (`jax/_src/lax/windowed_reductions.py`), which get a window of 1 over the
//! batch axis.

use remat_ir::{CompareOp, ConvParams, Eqn, Primitive, Window, WindowOp};

use super::{bdim_at_front, Batched};
use crate::builder::Builder;
use crate::AdError;

/// JAX's `_reshape_axis_into(src, dst, x)`: axis `src` merged into axis `dst` (numbered
/// without `src`), as the major part.
fn reshape_axis_into(b: &mut Builder, src: usize, dst: usize, x: remat_ir::Atom) -> Result<remat_ir::Atom, AdError> {
    let shape = b.aval(&x).shape;
    let mut perm: Vec<usize> = (0..shape.len()).filter(|&i| i != src).collect();
    perm.insert(dst, src);
    let mut new_shape: Vec<usize> = shape.iter().enumerate().filter(|&(i, _)| i != src).map(|(_, &s)| s).collect();
    new_shape[dst] *= shape[src];
    if perm.iter().copied().eq(0..perm.len()) {
        return b.reshape(x, &new_shape);
    }
    b.bind1(Primitive::Reshape { new_sizes: new_shape, dimensions: Some(perm) }, vec![x])
}

/// JAX's `_reshape_axis_out_of(src, size1, x)`: axis `src` split into `(size1, rest)`.
fn reshape_axis_out_of(
    b: &mut Builder,
    src: usize,
    size1: usize,
    x: remat_ir::Atom,
) -> Result<remat_ir::Atom, AdError> {
    let mut shape = b.aval(&x).shape;
    if size1 == 0 || !shape[src].is_multiple_of(size1) {
        return Err(AdError::Internal(format!("vmap: cannot split axis {src} of {shape:?} by {size1}")));
    }
    let size2 = shape[src] / size1;
    shape.splice(src..=src, [size1, size2]);
    b.reshape(x, &shape)
}

/// `conv_general_dilated` with `params` on a batched `lhs` and/or `rhs`.
pub(super) fn conv_general_dilated(
    b: &mut Builder,
    eqn: &Eqn,
    params: &ConvParams,
    lhs: Batched,
    rhs: Batched,
) -> Result<Batched, AdError> {
    let dn = &params.dimension_numbers;
    let (lhs_spec, rhs_spec, out_spec) = (&dn.lhs_spec, &dn.rhs_spec, &dn.out_spec);
    let (fgc, bgc) = (params.feature_group_count, params.batch_group_count);
    let size = match (lhs.1, rhs.1) {
        (Some(d), _) => b.aval(&lhs.0).shape[d],
        (None, Some(d)) => b.aval(&rhs.0).shape[d],
        (None, None) => return Err(AdError::Internal("vmap: conv without a batched operand".into())),
    };
    if size == 0 {
        return Err(AdError::Invalid("vmap: conv_general_dilated over a batch of size 0 is not supported".into()));
    }
    let mut p = params.clone();
    let conv = |b: &mut Builder, p: &ConvParams, l, r| {
        let before = b.num_eqns();
        let out = b.bind1(Primitive::ConvGeneralDilated(Box::new(p.clone())), vec![l, r])?;
        b.keep_spelling(before, &eqn.spelling);
        Ok::<_, AdError>(out)
    };
    match (lhs.1, rhs.1) {
        (Some(lbd), Some(rbd)) => {
            let new_lhs = if bgc > 1 {
                p.batch_group_count *= size;
                reshape_axis_into(b, lbd, lhs_spec[0], lhs.0)?
            } else {
                p.feature_group_count *= size;
                reshape_axis_into(b, lbd, lhs_spec[1], lhs.0)?
            };
            let new_rhs = reshape_axis_into(b, rbd, rhs_spec[0], rhs.0)?;
            let out = conv(b, &p, new_lhs, new_rhs)?;
            Ok((reshape_axis_out_of(b, out_spec[1], size, out)?, Some(out_spec[1])))
        }
        (Some(lbd), None) => {
            let new_lhs = if bgc == 1 {
                reshape_axis_into(b, lbd, lhs_spec[0], lhs.0)?
            } else {
                let l0 = lhs_spec[0];
                let x = reshape_axis_out_of(b, l0 + usize::from(lbd <= l0), bgc, lhs.0)?;
                let x = reshape_axis_into(b, lbd + usize::from(l0 < lbd), l0 + 1, x)?;
                reshape_axis_into(b, l0, l0, x)?
            };
            let out = conv(b, &p, new_lhs, rhs.0)?;
            Ok((reshape_axis_out_of(b, out_spec[0], size, out)?, Some(out_spec[0])))
        }
        (None, Some(rbd)) => {
            if fgc == 1 && bgc == 1 {
                let new_rhs = reshape_axis_into(b, rbd, rhs_spec[0], rhs.0)?;
                let out = conv(b, &p, lhs.0, new_rhs)?;
                return Ok((reshape_axis_out_of(b, out_spec[1], size, out)?, Some(out_spec[1])));
            }
            // The groups must stay outermost: factor them out of the output-feature axis,
            // fold the batch into what remains, put the groups back; the same on the result.
            let groups = if fgc > 1 { fgc } else { bgc };
            let r0 = rhs_spec[0];
            let x = reshape_axis_out_of(b, r0 + usize::from(rbd <= r0), groups, rhs.0)?;
            let x = reshape_axis_into(b, rbd + usize::from(r0 < rbd), r0 + 1, x)?;
            let new_rhs = reshape_axis_into(b, r0, r0, x)?;
            let out = conv(b, &p, lhs.0, new_rhs)?;
            let o1 = out_spec[1];
            let out = reshape_axis_out_of(b, o1, groups, out)?;
            let out = reshape_axis_out_of(b, o1 + 1, size, out)?;
            Ok((reshape_axis_into(b, o1, o1 + 1, out)?, Some(o1)))
        }
        (None, None) => Err(AdError::Internal("vmap: conv without a batched operand".into())),
    }
}

/// `window` with an axis of window 1 (stride 1, no padding or dilation) inserted at `at`.
fn window_with_axis(window: &Window, at: usize) -> Window {
    let mut w = window.clone();
    w.window_dimensions.insert(at, 1);
    w.window_strides.insert(at, 1);
    w.padding.insert(at, (0, 0));
    w.base_dilation.insert(at, 1);
    w.window_dilation.insert(at, 1);
    w
}

/// JAX's `_reduce_window_batch_rule`: a window of 1 over the batch axis, which stays.
pub(super) fn reduce_window(b: &mut Builder, op: WindowOp, window: &Window, x: Batched) -> Result<Batched, AdError> {
    let d = x.1.ok_or_else(|| AdError::Internal("vmap: reduce_window without a batched operand".into()))?;
    let prim = Primitive::ReduceWindow { op, window: window_with_axis(window, d) };
    Ok((b.bind1(prim, vec![x.0])?, Some(d)))
}

/// JAX's `_select_and_gather_add_batching_rule`: both operands batched at the front, a
/// window of 1 over it.
pub(super) fn select_and_gather_add(
    b: &mut Builder,
    select_prim: CompareOp,
    window: &Window,
    ins: &[Batched],
    size: usize,
) -> Result<Batched, AdError> {
    let t = bdim_at_front(b, ins[0].0, ins[0].1, size)?;
    let x = bdim_at_front(b, ins[1].0, ins[1].1, size)?;
    let prim = Primitive::SelectAndGatherAdd { select_prim, window: window_with_axis(window, 0) };
    Ok((b.bind1(prim, vec![t, x])?, Some(0)))
}

/// The window of a `select_and_scatter_add`.
pub(super) struct ScatterWindow<'a> {
    pub window_dimensions: &'a [usize],
    pub window_strides: &'a [usize],
    pub padding: &'a [(i64, i64)],
}

/// JAX's `_select_and_scatter_add_batch_rule`: as `select_and_gather_add`'s.
pub(super) fn select_and_scatter_add(
    b: &mut Builder,
    select_prim: CompareOp,
    w: &ScatterWindow<'_>,
    ins: &[Batched],
    size: usize,
) -> Result<Batched, AdError> {
    let source = bdim_at_front(b, ins[0].0, ins[0].1, size)?;
    let operand = bdim_at_front(b, ins[1].0, ins[1].1, size)?;
    let prim = Primitive::SelectAndScatterAdd {
        select_prim,
        window_dimensions: std::iter::once(1).chain(w.window_dimensions.iter().copied()).collect(),
        window_strides: std::iter::once(1).chain(w.window_strides.iter().copied()).collect(),
        padding: std::iter::once((0, 0)).chain(w.padding.iter().copied()).collect(),
    };
    Ok((b.bind1(prim, vec![source, operand])?, Some(0)))
}
