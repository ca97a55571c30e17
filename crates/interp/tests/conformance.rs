//! Conformance: every case recorded from JAX evaluates to JAX's outputs, and JAX's own
//! forward and backward jaxprs, evaluated here, give its outputs and gradients.

use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array};
use remat_testkit::{check_close, conformance_cases, primitive_cases, try_arrays};
use serde_json::Value;

fn eval_text(case: &Value, field: &str, args: &[Array]) -> Result<Vec<Array>, String> {
    let text = case[field].as_str().ok_or_else(|| format!("field {field:?} is not a string"))?;
    let jaxpr = parse_jaxpr(text, "case.jaxpr").map_err(|e| format!("{field}: parse error: {e}"))?;
    eval_jaxpr(&jaxpr, &[], args).map_err(|e| format!("{field}: {e}"))
}

fn check_case(case: &Value) -> Result<(), String> {
    let args = try_arrays(case, "args")?;
    let outputs = try_arrays(case, "outputs")?;
    check_close("output", &eval_text(case, "jaxpr", &args)?, &outputs, 1e-4, 1e-5)?;

    let fwd = eval_text(case, "jax_fwd_jaxpr", &args)?;
    if fwd.len() < outputs.len() {
        return Err(format!("jax_fwd_jaxpr gave {} values, fewer than the {} outputs", fwd.len(), outputs.len()));
    }
    let (primals, residuals) = fwd.split_at(outputs.len());
    check_close("fwd output", primals, &outputs, 1e-4, 1e-5)?;

    // JAX's vjp backward jaxpr takes the residuals, then the cotangents.
    let bwd_args: Vec<Array> = residuals.iter().cloned().chain(try_arrays(case, "cotangents")?).collect();
    check_close("grad", &eval_text(case, "jax_bwd_jaxpr", &bwd_args)?, &try_arrays(case, "grads")?, 1e-4, 1e-5)
}

#[test]
fn conformance_cases_match_jax() {
    let cases = conformance_cases();
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_case(case) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert_eq!(cases.len(), 32, "expected 32 conformance cases");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn primitive_cases_match_jax() {
    let cases = primitive_cases();
    let failures: Vec<String> =
        cases.iter().filter_map(|(name, case)| check_case(case).err().map(|e| format!("{name}: {e}"))).collect();
    assert!(!cases.is_empty(), "no cases in tests/data/primitives");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
