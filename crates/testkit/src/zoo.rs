//! The real-model cases (`tests/data/zoo`): their extended format (`null` grads and
//! cotangents, `forward_only`, `reduced_precision`) and their matching rule.

use remat_ir::{Array, Aval};
use remat_json::ArrayJson;
use serde_json::Value;

use crate::close::within;

/// The arrays of `case[field]`, `None` where the case writes `null` (a grad of a
/// non-differentiable argument, a cotangent of a non-float output).
pub fn optional_arrays(case: &Value, field: &str) -> Vec<Option<Array>> {
    case[field]
        .as_array()
        .unwrap_or_else(|| panic!("field {field:?} is not a list"))
        .iter()
        .enumerate()
        .map(|(i, v)| (!v.is_null()).then(|| Array::from_json(v).unwrap_or_else(|e| panic!("{field}[{i}]: {e}"))))
        .collect()
}

/// Whether the case can only be evaluated (JAX cannot differentiate it in reverse).
pub fn forward_only(case: &Value) -> bool {
    case["forward_only"].as_bool().unwrap_or(false)
}

/// JAX's saved residuals of a zoo case as `aval kind what` lines, in JAX's order, without
/// the `literal` ones (remat inlines a literal into the backward half; docs/real_models.md):
/// the lines remat's `vjp` residuals must equal.
pub fn jax_residual_lines(case: &Value) -> Vec<String> {
    case["saved_residuals"]
        .as_array()
        .expect("saved_residuals is a list")
        .iter()
        .filter(|r| r["kind"].as_str() != Some("literal"))
        .map(|r| {
            format!(
                "{} {} {}",
                r["aval"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
                r["what"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Whether the case computes in `bf16` or `f16` anywhere, so every floating value is
/// compared with the looser tolerance.
pub fn reduced_precision(case: &Value) -> bool {
    case["reduced_precision"].as_bool().unwrap_or(false)
}

/// The cotangents to hand a vjp: the case's, with zeros of the output's type (`outs`)
/// where it writes `null`, as the zoo's README says a checker does.
pub fn zoo_cotangents(case: &Value, outs: &[Aval]) -> Vec<Array> {
    optional_arrays(case, "cotangents")
        .into_iter()
        .zip(outs)
        .map(|(ct, aval)| ct.unwrap_or_else(|| Array::zeros(aval)))
        .collect()
}

/// The zoo's matching rule: integers and booleans exactly; `bf16`/`f16` values, and every
/// float of a `reduced_precision` case, within a relative 2e-2 or absolute 1e-2; other
/// floats within 1e-4 relative or 1e-5 absolute. NaN matches NaN, an infinity the same
/// infinity. `None` in `want` is not compared.
pub fn check_zoo_values(what: &str, got: &[Array], want: &[Option<Array>], reduced: bool) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let Some(w) = w else { continue };
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        let (rel, abs) = if !w.dtype().is_inexact() {
            (0.0, 0.0)
        } else if reduced || w.dtype().is_narrow_float() {
            (2e-2, 1e-2)
        } else {
            (1e-4, 1e-5)
        };
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = a == b || (a.is_nan() && b.is_nan()) || within(a, b, rel, abs);
            if !close {
                return Err(format!("{what} {i} ({}), element {j}: got {a}, expected {b}", w.aval()));
            }
        }
    }
    Ok(())
}
