//! `remat plan FILE --budget BYTES [--host-budget BYTES] [--json] [--names-only] [--frontier]
//! [-o PLANNED]`: the memory plan of the file's scalar loss (the primal function, as
//! `residuals` takes it): what the forward half saves, what the backward half recomputes,
//! what waits in host memory, the whole program's planned peak (what `remat bench` reports
//! for the `-o` file) and the recompute FLOPs. With `--names-only`, the JAX policy call
//! that reproduces the plan (`save_only_these_names`, or with `--host-budget`
//! `save_and_offload_only_these_names`) and the split of the names. `--frontier` prints
//! every plan of the Pareto frontier with the built-in policies on the same axes.
//! `docs/planner.md` describes the model and the search.

use std::path::Path;

use remat::plan::{Budget, Method, NamesPolicy, Plan, PlanOptions, Planner};
use remat::PolicyNames;
use serde_json::{json, Value};

use crate::commands::residuals::binder_names;
use crate::io::{note_custom_rules, read_program_named, read_text, write_json, CliError, Result};

/// What `remat plan` was asked.
#[derive(Debug)]
pub struct Request<'a> {
    pub file: &'a Path,
    pub policy_names: Option<&'a PolicyNames>,
    pub budget: Option<&'a str>,
    pub json: bool,
    pub names_only: bool,
    pub frontier: bool,
    pub out: Option<&'a Path>,
    pub argnums: Option<&'a str>,
    pub host_budget: Option<&'a str>,
}

pub fn run(req: &Request<'_>) -> Result<()> {
    let closed = read_program_named(req.file, req.policy_names)?;
    note_custom_rules(&closed.jaxpr);
    let names = binder_names(&read_text(req.file)?).unwrap_or_default();
    let argnums = req.argnums.map(parse_argnums).transpose()?;
    let host_budget = req.host_budget.map(|b| b.parse::<Budget>().map(Budget::bytes_value)).transpose()?;
    let options = PlanOptions { argnums, names_only: req.names_only, host_budget, ..PlanOptions::default() };
    let planner = Planner::new(&closed, &names, &options)?;
    if req.out.is_some() && req.budget.is_none() {
        return Err(CliError("remat plan -o writes the planned program for --budget BYTES: give a budget".into()));
    }
    let plan = match req.budget {
        Some(b) => Some(planner.plan(b.parse::<Budget>()?)?),
        None if req.frontier => None,
        None => return Err(CliError("remat plan: give --budget BYTES (or --frontier)".into())),
    };
    if let (Some(out), Some(p)) = (req.out, &plan) {
        std::fs::write(out, remat::ir::pp_jaxpr(&p.program) + "\n")
            .map_err(|e| CliError(format!("{}: {e}", out.display())))?;
    }
    if req.json {
        let notes = remat::ad::custom_rule_notes(&closed.jaxpr);
        return write_json(None, &as_json(&planner, plan.as_ref(), req.frontier, &notes));
    }
    let mut text = String::new();
    if req.frontier {
        text.push_str(&frontier_text(&planner));
    }
    if let Some(p) = &plan {
        if req.frontier {
            text.push('\n');
        }
        text.push_str(&plan_text(&planner, p, req.out));
    }
    remat::pretty::write_stdout(&text);
    Ok(())
}

/// `0,2,5` or ranges `0-15,17`.
fn parse_argnums(s: &str) -> Result<Vec<usize>> {
    let bad = |why: &str| CliError(format!("--argnums `{s}`: {why}; expected input indices such as `0,1,2` or `0-15`"));
    let mut out: Vec<usize> = Vec::new();
    for (k, part) in s.split(',').map(str::trim).enumerate() {
        if part.is_empty() {
            return Err(bad(&format!("entry {} is empty", k + 1)));
        }
        let index = |t: &str| t.trim().parse::<usize>().map_err(|_| bad(&format!("`{t}` is not an input index")));
        let range = match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (index(a)?, index(b)?);
                if a > b {
                    return Err(bad(&format!("the range `{part}` runs backwards")));
                }
                a..=b
            }
            None => index(part).map(|i| i..=i)?,
        };
        for i in range {
            if out.contains(&i) {
                return Err(bad(&format!("input {i} is given twice")));
            }
            out.push(i);
        }
    }
    Ok(out)
}

fn method_words(m: Method) -> &'static str {
    match m {
        Method::Exhaustive => "exhaustive (exact): every distinct plan evaluated, optimal against the compiled peak",
        Method::Greedy => "greedy with local refinement (greedy): a heuristic, not proved optimal",
        Method::Names => {
            "every policy over the program's names (exact): every subset evaluated, optimal among them against the compiled peak"
        }
        Method::NamesGreedy => "greedy over the program's names (greedy): a heuristic, not proved optimal",
    }
}

fn plan_text(planner: &Planner, p: &Plan, out: Option<&Path>) -> String {
    // A sharded program's budget, peak and saved bytes are one device's.
    let (per_device, peak_words) = match remat::is_sharded(&p.program) {
        true => (
            " per device",
            "one device's: the whole value-and-grad program as device 0 of the mesh runs it, docs/sharding.md",
        ),
        false => ("", "the whole value-and-grad program as the JIT compiles it: what `remat bench` reports for the planned program"),
    };
    let mut t = format!(
        "plan for a budget of {}{per_device}\n  search: {}, {} plans evaluated exactly\n  peak: {} ({peak_words})\n  recompute: {} FLOPs\n  saved beyond the arguments: {}{per_device}\n",
        Budget::bytes(p.budget),
        method_words(p.method),
        planner.evaluated(),
        Budget::bytes(p.peak_bytes),
        p.recompute_flops,
        Budget::bytes(p.residual_bytes as usize),
    );
    if let Some(call) = p.jax_policy() {
        t.push_str(&format!("  policy: {call}\n"));
    }
    if let Some(policy) = &p.names {
        t.push_str(&split_text(planner, policy));
    }
    t.push_str(&format!("saved ({}):\n", p.saved.len()));
    for r in &p.saved {
        // A residual in host memory (JAX names no source for it; the planner gives the
        // source of the value it moves): say where its value is listed too.
        match r.aval.memory_space == remat::ir::MemorySpace::Host {
            true => t.push_str(&format!("  {r} (one of the offloaded values below)\n")),
            false => t.push_str(&format!("  {r}\n")),
        }
    }
    t.push_str(&format!("recomputed ({}):\n", p.recomputed.len()));
    for r in &p.recomputed {
        t.push_str(&format!("  {r}\n"));
    }
    if p.offloaded.is_empty() && matches!(p.names, Some(NamesPolicy::SaveAndOffload { .. })) {
        t.push_str("offloaded (0): offloading a named value saves no recomputation at this budget\n");
    }
    if !p.offloaded.is_empty() {
        t.push_str(&format!(
            "offloaded ({}, {} of host memory; each moved to host memory after the forward equation that makes it, back to the device before the backward half reads it):\n",
            p.offloaded.len(),
            Budget::bytes(p.host_bytes)
        ));
        for r in &p.offloaded {
            t.push_str(&format!("  {r}\n"));
        }
    }
    if let Some(out) = out {
        t.push_str(&format!("wrote the planned program to {} (`remat bench` runs it)\n", out.display()));
    }
    t
}

/// The program's names by what the policy does with them: saved, offloaded, recomputed.
fn split_of<'a>(planner: &'a Planner, policy: &NamesPolicy) -> [Vec<&'a str>; 3] {
    let mut out: [Vec<&str>; 3] = Default::default();
    for n in planner.names() {
        let k = match (policy.saved().contains(n), policy.offloaded().contains(n)) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => 2,
        };
        out[k].push(n);
    }
    out
}

/// `  names saved on the device: q, k; offloaded to host memory: v; recomputed: ...`.
fn split_text(planner: &Planner, policy: &NamesPolicy) -> String {
    let [saved, offloaded, recomputed] = split_of(planner, policy);
    let list = |v: &[&str]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let mut t = format!("  names saved on the device: {}", list(&saved));
    if let NamesPolicy::SaveAndOffload { .. } = policy {
        t.push_str(&format!("; offloaded to host memory: {}", list(&offloaded)));
    }
    t.push_str(&format!("; recomputed: {}\n", list(&recomputed)));
    t
}

fn names_json(planner: &Planner, policy: &NamesPolicy) -> Value {
    let [saved, offloaded, recomputed] = split_of(planner, policy);
    json!({
        "saved": saved,
        "offloaded": match policy { NamesPolicy::SaveAndOffload { .. } => Some(offloaded), NamesPolicy::SaveOnly { .. } => None },
        "recomputed": recomputed,
    })
}

fn frontier_text(planner: &Planner) -> String {
    let mut t =
        format!("frontier ({}, {} plans evaluated exactly):\n", method_words(planner.method()), planner.evaluated());
    t.push_str(&format!(
        "  {:>14}  {:>16}  {:>14}  {:>10}\n",
        "peak bytes", "recompute FLOPs", "saved bytes", "recomputed"
    ));
    for p in planner.frontier() {
        t.push_str(&format!(
            "  {:>14}  {:>16}  {:>14}  {:>10}",
            p.peak_bytes, p.recompute_flops, p.residual_bytes, p.recomputed
        ));
        if let Some(names) = &p.names {
            t.push_str(&format!("  {}", names.jax_call()));
        }
        if let Some(rewrite) = &p.rewrite {
            t.push_str(&format!("  {rewrite}"));
        }
        if p.offloaded > 0 {
            t.push_str(&format!("  {} offloaded ({} host bytes)", p.offloaded, p.host_bytes));
        }
        t.push('\n');
    }
    t.push_str("built-in policies (each applied to the whole function):\n");
    for b in planner.builtins() {
        t.push_str(&format!("  {:>14}  {:>16}  {}\n", b.peak_bytes, b.recompute_flops, b.policy));
    }
    t
}

fn as_json(planner: &Planner, plan: Option<&Plan>, frontier: bool, notes: &[String]) -> Value {
    let mut v = json!({
        "method": format!("{:?}", planner.method()).to_lowercase(),
        "plans_evaluated": planner.evaluated(),
        "exact": matches!(planner.method(), Method::Exhaustive | Method::Names),
        "notes": notes,
    });
    if let Some(p) = plan {
        v["plan"] = json!({
            "budget": p.budget,
            "peak_bytes": p.peak_bytes,
            "recompute_flops": p.recompute_flops,
            "residual_bytes": p.residual_bytes,
            "saved": p.saved.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "recomputed": p.recomputed,
            "offloaded": p.offloaded,
            "host_bytes": p.host_bytes,
            "names": p.names.as_ref().map(|n| names_json(planner, n)),
            "jax_policy": p.jax_policy(),
        });
    }
    if frontier {
        v["frontier"] = planner
            .frontier()
            .iter()
            .map(|p| {
                json!({ "peak_bytes": p.peak_bytes, "recompute_flops": p.recompute_flops,
                        "residual_bytes": p.residual_bytes, "recomputed": p.recomputed,
                        "names": p.names.as_ref().map(|n| names_json(planner, n)),
                        "rewrite": p.rewrite, "offloaded": p.offloaded, "host_bytes": p.host_bytes })
            })
            .collect();
        v["builtins"] = planner
            .builtins()
            .iter()
            .map(|b| json!({ "policy": b.policy, "peak_bytes": b.peak_bytes, "recompute_flops": b.recompute_flops }))
            .collect();
    }
    v
}
