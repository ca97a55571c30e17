//! Constants a jvp rule makes on the primal side (`instantiate_zeros`, `lax.full`,
//! `_zeros`), recorded from JAX 0.10.2 (`tests/data/gen_staged_constants.py`): the vjp
//! saves a scalar one exactly where JAX does (a tangent equation reads it at the top of a
//! linearization, or inside a `jit` or `cond` there, which return it), and nowhere else (a
//! rule JAX traced beforehand, zeros made on the tangent side, a scan body's hoisted
//! constant, a checkpoint's body). Residuals are compared without source locations, and
//! JAX's `from a literal` lines (the top level's) are left out: remat rebuilds a literal in
//! the backward half instead of saving it. Gradients match JAX's too.

mod common;

use common::vjp_values;
use remat_ad::vjp;
use remat_ir::parse_jaxpr;
use remat_testkit::{arg_names, arrays, check_close, read_json};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/staged_constants_cases.json");
    read_json(path).as_array().expect("a list of cases").clone()
}

/// `f32[] output of pad from f.py:3 (g)` without ` from f.py:3 (g)`.
fn strip_source(line: &str) -> String {
    if line.contains(" from the argument ") {
        return line.to_string();
    }
    line.split(" from ").next().unwrap_or(line).to_string()
}

fn check_case(case: &Value) -> Result<(), String> {
    let jaxpr = parse_jaxpr(case["jaxpr"].as_str().unwrap(), "staged.jaxpr").map_err(|e| e.to_string())?;
    let v = vjp(&jaxpr, &arg_names(case)).map_err(|e| e.to_string())?;
    let got: Vec<String> = v.residuals.iter().map(|r| strip_source(&r.to_string())).collect();
    let want: Vec<String> = case["saved_residuals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .filter(|line| line != "f32[] from a literal")
        .collect();
    if got != want {
        return Err(format!("residuals\n  got  {got:?}\n  want {want:?}"));
    }
    let (outs, grads) = vjp_values(&v, &arrays(case, "args"), &arrays(case, "cotangents"))?;
    check_close("output", &outs, &arrays(case, "outputs"), 1e-4, 1e-5)?;
    check_close("grad", &grads, &arrays(case, "grads"), 1e-4, 1e-5)
}

#[test]
fn staged_constants_are_saved_where_jax_saves_them() {
    let cases = cases();
    assert!(cases.len() >= 16, "{} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| check_case(c).err().map(|e| format!("{}: {e}", c["name"].as_str().unwrap())))
        .collect();
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// The scalar zero `pad` instantiates for its padding value's tangent is one residual of
/// the `jit` per `pad` (JAX's forward jit returns `0.0:f32[]`), and none at the top.
#[test]
fn a_pads_instantiated_padding_tangent_is_returned_by_its_jit() {
    let cases = cases();
    let case = cases.iter().find(|c| c["name"] == "pad_in_jit").expect("the pad_in_jit case");
    let jaxpr = parse_jaxpr(case["jaxpr"].as_str().unwrap(), "pad_in_jit").unwrap();
    let v = vjp(&jaxpr, &arg_names(case)).unwrap();
    let printed = remat_ir::pp_jaxpr(&v.fwd);
    assert!(printed.contains("0.0:f32[]"), "the forward jit returns the literal zero:\n{printed}");
    let jits: Vec<_> = v.fwd.eqns.iter().filter(|e| matches!(e.primitive, remat_ir::Primitive::Jit { .. })).collect();
    assert_eq!(jits.len(), 1);
    let remat_ir::Primitive::Jit { jaxpr, .. } = &jits[0].primitive else { unreachable!("filtered to jits") };
    let body = jaxpr.jaxpr.clone();
    let literal_outs = body.outvars.iter().filter(|a| matches!(a, remat_ir::Atom::Lit(_))).count();
    assert_eq!(literal_outs, 1, "one staged zero among the jit's outputs:\n{printed}");
}
