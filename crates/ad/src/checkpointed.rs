//! A whole function differentiated as `checkpoint(f)` under a policy chosen per equation:
//! what the memory planner (`remat-plan`) builds its plans with.
//!
//! ```text
//! f        : (primals)                       -> (outs)            flattened: no jit, no remat2
//! program  : (primals) -> remat2[f]          -> (outs)            the whole function checkpointed
//! body     : (primals, tangents)             -> (outs, out tangents)   the jvp of f, the remat2's body
//! ```
//!
//! `jit` and `remat2` calls at the top of `f` are inlined first, so that one plan decides
//! about every equation (nested checkpoints' own policies give way to the plan, as an
//! enclosing checkpoint's policy does in JAX). A plan is one [`Saveability`] per equation
//! of `body`; [`Checkpointed::vjp`] splits the program with it exactly as JAX splits a
//! `checkpoint` at the top of a linearization (`remat_partial_eval`): the known half
//! inlined, the staged half a `remat2[differentiated=True, prevent_cse=True]` whose
//! transpose recomputes what the plan did not save.

use std::sync::Arc;

use remat_ir::{Atom, Eqn, HigherOrder, Jaxpr, Policy, Primitive, Var};

use crate::builder::{inline_jaxpr, Builder, VarMap};
use crate::call::Call;
use crate::jvp::{jvp_jaxpr, JvpJaxpr};
use crate::partial_eval::PeMode;
use crate::policy::{EqnDecisions, ResolvedPolicy, Saveability};
use crate::vjp::{check_grad_request, linearize_jvp, vjp_of, whole_program, Vjp};
use crate::{check, AdError};

/// The name the planned checkpoint's policy prints as (`policy=<function remat_plan>`).
pub const PLAN_POLICY_NAME: &str = "remat_plan";

/// `checkpoint(f)` of a flattened `f`, linearized with respect to the inputs `wrt`, ready
/// to be split by any per-equation plan.
#[derive(Clone, Debug)]
pub struct Checkpointed {
    /// `f` with its top-level `jit` and `remat2` calls inlined.
    flat: Jaxpr,
    /// `(primals) -> remat2[flat](primals)`.
    program: Jaxpr,
    in_nonzeros: Vec<bool>,
    jvp: JvpJaxpr,
    /// The body of the jvp's `remat2`: the equations a plan decides about.
    body: Arc<Jaxpr>,
}

impl Checkpointed {
    /// Flattens `f` and differentiates `checkpoint(f)` with respect to its float inputs
    /// in `argnums` (all float inputs when `None`).
    pub fn new(f: &Jaxpr, argnums: Option<&[usize]>) -> Result<Checkpointed, AdError> {
        if let Some(nums) = argnums {
            if let Some(&bad) = nums.iter().find(|&&i| i >= f.invars.len()) {
                return Err(AdError::Invalid(format!("argnum {bad} is out of range for {} inputs", f.invars.len())));
            }
        }
        let flat = flatten_calls(f);
        check("checkpointed (flat)", &flat)?;
        let plan = Policy::Function { name: PLAN_POLICY_NAME.into(), repr: format!("<function {PLAN_POLICY_NAME}>") };
        let program = checkpoint_whole(&flat, plan)?;
        check("checkpointed (program)", &program)?;
        let in_nonzeros: Vec<bool> = (0..f.invars.len())
            .map(|i| f.aval(f.invars[i]).dtype.is_inexact() && argnums.is_none_or(|nums| nums.contains(&i)))
            .collect();
        let jvp = jvp_jaxpr(&program, &in_nonzeros, &vec![false; program.outvars.len()])?;
        let body = jvp
            .jaxpr
            .eqns
            .iter()
            .find_map(
                |e| if let Primitive::Remat2 { jaxpr, .. } = &e.primitive { Some(Arc::clone(jaxpr)) } else { None },
            )
            .ok_or_else(|| AdError::Internal("checkpointed: the jvp has no remat2".into()))?;
        Ok(Checkpointed { flat, program, in_nonzeros, jvp, body })
    }

    /// `f` with its top-level calls inlined (the function the plans are plans of).
    pub fn flat(&self) -> &Jaxpr {
        &self.flat
    }

    /// The jvp of the flat function, `(primals, tangents of the inputs differentiated)
    /// -> (outs, out tangents)`: a plan gives one decision per equation of it.
    pub fn body(&self) -> &Arc<Jaxpr> {
        &self.body
    }

    /// Which inputs are differentiated (have a tangent input in [`Checkpointed::body`]).
    pub fn in_nonzeros(&self) -> &[bool] {
        &self.in_nonzeros
    }

    /// The vjp under `decisions` (one per equation of [`Checkpointed::body`]); residuals
    /// described with `arg_names`. Equations inside the body's scans and conds are saved
    /// (a plan decides about the body's own equations).
    pub fn vjp(&self, decisions: Vec<Saveability>, arg_names: &[String]) -> Result<Vjp, AdError> {
        let policy = ResolvedPolicy::PerEquation(Arc::new(EqnDecisions::new(Arc::clone(&self.body), decisions)?));
        self.vjp_with(&policy, arg_names)
    }

    /// The vjp of `checkpoint(f, policy)`: the policy decides every equation, those inside
    /// the body's scans and conds included, as JAX's `jax.checkpoint(f, policy=...)` does.
    pub fn vjp_with(&self, policy: &ResolvedPolicy, arg_names: &[String]) -> Result<Vjp, AdError> {
        let lin = linearize_jvp(&self.program, self.in_nonzeros.clone(), &self.jvp, PeMode::LinearizeWith(policy))?;
        vjp_of(&self.program, lin, arg_names)
    }

    /// The program `jax.value_and_grad(f, argnums)` runs under the vjp `v` (from
    /// [`Checkpointed::vjp`]): `(primals) -> (value, grads of argnums)`.
    pub fn value_and_grad(&self, v: &Vjp, argnums: &[usize]) -> Result<Jaxpr, AdError> {
        check_grad_request(&self.program, argnums)?;
        whole_program(&self.program, v, argnums, true)
    }
}

/// `f` with every top-level `jit` and `closed_call` (without consts) and `remat2`
/// inlined, recursively.
pub fn flatten_calls(f: &Jaxpr) -> Jaxpr {
    let (mut b, mut map) = Builder::with_signature_of(f);
    flatten_into(&mut b, f, &mut map);
    let outs = map.get_all(&f.outvars);
    b.finish(outs)
}

/// Where each equation of [`flatten_calls`]`(f)` comes from in `f`: the position of the
/// call it was inlined from at each level, then its own (`[3, 1]`: equation 1 of the body of
/// `f`'s equation 3), one path per equation of the flat function, in its order.
pub fn flat_paths(f: &Jaxpr) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for (i, eqn) in f.eqns.iter().enumerate() {
        match inlinable(eqn) {
            Some(body) => {
                let (ins, outs) = constraints(eqn);
                out.extend(ins.iter().flatten().map(|_| vec![i]));
                out.extend(flat_paths(body).into_iter().map(|p| [vec![i], p].concat()));
                out.extend(outs.iter().flatten().map(|_| vec![i]));
            }
            None => out.push(vec![i]),
        }
    }
    out
}

/// For an inlined `jit`'s operands and results, the `sharding_constraint` that keeps what
/// its sharding says (none for a literal operand or an unnamed sharding).
fn constraints(eqn: &Eqn) -> (Vec<Option<Primitive>>, Vec<Option<Primitive>>) {
    let Primitive::Jit { options, .. } = &eqn.primitive else { return (Vec::new(), Vec::new()) };
    let of = |s: &[remat_ir::Sharding], k: usize| s.get(k).and_then(Primitive::constraint_for);
    let ins = (0..eqn.invars.len())
        .map(|k| of(&options.in_shardings, k).filter(|_| matches!(eqn.invars[k], Atom::Var(_))))
        .collect();
    let outs = (0..eqn.outvars.len()).map(|k| of(&options.out_shardings, k)).collect();
    (ins, outs)
}

fn flatten_into(b: &mut Builder, f: &Jaxpr, map: &mut VarMap) {
    for eqn in &f.eqns {
        if let Some(body) = inlinable(eqn) {
            let (in_c, out_c) = constraints(eqn);
            let mut args = map.get_all(&eqn.invars);
            // A constraint keeps its operand's type (the call's sharding was checked
            // against it); one that did not would only lose what it says of the layout.
            let before = b.set_source(Some(eqn.source.clone()));
            for (a, c) in args.iter_mut().zip(in_c) {
                if let Some(Ok(x)) = c.map(|prim| b.bind1(prim, vec![*a])) {
                    *a = x;
                }
            }
            let flat_body = flatten_calls(body);
            let mut outs = inline_jaxpr(b, &flat_body, &[], &args);
            for (o, c) in outs.iter_mut().zip(out_c) {
                if let Some(Ok(x)) = c.map(|prim| b.bind1(prim, vec![*o])) {
                    *o = x;
                }
            }
            b.set_source(before);
            for (&v, o) in eqn.outvars.iter().zip(outs) {
                map.set(v, o);
            }
        } else {
            b.copy_eqn(f, eqn, map);
        }
    }
}

/// The body of a call the flattening inlines: a `remat2`, or a `jit` or `closed_call`
/// without consts.
fn inlinable(eqn: &Eqn) -> Option<&Jaxpr> {
    match eqn.primitive.higher_order() {
        Some(HigherOrder::Remat2 | HigherOrder::Jit | HigherOrder::ClosedCall) => {
            let call = Call::of(&eqn.primitive).ok()?;
            let body = call.body();
            body.constvars.is_empty().then_some(body)
        }
        _ => None,
    }
}

/// `jaxpr` with every checkpoint's policy replaced by `policy`, at any depth (as an outer
/// `jax.checkpoint(f, policy=...)`'s policy decides for the checkpoints inside it); a
/// function without a checkpoint is put inside one, as `jax.checkpoint(f, policy=policy)`
/// does (its constants become the checkpoint's leading inputs). What `remat explain
/// --policy`, the report's policy sides and the Python package's `policy=` measure.
pub fn with_policy(jaxpr: &Jaxpr, policy: &Policy) -> Result<Jaxpr, AdError> {
    fn replace(j: &Jaxpr, policy: &Policy, found: &mut bool) -> Jaxpr {
        let mut out = j.clone();
        for eqn in &mut out.eqns {
            if let Primitive::Remat2 { policy: p, .. } = &mut eqn.primitive {
                *p = Some(policy.clone());
                *found = true;
            }
            eqn.primitive = eqn.primitive.map_subjaxprs(|b| Arc::new(replace(b, policy, found)));
        }
        out
    }
    let mut found = false;
    let replaced = replace(jaxpr, policy, &mut found);
    if found {
        return Ok(replaced);
    }
    checkpoint_whole(jaxpr, policy.clone())
}

/// `(consts, ins) -> remat2[prevent_cse=True, policy=policy](consts, ins)` around `flat`.
fn checkpoint_whole(flat: &Jaxpr, policy: Policy) -> Result<Jaxpr, AdError> {
    let mut body = flat.clone();
    // The body's constants become its leading inputs (a remat2 body has no constvars).
    let consts = std::mem::take(&mut body.constvars);
    body.invars.splice(0..0, consts.iter().copied());
    let mut b = Builder::new();
    let cs: Vec<Atom> = flat.constvars.iter().map(|&c| Atom::Var(b.constvar(flat.aval(c).clone()))).collect();
    let ins: Vec<Atom> = flat.invars.iter().map(|&v| Atom::Var(b.invar(flat.aval(v).clone()))).collect();
    let prim =
        Primitive::Remat2 { jaxpr: Arc::new(body), prevent_cse: true, differentiated: false, policy: Some(policy) };
    let args: Vec<Atom> = cs.into_iter().chain(ins).collect();
    let outs = b.bind(prim, args)?;
    Ok(b.finish(outs.into_iter().map(Atom::Var).collect()))
}

/// The program `program` (forward equations `0..num_fwd`, then backward) with the backward
/// half recomputing `v` from the equations `cone` (in program order) instead of reading it:
/// the cone inside a `remat2[differentiated=True, prevent_cse=True]` call placed before the
/// value's first backward reader, as JAX's partial evaluation places a checkpoint's
/// recompute (what the residual ledger measures per residual).
pub fn recompute_in_backward(program: &Jaxpr, num_fwd: usize, cone: &[usize], v: Var) -> Result<Jaxpr, AdError> {
    // The cone as a body: its inputs are the values it reads and does not make.
    let mut made = vec![false; program.vars.len()];
    for &e in cone {
        for o in &program.eqns[e].outvars {
            made[o.index()] = true;
        }
    }
    let mut inputs: Vec<Var> = Vec::new();
    for &e in cone {
        for x in program.eqns[e].invars.iter().filter_map(Atom::as_var) {
            if !made[x.index()] && !inputs.contains(&x) {
                inputs.push(x);
            }
        }
    }
    let mut body = Builder::new();
    let mut body_map = VarMap::new(program);
    for &x in &inputs {
        let y = body.invar(program.aval(x).clone());
        body_map.set(x, y);
    }
    for &e in cone {
        body.copy_eqn(program, &program.eqns[e], &mut body_map);
    }
    let body = body.finish(vec![body_map.get(&Atom::Var(v))]);
    // The whole program, the call before the first backward reader of `v`.
    let first_reader = (num_fwd..program.eqns.len())
        .find(|&e| program.eqns[e].invars.contains(&Atom::Var(v)))
        .unwrap_or(program.eqns.len());
    let (mut b, mut map) = Builder::with_signature_of(program);
    for (e, eqn) in program.eqns.iter().enumerate() {
        if e == first_reader {
            let call = Primitive::Remat2 {
                jaxpr: Arc::new(body.clone()),
                prevent_cse: true,
                differentiated: true,
                policy: None,
            };
            let outs = b.bind(call, inputs.iter().map(|&x| map.get(&Atom::Var(x))).collect())?;
            map.set(v, outs[0]);
        }
        b.copy_eqn(program, eqn, &mut map);
    }
    Ok(b.finish(map.get_all(&program.outvars)))
}
