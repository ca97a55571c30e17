//! Conformance: every case recorded from JAX evaluates to JAX's outputs, and JAX's own
//! forward and backward jaxprs, evaluated here, give its outputs and gradients.

use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array};
use remat_testkit::{check_close, conformance_cases, primitive_cases, sharded_cases, try_arrays};
use serde_json::Value;

fn eval_text(case: &Value, field: &str, args: &[Array]) -> Result<Vec<Array>, String> {
    let text = case[field].as_str().ok_or_else(|| format!("field {field:?} is not a string"))?;
    let jaxpr = parse_jaxpr(text, "case.jaxpr").map_err(|e| format!("{field}: parse error: {e}"))?;
    eval_jaxpr(&jaxpr, &[], args).map_err(|e| format!("{field}: {e}"))
}

fn check_case(case: &Value) -> Result<(), String> {
    // A case that records JAX's own f32 error against f64 (`f32_error`, the sharded cases)
    // is checked to twice that error where it is larger than the usual tolerance: another
    // exact evaluation order (one device's sums, not eight devices' partial sums) may land
    // anywhere within it.
    let atol = |what: &str| case["f32_error"][what].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
    let args = try_arrays(case, "args")?;
    let outputs = try_arrays(case, "outputs")?;
    check_close("output", &eval_text(case, "jaxpr", &args)?, &outputs, 1e-4, atol("outputs"))?;

    let fwd = eval_text(case, "jax_fwd_jaxpr", &args)?;
    if fwd.len() < outputs.len() {
        return Err(format!("jax_fwd_jaxpr gave {} values, fewer than the {} outputs", fwd.len(), outputs.len()));
    }
    let (primals, residuals) = fwd.split_at(outputs.len());
    check_close("fwd output", primals, &outputs, 1e-4, atol("outputs"))?;

    // JAX's vjp backward jaxpr takes the residuals, then the cotangents.
    let bwd_args: Vec<Array> = residuals.iter().cloned().chain(try_arrays(case, "cotangents")?).collect();
    check_close("grad", &eval_text(case, "jax_bwd_jaxpr", &bwd_args)?, &try_arrays(case, "grads")?, 1e-4, atol("grads"))
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

/// The sharded cases (issue 46), recorded from JAX on 8 simulated CPU devices: the program,
/// JAX's forward and backward jaxprs (with `shard_map` bodies run once per device and the
/// collectives between them), and each recorded policy's program, give JAX's values.
#[test]
fn sharded_cases_match_jax() {
    let cases = sharded_cases();
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_case(case) {
            failures.push(format!("{name}: {e}"));
        }
        let args = try_arrays(case, "args").unwrap();
        let outputs = try_arrays(case, "outputs").unwrap();
        for p in case["policies"].as_array().expect("policies") {
            let policy = p["policy"].as_str().unwrap_or("?");
            let atol = case["f32_error"]["outputs"].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
            if let Err(e) = eval_text(p, "jaxpr", &args).and_then(|o| check_close("output", &o, &outputs, 1e-4, atol)) {
                failures.push(format!("{name} under {policy}: {e}"));
            }
        }
    }
    assert_eq!(cases.len(), 8, "expected 8 sharded cases");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
