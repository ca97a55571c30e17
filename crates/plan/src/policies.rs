//! The plans that are JAX policies: each policy the planner evaluated as a plan
//! ([`PlannedPolicy`]: a built-in one, or a names policy), and the searches over names
//! policies (`--names-only`, [`PlanOptions::applicable`], and the names plans the general
//! search evaluates too).

use remat_ad::ResolvedPolicy;
use remat_ir::{Policy, Primitive};

use crate::budget;
use crate::model::{self, Model};
use crate::names::{self, NamesPolicy};
use crate::options::PlanOptions;
use crate::plan::Method;
use crate::search::{self, Evaluations, Point};
use crate::PlanError;

/// A policy the planner evaluated as a plan: JAX's policy, how JAX spells the call that
/// makes it, and for a names-only plan its names.
#[derive(Clone, Debug)]
pub(crate) struct PlannedPolicy {
    pub(crate) policy: Policy,
    pub(crate) jax_call: String,
    pub(crate) names: Option<NamesPolicy>,
    /// A plan of the function as written (`Planner::plain`), not of the named one.
    pub(crate) plain: bool,
}

/// The names policies over `names` as plans of the function itself (their decisions about
/// the body's equations, analysed): every subset while there are at most
/// [`NAMES_IN_GENERAL_SEARCH`] names on a small body (`small`), else the greedy path over the
/// names (at most 16 of its plans on a small body, `on_path` on a large one).
pub(crate) fn names_plain_plans(
    model: &Model,
    names: &[String],
    small: bool,
    on_path: usize,
) -> Result<Vec<model::Analysis>, PlanError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let policies = match (small, names.len() <= NAMES_IN_GENERAL_SEARCH) {
        (true, true) => names::splits(names, false),
        (true, false) => names::greedy_path(model, names, 16),
        (false, _) => names::greedy_path(model, names, on_path.max(2)),
    };
    let mut out: Vec<model::Analysis> = Vec::new();
    for p in policies {
        let saved = model.saved_by_policy(&ResolvedPolicy::Builtin(p.policy()))?;
        let a = model.analyze(&saved);
        if !out.iter().any(|o| o.recompute == a.recompute) {
            out.push(a);
        }
    }
    Ok(out)
}

/// The general search evaluates every names policy's plan while the program has at most
/// this many names (2^8 subsets, each distinct plan once).
pub const NAMES_IN_GENERAL_SEARCH: usize = 8;

/// `--names-only`: every subset of `names` (with a host budget, every split into saved,
/// offloaded and recomputed names) as its JAX policy, evaluated into `evals` (empty); the
/// policy of each point. With a host budget, a clear error if no split can offload within
/// it (no names, no named residual, or too little host memory).
pub(crate) fn names_plans(
    model: &Model,
    names: &[String],
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    host_budget: Option<usize>,
) -> Result<(), PlanError> {
    let (limit, tried) = match host_budget {
        None => (names::MAX_NAMES, "subset"),
        Some(_) => (names::MAX_NAMES_OFFLOAD, "split into saved, offloaded and recomputed names"),
    };
    if names.len() > limit {
        return Err(PlanError::Invalid(format!(
            "--names-only: the program has {} names; the planner tries every {tried} of at most {limit}",
            names.len()
        )));
    }
    let found = names::evaluate_splits(model, &names::splits(names, host_budget.is_some()), host_budget)?;
    if let Some(host_budget) = host_budget {
        let why = match &found.least_offload {
            _ if names.is_empty() => {
                Some("--names-only offloads only values named with checkpoint_name, and the program names none".into())
            }
            None => Some(format!(
                "no split of the program's names ({}) offloads a value the backward half reads",
                names.join(", ")
            )),
            Some((bytes, call)) if *bytes > host_budget => Some(format!(
                "the least host memory a names-only plan offloads is {bytes} bytes ({}), under {call}",
                budget::human(*bytes)
            )),
            Some(_) => None,
        };
        if let Some(why) = why {
            return Err(PlanError::NoOffload { host_budget, why });
        }
    }
    add_names_points(evals, policies, found.plans);
    Ok(())
}

/// [`PlanOptions::applicable`]: names policies over `names` (the program's and the
/// planner's), every subset when they are few enough, else the greedy path over them and
/// the neighbours of the frontier's names plans; with a host budget, the frontier's names
/// plans with their largest saved names offloaded, one more at a time.
pub(crate) fn applicable_plans(
    model: &Model,
    names: &[String],
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    options: &PlanOptions,
) -> Result<Method, PlanError> {
    let method = if names.len() <= names::MAX_NAMES {
        let found = names::evaluate_splits(model, &names::splits(names, false), None)?;
        add_names_points(evals, policies, found.plans);
        Method::Names
    } else {
        let (on_path, refined) = search::heuristic_evals(model.body().eqns.len(), options);
        let mut seen = std::collections::BTreeSet::new();
        let found = names::evaluate_policies(model, names::greedy_path(model, names, on_path.max(2)), &mut seen)?;
        add_names_points(evals, policies, found);
        // The neighbours of the frontier's names plans, a batch at a time while they move
        // the frontier.
        let mut left = refined;
        while left > 0 {
            let before = evals.frontier();
            let mut proposals = Vec::new();
            for &i in &before {
                let Some(names_policy) = evals.points[i].policy.and_then(|k| policies[k].names.clone()) else {
                    continue;
                };
                proposals.extend(names::neighbours(&names_policy, names));
            }
            proposals.truncate(left.saturating_mul(4));
            let found = names::evaluate_policies(model, proposals, &mut seen)?;
            let found: Vec<(NamesPolicy, Point)> = found.into_iter().take(left).collect();
            left -= found.len();
            let empty = found.is_empty();
            add_names_points(evals, policies, found);
            if empty || evals.frontier() == before {
                break;
            }
        }
        Method::NamesGreedy
    };
    if let Some(host_budget) = options.host_budget {
        applicable_offloads(model, evals, policies, host_budget)?;
    }
    Ok(method)
}

/// With a host budget, for [`PlanOptions::applicable`]: each frontier names plan with its
/// largest saved names offloaded to host memory, one more at a time, while their bytes fit
/// `host_budget` (`save_and_offload_only_these_names`).
fn applicable_offloads(
    model: &Model,
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    host_budget: usize,
) -> Result<(), PlanError> {
    let body = model.body();
    let bytes_of = |n: &str| -> u64 {
        body.eqns
            .iter()
            .filter(|e| matches!(&e.primitive, Primitive::Name { name } if name == n))
            .flat_map(|e| e.outvars.iter().map(|&v| model.bytes(v)))
            .sum()
    };
    let mut proposals = Vec::new();
    for i in evals.frontier() {
        let Some(NamesPolicy::SaveOnly { saved }) = evals.points[i].policy.and_then(|k| policies[k].names.clone())
        else {
            continue;
        };
        let mut by_size: Vec<(u64, String)> = saved.iter().map(|n| (bytes_of(n), n.clone())).collect();
        by_size.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut offloaded: Vec<String> = Vec::new();
        let mut used = 0u64;
        for (b, n) in by_size.into_iter().take(16) {
            if used + b > host_budget as u64 {
                continue;
            }
            used += b;
            offloaded.push(n);
            let kept: Vec<String> = saved.iter().filter(|m| !offloaded.contains(m)).cloned().collect();
            proposals.push(NamesPolicy::SaveAndOffload { saved: kept, offloaded: offloaded.clone() });
        }
    }
    let found = names::evaluate_splits(model, &proposals, Some(host_budget))?;
    add_names_points(evals, policies, found.plans);
    Ok(())
}

/// Adds names plans' points, each with its policy.
fn add_names_points(evals: &mut Evaluations, policies: &mut Vec<PlannedPolicy>, found: Vec<(NamesPolicy, Point)>) {
    for (names, mut point) in found {
        point.policy = Some(policies.len());
        policies.push(PlannedPolicy {
            policy: names.policy(),
            jax_call: names.jax_call(),
            names: Some(names),
            plain: false,
        });
        evals.insert(point);
    }
}
