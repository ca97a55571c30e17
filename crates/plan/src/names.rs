//! `--names-only`: plans that are JAX policies over the program's `checkpoint_name`s.
//!
//! Without a host budget, a plan is `save_only_these_names(subset)`: every subset of the
//! names is tried. With one, a plan is a *split* of the names into saved (on the device),
//! offloaded (to host memory) and recomputed, the policy
//! `save_and_offload_only_these_names(names_which_can_be_saved=..., names_which_can_be_offloaded=...,
//! offload_src="device", offload_dst="pinned_host")`: every split (3^n of `n` names) is tried.
//!
//! A split's plan is what `remat-ad` makes of the policy itself: `checkpoint(f, policy)`
//! with the built-in policy (`ResolvedPolicy::Builtin`, JAX's meaning, `Offloadable`
//! included) deciding every equation, those inside the body's scans and conds too, and
//! partial evaluation splitting by those decisions (an offloaded value is `device_put` to
//! `MemorySpace.Host` after its equation and back before the backward half reads it).
//! Every other value follows JAX's rule under that policy: recomputed. Splits that give
//! the same program (same recompute set, same offloaded residuals, same names saved inside
//! nested bodies; a name whose value the backward half does not read changes nothing) are
//! evaluated once; a plan keeps the first split giving it, in the order of [`splits`].

use std::collections::BTreeSet;

use rayon::prelude::*;
use remat_ad::{ResolvedPolicy, Saveability};
use remat_ir::{Policy, Primitive};

use crate::model::Model;
use crate::search::Point;
use crate::PlanError;

/// At most this many names without a host budget (2^16 subsets)...
pub const MAX_NAMES: usize = 16;
/// ...and with one (3^8 = 6,561 splits).
pub const MAX_NAMES_OFFLOAD: usize = 8;

/// The JAX policy a names-only plan is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamesPolicy {
    /// `save_only_these_names(*saved)`: every other value recomputed.
    SaveOnly { saved: Vec<String> },
    /// `save_and_offload_only_these_names(...)` from `"device"` to `"pinned_host"`: the
    /// values named `saved` stay on the device, those named `offloaded` wait in host
    /// memory, every other value is recomputed.
    SaveAndOffload { saved: Vec<String>, offloaded: Vec<String> },
}

impl NamesPolicy {
    /// The names saved on the device.
    pub fn saved(&self) -> &[String] {
        match self {
            NamesPolicy::SaveOnly { saved } | NamesPolicy::SaveAndOffload { saved, .. } => saved,
        }
    }

    /// The names offloaded to host memory (none for `SaveOnly`).
    pub fn offloaded(&self) -> &[String] {
        match self {
            NamesPolicy::SaveOnly { .. } => &[],
            NamesPolicy::SaveAndOffload { offloaded, .. } => offloaded,
        }
    }

    /// The policy as remat holds it (what `remat-ad` gives JAX's meaning).
    pub fn policy(&self) -> Policy {
        match self {
            NamesPolicy::SaveOnly { saved } => Policy::SaveOnlyTheseNames { names: saved.clone() },
            NamesPolicy::SaveAndOffload { saved, offloaded } => Policy::SaveAndOffloadOnlyTheseNames {
                saved: saved.clone(),
                offloaded: offloaded.clone(),
                offload_src: "device".into(),
                offload_dst: "pinned_host".into(),
            },
        }
    }

    /// The call that makes the policy in JAX 0.10.2, as Python:
    /// `jax.checkpoint_policies.save_only_these_names('q', 'k')`, or
    /// `jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=['q'],
    /// names_which_can_be_offloaded=['k'], offload_src="device", offload_dst="pinned_host")`
    /// (JAX's keyword-only parameters, all four required).
    pub fn jax_call(&self) -> String {
        let quoted = |names: &[String]| names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        match self {
            NamesPolicy::SaveOnly { saved } => {
                format!("jax.checkpoint_policies.save_only_these_names({})", quoted(saved))
            }
            NamesPolicy::SaveAndOffload { saved, offloaded } => format!(
                "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[{}], names_which_can_be_offloaded=[{}], offload_src=\"device\", offload_dst=\"pinned_host\")",
                quoted(saved),
                quoted(offloaded)
            ),
        }
    }
}

/// Every policy the planner tries over `names` (in program order): the subsets in mask
/// order (bit `j` saves name `j`) without `offload`; with it, the splits in base-3 order
/// (digit `j` of name `j`: 0 recomputed, 1 saved, 2 offloaded).
pub fn splits(names: &[String], offload: bool) -> Vec<NamesPolicy> {
    let pick = |digits: &[u8], d: u8| -> Vec<String> {
        names.iter().zip(digits).filter(|(_, &x)| x == d).map(|(n, _)| n.clone()).collect()
    };
    let base: u64 = if offload { 3 } else { 2 };
    let count = base.pow(names.len() as u32);
    (0..count)
        .map(|mut k| {
            let digits: Vec<u8> = (0..names.len())
                .map(|_| {
                    let d = (k % base) as u8;
                    k /= base;
                    d
                })
                .collect();
            match offload {
                false => NamesPolicy::SaveOnly { saved: pick(&digits, 1) },
                true => NamesPolicy::SaveAndOffload { saved: pick(&digits, 1), offloaded: pick(&digits, 2) },
            }
        })
        .collect()
}

/// The names that occur inside the body's scans, conds and other calls (not as equations
/// of the body itself): a policy saving one changes the program without changing the
/// body's own decisions.
fn nested_names(model: &Model) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in &model.body().eqns {
        for sub in e.primitive.subjaxprs() {
            out.extend(sub.checkpoint_names());
        }
    }
    out
}

/// What identifies the program a names policy gives: the recompute set and the offloaded
/// equations of its decisions about the body's own equations, and the names it saves or
/// offloads inside nested bodies. Policies with equal keys give the same program.
fn program_key(model: &Model, policy: &NamesPolicy, nested: &BTreeSet<String>) -> Result<ProgramKey, PlanError> {
    let decisions = model.decisions_by_policy(&ResolvedPolicy::Builtin(policy.policy()))?;
    let saved: Vec<bool> = decisions.iter().map(|d| *d != Saveability::Recompute).collect();
    let a = model.analyze(&saved);
    let body = model.body();
    let offload: Vec<usize> = (0..decisions.len())
        .filter(|&i| matches!(decisions[i], Saveability::Offloadable { .. }))
        .filter(|&i| body.eqns[i].outvars.iter().any(|v| a.residuals.binary_search(v).is_ok()))
        .collect();
    let inside = |names: &[String]| names.iter().filter(|n| nested.contains(*n)).cloned().collect::<Vec<_>>();
    Ok((a.recompute, offload, inside(policy.saved()), inside(policy.offloaded())))
}

/// What [`program_key`] gives.
pub type ProgramKey = (Vec<usize>, Vec<usize>, Vec<String>, Vec<String>);

/// What evaluating the splits found.
#[derive(Debug)]
pub struct SplitsEvaluated {
    /// Every distinct plan whose host memory fits the host budget, with the first split
    /// giving it: its point (`policy` to be set by the caller) and its policy.
    pub plans: Vec<(NamesPolicy, Point)>,
    /// The least host memory a split that offloads something needs (with its call), if
    /// any split offloads something.
    pub least_offload: Option<(usize, String)>,
}

/// Evaluates every split's plan, each distinct program once and in parallel, as
/// `checkpoint(f, policy)` with JAX's meaning of the policy (it decides inside scans and
/// conds too), keeping the plans whose host memory fits `host_budget`.
pub fn evaluate_splits(
    model: &Model,
    splits: &[NamesPolicy],
    host_budget: Option<usize>,
) -> Result<SplitsEvaluated, PlanError> {
    let nested = nested_names(model);
    let mut fresh: Vec<&NamesPolicy> = Vec::new();
    let mut seen = BTreeSet::new();
    for s in splits {
        if seen.insert(program_key(model, s, &nested)?) {
            fresh.push(s);
        }
    }
    let measured: Vec<Result<Point, PlanError>> =
        fresh.par_iter().map(|s| Point::of_policy(model, usize::MAX, &ResolvedPolicy::Builtin(s.policy()))).collect();
    let mut out = SplitsEvaluated { plans: Vec::new(), least_offload: None };
    for (split, p) in fresh.into_iter().zip(measured) {
        let p = p?;
        if !p.offload.is_empty() && out.least_offload.as_ref().is_none_or(|(b, _)| p.host_bytes < *b) {
            out.least_offload = Some((p.host_bytes, split.jax_call()));
        }
        if host_budget.is_some_and(|h| p.host_bytes > h) {
            continue;
        }
        out.plans.push((split.clone(), p));
    }
    Ok(out)
}

/// The greedy path over names, for more names than the exhaustive search takes: from
/// saving every name to saving none, dropping one name at a time, the one whose value has
/// the most bytes per FLOP of the equation that makes it (what recomputing it alone costs
/// while its inputs stay saved) first. Each step is a policy; at most `k` of them, evenly
/// spread and always both ends, are returned.
pub fn greedy_path(model: &Model, names: &[String], k: usize) -> Vec<NamesPolicy> {
    let body = model.body();
    // Each name's bytes and the FLOPs of the equation making the value it names.
    let mut score: Vec<(u128, usize)> = names
        .iter()
        .enumerate()
        .map(|(j, n)| {
            let (mut bytes, mut flops) = (0u64, 0u64);
            for e in &body.eqns {
                let (Primitive::Name { name }, Some(remat_ir::Atom::Var(v))) = (&e.primitive, e.invars.first()) else {
                    continue;
                };
                if name != n {
                    continue;
                }
                bytes += model.bytes(*v);
                if let Some(p) = model.producer(*v) {
                    flops += model.flops(p);
                }
            }
            ((u128::from(bytes) << 32) / (u128::from(flops) + 1), j)
        })
        .collect();
    score.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let order: Vec<usize> = score.into_iter().map(|(_, j)| j).collect();
    let steps: Vec<usize> = (0..=order.len()).collect();
    crate::search::spread(&steps, k)
        .into_iter()
        .map(|drop| {
            let dropped = &order[..drop];
            let saved = (0..names.len()).filter(|j| !dropped.contains(j)).map(|j| names[j].clone()).collect();
            NamesPolicy::SaveOnly { saved }
        })
        .collect()
}

/// The names policies one name away from `policy` (one more saved, or one fewer), for the
/// refinement around the frontier.
pub fn neighbours(policy: &NamesPolicy, names: &[String]) -> Vec<NamesPolicy> {
    let saved = policy.saved();
    names
        .iter()
        .map(|n| {
            let flipped: Vec<String> = match saved.contains(n) {
                true => saved.iter().filter(|m| *m != n).cloned().collect(),
                false => names.iter().filter(|m| saved.contains(m) || *m == n).cloned().collect(),
            };
            NamesPolicy::SaveOnly { saved: flipped }
        })
        .collect()
}

/// Evaluates `policies` (each distinct program once, in parallel; those whose program was
/// met before, in `seen`, are skipped): their points, with the policy of each.
pub fn evaluate_policies(
    model: &Model,
    policies: Vec<NamesPolicy>,
    seen: &mut BTreeSet<ProgramKey>,
) -> Result<Vec<(NamesPolicy, Point)>, PlanError> {
    let nested = nested_names(model);
    let mut fresh = Vec::new();
    for p in policies {
        if seen.insert(program_key(model, &p, &nested)?) {
            fresh.push(p);
        }
    }
    let measured: Vec<Result<Point, PlanError>> =
        fresh.par_iter().map(|s| Point::of_policy(model, usize::MAX, &ResolvedPolicy::Builtin(s.policy()))).collect();
    fresh.into_iter().zip(measured).map(|(p, m)| Ok((p, m?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_are_spelled_as_jax_takes_them() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let save = NamesPolicy::SaveOnly { saved: n(&["q", "k"]) };
        assert_eq!(save.jax_call(), "jax.checkpoint_policies.save_only_these_names('q', 'k')");
        let off = NamesPolicy::SaveAndOffload { saved: n(&["q"]), offloaded: n(&["v", "mlp_hidden"]) };
        assert_eq!(
            off.jax_call(),
            "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=['q'], names_which_can_be_offloaded=['v', 'mlp_hidden'], offload_src=\"device\", offload_dst=\"pinned_host\")"
        );
        let none = NamesPolicy::SaveAndOffload { saved: vec![], offloaded: vec![] };
        assert!(none.jax_call().contains("names_which_can_be_saved=[], names_which_can_be_offloaded=[]"));
    }

    #[test]
    fn every_split_is_tried_once() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let all = splits(&names, true);
        assert_eq!(all.len(), 27);
        for (i, s) in all.iter().enumerate() {
            assert!(all[..i].iter().all(|t| t != s), "{s:?} twice");
            assert!(s.saved().iter().all(|n| !s.offloaded().contains(n)));
        }
        assert_eq!(all[0], NamesPolicy::SaveAndOffload { saved: vec![], offloaded: vec![] });
        assert_eq!(splits(&names, false).len(), 8);
        assert_eq!(splits(&[], true), vec![NamesPolicy::SaveAndOffload { saved: vec![], offloaded: vec![] }]);
    }
}
