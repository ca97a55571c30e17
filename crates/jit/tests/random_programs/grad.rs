//! Whole value-and-grad programs for the random-program generator: a generated program with
//! float inputs, differentiated by remat's own autodiff (`remat-ad`), as the facade runs
//! `value_and_grad` (forward half, then backward half, as one program).
//!
//! Autodiff is where loop indices become residuals: a scan's forward half stacks every
//! trip's index for its backward half, which slices and updates with them in reverse (the
//! pattern of issue 40). Two shapes of program:
//!
//! - `value_and_grad`: one float value of the program reduced to a scalar loss (`reduce_sum`
//!   over every axis), differentiated with respect to a random nonempty subset of the float
//!   inputs: `(primals) -> (loss, grads)`;
//! - `vjp_program`: every output with a cotangent input, every input's gradient:
//!   `(primals, cotangents) -> (outs, grads)`.
//!
//! A program autodiff refuses (a primitive without a derivative, reverse mode through a
//! `while` whose carries have tangents) gives `None`: the caller keeps the program itself.

use remat_ir::{Atom, Eqn, Jaxpr, Primitive, ReduceOp, SourceInfo, Var};

use super::Gen;

/// The value-and-grad program (or the vjp program) of `jaxpr`, or `None` where autodiff
/// refuses it or it has no float input and float value.
pub(super) fn differentiated(jaxpr: &Jaxpr, g: &mut Gen) -> Option<Jaxpr> {
    let floats: Vec<usize> =
        jaxpr.invars.iter().enumerate().filter(|(_, &v)| jaxpr.aval(v).dtype.is_float()).map(|(i, _)| i).collect();
    if floats.is_empty() {
        return None;
    }
    if g.chance(25) {
        return remat_ad::vjp_program(jaxpr, &[]).ok().map(|p| p.jaxpr);
    }
    let values: Vec<Var> = jaxpr
        .eqns
        .iter()
        .flat_map(|e| e.outvars.iter().copied())
        .chain(jaxpr.invars.iter().copied())
        .filter(|&v| jaxpr.aval(v).dtype.is_float() && jaxpr.aval(v).memory_space == remat_ir::MemorySpace::Device)
        .collect();
    // The program's float outputs most often, else any float value it computes.
    let outs: Vec<Var> = jaxpr.outvars.iter().filter_map(Atom::as_var).filter(|v| values.contains(v)).collect();
    let out = if !outs.is_empty() && g.chance(70) { g.pick(&outs) } else { *values.get(g.below(values.len()))? };
    let mut loss = jaxpr.clone();
    let aval = loss.aval(out).clone();
    let sum = if aval.rank() == 0 {
        out
    } else {
        let s = loss.new_var(remat_ir::Aval::scalar(aval.dtype));
        let prim = Primitive::Reduce { op: ReduceOp::Sum, axes: (0..aval.rank()).collect() };
        loss.eqns.push(Eqn::new(prim, vec![out.into()], vec![s], SourceInfo::unknown()));
        s
    };
    loss.outvars = vec![sum.into()];
    let mut argnums: Vec<usize> = floats.iter().copied().filter(|_| g.chance(70)).collect();
    if argnums.is_empty() {
        argnums.push(g.pick(&floats));
    }
    remat_ad::value_and_grad(&loss, &argnums).ok()
}
