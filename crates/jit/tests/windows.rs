//! Convolutions, windowed reductions, selections, `cond` and `while` on the values where the
//! JIT's lowering could differ from the interpreter: 16-bit floats (stored narrow, summed in
//! `f32` and rounded once, moved by their bits) and non-finite values meeting a padded or
//! dilated convolution's holes (which the interpreter, as XLA's evaluator, skips).

mod common;

use common::check_bits;
use remat_ir::{
    bf16, f16, shape_rule, Array, Atom, Aval, ClosedJaxpr, CompareOp, ConvDimensionNumbers, ConvParams, DType, Eqn,
    Jaxpr, Param, Primitive, SourceInfo, UnaryOp, Window, WindowOp,
};

/// A jaxpr of one equation `prim` on fresh inputs of `in_avals`.
fn one_eqn(prim: Primitive, in_avals: &[Aval]) -> Jaxpr {
    let outs = shape_rule(&prim, in_avals).expect("the shape rules accept it");
    let mut j = Jaxpr::default();
    let ins: Vec<Atom> = in_avals
        .iter()
        .map(|a| {
            let v = j.new_var(a.clone());
            j.invars.push(v);
            v.into()
        })
        .collect();
    let outs: Vec<_> = outs.into_iter().map(|a| j.new_var(a)).collect();
    j.outvars = outs.iter().map(|&v| v.into()).collect();
    j.eqns.push(Eqn::new(prim, ins, outs, SourceInfo::unknown()));
    j
}

fn run_both(j: &Jaxpr, args: &[Array]) -> (Vec<Array>, Vec<Array>) {
    let want = remat_interp::eval_jaxpr(j, &[], args).expect("the interpreter runs it");
    let got = remat_jit::compile(j).expect("compiles").run(args).expect("runs");
    (got, want)
}

/// Both backends, bit for bit (every NaN of a dtype alike).
fn same(what: &str, j: &Jaxpr, args: &[Array]) {
    let (got, want) = run_both(j, args);
    check_bits(what, &got, &want).unwrap();
}

/// `n` values of `dtype` cycling through `xs`, shaped `shape`.
fn array(dtype: DType, shape: &[usize], xs: &[f32]) -> Array {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| xs[i % xs.len()]).collect();
    let f32s = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), v).expect("shape");
    match dtype {
        DType::F32 => Array::F32(f32s),
        DType::BF16 => Array::BF16(f32s.mapv(bf16::from_f32)),
        DType::F16 => Array::F16(f32s.mapv(f16::from_f32)),
        other => panic!("no {other} arrays here"),
    }
}

/// Values where 16-bit floats differ: ties of rounding, specials, subnormals.
const SPECIALS: [f32; 12] =
    [1.0, -0.0, 1.0 + 1.0 / 256.0, f32::NAN, 3.0, f32::INFINITY, -2.5, 6e-8, 0.33333, -65504.0, 7.0, 1e-3];

fn conv_params(ns: usize, padding: (i64, i64), lhs_dilation: usize, pref: Option<DType>) -> ConvParams {
    let iota: Vec<usize> = (0..ns + 2).collect();
    ConvParams {
        window_strides: vec![1; ns],
        padding: vec![padding; ns],
        lhs_dilation: vec![lhs_dilation; ns],
        rhs_dilation: vec![1; ns],
        dimension_numbers: ConvDimensionNumbers { lhs_spec: iota.clone(), rhs_spec: iota.clone(), out_spec: iota },
        feature_group_count: 1,
        batch_group_count: 1,
        precision: Param::None,
        preferred_element_type: pref,
    }
}

/// A 16-bit float convolution multiplies and accumulates in f32 and rounds once: 3000
/// products of ones give 3008 in `bf16` (rounding after each addition would stop at 256),
/// both through the in-place reduction (few products per output) and through the GEMM.
#[test]
fn a_narrow_convolution_rounds_once() {
    for (features, width) in [(1, 3000), (3000, 1), (100, 30)] {
        let lhs = array(DType::BF16, &[1, features, width], &[1.0]);
        let rhs = array(DType::BF16, &[1, features, width], &[1.0]);
        let c = conv_params(1, (0, 0), 1, None);
        let j = one_eqn(Primitive::ConvGeneralDilated(Box::new(c)), &[lhs.aval(), rhs.aval()]);
        let (got, want) = run_both(&j, &[lhs, rhs]);
        assert_eq!(got[0].to_f64_vec(), vec![3008.0], "{features} x {width}");
        check_bits("bf16 ones", &got, &want).unwrap();
    }
}

/// Narrow convolutions of every path (in place, GEMM, padded, dilated, f32 result) whose
/// f32 sums are exact in any order, so both backends agree bit for bit.
#[test]
fn narrow_convolutions_agree() {
    let small = [1.0, -2.0, 0.5, 3.0, -0.25, 4.0];
    for dtype in [DType::BF16, DType::F16] {
        for (features, out, pad, dil, pref) in [
            (2, 1, (0, 0), 1, None),
            (2, 3, (1, 2), 2, None),
            (16, 8, (1, 1), 1, None),
            (16, 8, (2, 0), 2, Some(DType::F32)),
            (3, 2, (-1, 1), 1, Some(DType::F32)),
        ] {
            let lhs = array(dtype, &[2, features, 5, 4], &small);
            let rhs = array(dtype, &[out, features, 3, 2], &small[1..]);
            let c = conv_params(2, pad, dil, pref);
            let j = one_eqn(Primitive::ConvGeneralDilated(Box::new(c)), &[lhs.aval(), rhs.aval()]);
            same(&format!("{dtype} conv {features}x{out} pad {pad:?} dil {dil} {pref:?}"), &j, &[lhs, rhs]);
        }
    }
}

/// With `inf` and NaN in the kernel, a padded or base-dilated convolution forms no product
/// at a hole: the JIT's zeros there must not make `0 * inf = NaN`. Finite kernels take the
/// GEMM or in-place path; the operand's own specials meet real taps in both backends.
#[test]
fn holes_meet_no_infinity() {
    for dtype in [DType::F32, DType::BF16] {
        for (features, out) in [(2, 1), (16, 8)] {
            for (pad, dil) in [((1, 2), 1), ((0, 0), 2), ((2, -1), 3)] {
                for kernel in [&[1.0, f32::INFINITY, -2.0][..], &[f32::NAN, 0.5, f32::NEG_INFINITY], &[0.5, -1.0]] {
                    let lhs = array(dtype, &[1, features, 4, 3], &[1.0, -0.5, 2.0, 0.25, 3.0]);
                    let rhs = array(dtype, &[out, features, 2, 3], kernel);
                    let c = conv_params(2, pad, dil, None);
                    let j = one_eqn(Primitive::ConvGeneralDilated(Box::new(c)), &[lhs.aval(), rhs.aval()]);
                    let what = format!("{dtype} {features}x{out} pad {pad:?} dil {dil} kernel {kernel:?}");
                    let (got, want) = run_both(&j, &[lhs, rhs]);
                    let nans = |a: &Array| a.to_f64_vec().iter().filter(|v| v.is_nan()).count();
                    assert_eq!(nans(&got[0]), nans(&want[0]), "{what}: NaNs");
                    remat_testkit::check_close(&what, &got, &want, 1e-2, 1e-3).unwrap();
                }
            }
        }
    }
}

/// `reduce_window_*` of 16-bit floats: sums in f32 rounded once (the same order in both
/// backends), `max`/`min` moving values, over padded and dilated windows with specials.
#[test]
fn narrow_windowed_reductions_agree() {
    for dtype in [DType::BF16, DType::F16] {
        let x = array(dtype, &[5, 7], &SPECIALS);
        for op in [WindowOp::Sum, WindowOp::Max, WindowOp::Min] {
            for (pad, base, wdil) in [((0, 0), 1, 1), ((1, 2), 2, 1), ((-1, 1), 1, 2)] {
                let w = Window {
                    window_dimensions: vec![2, 3],
                    window_strides: vec![1, 2],
                    padding: vec![pad; 2],
                    base_dilation: vec![base; 2],
                    window_dilation: vec![wdil; 2],
                };
                let j = one_eqn(Primitive::ReduceWindow { op, window: w }, &[x.aval()]);
                same(&format!("{dtype} {op:?} pad {pad:?} base {base} wdil {wdil}"), &j, std::slice::from_ref(&x));
            }
        }
        // 3000 ones in one window: 3008 in bf16, as reduce_sum.
        let ones = array(dtype, &[3000], &[1.0]);
        let w = Window {
            window_dimensions: vec![3000],
            window_strides: vec![1],
            padding: vec![(0, 0)],
            base_dilation: vec![1],
            window_dilation: vec![1],
        };
        let j = one_eqn(Primitive::ReduceWindow { op: WindowOp::Sum, window: w }, &[ones.aval()]);
        let (got, _) = run_both(&j, std::slice::from_ref(&ones));
        assert_eq!(got[0].to_f64_vec(), vec![if dtype == DType::BF16 { 3008.0 } else { 3000.0 }]);
        same(&format!("{dtype} window of ones"), &j, &[ones]);
    }
}

/// `select_and_gather_add` and `select_and_scatter_add` of 16-bit floats: selections
/// compare narrow values, the scatter rounds after each addition, as the interpreter's.
#[test]
fn narrow_selections_agree() {
    for dtype in [DType::BF16, DType::F16] {
        let x = array(dtype, &[6, 5], &SPECIALS);
        let t = array(dtype, &[6, 5], &[0.1, -3.0, 1.0 + 1.0 / 256.0, 2.0, f32::NAN]);
        for select_prim in [CompareOp::Ge, CompareOp::Le] {
            let w = Window {
                window_dimensions: vec![2, 3],
                window_strides: vec![1, 1],
                padding: vec![(1, 0), (0, 1)],
                base_dilation: vec![1, 1],
                window_dilation: vec![1, 1],
            };
            let gather = Primitive::SelectAndGatherAdd { select_prim, window: w.clone() };
            let j = one_eqn(gather.clone(), &[t.aval(), x.aval()]);
            same(&format!("{dtype} gather {select_prim:?}"), &j, &[t.clone(), x.clone()]);
            let windows = shape_rule(&gather, &[x.aval(), x.aval()]).expect("windows").remove(0);
            // Sources that round when added: 1 + 2^-8 in bf16, ties at f16's precision.
            let source = array(dtype, &windows.shape, &[1.0, 0.00390625, 0.0004882, 3.0, -1.0]);
            let scatter = Primitive::SelectAndScatterAdd {
                select_prim,
                window_dimensions: w.window_dimensions.clone(),
                window_strides: w.window_strides.clone(),
                padding: w.padding.clone(),
            };
            let j = one_eqn(scatter, &[source.aval(), x.aval()]);
            same(&format!("{dtype} scatter {select_prim:?}"), &j, &[source, x.clone()]);
        }
    }
}

/// `x -> op(x)` as a closed body.
fn unary_body(aval: &Aval, op: UnaryOp) -> ClosedJaxpr {
    let mut j = Jaxpr::default();
    let x = j.new_var(aval.clone());
    j.invars.push(x);
    let y = j.new_var(aval.clone());
    j.eqns.push(Eqn::new(Primitive::Unary(op), vec![x.into()], vec![y], SourceInfo::unknown()));
    j.outvars = vec![y.into()];
    ClosedJaxpr::new(std::sync::Arc::new(j))
}

/// `cond` and `while` carry 16-bit floats by their bits (NaN payloads too) and round each
/// body's arithmetic as elementwise code does.
#[test]
fn narrow_cond_and_while_agree() {
    for dtype in [DType::BF16, DType::F16] {
        let x = array(dtype, &[3, 4], &SPECIALS);
        let aval = x.aval();
        let branches = vec![unary_body(&aval, UnaryOp::Neg), unary_body(&aval, UnaryOp::Sqrt)];
        let mut j =
            one_eqn(Primitive::Cond { branches, branches_platforms: None }, &[Aval::scalar(DType::I32), aval.clone()]);
        for k in [0, 1, 7] {
            let args = [Array::I32(ndarray::arr0(k).into_dyn()), x.clone()];
            let (got, want) = run_both(&j, &args);
            assert!(common::same_bits(&got[0], &want[0]), "{dtype} cond {k}: {got:?} against {want:?}");
        }
        // while k < 3: (k, x) = (k + 1, x * 1.00390625 rounded)
        let mut cond = Jaxpr::default();
        let (k, c) = (cond.new_var(Aval::scalar(DType::I32)), cond.new_var(aval.clone()));
        cond.invars = vec![k, c];
        let p = cond.new_var(Aval::scalar(DType::Bool));
        let three = Atom::Lit(remat_ir::Literal::new(remat_ir::LitValue::I32(3)));
        cond.eqns.push(Eqn::new(
            Primitive::Compare(CompareOp::Lt),
            vec![k.into(), three],
            vec![p],
            SourceInfo::unknown(),
        ));
        cond.outvars = vec![p.into()];
        let mut body = Jaxpr::default();
        let (k, c) = (body.new_var(Aval::scalar(DType::I32)), body.new_var(aval.clone()));
        body.invars = vec![k, c];
        let (k1, c1) = (body.new_var(Aval::scalar(DType::I32)), body.new_var(aval.clone()));
        let one = Atom::Lit(remat_ir::Literal::new(remat_ir::LitValue::I32(1)));
        let step = Atom::Lit(remat_ir::Literal::new(remat_ir::LitValue::from_f64(dtype, 1.00390625)));
        body.eqns.push(Eqn::new(
            Primitive::Binary(remat_ir::BinaryOp::Add),
            vec![k.into(), one],
            vec![k1],
            SourceInfo::unknown(),
        ));
        body.eqns.push(Eqn::new(
            Primitive::Binary(remat_ir::BinaryOp::Mul),
            vec![c.into(), step],
            vec![c1],
            SourceInfo::unknown(),
        ));
        body.outvars = vec![k1.into(), c1.into()];
        let prim = Primitive::While {
            cond_jaxpr: ClosedJaxpr::new(std::sync::Arc::new(cond)),
            body_jaxpr: ClosedJaxpr::new(std::sync::Arc::new(body)),
            cond_nconsts: 0,
            body_nconsts: 0,
        };
        j = one_eqn(prim, &[Aval::scalar(DType::I32), aval.clone()]);
        let args = [Array::I32(ndarray::arr0(0).into_dyn()), x.clone()];
        let (got, want) = run_both(&j, &args);
        for (g, w) in got.iter().zip(&want) {
            assert!(common::same_bits(g, w), "{dtype} while: {got:?} against {want:?}");
        }
    }
}

/// A convolution whose im2col copy would exceed 4 MiB copies its patches a block of rows at
/// a time (a loop over the leading M axes, each block multiplied into its rows of the
/// result): the planned peak stays below the whole copy (which alone would be a temporary
/// of `patch_bytes`), and the result is the
/// interpreter's, bit for bit (values whose f32 sums are exact in any order). Three
/// layouts: NCHW and NHWC forward convolutions (patches copied `[M, K]`, blocked by the
/// batch) and the weight gradient JAX emits for NHWC (`lhs_spec=(3, 0, 1, 2)`: patches
/// copied `[K, M]`, blocked by an output row of the 3x3 kernel).
#[test]
fn large_convolutions_copy_their_patches_in_blocks() {
    let small = [1.0, -2.0, 0.5, 3.0, -0.25, 4.0];
    let (n, c, hw, o) = (4usize, 32usize, 32usize, 32usize);
    let patch_bytes = n * hw * hw * c * 9 * 4;
    assert!(patch_bytes > 4 << 20);
    let spec = |lhs: [usize; 4], rhs: [usize; 4], out: [usize; 4]| ConvDimensionNumbers {
        lhs_spec: lhs.to_vec(),
        rhs_spec: rhs.to_vec(),
        out_spec: out.to_vec(),
    };
    let cases = [
        ("NCHW forward", spec([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]), [n, c, hw, hw], [o, c, 3, 3]),
        ("NHWC forward", spec([0, 3, 1, 2], [3, 2, 0, 1], [0, 3, 1, 2]), [n, hw, hw, c], [3, 3, c, o]),
        ("NHWC weight gradient", spec([3, 0, 1, 2], [3, 0, 1, 2], [2, 3, 0, 1]), [n, hw, hw, c], [n, hw, hw, o]),
    ];
    for (what, dn, lhs_shape, rhs_shape) in cases {
        let lhs = array(DType::F32, &lhs_shape, &small);
        let rhs = array(DType::F32, &rhs_shape, &small[2..]);
        let c = ConvParams { dimension_numbers: dn, ..conv_params(2, (1, 1), 1, None) };
        let j = one_eqn(Primitive::ConvGeneralDilated(Box::new(c)), &[lhs.aval(), rhs.aval()]);
        let plan = remat_jit::memory_plan(&j, &[], &remat_jit::Options::default()).unwrap();
        assert!(
            plan.peak_bytes < patch_bytes,
            "{what}: planned peak {} of {patch_bytes} bytes of patches",
            plan.peak_bytes
        );
        same(what, &j, &[lhs, rhs]);
    }
}
