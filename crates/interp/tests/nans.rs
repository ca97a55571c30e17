//! `eval_closed_checking_nans`, the interpreter's `jax_debug_nans`: a NaN in an argument, or
//! the equation that first produced one, named with where and what; NaNs carried along are
//! not blamed on the equations that carry them.

use ndarray::{ArrayD, IxDyn};
use remat_interp::{eval_closed, eval_closed_checking_nans, EvalError};
use remat_ir::{parse_jaxpr, Array, ClosedJaxpr};

fn f32s(shape: &[usize], data: &[f32]) -> Array {
    Array::F32(ArrayD::from_shape_vec(IxDyn(shape), data.to_vec()).expect("shape matches data"))
}

fn closed(text: &str) -> ClosedJaxpr {
    let jaxpr = parse_jaxpr(text, "case.jaxpr").unwrap_or_else(|e| panic!("parse error: {e}"));
    ClosedJaxpr { jaxpr: jaxpr.into(), consts: vec![] }
}

fn nan_error(text: &str, args: &[Array]) -> String {
    match eval_closed_checking_nans(&closed(text), args) {
        Ok(outs) => panic!("expected a NaN error, got {outs:?}"),
        Err(e) => e.to_string(),
    }
}

const LOG_THEN_SCALE: &str = "{ lambda ; a:f32[3] b:f32[2,2]. let
    c:f32[3] = log a
    d:f32[3] = mul c 2.0:f32[]
    e:f32[2,2] = neg b
  in (d, e) }";

#[test]
fn an_argument_holding_nan_is_named_with_its_index() {
    let e = nan_error(LOG_THEN_SCALE, &[f32s(&[3], &[1., 2., 3.]), f32s(&[2, 2], &[0., 1., f32::NAN, 3.])]);
    assert_eq!(e, "argument 1 holds NaN at [1, 0]");
}

#[test]
fn the_equation_that_makes_a_nan_is_named_not_the_ones_that_carry_it() {
    let e = nan_error(LOG_THEN_SCALE, &[f32s(&[3], &[1., -1., 3.]), f32s(&[2, 2], &[0.; 4])]);
    assert_eq!(e, "equation 0 (log at case.jaxpr:2:5): result 0 holds the first NaN, at [1]: no operand passed in or computed holds one");
}

#[test]
fn zero_over_zero_in_a_scalar() {
    let text = "{ lambda ; a:f32[]. let b:f32[] = sub a a c:f32[] = div b b in (c,) }";
    let e = nan_error(text, &[f32s(&[], &[2.])]);
    assert!(e.starts_with("equation 1 (div at case.jaxpr:1:"), "{e}");
    assert!(e.ends_with("result 0 holds the first NaN, at []: no operand passed in or computed holds one"), "{e}");
}

#[test]
fn nans_made_inside_called_jaxprs_and_scan_iterations_name_the_inner_equation() {
    let jit = "{ lambda ; a:f32[2]. let
    b:f32[2] = jit[
      name=inner
      jaxpr={ lambda ; c:f32[2]. let d:f32[2] = sqrt c in (d,) }
    ] a
  in (b,) }";
    let e = nan_error(jit, &[f32s(&[2], &[4., -4.])]);
    assert!(e.starts_with("equation 0 (jit"), "{e}");
    assert!(e.contains("equation 0 (sqrt"), "{e}");
    assert!(e.ends_with("result 0 holds the first NaN, at [1]: no operand passed in or computed holds one"), "{e}");

    let scan = "{ lambda ; a:f32[] xs:f32[3]. let
    c:f32[] ys:f32[3] = scan[
      jaxpr={ lambda ; c:f32[] x:f32[]. let
          y:f32[] = log x
          d:f32[] = add c y
        in (d, d) }
      length=3
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a xs
  in (c, ys) }";
    let e = nan_error(scan, &[f32s(&[], &[0.]), f32s(&[3], &[1., 2., -3.])]);
    assert!(e.contains("iteration 2"), "{e}");
    assert!(e.contains("(log"), "{e}");
    assert!(e.ends_with("result 0 holds the first NaN, at []: no operand passed in or computed holds one"), "{e}");
}

#[test]
fn without_nans_the_values_are_the_interpreters() {
    let args = [f32s(&[3], &[1., 2., 3.]), f32s(&[2, 2], &[0., 1., 2., 3.])];
    let checked = eval_closed_checking_nans(&closed(LOG_THEN_SCALE), &args).expect("no NaN");
    let plain = eval_closed(&closed(LOG_THEN_SCALE), &args).expect("evaluates");
    assert_eq!(checked, plain);
}

#[test]
fn the_check_ends_with_the_call_that_asked_for_it() {
    let args = [f32s(&[3], &[1., -1., 3.]), f32s(&[2, 2], &[0.; 4])];
    assert!(matches!(
        eval_closed_checking_nans(&closed(LOG_THEN_SCALE), &args),
        Err(EvalError::Equation { index: 0, .. })
    ));
    // Plain evaluation afterwards propagates the NaN, as JAX does.
    let outs = eval_closed(&closed(LOG_THEN_SCALE), &args).expect("evaluates");
    assert!(outs[0].first_nan() == Some(vec![1]));
}

#[test]
fn a_nan_literal_is_blamed_where_it_is_first_read() {
    let text = "{ lambda ; a:f32[2]. let
    b:f32[2] = sin a
    c:f32[2] = add b nan:f32[]
    d:f32[2] = cos c
  in (d,) }";
    let e = nan_error(text, &[f32s(&[2], &[1., 2.])]);
    assert!(e.starts_with("equation 1 (add at case.jaxpr:3:5): result 0 holds the first NaN, at [0]"), "{e}");
}

#[test]
fn integer_and_boolean_values_never_hold_nan() {
    let text = "{ lambda ; a:i32[2] b:bool[2]. let c:i32[2] = neg a in (c, b) }";
    let args = [
        Array::I32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1, 2]).expect("shape")),
        Array::Bool(ArrayD::from_shape_vec(IxDyn(&[2]), vec![true, false]).expect("shape")),
    ];
    assert!(eval_closed_checking_nans(&closed(text), &args).is_ok());
}
