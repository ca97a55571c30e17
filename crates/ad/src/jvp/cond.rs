//! The jvp rules of `cond` and `while`, JAX's `_cond_jvp` and `_while_loop_jvp`
//! (`jax/_src/lax/control_flow/`): each recurses into [`jvp_jaxpr`] on the branches or the
//! loop body, so it lives with the pass (the equations' parameters are read through
//! `crate::cond`).
//!
//! What it keeps true: every branch of a cond the rule builds has the same input and
//! output types (an output whose tangent is zero in some branches but not in others is
//! instantiated as zeros there).

use std::sync::Arc;

use remat_ir::{Atom, ClosedJaxpr, Eqn, Jaxpr, Primitive};

use super::{call_with_tangents, instantiate, jvp_jaxpr, Tangent};
use crate::builder::Builder;
use crate::cond::{branches_of, cond_of, no_consts};
use crate::AdError;

/// `_cond_jvp`: every branch's jvp, with an output tangent instantiated in every branch
/// when it is nonzero in any. Operands: the index, the primal operands, the nonzero
/// tangents.
pub(crate) fn cond_jvp(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let branches = branches_of(eqn)?;
    let nz: Vec<bool> = tangents[1..].iter().map(|t| !t.is_zero()).collect();
    let n_out = eqn.outvars.len();
    let mut out_nz = vec![false; n_out];
    for br in &branches {
        let j = jvp_jaxpr(br, &nz, &vec![false; n_out])?;
        out_nz.iter_mut().zip(&j.out_nonzeros).for_each(|(o, &n)| *o |= n);
    }
    let jvps: Vec<Jaxpr> =
        branches.iter().map(|br| jvp_jaxpr(br, &nz, &out_nz).map(|j| j.jaxpr)).collect::<Result<_, _>>()?;
    // The index is an integer: it has no tangent.
    let mut tangents = tangents.to_vec();
    tangents[0] = Tangent::Zero;
    call_with_tangents(b, cond_of(eqn, jvps), primals, &tangents, &out_nz)
}

/// `_while_loop_jvp`: a fixpoint makes a carry's tangent nonzero when the body makes it
/// so; the tangents of the body consts join the body consts and the carries' tangents
/// the carries, and the cond_jaxpr gets unused binders for them.
pub(crate) fn while_jvp(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } = &eqn.primitive else {
        return Err(AdError::Internal(format!("a while rule on {}", eqn.primitive)));
    };
    no_consts("while", [cond_jaxpr, body_jaxpr].into_iter())?;
    let (cn, bn) = (*cond_nconsts, *body_nconsts);
    let nz: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let bconst_nz = &nz[cn..cn + bn];
    let mut carry_nz = nz[cn + bn..].to_vec();
    let k = carry_nz.len();
    let mut converged = None;
    for _ in 0..=k {
        let nonzeros: Vec<bool> = bconst_nz.iter().chain(&carry_nz).copied().collect();
        let jvp = jvp_jaxpr(&body_jaxpr.jaxpr, &nonzeros, &carry_nz)?;
        if jvp.out_nonzeros == carry_nz {
            converged = Some(jvp);
            break;
        }
        carry_nz = carry_nz.iter().zip(&jvp.out_nonzeros).map(|(a, b)| *a || *b).collect();
    }
    let jvp = converged.ok_or_else(|| AdError::Internal("while jvp: carry fixpoint not reached".into()))?;

    // [bconsts, carries, bconsts_dot, carries_dot] -> [bconsts, bconsts_dot, carries, carries_dot].
    let mut body = jvp.jaxpr;
    let (pin, tin) = body.invars.split_at(bn + k);
    let n_bd = bconst_nz.iter().filter(|&&x| x).count();
    let mut invars = pin[..bn].to_vec();
    invars.extend(&tin[..n_bd]);
    invars.extend(&pin[bn..]);
    invars.extend(&tin[n_bd..]);
    body.invars = invars;

    let mut cond = (*cond_jaxpr.jaxpr).clone();
    for (i, _) in carry_nz.iter().enumerate().filter(|(_, &nz)| nz) {
        let aval = b.aval(&primals[cn + bn + i]);
        let v = cond.new_var(aval);
        cond.invars.push(v);
    }

    let mut ops = primals[..cn + bn].to_vec();
    ops.extend(tangents[cn..cn + bn].iter().filter_map(|t| match t {
        Tangent::Nz(a) => Some(*a),
        Tangent::Zero => None,
    }));
    ops.extend(&primals[cn + bn..]);
    for (i, &cnz) in carry_nz.iter().enumerate() {
        if cnz {
            let aval = b.aval(&primals[cn + bn + i]);
            ops.push(instantiate(b, tangents[cn + bn + i], &aval)?);
        }
    }
    let prim = Primitive::While {
        cond_jaxpr: ClosedJaxpr::new(Arc::new(cond)),
        body_jaxpr: ClosedJaxpr::new(Arc::new(body)),
        cond_nconsts: cn,
        body_nconsts: bn + n_bd,
    };
    let outs: Vec<Atom> = b.bind(prim, ops)?.into_iter().map(Atom::Var).collect();
    let (carry, dots) = outs.split_at(k);
    let mut dots = dots.iter();
    let tangents_out = carry_nz
        .iter()
        .map(|&nz| if nz { Tangent::Nz(*dots.next().expect("a tangent per nonzero carry")) } else { Tangent::Zero })
        .collect();
    Ok((carry.to_vec(), tangents_out))
}
