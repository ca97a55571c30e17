//! Issue 24's first done-when, swept over every program it names: the benchmark programs'
//! underlying functions (`crates/plan/tests/data/primal/*.jaxpr`, recorded from JAX with
//! their `argnums`) and every zoo program (`tests/data/zoo`). Per program that the planner
//! takes (a scalar loss):
//!
//! - at a budget equal to each built-in policy's peak, the plan recomputes no more FLOPs
//!   than the policy;
//! - across 20 budgets from the smallest reachable peak to the no-remat peak, every plan
//!   fits its budget and the peak never grows as the budget shrinks;
//! - each of those plans' reported peak is the planned peak of its program compiled by the
//!   JIT (what `remat bench` reports for it), byte for byte.
//!
//! ```text
//! cargo run --release -p remat --example plan_sweep
//! ```
//!
//! A zoo case whose policy JAX prints as a closure gets its meaning from
//! `tests/data/zoo/policy_names.txt`, as `remat plan --policy-names` would. Prints one line
//! per program (or why the planner does not take it) and exits non-zero if any check fails.
//! docs/planner.md records a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use remat::ir::{parse_jaxpr, pp_jaxpr, ClosedJaxpr};
use remat::plan::{Budget, PlanOptions, Planner};
use serde_json::Value;

/// The recorded primal programs with their options and argument names.
fn primal_programs() -> Vec<(String, ClosedJaxpr, PlanOptions, Vec<String>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/data/primal");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the primal programs' directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jaxpr"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("readable");
            let f = ClosedJaxpr::new(Arc::new(parse_jaxpr(&text, &name).expect("parses")));
            let meta: Value =
                serde_json::from_str(&std::fs::read_to_string(path.with_extension("json")).expect("its metadata"))
                    .expect("JSON");
            let argnums =
                meta["argnums"].as_array().map(|a| a.iter().filter_map(Value::as_u64).map(|v| v as usize).collect());
            let names =
                meta["arg_names"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect());
            (format!("primal/{name}"), f, PlanOptions { argnums, ..PlanOptions::default() }, names.unwrap_or_default())
        })
        .collect()
}

fn zoo_programs() -> Vec<(String, ClosedJaxpr, PlanOptions, Vec<String>)> {
    remat_testkit::zoo_cases()
        .into_iter()
        .map(|(name, case)| {
            let f = ClosedJaxpr::new(Arc::new(remat_testkit::case_jaxpr(&case)));
            (format!("zoo/{name}"), f, PlanOptions::default(), remat_testkit::arg_names(&case))
        })
        .collect()
}

/// `tests/data/zoo/policy_names.txt`: a zoo case's `--policy-names` words (the meaning of a
/// policy JAX prints as a closure), empty for every other case.
fn policy_names(program: &str) -> Vec<String> {
    let path = remat_testkit::data_dir().join("zoo/policy_names.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (Some(program.trim_start_matches("zoo/")) == words.next()).then(|| words.map(String::from).collect())
        })
        .unwrap_or_default()
}

/// The checks on one program: `Err` lists what failed.
fn sweep(f: &ClosedJaxpr, names: &[String], options: &PlanOptions) -> Result<String, Vec<String>> {
    let planner = match Planner::new(f, names, options) {
        Ok(p) => p,
        Err(e) => return Ok(format!("not planned: {e}")),
    };
    let mut failures = Vec::new();
    for b in planner.builtins() {
        match planner.plan(Budget::bytes(b.peak_bytes)) {
            Ok(plan) if plan.recompute_flops <= b.recompute_flops => {}
            Ok(plan) => failures.push(format!(
                "at {}'s peak {} the plan recomputes {} FLOPs, the policy {}",
                b.policy, b.peak_bytes, plan.recompute_flops, b.recompute_flops
            )),
            Err(e) => failures.push(format!("no plan at {}'s peak {}: {e}", b.policy, b.peak_bytes)),
        }
    }
    let (lo, hi) = (planner.min_peak(), planner.no_remat_peak());
    let mut last = usize::MAX;
    for j in 0..20 {
        let budget = hi - (hi - lo) * j / 19;
        let plan = match planner.plan(Budget::bytes(budget)) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("no plan at {budget}: {e}"));
                continue;
            }
        };
        if plan.peak_bytes > budget {
            failures.push(format!("peak {} over the budget {budget}", plan.peak_bytes));
        }
        if plan.peak_bytes > last {
            failures.push(format!("the peak grew from {last} to {} at {budget}", plan.peak_bytes));
        }
        last = plan.peak_bytes;
        let text = pp_jaxpr(&plan.program);
        let compiled = parse_jaxpr(&text, "planned.jaxpr")
            .map_err(|e| e.to_string())
            .and_then(|j| remat_jit::compile(&j).map_err(|e| e.to_string()));
        match compiled {
            Ok(c) if c.plan().peak_bytes == plan.peak_bytes => {}
            Ok(c) => failures.push(format!(
                "at {budget}: reported {} bytes, compiled {}",
                plan.peak_bytes,
                c.plan().peak_bytes
            )),
            Err(e) => failures.push(format!("at {budget}: the planned program does not compile: {e}")),
        }
    }
    if failures.is_empty() {
        Ok(format!(
            "ok: {} built-in policies, 20 budgets {lo}..={hi} bytes, {} frontier points",
            planner.builtins().len(),
            planner.frontier().len()
        ))
    } else {
        Err(failures)
    }
}

fn main() {
    let (mut planned, mut failed) = (0, 0);
    for (name, f, options, names) in primal_programs().into_iter().chain(zoo_programs()) {
        let words = policy_names(&name);
        let f = if words.is_empty() {
            f
        } else {
            let meaning = remat::ad::PolicyNames::parse(&words).expect("valid policy names");
            remat::ad::with_policy_names(&f, &meaning).expect("a valid meaning")
        };
        let t = Instant::now();
        let result = sweep(&f, &names, &options);
        let secs = t.elapsed().as_secs_f64();
        match result {
            Ok(line) => {
                planned += usize::from(line.starts_with("ok"));
                println!("{name}: {line} ({secs:.2} s)");
            }
            Err(failures) => {
                failed += 1;
                println!("{name}: FAILED ({secs:.2} s)");
                failures.iter().for_each(|f| println!("    {f}"));
            }
        }
    }
    println!("{planned} programs planned and checked, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
