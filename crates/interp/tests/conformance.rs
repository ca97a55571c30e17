//! Conformance: every case recorded from JAX evaluates to JAX's outputs, and JAX's own
//! forward and backward jaxprs, evaluated here, give its outputs and gradients.

use std::path::PathBuf;

use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array};
use remat_json::ArrayJson;
use serde_json::Value;

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance")
}

fn arrays(case: &Value, field: &str) -> Result<Vec<Array>, String> {
    case[field]
        .as_array()
        .ok_or_else(|| format!("field {field:?} is not a list"))?
        .iter()
        .map(|v| Array::from_json(v).map_err(|e| format!("{field}: {e}")))
        .collect()
}

fn eval_text(case: &Value, field: &str, args: &[Array]) -> Result<Vec<Array>, String> {
    let text = case[field].as_str().ok_or_else(|| format!("field {field:?} is not a string"))?;
    let jaxpr = parse_jaxpr(text, "case.jaxpr").map_err(|e| format!("{field}: parse error: {e}"))?;
    eval_jaxpr(&jaxpr, &[], args).map_err(|e| format!("{field}: {e}"))
}

/// Same dtype and shape, and |a - b| <= max(1e-4 |b|, 1e-5) elementwise.
fn check_close(what: &str, got: &[Array], want: &[Array]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = (a - b).abs() <= (1e-4 * b.abs()).max(1e-5) || (a.is_nan() && b.is_nan()) || a == b;
            if !close {
                return Err(format!("{what} {i}, element {j}: got {a}, expected {b}"));
            }
        }
    }
    Ok(())
}

fn check_case(case: &Value) -> Result<(), String> {
    let args = arrays(case, "args")?;
    let outputs = arrays(case, "outputs")?;
    check_close("output", &eval_text(case, "jaxpr", &args)?, &outputs)?;

    let fwd = eval_text(case, "jax_fwd_jaxpr", &args)?;
    if fwd.len() < outputs.len() {
        return Err(format!("jax_fwd_jaxpr gave {} values, fewer than the {} outputs", fwd.len(), outputs.len()));
    }
    let (primals, residuals) = fwd.split_at(outputs.len());
    check_close("fwd output", primals, &outputs)?;

    // JAX's vjp backward jaxpr takes the residuals, then the cotangents.
    let bwd_args: Vec<Array> = residuals.iter().cloned().chain(arrays(case, "cotangents")?).collect();
    check_close("grad", &eval_text(case, "jax_bwd_jaxpr", &bwd_args)?, &arrays(case, "grads")?)
}

#[test]
fn conformance_cases_match_jax() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("the conformance directory exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let result = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()))
            .and_then(|case| check_case(&case));
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert_eq!(paths.len(), 32, "expected 32 conformance cases");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), paths.len(), failures.join("\n"));
}
