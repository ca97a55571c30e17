//! Why a residual is saved: the rule of the policy of the checkpoint its equation sits in,
//! or the rule of the top level (everything the backward half needs is saved).
//!
//! The forward half is flat (partial evaluation inlines the known part of each checkpoint),
//! so an equation of it is traced back to the function's own equations by its source
//! location and primitive; an equation a derivative rule made (the `cos` of `sin`'s jvp)
//! has its primal equation's location and is found by location alone.

use std::collections::HashMap;

use remat_ad::{resolve_policy, ResolvedPolicy, Saveability};
use remat_ir::{Aval, Jaxpr, Policy, Primitive};

use crate::{Error, Residual, ResidualKind};

/// Where an equation of the function sits: `None` outside any checkpoint, else the
/// innermost checkpoint's policy (`None` inside: `nothing_saveable`).
type Context = Option<Option<Policy>>;

/// The function's equations by source location: primitive name and context.
#[derive(Debug, Default)]
pub(crate) struct Contexts {
    by_source: HashMap<String, Vec<(&'static str, Context)>>,
}

impl Contexts {
    pub fn of(primal: &Jaxpr) -> Contexts {
        let mut c = Contexts::default();
        c.walk(primal, &None);
        c
    }

    fn walk(&mut self, jaxpr: &Jaxpr, context: &Context) {
        for eqn in &jaxpr.eqns {
            if !eqn.source.is_unknown() {
                let key = super::source_words(&eqn.source);
                self.by_source.entry(key).or_default().push((eqn.primitive.name(), context.clone()));
            }
            // A checkpoint's policy decides inside it.
            let inner = if let Primitive::Remat2 { policy, .. } = &eqn.primitive {
                Some(policy.clone())
            } else {
                context.clone()
            };
            for body in eqn.primitive.subjaxprs() {
                self.walk(body, &inner);
            }
        }
    }

    fn find(&self, source: &str, prim: &str) -> Option<&Context> {
        let entries = self.by_source.get(source)?;
        entries.iter().find(|(p, _)| *p == prim).or_else(|| entries.first()).map(|(_, c)| c)
    }
}

/// A policy as a user writes it.
pub fn policy_words(p: &Policy) -> String {
    let names = |ns: &[String]| ns.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    match p {
        Policy::EverythingSaveable | Policy::NothingSaveable | Policy::DotsSaveable { .. } => {
            p.builtin_name().expect("an argument-free policy is a builtin").into()
        }
        Policy::SaveOnlyTheseNames { names: ns } => format!("save_only_these_names({})", names(ns)),
        Policy::SaveAnyNamesButThese { names: ns } => format!("save_any_names_but_these({})", names(ns)),
        Policy::SaveAnythingExceptTheseNames { names: ns } => {
            format!("save_anything_except_these_names({})", names(ns))
        }
        Policy::SaveFromBothPolicies { policy_1, policy_2 } => {
            format!("save_from_both_policies({}, {})", policy_words(policy_1), policy_words(policy_2))
        }
        Policy::SaveAndOffloadOnlyTheseNames { saved, offloaded, .. } => {
            format!("save_and_offload_only_these_names(saved=[{}], offloaded=[{}])", names(saved), names(offloaded))
        }
        Policy::OffloadDotWithNoBatchDims { .. } => "offload_dot_with_no_batch_dims".into(),
        Policy::Function { name, .. } => name.clone(),
        Policy::Opaque { repr, .. } => repr.clone(),
    }
}

fn resolved_words(r: &ResolvedPolicy) -> String {
    match r {
        ResolvedPolicy::Builtin(p) => policy_words(p),
        ResolvedPolicy::User { name, .. } => name.clone(),
        ResolvedPolicy::PerEquation(_) => "the memory planner's plan".into(),
    }
}

/// Why the memory planner's plan for `budget` bytes saves `residual`.
pub(crate) fn planner_decision(residual: &Residual, budget: usize) -> String {
    match &residual.kind {
        ResidualKind::Literal | ResidualKind::Constant => {
            "a constant of the function: the backward half reads it where it is".into()
        }
        ResidualKind::Argument(_) => "an argument: the backward half reads it in the caller's memory".into(),
        _ => format!(
            "planner decision: the plan for a budget of {budget} bytes (the fewest recompute FLOPs that fit) saves it"
        ),
    }
}

/// Why `residual` (made by equation `e` of `program`, if an equation makes it) is saved.
pub(crate) fn why_saved(
    contexts: &Contexts,
    residual: &Residual,
    made_by: Option<(&Jaxpr, usize)>,
) -> Result<String, Error> {
    let what = match &residual.kind {
        ResidualKind::Literal | ResidualKind::Constant => {
            return Ok("a constant of the function: the backward half reads it where it is".into())
        }
        ResidualKind::Argument(_) => return Ok("an argument: the backward half reads it in the caller's memory".into()),
        ResidualKind::Named(name) => format!("named '{name}'"),
        ResidualKind::Output(prim) => prim.clone(),
        ResidualKind::Jit(name) => format!("jitted function '{name}'"),
    };
    let Some((program, e)) = made_by else {
        return Ok("needed by the backward half".into());
    };
    let eqn = &program.eqns[e];
    let context = contexts.find(&super::source_words(&eqn.source), eqn.primitive.name());
    match context {
        None if eqn.source.is_unknown() => {
            Ok("needed by the backward half (made by autodiff, at no source line)".into())
        }
        None | Some(None) => Ok("needed by the backward half, outside any checkpoint".into()),
        Some(Some(policy)) => {
            let resolved = resolve_policy(policy.as_ref())?;
            let in_avals: Vec<Aval> = eqn.invars.iter().map(|a| program.atom_aval(a)).collect();
            let words = resolved_words(&resolved);
            Ok(match resolved.decide(&eqn.primitive, &in_avals)? {
                Saveability::Saveable => format!("{words}: {what} is saveable"),
                Saveability::Offloadable { dst, .. } => format!("{words}: {what} is offloaded to {dst}"),
                Saveability::Recompute => format!(
                    "needed by the backward half: made where {words} recomputes {what}, but read by the \
                     backward half outside the recompute (a checkpoint's input or output)"
                ),
            })
        }
    }
}
