//! Random convolutions and windowed reductions for the random-program generator: every
//! spatial rank from 1 to 3, random layouts (`ConvDimensionNumbers`), strides, lhs and rhs
//! (base and window) dilations, padding (negative too), feature and batch groups, and
//! selections over padded windows.

use remat_ir::{
    shape_rule, Atom, Aval, CompareOp, ConvDimensionNumbers, ConvParams, DType, Param, Primitive, Window, WindowOp,
};

use super::{Builder, Gen};

/// A random permutation of `0..n`.
fn permutation(g: &mut Gen, n: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, g.below(i + 1));
    }
    p
}

/// `conv_general_dilated` of a value of the pool (or a fresh lhs) and a fresh kernel.
pub(super) fn conv(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let from_pool = g.chance(40);
    let pooled =
        if from_pool { b.of(g, |a| (3..=4).contains(&a.rank()) && a.dtype.is_numeric() && a.size() > 0) } else { None };
    let ns = pooled.map_or_else(|| g.pick(&[1, 1, 2, 2, 3]), |x| b.aval(x).rank() - 2);
    let rank = ns + 2;
    let (lhs_spec, rhs_spec, out_spec) = (permutation(g, rank), permutation(g, rank), permutation(g, rank));
    let (mut fg, mut bg) = match g.below(4) {
        0 => (2, 1),
        1 => (1, 2),
        _ => (1, 1),
    };
    let (lhs, lhs_aval) = match pooled {
        Some(x) => {
            let xa = b.aval(x);
            let (n, c) = (xa.shape[lhs_spec[0]], xa.shape[lhs_spec[1]]);
            fg = if c % 2 == 0 { fg } else { 1 };
            bg = if n % 2 == 0 && fg == 1 { bg } else { 1 };
            (Atom::from(x), xa)
        }
        None => {
            let dtype = g.pick(&[DType::F32, DType::F32, DType::F64, DType::I32, DType::BF16, DType::F16]);
            let mut shape = vec![0; rank];
            shape[lhs_spec[0]] = g.pick(&[1, 2, 3]) * bg;
            // Up to 8 features and 8 outputs per group: products both below and above the
            // lowering's threshold for reducing in place instead of im2col + GEMM.
            shape[lhs_spec[1]] = g.pick(&[1, 2, 3, 8]) * fg;
            for s in 0..ns {
                shape[lhs_spec[2 + s]] = g.pick(&[1, 2, 3, 4, 5, 7]);
            }
            let aval = Aval::new(dtype, shape);
            (Atom::from(b.input(aval.clone())), aval)
        }
    };
    let mut rshape = vec![0; rank];
    rshape[rhs_spec[0]] = g.pick(&[1, 2, 3, 8]) * fg * bg;
    rshape[rhs_spec[1]] = lhs_aval.shape[lhs_spec[1]] / fg;
    for s in 0..ns {
        rshape[rhs_spec[2 + s]] = g.pick(&[1, 2, 3]);
    }
    let rhs = b.input(Aval::new(lhs_aval.dtype, rshape));
    let c = ConvParams {
        window_strides: (0..ns).map(|_| g.pick(&[1, 1, 2, 3])).collect(),
        padding: (0..ns).map(|_| (g.below(4) as i64 - 1, g.below(4) as i64 - 1)).collect(),
        lhs_dilation: (0..ns).map(|_| g.pick(&[1, 1, 2])).collect(),
        rhs_dilation: (0..ns).map(|_| g.pick(&[1, 1, 2])).collect(),
        dimension_numbers: ConvDimensionNumbers { lhs_spec, rhs_spec, out_spec },
        feature_group_count: fg,
        batch_group_count: bg,
        precision: Param::None,
        // A 16-bit float convolution sometimes accumulates to an f32 result.
        preferred_element_type: match g.below(5) {
            0 => Some(lhs_aval.dtype),
            1 if lhs_aval.dtype.is_narrow_float() => Some(DType::F32),
            _ => None,
        },
    };
    b.eqn(Primitive::ConvGeneralDilated(Box::new(c)), vec![lhs, rhs.into()])?;
    Some(())
}

/// A windowed reduction, or a selection (gather or scatter) over windows, of a pool value.
pub(super) fn window(b: &mut Builder, g: &mut Gen) -> Option<()> {
    let x = b.of(g, |a| (1..=3).contains(&a.rank()) && a.dtype != DType::Bool && a.dtype != DType::Key)?;
    let xa = b.aval(x);
    let r = xa.rank();
    let select = g.below(4);
    // Selections are differentiated max pools: no dilation and no negative padding.
    let plain = select >= 2;
    let mut w = Window {
        window_dimensions: (0..r).map(|_| g.pick(&[1, 2, 2, 3])).collect(),
        window_strides: (0..r).map(|_| g.pick(&[1, 2, 3])).collect(),
        padding: (0..r)
            .map(|_| {
                if plain {
                    (g.below(2) as i64, g.below(2) as i64)
                } else {
                    (g.below(3) as i64 - 1, g.below(3) as i64 - 1)
                }
            })
            .collect(),
        base_dilation: (0..r).map(|_| if plain { 1 } else { g.pick(&[1, 1, 2]) }).collect(),
        window_dilation: (0..r).map(|_| if plain { 1 } else { g.pick(&[1, 1, 2]) }).collect(),
    };
    match select {
        0 | 1 => {
            let op = g.pick(&[WindowOp::Sum, WindowOp::Max, WindowOp::Min]);
            b.eqn(Primitive::ReduceWindow { op, window: w }, vec![x.into()])?;
        }
        2 => {
            let select_prim = g.pick(&[CompareOp::Ge, CompareOp::Le]);
            w.base_dilation = (0..r).map(|_| g.pick(&[1, 1, 2])).collect();
            let t = b.input(xa.clone());
            b.eqn(Primitive::SelectAndGatherAdd { select_prim, window: w }, vec![t.into(), x.into()])?;
        }
        _ => {
            let select_prim = g.pick(&[CompareOp::Ge, CompareOp::Le]);
            let gathered = Primitive::SelectAndGatherAdd { select_prim, window: w.clone() };
            let windows = shape_rule(&gathered, &[xa.clone(), xa.clone()]).ok()?.remove(0);
            let source = b.input(windows);
            let prim = Primitive::SelectAndScatterAdd {
                select_prim,
                window_dimensions: w.window_dimensions,
                window_strides: w.window_strides,
                padding: w.padding,
            };
            b.eqn(prim, vec![source.into(), x.into()])?;
        }
    }
    Some(())
}
