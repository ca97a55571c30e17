//! The batching rules of control flow whose batch changes the control: `cond` with a
//! batched predicate (JAX 0.10.2's `_cond_batching_rule` in
//! `jax/_src/lax/control_flow/conditionals.py`), which runs every branch on every example
//! and picks each example's result with `select_n`; `while` (`_while_loop_batching_rule`
//! in `control_flow/loops.py`), whose carries are batched where their init or the body
//! batches them, and all of them (at axis 0) when the batch reaches the predicate: the
//! `while` then takes a `bool[size]` predicate and updates only the examples still
//! running (the IR's batched predicate, which the interpreter and the JIT give JAX's
//! meaning).

use remat_ir::{Atom, ClosedJaxpr, CompareOp, Primitive, UnaryOp};

use super::{batch_jaxpr_axes, batch_jaxpr_bools, bdim_at_front, broadcast, moveaxis, Batched, OutAxes};
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
        if br.consts.len() + batched.new_consts.len() != batched.jaxpr.constvars.len() {
            return Err(AdError::Invalid(format!(
                "vmap: cond branch {i} has {} constvars but {} consts",
                batched.jaxpr.constvars.len(),
                br.consts.len() + batched.new_consts.len()
            )));
        }
        // The branch's constants (its own and any a rule made) become the batched
        // program's, as JAX's `jaxpr_as_fun` of a closed branch embeds them.
        let consts: Vec<Atom> = br.consts.iter().chain(&batched.new_consts).map(|c| b.const_array(c.clone())).collect();
        let pred = b.compare(CompareOp::Eq, index, lit(index_dtype, i as f64))?;
        let mut guarded = Vec::with_capacity(ops.len());
        for &x in ops {
            let stopped = b.bind1(Primitive::Unary(UnaryOp::StopGradient), vec![x])?;
            // `lax.select(pred, x, stop_gradient(x))`.
            let p = bcast_pred(b, pred, x)?;
            guarded.push(b.select_n(p, vec![stopped, x])?);
        }
        branch_outs.push(inline_jaxpr(b, &batched.jaxpr, &consts, &guarded));
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

/// The parameters of a `while`.
pub(super) struct While<'a> {
    pub cond_jaxpr: &'a ClosedJaxpr,
    pub body_jaxpr: &'a ClosedJaxpr,
    pub cond_nconsts: usize,
    pub body_nconsts: usize,
}

/// JAX's `_while_loop_batching_rule`: the carries batched from their init or by the body,
/// a fixpoint; the consts keep their batch axes. When the predicate is batched, every carry
/// is batched at axis 0 and the cond_jaxpr returns the batched predicate (`bool[size]`): the
/// `while` runs until no example's predicate holds, updating only the examples whose
/// predicate does (the `while` primitive's batched predicate). Otherwise the batched carries
/// put their batch axis after the predicate's axes (at 0 for a `bool[]` one).
pub(super) fn while_loop(
    b: &mut Builder,
    w: &While<'_>,
    ins: &[Batched],
    size: usize,
) -> Result<Vec<Batched>, AdError> {
    let (nc, nb) = (w.cond_nconsts, w.body_nconsts);
    let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
    let bat: Vec<bool> = dims.iter().map(Option::is_some).collect();
    let (cconst_bat, bconst_bat, init_bat) = (&bat[..nc], &bat[nc..nc + nb], &bat[nc + nb..]);
    let mut carry_bat = init_bat.to_vec();
    for _ in 0..=carry_bat.len() {
        let batched: Vec<bool> = bconst_bat.iter().chain(&carry_bat).copied().collect();
        let (_, out_bat) = batch_jaxpr_bools(&w.body_jaxpr.jaxpr, size, &batched, &carry_bat)?;
        if out_bat == carry_bat {
            break;
        }
        carry_bat.iter_mut().zip(&out_bat).for_each(|(c, o)| *c |= o);
    }
    let cond_in: Vec<bool> = cconst_bat.iter().chain(&carry_bat).copied().collect();
    let (_, pred_bat) = batch_jaxpr_bools(&w.cond_jaxpr.jaxpr, size, &cond_in, &[])?;
    let (carry_dims, pred_dim): (Vec<Option<usize>>, Option<usize>) = if pred_bat.first().copied().unwrap_or(false) {
        (vec![Some(0); carry_bat.len()], Some(0))
    } else {
        let cond_rank = match w.cond_jaxpr.jaxpr.outvars.first() {
            Some(p) => w.cond_jaxpr.jaxpr.atom_aval(p).rank(),
            None => return Err(AdError::Invalid("vmap: a while whose cond_jaxpr has no output".into())),
        };
        (carry_bat.iter().map(|&c| c.then_some(cond_rank)).collect(), None)
    };
    let body_in: Vec<Option<usize>> = dims[nc..nc + nb].iter().chain(&carry_dims).copied().collect();
    let body = batch_jaxpr_axes(&w.body_jaxpr.jaxpr, size, &body_in, OutAxes::Given(&carry_dims))?;
    let cond_in: Vec<Option<usize>> = dims[..nc].iter().chain(&carry_dims).copied().collect();
    let cond = batch_jaxpr_axes(&w.cond_jaxpr.jaxpr, size, &cond_in, OutAxes::Given(&[pred_dim]))?;
    let mut args: Vec<Atom> = ins[..nc + nb].iter().map(|x| x.0).collect();
    for (&(x, old), &new) in ins[nc + nb..].iter().zip(&carry_dims) {
        args.push(match (old, new) {
            (None, Some(new)) => broadcast(b, x, size, new)?,
            (Some(old), Some(new)) => moveaxis(b, x, old, new)?,
            _ => x,
        });
    }
    let prim = Primitive::While {
        cond_jaxpr: cond.close(&w.cond_jaxpr.consts),
        body_jaxpr: body.close(&w.body_jaxpr.consts),
        cond_nconsts: nc,
        body_nconsts: nb,
    };
    let outs = b.bind(prim, args)?;
    Ok(outs.into_iter().map(Atom::Var).zip(carry_dims).collect())
}
