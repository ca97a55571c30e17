//! Dead code elimination: JAX's `dce_jaxpr(jaxpr, used_outputs)`.
//!
//! Keeps the outputs marked used and the equations they depend on, and reports which
//! inputs are still read; the result's invars are only those (unless `instantiate`), its
//! constvars all of the original's. Calls are pruned inside: a `jit` or `remat2` loses
//! the outputs nobody reads and the inputs its body no longer needs, a `scan` the same
//! with a fixpoint over its carries, a `cond` the same in every branch. A
//! `custom_jvp_call` is kept whole when any output is used (its opaque jvp rule may read
//! every input). No primitive has effects, so an equation without used outputs is always
//! removed.

use std::sync::Arc;

use remat_ir::{Atom, Eqn, HigherOrder, Jaxpr, Primitive, Var};

use crate::builder::{Builder, VarMap};
use crate::cond::{branches_of, cond_of};
use crate::scan::ScanParams;
use crate::{check, AdError};

/// Removes what does not contribute to the used outputs; returns the pruned jaxpr and
/// which inputs it still reads.
pub fn dce_jaxpr(jaxpr: &Jaxpr, used_outputs: &[bool], instantiate: bool) -> Result<(Jaxpr, Vec<bool>), AdError> {
    dce_jaxpr_inst(jaxpr, used_outputs, &vec![instantiate; jaxpr.invars.len()])
}

/// [`dce_jaxpr`] keeping the invars marked in `instantiate` whether or not they are read
/// (they count as used).
pub(crate) fn dce_jaxpr_inst(
    jaxpr: &Jaxpr,
    used_outputs: &[bool],
    instantiate: &[bool],
) -> Result<(Jaxpr, Vec<bool>), AdError> {
    if used_outputs.len() != jaxpr.outvars.len() || instantiate.len() != jaxpr.invars.len() {
        return Err(AdError::Invalid(format!(
            "dce_jaxpr: {} flags for {} outputs",
            used_outputs.len(),
            jaxpr.outvars.len()
        )));
    }
    let mut live = vec![false; jaxpr.vars.len()];
    for (a, &u) in jaxpr.outvars.iter().zip(used_outputs) {
        if let (Atom::Var(v), true) = (a, u) {
            live[v.index()] = true;
        }
    }
    // Walk backwards, deciding each equation's fate.
    let mut kept: Vec<Option<Eqn>> = vec![None; jaxpr.eqns.len()];
    for (i, eqn) in jaxpr.eqns.iter().enumerate().rev() {
        let used_outs: Vec<bool> = eqn.outvars.iter().map(|v| live[v.index()]).collect();
        if !used_outs.iter().any(|&u| u) {
            continue;
        }
        let (new_eqn, used_ins) = dce_eqn(eqn, &used_outs)?;
        for (a, u) in eqn.invars.iter().zip(&used_ins) {
            if let (Atom::Var(v), true) = (a, u) {
                live[v.index()] = true;
            }
        }
        kept[i] = Some(new_eqn);
    }
    let used_inputs: Vec<bool> = jaxpr.invars.iter().zip(instantiate).map(|(v, &i)| i || live[v.index()]).collect();

    let mut b = Builder::new();
    let mut map = VarMap::new(jaxpr);
    for &c in &jaxpr.constvars {
        let nc = b.constvar(jaxpr.aval(c).clone());
        map.set(c, nc);
    }
    for (&v, &u) in jaxpr.invars.iter().zip(&used_inputs) {
        if u {
            let nv = b.invar(jaxpr.aval(v).clone());
            map.set(v, nv);
        }
    }
    for eqn in kept.into_iter().flatten() {
        b.copy_eqn(jaxpr, &eqn, &mut map);
    }
    let outvars: Vec<Atom> =
        jaxpr.outvars.iter().zip(used_outputs).filter(|(_, &u)| u).map(|(a, _)| map.get(a)).collect();
    let out = b.finish(outvars);
    check("dce_jaxpr", &out)?;
    Ok((out, used_inputs))
}

/// One live equation: the (possibly pruned) equation and which of its operands it reads.
/// The returned equation's operands are the used ones only.
fn dce_eqn(eqn: &Eqn, used_outs: &[bool]) -> Result<(Eqn, Vec<bool>), AdError> {
    match eqn.primitive.higher_order() {
        // A call's body is pruned to the used outputs, and the call to the inputs it reads.
        // (`keep_unused=True` keeps every operand of a jit, as `dce_jaxpr_pjit_rule` does.)
        Some(HigherOrder::Jit | HigherOrder::ClosedCall | HigherOrder::Remat2) => {
            let keep_unused = matches!(&eqn.primitive, Primitive::Jit { options, .. } if options.keep_unused);
            let mut used_ins = Vec::new();
            let mut prim = eqn.primitive.try_map_subjaxprs(|body| {
                let (inner, used) = dce_jaxpr(body, used_outs, keep_unused)?;
                used_ins = used;
                Ok::<_, AdError>(Arc::new(inner))
            })?;
            // A jit keeps the shardings of the operands and results it keeps (JAX's
            // `dce_jaxpr_pjit_rule`).
            if let (Primitive::Jit { options: old, .. }, Primitive::Jit { options: new, .. }) =
                (&eqn.primitive, &mut prim)
            {
                new.in_shardings = remat_ir::JitOptions::shardings_where(&old.in_shardings, &used_ins, true);
                new.out_shardings = remat_ir::JitOptions::shardings_where(&old.out_shardings, used_outs, true);
            }
            Ok((pruned(eqn, prim, &used_ins, used_outs), used_ins))
        }
        Some(HigherOrder::Scan) => scan_dce(eqn, used_outs),
        // JAX's `_shard_map_dce`: the body pruned to the used outputs and the shard_map to
        // the operands it reads, their specs with them.
        Some(HigherOrder::ShardMap) => {
            let Primitive::ShardMap(sm) = &eqn.primitive else {
                return Err(AdError::Internal(format!("dce: {} is not a shard_map", eqn.primitive.name())));
            };
            let (inner, used_ins) = dce_jaxpr(&sm.jaxpr, used_outs, false)?;
            let keep = |specs: &[remat_ir::PartitionSpec], used: &[bool]| -> Vec<remat_ir::PartitionSpec> {
                specs.iter().zip(used).filter(|(_, &u)| u).map(|(s, _)| s.clone()).collect()
            };
            let new = remat_ir::ShardMap {
                jaxpr: Arc::new(inner),
                in_specs: keep(&sm.in_specs, &used_ins),
                out_specs: keep(&sm.out_specs, used_outs),
                ..(**sm).clone()
            };
            Ok((pruned(eqn, Primitive::ShardMap(Box::new(new)), &used_ins, used_outs), used_ins))
        }
        Some(HigherOrder::Cond) => cond_dce(eqn, used_outs),
        // A custom call (whose rule may read every input), a while loop (whose carries
        // feed each other), a composite (JAX has no dce rule for it) and every
        // first-order primitive live or die whole.
        Some(HigherOrder::CustomJvpCall | HigherOrder::CustomVjpCall | HigherOrder::While | HigherOrder::Composite)
        | None => Ok((eqn.clone(), vec![true; eqn.invars.len()])),
    }
}

/// `_scan_dce_rule`: prune the body's outputs and inputs, keeping a carry when either its
/// output or its input is used (a fixpoint).
fn scan_dce(eqn: &Eqn, used_outs: &[bool]) -> Result<(Eqn, Vec<bool>), AdError> {
    let p = ScanParams::of(eqn)?;
    let (nc, ncarry) = (p.num_consts, p.num_carry);
    let nxs = p.body.jaxpr.invars.len() - nc - ncarry;
    let mut used_carry_out = used_outs[..ncarry].to_vec();
    let used_ys = &used_outs[ncarry..];
    for _ in 0..=ncarry {
        let mut used_outputs = used_carry_out.clone();
        used_outputs.extend(used_ys);
        let mut inst = vec![false; nc];
        inst.extend(&used_carry_out);
        inst.extend(vec![false; nxs]);
        let (body, used_inputs) = dce_jaxpr_inst(&p.body.jaxpr, &used_outputs, &inst)?;
        let used_carry_in = &used_inputs[nc..nc + ncarry];
        if used_carry_in == used_carry_out.as_slice() {
            let num_consts = used_inputs[..nc].iter().filter(|&&u| u).count();
            let num_carry = used_carry_out.iter().filter(|&&u| u).count();
            let prim = p.prim(body, p.body.consts.clone(), num_consts, num_carry, p.reverse);
            return Ok((pruned(eqn, prim, &used_inputs, &used_outputs), used_inputs));
        }
        used_carry_out = used_carry_out.iter().zip(used_carry_in).map(|(a, b)| *a || *b).collect();
    }
    Err(AdError::Internal("scan dce: carry fixpoint not reached".into()))
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
    Ok((pruned(eqn, cond_of(eqn, pruned_branches), &used_ins, used_outs), used_ins))
}

/// `eqn` with primitive `prim`, only the used operands and the used binders.
pub(crate) fn pruned(eqn: &Eqn, prim: Primitive, used_ins: &[bool], used_outs: &[bool]) -> Eqn {
    let invars: Vec<Atom> = eqn.invars.iter().zip(used_ins).filter(|(_, &u)| u).map(|(a, _)| *a).collect();
    let outvars: Vec<Var> = eqn.outvars.iter().zip(used_outs).filter(|(_, &u)| u).map(|(v, _)| *v).collect();
    let mut e = Eqn::new(prim, invars, outvars, eqn.source.clone());
    e.spelling = eqn.spelling.clone();
    e
}
