//! The fuzzer's deeper checks of a parsed program, shared by the `fuzz_text` example and
//! the CI smoke run (`tests/fuzz_smoke.rs`).

use std::sync::Arc;

use remat::run::{Backend, RunOptions, VjpRunner};
use remat::{Array, ClosedJaxpr, Jaxpr};

/// Values above this many elements are not evaluated (the fuzzer looks for panics, not
/// for large allocations, which the size limit covers).
const EVAL_ELEMENTS: usize = 1 << 16;

/// What the command line does with a verified program: `residuals`, `fwd-bwd`, and `grad`
/// with the interpreter. Errors are expected answers; a panic is caught by the fuzzer.
pub fn deep_check(jaxpr: &Jaxpr) -> Result<(), String> {
    let _ = remat::ad::print_saved_residuals(jaxpr, &[]);
    let _ = remat::ad::fwd_bwd_strings(jaxpr);
    // A `while` may loop for ever on a valid program; values (and, crudely, every number
    // in the text: a scan's length, a nested jaxpr's shapes) must stay small.
    let text = remat::ir::pp_jaxpr(jaxpr);
    let small = text
        .split(|c: char| !c.is_ascii_digit())
        .all(|digits| digits.len() < 7 && digits.parse::<usize>().map_or(true, |n| n <= EVAL_ELEMENTS));
    if text.contains("while[") || !small || !values_small(jaxpr) || !jaxpr.constvars.is_empty() {
        return Ok(());
    }
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let options = RunOptions { backend: Backend::Interp, nans: remat::Nans::Propagate, ..RunOptions::default() };
    let mut rng = remat_testkit::Rng(7);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    let arg_refs: Vec<&Array> = args.iter().collect();
    let _ = remat::run::Program::new(closed.clone(), &options).map(|p| p.run(&arg_refs));
    if let Ok(runner) = VjpRunner::new(&closed, &options) {
        let cts: Vec<Array> = jaxpr.out_avals().iter().map(|a| rng.array(a)).collect();
        let ct_refs: Vec<&Array> = cts.iter().collect();
        let _ = runner.run(&arg_refs, &ct_refs);
    }
    Ok(())
}

/// Whether every variable of `jaxpr` and of the jaxprs it calls has at most
/// [`EVAL_ELEMENTS`] elements. (Every number in the text being small is not enough: the
/// CNN benchmark's `f32[32,32,32,64]` has 2 million, whose convolutions and their VJP took
/// the interpreter over the 10 s hang limit in a fuzz run at `nice 19` on a loaded machine.)
fn values_small(jaxpr: &Jaxpr) -> bool {
    jaxpr.vars.iter().all(|v| v.aval.checked_size().is_some_and(|n| n <= EVAL_ELEMENTS))
        && jaxpr.eqns.iter().all(|e| e.primitive.subjaxprs().into_iter().all(|j| values_small(j)))
}
