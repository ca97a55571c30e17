//! The exact search against brute force: its enumeration of recompute sets against every
//! subset of the candidates, and its choice on a 19-candidate program against every
//! distinct plan evaluated one by one; and the greedy heuristic against it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use remat_ir::{parse_jaxpr, ClosedJaxpr};
use remat_plan::model::Model;
use remat_plan::{exact, Budget, Method, PlanOptions, Planner};

fn load(name: &str) -> ClosedJaxpr {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    ClosedJaxpr::new(Arc::new(parse_jaxpr(&text, name).unwrap()))
}

fn wrt_first() -> PlanOptions {
    PlanOptions { argnums: Some(vec![0]), ..PlanOptions::default() }
}

/// `n` budgets evenly from `lo` to `hi`, both included, largest first.
fn budgets(lo: usize, hi: usize, n: usize) -> Vec<usize> {
    (0..n).map(|j| hi - (hi - lo) * j / (n - 1)).collect()
}

/// The distinct recompute sets of every subset of the relevant candidates, each analysed
/// from scratch, in the order of their first subset counting down from saving everything.
fn every_subset(model: &Model) -> Vec<Vec<usize>> {
    let rel = model.relevant();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut saved = vec![true; model.body().eqns.len()];
    for mask in (0..1u64 << rel.len()).rev() {
        for (j, &e) in rel.iter().enumerate() {
            saved[e] = mask >> j & 1 == 1;
        }
        let r = model.analyze(&saved).recompute;
        if seen.insert(r.clone()) {
            out.push(r);
        }
    }
    out
}

#[test]
fn the_enumeration_finds_every_distinct_recompute_set_once_in_subset_order() {
    for name in ["chain.jaxpr", "dag.jaxpr", "two_chains.jaxpr"] {
        let model = Model::new(&load(name), Some(&[0]), &[]).unwrap();
        let want = every_subset(&model);
        let got = exact::recompute_sets(&model, usize::MAX).unwrap();
        assert_eq!(got, want, "{name}");
        // The cap: one set more than allowed is no enumeration.
        assert_eq!(exact::recompute_sets(&model, want.len()).map(|s| s.len()), Some(want.len()), "{name}");
        assert_eq!(exact::recompute_sets(&model, want.len() - 1), None, "{name}");
        if name == "two_chains.jaxpr" {
            assert_eq!((model.relevant().len(), want.len()), (19, 2000), "the oracle program's size");
        }
    }
}

/// Every distinct plan of a 19-candidate program evaluated one by one (`Model::evaluate`):
/// at 20 budgets from the smallest peak to the largest, the planner's choice is the optimum
/// (the fewest measured recompute FLOPs among the plans that fit, then the lower peak), and
/// its frontier is the Pareto set of all plans.
#[test]
fn the_exact_planner_finds_the_optimum_of_every_plan_of_nineteen_candidates() {
    let f = load("two_chains.jaxpr");
    let model = Model::new(&f, Some(&[0]), &[]).unwrap();
    let all: Vec<(usize, u64)> = every_subset(&model)
        .iter()
        .map(|r| {
            let e = model.evaluate(&model.saved_for(r)).unwrap();
            (e.peak_bytes, e.recompute_flops)
        })
        .collect();
    let planner = Planner::new(&f, &[], &wrt_first()).unwrap();
    assert_eq!(planner.method(), Method::Exhaustive);
    assert_eq!(planner.candidates(), 19);
    let peaks: BTreeSet<usize> = all.iter().map(|p| p.0).collect();
    assert!(peaks.len() >= 5, "the plans' peaks differ: {peaks:?}");
    let (lo, hi) = (*peaks.first().unwrap(), *peaks.last().unwrap());
    assert_eq!(planner.min_peak(), lo);
    for b in budgets(lo, hi, 20) {
        let best = all.iter().filter(|p| p.0 <= b).min_by_key(|p| (p.1, p.0)).unwrap();
        let plan = planner.plan(Budget::bytes(b)).unwrap();
        assert_eq!((plan.peak_bytes, plan.recompute_flops), *best, "budget {b}");
    }
    let mut pareto: Vec<(usize, u64)> = Vec::new();
    for p in all.iter().copied().collect::<BTreeSet<_>>() {
        if pareto.last().is_none_or(|q| p.1 < q.1) {
            pareto.push(p);
        }
    }
    let frontier: Vec<(usize, u64)> = planner.frontier().iter().map(|p| (p.peak_bytes, p.recompute_flops)).collect();
    assert_eq!(frontier, pareto);
    assert!(frontier.len() >= 4, "{frontier:?}");
}
