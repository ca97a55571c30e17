//! The programs of `rules.rs` for convolutions and windowed reductions: each convolution's
//! jvp (bilinear) and both transposes over strides, dilations, negative padding and groups;
//! `reduce_window_*` (sum linear, max and min through `select_and_gather_add`, whose
//! transpose is `select_and_scatter_add`, base-dilated too); and the two selections.

use remat_ir::{CompareOp, ConvDimensionNumbers, ConvParams, Param, Primitive, Window, WindowOp};

use super::{bind1, n, program, Program};
use remat_ad::linearize;

struct Conv<'a> {
    strides: &'a [usize],
    padding: &'a [(i64, i64)],
    lhs_dilation: &'a [usize],
    rhs_dilation: &'a [usize],
    specs: [&'a [usize]; 3],
    groups: (usize, usize),
}

fn conv(c: Conv) -> Primitive {
    Primitive::ConvGeneralDilated(Box::new(ConvParams {
        window_strides: c.strides.to_vec(),
        padding: c.padding.to_vec(),
        lhs_dilation: c.lhs_dilation.to_vec(),
        rhs_dilation: c.rhs_dilation.to_vec(),
        dimension_numbers: ConvDimensionNumbers {
            lhs_spec: c.specs[0].to_vec(),
            rhs_spec: c.specs[1].to_vec(),
            out_spec: c.specs[2].to_vec(),
        },
        feature_group_count: c.groups.0,
        batch_group_count: c.groups.1,
        precision: Param::None,
        preferred_element_type: None,
    }))
}

fn window(dims: &[usize], strides: &[usize], padding: &[(i64, i64)], base: &[usize], wdil: &[usize]) -> Window {
    Window {
        window_dimensions: dims.to_vec(),
        window_strides: strides.to_vec(),
        padding: padding.to_vec(),
        base_dilation: base.to_vec(),
        window_dilation: wdil.to_vec(),
    }
}

pub(super) fn programs() -> Vec<Program> {
    let mut ps = Vec::new();
    let convs = [
        (
            "conv_2d_nhwc_strided",
            vec![2, 5, 6, 3],
            vec![3, 3, 3, 4],
            Conv {
                strides: &[2, 1],
                padding: &[(1, 1), (0, 2)],
                lhs_dilation: &[1, 1],
                rhs_dilation: &[1, 1],
                specs: [&[0, 3, 1, 2], &[3, 2, 0, 1], &[0, 3, 1, 2]],
                groups: (1, 1),
            },
        ),
        (
            "conv_1d_groups_dilated",
            vec![2, 4, 7],
            vec![6, 2, 3],
            Conv {
                strides: &[1],
                padding: &[(2, -1)],
                lhs_dilation: &[2],
                rhs_dilation: &[2],
                specs: [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
                groups: (2, 1),
            },
        ),
        (
            "conv_3d_batch_groups",
            vec![4, 2, 3, 4, 3],
            vec![4, 2, 2, 2, 1],
            Conv {
                strides: &[1, 2, 1],
                padding: &[(0, 1), (1, 0), (0, 0)],
                lhs_dilation: &[1, 1, 1],
                rhs_dilation: &[1, 1, 1],
                specs: [&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]],
                groups: (1, 2),
            },
        ),
        (
            "conv_2d_depthwise_transposed",
            vec![2, 4, 4, 4],
            vec![3, 3, 1, 4],
            Conv {
                strides: &[1, 1],
                padding: &[(1, 2), (2, 1)],
                lhs_dilation: &[2, 2],
                rhs_dilation: &[1, 2],
                specs: [&[0, 3, 1, 2], &[3, 2, 0, 1], &[0, 3, 1, 2]],
                groups: (4, 1),
            },
        ),
    ];
    for (name, l, r, c) in convs {
        let prim = conv(c);
        ps.push(program(name, &[n(&l), n(&r)], |b, x| vec![bind1(b, prim, vec![x[0], x[1]])]));
    }
    for op in [WindowOp::Sum, WindowOp::Max, WindowOp::Min] {
        // JAX's max/min vjp rejects window dilation (`window_dilation_has_no_vjp` below).
        let wdil: &[usize] = if op == WindowOp::Sum { &[1, 2] } else { &[1, 1] };
        let w = window(&[2, 3], &[1, 2], &[(1, 0), (2, 1)], &[1, 2], wdil);
        let prim = Primitive::ReduceWindow { op, window: w };
        ps.push(program(&format!("{}_dilated", remat_ir::reduce_window_name(op)), &[n(&[3, 7])], |b, x| {
            vec![bind1(b, prim, vec![x[0]])]
        }));
    }
    // Max pooling as differentiated in the zoo (its vjp is select_and_scatter_add), and with
    // a dilated base (the transpose pads with -inf and slices).
    for (name, w) in [
        ("max_pool_overlapping", window(&[1, 3, 3], &[1, 2, 2], &[(0, 0), (1, 1), (1, 1)], &[1, 1, 1], &[1, 1, 1])),
        ("max_pool_base_dilated", window(&[2, 2], &[1, 2], &[(0, 1), (1, 0)], &[2, 1], &[1, 1])),
    ] {
        let prim = Primitive::ReduceWindow { op: WindowOp::Max, window: w };
        let shape = if name.contains("overlapping") { vec![2, 5, 5] } else { vec![3, 5] };
        ps.push(program(name, &[n(&shape)], |b, x| vec![bind1(b, prim, vec![x[0]])]));
    }
    let sel = window(&[2, 3], &[2, 1], &[(1, 0), (0, 1)], &[1, 1], &[1, 1]);
    let gather = Primitive::SelectAndGatherAdd { select_prim: CompareOp::Ge, window: sel.clone() };
    ps.push(program("select_and_gather_add", &[n(&[4, 5]), n(&[4, 5])], |b, x| {
        vec![bind1(b, gather, vec![x[0], x[1]])]
    }));
    let scatter = Primitive::SelectAndScatterAdd {
        select_prim: CompareOp::Le,
        window_dimensions: sel.window_dimensions.clone(),
        window_strides: sel.window_strides.clone(),
        padding: sel.padding.clone(),
    };
    ps.push(program("select_and_scatter_add", &[n(&[2, 4]), n(&[4, 5])], |b, x| {
        vec![bind1(b, scatter, vec![x[0], x[1]])]
    }));
    ps
}

/// As in JAX, a max pool with window dilation has a jvp but no vjp: transposing its
/// `select_and_gather_add` is a clear error, not a wrong gradient.
#[test]
fn window_dilation_has_no_vjp() {
    let w = window(&[2, 2], &[1, 1], &[(0, 0), (0, 0)], &[1, 1], &[1, 2]);
    let prim = Primitive::ReduceWindow { op: WindowOp::Max, window: w };
    let p = program("max_pool_window_dilated", &[n(&[3, 5])], |b, x| vec![bind1(b, prim, vec![x[0]])]);
    let lin = linearize(&p.jaxpr).expect("the jvp exists");
    let mut linear = vec![false; lin.num_res];
    linear.push(true);
    let Err(err) = remat_ad::transpose_jaxpr(&lin.tangent, &linear) else {
        panic!("a window-dilated max pool transposed")
    };
    assert!(
        err.to_string().contains("VJP not implemented for select_and_gather (MaxPool) with window dilation"),
        "{err}"
    );
}
