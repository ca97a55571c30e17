//! Cond's partial-evaluation rule: JAX's `_cond_linearize` at the top of a linearization
//! and `_cond_partial_eval_custom` inside a checkpoint (`lax/control_flow/conditionals.py`).
//!
//! ```text
//! cond[branches] i ops                       -> outs
//! known  : cond[known branches]  i known_ops -> (known outs, residual slots)
//! staged : cond[staged branches] i slots ops -> (staged outs)
//! ```
//!
//! Every branch is split against the same output unknowns (an output is unknown when it is
//! in any branch). The branches' residuals are merged into one list of slots
//! (`_merge_branch_residuals`: by type and occurrence within the branch, not by meaning);
//! each known branch fills the slots it does not use with `empty2` (which XLA CPU lowers
//! to zeros) and each staged branch takes every slot, reading its own. The
//! index is known (it is an integer): at the top of a linearization a residual of the
//! staged cond; inside a checkpoint read as the staged half has it, recomputed where the
//! policy recomputes what computes it (JAX saves the argument a `lax.switch` index is
//! computed from under `nothing_saveable`, and the clamped index under
//! `everything_saveable`).

use remat_ir::{Atom, Aval, Eqn, Jaxpr};

use super::{partial_eval_jaxpr_custom, PartialEval, Pe};
use crate::cond::{branches_of, cond_of, empty_in};
use crate::AdError;

pub(super) fn cond_partial_eval(pe: &mut Pe, eqn: &Eqn) -> Result<(), AdError> {
    let branches = branches_of(eqn)?;
    if pe.is_unknown(&eqn.invars[0]) {
        // JAX's `_cond_partial_eval(_custom)`: an unknown index stages the whole cond, every
        // output unknown. An integer has no tangent, so in a differentiation the index is
        // unknown only where "unknown" means something else: the values a scan's known
        // body computes anew at each step, which its loop-invariant hoisting splits off
        // (`scan.rs`), a cond on the loop counter among them.
        let ins: Vec<Atom> = eqn.invars.iter().map(|a| pe.ensure_instantiated(a)).collect::<Result<_, _>>()?;
        let outs = pe.copy_staged(eqn, ins);
        for (&v, s) in eqn.outvars.iter().zip(outs) {
            pe.write(v, None, Some(s));
        }
        return Ok(());
    }
    let ops = &eqn.invars[1..];
    let unks: Vec<bool> = ops.iter().map(|a| pe.is_unknown(a)).collect();
    let n_out = eqn.outvars.len();
    // At the top of a linearization the staged cond takes only the unknown operands
    // (`linearize_jaxpr`); inside a checkpoint it takes and returns everything.
    let linearize = pe.mode().is_linearize();
    let inst: Vec<bool> = if linearize { unks.clone() } else { vec![true; ops.len()] };
    let split = |ensure_unk: &[bool], ensure_inst: &[bool]| -> Result<Vec<PartialEval>, AdError> {
        branches
            .iter()
            .map(|br| partial_eval_jaxpr_custom(br, &unks, &inst, ensure_unk, ensure_inst, pe.mode()))
            .collect()
    };
    let first = split(&vec![false; n_out], &vec![!linearize; n_out])?;
    let mut out_unk = vec![false; n_out];
    let mut out_inst = vec![!linearize; n_out];
    for p in &first {
        out_unk.iter_mut().zip(&p.out_unknowns).for_each(|(o, &u)| *o |= u);
        out_inst.iter_mut().zip(&p.out_inst).for_each(|(o, &u)| *o |= u);
    }
    let splits = split(&out_unk, &out_inst)?;
    if splits.iter().any(|p| p.out_unknowns != out_unk || p.out_inst != out_inst) {
        return Err(AdError::Internal("cond partial eval: branches disagree on their outputs".into()));
    }

    let res_avals: Vec<Vec<Aval>> = splits
        .iter()
        .map(|p| {
            let n_known = p.known.outvars.len() - p.num_res;
            p.known.outvars[n_known..].iter().map(|a| p.known.atom_aval(a)).collect()
        })
        .collect();
    let (slots, slot_of) = merge_branch_residuals(&res_avals);
    let known_branches: Vec<Jaxpr> =
        splits.iter().zip(&slot_of).map(|(p, idx)| join_known_outputs(&p.known, p.num_res, &slots, idx)).collect();
    let staged_branches: Vec<Jaxpr> =
        splits.iter().zip(&slot_of).map(|(p, idx)| join_staged_inputs(&p.staged, p.num_res, &slots, idx)).collect();

    let index = pe.known_value(&eqn.invars[0])?;
    let mut known_ins = vec![index];
    known_ins.extend(pe.known_values(ops, &unks)?);
    let known_outs = pe.emit_known(cond_of(eqn, known_branches), known_ins, eqn.source.clone())?;
    let num_known = out_unk.iter().filter(|&&u| !u).count();
    let (primal_known, res) = known_outs.split_at(num_known);

    let mut staged_ins = Vec::with_capacity(1 + res.len() + ops.len());
    if linearize {
        // `_cond_partial_eval`: the index is a residual, then the branches' residuals,
        // then the unknown operands.
        staged_ins.push(pe.residual(index));
        staged_ins.extend(res.iter().map(|&r| pe.residual(r)));
        for a in ops.iter().zip(&inst).filter(|(_, &i)| i).map(|(a, _)| a) {
            let s = pe.ensure_instantiated(a)?;
            staged_ins.push(s);
        }
    } else {
        // `_cond_partial_eval_custom`: the staged cond reads the index and every operand as
        // the staged half has them (the index recomputed where the policy recomputes what
        // makes it, as `jax.checkpoint` does), and its new residuals are those the staged
        // half did not have yet (`new_inst`), before the branches' residuals.
        let index_s = pe.ensure_instantiated(&eqn.invars[0])?;
        let ops_s: Vec<Atom> = ops.iter().map(|a| pe.ensure_instantiated(a)).collect::<Result<_, _>>()?;
        staged_ins.push(index_s);
        staged_ins.extend(res.iter().map(|&r| pe.residual(r)));
        staged_ins.extend(ops_s);
    }
    let staged_outs = pe.emit_staged(cond_of(eqn, staged_branches), staged_ins, eqn.source.clone())?;
    let mut primal_known = primal_known.iter();
    let mut staged_outs = staged_outs.into_iter();
    for (i, &v) in eqn.outvars.iter().enumerate() {
        let k = (!out_unk[i]).then(|| *primal_known.next().expect("a known output"));
        let s = out_inst[i].then(|| staged_outs.next().expect("a staged output"));
        pe.write(v, k, s);
    }
    Ok(())
}

/// `_merge_branch_residuals`: each residual is tagged with its type and its occurrence
/// number among the residuals of that type in its branch; the slots are the ordered union
/// of the tags, branch 0's first. Returns the slots' types and, per branch, the slot of
/// each of its residuals. (`[x], [y], [x, x]` gives `[x, y, x]` and `[[0], [1], [0, 2]]`.)
pub(crate) fn merge_branch_residuals(per_branch: &[Vec<Aval>]) -> (Vec<Aval>, Vec<Vec<usize>>) {
    let mut slots: Vec<(Aval, usize)> = Vec::new();
    let mut slot_of = Vec::with_capacity(per_branch.len());
    for avals in per_branch {
        let mut idx = Vec::with_capacity(avals.len());
        for (i, a) in avals.iter().enumerate() {
            let k = avals[..i].iter().filter(|b| *b == a).count();
            let tag = (a.clone(), k);
            let slot = match slots.iter().position(|s| *s == tag) {
                Some(s) => s,
                None => {
                    slots.push(tag);
                    slots.len() - 1
                }
            };
            idx.push(slot);
        }
        slot_of.push(idx);
    }
    (slots.into_iter().map(|(a, _)| a).collect(), slot_of)
}

/// `_join_cond_outputs`: a known branch returning its known outputs, then every slot (its
/// own residuals in theirs, `empty2` in the others).
fn join_known_outputs(known: &Jaxpr, num_res: usize, slots: &[Aval], idx: &[usize]) -> Jaxpr {
    let mut j = known.clone();
    let n_known = j.outvars.len() - num_res;
    let own: Vec<Atom> = j.outvars[n_known..].to_vec();
    let mut outs: Vec<Atom> = j.outvars[..n_known].to_vec();
    for (s, aval) in slots.iter().enumerate() {
        match idx.iter().position(|&x| x == s) {
            Some(r) => outs.push(own[r]),
            None => outs.push(empty_in(&mut j, aval)),
        }
    }
    j.outvars = outs;
    j
}

/// `_join_cond_pe_staged_jaxpr_inputs`: a staged branch taking every slot first (its own
/// residuals are read from theirs), then its other inputs.
fn join_staged_inputs(staged: &Jaxpr, num_res: usize, slots: &[Aval], idx: &[usize]) -> Jaxpr {
    let mut j = staged.clone();
    let own = j.invars[..num_res].to_vec();
    let rest = j.invars[num_res..].to_vec();
    let mut invars = Vec::with_capacity(slots.len() + rest.len());
    for (s, aval) in slots.iter().enumerate() {
        match idx.iter().position(|&x| x == s) {
            Some(r) => invars.push(own[r]),
            None => invars.push(j.new_var(aval.clone())),
        }
    }
    invars.extend(rest);
    j.invars = invars;
    j
}

#[cfg(test)]
mod tests {
    use remat_ir::DType;

    use super::*;

    /// The two examples of JAX's `_merge_branch_residuals` docstring.
    #[test]
    fn residuals_merge_by_type_and_occurrence() {
        let (x, y, z) = (Aval::new(DType::F32, vec![3]), Aval::new(DType::I32, vec![]), Aval::new(DType::F32, vec![]));
        let (slots, idx) = merge_branch_residuals(&[vec![x.clone()], vec![y.clone()], vec![x.clone(), x.clone()]]);
        assert_eq!(slots, vec![x.clone(), y.clone(), x.clone()]);
        assert_eq!(idx, vec![vec![0], vec![1], vec![0, 2]]);
        let per =
            [vec![y.clone(), x.clone(), x.clone()], vec![x.clone(), z.clone(), y.clone()], vec![z.clone(), x.clone()]];
        let (slots, idx) = merge_branch_residuals(&per);
        assert_eq!(slots, vec![y, x.clone(), x, z]);
        assert_eq!(idx, vec![vec![0, 1, 2], vec![1, 3, 0], vec![3, 1]]);
    }
}
