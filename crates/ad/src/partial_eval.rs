//! Partial evaluation with remat policies: JAX's `partial_eval_jaxpr_custom`
//! (`_partial_eval_jaxpr_custom_cached` in `interpreters/partial_eval.py`).
//!
//! ```text
//! jaxpr  : (ins)                        -> (outs)
//! known  : (known ins)                  -> (known outs, residuals)
//! staged : (residuals, instantiated ins) -> (instantiated outs)
//! ```
//!
//! Every variable is `(unknown, instantiated)`: unknown values exist only in the staged
//! half; a known value is instantiated when the staged half has its own copy (an input
//! given to both halves, or a recomputed value). A staged equation that reads a known,
//! uninstantiated value makes it a residual (an output of `known`, an input of `staged`),
//! in order of first use.
//!
//! Known equations ask the policy ([`PeMode`]): `Saveable` keeps the output in the known
//! half only; `Recompute` also copies the equation to the staged half; `Offloadable` adds
//! a `device_put` to host memory in the known half (that copy is the residual) and one
//! back at the start of the staged half. Calls have rules: `remat2` (at the top of a
//! linearization, split by its own policy with its known half inlined and its staged half
//! a `remat2[differentiated=True]`; inside a checkpoint, split with the enclosing policy
//! into a known and a staged `remat2`), `jit` (a known and a staged `jit`, residuals that
//! are inputs or outputs forwarded) and `scan` (`partial_eval/scan.rs`).
//!
//! The state of one split is `Pe` (`partial_eval/state.rs`), whose fields are private:
//! the rules here and scan's rule speak its method API (`read`, `write`,
//! `known_value`, `ensure_instantiated`, `residual`, `copy_known`, `emit_known`,
//! `emit_staged`, ...). Every split's two halves pass `remat_ir::check_split` in debug
//! builds: the residuals `known` returns are the ones `staged` takes, in number, order and
//! type.

mod cond;
mod scan;
mod shard_map;
mod state;

use std::sync::Arc;

use remat_ir::{Atom, CopySemantics, DType, Eqn, HigherOrder, Jaxpr, JitOptions, Policy, Primitive, SourceInfo};

use crate::call::Call;
use crate::dce::dce_jaxpr;
use crate::policy::{memory_space, resolve_policy, ResolvedPolicy, Saveability};
use crate::{check, check_split, AdError};
use state::Pe;

/// JAX's `_while_transpose_error` (`lax/control_flow/loops.py`): a `while` with an unknown
/// operand cannot be split here, nor transposed (`transpose/rules.rs`).
pub const WHILE_REVERSE_MODE: &str = "Reverse-mode differentiation does not work for lax.while_loop or \
    lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop.";

/// Who decides what known equations may save.
#[derive(Clone, Copy, Debug)]
pub enum PeMode<'a> {
    /// The top of a linearization (JAX's `LinearizeTrace`): everything known may be
    /// saved, and a `remat2` is split by its own policy, its known half inlined.
    Linearize,
    /// Inside a checkpoint: the enclosing checkpoint's policy decides, also for nested
    /// checkpoints.
    Policy(&'a ResolvedPolicy),
    /// The top of a linearization, as [`PeMode::Linearize`], except that every `remat2`
    /// met is split by this policy instead of its own (the memory planner's plans).
    LinearizeWith(&'a ResolvedPolicy),
}

impl PeMode<'_> {
    /// At the top of a linearization (not inside a checkpoint).
    pub fn is_linearize(&self) -> bool {
        match self {
            PeMode::Linearize | PeMode::LinearizeWith(_) => true,
            PeMode::Policy(_) => false,
        }
    }
}

/// The two halves of a partially evaluated jaxpr (see the module docs for their types).
#[derive(Clone, Debug)]
pub struct PartialEval {
    pub known: Jaxpr,
    pub staged: Jaxpr,
    /// Which outputs are unknown (computed by `staged` only).
    pub out_unknowns: Vec<bool>,
    /// Which outputs `staged` returns.
    pub out_inst: Vec<bool>,
    /// How many residuals end `known`'s outputs and begin `staged`'s inputs.
    pub num_res: usize,
}

/// Splits `jaxpr` into known and staged halves. `in_unknowns[i]`: invar `i` is only
/// available to the staged half; `in_inst[i]`: the staged half receives invar `i` (an
/// unknown input must be instantiated). `ensure_out_unknowns`/`ensure_out_inst` force
/// outputs to be unknown/returned by the staged half.
pub fn partial_eval_jaxpr_custom(
    jaxpr: &Jaxpr,
    in_unknowns: &[bool],
    in_inst: &[bool],
    ensure_out_unknowns: &[bool],
    ensure_out_inst: &[bool],
    mode: PeMode<'_>,
) -> Result<PartialEval, AdError> {
    let n_in = jaxpr.invars.len();
    let n_out = jaxpr.outvars.len();
    if in_unknowns.len() != n_in
        || in_inst.len() != n_in
        || ensure_out_unknowns.len() != n_out
        || ensure_out_inst.len() != n_out
    {
        return Err(AdError::Invalid("partial_eval_jaxpr_custom: flag counts do not match the jaxpr".into()));
    }
    if in_unknowns.iter().zip(in_inst).any(|(&u, &i)| u && !i) {
        return Err(AdError::Invalid("partial_eval_jaxpr_custom: an unknown input must be instantiated".into()));
    }
    let mut pe = Pe::new(jaxpr, mode);
    let linearize = mode.is_linearize();
    for &c in &jaxpr.constvars {
        pe.constvar(c, !linearize);
    }
    for ((&v, &unk), &inst) in jaxpr.invars.iter().zip(in_unknowns).zip(in_inst) {
        pe.invar(v, unk, inst);
    }
    for (index, eqn) in jaxpr.eqns.iter().enumerate() {
        pe.eqn(index, eqn)?;
    }

    let mut out_unknowns = Vec::with_capacity(n_out);
    let mut out_inst = Vec::with_capacity(n_out);
    let mut staged_outs = Vec::new();
    for (i, out) in jaxpr.outvars.iter().enumerate() {
        let (unk, inst) = pe.read(out);
        let unk = unk || ensure_out_unknowns[i];
        let inst = inst || ensure_out_inst[i];
        if inst {
            staged_outs.push(pe.ensure_instantiated(out)?);
        }
        out_unknowns.push(unk);
        out_inst.push(inst);
    }
    let known_outs: Vec<Atom> = pe.known_values(&jaxpr.outvars, &out_unknowns)?;
    let (known, staged, num_res) = pe.finish(known_outs, staged_outs);
    check("partial_eval_jaxpr_custom (known)", &known)?;
    check("partial_eval_jaxpr_custom (staged)", &staged)?;
    check_split("partial_eval_jaxpr_custom", &known, &staged, num_res)?;
    Ok(PartialEval { known, staged, out_unknowns, out_inst, num_res })
}

/// The rules, written against `Pe`'s method API.
impl Pe<'_> {
    fn eqn(&mut self, index: usize, eqn: &Eqn) -> Result<(), AdError> {
        let any_unknown = eqn.invars.iter().any(|a| self.is_unknown(a));
        let linearize = self.mode().is_linearize();
        match pe_rule(&eqn.primitive) {
            PeRule::Remat if linearize && any_unknown => {
                let Primitive::Remat2 { jaxpr, prevent_cse, policy, .. } = &eqn.primitive else {
                    return Err(AdError::Internal("remat rule on a non-remat2 equation".into()));
                };
                self.remat_linearize(eqn, jaxpr, *prevent_cse, policy.as_ref())
            }
            // At the top of a linearization a call whose inputs are all known is a plain
            // known equation (JAX binds the primal alone); inside a checkpoint the rule
            // always runs, so the enclosing policy reaches the call's body.
            PeRule::Remat | PeRule::Jit if any_unknown || !linearize => self.call_rule(eqn),
            PeRule::Scan if any_unknown || !linearize => scan::scan_partial_eval(self, eqn),
            PeRule::Cond if any_unknown || !linearize => cond::cond_partial_eval(self, eqn),
            PeRule::ShardMap if any_unknown || !linearize => match &eqn.primitive {
                Primitive::ShardMap(sm) => shard_map::shard_map_partial_eval(self, eqn, sm),
                other => Err(AdError::Internal(format!("partial eval: {} is not a shard_map", other.name()))),
            },
            // `_while_partial_eval` stages the whole loop again and the transpose then fails
            // (`_while_transpose_error`); here the split itself fails, naming the equation.
            PeRule::While if any_unknown => Err(AdError::Unsupported {
                primitive: "while",
                message: format!("at {}: {}", eqn.source, WHILE_REVERSE_MODE),
            }),
            PeRule::Remat
            | PeRule::Jit
            | PeRule::Scan
            | PeRule::Cond
            | PeRule::While
            | PeRule::ShardMap
            | PeRule::None => {
                if any_unknown {
                    let ins: Vec<Atom> =
                        eqn.invars.iter().map(|a| self.ensure_instantiated(a)).collect::<Result<_, _>>()?;
                    let outs = self.copy_staged(eqn, ins);
                    for (&v, s) in eqn.outvars.iter().zip(outs) {
                        self.write(v, None, Some(s));
                    }
                    Ok(())
                } else {
                    self.known_eqn(index, eqn)
                }
            }
        }
    }

    /// An equation whose inputs are all known: in the known half, and what the policy says
    /// (`index`: its position in the jaxpr being split, for a per-equation policy).
    fn known_eqn(&mut self, index: usize, eqn: &Eqn) -> Result<(), AdError> {
        let known_outs = self.copy_known(eqn)?;
        let decision = match self.mode() {
            PeMode::Linearize | PeMode::LinearizeWith(_) => Saveability::Saveable,
            PeMode::Policy(p) => {
                let in_avals: Vec<_> = eqn.invars.iter().map(|a| self.old().atom_aval(a)).collect();
                p.decide_eqn(self.old(), index, &eqn.primitive, &in_avals).map_err(|e| match e {
                    AdError::PolicyPanic { policy, primitive, message, .. } => {
                        AdError::PolicyPanic { policy, primitive, at: eqn.source.to_string(), message }
                    }
                    other => other,
                })?
            }
        };
        match decision {
            Saveability::Saveable => {
                for (&v, k) in eqn.outvars.iter().zip(known_outs) {
                    self.write(v, Some(k), None);
                }
            }
            Saveability::Recompute => {
                let ins: Vec<Atom> =
                    eqn.invars.iter().map(|a| self.ensure_instantiated(a)).collect::<Result<_, _>>()?;
                let outs = self.copy_staged(eqn, ins);
                for ((&v, k), s) in eqn.outvars.iter().zip(known_outs).zip(outs) {
                    self.write(v, Some(k), Some(s));
                }
            }
            Saveability::Offloadable { src, dst } => {
                let (src, dst) = (memory_space(&src)?, memory_space(&dst)?);
                let n = eqn.outvars.len();
                let put = Primitive::DevicePut {
                    devices: vec![Some(dst); n],
                    copy_semantics: vec![CopySemantics::AlwaysCopy; n],
                };
                let offloaded = self.emit_known(put, known_outs.clone(), SourceInfo::unknown())?;
                let staged_res: Vec<Atom> = offloaded.into_iter().map(|r| self.residual(r)).collect();
                let back = Primitive::DevicePut {
                    devices: vec![Some(src); n],
                    copy_semantics: vec![CopySemantics::AlwaysCopy; n],
                };
                let reloaded = self.emit_staged(back, staged_res, SourceInfo::unknown())?;
                for ((&v, k), s) in eqn.outvars.iter().zip(known_outs).zip(reloaded) {
                    self.write(v, Some(k), Some(s));
                }
            }
        }
        Ok(())
    }

    /// JAX's `remat_partial_eval`: a checkpoint met at the top of a linearization is split
    /// by its own policy; the known half is inlined here (primal outputs and residuals are
    /// hoisted out of the checkpoint), the staged half becomes `remat2[differentiated=True]`.
    fn remat_linearize(
        &mut self,
        eqn: &Eqn,
        body: &Arc<Jaxpr>,
        prevent_cse: bool,
        policy: Option<&Policy>,
    ) -> Result<(), AdError> {
        // A policy error names the checkpoint's equation.
        let at = if eqn.source.is_unknown() { String::new() } else { format!(" at {}", eqn.source) };
        let resolved = match self.mode() {
            PeMode::LinearizeWith(p) => p.clone(),
            PeMode::Linearize | PeMode::Policy(_) => resolve_policy(policy).map_err(|e| match e {
                AdError::Invalid(m) => AdError::Invalid(format!("remat2{at}: {m}")),
                other => other,
            })?,
        };
        let unks: Vec<bool> = eqn.invars.iter().map(|a| self.is_unknown(a)).collect();
        let (n_in, n_out) = (body.invars.len(), body.outvars.len());
        let pe = partial_eval_jaxpr_custom(
            body,
            &unks,
            &vec![true; n_in],
            &vec![false; n_out],
            &vec![false; n_out],
            PeMode::Policy(&resolved),
        )?;
        // Keep the staged outputs that are unknown; the known half keeps its outputs and
        // the residuals the staged half still reads.
        let used_staged_outs: Vec<bool> = (0..n_out).filter(|&i| pe.out_inst[i]).map(|i| pe.out_unknowns[i]).collect();
        let (staged, used_staged_in) = dce_jaxpr(&pe.staged, &used_staged_outs, false)?;
        let (used_res, used_ins_staged) = used_staged_in.split_at(pe.num_res);
        let num_known_outs = pe.out_unknowns.iter().filter(|&&u| !u).count();
        let mut used_known_outs = vec![true; num_known_outs];
        used_known_outs.extend_from_slice(used_res);
        let (mut known, used_known_in) = dce_jaxpr(&pe.known, &used_known_outs, false)?;
        let num_res = used_res.iter().filter(|&&u| u).count();
        insert_reduce_precision(&mut known, num_res);
        check("remat partial eval (known, reduce_precision)", &known)?;
        check_split("remat partial eval", &known, &staged, num_res)?;

        let known_ins: Vec<Atom> = self.known_values(&eqn.invars, &unks)?;
        let args: Vec<Atom> = known_ins.into_iter().zip(&used_known_in).filter(|(_, &u)| u).map(|(a, _)| a).collect();
        let outs = self.inline_known(&known, &args);
        let (known_outs, res_atoms) = outs.split_at(num_known_outs);

        let mut ins: Vec<Atom> = res_atoms.iter().map(|&k| self.residual(k)).collect();
        let staged_old: Vec<&Atom> =
            eqn.invars.iter().zip(used_ins_staged).filter(|(_, &u)| u).map(|(a, _)| a).collect();
        for a in staged_old {
            let s = self.ensure_instantiated(a)?;
            ins.push(s);
        }
        let prim =
            Primitive::Remat2 { jaxpr: Arc::new(staged), prevent_cse, differentiated: true, policy: policy.cloned() };
        let staged_outs = self.emit_staged(prim, ins, eqn.source.clone())?;
        let mut known_outs = known_outs.iter();
        let mut staged_outs = staged_outs.into_iter();
        for (i, &v) in eqn.outvars.iter().enumerate() {
            if pe.out_unknowns[i] {
                let s = staged_outs.next().ok_or_else(|| AdError::Internal("remat: missing staged output".into()))?;
                self.write(v, None, Some(s));
            } else {
                let k = *known_outs.next().ok_or_else(|| AdError::Internal("remat: missing known output".into()))?;
                self.write(v, Some(k), None);
            }
        }
        Ok(())
    }

    /// JAX's `call_partial_eval_custom_rule` (for `remat2` inside a checkpoint) and the
    /// `jit` and `closed_call` rules (`closed_call_partial_eval_custom_rule`, which also
    /// forward residuals that are known inputs or outputs of the call instead of returning
    /// them again): a known call and a staged call.
    fn call_rule(&mut self, eqn: &Eqn) -> Result<(), AdError> {
        let call = Call::of(&eqn.primitive)?;
        let body = call.body();
        let forwarding = matches!(call, Call::Jit { .. } | Call::Closed { .. });
        let (unks, inst): (Vec<bool>, Vec<bool>) = eqn.invars.iter().map(|a| self.read(a)).unzip();
        let n_out = body.outvars.len();
        let pe = partial_eval_jaxpr_custom(body, &unks, &inst, &vec![false; n_out], &vec![false; n_out], self.mode())?;
        let num_known_outs = pe.out_unknowns.iter().filter(|&&u| !u).count();
        let known_ins: Vec<Atom> = self.known_values(&eqn.invars, &unks)?;

        // Which residuals are known inputs or known outputs of the call (forwarded).
        let mut known_body = pe.known.clone();
        let res_outs: Vec<Atom> = known_body.outvars[num_known_outs..].to_vec();
        enum Res {
            Input(usize),
            Output(usize),
            Kept,
        }
        let fwd: Vec<Res> = res_outs
            .iter()
            .map(|r| {
                if !forwarding {
                    return Res::Kept;
                }
                if let Some(p) = known_body.invars.iter().position(|&v| Atom::Var(v) == *r) {
                    return Res::Input(p);
                }
                // A literal residual (a staged constant) is returned again, as JAX's
                // forwarding matches variables only.
                if !matches!(r, Atom::Var(_)) {
                    return Res::Kept;
                }
                match known_body.outvars[..num_known_outs].iter().position(|o| o == r) {
                    Some(q) => Res::Output(q),
                    None => Res::Kept,
                }
            })
            .collect();
        let mut kept_outs: Vec<Atom> = known_body.outvars[..num_known_outs].to_vec();
        kept_outs.extend(res_outs.iter().zip(&fwd).filter(|(_, f)| matches!(f, Res::Kept)).map(|(r, _)| *r));
        known_body.outvars = kept_outs;
        check("call partial eval (known)", &known_body)?;

        let n_kept = known_body.outvars.len() - num_known_outs;
        let mut known_prim = call.with_body(known_body, None);
        // The known jit keeps the shardings of its known operands and outputs (JAX's
        // `_pjit_partial_eval` filters them the same way); its residuals' are unspecified.
        if let (Primitive::Jit { options: old, .. }, Primitive::Jit { options: new, .. }) =
            (&eqn.primitive, &mut known_prim)
        {
            new.in_shardings = JitOptions::shardings_where(&old.in_shardings, &unks, false);
            let known_outs = JitOptions::shardings_where(&old.out_shardings, &pe.out_unknowns, false);
            if !old.out_shardings.is_empty() {
                new.out_shardings = known_outs
                    .into_iter()
                    .chain(std::iter::repeat_n(remat_ir::Sharding::Unspecified, n_kept))
                    .collect();
            }
        }
        let mut staged_prim = call.with_body(pe.staged.clone(), Some(true));
        let known_outs = self.emit_known(known_prim, known_ins.clone(), eqn.source.clone())?;
        let (primal_known, kept_res) = known_outs.split_at(num_known_outs);
        let mut kept_res = kept_res.iter();
        let res_atoms: Vec<Atom> = fwd
            .iter()
            .map(|f| match f {
                Res::Input(p) => known_ins[*p],
                Res::Output(q) => primal_known[*q],
                Res::Kept => *kept_res.next().expect("a kept residual"),
            })
            .collect();
        let mut ins: Vec<Atom> = res_atoms.into_iter().map(|k| self.residual(k)).collect();
        for (a, _) in eqn.invars.iter().zip(&inst).filter(|(_, &i)| i) {
            let s = self.ensure_instantiated(a)?;
            ins.push(s);
        }
        // The staged jit keeps the shardings of its unknown operands and outputs (JAX's
        // `_pjit_partial_eval`; its residuals' are unspecified), which its transpose gives
        // the input cotangents.
        if let (Primitive::Jit { options: old, .. }, Primitive::Jit { options: new, .. }) =
            (&eqn.primitive, &mut staged_prim)
        {
            let n_res = ins.len() - inst.iter().filter(|&&i| i).count();
            if !old.in_shardings.is_empty() {
                new.in_shardings = std::iter::repeat_n(remat_ir::Sharding::Unspecified, n_res)
                    .chain(JitOptions::shardings_where(&old.in_shardings, &inst, true))
                    .collect();
            }
            new.out_shardings = JitOptions::shardings_where(&old.out_shardings, &pe.out_inst, true);
        }
        let staged_outs = self.emit_staged(staged_prim, ins, eqn.source.clone())?;
        let mut primal_known = primal_known.iter();
        let mut staged_outs = staged_outs.into_iter();
        for (i, &v) in eqn.outvars.iter().enumerate() {
            let (unk, inst) = (pe.out_unknowns[i], pe.out_inst[i]);
            let k = (!unk).then(|| *primal_known.next().expect("a known output"));
            let s = inst.then(|| staged_outs.next().expect("a staged output"));
            self.write(v, k, s);
        }
        Ok(())
    }
}

/// JAX's `_insert_reduce_precision`: each float residual produced by an equation and also
/// read in the known half goes through a `reduce_precision` to its own precision, so the
/// forward and backward passes see the same bits (XLA excess precision, JAX PR #22244).
///
/// One pass over the equations: each residual's producer is looked up in a table, and the
/// new equations are placed when the equation list is rebuilt (finding the producer and
/// inserting after it, per residual, was quadratic: most of the planner's time at 100,001
/// equations). The result is the same as inserting one at a time right after its producer:
/// several residuals of one equation get theirs in the reverse of the residuals' order.
pub(crate) fn insert_reduce_precision(jaxpr: &mut Jaxpr, num_res: usize) {
    let n = jaxpr.outvars.len();
    let res: Vec<Atom> = jaxpr.outvars[n - num_res..].to_vec();
    let mut used: Vec<bool> = vec![false; jaxpr.vars.len()];
    let mut producer: Vec<Option<usize>> = vec![None; jaxpr.vars.len()];
    for (i, e) in jaxpr.eqns.iter().enumerate() {
        for a in &e.invars {
            if let Atom::Var(v) = a {
                used[v.index()] = true;
            }
        }
        for o in &e.outvars {
            producer[o.index()].get_or_insert(i);
        }
    }
    // A residual listed again finds the reduce_precision made for it the first time (or is
    // skipped again for the same reason), so only its first listing counts.
    let mut seen: Vec<bool> = vec![false; jaxpr.vars.len()];
    let mut after: Vec<Vec<Eqn>> = Vec::new();
    for r in res {
        let Atom::Var(v) = r else { continue };
        if std::mem::replace(&mut seen[v.index()], true) {
            continue;
        }
        let aval = jaxpr.aval(v).clone();
        let (exponent_bits, mantissa_bits) = match aval.dtype {
            DType::F32 | DType::C64 => (8, 23),
            DType::F64 | DType::C128 => (11, 52),
            DType::BF16 => (8, 7),
            DType::F16 => (5, 10),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32 | DType::Bool | DType::Key => {
                continue
            }
        };
        if !used[v.index()] {
            continue;
        }
        let Some(idx) = producer[v.index()] else { continue };
        let rp = Primitive::ReducePrecision { exponent_bits, mantissa_bits };
        if let Primitive::ReducePrecision { exponent_bits: e, mantissa_bits: m } = jaxpr.eqns[idx].primitive {
            if (e, m) == (exponent_bits, mantissa_bits) {
                continue;
            }
        }
        let newvar = jaxpr.new_var(aval);
        for o in jaxpr.eqns[idx].outvars.iter_mut() {
            if *o == v {
                *o = newvar;
            }
        }
        let source = jaxpr.eqns[idx].source.clone();
        if after.is_empty() {
            after = vec![Vec::new(); jaxpr.eqns.len()];
        }
        after[idx].push(Eqn::new(rp, vec![Atom::Var(newvar)], vec![v], source));
    }
    if after.is_empty() {
        return;
    }
    let eqns = std::mem::take(&mut jaxpr.eqns);
    jaxpr.eqns = Vec::with_capacity(eqns.len() + after.iter().map(Vec::len).sum::<usize>());
    for (e, made) in eqns.into_iter().zip(after) {
        jaxpr.eqns.push(e);
        jaxpr.eqns.extend(made.into_iter().rev());
    }
}

/// Which primitives partial evaluation has a rule for.
enum PeRule {
    Remat,
    Jit,
    Scan,
    Cond,
    While,
    ShardMap,
    None,
}

fn pe_rule(prim: &Primitive) -> PeRule {
    match prim.higher_order() {
        Some(HigherOrder::Remat2) => PeRule::Remat,
        Some(HigherOrder::Jit | HigherOrder::ClosedCall) => PeRule::Jit,
        Some(HigherOrder::Scan) => PeRule::Scan,
        Some(HigherOrder::Cond) => PeRule::Cond,
        Some(HigherOrder::While) => PeRule::While,
        Some(HigherOrder::ShardMap) => PeRule::ShardMap,
        // `custom_jvp_call` and `custom_vjp_call` are differentiated through their bodies
        // (or by a known rule), so only their primal form (all inputs known) reaches
        // partial evaluation.
        // A composite is not differentiated either: it is known or unknown whole.
        Some(HigherOrder::CustomJvpCall | HigherOrder::CustomVjpCall | HigherOrder::Composite) | None => PeRule::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JAX's one-at-a-time insertion: find each residual's producer, insert right after it.
    fn one_at_a_time(jaxpr: &mut Jaxpr, num_res: usize) {
        let n = jaxpr.outvars.len();
        let res: Vec<Atom> = jaxpr.outvars[n - num_res..].to_vec();
        let mut used: Vec<bool> = vec![false; jaxpr.vars.len()];
        for e in &jaxpr.eqns {
            for a in &e.invars {
                if let Atom::Var(v) = a {
                    used[v.index()] = true;
                }
            }
        }
        for r in res {
            let Atom::Var(v) = r else { continue };
            let aval = jaxpr.aval(v).clone();
            let bits = match aval.dtype {
                DType::F32 => (8, 23),
                DType::F16 => (5, 10),
                _ => continue,
            };
            if !used[v.index()] {
                continue;
            }
            let Some(idx) = jaxpr.eqns.iter().position(|e| e.outvars.contains(&v)) else { continue };
            if let Primitive::ReducePrecision { exponent_bits: e, mantissa_bits: m } = jaxpr.eqns[idx].primitive {
                if (e, m) == bits {
                    continue;
                }
            }
            let newvar = jaxpr.new_var(aval);
            for o in jaxpr.eqns[idx].outvars.iter_mut() {
                if *o == v {
                    *o = newvar;
                }
            }
            let rp = Primitive::ReducePrecision { exponent_bits: bits.0, mantissa_bits: bits.1 };
            let source = jaxpr.eqns[idx].source.clone();
            jaxpr.eqns.insert(idx + 1, Eqn::new(rp, vec![Atom::Var(newvar)], vec![v], source));
        }
    }

    /// The one-pass insertion gives the jaxpr inserting one at a time gives, on residuals
    /// that share a producer (listed in either order), are listed twice, are inputs, are
    /// integers, are read by nothing, or are already a `reduce_precision` of their own
    /// precision (or of another).
    #[test]
    fn insert_reduce_precision_is_one_at_a_time_insertion() {
        let src = "{ lambda ; x:f32[4] y:f16[4] k:i32[4]. let
    a:f32[2] b:f32[2] = split[axis=0 sizes=(2, 2)] x
    c:f32[2] = sin a
    d:f32[2] = cos b
    e:f32[2] = reduce_precision[exponent_bits=8 mantissa_bits=23] c
    f:f32[2] = reduce_precision[exponent_bits=5 mantissa_bits=10] d
    g:f32[2] = mul e f
    h:f16[4] = sin y
    i:f16[4] = cos h
    j:i32[4] = neg k
    l:i32[4] = neg j
    m:f32[2] = sin g
  in (g, m, i, l, b, a, a, c, d, e, f, x, h, j, m, b, g, y) }";
        let base = remat_ir::parse_jaxpr(src, "test").expect("parses");
        let n = base.outvars.len();
        for num_res in 0..=n - 1 {
            // Every order of the residuals: rotations and the reverse of each.
            for rot in 0..num_res.max(1) {
                for reverse in [false, true] {
                    let mut jaxpr = base.clone();
                    let res = &mut jaxpr.outvars[n - num_res..];
                    res.rotate_left(rot);
                    if reverse {
                        res.reverse();
                    }
                    let mut want = jaxpr.clone();
                    one_at_a_time(&mut want, num_res);
                    insert_reduce_precision(&mut jaxpr, num_res);
                    assert_eq!(jaxpr.to_string(), want.to_string(), "{num_res} residuals, rotated {rot}, {reverse}");
                    assert_eq!(jaxpr.vars.len(), want.vars.len());
                }
            }
        }
        // Some case inserts several after one equation.
        let mut all = base.clone();
        insert_reduce_precision(&mut all, n - 1);
        assert!(all.eqns.len() >= base.eqns.len() + 6, "{all}");
    }
}
