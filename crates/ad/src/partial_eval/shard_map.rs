//! `shard_map`'s partial-evaluation rule: JAX's `_shard_map_partial_eval` (the residuals of
//! a linearization) and `_partial_eval_jaxpr_custom_rule` (inside a checkpoint),
//! `jax/_src/shard_map.py`.
//!
//! ```text
//! shard_map[body] ops                       -> outs
//! known  : shard_map[known body]  known_ops -> (known outs, residuals)
//! staged : shard_map[staged body] res ops   -> (staged outs)
//! ```
//!
//! The body is split once, per device. A residual that is a known operand's block or a
//! known output's block is not returned again: the staged shard_map reads that operand or
//! output, with its spec (JAX's `in_fwd` and `out_fwd`). Every other residual leaves the
//! known shard_map as a new result whose blocks are stacked along its first dimension over
//! the mesh axes it varies over (every manual axis without `check_vma`), JAX's
//! `aval.nospec(...)`: so `saved_residuals` lists a `[16,16]` block saved on each of 8
//! devices as `f32[128,16] output of shard_map`. A scalar residual is given a leading axis of
//! one first (JAX's `_promote_scalar_residuals`) and loses it again in the staged body.

use std::sync::Arc;

use remat_ir::{Atom, Aval, Eqn, Jaxpr, PartitionSpec, Primitive, ShardMap, SpecEntry};

use super::{partial_eval_jaxpr_custom, Pe};
use crate::builder::{inline_jaxpr, Builder};
use crate::{check, AdError};

/// Where the staged shard_map finds a residual.
enum Res {
    /// The known operand at this position (among all operands).
    Input(usize),
    /// The known output at this position (among the known outputs).
    Output(usize),
    /// A new result of the known shard_map, stacked under this spec.
    Kept(PartitionSpec),
}

pub(super) fn shard_map_partial_eval(pe: &mut Pe, eqn: &Eqn, sm: &ShardMap) -> Result<(), AdError> {
    let body = &sm.jaxpr;
    let (unks, inst): (Vec<bool>, Vec<bool>) = eqn.invars.iter().map(|a| pe.read(a)).unzip();
    let n_out = body.outvars.len();
    let split = partial_eval_jaxpr_custom(body, &unks, &inst, &vec![false; n_out], &vec![false; n_out], pe.mode())?;
    let num_known_outs = split.out_unknowns.iter().filter(|&&u| !u).count();
    let known_ins: Vec<Atom> = pe.known_values(&eqn.invars, &unks)?;
    let known_positions: Vec<usize> = (0..unks.len()).filter(|&i| !unks[i]).collect();

    let manual = sm.manual_mesh().axis_names();
    let mut known_body = split.known.clone();
    let res_outs: Vec<Atom> = known_body.outvars[num_known_outs..].to_vec();
    let fwd: Vec<Res> = res_outs
        .iter()
        .map(|r| {
            if let Some(p) = known_body.invars.iter().position(|&v| Atom::Var(v) == *r) {
                return Res::Input(known_positions[p]);
            }
            if matches!(r, Atom::Var(_)) {
                if let Some(q) = known_body.outvars[..num_known_outs].iter().position(|o| o == r) {
                    return Res::Output(q);
                }
            }
            let aval = known_body.atom_aval(r);
            let names: Vec<String> = match sm.check_vma {
                true => manual.iter().filter(|n| aval.vma.contains(n)).cloned().collect(),
                false => manual.clone(),
            };
            let entry = if names.is_empty() { SpecEntry::Replicated } else { SpecEntry::Axes(names) };
            Res::Kept(PartitionSpec(vec![entry]))
        })
        .collect();

    // The known body returns the kept residuals, scalars given a leading axis of one, then
    // its known outputs: `saved_residuals` lists a shard_map's residuals before a known
    // output that a later equation reads as a residual (JAX makes that one when it builds
    // the later staged equation), and remat orders residuals by producer and position.
    let kept: Vec<Atom> =
        res_outs.iter().zip(&fwd).filter(|(_, f)| matches!(f, Res::Kept(_))).map(|(r, _)| *r).collect();
    let scalar: Vec<bool> = kept.iter().map(|r| known_body.atom_aval(r).rank() == 0).collect();
    known_body.outvars.truncate(num_known_outs);
    known_body.outvars.extend(kept.iter().copied());
    if scalar.iter().any(|&s| s) {
        known_body = promote_scalars(&known_body, num_known_outs, &scalar)?;
    } else {
        let mut outs = kept.clone();
        outs.extend(known_body.outvars[..num_known_outs].iter().copied());
        known_body.outvars = outs;
    }
    check("shard_map partial eval (known)", &known_body)?;

    // The staged body takes every residual, then the instantiated operands; scalar
    // residuals come in with their leading axis and lose it.
    let mut staged_body = split.staged.clone();
    let kept_flags: Vec<bool> = fwd.iter().map(|f| matches!(f, Res::Kept(_))).collect();
    let mut kept_scalar = scalar.iter();
    let res_scalar: Vec<bool> =
        kept_flags.iter().map(|&k| k && *kept_scalar.next().expect("a flag per kept residual")).collect();
    if res_scalar.iter().any(|&s| s) {
        staged_body = demote_scalars(&staged_body, &res_scalar)?;
    }
    check("shard_map partial eval (staged)", &staged_body)?;

    let known_out_specs: Vec<PartitionSpec> = fwd
        .iter()
        .filter_map(|f| match f {
            Res::Kept(s) => Some(s.clone()),
            Res::Input(_) | Res::Output(_) => None,
        })
        .chain(sm.out_specs.iter().zip(&split.out_unknowns).filter(|(_, &u)| !u).map(|(s, _)| s.clone()))
        .collect();
    let known_sm = ShardMap {
        jaxpr: Arc::new(known_body),
        mesh: sm.mesh.clone(),
        in_specs: sm.in_specs.iter().zip(&unks).filter(|(_, &u)| !u).map(|(s, _)| s.clone()).collect(),
        out_specs: known_out_specs,
        check_vma: sm.check_vma,
        manual_axes: sm.manual_axes.clone(),
    };
    let known_out_specs_primal: Vec<&PartitionSpec> =
        sm.out_specs.iter().zip(&split.out_unknowns).filter(|(_, &u)| !u).map(|(s, _)| s).collect();
    let mut staged_in_specs: Vec<PartitionSpec> = fwd
        .iter()
        .map(|f| match f {
            Res::Input(p) => sm.in_specs[*p].clone(),
            Res::Output(q) => known_out_specs_primal[*q].clone(),
            Res::Kept(s) => s.clone(),
        })
        .collect();
    staged_in_specs.extend(sm.in_specs.iter().zip(&inst).filter(|(_, &i)| i).map(|(s, _)| s.clone()));
    let staged_sm = ShardMap {
        jaxpr: Arc::new(staged_body),
        mesh: sm.mesh.clone(),
        in_specs: staged_in_specs,
        out_specs: sm.out_specs.iter().zip(&split.out_inst).filter(|(_, &i)| i).map(|(s, _)| s.clone()).collect(),
        check_vma: sm.check_vma,
        manual_axes: sm.manual_axes.clone(),
    };

    let known_outs = pe.emit_known(Primitive::ShardMap(Box::new(known_sm)), known_ins, eqn.source.clone())?;
    let (kept_res, primal_known) = known_outs.split_at(kept.len());
    let mut kept_res = kept_res.iter();
    let res_atoms: Vec<Atom> = fwd
        .iter()
        .map(|f| match f {
            Res::Input(p) => pe.known_value(&eqn.invars[*p]),
            Res::Output(q) => Ok(primal_known[*q]),
            Res::Kept(_) => Ok(*kept_res.next().expect("a kept residual")),
        })
        .collect::<Result<_, _>>()?;
    let mut ins: Vec<Atom> = res_atoms.into_iter().map(|k| pe.residual(k)).collect();
    for (a, _) in eqn.invars.iter().zip(&inst).filter(|(_, &i)| i) {
        let s = pe.ensure_instantiated(a)?;
        ins.push(s);
    }
    let staged_outs = pe.emit_staged(Primitive::ShardMap(Box::new(staged_sm)), ins, eqn.source.clone())?;
    let mut primal_known = primal_known.iter();
    let mut staged_outs = staged_outs.into_iter();
    for (i, &v) in eqn.outvars.iter().enumerate() {
        let (unk, inst) = (split.out_unknowns[i], split.out_inst[i]);
        let k = (!unk).then(|| *primal_known.next().expect("a known output"));
        let s = inst.then(|| staged_outs.next().expect("a staged output"));
        pe.write(v, k, s);
    }
    Ok(())
}

/// The known body returning each kept residual (its outputs after the first
/// `num_known_outs`), scalars (`scalar`) broadcast to a leading axis of one, then its first
/// `num_known_outs` outputs.
fn promote_scalars(known: &Jaxpr, num_known_outs: usize, scalar: &[bool]) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    let ins: Vec<Atom> = known.invars.iter().map(|&v| Atom::Var(b.invar(known.aval(v).clone()))).collect();
    let outs = inline_jaxpr(&mut b, known, &[], &ins);
    let mut result = Vec::with_capacity(outs.len());
    for (r, &s) in outs[num_known_outs..].iter().zip(scalar) {
        result.push(if s { b.broadcast_in_dim(*r, &[1], &[])? } else { *r });
    }
    result.extend(outs[..num_known_outs].iter().copied());
    Ok(b.finish(result))
}

/// The staged body taking residual `i` with a leading axis of one where `scalar[i]`,
/// reshaped to the scalar the body reads.
fn demote_scalars(staged: &Jaxpr, scalar: &[bool]) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    let mut ins = Vec::with_capacity(staged.invars.len());
    for (i, &v) in staged.invars.iter().enumerate() {
        let aval = staged.aval(v).clone();
        if scalar.get(i).copied().unwrap_or(false) {
            let one = Aval { shape: vec![1], ..aval.clone() };
            let x = Atom::Var(b.invar(one));
            ins.push(b.reshape(x, &[])?);
        } else {
            ins.push(Atom::Var(b.invar(aval)));
        }
    }
    let outs = inline_jaxpr(&mut b, staged, &[], &ins);
    Ok(b.finish(outs))
}
