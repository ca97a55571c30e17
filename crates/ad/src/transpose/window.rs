//! Transposes of convolutions and windowed reductions, each JAX 0.10.2's rule
//! (`lax/convolution.py`, `lax/windowed_reductions.py`): `conv_general_dilated` is bilinear
//! and its two transposes are again convolutions (over the reversed kernel for the lhs);
//! `reduce_window_sum` transposes to a `pad` (interior `stride - 1`) and a stride-1
//! `reduce_window_sum`; `select_and_gather_add` (the tangent of `reduce_window_max`) and
//! `select_and_scatter_add` transpose to each other.

use remat_ir::{dilated, Atom, Aval, CompareOp, ConvDimensionNumbers, ConvParams, Primitive, Window, WindowOp};

use crate::builder::{lit, Builder};
use crate::AdError;

/// JAX's `_conv_general_vjp_lhs_padding` (also the `reduce_window_sum` transpose's).
pub(crate) fn vjp_lhs_padding(
    in_shape: &[usize],
    window: &[usize],
    strides: &[usize],
    out_shape: &[usize],
    padding: &[(i64, i64)],
    lhs_dilation: &[usize],
    rhs_dilation: &[usize],
) -> Vec<(i64, i64)> {
    (0..in_shape.len())
        .map(|i| {
            let l = dilated(in_shape[i], lhs_dilation[i]) as i64;
            let r = dilated(window[i], rhs_dilation[i]) as i64;
            let o = dilated(out_shape[i], strides[i]) as i64;
            let before = r - padding[i].0 - 1;
            (before, l + r - 1 - o - before)
        })
        .collect()
}

/// JAX's `_conv_general_vjp_rhs_padding`.
fn vjp_rhs_padding(
    in_shape: &[usize],
    window: &[usize],
    strides: &[usize],
    out_shape: &[usize],
    padding: &[(i64, i64)],
    lhs_dilation: &[usize],
    rhs_dilation: &[usize],
) -> Vec<(i64, i64)> {
    (0..in_shape.len())
        .map(|i| {
            let l = dilated(in_shape[i], lhs_dilation[i]) as i64;
            let r = dilated(window[i], rhs_dilation[i]) as i64;
            let o = dilated(out_shape[i], strides[i]) as i64;
            let lo = padding[i].0;
            (lo, (o - l) + (r - lo - 1))
        })
        .collect()
}

fn take(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    axes.iter().map(|&a| shape[a]).collect()
}

/// JAX's `_reshape_axis_out_of(src, size1, x)`: axis `src` split into `(size1, n / size1)`.
fn reshape_axis_out_of(b: &mut Builder, src: usize, size1: usize, x: Atom) -> Result<Atom, AdError> {
    let mut shape = b.aval(&x).shape;
    let size2 = shape[src] / size1;
    shape.splice(src..=src, [size1, size2]);
    b.reshape(x, &shape)
}

/// JAX's `_reshape_axis_into(src, dst, x)`: axis `src` merged into axis `dst` (numbered
/// after `src` is removed) as its major part, by one `reshape[dimensions=perm]`
/// (`dimensions=None` when `perm` is the identity, as `lax.reshape` prints it).
fn reshape_axis_into(b: &mut Builder, src: usize, dst: usize, x: Atom) -> Result<Atom, AdError> {
    let shape = b.aval(&x).shape;
    let mut perm: Vec<usize> = (0..shape.len()).filter(|&i| i != src).collect();
    perm.insert(dst, src);
    let mut new_shape: Vec<usize> = shape.iter().enumerate().filter(|&(i, _)| i != src).map(|(_, &n)| n).collect();
    new_shape[dst] *= shape[src];
    if perm.iter().copied().eq(0..perm.len()) {
        return b.reshape(x, &new_shape);
    }
    b.bind1(Primitive::Reshape { new_sizes: new_shape, dimensions: Some(perm) }, vec![x])
}

fn conv(b: &mut Builder, c: ConvParams, lhs: Atom, rhs: Atom) -> Result<Atom, AdError> {
    b.bind1(Primitive::ConvGeneralDilated(Box::new(c)), vec![lhs, rhs])
}

/// `_conv_general_dilated_transpose_lhs(g, lhs, rhs)`: the lhs cotangent.
pub(crate) fn conv_transpose_lhs(
    b: &mut Builder,
    c: &ConvParams,
    g: Atom,
    lhs: &Aval,
    rhs: Atom,
) -> Result<Atom, AdError> {
    let dn = &c.dimension_numbers;
    let rhs_shape = b.aval(&rhs).shape;
    let (lhs_sdims, rhs_sdims, out_sdims) = (&dn.lhs_spec[2..], &dn.rhs_spec[2..], &dn.out_spec[2..]);
    let (g_count, b_count) = (c.feature_group_count, c.batch_group_count);
    let mut kernel = rhs;
    let mut feature_group_count = g_count;
    if g_count > 1 || b_count > 1 {
        let groups = g_count.max(b_count);
        kernel = reshape_axis_out_of(b, dn.rhs_spec[0], groups, kernel)?;
        kernel = reshape_axis_into(b, dn.rhs_spec[0], dn.rhs_spec[1], kernel)?;
        feature_group_count = groups;
    }
    let g_shape = b.aval(&g).shape;
    let padding = vjp_lhs_padding(
        &take(&lhs.shape, lhs_sdims),
        &take(&rhs_shape, rhs_sdims),
        &c.window_strides,
        &take(&g_shape, out_sdims),
        &c.padding,
        &c.lhs_dilation,
        &c.rhs_dilation,
    );
    let mut revd = b.bind1(Primitive::Rev { dimensions: rhs_sdims.to_vec() }, vec![kernel])?;
    let g_dtype = b.aval(&g).dtype;
    revd = b.convert(revd, g_dtype)?;
    let t = ConvParams {
        window_strides: c.lhs_dilation.clone(),
        padding,
        lhs_dilation: c.window_strides.clone(),
        rhs_dilation: c.rhs_dilation.clone(),
        dimension_numbers: ConvDimensionNumbers {
            lhs_spec: dn.out_spec.clone(),
            rhs_spec: ConvDimensionNumbers::swap01(&dn.rhs_spec),
            out_spec: dn.lhs_spec.clone(),
        },
        feature_group_count,
        batch_group_count: 1,
        precision: c.precision.clone(),
        preferred_element_type: c.preferred_element_type,
    };
    let mut out = conv(b, t, g, revd)?;
    out = b.convert(out, lhs.dtype)?;
    if b_count > 1 {
        out = reshape_axis_out_of(b, dn.lhs_spec[1], b_count, out)?;
        out = reshape_axis_into(b, dn.lhs_spec[1], dn.lhs_spec[0], out)?;
    }
    Ok(out)
}

/// `_conv_general_dilated_transpose_rhs(g, lhs, rhs)`: the kernel cotangent (`None`, a
/// symbolic zero, when `g` is empty).
pub(crate) fn conv_transpose_rhs(
    b: &mut Builder,
    c: &ConvParams,
    g: Atom,
    lhs: Atom,
    rhs: &Aval,
) -> Result<Option<Atom>, AdError> {
    let g_aval = b.aval(&g);
    if g_aval.size() == 0 {
        return Ok(None);
    }
    let dn = &c.dimension_numbers;
    let lhs_shape = b.aval(&lhs).shape;
    let (lhs_sdims, rhs_sdims, out_sdims) = (&dn.lhs_spec[2..], &dn.rhs_spec[2..], &dn.out_spec[2..]);
    let (mut feature_group_count, mut batch_group_count) = (c.feature_group_count, c.batch_group_count);
    if batch_group_count > 1 {
        feature_group_count = batch_group_count;
        batch_group_count = 1;
    } else if feature_group_count > 1 {
        batch_group_count = feature_group_count;
        feature_group_count = 1;
    }
    let padding = vjp_rhs_padding(
        &take(&lhs_shape, lhs_sdims),
        &take(&rhs.shape, rhs_sdims),
        &c.window_strides,
        &take(&g_aval.shape, out_sdims),
        &c.padding,
        &c.lhs_dilation,
        &c.rhs_dilation,
    );
    let lhs = b.convert(lhs, g_aval.dtype)?;
    let t = ConvParams {
        window_strides: c.rhs_dilation.clone(),
        padding,
        lhs_dilation: c.lhs_dilation.clone(),
        rhs_dilation: c.window_strides.clone(),
        dimension_numbers: ConvDimensionNumbers {
            lhs_spec: ConvDimensionNumbers::swap01(&dn.lhs_spec),
            rhs_spec: ConvDimensionNumbers::swap01(&dn.out_spec),
            out_spec: ConvDimensionNumbers::swap01(&dn.rhs_spec),
        },
        feature_group_count,
        batch_group_count,
        precision: c.precision.clone(),
        preferred_element_type: c.preferred_element_type,
    };
    let out = conv(b, t, lhs, g)?;
    Ok(Some(b.convert(out, rhs.dtype)?))
}

/// `_reduce_window_sum_transpose_rule`: pad the cotangent (interior `stride - 1`), then sum
/// windows with stride `base_dilation`.
pub(crate) fn reduce_window_sum_transpose(
    b: &mut Builder,
    w: &Window,
    ct: Atom,
    operand: &Aval,
) -> Result<Atom, AdError> {
    let ct_aval = b.aval(&ct);
    let pads = vjp_lhs_padding(
        &operand.shape,
        &w.window_dimensions,
        &w.window_strides,
        &ct_aval.shape,
        &w.padding,
        &w.base_dilation,
        &w.window_dilation,
    );
    let padding_config = pads.iter().zip(&w.window_strides).map(|(&(lo, hi), &s)| (lo, hi, s as i64 - 1)).collect();
    let padded = b.bind1(Primitive::Pad { padding_config }, vec![ct, lit(ct_aval.dtype, 0.0)])?;
    let rank = operand.rank();
    let window = Window {
        window_dimensions: w.window_dimensions.clone(),
        window_strides: w.base_dilation.clone(),
        padding: vec![(0, 0); rank],
        base_dilation: vec![1; rank],
        window_dilation: w.window_dilation.clone(),
    };
    b.bind1(Primitive::ReduceWindow { op: WindowOp::Sum, window }, vec![padded])
}

/// `_select_and_gather_add_transpose`: the tangent's cotangent, a `select_and_scatter_add`
/// (over the operand padded with the selection's identity where the base is dilated).
pub(crate) fn select_and_gather_add_transpose(
    b: &mut Builder,
    select_prim: CompareOp,
    w: &Window,
    t: Atom,
    operand: Atom,
) -> Result<Atom, AdError> {
    if w.window_dilation.iter().any(|&d| d != 1) {
        return Err(AdError::Unsupported {
            primitive: "select_and_gather_add",
            message: format!(
                "VJP not implemented for select_and_gather (MaxPool) with window dilation, got window_dilation={:?}",
                w.window_dilation
            ),
        });
    }
    let has_base_dilation = w.base_dilation.iter().any(|&d| d != 1);
    let mut operand = operand;
    let op_aval = b.aval(&operand);
    if has_base_dilation {
        let identity = match select_prim {
            CompareOp::Ge | CompareOp::Gt => f64::NEG_INFINITY,
            CompareOp::Le
            | CompareOp::Lt
            | CompareOp::Eq
            | CompareOp::Ne
            | CompareOp::EqTo
            | CompareOp::LeTo
            | CompareOp::LtTo => f64::INFINITY,
        };
        let padding_config = w.base_dilation.iter().map(|&d| (0, 0, d as i64 - 1)).collect();
        operand = b.bind1(Primitive::Pad { padding_config }, vec![operand, lit(op_aval.dtype, identity)])?;
    }
    let prim = Primitive::SelectAndScatterAdd {
        select_prim,
        window_dimensions: w.window_dimensions.clone(),
        window_strides: w.window_strides.clone(),
        padding: w.padding.clone(),
    };
    let mut result = b.bind1(prim, vec![t, operand])?;
    if has_base_dilation {
        let shape = b.aval(&result).shape;
        let prim = Primitive::Slice {
            start_indices: vec![0; shape.len()],
            limit_indices: shape,
            strides: Some(w.base_dilation.clone()),
        };
        result = b.bind1(prim, vec![result])?;
    }
    Ok(result)
}

/// `_select_and_scatter_add_transpose`: the source's cotangent, a `select_and_gather_add`
/// with unit dilations.
pub(crate) fn select_and_scatter_add_transpose(
    b: &mut Builder,
    select_prim: CompareOp,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: &[(i64, i64)],
    t: Atom,
    operand: Atom,
) -> Result<Atom, AdError> {
    let ones = vec![1; window_dimensions.len()];
    let window = Window {
        window_dimensions: window_dimensions.to_vec(),
        window_strides: window_strides.to_vec(),
        padding: padding.to_vec(),
        base_dilation: ones.clone(),
        window_dilation: ones,
    };
    b.bind1(Primitive::SelectAndGatherAdd { select_prim, window }, vec![t, operand])
}
