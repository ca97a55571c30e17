//! `jax.custom_jvp` calls over trees of tensors: the `custom_jvp_call` equation (its
//! `call_jaxpr` the primal function, its rule a name), and the rule itself traced in a
//! frame of its own, for the autodiff crate to use instead of the primal body.

use std::panic::Location;
use std::sync::Arc;

use remat_ir::{Aval, ClosedJaxpr, Primitive};

use crate::tensor::Tensor;
use crate::trace::{current_frame, record_error, Operand};
use crate::transforms::{bind_call, bind_custom_jvp, placeholders, trace_body};
use crate::tree::TensorTree;

fn types_of(leaves: &[Tensor]) -> Vec<(Aval, bool)> {
    leaves.iter().map(|t| (t.aval().clone(), t.is_weak())).collect()
}

/// Records `custom_jvp_call[name=NAME call_jaxpr={...} jvp=JVP symbolic_zeros=False]` of
/// `f` over `args`, as JAX records a call of a `jax.custom_jvp` function (tensors `f`
/// captures become leading operands, `num_consts`). Inside a trace only; the rule is
/// attached by name (see `remat::custom_jvp`).
pub fn custom_jvp_call<A: TensorTree, R: TensorTree>(
    name: &str,
    jvp: &str,
    f: impl FnOnce(A) -> R,
    args: A,
    loc: &'static Location<'static>,
) -> R {
    let leaves = args.leaves();
    let callee = ("the custom_jvp function", std::any::type_name_of_val(&f));
    match trace_body(&types_of(&leaves), |inner| f(args.rebuild(&mut inner.into_iter())), callee, loc) {
        Err(out) => placeholders(&out),
        Ok(body) => bind_custom_jvp(name, jvp, body, leaves.into_iter().map(Operand::Tensor), loc),
    }
}

/// Traces a jvp rule `rule(primals, tangents) -> (outs, tangent outs)` at the types of
/// `template`'s leaves (the tangents of the same types), in a frame of its own that
/// records nothing in the enclosing trace: the jaxpr `(primals, tangents) -> (outs,
/// tangent outs)`. Inside a trace only. A rule that uses a tensor of the enclosing
/// function is an error (JAX's rules see only their arguments; pass it as one).
pub fn trace_jvp_rule<A: TensorTree, R: TensorTree>(
    rule: impl FnOnce(A, A) -> (R, R),
    template: &A,
    loc: &'static Location<'static>,
) -> Option<ClosedJaxpr> {
    current_frame()?;
    let mut types = types_of(&template.leaves());
    types.extend(types.clone());
    let n = types.len() / 2;
    let callee = ("the custom_jvp rule", std::any::type_name_of_val(&rule));
    let traced = trace_body(
        &types,
        |inner| {
            let mut it = inner.into_iter();
            let primals = template.rebuild(&mut it.by_ref().take(n));
            let tangents = template.rebuild(&mut it);
            rule(primals, tangents)
        },
        callee,
        loc,
    );
    let body = traced.ok()?;
    if !body.captured.is_empty() {
        record_error(
            loc,
            format!(
                "the custom_jvp rule uses {} tensors of the enclosing function; pass them as arguments",
                body.captured.len()
            ),
        );
        return None;
    }
    Some(ClosedJaxpr::new(Arc::new(body.jaxpr)))
}

/// Records `custom_vjp_call[name=NAME bwd=BWD call_jaxpr={...} fwd=FWD
/// symbolic_zeros=False]` of `f` over `args`, as JAX records a call of a `jax.custom_vjp`
/// function. Inside a trace only; the rules are attached by name (see `remat::custom_vjp`).
pub fn custom_vjp_call<A: TensorTree, R: TensorTree>(
    name: &str,
    fwd: &str,
    bwd: &str,
    f: impl FnOnce(A) -> R,
    args: A,
    loc: &'static Location<'static>,
) -> R {
    let leaves = args.leaves();
    let callee = ("the custom_vjp function", std::any::type_name_of_val(&f));
    match trace_body(&types_of(&leaves), |inner| f(args.rebuild(&mut inner.into_iter())), callee, loc) {
        Err(out) => placeholders(&out),
        Ok(body) => {
            let num_consts = body.captured.len();
            let prim = Primitive::CustomVjpCall {
                name: name.to_string(),
                call_jaxpr: ClosedJaxpr::new(Arc::new(body.jaxpr)),
                fwd: fwd.to_string(),
                bwd: bwd.to_string(),
                num_consts,
                symbolic_zeros: false,
            };
            let operands: Vec<Operand> = body.captured.into_iter().chain(leaves).map(Operand::Tensor).collect();
            bind_call(prim, &operands, &body.out, loc)
        }
    }
}

/// Traces a rule `rule(args) -> out` at the types of `template`'s leaves in a frame of its
/// own that records nothing in the enclosing trace: its jaxpr, and its result (tensors of
/// that frame, for their structure and types only). Inside a trace only; a rule that uses
/// a tensor of the enclosing function is an error, as in [`trace_jvp_rule`].
pub fn trace_rule<A: TensorTree, O: TensorTree>(
    kind: &'static str,
    rule: impl FnOnce(A) -> O,
    template: &A,
    loc: &'static Location<'static>,
) -> Option<(ClosedJaxpr, O)> {
    current_frame()?;
    let types = types_of(&template.leaves());
    let callee = (kind, std::any::type_name_of_val(&rule));
    let traced = trace_body(&types, |inner| rule(template.rebuild(&mut inner.into_iter())), callee, loc);
    let body = traced.ok()?;
    if !body.captured.is_empty() {
        let n = body.captured.len();
        record_error(loc, format!("{kind} uses {n} tensors of the enclosing function; pass them as arguments"));
        return None;
    }
    Some((ClosedJaxpr::new(Arc::new(body.jaxpr)), body.out))
}
