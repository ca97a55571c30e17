//! The batching rules of control flow whose batch changes the control: `cond` with a
//! batched predicate (JAX 0.10.2's `_cond_batching_rule` in
//! `jax/_src/lax/control_flow/conditionals.py`), which runs every branch on every example
//! and picks each example's result with `select_n`.

use remat_ir::{Atom, ClosedJaxpr, CompareOp, Primitive, UnaryOp};

use super::rules::bdim_at_front;
use super::{batch_jaxpr_bools, Batched};
use crate::builder::{inline_jaxpr, lit, Builder};
use crate::AdError;

/// `cond` whose index is batched: every operand brought to axis 0 (broadcast if
/// unbatched), each branch batched with all inputs and outputs at axis 0 and inlined on
/// operands that are `select_n(index == i, stop_gradient(x), x)` (JAX's guard for reverse
/// mode, issue 1052), then each output `select_n(index, out_0, out_1, ..)`.
pub(super) fn cond_batched_index(
    b: &mut Builder,
    branches: &[ClosedJaxpr],
    ins: &[Batched],
    size: usize,
) -> Result<Vec<Batched>, AdError> {
    if branches.iter().any(|br| !br.consts.is_empty() || !br.jaxpr.constvars.is_empty()) {
        return Err(AdError::Invalid(
            "vmap: cond with a batched predicate and branches that close over constant arrays is not supported \
             (pass them as operands)"
                .into(),
        ));
    }
    let mut args = Vec::with_capacity(ins.len());
    for &(x, d) in ins {
        args.push(bdim_at_front(b, x, d, size)?);
    }
    let (index, ops) = (args[0], &args[1..]);
    let index_dtype = b.aval(&index).dtype;
    let n_in = branches[0].jaxpr.invars.len();
    let n_out = branches[0].jaxpr.outvars.len();
    let mut branch_outs: Vec<Vec<Atom>> = Vec::with_capacity(branches.len());
    for (i, br) in branches.iter().enumerate() {
        let (batched, _) = batch_jaxpr_bools(&br.jaxpr, size, &vec![true; n_in], &vec![true; n_out])?;
        let pred = b.compare(CompareOp::Eq, index, lit(index_dtype, i as f64))?;
        let mut guarded = Vec::with_capacity(ops.len());
        for &x in ops {
            let stopped = b.bind1(Primitive::Unary(UnaryOp::StopGradient), vec![x])?;
            // `lax.select(pred, x, stop_gradient(x))`.
            let p = bcast_pred(b, pred, x)?;
            guarded.push(b.select_n(p, vec![stopped, x])?);
        }
        branch_outs.push(inline_jaxpr(b, &batched, &[], &guarded));
    }
    let mut outs = Vec::with_capacity(n_out);
    for j in 0..n_out {
        let cases: Vec<Atom> = branch_outs.iter().map(|o| o[j]).collect();
        let which = bcast_pred(b, index, cases[0])?;
        outs.push((b.select_n(which, cases)?, Some(0)));
    }
    Ok(outs)
}

/// JAX's `_bcast_select`'s broadcast: `pred` (of the leading axes of `like`) broadcast to
/// `like`'s shape when their ranks differ.
fn bcast_pred(b: &mut Builder, pred: Atom, like: Atom) -> Result<Atom, AdError> {
    let (p, l) = (b.aval(&pred), b.aval(&like));
    if p.rank() == l.rank() {
        return Ok(pred);
    }
    let dims: Vec<usize> = (0..p.rank()).collect();
    b.bind1(Primitive::BroadcastInDim { shape: l.shape, broadcast_dimensions: dims }, vec![pred])
}
