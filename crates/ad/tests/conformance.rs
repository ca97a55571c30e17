//! The bar: on every conformance case recorded from JAX 0.10.2, the vjp saves exactly the
//! residuals JAX saves (aval, kind, name, order) and gives JAX's gradients.

mod common;

use common::vjp_values;
use remat_ad::vjp;
use remat_testkit::{arg_names, arrays, case_jaxpr, check_close, conformance_cases, primitive_cases, sharded_cases};

fn check_residuals(case: &serde_json::Value) -> Result<(), String> {
    check_residuals_as(case, false)
}

/// With `skip_literals`, JAX's `from a literal` lines are left out of what remat must save
/// (remat inlines a literal into the backward half: docs/real_models.md).
fn check_residuals_as(case: &serde_json::Value, skip_literals: bool) -> Result<(), String> {
    let jaxpr = case_jaxpr(case);
    let v = vjp(&jaxpr, &arg_names(case)).map_err(|e| e.to_string())?;
    let got: Vec<(String, String, String)> = v
        .residuals
        .iter()
        .map(|r| (r.aval.to_string(), r.kind.kind_name().to_string(), r.kind.what().to_string()))
        .collect();
    let want: Vec<(String, String, String)> = case["saved_residuals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !(skip_literals && r["kind"].as_str() == Some("literal")))
        .map(|r| {
            (
                r["aval"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["what"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    if got != want {
        return Err(format!("residuals differ:\n got  {got:?}\n want {want:?}"));
    }
    Ok(())
}

fn check_grads(case: &serde_json::Value) -> Result<(), String> {
    let jaxpr = case_jaxpr(case);
    let v = vjp(&jaxpr, &arg_names(case)).map_err(|e| e.to_string())?;
    let (outs, grads) = vjp_values(&v, &arrays(case, "args"), &arrays(case, "cotangents"))?;
    check_close("output", &outs, &arrays(case, "outputs"), 1e-4, 1e-5)?;
    check_close("grad", &grads, &arrays(case, "grads"), 1e-4, 1e-5)
}

fn run(check: fn(&serde_json::Value) -> Result<(), String>) -> (usize, Vec<String>) {
    run_over(conformance_cases(), check)
}

fn run_over(
    all: Vec<(String, serde_json::Value)>,
    check: fn(&serde_json::Value) -> Result<(), String>,
) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for (name, case) in &all {
        if let Err(e) = check(case) {
            failures.push(format!("{name}: {e}"));
        }
    }
    (all.len(), failures)
}

#[test]
fn saved_residuals_match_jax_on_every_case() {
    let (n, failures) = run(check_residuals);
    assert!(failures.is_empty(), "{}/{n} cases differ:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(n, 32);
}

#[test]
fn gradients_match_jax_on_every_case() {
    let (n, failures) = run(check_grads);
    assert!(failures.is_empty(), "{}/{n} cases differ:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(n, 32);
}

/// The per-primitive cases (`tests/data/primitives`): JAX's residuals and gradients too,
/// by the zoo's rule for residuals: JAX's `from a literal` lines aside, which the text cannot
/// tell (only `cummin_cumlogsumexp` has any: the Python 0s of JAX's associative_scan rule).
#[test]
fn primitive_cases_save_and_differentiate_as_jax_does() {
    let check_residuals: fn(&serde_json::Value) -> Result<(), String> = |case| check_residuals_as(case, true);
    for check in [check_residuals, check_grads] {
        let (n, failures) = run_over(primitive_cases(), check);
        assert!(n > 0, "no cases in tests/data/primitives");
        assert!(failures.is_empty(), "{}/{n} cases differ:\n{}", failures.len(), failures.join("\n"));
    }
}

/// What one device holds of each residual: JAX's residual arrays' largest shard
/// (`residual_device_bytes`, recorded from the vjp on 8 simulated devices).
fn check_device_bytes(case: &serde_json::Value) -> Result<(), String> {
    let v = vjp(&case_jaxpr(case), &arg_names(case)).map_err(|e| e.to_string())?;
    let got: Vec<(String, usize)> = v.residuals.iter().map(|r| (r.to_string(), r.device_bytes)).collect();
    let want: Vec<u64> = case["residual_device_bytes"]
        .as_array()
        .ok_or("no residual_device_bytes")?
        .iter()
        .map(|b| b.as_u64().unwrap_or(0))
        .collect();
    let differ: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|((_, g), w)| *g as u64 != **w)
        .map(|((r, g), w)| format!("{r}: {g} bytes per device, JAX's {w}"))
        .collect();
    match (got.len() == want.len(), differ.is_empty()) {
        (true, true) => Ok(()),
        (false, _) => Err(format!("{} residuals, JAX's {}", got.len(), want.len())),
        (true, false) => Err(format!("per-device bytes differ:\n  {}", differ.join("\n  "))),
    }
}

/// The sharded cases (issue 46): JAX's saved residuals (a residual saved inside a
/// `shard_map` listed with every device's block stacked), what one device holds of each,
/// and gradients, for the program and
/// for the program under each recorded checkpoint policy. Gradients are compared to twice
/// JAX's own f32 error against f64 where that is larger than the usual tolerance
/// (`f32_error`: XLA's eight devices sum in another order than one).
#[test]
fn sharded_cases_save_and_differentiate_as_jax_does() {
    let cases = sharded_cases();
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_residuals_as(case, true) {
            failures.push(format!("{name}: {e}"));
        }
        let atol = case["f32_error"]["grads"].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
        let grads = (|| {
            let v = vjp(&case_jaxpr(case), &arg_names(case)).map_err(|e| e.to_string())?;
            let (outs, grads) = vjp_values(&v, &arrays(case, "args"), &arrays(case, "cotangents"))?;
            let out_atol = case["f32_error"]["outputs"].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
            check_close("output", &outs, &arrays(case, "outputs"), 1e-4, out_atol)?;
            check_close("grad", &grads, &arrays(case, "grads"), 1e-4, atol)
        })();
        if let Err(e) = grads {
            failures.push(format!("{name}: {e}"));
        }
        if let Err(e) = check_device_bytes(case) {
            failures.push(format!("{name}: {e}"));
        }
        for p in case["policies"].as_array().expect("policies") {
            let mut with_policy = case.clone();
            with_policy["jaxpr"] = p["jaxpr"].clone();
            with_policy["saved_residuals"] = p["saved_residuals"].clone();
            with_policy["residual_device_bytes"] = p["residual_device_bytes"].clone();
            if let Err(e) = check_residuals_as(&with_policy, true).and_then(|()| check_device_bytes(&with_policy)) {
                failures.push(format!("{name} under {}: {e}", p["policy"]));
            }
        }
    }
    assert_eq!(cases.len(), 8, "expected 8 sharded cases");
    assert!(failures.is_empty(), "{}/{} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
