//! The JIT against the interpreter on every recorded program and on its value-and-grad
//! (issue 40): JAX's own texts (each case's program and JAX's forward and backward halves,
//! the loop cases' value-and-grad programs, the benchmark programs, which are JAX's
//! value-and-grad jaxprs) and remat's vjp of every
//! differentiable program as one program (forward half then backward half, what `remat
//! explain` and the planner compile), each on several pseudo-random arguments, not only
//! the recorded ones. The random-program generator never made what these programs do
//! inside loops (indices computed in a body and stacked as residuals); these programs do.
//!
//! Agreement: integers and booleans bit for bit; floats within `rel 1e-3, abs 1e-4`
//! (16-bit floats `rel 2e-2, abs 1e-2`): the backends may sum in different orders, and
//! random arguments reach cancellations that the recorded ones do not. A NaN matches a
//! NaN, an infinity the same infinity.

use std::sync::Arc;

use remat::ad::vjp_program;
use remat::ir::{parse_jaxpr, Jaxpr};
use remat::run::{Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Nans};
use remat_testkit::{
    arg_names, conformance_cases, forward_only, loop_cases, primitive_cases, reduced_bench_cases, within, zoo_cases,
    Rng,
};
use serde_json::Value;

/// Arguments per program.
const SEEDS: u64 = 3;

/// Random values for `avals` from `seed` (a jaxpr's constvars get values too).
fn random_arrays(avals: &[remat::Aval], rng: &mut Rng) -> Vec<Array> {
    avals.iter().map(|a| rng.array(a)).collect()
}

/// `a` with each float element scaled by `1 + eps * r`, `r` pseudo-random in [-1, 1].
fn perturbed(a: &Array, eps: f64, rng: &mut Rng) -> Array {
    let mut scale = |x: f64| x * (1.0 + eps * rng.next_f64());
    match a {
        Array::F32(x) => Array::F32(x.mapv(|v| scale(f64::from(v)) as f32)),
        Array::F64(x) => Array::F64(x.mapv(&mut scale)),
        Array::BF16(x) => Array::BF16(x.mapv(|v| remat::ir::bf16::from_f64(scale(v.to_f64())))),
        Array::F16(x) => Array::F16(x.mapv(|v| remat::ir::f16::from_f64(scale(v.to_f64())))),
        other => other.clone(),
    }
}

/// Runs `jaxpr` on both backends with `SEEDS` sets of pseudo-random arguments; an error
/// names the program, the seed, the output and the element.
///
/// An element beyond the tolerance is still agreement where the program itself moves it as
/// far: where the interpreter, given arguments perturbed by a relative `2^-20` (eight ulp of
/// f32), moves that element by at least a quarter of the disagreement. Rounding in a long
/// recurrence (an RNN's gradient through 64 steps of random weights) is magnified as an
/// input's perturbation is; a wrong value (a stale index, a missed write) is not explained
/// by the program's sensitivity.
fn differ(what: &str, jaxpr: &Jaxpr) -> Result<(), String> {
    let options = |backend| RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
    for seed in 0..SEEDS {
        let mut rng = Rng(0x40 + seed);
        let consts = random_arrays(&jaxpr.const_avals(), &mut rng);
        let args = random_arrays(&jaxpr.in_avals(), &mut rng);
        let closed = ClosedJaxpr { jaxpr: Arc::new(jaxpr.clone()), consts: consts.clone() };
        let interp = Program::new(closed.clone(), &options(Backend::Interp)).map_err(|e| format!("{what}: {e}"))?;
        let jit = Program::new(closed, &options(Backend::Jit)).map_err(|e| format!("{what}: compile: {e}"))?;
        let refs: Vec<&Array> = args.iter().collect();
        let want = interp.run(&refs).map_err(|e| format!("{what} seed {seed}: interpreter: {e}"))?;
        let got = jit.run(&refs).map_err(|e| format!("{what} seed {seed}: jit: {e}"))?;
        // The interpreter on perturbed arguments, computed only if some element needs it.
        let mut moved: Option<Vec<Array>> = None;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if g.aval() != w.aval() {
                return Err(format!("{what} seed {seed}: output {i} is {} on the JIT, {}", g.aval(), w.aval()));
            }
            let (rel, abs) = if w.dtype().is_narrow_float() { (2e-2, 1e-2) } else { (1e-3, 1e-4) };
            let exact = !w.dtype().is_inexact();
            for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
                let same = a == b || (a.is_nan() && b.is_nan());
                if same || (!exact && within(a, b, rel, abs)) {
                    continue;
                }
                if !exact {
                    if moved.is_none() {
                        let mut noise = Rng(0x5eed + seed);
                        let p: Vec<Array> =
                            args.iter().map(|a| perturbed(a, 1.0 / f64::from(1 << 20), &mut noise)).collect();
                        let pc: Vec<Array> =
                            consts.iter().map(|a| perturbed(a, 1.0 / f64::from(1 << 20), &mut noise)).collect();
                        let closed = ClosedJaxpr { jaxpr: Arc::new(jaxpr.clone()), consts: pc };
                        let again = Program::new(closed, &options(Backend::Interp))
                            .and_then(|p2| p2.run(&p.iter().collect::<Vec<_>>()))
                            .map_err(|e| format!("{what} seed {seed}: interpreter, perturbed: {e}"))?;
                        moved = Some(again);
                    }
                    let m = moved.as_ref().expect("computed")[i].to_f64_vec()[j];
                    if (m - b).abs() * 4.0 >= (a - b).abs() || (m.is_nan() != b.is_nan()) {
                        continue;
                    }
                    return Err(format!(
                        "{what} seed {seed}: output {i} ({}), element {j}: JIT {a}, interpreter {b} \
                         (perturbed arguments move it only to {m})",
                        w.aval()
                    ));
                }
                return Err(format!(
                    "{what} seed {seed}: output {i} ({}), element {j}: JIT {a}, interpreter {b}",
                    w.aval()
                ));
            }
        }
    }
    Ok(())
}

/// A recorded case's texts (its program, and JAX's halves where recorded) and remat's vjp
/// of its program as one program; `prepare` is applied to each text once parsed.
fn case_programs(name: &str, case: &Value, prepare: &dyn Fn(Jaxpr) -> Jaxpr) -> Vec<(String, Result<Jaxpr, String>)> {
    let mut out = Vec::new();
    let parse = |field: &str| {
        case[field]
            .as_str()
            .map(|text| parse_jaxpr(text, field).map(prepare).map_err(|e| format!("{name} {field}: {e}")))
    };
    for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr", "value_and_grad_jaxpr"] {
        if let Some(j) = parse(field) {
            out.push((format!("{name} {field}"), j));
        }
    }
    if let (Some(Ok(primal)), false) = (parse("jaxpr"), forward_only(case)) {
        let vjp = vjp_program(&primal, &arg_names(case)).map(|v| v.jaxpr).map_err(|e| format!("{name} vjp: {e}"));
        out.push((format!("{name} (remat's vjp as one program)"), vjp));
    }
    out
}

fn check_all(programs: Vec<(String, Result<Jaxpr, String>)>, at_least: usize) {
    assert!(programs.len() >= at_least, "{} programs, expected at least {at_least}", programs.len());
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|(what, j)| match j {
            Ok(j) => differ(what, j).err(),
            Err(e) => Some(e.clone()),
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} programs:\n{}", failures.len(), programs.len(), failures.join("\n"));
}

#[test]
fn conformance_and_primitive_cases_and_their_vjps_agree_on_random_arguments() {
    let cases = conformance_cases().into_iter().chain(primitive_cases());
    check_all(cases.flat_map(|(name, case)| case_programs(&name, &case, &|j| j)).collect(), 32 * 4);
}

#[test]
fn loop_programs_and_their_vjps_agree_on_random_arguments() {
    check_all(loop_cases().iter().flat_map(|(name, case)| case_programs(name, case, &|j| j)).collect(), 9 * 3);
}

#[test]
fn zoo_programs_and_their_vjps_agree_on_random_arguments() {
    // The zoo's one opaque policy takes its meaning from `policy_names.txt`'s words; a
    // program without such a policy is left as it is.
    let names = remat::ad::PolicyNames::parse(&["save=attn", "offload=mlp_hidden"]).expect("valid names");
    let prepare = |j: Jaxpr| {
        let closed = ClosedJaxpr::new(Arc::new(j));
        match remat::ad::with_policy_names(&closed, &names) {
            Ok(given) => Arc::unwrap_or_clone(given.jaxpr),
            Err(_) => Arc::unwrap_or_clone(closed.jaxpr),
        }
    };
    let programs = zoo_cases().into_iter().flat_map(|(name, case)| case_programs(&name, &case, &prepare)).collect();
    check_all(programs, 18 * 3);
}

#[test]
fn benchmark_value_and_grad_programs_agree_on_random_arguments() {
    // The benchmark programs at reduced sizes (the interpreter runs them in seconds).
    let cases = reduced_bench_cases();
    check_all(cases.iter().flat_map(|(name, case)| case_programs(name, case, &|j| j)).collect(), 10);
}
