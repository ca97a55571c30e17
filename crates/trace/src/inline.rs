//! What a transformation run outside this crate needs from the trace it is called in
//! (`remat::grad` or `remat::vmap` inside a traced function): trace a closure into a
//! jaxpr of its own without leaving the enclosing trace ([`trace_subjaxpr`]), and record a
//! transformed jaxpr back into the enclosing trace equation by equation
//! ([`inline_jaxpr`]), as JAX's transformations emit their equations into the trace below
//! them.
//!
//! What this module keeps true: an inlined equation is recorded through its shape rule like
//! any other (so a mismatch is a located error, never a malformed program), and keeps the
//! source location and spelling it was made with; tensors the closure captures from
//! enclosing frames are the sub-jaxpr's leading inputs (JAX's closure conversion), so the
//! transformation sees them as inputs it does not transform.

use std::collections::HashMap;
use std::panic::Location;

use remat_ir::{Atom, Aval, Jaxpr, Primitive, Var};

use crate::tensor::Tensor;
use crate::trace::{bind_eqn, bind_n, current_frame, has_error, record_error, Operand};
use crate::transforms::{placeholders, trace_body};
use crate::tree::TensorTree;

/// A closure traced inside the enclosing trace: `jaxpr` takes the captured tensors first,
/// then the closure's own inputs.
#[derive(Debug)]
pub struct SubTrace<R> {
    /// `(captured, args) -> outs`.
    pub jaxpr: Jaxpr,
    /// Tensors of the enclosing frame the closure uses: the jaxpr's leading inputs.
    pub captured: Vec<Tensor>,
    /// The closure's result (tensors of the finished frame): its structure, for rebuilding
    /// the transformed results.
    pub out: R,
}

/// Whether a trace is under way on this thread (a transformation called inside a traced
/// function records equations; at top level it runs a program).
pub fn in_trace() -> bool {
    current_frame().is_some()
}

/// Records `message` as the trace's error at `loc` (the first error wins), for a
/// transformation that fails inside a trace; the entry point returns it.
pub fn record_trace_error(loc: &'static Location<'static>, message: String) {
    record_error(loc, message);
}

/// Traces `f` on fresh inputs shaped like `args`' leaves, with these avals (`in_avals[i]`
/// for leaf `i`: a transformation may trace on other types than the arguments', as `vmap`
/// traces on unbatched ones), in a frame of its own inside the current trace. `Err` with
/// `f`'s (placeholder) result if tracing failed (the error is recorded); `kind` names the
/// closure for a panic inside it.
pub fn trace_subjaxpr<A: TensorTree, R: TensorTree>(
    args: &A,
    in_avals: &[Aval],
    f: impl FnOnce(A) -> R,
    kind: &'static str,
    loc: &'static Location<'static>,
) -> Result<SubTrace<R>, R> {
    let leaves = args.leaves();
    let types: Vec<(Aval, bool)> = leaves.iter().zip(in_avals).map(|(t, a)| (a.clone(), t.is_weak())).collect();
    let body =
        trace_body(&types, |inner| f(args.rebuild(&mut inner.into_iter())), (kind, std::any::type_name::<R>()), loc)?;
    Ok(SubTrace { jaxpr: body.jaxpr, captured: body.captured, out: body.out })
}

/// Records `jaxpr`'s equations in the current trace with `args` as its inputs (one per
/// invar, constvars first if it has any) and returns one tensor per output, strongly
/// typed. `None` if an error is (or was already) recorded; the caller returns
/// placeholders.
pub fn inline_jaxpr(jaxpr: &Jaxpr, args: &[Tensor], loc: &'static Location<'static>) -> Option<Vec<Tensor>> {
    if has_error() {
        return None;
    }
    let inputs: Vec<Var> = jaxpr.constvars.iter().chain(&jaxpr.invars).copied().collect();
    if inputs.len() != args.len() {
        record_error(
            loc,
            format!("internal error: a jaxpr of {} inputs inlined on {} tensors", inputs.len(), args.len()),
        );
        return None;
    }
    let mut env: HashMap<Var, Tensor> = inputs.into_iter().zip(args.iter().cloned()).collect();
    let read = |env: &HashMap<Var, Tensor>, a: &Atom| match a {
        Atom::Var(v) => Operand::Tensor(env[v].clone()),
        Atom::Lit(l) => Operand::Literal(l.value),
    };
    for eqn in &jaxpr.eqns {
        let operands: Vec<Operand> = eqn.invars.iter().map(|a| read(&env, a)).collect();
        let results = bind_eqn(eqn, &operands, loc)?;
        env.extend(eqn.outvars.iter().copied().zip(results));
    }
    jaxpr
        .outvars
        .iter()
        .map(|a| match read(&env, a) {
            Operand::Tensor(t) => Some(t),
            // A literal result (a constant output): materialized as `broadcast_in_dim`, as
            // `jnp.asarray` of a Python scalar is.
            lit @ Operand::Literal(_) => {
                let prim = Primitive::BroadcastInDim { shape: vec![], broadcast_dimensions: vec![] };
                bind_n(prim, &[lit], &[false], loc).map(|mut t| t.remove(0))
            }
        })
        .collect()
}

/// `template` (a closure's result, or anything of the same structure) rebuilt with
/// `results`, or with placeholders of the template's types when `results` is `None` or of
/// the wrong length.
pub fn rebuild_or_placeholders<R: TensorTree>(template: &R, results: Option<Vec<Tensor>>) -> R {
    match results {
        Some(r) if r.len() == template.leaves().len() => template.rebuild(&mut r.into_iter()),
        _ => placeholders(template),
    }
}

/// A placeholder tensor of type `aval` (a result after a recorded error).
pub fn placeholder(aval: &Aval) -> Tensor {
    Tensor::placeholder(aval.clone())
}
