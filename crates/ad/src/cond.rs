//! The parameters of `cond` and `while` equations, shared by their rules in every
//! transformation: jvp (`jvp/cond.rs`: `_cond_jvp`, `_while_loop_jvp`), dead code
//! elimination (`dce.rs`: `_cond_dce_rule`), partial evaluation (`partial_eval/cond.rs`)
//! and transpose (`transpose/cond.rs`: `_cond_transpose_fancy`), from
//! `jax/_src/lax/control_flow/`. Each rule lives with the transformation it belongs to,
//! because it recurses into that transformation's driver on the branches or the body;
//! here are the branches, a cond of new branches, and zeros made inside a branch.
//!
//! Branches and loop bodies are taken without consts (a parsed jaxpr has none); a closed
//! jaxpr with consts is an `Unsupported` error, never a wrong program.

use std::sync::Arc;

use remat_ir::{Atom, Aval, ClosedJaxpr, Eqn, Jaxpr, Primitive, SourceInfo};

use crate::builder::lit;
use crate::AdError;

/// The branches of a `cond` equation, which must have no consts.
pub(crate) fn branches_of(eqn: &Eqn) -> Result<Vec<Arc<Jaxpr>>, AdError> {
    let Primitive::Cond { branches, .. } = &eqn.primitive else {
        return Err(AdError::Internal(format!("a cond rule on {}", eqn.primitive)));
    };
    no_consts("cond", branches.iter())?;
    Ok(branches.iter().map(|b| b.jaxpr.clone()).collect())
}

/// An `Unsupported` error when one of `js` has consts.
pub(crate) fn no_consts<'a>(primitive: &'static str, js: impl Iterator<Item = &'a ClosedJaxpr>) -> Result<(), AdError> {
    for j in js {
        if !j.consts.is_empty() {
            return Err(AdError::Unsupported {
                primitive,
                message: "a nested closed jaxpr with consts cannot be differentiated; make them operands".into(),
            });
        }
    }
    Ok(())
}

/// A cond of `branches` (each without consts) with the other parameters of `eqn`'s
/// (`branches_platforms`, which JAX's rules pass on with `**params`).
pub(crate) fn cond_of(eqn: &Eqn, branches: Vec<Jaxpr>) -> Primitive {
    let branches_platforms =
        if let Primitive::Cond { branches_platforms, .. } = &eqn.primitive { branches_platforms.clone() } else { None };
    Primitive::Cond {
        branches: branches.into_iter().map(|j| ClosedJaxpr::new(Arc::new(j))).collect(),
        branches_platforms,
    }
}

/// Zeros of `aval` inside `j`: a literal for a scalar, else a `broadcast_in_dim` of one
/// appended to `j`'s equations.
pub(crate) fn zeros_in(j: &mut Jaxpr, aval: &Aval) -> Atom {
    broadcast_in(j, lit(aval.dtype, 0.0), aval)
}

/// JAX's `empty_like_aval` inside `j`: an `empty2` scalar (which XLA CPU lowers to zero),
/// broadcast to `aval`'s shape unless it is a scalar.
pub(crate) fn empty_in(j: &mut Jaxpr, aval: &Aval) -> Atom {
    let e = j.new_var(Aval::new(aval.dtype, Vec::new()).with_memory_space(aval.memory_space));
    let empty = Primitive::Empty2 { dtype: aval.dtype, memory_space: aval.memory_space };
    j.eqns.push(Eqn::new(empty, Vec::new(), vec![e], SourceInfo::unknown()));
    broadcast_in(j, Atom::Var(e), aval)
}

fn broadcast_in(j: &mut Jaxpr, scalar: Atom, aval: &Aval) -> Atom {
    if aval.shape.is_empty() {
        return scalar;
    }
    let v = j.new_var(aval.clone());
    let bcast = Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: Vec::new() };
    j.eqns.push(Eqn::new(bcast, vec![scalar], vec![v], SourceInfo::unknown()));
    Atom::Var(v)
}
