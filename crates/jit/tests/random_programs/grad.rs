//! Whole value-and-grad programs for the random-program generator: a generated program with
//! float inputs, differentiated by remat's own autodiff (`remat-ad`), as the facade runs
//! `value_and_grad` (forward half, then backward half, as one program).
//!
//! Autodiff is where loop indices become residuals: a scan's forward half stacks every
//! trip's index for its backward half, which slices and updates with them in reverse (the
//! pattern of issue 40). Two shapes of program:
//!
//! - `value_and_grad`: one float value of the program that depends on a random nonempty
//!   subset of its float inputs (a loop's result most often) reduced to a scalar loss
//!   (`reduce_sum` over every axis), differentiated with respect to those inputs:
//!   `(primals) -> (loss, grads)`;
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
    let mut argnums: Vec<usize> = floats.iter().copied().filter(|_| g.chance(70)).collect();
    if argnums.is_empty() {
        argnums.push(floats[0]);
    }
    // The loss: a float value that depends on the differentiated inputs, most often a
    // loop's (or branch's, or call's) result, else one of the program's outputs.
    let depends = dependent(jaxpr, &argnums);
    let float = |v: &Var| {
        let a = jaxpr.aval(*v);
        a.dtype.is_float() && a.memory_space == remat_ir::MemorySpace::Device && depends[v.index()]
    };
    let of_loops: Vec<Var> = jaxpr
        .eqns
        .iter()
        .filter(|e| !e.primitive.subjaxprs().is_empty())
        .flat_map(|e| e.outvars.iter().copied())
        .filter(float)
        .collect();
    let outs: Vec<Var> = jaxpr.outvars.iter().filter_map(Atom::as_var).filter(float).collect();
    let any: Vec<Var> = jaxpr.eqns.iter().flat_map(|e| e.outvars.iter().copied()).filter(float).collect();
    let out = match () {
        () if !of_loops.is_empty() && g.chance(70) => g.pick(&of_loops),
        () if !outs.is_empty() && g.chance(60) => g.pick(&outs),
        () if !any.is_empty() => g.pick(&any),
        () => jaxpr.invars[argnums[0]],
    };
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
    remat_ad::value_and_grad(&loss, &argnums).ok()
}

/// Which variables of `jaxpr` (by index) depend on its inputs `argnums`: an equation's
/// results do where any of its operands does.
fn dependent(jaxpr: &Jaxpr, argnums: &[usize]) -> Vec<bool> {
    let mut depends = vec![false; jaxpr.vars.len()];
    for &i in argnums {
        depends[jaxpr.invars[i].index()] = true;
    }
    for e in &jaxpr.eqns {
        if e.invars.iter().filter_map(Atom::as_var).any(|v| depends[v.index()]) {
            for &v in &e.outvars {
                depends[v.index()] = true;
            }
        }
    }
    depends
}
