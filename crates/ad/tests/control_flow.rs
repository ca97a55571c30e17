//! `cond`, `while` and the custom-derivative calls on the real-model cases of the zoo
//! (`tests/data/zoo`: control_flow, control_flow_while, custom_jvp, custom_vjp) and on
//! hand-written programs: outputs, gradients and residuals against JAX 0.10.2's, and the
//! errors JAX gives.

mod common;

use common::vjp_values;
use remat_ad::{jvp, saved_residuals, vjp};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, pp_jaxpr, Array, Jaxpr};
use remat_testkit::{arg_names, arrays, check_close, try_arrays, zoo_cases};
use serde_json::Value;

fn f32s(shape: &[usize], data: &[f32]) -> Array {
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data.to_vec()).unwrap())
}

fn i32_scalar(x: i32) -> Array {
    Array::I32(ndarray::arr0(x).into_dyn())
}

fn zoo(name: &str) -> Value {
    zoo_cases().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no zoo case {name}")).1
}

fn jaxpr_of(case: &Value) -> Jaxpr {
    parse_jaxpr(case["jaxpr"].as_str().unwrap(), "case.jaxpr").unwrap_or_else(|e| panic!("{e}"))
}

/// A residual as `(aval, kind, what)`.
type Line = (String, String, String);

/// The residuals, remat's and JAX's.
fn residuals(case: &Value) -> (Vec<Line>, Vec<Line>) {
    let got = saved_residuals(&jaxpr_of(case), &arg_names(case))
        .unwrap()
        .iter()
        .map(|r| (r.aval.to_string(), r.kind.kind_name().to_string(), r.kind.what().to_string()))
        .collect();
    let want = case["saved_residuals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (s("aval"), s("kind"), s("what"))
        })
        .collect();
    (got, want)
}

/// The vjp's outputs and the gradients of the float arguments (JAX's `null` for an
/// integer one), against JAX's.
fn check_grads(case: &Value) {
    let v = vjp(&jaxpr_of(case), &arg_names(case)).unwrap();
    let (outs, grads) = vjp_values(&v, &arrays(case, "args"), &arrays(case, "cotangents")).unwrap();
    check_close("output", &outs, &arrays(case, "outputs"), 1e-4, 1e-5).unwrap();
    let want = case["grads"].as_array().unwrap();
    assert_eq!(grads.len(), want.len());
    for (i, (got, w)) in grads.iter().zip(want).enumerate().filter(|(_, (_, w))| !w.is_null()) {
        let w = try_arrays(&serde_json::json!({ "grad": [w] }), "grad").unwrap();
        check_close(&format!("grad {i}"), std::slice::from_ref(got), &w, 1e-4, 1e-5).unwrap();
    }
}

#[test]
fn control_flow_saves_and_differentiates_as_jax_does() {
    let case = zoo("control_flow");
    let (got, want) = residuals(&case);
    assert_eq!(got, want);
    check_grads(&case);
}

/// JAX's forward half: each cond returns its primal outputs and the joined residual
/// slots, the slots a branch does not use filled with `empty2`.
#[test]
fn control_flow_forward_half_joins_the_branch_residuals() {
    let v = vjp(&jaxpr_of(&zoo("control_flow")), &[]).unwrap();
    let fwd = pp_jaxpr(&v.fwd);
    assert!(fwd.contains("in (bl, bm, bo) }"), "{fwd}");
    assert!(fwd.contains("in (bs, bs, bu) }"), "{fwd}");
    assert!(fwd.contains("in (bz, by, bw) }"), "{fwd}");
    assert_eq!(fwd.matches("empty2[dtype=float32 memory_space=MemorySpace.Device]").count(), 2, "{fwd}");
}

/// Forward only: a data-dependent trip count. (`and` is another branch's primitive; the
/// same predicate is written with `select_n` here.)
#[test]
fn control_flow_while_evaluates_to_jaxs_outputs() {
    let case = zoo("control_flow_while");
    let text = case["jaxpr"].as_str().unwrap().replace("u:bool[] = and s t", "u:bool[] = select_n s s t");
    let jaxpr = parse_jaxpr(&text, "case.jaxpr").unwrap();
    let outs = eval_jaxpr(&jaxpr, &[], &arrays(&case, "args")).unwrap();
    check_close("output", &outs, &arrays(&case, "outputs"), 1e-6, 1e-6).unwrap();
}

const WHILE: &str = "{ lambda ; a:f32[3] b:i32[]. let
    _:i32[] c:f32[3] = while[
      body_jaxpr={ lambda ; d:f32[3] e:i32[] f:f32[3]. let
          g:i32[] = add e 1:i32[]
          h:f32[3] = mul f d
        in (g, h) }
      body_nconsts=1
      cond_jaxpr={ lambda ; i:i32[] j:i32[] k:f32[3]. let l:bool[] = lt j i in (l,) }
      cond_nconsts=1
    ] b a 0:i32[] a
  in (c,) }";

/// Forward mode works (`_while_loop_jvp`): `x -> x^(n+1)` has tangent `(n+1) x^n t`.
#[test]
fn while_has_a_jvp() {
    let j = parse_jaxpr(WHILE, "while.jaxpr").unwrap();
    let jv = jvp(&j).unwrap();
    let args = [f32s(&[3], &[0.5, -1.5, 2.0]), i32_scalar(2), f32s(&[3], &[1.0, 2.0, -1.0]), i32_scalar(0)];
    let outs = eval_jaxpr(&jv.jaxpr, &[], &args).unwrap();
    check_close("primal", &outs[..1], &[f32s(&[3], &[0.125, -3.375, 8.0])], 1e-6, 1e-6).unwrap();
    check_close("tangent", &outs[1..], &[f32s(&[3], &[0.75, 13.5, -12.0])], 1e-6, 1e-6).unwrap();
}

/// Reverse mode is JAX's error, naming the equation.
#[test]
fn while_has_no_vjp() {
    let j = parse_jaxpr(WHILE, "while.jaxpr").unwrap();
    let e = vjp(&j, &[]).unwrap_err().to_string();
    assert!(e.contains("Reverse-mode differentiation does not work for lax.while_loop"), "{e}");
    assert!(e.contains("while.jaxpr:2:5"), "{e}");
}

/// JAX saves the output of the `custom_jvp_call` (bound again by the rule) and the rule's
/// `max`, nothing from inside the call. The case's rule (`_safe_log_jvp`, a user's Python
/// function) is not in the text, so remat differentiates the call's body `log(max(x,
/// 1e-6))`: it saves the same lines plus, per call, the `div` of `log`'s derivative,
/// which the user's rule folds into its own `t / max(x, 1e-6)`. The other line remat does
/// not give is JAX's `f32[] from a literal` (the `0.0` of `abs(x) * 0.0`, a Python
/// scalar's provenance that the text does not keep: docs/real_models.md).
#[test]
fn custom_jvp_saves_the_calls_output() {
    let case = zoo("custom_jvp");
    let (got, want) = residuals(&case);
    assert_eq!(want[0], ("f32[]".to_string(), "literal".to_string(), String::new()));
    let div = ("f32[4,5]".to_string(), "output".to_string(), "div".to_string());
    let mut expected = want[1..].to_vec();
    let after_max = expected.iter().position(|r| r.2 == "max").expect("the rule's max") + 1;
    expected.insert(after_max, div);
    let div6 = ("f32[4,6]".to_string(), "output".to_string(), "div".to_string());
    expected.push(div6);
    assert_eq!(got, expected);
    check_grads(&case);
}

/// `_clip_fwd` returns the input itself: the residuals are the primal function's. The
/// gradient is not JAX's (the clipping `_clip_bwd` is known only by name), but W2's is,
/// since the clipped cotangent does not reach it.
#[test]
fn custom_vjp_is_differentiated_through_its_body() {
    let case = zoo("custom_vjp");
    let (got, want) = residuals(&case);
    assert_eq!(got, want);
    let v = vjp(&jaxpr_of(&case), &[]).unwrap();
    let (outs, grads) = vjp_values(&v, &arrays(&case, "args"), &arrays(&case, "cotangents")).unwrap();
    check_close("output", &outs, &arrays(&case, "outputs"), 1e-5, 1e-6).unwrap();
    check_close("grad W2", &grads[1..2], &arrays(&case, "grads")[1..2], 1e-4, 1e-5).unwrap();
    let notes = remat_ad::custom_rule_notes(&jaxpr_of(&case));
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("custom_vjp_call `clip_gradient`") && notes[0].contains("_clip_bwd"), "{notes:?}");
}

#[test]
fn cond_index_out_of_range_runs_the_last_branch() {
    let text = "{ lambda ; a:i32[] b:f32[]. let
    c:f32[] = cond[
      branches=(
        { lambda ; d:f32[]. let e:f32[] = neg d in (e,) }
        { lambda ; f:f32[]. let g:f32[] = mul f 2.0:f32[] in (g,) }
        { lambda ; h:f32[]. let i:f32[] = mul h 10.0:f32[] in (i,) }
      )
    ] a b
  in (c,) }";
    let j = parse_jaxpr(text, "cond.jaxpr").unwrap();
    assert_eq!(pp_jaxpr(&j), text);
    let run = |i: i32| match &eval_jaxpr(&j, &[], &[i32_scalar(i), f32s(&[], &[3.0])]).unwrap()[0] {
        Array::F32(a) => a.iter().next().copied().unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!([run(0), run(1), run(2), run(3), run(-1)], [-3.0, 6.0, 30.0, 30.0, 30.0]);
}

/// The parse or verify error of `text`.
fn invalid(text: &str) -> String {
    match parse_jaxpr(text, "x.jaxpr") {
        Err(e) => e.to_string(),
        Ok(j) => remat_ir::verify(&j).expect_err("an invalid jaxpr").to_string(),
    }
}

#[test]
fn malformed_conds_are_located_errors() {
    let bad_index = "{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = cond[branches=({ lambda ; d:f32[]. let  in (d,) },)] a b
  in (c,) }";
    let e = invalid(bad_index);
    assert!(e.contains("x.jaxpr:2:5") && e.contains("the index must be an i32[] scalar"), "{e}");
    let mismatched = "{ lambda ; a:i32[] b:f32[]. let
    c:f32[] = cond[
      branches=(
        { lambda ; d:f32[]. let  in (d,) }
        { lambda ; e:f32[]. let f:i32[] = convert_element_type[new_dtype=int32 weak_type=False] e in (f,) }
      )
    ] a b
  in (c,) }";
    let e = invalid(mismatched);
    assert!(e.contains("branch 1 returns (i32[])"), "{e}");
    let not_jaxprs = "{ lambda ; a:i32[] b:f32[]. let
    c:f32[] = cond[branches=(1, 2)] a b
  in (c,) }";
    let e = invalid(not_jaxprs);
    assert!(e.contains("branch 0 of `branches` is 1, not a jaxpr"), "{e}");
}
