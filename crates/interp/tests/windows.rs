//! Windowed reductions and selections on values checked by hand against JAX 0.10.2 (the
//! examples of REAL_MODELS_NOTES §6), and malformed convolutions and windows given straight
//! to the interpreter (unverified): errors that say what is wrong, never panics.

use ndarray::ArrayD;
use remat_interp::eval_primitive;
use remat_ir::{Array, Aval, CompareOp, ConvDimensionNumbers, ConvParams, DType, Param, Primitive, Window, WindowOp};

fn f32s(shape: &[usize], data: &[f32]) -> Array {
    Array::F32(ArrayD::from_shape_vec(shape.to_vec(), data.to_vec()).unwrap())
}

fn window(dims: &[usize], strides: &[usize], padding: &[(i64, i64)], base: &[usize]) -> Window {
    Window {
        window_dimensions: dims.to_vec(),
        window_strides: strides.to_vec(),
        padding: padding.to_vec(),
        base_dilation: base.to_vec(),
        window_dilation: vec![1; dims.len()],
    }
}

fn run(prim: Primitive, args: &[Array], out: &[usize]) -> Vec<f32> {
    let out = Aval::new(DType::F32, out.to_vec());
    let r = eval_primitive(&prim, args, &[out]).unwrap_or_else(|e| panic!("{prim}: {e}"));
    r[0].to_f64_vec().into_iter().map(|x| x as f32).collect()
}

#[test]
fn padding_and_holes_hold_the_identity() {
    // reduce_window(-ones(5), -inf, max, (3,), (2,), 'SAME') is [-1, -1, -1]: padding is not 0.
    let max = Primitive::ReduceWindow { op: WindowOp::Max, window: window(&[3], &[2], &[(1, 1)], &[1]) };
    assert_eq!(run(max, &[f32s(&[5], &[-1.0; 5])], &[3]), [-1.0, -1.0, -1.0]);
    // A sum over [1, 2, 3, 4] with base_dilation 2 and window 2: [1, 2, 2, 3, 3, 4].
    let sum = Primitive::ReduceWindow { op: WindowOp::Sum, window: window(&[2], &[1], &[(0, 0)], &[2]) };
    assert_eq!(run(sum, &[f32s(&[4], &[1.0, 2.0, 3.0, 4.0])], &[6]), [1.0, 2.0, 2.0, 3.0, 3.0, 4.0]);
}

#[test]
fn selections_take_the_first_maximum_and_skip_nan() {
    let w = window(&[2, 2], &[2, 2], &[(0, 0), (0, 0)], &[1, 1]);
    let scatter = |x: &[f32]| {
        let prim = Primitive::SelectAndScatterAdd {
            select_prim: CompareOp::Ge,
            window_dimensions: w.window_dimensions.clone(),
            window_strides: w.window_strides.clone(),
            padding: w.padding.clone(),
        };
        run(prim, &[f32s(&[1, 1], &[5.0]), f32s(&[2, 2], x)], &[2, 2])
    };
    assert_eq!(scatter(&[1.0, 3.0, 3.0, 2.0]), [0.0, 5.0, 0.0, 0.0]);
    assert_eq!(scatter(&[1.0, f32::NAN, 3.0, 2.0]), [0.0, 0.0, 5.0, 0.0]);
    let gather = Primitive::SelectAndGatherAdd { select_prim: CompareOp::Ge, window: w.clone() };
    let t = f32s(&[2, 2], &[10.0, 20.0, 30.0, 40.0]);
    assert_eq!(run(gather, &[t, f32s(&[2, 2], &[1.0, 3.0, 3.0, 2.0])], &[1, 1]), [20.0]);
    // Under `le` the first minimum.
    let gather = Primitive::SelectAndGatherAdd { select_prim: CompareOp::Le, window: w };
    let t = f32s(&[2, 2], &[10.0, 20.0, 30.0, 40.0]);
    assert_eq!(run(gather, &[t, f32s(&[2, 2], &[2.0, 1.0, 3.0, 1.0])], &[1, 1]), [20.0]);
}

fn conv(groups: usize, strides: Vec<usize>) -> Primitive {
    Primitive::ConvGeneralDilated(Box::new(ConvParams {
        window_strides: strides,
        padding: vec![(0, 0)],
        lhs_dilation: vec![1],
        rhs_dilation: vec![1],
        dimension_numbers: ConvDimensionNumbers {
            lhs_spec: vec![0, 1, 2],
            rhs_spec: vec![0, 1, 2],
            out_spec: vec![0, 1, 2],
        },
        feature_group_count: groups,
        batch_group_count: 1,
        precision: Param::None,
        preferred_element_type: None,
    }))
}

#[test]
fn malformed_windows_and_convolutions_are_errors() {
    let x = f32s(&[1, 2, 4], &[0.0; 8]);
    let k = f32s(&[3, 2, 2], &[0.0; 12]);
    let f = |s: &[usize]| vec![Aval::new(DType::F32, s.to_vec())];
    let bad_window = window(&[2], &[1], &[(0, 0)], &[1]);
    let cases: Vec<(Primitive, Vec<Array>, Vec<Aval>, &str)> = vec![
        (
            conv(2, vec![1]),
            vec![x.clone(), k.clone()],
            f(&[1, 3, 3]),
            "/ feature_group_count 2 must equal the rhs input feature dimension 2",
        ),
        (conv(1, vec![1, 1]), vec![x.clone(), k.clone()], f(&[1, 3, 3]), "window_strides has 2 entries"),
        (conv(1, vec![1]), vec![x.clone(), f32s(&[3, 3, 2], &[0.0; 18])], f(&[1, 3, 3]), "rhs input feature"),
        (conv(1, vec![1]), vec![x.clone()], f(&[1, 3, 3]), "expected 2 operands"),
        (
            Primitive::ReduceWindow { op: WindowOp::Sum, window: bad_window.clone() },
            vec![x.clone()],
            f(&[1, 2, 3]),
            "must have 3 entries each",
        ),
        (
            Primitive::ReduceWindow {
                op: WindowOp::Max,
                window: window(&[1, 1, 2], &[1, 0, 1], &[(0, 0); 3], &[1; 3]),
            },
            vec![x.clone()],
            f(&[1, 2, 3]),
            "strides and dilations must be positive",
        ),
        (
            Primitive::ReduceWindow {
                op: WindowOp::Sum,
                window: window(&[1, 1, usize::MAX], &[1; 3], &[(0, 0); 3], &[1; 3]),
            },
            vec![x.clone()],
            f(&[1, 2, 0]),
            "too large",
        ),
        (
            Primitive::SelectAndScatterAdd {
                select_prim: CompareOp::Ge,
                window_dimensions: vec![1, 1, 2],
                window_strides: vec![1, 1, 2],
                padding: vec![(0, 0); 3],
            },
            vec![f32s(&[1, 2, 3], &[0.0; 6]), x.clone()],
            f(&[1, 2, 4]),
            "must have the windows' shape [1, 2, 2]",
        ),
        (
            Primitive::SelectAndGatherAdd {
                select_prim: CompareOp::Ge,
                window: window(&[1, 1, 2], &[1; 3], &[(0, 0); 3], &[1; 3]),
            },
            vec![f32s(&[1, 2, 3], &[0.0; 6]), x.clone()],
            f(&[1, 2, 3]),
            "must have one type",
        ),
    ];
    for (prim, args, out_avals, want) in cases {
        match eval_primitive(&prim, &args, &out_avals) {
            Ok(r) => panic!("{prim}: expected an error containing {want:?}, got {r:?}"),
            Err(e) => assert!(e.to_string().contains(want), "{prim}: {e} (wanted {want:?})"),
        }
    }
}

/// The selection of `select_and_gather_add` and `select_and_scatter_add` compares as XLA's
/// float environment does: a subnormal is read as zero, in bf16 too (XLA compares bf16 in
/// f32). JAX 0.10.2 on CPU: `_select_and_gather_add([10, 20], [0.0, smallest subnormal],
/// ge, window 2)` is `[10]` in bf16 and f32 (the tie keeps the first). Found by the program
/// fuzzer (issue 40, seeds 7449704499798473580 and 15762730119178636892 of run 5001: the
/// JIT, which compares in f32 under DAZ, chose another element than the interpreter, which
/// compared bf16 bits).
#[test]
fn window_selections_read_subnormals_as_zeros() {
    let w = window(&[2], &[1], &[(0, 0)], &[1]);
    let sub_bf16 = remat_ir::bf16::from_bits(1);
    let bf = |v: &[remat_ir::bf16]| Array::BF16(ArrayD::from_shape_vec(vec![v.len()], v.to_vec()).unwrap());
    let tangents = bf(&[remat_ir::bf16::from_f32(10.0), remat_ir::bf16::from_f32(20.0)]);
    let operand = bf(&[remat_ir::bf16::ZERO, sub_bf16]);
    let gather = Primitive::SelectAndGatherAdd { select_prim: CompareOp::Ge, window: w.clone() };
    let out = eval_primitive(&gather, &[tangents, operand.clone()], &[Aval::new(DType::BF16, vec![1])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), [10.0]);
    let sub_f32 = f32::from_bits(1);
    let got = run(gather, &[f32s(&[2], &[10.0, 20.0]), f32s(&[2], &[0.0, sub_f32])], &[1]);
    assert_eq!(got, [10.0]);
    // The scatter selects the same element: the source lands on the first.
    let scatter = Primitive::SelectAndScatterAdd {
        select_prim: CompareOp::Ge,
        window_dimensions: w.window_dimensions,
        window_strides: w.window_strides,
        padding: w.padding,
    };
    let out =
        eval_primitive(&scatter, &[bf(&[remat_ir::bf16::from_f32(5.0)]), operand], &[Aval::new(DType::BF16, vec![2])])
            .unwrap();
    assert_eq!(out[0].to_f64_vec(), [5.0, 0.0]);
}
