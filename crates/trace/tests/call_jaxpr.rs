//! `call_jaxpr`: a jaxpr made elsewhere, called inside a trace, records one `jit` equation
//! that computes what the jaxpr computes; its constants become the trace's; bad operands
//! are the trace's located error.

use std::sync::Arc;

use ndarray::{arr1, ArrayD, IxDyn};
use remat_interp::eval_jaxpr;
use remat_ir::{Array, Aval, ClosedJaxpr, DType};
use remat_trace::{call_jaxpr, make_jaxpr, named, numpy};

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

fn vector(values: &[f32]) -> Array {
    Array::F32(arr1(values).into_dyn())
}

fn run(closed: &ClosedJaxpr, args: &[Array]) -> Vec<Vec<f64>> {
    let outs = eval_jaxpr(&closed.jaxpr, &closed.consts, args).expect("evaluates");
    outs.iter().map(Array::to_f64_vec).collect()
}

#[test]
fn a_called_jaxpr_is_one_jit_equation_with_its_results() {
    // (x, y) -> (x * y, sin x), made by another trace.
    let inner = make_jaxpr(|(x, y)| (&x * &y, x.sin()), &(f32s(&[3]), f32s(&[3]))).expect("inner").jaxpr;
    let outer = make_jaxpr(
        |(a, b)| {
            let outs = call_jaxpr("pair", &inner, &[a.clone(), b]);
            (&outs[0] + &a, outs[1].clone())
        },
        &(named("a", f32s(&[3])), named("b", f32s(&[3]))),
    )
    .expect("outer");
    let text = outer.to_string();
    assert!(text.contains("jit[\n      name=pair"), "{text}");
    assert_eq!(outer.jaxpr.jaxpr.eqns.len(), 2, "{text}");
    let got = run(&outer.jaxpr, &[vector(&[1.0, 2.0, 3.0]), vector(&[4.0, 5.0, 6.0])]);
    assert_eq!(got[0], [5.0, 12.0, 21.0]);
    assert_eq!(got[1], [1f32.sin(), 2f32.sin(), 3f32.sin()].map(f64::from));
}

#[test]
fn the_called_jaxprs_constants_become_the_traces() {
    let table = Array::F32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![10.0, 20.0]).expect("shape"));
    let inner = make_jaxpr(|x| &x + &numpy::constant(table.clone()), &f32s(&[2])).expect("inner").jaxpr;
    assert_eq!(inner.consts.len(), 1);
    let outer = make_jaxpr(|x| call_jaxpr("plus_table", &inner, &[x]).remove(0) * 2.0, &f32s(&[2])).expect("outer");
    assert_eq!(outer.jaxpr.consts, inner.consts, "the constant is a constvar of the outer trace");
    assert!(outer.jaxpr.jaxpr.eqns[0].primitive.subjaxprs()[0].constvars.is_empty());
    assert_eq!(run(&outer.jaxpr, &[vector(&[1.0, 2.0])])[0], [22.0, 44.0]);
}

#[test]
fn operands_of_the_wrong_type_are_a_located_error() {
    let inner = ClosedJaxpr::new(Arc::new(
        make_jaxpr(|x: remat_trace::Tensor| x.sin(), &f32s(&[3])).expect("inner").jaxpr.jaxpr.as_ref().clone(),
    ));
    let line = line!() + 1;
    let err = make_jaxpr(|x| call_jaxpr("g", &inner, &[x]).remove(0), &f32s(&[4])).unwrap_err();
    assert_eq!(err.location.line, line, "{err}");
    assert!(err.message.contains("f32[4]") && err.message.contains("f32[3]"), "{err}");
    let err = make_jaxpr(|x| call_jaxpr("g", &inner, &[x.clone(), x]).remove(0), &f32s(&[3])).unwrap_err();
    assert!(err.message.starts_with("jit"), "{err}");
}
