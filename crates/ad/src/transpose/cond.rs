//! The transpose rule of `cond`, JAX's `_cond_transpose_fancy`
//! (`jax/_src/lax/control_flow/conditionals.py`): it recurses into the driver on every
//! branch, so it lives with the pass (the equation's parameters are read through
//! `crate::cond`).
//!
//! What it keeps true: every transposed branch returns the same cotangents (a cotangent
//! that is zero in some branches but not in others is instantiated as zeros there).

use remat_ir::{Atom, Aval, Eqn, Jaxpr};

use super::{transpose_jaxpr_with, Operand};
use crate::builder::Builder;
use crate::cond::{branches_of, cond_of, zeros_in};
use crate::AdError;

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
    let outs = b.bind(cond_of(eqn, joined), args)?;
    let mut outs = outs.into_iter();
    let mut nz = any_nz.into_iter();
    let mut cts = vec![None];
    cts.extend(ops.iter().map(|o| match o {
        Operand::Value(_) => None,
        Operand::Linear(_) => nz.next().unwrap_or(false).then(|| outs.next().map(Atom::Var)).flatten(),
    }));
    Ok(cts)
}
