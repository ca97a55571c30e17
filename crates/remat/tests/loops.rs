//! The loop programs recorded from JAX (`tests/data/loops`, issue 40): indices computed
//! inside `fori_loop` and `scan` bodies, fed to `dynamic_slice`, `dynamic_update_slice`,
//! `gather` and `scatter`, and stacked by autodiff as residuals. Each case, on the
//! interpreter and on the JIT: its text and JAX's value-and-grad text print back as JAX
//! printed them; the program gives JAX's outputs; remat's vjp gives JAX's gradients; JAX's
//! own value-and-grad program gives JAX's value and gradients; remat saves what JAX saves.

use std::sync::Arc;

use remat::ir::{parse_jaxpr, pp_jaxpr, Jaxpr};
use remat::run::{Program, RunOptions, VjpRunner};
use remat::{Array, Backend, ClosedJaxpr, Nans};
use remat_testkit::{arg_names, check_zoo_values, loop_cases, optional_arrays};
use serde_json::Value;

fn text<'a>(case: &'a Value, field: &str) -> &'a str {
    case[field].as_str().unwrap_or_else(|| panic!("field {field} is not a string"))
}

fn parse(case: &Value, field: &str) -> Result<Jaxpr, String> {
    let src = text(case, field);
    let j = parse_jaxpr(src, field).map_err(|e| format!("{field}: {e}"))?;
    if pp_jaxpr(&j) != src {
        return Err(format!("{field} does not print back as JAX printed it"));
    }
    Ok(j)
}

fn options(backend: Backend) -> RunOptions {
    RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() }
}

fn args(case: &Value) -> Vec<Array> {
    optional_arrays(case, "args").into_iter().map(|a| a.expect("every argument is recorded")).collect()
}

fn run(j: &Jaxpr, args: &[Array], backend: Backend) -> Result<Vec<Array>, String> {
    let p = Program::new(ClosedJaxpr::new(Arc::new(j.clone())), &options(backend)).map_err(|e| e.to_string())?;
    p.run(&args.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())
}

/// JAX's residual line without its source (`... from gen_loops.py:105:19 (f)`), which
/// names the Python file; an argument's line keeps its name.
fn without_source(line: &str) -> String {
    match line.find(" from ") {
        Some(k) if !line[k..].starts_with(" from the argument") => line[..k].to_string(),
        _ => line.to_string(),
    }
}

fn check(case: &Value) -> Result<(), String> {
    let primal = parse(case, "jaxpr")?;
    let vg = parse(case, "value_and_grad_jaxpr")?;
    let args = args(case);
    for backend in [Backend::Interp, Backend::Jit] {
        let at = |what: &str| format!("{backend:?} {what}");
        let outs = run(&primal, &args, backend).map_err(|e| format!("{}: {e}", at("eval")))?;
        check_zoo_values(&at("output"), &outs, &optional_arrays(case, "outputs"), false)?;

        let closed = ClosedJaxpr::new(Arc::new(primal.clone()));
        let runner = VjpRunner::new(&closed, &options(backend)).map_err(|e| format!("{}: {e}", at("vjp")))?;
        let cts = optional_arrays(case, "cotangents").into_iter().map(|c| c.expect("a cotangent")).collect::<Vec<_>>();
        let r = runner
            .run(&args.iter().collect::<Vec<_>>(), &cts.iter().collect::<Vec<_>>())
            .map_err(|e| format!("{}: {e}", at("vjp run")))?;
        check_zoo_values(&at("vjp output"), &r.outputs, &optional_arrays(case, "outputs"), false)?;
        check_zoo_values(&at("grad"), &r.grads, &optional_arrays(case, "grads"), false)?;

        let vg_outs = run(&vg, &args, backend).map_err(|e| format!("{}: {e}", at("value_and_grad eval")))?;
        let want: Vec<Option<Array>> = optional_arrays(case, "value_and_grad_outputs");
        check_zoo_values(&at("value_and_grad"), &vg_outs, &want, false)?;
    }
    let v = remat::ad::vjp(&primal, &arg_names(case)).map_err(|e| format!("residuals: {e}"))?;
    let got: Vec<String> = v.residuals.iter().map(|r| without_source(&r.to_string())).collect();
    let want: Vec<String> = case["jax_saved_residuals_text"]
        .as_array()
        .expect("a list of lines")
        .iter()
        .map(|l| without_source(l.as_str().expect("a line")))
        .collect();
    if got != want {
        return Err(format!("saved residuals differ:\n got  {got:?}\n want {want:?}"));
    }
    Ok(())
}

#[test]
fn every_loop_case_matches_jax_on_both_backends() {
    let cases = loop_cases();
    assert!(cases.len() >= 9, "{} loop cases", cases.len());
    let failures: Vec<String> =
        cases.iter().filter_map(|(name, case)| check(case).err().map(|e| format!("{name}: {e}"))).collect();
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
