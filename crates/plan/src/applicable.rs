//! Plans that JAX can run as they are: what the Python package's `plan.apply(f)` builds.
//!
//! A plan of the general planner decides each equation of the jvp'd body (a tanh's `1 - y²`
//! included), which no JAX policy can say. An *applicable* plan is one JAX expresses with
//! `jax.checkpoint` and `checkpoint_name` on the user's own equations:
//!
//! - a built-in policy over the whole function (`jax.checkpoint(f, policy=dots_saveable)`);
//! - a names policy, `save_only_these_names(...)` (with a host budget,
//!   `save_and_offload_only_these_names(...)`), over the program's own `checkpoint_name`s
//!   and over names the planner gives the function's values ([`auto_name`]): every value
//!   an equation of the function makes (its top-level `jit`s and checkpoints inlined, as
//!   the planner plans it) gets a name of its own, so that any subset of them can be saved
//!   and everything else is recomputed, exactly as JAX does under that policy.
//!
//! The Python side rebuilds the function from JAX's own equations (the same inlining),
//! putting `checkpoint_name` on the values [`AutoName::path`] locates, under the plan's
//! policy: the planner evaluates exactly the program JAX runs.

use std::sync::Arc;

use remat_ad::{flat_paths, flatten_calls, Builder};
use remat_ir::{Atom, ClosedJaxpr, DType, Eqn, Primitive};

use crate::PlanError;

/// A name the planner gave a value of the function: `remat_12_tanh` for the output of the
/// flattened function's equation 12, a `tanh`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoName {
    pub name: String,
    /// Where the equation making the value is in the function as traced: the equation's
    /// position at each level of the `jit`s and checkpoints inlined to reach it (`[3, 1]`:
    /// equation 1 of the body of equation 3).
    pub path: Vec<usize>,
    /// Which output of that equation.
    pub output: usize,
}

/// Whether the values of `e` get names: a first-order equation (a call's values are its
/// own business: a `scan`'s carries, a `cond`'s outputs are named by their readers) that
/// is not itself a name or a sharding constraint (a layout of the value before it, inlined
/// from a `jit`'s shardings), whose outputs are values (not keys).
fn named_by_planner(e: &Eqn, f: &remat_ir::Jaxpr) -> bool {
    e.primitive.higher_order().is_none()
        && !matches!(e.primitive, Primitive::Name { .. } | Primitive::ShardingConstraint(_))
        && e.outvars.iter().all(|&v| f.aval(v).dtype != DType::Key)
}

/// `f` flattened (its top-level calls inlined, as the planner plans it), every value an
/// equation makes followed by a `checkpoint_name` of its own (except a value the program
/// names itself right away), every later use reading the named value; with the names given.
pub fn auto_name(f: &ClosedJaxpr) -> Result<(ClosedJaxpr, Vec<AutoName>), PlanError> {
    let flat = flatten_calls(&f.jaxpr);
    let paths = flat_paths(&f.jaxpr);
    if paths.len() != flat.eqns.len() {
        return Err(PlanError::Invalid(format!(
            "the flattened function has {} equations and {} paths",
            flat.eqns.len(),
            paths.len()
        )));
    }
    // Values the program names itself: the operand of a `name` equation.
    let mut user_named = vec![false; flat.vars.len()];
    for e in &flat.eqns {
        if let (Primitive::Name { .. }, Some(Atom::Var(v))) = (&e.primitive, e.invars.first()) {
            user_named[v.index()] = true;
        }
    }
    let taken: Vec<String> = flat.checkpoint_names();
    let (mut b, mut map) = Builder::with_signature_of(&flat);
    let mut names = Vec::new();
    for (k, e) in flat.eqns.iter().enumerate() {
        let outs = b.copy_eqn(&flat, e, &mut map);
        if !named_by_planner(e, &flat) {
            continue;
        }
        b.set_source(Some(e.source.clone()));
        for (j, (&old, &new)) in e.outvars.iter().zip(&outs).enumerate() {
            if user_named[old.index()] || flat.vars[old.index()].dropped {
                continue;
            }
            let mut name = match e.outvars.len() {
                1 => format!("remat_{k}_{}", e.primitive.name()),
                _ => format!("remat_{k}_{j}_{}", e.primitive.name()),
            }
            .replace('-', "_");
            while taken.contains(&name) {
                name.push('_');
            }
            let named = b.bind1(Primitive::Name { name: name.clone() }, vec![Atom::Var(new)])?;
            map.set(old, named);
            names.push(AutoName { name, path: paths[k].clone(), output: j });
        }
        b.set_source(None);
    }
    let outs = map.get_all(&flat.outvars);
    let named = b.finish(outs);
    remat_ir::verify::verify(&named).map_err(|e| PlanError::Invalid(format!("the named function: {e}")))?;
    Ok((ClosedJaxpr { jaxpr: Arc::new(named), consts: f.consts.clone() }, names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use remat_ir::parse_jaxpr;

    #[test]
    fn every_value_an_equation_makes_gets_a_name_and_its_place() {
        let text = "{ lambda ; a:f32[3]. let
    b:f32[3] = jit[
      name=g
      jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c; e:f32[3] = cos d in (e,) }
    ] a
    f:f32[3] = name[name=mine] b
    g:f32[] = reduce_sum[axes=(0,) out_sharding=None] f
  in (g,) }";
        let f = ClosedJaxpr::new(Arc::new(parse_jaxpr(text, "f.jaxpr").unwrap()));
        let (named, names) = auto_name(&f).unwrap();
        let got: Vec<(String, Vec<usize>)> = names.iter().map(|n| (n.name.clone(), n.path.clone())).collect();
        // The jit's cos is named by the program itself ('mine'); its sin and the sum are not.
        assert_eq!(got, [("remat_0_sin".to_string(), vec![0, 0]), ("remat_3_reduce_sum".to_string(), vec![2])]);
        assert_eq!(named.jaxpr.checkpoint_names(), ["remat_0_sin", "mine", "remat_3_reduce_sum"]);
        // Every later use reads the named value, the output too.
        let printed = remat_ir::pp_jaxpr(&named.jaxpr);
        assert!(printed.contains("name[name=remat_3_reduce_sum]"), "{printed}");
        let last = named.jaxpr.eqns.last().unwrap();
        assert_eq!(named.jaxpr.outvars, [Atom::Var(last.outvars[0])]);
    }
}
