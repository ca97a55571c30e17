//! The oracle that cannot drift (issue 43): for every program under `crates/plan/tests/data`
//! (its own test programs and `primal/`, the benchmark programs' underlying losses recorded
//! with their `argnums`; `tests/data/bench/*.jaxpr` are those programs already
//! differentiated, which the planner does not take) and every zoo program
//! (`tests/data/zoo`, with `policy_names.txt`'s meaning for an opaque policy) that the
//! planner takes (a scalar loss), every plan of the frontier is printed, parsed and compiled
//! with `remat_jit::compile` (default options: what `remat bench` does with `remat plan -o`'s
//! file) and its compiled peak compared with the planner's figure byte for byte; and at 20
//! budgets spread over the frontier's peaks, the plan's compiled peak fits the budget and
//! never grows as the budget shrinks.
//!
//! At each of those budgets, too, the plan recomputes no more than any built-in policy whose
//! peak fits (the GPT block: 9,728 FLOPs at 26,624 bytes, where saving everything
//! benched at 26,624).
//!
//! Runtime: the programs are planned in parallel (rayon), each once, and each distinct plan
//! compiled once: 36 programs (14 of the planner's data, 22 of the zoo) in 50.4 s of wall
//! time and 23.9 s of CPU in the test profile on the loaded 2-core machine (one run). The full-size
//! recorded programs (`primal/transformer`, `primal/gpt`, `primal/mlp_large`) are left to
//! the release sweep (`cargo run --release -p remat --example plan_sweep`), which runs the
//! same checks on them, as would be any zoo program of more than [`MAX_EQUATIONS`]
//! equations (none today: the largest, `gpt_block`, has 136).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use remat_ir::{parse_jaxpr, pp_jaxpr, ClosedJaxpr};
use remat_plan::{Budget, PlanOptions, Planner};
use serde_json::Value;

/// Programs of more equations than this (the function's own, at the top level and in its
/// bodies) are left to the release sweep.
const MAX_EQUATIONS: usize = 400;

/// The full-size recorded programs, left to the release sweep (seconds to minutes each to
/// plan and compile in the test profile); their reduced twins stay.
const FULL_SIZE: [&str; 3] = ["primal/transformer.jaxpr", "primal/gpt.jaxpr", "primal/mlp_large.jaxpr"];

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn parse(text: &str, name: &str) -> ClosedJaxpr {
    ClosedJaxpr::new(Arc::new(parse_jaxpr(text, name).unwrap()))
}

/// Every `.jaxpr` under `dir` (recursively), sorted.
fn jaxpr_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            jaxpr_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "jaxpr") {
            out.push(p);
        }
    }
    out.sort();
}

/// The planner's own test programs and the primal benchmark programs, with their options.
fn plan_programs() -> Vec<(String, ClosedJaxpr, PlanOptions, Vec<String>)> {
    let mut paths = Vec::new();
    jaxpr_files(&data_dir(), &mut paths);
    paths
        .into_iter()
        .filter_map(|p| {
            let name = p.strip_prefix(data_dir()).unwrap().display().to_string();
            if FULL_SIZE.contains(&name.as_str()) {
                return None;
            }
            let f = parse(&std::fs::read_to_string(&p).unwrap(), &name);
            let meta: Option<Value> =
                std::fs::read_to_string(p.with_extension("json")).ok().map(|t| serde_json::from_str(&t).unwrap());
            let argnums = meta
                .as_ref()
                .and_then(|m| m["argnums"].as_array())
                .map(|a| a.iter().map(|v| v.as_u64().unwrap() as usize).collect::<Vec<_>>());
            let names = meta
                .as_ref()
                .and_then(|m| m["arg_names"].as_array())
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            Some((name, f, PlanOptions { argnums, ..PlanOptions::default() }, names))
        })
        .collect()
}

/// `tests/data/zoo/policy_names.txt`: each case's `--policy-names` words.
fn policy_names() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(remat_testkit::data_dir().join("zoo/policy_names.txt")).unwrap();
    text.lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace().map(String::from);
            (words.next().unwrap(), words.collect())
        })
        .collect()
}

fn equations(j: &remat_ir::Jaxpr) -> usize {
    j.eqns.iter().map(|e| 1 + e.primitive.subjaxprs().iter().map(|b| equations(b)).sum::<usize>()).sum()
}

/// The zoo's programs of at most [`MAX_EQUATIONS`] equations with one scalar output.
fn zoo_programs() -> Vec<(String, ClosedJaxpr, PlanOptions, Vec<String>)> {
    let meanings = policy_names();
    remat_testkit::zoo_cases()
        .into_iter()
        .filter_map(|(name, case)| {
            let j = remat_testkit::case_jaxpr(&case);
            let scalar_loss = j.outvars.len() == 1 && j.atom_aval(&j.outvars[0]).shape.is_empty();
            if !scalar_loss || equations(&j) > MAX_EQUATIONS {
                return None;
            }
            let mut f = ClosedJaxpr::new(Arc::new(j));
            if let Some(words) = meanings.get(&name) {
                f = remat_ad::with_policy_names(&f, &remat_ad::PolicyNames::parse(words).unwrap()).unwrap();
            }
            Some((format!("zoo/{name}"), f, PlanOptions::default(), remat_testkit::arg_names(&case)))
        })
        .collect()
}

/// What `remat bench` reports for a planned program: its printed text parsed and compiled.
fn bench_peak(program: &remat_ir::Jaxpr) -> Result<usize, String> {
    let parsed = parse_jaxpr(&pp_jaxpr(program), "planned.jaxpr").map_err(|e| e.to_string())?;
    Ok(remat_jit::compile(&parsed).map_err(|e| e.to_string())?.plan().peak_bytes)
}

/// The checks on one program: what failed.
fn check(name: &str, f: &ClosedJaxpr, options: &PlanOptions, arg_names: &[String]) -> Vec<String> {
    let planner = match Planner::new(f, arg_names, options) {
        Ok(p) => p,
        Err(e) => return vec![format!("{name}: not planned: {e}")],
    };
    let mut failures = Vec::new();
    // Each frontier plan compiled: the plan for a budget is always one of them.
    let mut benched: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    for p in planner.frontier() {
        let plan = match planner.plan(Budget::bytes(p.peak_bytes)) {
            Ok(plan) => plan,
            Err(e) => {
                failures.push(format!("{name}: no plan at the frontier's {}: {e}", p.peak_bytes));
                continue;
            }
        };
        match bench_peak(&plan.program) {
            Ok(b) if b == plan.peak_bytes && b == p.peak_bytes => {
                benched.insert((plan.peak_bytes, plan.recompute_flops), b);
            }
            Ok(b) => failures.push(format!("{name}: the planner says {} bytes, bench {b}", plan.peak_bytes)),
            Err(e) => failures.push(format!("{name}: the planned program does not compile: {e}")),
        }
    }
    let frontier = planner.frontier();
    let (lo, hi) = (frontier[0].peak_bytes, frontier[frontier.len() - 1].peak_bytes);
    let mut last = usize::MAX;
    for j in 0..20 {
        let budget = hi - (hi - lo) * j / 19;
        let plan = match planner.plan(Budget::bytes(budget)) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{name}: no plan at {budget}: {e}"));
                continue;
            }
        };
        let peak = match benched.get(&(plan.peak_bytes, plan.recompute_flops)) {
            Some(&b) => b,
            None => match bench_peak(&plan.program) {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("{name}: at {budget} the program does not compile: {e}"));
                    continue;
                }
            },
        };
        // No plan recomputes more than a built-in policy (a plan of the search) that fits.
        for b in planner.builtins().iter().filter(|b| b.peak_bytes <= budget) {
            if plan.recompute_flops > b.recompute_flops {
                failures.push(format!(
                    "{name}: at {budget} the plan recomputes {} FLOPs, {} fits with {}",
                    plan.recompute_flops, b.policy, b.recompute_flops
                ));
            }
        }
        if peak != plan.peak_bytes || peak > budget || peak > last {
            failures.push(format!(
                "{name}: at {budget} the plan benches at {peak} (planner {}), after {last} at a larger budget",
                plan.peak_bytes
            ));
        }
        last = peak;
    }
    failures
}

#[test]
fn every_frontier_plan_benches_at_the_planners_peak_and_the_peak_is_monotone() {
    let mut programs = plan_programs();
    let planned = programs.len();
    programs.extend(zoo_programs());
    assert!(planned >= 13 && programs.len() >= planned + 15, "{} programs", programs.len());
    let failures: Vec<String> =
        programs.par_iter().flat_map(|(name, f, options, names)| check(name, f, options, names)).collect();
    // A zoo program the planner does not take (not a loss it can differentiate) is said;
    // every program of the planner's own data must be planned.
    let (skipped, failed): (Vec<&String>, Vec<&String>) =
        failures.iter().partition(|f| f.starts_with("zoo/") && f.contains(": not planned: "));
    for s in &skipped {
        eprintln!("{s}");
    }
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(skipped.len() <= 3, "{skipped:#?}");
}
