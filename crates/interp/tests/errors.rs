//! Bad inputs and malformed jaxprs are errors that say what is wrong and where, never panics.

use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use remat_interp::{eval_jaxpr, eval_primitive, EvalError};
use remat_ir::{parse_jaxpr, Array, Atom, Aval, DType, DotDimensionNumbers, Eqn, Jaxpr, Primitive, SourceInfo, Var};

fn f32s(shape: &[usize]) -> Array {
    Array::F32(ArrayD::zeros(IxDyn(shape)))
}

fn i32s(shape: &[usize]) -> Array {
    Array::I32(ArrayD::zeros(IxDyn(shape)))
}

/// The error message of evaluating `text` on `args`.
fn error_of(text: &str, args: &[Array]) -> String {
    let jaxpr = parse_jaxpr(text, "case.jaxpr").unwrap_or_else(|e| panic!("parse error: {e}"));
    match eval_jaxpr(&jaxpr, &[], args) {
        Ok(_) => panic!("expected an error evaluating\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_contains(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "message {message:?} should contain {part:?}");
    }
}

const MATMUL: &str = "{ lambda ; a:f32[3] b:f32[5,4]. let c:f32[4] = dot_general[dimension_numbers=(([0], [0]), ([], [])) preferred_element_type=float32] b a in (c,) }";

#[test]
fn wrong_argument_count() {
    assert_contains(&error_of(MATMUL, &[f32s(&[3])]), &["expected 2 arguments, got 1"]);
}

#[test]
fn wrong_argument_shape() {
    assert_contains(&error_of(MATMUL, &[f32s(&[3]), f32s(&[4, 5])]), &["argument 1: expected f32[5,4], got f32[4,5]"]);
}

#[test]
fn wrong_argument_dtype() {
    assert_contains(&error_of(MATMUL, &[i32s(&[3]), f32s(&[5, 4])]), &["argument 0: expected f32[3], got i32[3]"]);
}

#[test]
fn incompatible_contraction_names_the_equation() {
    // b's axis 0 (5) against a's axis 0 (3).
    let e = error_of(MATMUL, &[f32s(&[3]), f32s(&[5, 4])]);
    assert_contains(&e, &["equation 0 (dot_general at case.jaxpr:1:", "different extents", "f32[5,4]", "f32[3]"]);
}

#[test]
fn add_of_mismatched_shapes_from_text() {
    let text = "{ lambda ; a:f32[3] b:f32[4]. let\n    c:f32[3] = neg a\n    d:f32[3] = add c b\n  in (d,) }";
    let e = error_of(text, &[f32s(&[3]), f32s(&[4])]);
    assert_contains(&e, &["equation 1 (add at case.jaxpr:3:5)", "f32[3] and f32[4]", "incompatible"]);
}

#[test]
fn add_of_mismatched_shapes_built_by_hand() {
    let mut j = Jaxpr::default();
    let a = j.new_var(Aval::new(DType::F32, vec![3]));
    let b = j.new_var(Aval::new(DType::F32, vec![4]));
    let c = j.new_var(Aval::new(DType::F32, vec![3]));
    let source = SourceInfo { file: Arc::from("model.rs"), line: 12, column: 9, function: None };
    j.invars = vec![a, b];
    j.eqns.push(Eqn::new(Primitive::Binary(remat_ir::BinaryOp::Add), vec![a.into(), b.into()], vec![c], source));
    j.outvars = vec![c.into()];
    let e = eval_jaxpr(&j, &[], &[f32s(&[3]), f32s(&[4])]).expect_err("shapes differ");
    assert!(matches!(&e, EvalError::Equation { index: 0, primitive: "add", .. }), "{e:?}");
    assert_contains(&e.to_string(), &["equation 0 (add at model.rs:12:9)", "f32[3] and f32[4]"]);
}

#[test]
fn result_that_differs_from_its_binder() {
    let text = "{ lambda ; a:f32[3]. let b:f32[4] = neg a in (b,) }";
    assert_contains(
        &error_of(text, &[f32s(&[3])]),
        &["equation 0 (neg", "result 0 is f32[3], but the equation declares f32[4]"],
    );
}

#[test]
fn wrong_dtype_for_a_primitive() {
    let text = "{ lambda ; a:i32[3]. let b:i32[3] = sin a in (b,) }";
    assert_contains(&error_of(text, &[i32s(&[3])]), &["equation 0 (sin", "sin is not defined on i32"]);
}

#[test]
fn errors_inside_calls_say_which_call() {
    let text = "{ lambda ; a:f32[2]. let
        b:f32[2] = jit[name=inner jaxpr={ lambda ; x:f32[2]. let y:f32[3] = neg x in (y,) }] a
      in (b,) }";
    assert_contains(
        &error_of(text, &[f32s(&[2])]),
        &["equation 0 (jit", "jit `inner`: equation 0 (neg", "declares f32[3]"],
    );
}

#[test]
fn errors_inside_scan_say_which_iteration() {
    let text = "{ lambda ; c:f32[] xs:f32[2]. let
        d:f32[] = scan[
          jaxpr={ lambda ; c:f32[] x:f32[]. let d:f32[] = integer_pow[y=2] c e:f32[] = log d f:f32[] = dynamic_slice[slice_sizes=(1,)] e 0:i32[] in (f,) }
          length=2 num_carry=1 num_consts=0 reverse=True unroll=1
        ] c xs
      in (d,) }";
    let e = error_of(text, &[f32s(&[]), f32s(&[2])]);
    assert_contains(&e, &["scan iteration 1 of 2", "equation 2 (dynamic_slice", "slice_sizes [1] do not fit in f32[]"]);
}

#[test]
fn scan_with_short_xs() {
    let text = "{ lambda ; c:f32[] xs:f32[2]. let
        d:f32[] = scan[jaxpr={ lambda ; c:f32[] x:f32[]. let d:f32[] = add c x in (d,) } length=3 num_carry=1 num_consts=0 reverse=False unroll=1] c xs
      in (d,) }";
    assert_contains(&error_of(text, &[f32s(&[]), f32s(&[2])]), &["xs operand 0 is f32[2]", "scan length 3"]);
}

#[test]
fn unbound_and_undeclared_variables() {
    let mut j = Jaxpr::default();
    let a = j.new_var(Aval::new(DType::F32, vec![2]));
    let b = j.new_var(Aval::new(DType::F32, vec![2]));
    j.invars = vec![a];
    j.outvars = vec![b.into()];
    let e = eval_jaxpr(&j, &[], &[f32s(&[2])]).expect_err("b has no value");
    assert_contains(&e.to_string(), &["read before it has a value"]);

    j.outvars = vec![Atom::Var(Var(7))];
    let e = eval_jaxpr(&j, &[], &[f32s(&[2])]).expect_err("%7 is not declared");
    assert_contains(&e.to_string(), &["not declared"]);
}

#[test]
fn wrong_constants() {
    let mut j = Jaxpr::default();
    let k = j.new_var(Aval::new(DType::F32, vec![2]));
    j.constvars = vec![k];
    j.outvars = vec![k.into()];
    assert_contains(&eval_jaxpr(&j, &[], &[]).expect_err("no const").to_string(), &["expected 1 constants, got 0"]);
    let e = eval_jaxpr(&j, &[f32s(&[3])], &[]).expect_err("wrong const");
    assert_contains(&e.to_string(), &["constant 0: expected f32[2], got f32[3]"]);
}

/// Primitives applied directly to operands that do not fit their parameters.
#[test]
fn malformed_primitives_are_errors() {
    let x = f32s(&[2, 3]);
    let f = |shape: &[usize]| Aval::new(DType::F32, shape.to_vec());
    let cases: Vec<(Primitive, Vec<Array>, Vec<Aval>, &str)> = vec![
        (Primitive::Transpose { permutation: vec![0, 0] }, vec![x.clone()], vec![f(&[2, 3])], "not a permutation"),
        (
            Primitive::Reshape { new_sizes: vec![5], dimensions: None },
            vec![x.clone()],
            vec![f(&[5])],
            "cannot reshape f32[2,3]",
        ),
        (Primitive::Squeeze { dimensions: vec![0] }, vec![x.clone()], vec![f(&[3])], "cannot squeeze axis 0"),
        (
            Primitive::Slice { start_indices: vec![0, 2], limit_indices: vec![2, 4], strides: None },
            vec![x.clone()],
            vec![f(&[2, 2])],
            "axis 1 of f32[2,3]",
        ),
        (
            Primitive::BroadcastInDim { shape: vec![4, 3], broadcast_dimensions: vec![0, 1] },
            vec![x.clone()],
            vec![f(&[4, 3])],
            "cannot broadcast",
        ),
        (
            Primitive::Pad { padding_config: vec![(-2, -1, 0), (0, 0, 0)] },
            vec![x.clone(), f32s(&[])],
            vec![f(&[0, 3])],
            "negative extent",
        ),
        (
            Primitive::Concatenate { dimension: 0 },
            vec![x.clone(), f32s(&[2, 4])],
            vec![f(&[4, 3])],
            "does not concatenate",
        ),
        (
            Primitive::DynamicSlice { slice_sizes: vec![3, 1] },
            vec![x.clone(), i32s(&[]), i32s(&[])],
            vec![f(&[3, 1])],
            "do not fit",
        ),
        (
            Primitive::DynamicSlice { slice_sizes: vec![1, 1] },
            vec![x.clone(), i32s(&[])],
            vec![f(&[1, 1])],
            "expected 2 start indices",
        ),
        (
            Primitive::DynamicUpdateSlice,
            vec![x.clone(), f32s(&[3, 1]), i32s(&[]), i32s(&[])],
            vec![f(&[2, 3])],
            "does not fit",
        ),
        (
            Primitive::Argmax { axes: vec![1], index_dtype: DType::I32 },
            vec![f32s(&[2, 0])],
            vec![Aval::new(DType::I32, vec![2])],
            "empty axis",
        ),
        (
            Primitive::Reduce { op: remat_ir::ReduceOp::Sum, axes: vec![2] },
            vec![x.clone()],
            vec![f(&[])],
            "distinct axes",
        ),
        (
            Primitive::DotGeneral {
                dimension_numbers: DotDimensionNumbers {
                    lhs_contracting: vec![5],
                    rhs_contracting: vec![0],
                    ..Default::default()
                },
                preferred_element_type: None,
                precision: None,
            },
            vec![x.clone(), x.clone()],
            vec![f(&[])],
            "out of range",
        ),
        (
            Primitive::SelectN,
            vec![f32s(&[2, 3]), x.clone(), x.clone()],
            vec![f(&[2, 3])],
            "predicate must be bool or i32",
        ),
        (Primitive::Clamp, vec![f32s(&[3]), x.clone(), f32s(&[])], vec![f(&[2, 3])], "lower bound f32[3]"),
        (Primitive::Iota { dtype: DType::F32, shape: vec![2], dimension: 1 }, vec![], vec![f(&[2])], "out of range"),
        (Primitive::Name { name: "n".into() }, vec![], vec![], "expected 1 operand, got 0"),
        (
            Primitive::ReducePrecision { exponent_bits: 0, mantissa_bits: 3 },
            vec![x.clone()],
            vec![f(&[2, 3])],
            "at least 1",
        ),
        (
            Primitive::Unary(remat_ir::UnaryOp::Neg),
            vec![x.clone()],
            vec![],
            "computed 1 results, but the equation declares 0",
        ),
    ];
    for (prim, args, out_avals, want) in cases {
        match eval_primitive(&prim, &args, &out_avals) {
            Ok(_) => panic!("{prim} should fail"),
            Err(e) => assert_contains(&e.to_string(), &[want]),
        }
    }
}
