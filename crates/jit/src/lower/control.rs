//! `cond` as a [`Step::Switch`] and `while` as a [`Step::While`].
//!
//! ```text
//! cond:   index -> i32 buffer; out[j] <- branch_k(ops)[j] in every branch k
//! while:  carry[i] <- init[i]
//!         loop: pred <- cond(cconsts, carry); exit unless pred
//!               body(bconsts, carry) -> carry'; temp[i] <- carry'[i] where it reads a carry
//!               carry[i] <- temp[i] or carry'[i]
//! ```
//!
//! A batched predicate (`bool[n..]`, a prefix of every carry's shape) is JAX's
//! `_while_lowering` with `batched`: the loop's `pred` is the `reduce_max` (or) of it, and
//! the body evaluates it again on the old carries and writes
//! `select_n(p, carry[i], carry'[i])`, so finished examples keep their values.
//!
//! Every branch writes the same output buffers, so the values after the switch are loads
//! of them whichever branch ran. The while loop's carries are rewritten as a scan's are:
//! only after every value of the trip is computed.

use remat_ir::{Aval, ClosedJaxpr, DType, Primitive, ReduceOp};

use super::{Lowering, Val};
use crate::expr::{Expr, View};
use crate::program::{BufId, Step};
use crate::JitError;

pub(crate) struct WhileParams<'a> {
    pub cond: &'a ClosedJaxpr,
    pub body: &'a ClosedJaxpr,
    pub cond_nconsts: usize,
    pub body_nconsts: usize,
}

/// Loads of the whole of each buffer.
fn loads(bufs: &[BufId], avals: &[Aval]) -> Vec<Val> {
    bufs.iter()
        .zip(avals)
        .map(|(&buf, a)| Val { expr: Expr::Load(View::contiguous(buf, a.dtype, &a.shape)), aval: a.clone() })
        .collect()
}

impl Lowering {
    pub(crate) fn cond(
        &mut self,
        branches: &[ClosedJaxpr],
        ins: Vec<Val>,
        out_avals: &[Aval],
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let mut ins = ins.into_iter();
        let index = ins.next().ok_or_else(|| JitError::Invalid("cond without an index operand".into()))?;
        let index = self.scalar_buf(index);
        // Operands are computed once, before the switch.
        let ops: Vec<Val> = ins.map(|v| self.materialize_if_computed(v)).collect();
        let out_bufs: Vec<BufId> =
            out_avals.iter().zip(targets).map(|(a, t)| t.unwrap_or_else(|| self.new_buf(a))).collect();
        let out_targets: Vec<Option<BufId>> = out_bufs.iter().copied().map(Some).collect();
        let mut steps = Vec::with_capacity(branches.len());
        for branch in branches {
            let ((), branch_steps) = self.scoped(|lw| {
                let consts = lw.add_consts(&branch.consts);
                let outs = lw.lower_jaxpr(&branch.jaxpr, consts, ops.clone(), &out_targets)?;
                for (out, &buf) in outs.iter().zip(&out_bufs) {
                    if !lw.is_whole(out, buf) {
                        lw.write(out, buf);
                    }
                }
                Ok(())
            })?;
            steps.push(branch_steps);
        }
        self.push_step(Step::Switch { index, branches: steps });
        Ok(loads(&out_bufs, out_avals))
    }

    pub(crate) fn while_loop(
        &mut self,
        w: &WhileParams,
        ins: Vec<Val>,
        out_avals: &[Aval],
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let mut ins = ins.into_iter();
        // Loop-invariant operands are computed once, before the loop.
        let cconsts: Vec<Val> = ins.by_ref().take(w.cond_nconsts).map(|c| self.materialize_if_computed(c)).collect();
        let bconsts: Vec<Val> = ins.by_ref().take(w.body_nconsts).map(|c| self.materialize_if_computed(c)).collect();
        let init: Vec<Val> = ins.collect();
        let carry_bufs: Vec<BufId> =
            out_avals.iter().zip(targets).map(|(a, t)| t.unwrap_or_else(|| self.new_buf(a))).collect();
        for (v, &buf) in init.iter().zip(&carry_bufs) {
            if !self.is_whole(v, buf) {
                self.write(v, buf);
            }
        }
        let pred_aval = match w.cond.jaxpr.outvars.as_slice() {
            [p] => w.cond.jaxpr.atom_aval(p),
            _ => return Err(JitError::Invalid("while: cond_jaxpr must have one output".into())),
        };
        let batched = pred_aval.rank() > 0;
        let scalar_pred = Aval::scalar(DType::Bool);
        let pred = self.new_buf(&scalar_pred);
        let ((), cond_steps) = self.scoped(|lw| {
            let consts = lw.add_consts(&w.cond.consts);
            let args: Vec<Val> = cconsts.iter().cloned().chain(loads(&carry_bufs, out_avals)).collect();
            let target = if batched { None } else { Some(pred) };
            let outs = lw.lower_jaxpr(&w.cond.jaxpr, consts, args, &[target])?;
            let mut p =
                outs.into_iter().next().ok_or_else(|| JitError::Invalid("while: cond_jaxpr has no output".into()))?;
            if batched {
                let any = Primitive::Reduce { op: ReduceOp::Max, axes: (0..pred_aval.rank()).collect() };
                p = lw.lower_eqn(&any, vec![p], std::slice::from_ref(&scalar_pred), &[Some(pred)])?.remove(0);
            }
            if !lw.is_whole(&p, pred) {
                lw.write(&p, pred);
            }
            Ok(())
        })?;
        let ((), body_steps) = self.scoped(|lw| {
            let consts = lw.add_consts(&w.body.consts);
            let args: Vec<Val> = bconsts.iter().cloned().chain(loads(&carry_bufs, out_avals)).collect();
            let mut outs = lw.lower_jaxpr(&w.body.jaxpr, consts, args, &[])?;
            if batched {
                outs = lw.keep_finished(w, &cconsts, &carry_bufs, out_avals, &pred_aval, outs)?;
            }
            // Phase 1: new carries that read an old carry go to temporaries first, also
            // where the old carry is only a dynamic offset (`dynamic_slice(x, k)` with `k` a
            // carry that this trip updates: written after `k`, it read the new `k`).
            let reads_carry = |e: &Expr| carry_bufs.iter().any(|&c| e.reads(c));
            let mut sources = Vec::with_capacity(outs.len());
            for c in outs {
                if reads_carry(&c.expr) {
                    let buf = lw.new_buf(&c.aval);
                    sources.push(lw.materialize(c, Some(buf)));
                } else {
                    sources.push(c);
                }
            }
            // Phase 2: nothing reads the old carries any more.
            for (src, &buf) in sources.iter().zip(&carry_bufs) {
                lw.write(src, buf);
            }
            Ok(())
        })?;
        self.push_step(Step::While { cond: cond_steps, pred, body: body_steps });
        Ok(loads(&carry_bufs, out_avals))
    }

    /// The body's new carries of a while with a batched predicate: `select_n(p, old, new)`
    /// per carry, `p` the predicate on the old carries (computed once per trip) broadcast
    /// over each carry's trailing axes.
    fn keep_finished(
        &mut self,
        w: &WhileParams,
        cconsts: &[Val],
        carry_bufs: &[BufId],
        out_avals: &[Aval],
        pred_aval: &Aval,
        outs: Vec<Val>,
    ) -> Result<Vec<Val>, JitError> {
        let consts = self.add_consts(&w.cond.consts);
        let args: Vec<Val> = cconsts.iter().cloned().chain(loads(carry_bufs, out_avals)).collect();
        let p = self.lower_jaxpr(&w.cond.jaxpr, consts, args, &[None])?;
        let p = p.into_iter().next().ok_or_else(|| JitError::Invalid("while: cond_jaxpr has no output".into()))?;
        let p_buf = self.new_buf(pred_aval);
        let p = self.materialize(p, Some(p_buf));
        let olds = loads(carry_bufs, out_avals);
        let mut kept = Vec::with_capacity(outs.len());
        for ((new, old), aval) in outs.into_iter().zip(olds).zip(out_avals) {
            let bool_aval = Aval::new(DType::Bool, aval.shape.clone());
            let bcast = Primitive::BroadcastInDim {
                shape: aval.shape.clone(),
                broadcast_dimensions: (0..pred_aval.rank()).collect(),
            };
            let which = self.lower_eqn(&bcast, vec![p.clone()], std::slice::from_ref(&bool_aval), &[None])?.remove(0);
            let sel =
                self.lower_eqn(&Primitive::SelectN, vec![which, old, new], std::slice::from_ref(aval), &[None])?;
            kept.extend(sel);
        }
        Ok(kept)
    }
}
