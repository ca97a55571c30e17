//! The real-model bar: every case of `tests/data/zoo` (ordinary JAX training programs,
//! recorded from JAX 0.10.2) through the whole pipeline, stage by stage:
//! - `roundtrip`: its jaxpr, and JAX's forward and backward jaxprs, print back exactly;
//! - `eval`: the interpreter gives JAX's outputs;
//! - `jit-eval`: so does the JIT;
//! - `residuals`: the vjp saves exactly JAX's residuals (aval, kind, name, order);
//! - `grad`: the interpreter's vjp gives JAX's gradients;
//! - `jit-grad`: so does the JIT's.
//!
//! Forward-only cases have no `residuals`, `grad` or `jit-grad` stage. Values are compared
//! by the zoo's rule ([`check_zoo_values`]).
//!
//! `tests/data/zoo/not_yet.txt` lists the stages that do not pass yet, one `case stage`
//! per line. The test fails if a stage not listed fails (a regression) and also if a
//! listed stage passes (so the list only ever shrinks, and stays true).
//! `REMAT_ZOO_REPORT=1 cargo test -p remat --test zoo -- --nocapture` prints every failing
//! stage with its error, in the list's form.

use std::collections::BTreeSet;
use std::sync::Arc;

use remat::ir::{parse_jaxpr, pp_jaxpr};
use remat::run::{Backend, Program, RunOptions, VjpRunner};
use remat::{Array, ClosedJaxpr, Nans};
use remat_testkit::{
    arg_names, check_zoo_values, data_dir, forward_only, optional_arrays, reduced_precision, zoo_cases, zoo_cotangents,
};
use serde_json::Value;

const STAGES: [&str; 6] = ["roundtrip", "eval", "jit-eval", "residuals", "grad", "jit-grad"];

fn text<'a>(case: &'a Value, field: &str) -> &'a str {
    case[field].as_str().unwrap_or_else(|| panic!("field {field} is not a string"))
}

/// The case's program, its opaque policies given the meaning `words` says (`--policy-names`).
fn program(case: &Value, words: &[String]) -> Result<ClosedJaxpr, String> {
    let jaxpr = parse_jaxpr(text(case, "jaxpr"), "jaxpr").map_err(|e| format!("parse: {e}"))?;
    let closed = ClosedJaxpr::new(Arc::new(jaxpr));
    if words.is_empty() {
        return Ok(closed);
    }
    let names = remat::ad::PolicyNames::parse(words).map_err(|e| e.to_string())?;
    remat::ad::with_policy_names(&closed, &names).map_err(|e| e.to_string())
}

fn options(backend: Backend) -> RunOptions {
    RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() }
}

fn args(case: &Value) -> Vec<Array> {
    optional_arrays(case, "args").into_iter().map(|a| a.expect("every argument is recorded")).collect()
}

fn roundtrip(case: &Value) -> Result<(), String> {
    let fields: &[&str] = if forward_only(case) { &["jaxpr"] } else { &["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] };
    for field in fields {
        let src = text(case, field);
        let jaxpr = parse_jaxpr(src, field).map_err(|e| format!("{field}: parse: {e}"))?;
        let printed = pp_jaxpr(&jaxpr);
        if printed != src {
            let line = printed.lines().zip(src.lines()).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "{field} prints differently from line {}:\n got  {:?}\n want {:?}",
                line + 1,
                printed.lines().nth(line).unwrap_or(""),
                src.lines().nth(line).unwrap_or("")
            ));
        }
    }
    Ok(())
}

fn evaluate(case: &Value, words: &[String], backend: Backend) -> Result<(), String> {
    let p = Program::new(program(case, words)?, &options(backend)).map_err(|e| e.to_string())?;
    let args = args(case);
    let refs: Vec<&Array> = args.iter().collect();
    let outs = p.run(&refs).map_err(|e| e.to_string())?;
    check_zoo_values("output", &outs, &optional_arrays(case, "outputs"), reduced_precision(case))
}

/// JAX's residual list without its `from a literal` lines, which no rule over the jaxpr
/// text can reproduce: `0.9 * x` and `np.float32(0.9) * x` print the same equation
/// (`mul 0.8999999761581421:f32[] a`), and JAX saves the literal for the first (a weak
/// Python scalar passes through `jnp.multiply`'s inline jit as an argument, is converted
/// there, and comes back as a residual tracer) but not for the second (a NumPy scalar is
/// inlined into the tangent program). The provenance is gone from the text; see
/// docs/real_models.md. Such a literal costs no memory in remat's split: it is inlined into
/// the backward half. Every other line must match exactly, in order.
fn residuals(case: &Value, words: &[String]) -> Result<(), String> {
    let closed = program(case, words)?;
    let v = remat::ad::vjp(&closed.jaxpr, &arg_names(case)).map_err(|e| e.to_string())?;
    let got: Vec<String> =
        v.residuals.iter().map(|r| format!("{} {} {}", r.aval, r.kind.kind_name(), r.kind.what())).collect();
    let want = remat_testkit::jax_residual_lines(case);
    if got != want {
        return Err(format!("residuals differ:\n got  {got:?}\n want {want:?}"));
    }
    Ok(())
}

fn grad(case: &Value, words: &[String], backend: Backend) -> Result<(), String> {
    let closed = program(case, words)?;
    let out_avals: Vec<_> = closed.jaxpr.outvars.iter().map(|a| closed.jaxpr.atom_aval(a)).collect();
    let runner = VjpRunner::new(&closed, &options(backend)).map_err(|e| e.to_string())?;
    let args = args(case);
    let cts = zoo_cotangents(case, &out_avals);
    let r = runner.run(&args.iter().collect::<Vec<_>>(), &cts.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
    let reduced = reduced_precision(case);
    check_zoo_values("output", &r.outputs, &optional_arrays(case, "outputs"), reduced)?;
    check_zoo_values("grad", &r.grads, &optional_arrays(case, "grads"), reduced)
}

fn stage(name: &str, case: &Value, words: &[String]) -> Option<Result<(), String>> {
    let differentiable = !forward_only(case);
    Some(match name {
        "roundtrip" => roundtrip(case),
        "eval" => evaluate(case, words, Backend::Interp),
        "jit-eval" => evaluate(case, words, Backend::Jit),
        "residuals" if differentiable => residuals(case, words),
        "grad" if differentiable => grad(case, words, Backend::Interp),
        "jit-grad" if differentiable => grad(case, words, Backend::Jit),
        _ => return None,
    })
}

/// `tests/data/zoo/policy_names.txt`: each case's `--policy-names` words.
fn policy_names() -> Vec<(String, Vec<String>)> {
    let path = data_dir().join("zoo/policy_names.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            (words.next().unwrap(), words.collect())
        })
        .collect()
}

fn not_yet() -> BTreeSet<(String, String)> {
    let path = data_dir().join("zoo/not_yet.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let (case, stage) = (words.next().unwrap(), words.next().expect("a line is `case stage`"));
            assert!(STAGES.contains(&stage), "not_yet.txt: unknown stage {stage:?}");
            (case.to_string(), stage.to_string())
        })
        .collect()
}

#[test]
fn every_zoo_case_passes_every_stage_not_listed_in_not_yet() {
    let cases = zoo_cases();
    assert!(cases.len() >= 18, "the zoo has {} cases", cases.len());
    let expected_failures = not_yet();
    let names: BTreeSet<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
    for (case, _) in &expected_failures {
        assert!(names.contains(case.as_str()), "not_yet.txt names an unknown case {case:?}");
    }
    let mut regressions = Vec::new();
    let mut now_passing = Vec::new();
    let mut passed = 0;
    let report = std::env::var_os("REMAT_ZOO_REPORT").is_some();
    let meanings = policy_names();
    for (name, case) in &cases {
        // The user's meaning for an opaque policy, as `--policy-names` gives it.
        let words = meanings.iter().find(|(n, _)| n == name).map_or(&[][..], |(_, w)| w.as_slice());
        for s in STAGES {
            let Some(result) = stage(s, case, words) else { continue };
            let listed = expected_failures.contains(&(name.clone(), s.to_string()));
            if let (Err(e), true) = (&result, report) {
                // `REMAT_ZOO_REPORT=1`: every failing stage, in not_yet.txt's form.
                eprintln!("{name} {s}  # {}", e.lines().next().unwrap_or("").chars().take(150).collect::<String>());
            }
            match (result, listed) {
                (Ok(()), false) => passed += 1,
                (Ok(()), true) => now_passing.push(format!("{name} {s}")),
                (Err(e), false) => regressions.push(format!("{name} {s}: {e}")),
                (Err(_), true) => {}
            }
        }
    }
    eprintln!("zoo: {passed} stages pass, {} listed as not yet", expected_failures.len());
    assert!(regressions.is_empty(), "stages that fail:\n{}", regressions.join("\n"));
    assert!(
        now_passing.is_empty(),
        "stages that now pass: remove them from tests/data/zoo/not_yet.txt:\n{}",
        now_passing.join("\n")
    );
}
