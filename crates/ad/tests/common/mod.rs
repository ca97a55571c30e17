//! Shared helpers for the autodiff tests: the conformance cases and value comparison.

#![allow(dead_code)]

use std::path::PathBuf;

use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array, Jaxpr};
use remat_json::ArrayJson;
use serde_json::Value;

pub fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance")
}

/// Every conformance case, by name, in name order.
pub fn cases() -> Vec<(String, Value)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("the conformance directory exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            let case: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, case)
        })
        .collect()
}

pub fn case(name: &str) -> Value {
    let p = cases_dir().join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

pub fn case_jaxpr(case: &Value) -> Jaxpr {
    parse_jaxpr(case["jaxpr"].as_str().unwrap(), "case.jaxpr").unwrap()
}

pub fn arrays(case: &Value, field: &str) -> Vec<Array> {
    case[field].as_array().unwrap().iter().map(|v| Array::from_json(v).unwrap()).collect()
}

pub fn arg_names(case: &Value) -> Vec<String> {
    case["arg_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

/// Same dtype and shape, and |a - b| <= max(rel |b|, abs) elementwise.
pub fn check_close(what: &str, got: &[Array], want: &[Array], rel: f64, abs: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = (a - b).abs() <= (rel * b.abs()).max(abs) || (a.is_nan() && b.is_nan()) || a == b;
            if !close {
                return Err(format!("{what} {i}, element {j}: got {a}, expected {b}"));
            }
        }
    }
    Ok(())
}

/// Outputs and gradients of the vjp of `jaxpr` (forward then backward half, evaluated
/// by the interpreter).
pub fn vjp_values(v: &remat_ad::Vjp, args: &[Array], cts: &[Array]) -> Result<(Vec<Array>, Vec<Array>), String> {
    let fwd = eval_jaxpr(&v.fwd, &[], args).map_err(|e| format!("fwd: {e}"))?;
    let (outs, res) = fwd.split_at(v.num_outs);
    let mut bwd_args = res.to_vec();
    bwd_args.extend(cts.iter().cloned());
    let grads = eval_jaxpr(&v.bwd, &[], &bwd_args).map_err(|e| format!("bwd: {e}"))?;
    Ok((outs.to_vec(), grads))
}
