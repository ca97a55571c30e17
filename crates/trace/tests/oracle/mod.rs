//! The check every surface test against JAX makes (`lax.rs`, `nn.rs`, `numpy2.rs`,
//! `numpy3.rs`): each case of a recorded oracle (`tests/data/*_oracle.json`, written by its
//! `gen_*.py` from JAX 0.10.2) has a Rust twin of the same name, whose traced jaxpr must
//! print as JAX's, character for character, verify, evaluate with the interpreter to JAX's
//! outputs, and (where JAX differentiates it) have JAX's gradient of its first output's
//! sum through remat-ad's `grad`, within rel 1e-4 / abs 1e-5.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use remat_interp::eval_jaxpr;
use remat_ir::Array;
use remat_testkit::{arrays, check_close, read_json};
use remat_trace::{make_jaxpr, Tensor};

/// A Rust twin: the case's program over its arguments, returning its outputs.
pub type Program = Box<dyn Fn(&[Tensor]) -> Vec<Tensor>>;

/// A twin of one output.
pub fn p(f: impl Fn(&[Tensor]) -> Tensor + 'static) -> Program {
    Box::new(move |a| vec![f(a)])
}

/// How a twin's outputs are compared with JAX's.
pub type Compare = fn(&[Array], &[Array]) -> Result<(), String>;

/// Outputs within rel 1e-4 / abs 1e-5.
pub fn close(got: &[Array], want: &[Array]) -> Result<(), String> {
    check_close("outputs", got, want, 1e-4, 1e-5)
}

/// Checks every case of `tests/data/{file}` against its twin in `programs` (outputs
/// compared by [`close`]); panics with every difference found.
#[allow(dead_code)] // each test file uses one of the two
pub fn check_oracle<K: Borrow<str> + Ord>(file: &str, programs: &BTreeMap<K, Program>) {
    check_oracle_with(file, programs, close)
}

/// [`check_oracle`] with the outputs compared by `compare`.
pub fn check_oracle_with<K: Borrow<str> + Ord>(file: &str, programs: &BTreeMap<K, Program>, compare: Compare) {
    let oracle = read_json(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(file));
    let oracle = oracle.as_object().unwrap();
    assert_eq!(
        oracle.keys().map(String::as_str).collect::<Vec<_>>(),
        programs.keys().map(|k| k.borrow()).collect::<Vec<&str>>(),
        "the oracle and the Rust twins name the same cases"
    );
    let mut failures = Vec::new();
    for (name, case) in oracle {
        if let Err(e) = check_case(case, &programs[name.as_str()], compare) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), oracle.len(), failures.join("\n\n"));
}

fn check_case(case: &serde_json::Value, f: &Program, compare: Compare) -> Result<(), String> {
    let args = arrays(case, "args");
    let traced = make_jaxpr(|a: Vec<Tensor>| f(&a), &args).map_err(|e| format!("trace error: {e}"))?;
    remat_ir::verify_closed(&traced.jaxpr).map_err(|e| format!("does not verify: {e}"))?;
    let text = traced.to_string();
    let want_text = case["jaxpr"].as_str().unwrap();
    if text != want_text {
        return Err(format!("printed\n{text}\nJAX printed\n{want_text}"));
    }
    let got =
        eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args).map_err(|e| format!("evaluation failed: {e}"))?;
    compare(&got, &arrays(case, "outputs"))?;
    if case.get("grads").is_none() {
        return Ok(());
    }
    let argnums: Vec<usize> =
        case["argnums"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let summed = make_jaxpr(|a: Vec<Tensor>| f(&a)[0].sum(), &args).map_err(|e| format!("trace error: {e}"))?;
    let g = remat_ad::grad(&summed.jaxpr.jaxpr, &argnums).map_err(|e| format!("grad failed: {e}"))?;
    let got = eval_jaxpr(&g, &summed.jaxpr.consts, &args).map_err(|e| format!("evaluating the grad failed: {e}"))?;
    check_close("grads", &got, &arrays(case, "grads"), 1e-4, 1e-5)
}
