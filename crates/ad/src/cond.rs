//! `cond` and `while` under the transformations, apart from partial evaluation (cond's rule
//! is `partial_eval/cond.rs`): jvp (`_cond_jvp`, `_while_loop_jvp`), DCE (`_cond_dce_rule`)
//! and transpose (`_cond_transpose_fancy`), from `jax/_src/lax/control_flow/`.
//!
//! Branches and loop bodies are taken without consts (a parsed jaxpr has none); a closed
//! jaxpr with consts is an `Unsupported` error, never a wrong program.
//!
//! What it keeps true: every branch of a cond the rules build has the same input and
//! output types (outputs whose tangent or cotangent is zero in some branches but not in
//! others are instantiated as zeros there).

use std::sync::Arc;

use remat_ir::{Atom, Aval, ClosedJaxpr, Eqn, Jaxpr, Primitive, SourceInfo};

use crate::builder::{lit, Builder};
use crate::dce::{dce_jaxpr_inst, pruned};
use crate::jvp::{call_with_tangents, instantiate, jvp_jaxpr, Tangent};
use crate::transpose::{transpose_jaxpr_with, Operand};
use crate::AdError;

/// The branches of a `cond` equation, which must have no consts.
pub(crate) fn branches_of(eqn: &Eqn) -> Result<Vec<Arc<Jaxpr>>, AdError> {
    let Primitive::Cond { branches } = &eqn.primitive else {
        return Err(AdError::Internal(format!("a cond rule on {}", eqn.primitive)));
    };
    no_consts("cond", branches.iter())?;
    Ok(branches.iter().map(|b| b.jaxpr.clone()).collect())
}

fn no_consts<'a>(primitive: &'static str, js: impl Iterator<Item = &'a ClosedJaxpr>) -> Result<(), AdError> {
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

/// A cond of `branches` (each without consts).
pub(crate) fn cond_of(branches: Vec<Jaxpr>) -> Primitive {
    Primitive::Cond { branches: branches.into_iter().map(|j| ClosedJaxpr::new(Arc::new(j))).collect() }
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
    call_with_tangents(b, cond_of(jvps), primals, &tangents, &out_nz)
}

/// `_cond_dce_rule`: each branch pruned to the used outputs; an operand is kept when some
/// branch reads it, and every branch then takes the kept operands. The index is kept.
pub(crate) fn cond_dce(eqn: &Eqn, used_outs: &[bool]) -> Result<(Eqn, Vec<bool>), AdError> {
    let branches = branches_of(eqn)?;
    let n_ops = eqn.invars.len() - 1;
    let mut used_ops = vec![false; n_ops];
    for br in &branches {
        let (_, used) = dce_jaxpr_inst(br, used_outs, &vec![false; n_ops])?;
        used_ops.iter_mut().zip(used).for_each(|(u, x)| *u |= x);
    }
    let pruned_branches: Vec<Jaxpr> =
        branches.iter().map(|br| dce_jaxpr_inst(br, used_outs, &used_ops).map(|(j, _)| j)).collect::<Result<_, _>>()?;
    let mut used_ins = vec![true];
    used_ins.extend(used_ops);
    Ok((pruned(eqn, cond_of(pruned_branches), &used_ins, used_outs), used_ins))
}

/// `_cond_transpose_fancy`: a cond of the transposed branches on the same index. The
/// branches take the non-linear operands and the nonzero output cotangents, and return the
/// cotangent of every linear operand that is nonzero in some branch (zeros elsewhere).
pub(crate) fn cond_transpose(
    b: &mut Builder,
    eqn: &Eqn,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Vec<Option<Atom>>, AdError> {
    let branches = branches_of(eqn)?;
    let Operand::Value(index) = ins[0] else {
        return Err(AdError::Internal("cond transpose: the index is linear".into()));
    };
    let ops = &ins[1..];
    let linear: Vec<bool> = ops.iter().map(Operand::is_linear).collect();
    let out_nz: Vec<bool> = ct_outs.iter().map(Option::is_some).collect();
    let transposed: Vec<_> =
        branches.iter().map(|br| transpose_jaxpr_with(br, &linear, &out_nz, false)).collect::<Result<_, _>>()?;
    let n_lin = linear.iter().filter(|&&l| l).count();
    let mut any_nz = vec![false; n_lin];
    for t in &transposed {
        any_nz.iter_mut().zip(&t.in_ct_nonzero).for_each(|(a, &n)| *a |= n);
    }
    let lin_avals: Vec<Aval> = ops
        .iter()
        .filter_map(|o| match o {
            Operand::Linear(a) => Some(a.clone()),
            Operand::Value(_) => None,
        })
        .collect();
    let joined: Vec<Jaxpr> = transposed
        .into_iter()
        .map(|t| {
            let mut j = t.jaxpr;
            let mut have = j.outvars.clone().into_iter();
            let mut outs = Vec::new();
            for ((&nz_here, &nz_any), aval) in t.in_ct_nonzero.iter().zip(&any_nz).zip(&lin_avals) {
                match (nz_here, nz_any) {
                    (true, _) => outs.push(have.next().expect("a cotangent per nonzero")),
                    (false, true) => outs.push(zeros_in(&mut j, aval)),
                    (false, false) => {}
                }
            }
            j.outvars = outs;
            j
        })
        .collect();
    let mut args = vec![index];
    args.extend(ops.iter().filter_map(|o| match o {
        Operand::Value(a) => Some(*a),
        Operand::Linear(_) => None,
    }));
    args.extend(ct_outs.iter().flatten().copied());
    let outs = b.bind(cond_of(joined), args)?;
    let mut outs = outs.into_iter();
    let mut nz = any_nz.into_iter();
    let mut cts = vec![None];
    cts.extend(ops.iter().map(|o| match o {
        Operand::Value(_) => None,
        Operand::Linear(_) => nz.next().unwrap_or(false).then(|| outs.next().map(Atom::Var)).flatten(),
    }));
    Ok(cts)
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
