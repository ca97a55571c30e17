//! Calling a jaxpr made elsewhere from inside a trace: a gradient program built by
//! `remat-ad`, a parsed JAX text. JAX's `jax.jit(jax.core.jaxpr_as_fun(closed))(*args)`,
//! recorded as one `jit` equation.
//!
//! This is how a traced training step holds its own gradient: the facade differentiates
//! the loss into a closed jaxpr first (the tracer knows nothing of autodiff), and the step
//! calls that jaxpr on its tensors. The call's operands are checked against the jaxpr's
//! inputs by `jit`'s shape rule, so a mismatch is a located [`TraceError`](crate::TraceError)
//! of the enclosing trace, never a malformed program.

use std::panic::Location;
use std::sync::Arc;

use remat_ir::{ClosedJaxpr, Primitive};

use crate::tensor::Tensor;
use crate::trace::{bind_n, constant, Operand};

/// Calls `jaxpr` on `args` inside the current trace, recording `jit[name=name]` with it as
/// the body, and returns one tensor per output (strongly typed).
///
/// The closed jaxpr's constants become constants of the enclosing trace (constvars of the
/// traced program, as [`numpy::constant`](crate::numpy::constant) makes them), passed as
/// leading operands of the call; the body takes them as leading inputs (JAX's closure
/// conversion). Wrong argument counts or types record the trace's error at the caller and
/// return placeholders of the output types.
#[track_caller]
pub fn call_jaxpr(name: &str, jaxpr: &ClosedJaxpr, args: &[Tensor]) -> Vec<Tensor> {
    let loc = Location::caller();
    let placeholders = || jaxpr.jaxpr.outvars.iter().map(|o| Tensor::placeholder(jaxpr.jaxpr.atom_aval(o))).collect();
    let mut operands = Vec::with_capacity(jaxpr.consts.len() + args.len());
    for value in &jaxpr.consts {
        match constant(value.clone(), loc) {
            Some(t) => operands.push(Operand::Tensor(t)),
            None => return placeholders(),
        }
    }
    operands.extend(args.iter().cloned().map(Operand::Tensor));
    let body = if jaxpr.consts.is_empty() && jaxpr.jaxpr.constvars.is_empty() {
        Arc::clone(&jaxpr.jaxpr)
    } else {
        let mut open = (*jaxpr.jaxpr).clone();
        let constvars = std::mem::take(&mut open.constvars);
        open.invars = constvars.into_iter().chain(open.invars).collect();
        Arc::new(open)
    };
    let prim = Primitive::Jit { name: name.to_string(), jaxpr: ClosedJaxpr::new(body), options: Default::default() };
    let weak = vec![false; jaxpr.jaxpr.outvars.len().max(1)];
    match bind_n(prim, &operands, &weak, loc) {
        Some(results) => results,
        None => placeholders(),
    }
}
