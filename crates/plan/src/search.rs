//! The search: which plans to evaluate exactly, and the frontier they make.
//!
//! Plans are keyed by their recompute set (the program depends on nothing else, see
//! `model.rs`). The search proposes recompute sets, evaluates each one exactly
//! (`Model::evaluate`: the planned peak of the whole program) and keeps them all; a budget
//! then selects among them (`select`). Two ways to propose:
//!
//! - **Exhaustive** (exact): the distinct recompute sets of all the subsets of the relevant
//!   candidates (found without visiting the subsets, `exact.rs`) are all evaluated exactly,
//!   when they are few enough ([`exhaustive_plans`]). When this runs, the chosen plan is
//!   optimal over *every* plan: minimal recompute FLOPs among those whose exact peak fits,
//!   ties broken by the lower peak.
//! - **Greedy** (heuristic, beyond the exhaustive limits): starting from saving
//!   everything, repeatedly stop saving the residual-producing candidate whose recompute
//!   frees the most residual bytes per recomputed FLOP (a removal that frees nothing is
//!   taken last, cheapest first); each step is a plan. Every unsaved candidate stays
//!   needed, so a step's effect is local (its value stops being a residual, its inputs
//!   that are neither saved residuals nor recomputed become residuals). At most
//!   `heuristic_evals` plans of the path, evenly spread and always including both ends,
//!   are evaluated exactly; then `refine` evaluates plans one decision away from the
//!   frontier (at most `refine_evals`), which repairs the greedy path's misses where the
//!   residual bytes it ranks by and the exact peak disagree.
//!
//! Both also evaluate the built-in policies' plans, so that no built-in policy lies below
//! the frontier.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use rayon::prelude::*;
use remat_ir::Atom;

use crate::model::{Analysis, Model};
use crate::PlanError;

/// One plan evaluated exactly.
#[derive(Clone, Debug)]
pub struct Point {
    /// The recomputed equations of the checkpointed body, ascending.
    pub recompute: Vec<usize>,
    pub peak_bytes: usize,
    pub recompute_flops: u64,
    pub residual_bytes: u64,
    /// `Some(k)`: the planner's `k`th rewritten function (a scan nested, `nest.rs`, or
    /// checkpointed segments, `segment.rs`), measured as it is (its recompute set empty);
    /// `None`: a plan of the function itself.
    pub variant: Option<usize>,
    /// `Some(k)`: the function checkpointed under the planner's `k`th policy (a built-in
    /// policy, or a names-only plan's), which decides the equations of the body's scans and
    /// conds too, as in JAX; its recompute set is that of its decisions about the body's own
    /// equations. `None`: the plan's decisions are per equation of the body.
    pub policy: Option<usize>,
    /// The saved equations whose outputs live in host memory, ascending.
    pub offload: Vec<usize>,
    /// The host memory the plan uses.
    pub host_bytes: usize,
}

impl Point {
    /// The plan of `model` recomputing `recompute` and offloading `offload`, evaluated.
    pub fn measured(model: &Model, recompute: Vec<usize>, offload: Vec<usize>) -> Result<Point, PlanError> {
        let e = model.measure_with(&model.saved_for(&recompute), &offload)?;
        Ok(Point {
            recompute,
            peak_bytes: e.peak_bytes,
            recompute_flops: e.recompute_flops,
            residual_bytes: e.residual_bytes,
            variant: None,
            policy: None,
            offload,
            host_bytes: e.host_bytes,
        })
    }

    /// The function under the planner's policy `k` (`policy`), evaluated.
    pub fn of_policy(model: &Model, k: usize, policy: &remat_ad::ResolvedPolicy) -> Result<Point, PlanError> {
        let (decisions, analysis, e) = model.measure_policy(policy)?;
        let offload: Vec<usize> = (0..decisions.len())
            .filter(|&i| matches!(decisions[i], remat_ad::Saveability::Offloadable { .. }))
            .collect();
        Ok(Point {
            recompute: analysis.recompute,
            peak_bytes: e.peak_bytes,
            recompute_flops: e.recompute_flops,
            residual_bytes: e.residual_bytes,
            variant: None,
            policy: Some(k),
            offload,
            host_bytes: e.host_bytes,
        })
    }
}

/// What identifies a plan that rewrites the function (a scan nesting, checkpointed
/// segments), is a policy, or offloads: its rewrite, policy, recompute set and offloaded
/// equations.
type RewrittenKey = (Option<usize>, Option<usize>, Vec<usize>, Vec<usize>);

/// The plans evaluated, in evaluation order (which breaks the last ties).
#[derive(Debug, Default)]
pub struct Evaluations {
    pub points: Vec<Point>,
    /// The plans of the function itself, by recompute set (the search's lookups).
    plain: BTreeMap<Vec<usize>, usize>,
    /// The nested and offloading plans.
    rewritten: BTreeMap<RewrittenKey, usize>,
}

impl Evaluations {
    /// Evaluates the plan `a` (unless its recompute set was) and returns its index.
    pub fn add(&mut self, model: &Model, a: &Analysis) -> Result<usize, PlanError> {
        Ok(self.add_all(model, std::slice::from_ref(a))?[0])
    }

    /// Evaluates the plans `plans` whose recompute sets were not (each once, in parallel:
    /// the evaluations are independent) and returns their indices. The points are added in
    /// the order of `plans`, so the result does not depend on the threads.
    pub fn add_all(&mut self, model: &Model, plans: &[Analysis]) -> Result<Vec<usize>, PlanError> {
        let mut fresh: Vec<&Analysis> = Vec::new();
        for a in plans {
            if !self.contains(&a.recompute) && !fresh.iter().any(|f| f.recompute == a.recompute) {
                fresh.push(a);
            }
        }
        let measured: Vec<Result<(usize, u64, u64, usize), PlanError>> = fresh
            .par_iter()
            .map(|a| {
                let e = model.measure_with(&model.saved_for(&a.recompute), &[])?;
                Ok((e.peak_bytes, e.recompute_flops, e.residual_bytes, e.host_bytes))
            })
            .collect();
        for (a, m) in fresh.into_iter().zip(measured) {
            let (peak_bytes, recompute_flops, residual_bytes, host_bytes) = m?;
            self.insert(Point {
                recompute: a.recompute.clone(),
                peak_bytes,
                recompute_flops,
                residual_bytes,
                variant: None,
                policy: None,
                offload: Vec::new(),
                host_bytes,
            });
        }
        Ok(plans.iter().map(|a| self.plain[&a.recompute]).collect())
    }

    /// Adds a point evaluated elsewhere (unless its recompute set was) and returns its index.
    pub fn insert(&mut self, p: Point) -> usize {
        let next = self.points.len();
        let i = match p.variant.is_none() && p.policy.is_none() && p.offload.is_empty() {
            true => *self.plain.entry(p.recompute.clone()).or_insert(next),
            false => {
                *self.rewritten.entry((p.variant, p.policy, p.recompute.clone(), p.offload.clone())).or_insert(next)
            }
        };
        if i == next {
            self.points.push(p);
        }
        i
    }

    /// Whether the plan of the function itself with recompute set `recompute` was
    /// evaluated.
    pub fn contains(&self, recompute: &[usize]) -> bool {
        self.plain.contains_key(recompute)
    }

    /// The plan for `budget`: the least recompute FLOPs among the points whose peak fits,
    /// then the least host memory (an offload only where it saves FLOPs), then the lower
    /// peak, then the earlier evaluated. `None` if nothing fits.
    pub fn select(&self, budget: usize) -> Option<usize> {
        (0..self.points.len()).filter(|&i| self.points[i].peak_bytes <= budget).min_by_key(|&i| {
            let p = &self.points[i];
            (p.recompute_flops, p.host_bytes, p.peak_bytes, i)
        })
    }

    /// The point with the smallest peak (then the fewest FLOPs).
    pub fn smallest(&self) -> Option<usize> {
        (0..self.points.len()).min_by_key(|&i| (self.points[i].peak_bytes, self.points[i].recompute_flops, i))
    }

    /// The Pareto frontier: the points no other point beats on both peak and FLOPs (one
    /// per distinct pair), by increasing peak.
    pub fn frontier(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.points.len()).collect();
        order.sort_by_key(|&i| (self.points[i].peak_bytes, self.points[i].recompute_flops, i));
        let mut out: Vec<usize> = Vec::new();
        for i in order {
            // Kept when it needs fewer FLOPs than every point of smaller peak.
            if out.last().is_none_or(|&j| self.points[i].recompute_flops < self.points[j].recompute_flops) {
                out.push(i);
            }
        }
        out
    }
}

/// The distinct recompute sets of every subset of the relevant candidates, analysed, if
/// there are at most `max_candidates` relevant candidates and `max_plans` distinct sets; in
/// the order of the subsets that first give them, counting down from saving everything
/// (cheap plans first). Found by [`crate::exact::recompute_sets`] without visiting the
/// subsets, so the time goes with the distinct sets, not with `2^candidates`.
pub fn exhaustive(model: &Model, max_candidates: usize, max_plans: usize) -> Option<Vec<Analysis>> {
    if model.relevant().len() > max_candidates {
        return None;
    }
    let sets = crate::exact::recompute_sets(model, max_plans)?;
    Some(
        sets.into_iter()
            .map(|r| {
                let a = model.analyze(&model.saved_for(&r));
                debug_assert_eq!(a.recompute, r, "a closed set is its own plan's recompute set");
                a
            })
            .collect(),
    )
}

/// How many distinct plans the exhaustive search may evaluate on a checkpointed body of
/// `size` equations: the options' `exhaustive_plans` up to `exhaustive_full_size`
/// equations, beyond that scaled by `exhaustive_full_size / size` (at least one), so that
/// its time stays about that of `exhaustive_plans` evaluations of a full-size body.
pub fn exhaustive_plans(size: usize, options: &crate::PlanOptions) -> usize {
    if size <= options.exhaustive_full_size {
        return options.exhaustive_plans;
    }
    let scaled = options.exhaustive_plans as u128 * options.exhaustive_full_size as u128 / size as u128;
    (scaled.min(usize::MAX as u128) as usize).clamp(options.exhaustive_plans.min(1), options.exhaustive_plans)
}

/// The greedy path from saving everything to saving nothing (see the module docs), as the
/// order in which its steps stop saving candidates: the path's plan `k` saves every
/// candidate but the first `k` ([`path_plans`] analyses the plans wanted).
///
/// The state is kept incrementally (each step is a plan of the path, so analysing every
/// one from scratch made the path quadratic in the program): since every unsaved candidate
/// is recomputed, un-saving `e` turns its outputs from residuals into recomputed values,
/// adds its FLOPs, and makes each of its known inputs whose producer is saved (or not a
/// candidate) a residual; nothing stops being reachable. This is what `Model::analyze`
/// finds for the same saved set (checked by `the_incremental_greedy_path_is_the_analysed_one`).
///
/// Each candidate's key is kept in a heap and recomputed only when something it reads
/// changes (scanning every residual's producer at every step made the path quadratic:
/// all of `remat plan`'s time at 100,001 equations once the evaluations were fast). A key
/// reads whether the candidate's outputs are residuals, and whether each input is a
/// residual and its producer recomputed; a step changes those for the chosen candidate's
/// outputs and for the inputs that become residuals, so it recomputes the keys of their
/// producers and readers. Keys are distinct (the equation is part of one), so the heap's
/// best is the scan's.
pub fn greedy(model: &Model) -> Vec<usize> {
    let body = model.body();
    let n = body.eqns.len();
    let start = model.analyze(&vec![true; n]);
    let mut is_res = vec![false; body.vars.len()];
    for &v in &start.residuals {
        is_res[v.index()] = true;
    }
    let mut in_r = vec![false; n];
    for &e in &start.recompute {
        in_r[e] = true;
    }
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); body.vars.len()];
    for (e, eqn) in body.eqns.iter().enumerate() {
        for a in &eqn.invars {
            if let Atom::Var(u) = a {
                if readers[u.index()].last() != Some(&e) {
                    readers[u.index()].push(e);
                }
            }
        }
    }
    // A candidate making a residual, with what un-saving it would do: positive gains
    // first, by gain per FLOP (compared exactly as fractions); then the largest gain, the
    // fewest FLOPs, the earliest equation.
    type Key = (bool, u128, i64, Reverse<u64>, Reverse<usize>);
    let key = |e: usize, is_res: &[bool], in_r: &[bool]| -> Option<Key> {
        let eqn = &body.eqns[e];
        if !model.is_candidate(e) || !eqn.outvars.iter().any(|o| is_res[o.index()]) {
            return None;
        }
        let freed: i64 = eqn.outvars.iter().filter(|o| is_res[o.index()]).map(|&o| model.bytes(o) as i64).sum();
        let mut added = 0i64;
        let mut counted: Vec<usize> = Vec::new();
        for a in &eqn.invars {
            let Atom::Var(u) = a else { continue };
            let Some(p) = producer_of(model, *u) else { continue };
            if is_res[u.index()] || in_r[p] || counted.contains(&u.index()) {
                continue;
            }
            counted.push(u.index());
            added += model.bytes(*u) as i64;
        }
        let gain = freed - added;
        let flops = model.flops(e);
        Some(if gain > 0 {
            (true, ((gain as u128) << 64) / (flops as u128 + 1), 0, Reverse(flops), Reverse(e))
        } else {
            (false, 0, gain, Reverse(flops), Reverse(e))
        })
    };
    let mut current: Vec<Option<Key>> = (0..n).map(|e| key(e, &is_res, &in_r)).collect();
    let mut heap: BinaryHeap<Key> = current.iter().flatten().copied().collect();
    let mut order = Vec::new();
    let mut touched: Vec<usize> = Vec::new();
    while let Some(k) = heap.pop() {
        let Reverse(e) = k.4;
        if current[e] != Some(k) {
            continue;
        }
        order.push(e);
        in_r[e] = true;
        touched.clear();
        touched.push(e);
        for &o in &body.eqns[e].outvars {
            is_res[o.index()] = false;
            touched.extend(&readers[o.index()]);
        }
        for a in &body.eqns[e].invars {
            let Atom::Var(u) = a else { continue };
            let Some(p) = producer_of(model, *u) else { continue };
            if model.is_known(*u) && !in_r[p] && !is_res[u.index()] {
                is_res[u.index()] = true;
                touched.push(p);
                touched.extend(&readers[u.index()]);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &t in &touched {
            let k = key(t, &is_res, &in_r);
            if k != current[t] {
                current[t] = k;
                heap.extend(k);
            }
        }
    }
    order
}

/// At most `k` plans of the greedy path `order` (from [`greedy`]), evenly spread, always
/// including both ends (saving everything, and saving none of the path's candidates).
pub fn path_plans(model: &Model, order: &[usize], k: usize) -> Vec<Analysis> {
    let steps: Vec<usize> = (0..=order.len()).collect();
    spread(&steps, k).into_iter().map(|k| model.analyze(&model.saved_for(&order[..k]))).collect()
}

fn producer_of(model: &Model, v: remat_ir::Var) -> Option<usize> {
    model.producer(v)
}

/// The fewest plans the heuristic evaluates exactly, however large the program: both ends
/// of the greedy path and one between.
pub const MIN_HEURISTIC_EVALS: usize = 3;

/// How many plans of the greedy path, and how many neighbours of the frontier, the
/// heuristic evaluates exactly on a checkpointed body of `size` equations: the options'
/// `heuristic_evals` and `refine_evals` up to `heuristic_full_size` equations; beyond, their
/// sum scaled by `(heuristic_full_size / size)^2` (at least [`MIN_HEURISTIC_EVALS`]), three
/// quarters of it on the path. An evaluation takes time about linear in the program, so the
/// heuristic's exact evaluations take time falling with the program's size beyond the limit
/// (with the defaults: all 104 up to 600 equations, 5 at 2,500, 3 from 3,500 on).
pub fn heuristic_evals(size: usize, options: &crate::PlanOptions) -> (usize, usize) {
    let full = options.heuristic_evals + options.refine_evals;
    if size <= options.heuristic_full_size {
        return (options.heuristic_evals, options.refine_evals);
    }
    let scaled = (full as u128 * (options.heuristic_full_size as u128).pow(2) / (size as u128).pow(2)) as usize;
    let total = scaled.clamp(MIN_HEURISTIC_EVALS.min(full), full);
    let on_path = (total - total / 4).min(options.heuristic_evals.max(2)).min(total);
    (on_path, (total - on_path).min(options.refine_evals))
}

/// At most `k` items of `items`, evenly spread, always including the first and the last
/// (only the last when `k` is 1).
pub fn spread<T: Clone>(items: &[T], k: usize) -> Vec<T> {
    if items.len() <= k {
        return items.to_vec();
    }
    if k < 2 {
        return items.last().into_iter().take(k).cloned().collect();
    }
    let last = items.len() - 1;
    let mut picks: Vec<usize> = (0..k).map(|j| j * last / (k - 1)).collect();
    picks.dedup();
    picks.into_iter().map(|i| items[i].clone()).collect()
}

/// Refinement also tries two decisions changed at once on programs of at most this many
/// relevant candidates.
pub const PAIR_CANDIDATES: usize = 16;

/// Local refinement of the frontier (after the greedy path): the plans one decision away
/// from a frontier plan (one candidate saved or recomputed instead), most promising first
/// (the most FLOPs saved per residual byte added), evaluated exactly until `max_evals`
/// were spent or a round adds nothing new to the frontier. All rounds together look at no
/// more than `16 * max_evals` (at least 256) neighbours, in frontier then program order.
pub fn refine(model: &Model, evals: &mut Evaluations, max_evals: usize) -> Result<(), PlanError> {
    let mut left = max_evals;
    // Each neighbour is one analysis (linear in the program): at most this many in all,
    // so that large programs stay fast.
    let relevant = model.relevant();
    let mut analyses = match relevant.len() <= PAIR_CANDIDATES {
        // A program of few candidates: every neighbour of every plan, however many rounds.
        true => 1 << 16,
        false => max_evals.saturating_mul(16).max(256),
    };
    // One decision changed, or on a program of few candidates also two: the compiled peak
    // can fall only when two values are recomputed together (one of them read by the
    // kernel that computes the other).
    let mut flips: Vec<Vec<usize>> = relevant.iter().map(|&e| vec![e]).collect();
    if relevant.len() <= PAIR_CANDIDATES {
        for (k, &e) in relevant.iter().enumerate() {
            flips.extend(relevant[k + 1..].iter().map(|&f| vec![e, f]));
        }
    }
    while left > 0 && analyses > 0 {
        let before = evals.frontier();
        // The frontier's neighbours first, then those of the other plans of the function
        // itself (by peak): the compiled peak does not follow the residual bytes the greedy
        // path ranks by (the JIT computes some residuals inside the loops that read them),
        // so a better plan may be one decision away from a plan just off the frontier.
        let mut bases = before.clone();
        let mut rest: Vec<usize> = (0..evals.points.len())
            .filter(|i| !before.contains(i))
            .filter(|&i| evals.points[i].variant.is_none() && evals.points[i].policy.is_none())
            .collect();
        rest.sort_by_key(|&i| (evals.points[i].peak_bytes, evals.points[i].recompute_flops, i));
        bases.extend(rest);
        let mut neighbours: Vec<(u8, i128, u64, Vec<usize>, Analysis)> = Vec::new();
        for &i in &bases {
            let base = &evals.points[i];
            let saved = model.saved_for(&base.recompute);
            // The analytic residual bytes, which the neighbours' are compared with.
            let base_bytes = model.analyze(&saved).residual_bytes;
            for flip in &flips {
                if analyses == 0 {
                    break;
                }
                analyses -= 1;
                let mut flipped = saved.clone();
                for &e in flip {
                    flipped[e] = !flipped[e];
                }
                let a = model.analyze(&flipped);
                if evals.contains(&a.recompute) || neighbours.iter().any(|n| n.3 == a.recompute) {
                    continue;
                }
                let flops_saved = base.recompute_flops as i128 - a.recompute_flops as i128;
                let bytes_added = a.residual_bytes as i128 - base_bytes as i128;
                // Two kinds of move, scored each its own way (scaled to stay integral):
                // cheaper plans by the FLOPs saved per byte added, smaller ones by the
                // bytes freed per FLOP added.
                let (kind, score) = match flops_saved > 0 {
                    true => (0, -(flops_saved << 20) / (bytes_added.max(0) + 1)),
                    false => (1, -((-bytes_added).max(0) << 20) / (-flops_saved + 1)),
                };
                neighbours.push((kind, score, a.residual_bytes, a.recompute.clone(), a));
            }
        }
        neighbours.sort_by(|x, y| (x.0, x.1, x.2, &x.3).cmp(&(y.0, y.1, y.2, &y.3)));
        // The best of each kind in turn.
        let split = neighbours.iter().position(|n| n.0 == 1).unwrap_or(neighbours.len());
        let smaller = neighbours.split_off(split);
        let mut batch: Vec<Analysis> = Vec::new();
        let (mut a, mut b) = (neighbours.into_iter(), smaller.into_iter());
        while batch.len() < left {
            match (a.next(), b.next()) {
                (None, None) => break,
                (x, y) => batch.extend(x.into_iter().chain(y).map(|n| n.4)),
            }
        }
        batch.truncate(left);
        left -= batch.len();
        let changed = !batch.is_empty();
        evals.add_all(model, &batch)?;
        if !changed || evals.frontier() == before {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PlanOptions;

    #[test]
    fn the_exhaustive_plan_limit_falls_with_the_body_size() {
        let o = PlanOptions::default();
        assert_eq!(exhaustive_plans(1, &o), o.exhaustive_plans);
        assert_eq!(exhaustive_plans(o.exhaustive_full_size, &o), o.exhaustive_plans);
        assert_eq!(exhaustive_plans(2 * o.exhaustive_full_size, &o), o.exhaustive_plans / 2);
        assert_eq!(exhaustive_plans(usize::MAX, &o), 1);
        let none = PlanOptions { exhaustive_plans: 0, ..PlanOptions::default() };
        assert_eq!(exhaustive_plans(10 * none.exhaustive_full_size, &none), 0);
    }

    #[test]
    fn large_programs_get_fewer_exact_evaluations_and_never_fewer_than_the_minimum() {
        let o = PlanOptions::default();
        let full = (o.heuristic_evals, o.refine_evals);
        assert_eq!(heuristic_evals(1, &o), full);
        assert_eq!(heuristic_evals(o.heuristic_full_size, &o), full);
        let mut last = usize::MAX;
        for size in [601, 900, 1_200, 2_500, 3_500, 10_000, 100_000, usize::MAX / 2] {
            let (path, refined) = heuristic_evals(size, &o);
            let total = path + refined;
            assert!(total <= last, "{size}: {total} evaluations after {last}");
            assert!(total >= MIN_HEURISTIC_EVALS && path >= 2, "{size}: {path} + {refined}");
            assert!(path <= o.heuristic_evals && refined <= o.refine_evals);
            last = total;
        }
        assert_eq!(heuristic_evals(2_500, &o), (4, 1));
        assert_eq!(heuristic_evals(10_000, &o), (3, 0));
        // Options allowing fewer than the minimum are honoured.
        let tiny = PlanOptions { heuristic_evals: 2, refine_evals: 0, ..PlanOptions::default() };
        assert_eq!(heuristic_evals(10_000, &tiny), (2, 0));
    }
}
