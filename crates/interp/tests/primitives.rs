//! Hand-computed values for the primitives whose semantics are easy to get wrong: dot
//! dimension numbers, pad with cropping and interior padding, clamped dynamic slices, scan
//! in both directions, select_n, argmax, reduce_precision, integer_pow and integer division.

use ndarray::{ArrayD, IxDyn};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array};

fn f32s(shape: &[usize], data: &[f32]) -> Array {
    Array::F32(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("element count matches shape"))
}

fn f64s(shape: &[usize], data: &[f64]) -> Array {
    Array::F64(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("element count matches shape"))
}

fn i32s(shape: &[usize], data: &[i32]) -> Array {
    Array::I32(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("element count matches shape"))
}

fn bools(shape: &[usize], data: &[bool]) -> Array {
    Array::Bool(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("element count matches shape"))
}

/// Parses `text` and evaluates it on `args`; panics with the error on failure.
fn run(text: &str, args: &[Array]) -> Vec<Array> {
    let jaxpr = parse_jaxpr(text, "test.jaxpr").unwrap_or_else(|e| panic!("parse error: {e}\n{text}"));
    eval_jaxpr(&jaxpr, &[], args).unwrap_or_else(|e| panic!("evaluation error: {e}\n{text}"))
}

fn run1(text: &str, args: &[Array]) -> Array {
    let mut outs = run(text, args);
    assert_eq!(outs.len(), 1);
    outs.remove(0)
}

/// Float arrays equal bit for bit except that NaN equals NaN.
fn assert_same(got: &Array, want: &Array) {
    assert_eq!(got.aval(), want.aval());
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let same = g.iter().zip(&w).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
    assert!(same, "got {g:?}, want {w:?}");
}

// ---- dot_general ----

#[test]
fn dot_general_batch_dims_with_permuted_contraction() {
    // out[b] = sum_k a[k, b] * c[b, k]
    let text = "{ lambda ; a:f32[2,2] c:f32[2,2]. let d:f32[2] = dot_general[dimension_numbers=(([0], [1]), ([1], [0])) preferred_element_type=float32] a c in (d,) }";
    let out = run1(text, &[f32s(&[2, 2], &[1., 2., 3., 4.]), f32s(&[2, 2], &[5., 6., 7., 8.])]);
    // b=0: 1*5 + 3*6 = 23; b=1: 2*7 + 4*8 = 46.
    assert_same(&out, &f32s(&[2], &[23., 46.]));
}

#[test]
fn dot_general_output_is_batch_then_lhs_free_then_rhs_free() {
    // lhs axes (k, m, b) = [2, 2, 1]; rhs axes (n, b, k) = [3, 1, 2]; out axes (b, m, n).
    let text = "{ lambda ; a:f32[2,2,1] c:f32[3,1,2]. let d:f32[1,2,3] = dot_general[dimension_numbers=(([0], [2]), ([2], [1])) preferred_element_type=float32] a c in (d,) }";
    // a[k, m, 0]: k=0 -> [1, 2], k=1 -> [3, 4]; c[n, 0, k]: n=0 -> [1, 0], n=1 -> [0, 1], n=2 -> [1, 1].
    let a = f32s(&[2, 2, 1], &[1., 2., 3., 4.]);
    let c = f32s(&[3, 1, 2], &[1., 0., 0., 1., 1., 1.]);
    // out[0, m, n] = sum_k a[k, m] c[n, k]: m=0 -> [1, 3, 4]; m=1 -> [2, 4, 6].
    assert_same(&run1(text, &[a, c]), &f32s(&[1, 2, 3], &[1., 3., 4., 2., 4., 6.]));
}

#[test]
fn dot_general_two_contracting_dims_in_swapped_order() {
    // sum_{i,j} a[i, j] * c[j, i] = trace(a c)
    let text = "{ lambda ; a:f32[2,3] c:f32[3,2]. let d:f32[] = dot_general[dimension_numbers=(([0, 1], [1, 0]), ([], [])) preferred_element_type=float32] a c in (d,) }";
    let a = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let c = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    // a c = [[22, 28], [49, 64]], trace 86.
    assert_same(&run1(text, &[a, c]), &f32s(&[], &[86.]));
}

#[test]
fn dot_general_on_integers_and_outer_product() {
    let text = "{ lambda ; a:i32[2] c:i32[3]. let d:i32[2,3] = dot_general[dimension_numbers=(([], []), ([], [])) preferred_element_type=int32] a c in (d,) }";
    let out = run1(text, &[i32s(&[2], &[2, -1]), i32s(&[3], &[1, 2, 3])]);
    assert_eq!(out, i32s(&[2, 3], &[2, 4, 6, -1, -2, -3]));
}

// ---- pad, slices ----

#[test]
fn pad_with_negative_low_and_interior() {
    // interior 1: [1 0 2 0 3]; low -1 crops the 1; high 2 appends two zeros.
    let text = "{ lambda ; a:f32[3]. let b:f32[6] = pad[padding_config=((-1, 2, 1),)] a 0.0:f32[] in (b,) }";
    assert_same(&run1(text, &[f32s(&[3], &[1., 2., 3.])]), &f32s(&[6], &[0., 2., 0., 3., 0., 0.]));
}

#[test]
fn pad_two_axes_with_negative_high() {
    // axis 1 interior 1: [[1 9 2] [3 9 4]]; axis 0 low 1 adds a row of 9s, high -1 drops the last row.
    let text =
        "{ lambda ; a:f32[2,2]. let b:f32[2,3] = pad[padding_config=((1, -1, 0), (0, 0, 1))] a 9.0:f32[] in (b,) }";
    assert_same(&run1(text, &[f32s(&[2, 2], &[1., 2., 3., 4.])]), &f32s(&[2, 3], &[9., 9., 9., 1., 9., 2.]));
}

#[test]
fn pad_cropping_into_the_interior() {
    // [1 0 2 0 3] cropped by 2 on each side is [2].
    let text = "{ lambda ; a:i32[3]. let b:i32[1] = pad[padding_config=((-2, -2, 1),)] a 0:i32[] in (b,) }";
    assert_eq!(run1(text, &[i32s(&[3], &[1, 2, 3])]), i32s(&[1], &[2]));
}

#[test]
fn slice_with_strides() {
    let text =
        "{ lambda ; a:f32[7]. let b:f32[3] = slice[limit_indices=(7,) start_indices=(1,) strides=(2,)] a in (b,) }";
    assert_same(&run1(text, &[f32s(&[7], &[0., 1., 2., 3., 4., 5., 6.])]), &f32s(&[3], &[1., 3., 5.]));
}

#[test]
fn dynamic_slice_clamps_its_start() {
    let text = "{ lambda ; a:f32[5] i:i32[]. let b:f32[2] = dynamic_slice[slice_sizes=(2,)] a i in (b,) }";
    let a = f32s(&[5], &[0., 1., 2., 3., 4.]);
    let at = |i: i32| run1(text, &[a.clone(), i32s(&[], &[i])]);
    assert_same(&at(1), &f32s(&[2], &[1., 2.]));
    assert_same(&at(4), &f32s(&[2], &[3., 4.])); // start 4 clamps to 3
    assert_same(&at(-3), &f32s(&[2], &[0., 1.])); // start -3 clamps to 0
}

#[test]
fn dynamic_slice_2d_clamps_each_axis() {
    let text =
        "{ lambda ; a:i32[3,3] i:i32[] j:i32[]. let b:i32[2,2] = dynamic_slice[slice_sizes=(2, 2)] a i j in (b,) }";
    let a = i32s(&[3, 3], &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(run1(text, &[a, i32s(&[], &[5]), i32s(&[], &[-1])]), i32s(&[2, 2], &[3, 4, 6, 7]));
}

#[test]
fn dynamic_update_slice_clamps_its_start() {
    let text = "{ lambda ; a:f32[4] u:f32[2] i:i32[]. let b:f32[4] = dynamic_update_slice a u i in (b,) }";
    let out = run1(text, &[f32s(&[4], &[0.; 4]), f32s(&[2], &[1., 2.]), i32s(&[], &[3])]);
    assert_same(&out, &f32s(&[4], &[0., 0., 1., 2.]));
}

#[test]
fn layout_ops() {
    let text = "{ lambda ; a:f32[2,3]. let
        b:f32[3,2] = transpose[permutation=(1, 0)] a
        c:f32[6] = reshape[dimensions=None new_sizes=(6,) sharding=None] b
        d:f32[1,6,1] = expand_dims[dimensions=(0, 2)] c
        e:f32[6] = squeeze[dimensions=(0, 2)] d
        f:f32[2,6] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 6) sharding=None] e
        g:f32[2,9] = concatenate[dimension=1] f a
        h:f32[2,3] = iota[dimension=0 dtype=float32 shape=(2, 3) sharding=None]
      in (g, h) }";
    let outs = run(text, &[f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.])]);
    let row = [1., 4., 2., 5., 3., 6.];
    let g: Vec<f32> = [&row[..], &[1., 2., 3.], &row[..], &[4., 5., 6.]].concat();
    assert_same(&outs[0], &f32s(&[2, 9], &g));
    assert_same(&outs[1], &f32s(&[2, 3], &[0., 0., 0., 1., 1., 1.]));
}

#[test]
fn binary_ops_broadcast_scalars_and_unit_axes() {
    let text = "{ lambda ; a:f32[2,3] b:f32[1,3]. let c:f32[2,3] = sub a b d:f32[2,3] = mul 2.0:f32[] c in (d,) }";
    let out = run1(text, &[f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]), f32s(&[1, 3], &[1., 1., 1.])]);
    assert_same(&out, &f32s(&[2, 3], &[0., 2., 4., 6., 8., 10.]));
}

// ---- scan ----

const CUMSUM: &str = "{ lambda ; k:f32[] a:f32[] xs:f32[3]. let
    c:f32[] ys:f32[3] = scan[
      jaxpr={ lambda ; s:f32[] c:f32[] x:f32[]. let
          y:f32[] = mul x s
          d:f32[] = add c y
        in (d, d) }
      length=3
      num_carry=1
      num_consts=1
      reverse=REVERSE
      unroll=1
    ] k a xs
  in (c, ys) }";

#[test]
fn scan_forward_accumulates_and_stacks() {
    let outs =
        run(&CUMSUM.replace("REVERSE", "False"), &[f32s(&[], &[10.]), f32s(&[], &[0.5]), f32s(&[3], &[1., 2., 3.])]);
    assert_same(&outs[0], &f32s(&[], &[60.5]));
    assert_same(&outs[1], &f32s(&[3], &[10.5, 30.5, 60.5]));
}

#[test]
fn scan_reverse_runs_backwards_and_writes_ys_in_place() {
    // i = 2, 1, 0: carries 30.5, 50.5, 60.5, written at ys[2], ys[1], ys[0].
    let outs =
        run(&CUMSUM.replace("REVERSE", "True"), &[f32s(&[], &[10.]), f32s(&[], &[0.5]), f32s(&[3], &[1., 2., 3.])]);
    assert_same(&outs[0], &f32s(&[], &[60.5]));
    assert_same(&outs[1], &f32s(&[3], &[60.5, 50.5, 30.5]));
}

#[test]
fn scan_of_length_zero_returns_the_initial_carry() {
    let text = CUMSUM.replace("REVERSE", "False").replace("length=3", "length=0").replace("f32[3]", "f32[0]");
    let outs = run(&text, &[f32s(&[], &[10.]), f32s(&[], &[0.5]), f32s(&[0], &[])]);
    assert_same(&outs[0], &f32s(&[], &[0.5]));
    assert_same(&outs[1], &f32s(&[0], &[]));
}

// ---- select_n, clamp, argmax ----

#[test]
fn select_n_with_i32_predicate_picks_cases() {
    let text = "{ lambda ; p:i32[4] a:f32[4] b:f32[4] c:f32[4]. let d:f32[4] = select_n p a b c in (d,) }";
    let out = run1(
        text,
        &[
            i32s(&[4], &[0, 2, 1, 2]),
            f32s(&[4], &[1., 2., 3., 4.]),
            f32s(&[4], &[10., 20., 30., 40.]),
            f32s(&[4], &[100., 200., 300., 400.]),
        ],
    );
    assert_same(&out, &f32s(&[4], &[1., 200., 30., 400.]));
}

#[test]
fn select_n_with_scalar_bool_predicate() {
    let text = "{ lambda ; p:bool[] a:i32[2] b:i32[2]. let d:i32[2] = select_n p a b in (d,) }";
    let (a, b) = (i32s(&[2], &[1, 2]), i32s(&[2], &[3, 4]));
    assert_eq!(run1(text, &[bools(&[], &[true]), a.clone(), b.clone()]), b);
    assert_eq!(run1(text, &[bools(&[], &[false]), a.clone(), b]), a);
}

#[test]
fn clamp_with_scalar_bounds() {
    let text = "{ lambda ; a:f32[4]. let b:f32[4] = clamp 0.0:f32[] a 1.0:f32[] in (b,) }";
    assert_same(&run1(text, &[f32s(&[4], &[-1., 0.5, 2., f32::NAN])]), &f32s(&[4], &[0., 0.5, 1., f32::NAN]));
}

#[test]
fn argmax_takes_the_first_maximum_and_nan_wins() {
    let text = "{ lambda ; a:f32[3,4]. let b:i32[3] = argmax[axes=(1,) index_dtype=int32] a in (b,) }";
    let a = f32s(&[3, 4], &[1., 3., 3., 2., 1., f32::NAN, 5., f32::NAN, -1., -1., -1., -1.]);
    assert_eq!(run1(text, &[a]), i32s(&[3], &[1, 1, 0]));
    let text0 = "{ lambda ; a:f32[2,2]. let b:i32[2] = argmax[axes=(0,) index_dtype=int32] a in (b,) }";
    assert_eq!(run1(text0, &[f32s(&[2, 2], &[1., 7., 2., 7.])]), i32s(&[2], &[1, 0]));
}

#[test]
fn reductions_and_empty_reductions() {
    let text = "{ lambda ; a:f32[2,3] e:f32[0] n:i32[0]. let
        b:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] a
        c:f32[3] = reduce_max[axes=(0,)] a
        d:f32[] = reduce_max[axes=(0,)] e
        f:f32[] = reduce_min[axes=(0,)] e
        g:i32[] = reduce_max[axes=(0,)] n
        h:f32[] = reduce_sum[axes=(0,) out_sharding=None] e
      in (b, c, d, f, g, h) }";
    let outs = run(text, &[f32s(&[2, 3], &[1., 5., 3., 4., 2., f32::NAN]), f32s(&[0], &[]), i32s(&[0], &[])]);
    assert!(outs[0].to_f64_vec()[0].is_nan());
    assert_same(&outs[1], &f32s(&[3], &[4., 5., f32::NAN]));
    assert_same(&outs[2], &f32s(&[], &[f32::NEG_INFINITY]));
    assert_same(&outs[3], &f32s(&[], &[f32::INFINITY]));
    assert_eq!(outs[4], i32s(&[], &[i32::MIN]));
    assert_same(&outs[5], &f32s(&[], &[0.]));
}

// ---- numerics ----

#[test]
fn reduce_precision_rounds_to_nearest_even() {
    let text = "{ lambda ; a:f32[6]. let b:f32[6] = reduce_precision[exponent_bits=8 mantissa_bits=7] a in (b,) }";
    // 1.00390625 = 1 + 2^-8 is a tie and rounds down to even; 1.01171875 = 1 + 2^-7 + 2^-8
    // rounds up to 1.015625 = 1 + 2^-6; one ulp above a tie rounds away from zero.
    let (tie_down, tie_up): (f32, f32) = (1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0);
    let above_tie = -f32::from_bits(tie_down.to_bits() + 1);
    let a = f32s(&[6], &[tie_down, tie_up, 1.007_812_5, above_tie, f32::INFINITY, f32::NAN]);
    let want = f32s(&[6], &[1.0, 1.015_625, 1.007_812_5, -1.007_812_5, f32::INFINITY, f32::NAN]);
    assert_same(&run1(text, &[a]), &want);
}

#[test]
fn reduce_precision_clamps_the_exponent() {
    // half precision: 70000 overflows to inf, 1e-8 underflows to 0, 1.0 stays.
    let text = "{ lambda ; a:f32[4]. let b:f32[4] = reduce_precision[exponent_bits=5 mantissa_bits=10] a in (b,) }";
    let want = f32s(&[4], &[f32::INFINITY, f32::NEG_INFINITY, 0.0, 1.0]);
    assert_same(&run1(text, &[f32s(&[4], &[70000., -70000., 1e-8, 1.0])]), &want);
}

#[test]
fn reduce_precision_at_full_width_is_the_identity() {
    let xs = [0.1f32, -3.3e38, 1e-40, f32::MIN_POSITIVE, f32::INFINITY, f32::NAN, -0.0];
    let text = "{ lambda ; a:f32[7]. let b:f32[7] = reduce_precision[exponent_bits=8 mantissa_bits=23] a in (b,) }";
    let out = run1(text, &[f32s(&[7], &xs)]);
    let Array::F32(out) = out else { panic!("f32 result expected") };
    for (got, want) in out.iter().zip(xs) {
        assert!(got.to_bits() == want.to_bits(), "{got} != {want}");
    }
    let text64 = "{ lambda ; a:f64[2]. let b:f64[2] = reduce_precision[exponent_bits=11 mantissa_bits=52] a c:f64[2] = reduce_precision[exponent_bits=8 mantissa_bits=23] a in (b, c) }";
    let outs = run(text64, &[f64s(&[2], &[0.1, 1e-300])]);
    assert_same(&outs[0], &f64s(&[2], &[0.1, 1e-300]));
    // f64 at f32's widths rounds like a conversion to f32 (and flushes what f32 cannot hold).
    assert_same(&outs[1], &f64s(&[2], &[0.1f32 as f64, 0.0]));
}

#[test]
fn integer_pow_negative_and_zero_exponents() {
    let text = "{ lambda ; a:f32[3]. let b:f32[3] = integer_pow[y=-3] a c:f32[3] = integer_pow[y=0] a d:f32[3] = integer_pow[y=3] a in (b, c, d) }";
    let outs = run(text, &[f32s(&[3], &[2., -1.5, 0.])]);
    assert_same(&outs[0], &f32s(&[3], &[0.125, 1. / -3.375, f32::INFINITY]));
    assert_same(&outs[1], &f32s(&[3], &[1., 1., 1.]));
    assert_same(&outs[2], &f32s(&[3], &[8., -3.375, 0.]));
    // On integers, 1 / x^n divides as integers, and 1 / 0 does not panic.
    let text_i = "{ lambda ; a:i32[4]. let b:i32[4] = integer_pow[y=-1] a in (b,) }";
    assert_eq!(run1(text_i, &[i32s(&[4], &[2, 1, -1, 0])]), i32s(&[4], &[0, 1, -1, -1]));
}

#[test]
fn integer_division_truncates_and_division_by_zero_is_defined() {
    let text = "{ lambda ; a:i32[5] b:i32[5]. let c:i32[5] = div a b in (c,) }";
    let out = run1(text, &[i32s(&[5], &[7, -7, 5, i32::MIN, 0]), i32s(&[5], &[2, 2, 0, -1, 0])]);
    // XLA: x / 0 = -1, MIN / -1 = MIN.
    assert_eq!(out, i32s(&[5], &[3, -3, -1, i32::MIN, -1]));
}

#[test]
fn max_and_min_propagate_nan() {
    let text = "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = max a b d:f32[3] = min a b in (c, d) }";
    let outs = run(text, &[f32s(&[3], &[1., f32::NAN, 3.]), f32s(&[3], &[f32::NAN, 2., 4.])]);
    assert_same(&outs[0], &f32s(&[3], &[f32::NAN, f32::NAN, 4.]));
    assert_same(&outs[1], &f32s(&[3], &[f32::NAN, f32::NAN, 3.]));
}

#[test]
fn convert_element_type_truncates_and_saturates() {
    let text = "{ lambda ; a:f32[6]. let
        b:i32[6] = convert_element_type[new_dtype=int32 weak_type=False] a
        c:bool[6] = convert_element_type[new_dtype=bool weak_type=False] a
        d:f32[6] = convert_element_type[new_dtype=float32 weak_type=False] c
      in (b, c, d) }";
    let outs = run(text, &[f32s(&[6], &[1.9, -1.9, f32::NAN, 1e10, -1e10, 0.0])]);
    assert_eq!(outs[0], i32s(&[6], &[1, -1, 0, i32::MAX, i32::MIN, 0]));
    assert_eq!(outs[1], bools(&[6], &[true, true, true, true, true, false]));
    assert_same(&outs[2], &f32s(&[6], &[1., 1., 1., 1., 1., 0.]));
}

#[test]
fn unary_math_in_f32_precision() {
    let text = "{ lambda ; a:f32[3]. let
        b:f32[3] = logistic a
        c:f32[3] = rsqrt a
        d:f32[3] = sign a
        e:f32[3] = expm1 a
      in (b, c, d, e) }";
    let xs = [0.5f32, 2.0, 4.0];
    let outs = run(text, &[f32s(&[3], &xs)]);
    assert_same(&outs[0], &f32s(&[3], &xs.map(|x| 1.0 / (1.0 + (-x).exp()))));
    assert_same(&outs[1], &f32s(&[3], &xs.map(|x| 1.0 / x.sqrt())));
    assert_same(&outs[2], &f32s(&[3], &[1., 1., 1.]));
    assert_same(&outs[3], &f32s(&[3], &xs.map(f32::exp_m1)));
}

#[test]
fn calls_evaluate_their_bodies() {
    let text = "{ lambda ; a:f32[2]. let
        b:f32[2] = jit[name=f jaxpr={ lambda ; x:f32[2]. let y:f32[2] = mul x 2.0:f32[] in (y,) }] a
        c:f32[2] = remat2[differentiated=False jaxpr={ lambda ; x:f32[2]. let y:f32[2] = add x 1.0:f32[] in (y,) } policy=None prevent_cse=True] b
        d:f32[2] = name[name=n] c
      in (d,) }";
    assert_same(&run1(text, &[f32s(&[2], &[1., 2.])]), &f32s(&[2], &[3., 5.]));
}
