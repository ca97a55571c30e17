//! More programs recorded from JAX 0.10.2 (`tests/data/gen_jax_extra.py`): nested
//! checkpoints with their policies, `jit` and `scan` under checkpoints and at the top of a
//! vjp. The saved residuals (aval and description, without source locations) and the
//! gradients match JAX's (the known half of a scan inside a checkpoint is one
//! `closed_call`, as JAX makes it, so its residuals are `output of closed_call`).

mod common;

use common::vjp_values;
use remat_ad::vjp;
use remat_ir::parse_jaxpr;
use remat_testkit::{arg_names, arrays, check_close, read_json};
use serde_json::Value;

fn extra_cases() -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jax_extra_cases.json");
    read_json(path).as_array().unwrap().clone()
}

fn strip_source(line: &str) -> String {
    line.split(" from ").next().map_or(line.to_string(), |head| {
        if line.contains(" from the argument ") {
            line.to_string()
        } else {
            head.to_string()
        }
    })
}

#[test]
fn residuals_and_gradients_match_jax() {
    let mut failures = Vec::new();
    let cases = extra_cases();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let jaxpr = parse_jaxpr(case["jaxpr"].as_str().unwrap(), "extra.jaxpr").unwrap();
        let v = match vjp(&jaxpr, &arg_names(case)) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let got: Vec<String> = v.residuals.iter().map(|r| strip_source(&r.to_string())).collect();
        let want: Vec<String> = case["saved_residuals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            // JAX also saves a scalar that user code multiplied or divided by (`x * 3.0`):
            // jnp turned the Python scalar into a constant array, which the linearization
            // closes over. Printed, it is the same literal as `jnp.mean`'s divisor, which
            // JAX does not save, so from a jaxpr the two cannot be told apart; remat saves
            // neither (a literal is rebuilt in the backward half at no cost).
            .filter(|line| line != "f32[] from a literal")
            // (JAX's offloaded residuals end in ` from ` with no source: stripped alike.)
            .map(|line| strip_source(&line))
            .collect();
        if got != want {
            failures.push(format!("{name}: residuals\n  got  {got:?}\n  want {want:?}"));
        }
        match vjp_values(&v, &arrays(case, "args"), &arrays(case, "cotangents")) {
            Ok((outs, grads)) => {
                if let Err(e) = check_close("output", &outs, &arrays(case, "outputs"), 1e-4, 1e-5)
                    .and_then(|_| check_close("grad", &grads, &arrays(case, "grads"), 1e-4, 1e-5))
                {
                    failures.push(format!("{name}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
