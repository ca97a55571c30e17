//! Forward mode: `jvp_jaxpr(jaxpr, nonzeros, instantiate)` maps a jaxpr
//! `(primals) -> (outs)` to `(primals, nonzero tangents) -> (outs, nonzero out tangents)`.
//!
//! Tangents are symbolic: a [`Tangent::Zero`] is known to be zero and never materialized
//! unless asked (`instantiate`). An equation whose input tangents are all zero is copied
//! unchanged, as JAX's `JVPTrace.process_primitive` binds the primal alone. Integer and
//! boolean values always have zero tangents. The per-primitive rules live in
//! `jvp/rules.rs` (one match over every primitive); the rules for calls (`jit`, `remat2`,
//! `custom_jvp_call`, `scan`) are here, since they recurse into [`jvp_jaxpr`] (`cond`'s and
//! `while`'s are `jvp/cond.rs`), and so are
//! JAX's rule makers the rule files share (`standard` for `defjvp`, `zero` for
//! `defjvp_zero`, `linear` for `linear_jvp`, which JAX keeps in `interpreters/ad.py`).

mod cond;
mod indexing;
pub(crate) mod linalg;
mod rules;
mod special;

pub(crate) use indexing::{add_jaxpr, window_slice_sizes};

pub use rules::custom_rule_notes;

use std::sync::Arc;

use remat_ir::{Atom, Aval, ClosedJaxpr, Eqn, Jaxpr, JitOptions, Primitive};

use crate::builder::{inline_jaxpr, Builder, VarMap};
use crate::scan::ScanParams;
use crate::{check, AdError};

/// What a jvp rule returns: the primal outputs and one tangent per output.
type JvpOut = (Vec<Atom>, Vec<Tangent>);

/// A tangent: symbolically zero, or a value of the primal's aval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tangent {
    Zero,
    Nz(Atom),
}

impl Tangent {
    pub fn is_zero(&self) -> bool {
        matches!(self, Tangent::Zero)
    }
}

/// The result of [`jvp_jaxpr`]: `(primals, nonzero tangents) -> (outs, nonzero out tangents)`.
#[derive(Clone, Debug)]
pub struct JvpJaxpr {
    pub jaxpr: Jaxpr,
    /// Which outputs have a (possibly instantiated) tangent output.
    pub out_nonzeros: Vec<bool>,
}

thread_local! {
    /// How many [`jvp_jaxpr`]s are running on this thread: 1 while the function itself is
    /// differentiated, more inside a call, checkpoint or loop body.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One level of [`DEPTH`], left when dropped.
struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The source a custom rule's inlined equations get, as JAX gives it: differentiating the
/// function itself, JAX runs the Python rule under the user's call stack, so an equation
/// keeps the rule's own line and one with no frame of the user's (a rule of JAX's library)
/// gets the call's; inside a body (a `jit`, a checkpoint, a loop), JAX traces the rule under
/// the call's source info (`eval_jaxpr`'s `user_context`), so every equation gets the
/// call's. The builder's current source is the call's.
fn give_rule_sources(b: &mut Builder, from: usize) {
    let nested = DEPTH.with(|d| d.get() > 1);
    b.give_source_from(from, nested);
}

/// Differentiates `jaxpr` in forward mode. `nonzeros[i]` says whether invar `i` gets a
/// tangent input; `instantiate[i]` forces a (zero) tangent output for outvar `i`. The
/// jaxpr's constvars stay constvars, with zero tangents.
pub fn jvp_jaxpr(jaxpr: &Jaxpr, nonzeros: &[bool], instantiate: &[bool]) -> Result<JvpJaxpr, AdError> {
    let _depth = Depth::enter();
    if nonzeros.len() != jaxpr.invars.len() || instantiate.len() != jaxpr.outvars.len() {
        return Err(AdError::Invalid(format!(
            "jvp_jaxpr: {} nonzeros for {} invars and {} instantiate flags for {} outvars",
            nonzeros.len(),
            jaxpr.invars.len(),
            instantiate.len(),
            jaxpr.outvars.len()
        )));
    }
    let (mut b, mut primal) = Builder::with_signature_of(jaxpr);
    let mut tangents = vec![Tangent::Zero; jaxpr.vars.len()];
    for (&v, &nz) in jaxpr.invars.iter().zip(nonzeros) {
        if nz {
            let t = b.invar(jaxpr.aval(v).clone());
            if jaxpr.aval(v).dtype.is_inexact() {
                tangents[v.index()] = Tangent::Nz(Atom::Var(t));
            }
        }
    }
    jvp_eqns(&mut b, jaxpr, &mut primal, &mut tangents)?;

    let mut outvars = primal.get_all(&jaxpr.outvars);
    let mut out_nonzeros = Vec::new();
    for (out, &inst) in jaxpr.outvars.iter().zip(instantiate) {
        let t = tangent_of(&tangents, out);
        match t {
            Tangent::Nz(a) => {
                outvars.push(a);
                out_nonzeros.push(true);
            }
            Tangent::Zero if inst => {
                // `_linearize_jaxpr` instantiates under the linearize trace: primal-side zeros.
                let aval = jaxpr.atom_aval(out);
                let z = b.staged_zeros(&aval)?;
                outvars.push(z);
                out_nonzeros.push(true);
            }
            Tangent::Zero => out_nonzeros.push(false),
        }
    }
    let out = b.finish(outvars);
    check("jvp_jaxpr", &out)?;
    Ok(JvpJaxpr { jaxpr: out, out_nonzeros })
}

fn tangent_of(tangents: &[Tangent], a: &Atom) -> Tangent {
    match a {
        Atom::Var(v) => tangents[v.index()],
        Atom::Lit(_) => Tangent::Zero,
    }
}

/// Differentiates every equation of `jaxpr` into `b`.
pub(crate) fn jvp_eqns(
    b: &mut Builder,
    jaxpr: &Jaxpr,
    primal: &mut VarMap,
    tangents: &mut [Tangent],
) -> Result<(), AdError> {
    for eqn in &jaxpr.eqns {
        let tangents_in: Vec<Tangent> = eqn.invars.iter().map(|a| tangent_of(tangents, a)).collect();
        if tangents_in.iter().all(Tangent::is_zero) {
            b.copy_eqn(jaxpr, eqn, primal);
            continue;
        }
        let primals_in = primal.get_all(&eqn.invars);
        let saved = b.set_source(Some(eqn.source.clone()));
        let (primals_out, tangents_out) = rules::jvp_rule(b, jaxpr, eqn, &primals_in, &tangents_in)?;
        b.set_source(saved);
        for ((&v, p), t) in eqn.outvars.iter().zip(primals_out).zip(tangents_out) {
            primal.set(v, p);
            tangents[v.index()] = if jaxpr.aval(v).dtype.is_inexact() { t } else { Tangent::Zero };
        }
    }
    Ok(())
}

/// `jit`'s jvp is a `jit` of the jvp'd body; `remat2`'s (`remat_jvp`) likewise: remat does
/// nothing under jvp, and the body's jvp stays inside a `remat2` with the same policy.
pub(crate) fn jvp_call(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let nonzeros: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let mut out_nonzeros = Vec::new();
    let mut prim = eqn.primitive.try_map_subjaxprs(|body| {
        let inner = jvp_jaxpr(body, &nonzeros, &vec![false; body.outvars.len()])?;
        out_nonzeros = inner.out_nonzeros;
        Ok::<_, AdError>(Arc::new(inner.jaxpr))
    })?;
    // A jit's tangents are laid out as their primals (JAX's `_pjit_jvp`).
    if let (Primitive::Jit { options: old, .. }, Primitive::Jit { options: new, .. }) = (&eqn.primitive, &mut prim) {
        let with_tangents = |s: &[remat_ir::Sharding], nz: &[bool]| -> Vec<remat_ir::Sharding> {
            match s.len() == nz.len() {
                true => [s.to_vec(), JitOptions::shardings_where(s, nz, true)].concat(),
                false => Vec::new(),
            }
        };
        new.in_shardings = with_tangents(&old.in_shardings, &nonzeros);
        new.out_shardings = with_tangents(&old.out_shardings, &out_nonzeros);
    }
    call_with_tangents(b, prim, primals, tangents, &out_nonzeros)
}

/// `shard_map` (JAX's `_shard_map_jvp`): the body's jvp, once per device as the primal
/// body; each nonzero tangent goes in with its primal's spec and comes out with its primal
/// output's.
pub(crate) fn jvp_shard_map(
    b: &mut Builder,
    sm: &remat_ir::ShardMap,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let nonzeros: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let inner = jvp_jaxpr(&sm.jaxpr, &nonzeros, &vec![false; sm.jaxpr.outvars.len()])?;
    let mut new = sm.clone();
    new.jaxpr = Arc::new(inner.jaxpr);
    new.in_specs.extend(sm.in_specs.iter().zip(&nonzeros).filter(|(_, &nz)| nz).map(|(s, _)| s.clone()));
    new.out_specs.extend(sm.out_specs.iter().zip(&inner.out_nonzeros).filter(|(_, &nz)| nz).map(|(s, _)| s.clone()));
    call_with_tangents(b, Primitive::ShardMap(Box::new(new)), primals, tangents, &inner.out_nonzeros)
}

/// `custom_jvp_call` whose rule is not known (and `custom_vjp_call`, whose fwd/bwd rules
/// are opaque text too): the primal function is differentiated for the tangent and its
/// jvp inlined (as JAX inlines the custom rule's trace). The primal is the call itself,
/// bound again, as JAX's rules compute it (`f(x)` inside the rule binds a fresh call): its
/// output, not values inside the call, is what a later tangent reads and so saves; the
/// tangent's own reads of the body's values are recomputed outside the call. A call
/// jaxpr with consts becomes a `jit` holding them.
pub(crate) fn jvp_custom_jvp_call(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    name: &str,
    call_jaxpr: &ClosedJaxpr,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let nonzeros: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let inner = jvp_jaxpr(&call_jaxpr.jaxpr, &nonzeros, &vec![false; call_jaxpr.jaxpr.outvars.len()])?;
    if call_jaxpr.consts.is_empty() {
        let primal_outs = emit_primal(b, old, eqn, primals);
        let outs = inline_jaxpr(b, &inner.jaxpr, &[], &with_tangents(primals, tangents));
        let (_, tangents_out) = split_outs(&outs, &inner.out_nonzeros);
        Ok((primal_outs, tangents_out))
    } else {
        let prim = Primitive::Jit {
            name: name.to_string(),
            jaxpr: ClosedJaxpr { jaxpr: Arc::new(inner.jaxpr), consts: call_jaxpr.consts.clone() },
            options: Default::default(),
        };
        call_with_tangents(b, prim, primals, tangents, &inner.out_nonzeros)
    }
}

/// `custom_vjp_call`: the body's jvp inlined, primal and tangent (the fwd/bwd rules are
/// opaque text). A call jaxpr with consts becomes a `jit` holding them.
pub(crate) fn jvp_custom_vjp_call(
    b: &mut Builder,
    name: &str,
    call_jaxpr: &ClosedJaxpr,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let nonzeros: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let inner = jvp_jaxpr(&call_jaxpr.jaxpr, &nonzeros, &vec![false; call_jaxpr.jaxpr.outvars.len()])?;
    if call_jaxpr.consts.is_empty() {
        let outs = inline_jaxpr(b, &inner.jaxpr, &[], &with_tangents(primals, tangents));
        Ok(split_outs(&outs, &inner.out_nonzeros))
    } else {
        let prim = Primitive::Jit {
            name: name.to_string(),
            jaxpr: ClosedJaxpr { jaxpr: Arc::new(inner.jaxpr), consts: call_jaxpr.consts.clone() },
            options: Default::default(),
        };
        call_with_tangents(b, prim, primals, tangents, &inner.out_nonzeros)
    }
}

/// `_scan_jvp`: the body's jvp, with a fixpoint making a carry's tangent nonzero when its
/// output tangent is; the tangents join the consts, carries and xs as extra operands.
pub(crate) fn scan_jvp(
    b: &mut Builder,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let p = ScanParams::of(eqn)?;
    let (nc, ncarry, nys) = (p.num_consts, p.num_carry, p.num_ys());
    let nz: Vec<bool> = tangents.iter().map(|t| !t.is_zero()).collect();
    let (const_nz, rest) = nz.split_at(nc);
    let (init_nz, xs_nz) = rest.split_at(ncarry);
    let mut carry_nz = init_nz.to_vec();
    let mut converged = None;
    for _ in 0..=ncarry {
        let nonzeros: Vec<bool> = const_nz.iter().chain(&carry_nz).chain(xs_nz).copied().collect();
        let mut inst = carry_nz.clone();
        inst.extend(vec![false; nys]);
        let jvp = jvp_jaxpr(&p.body.jaxpr, &nonzeros, &inst)?;
        let carry_nz_out = &jvp.out_nonzeros[..ncarry];
        if carry_nz_out == carry_nz.as_slice() {
            converged = Some(jvp);
            break;
        }
        carry_nz = carry_nz.iter().zip(carry_nz_out).map(|(a, b)| *a || *b).collect();
    }
    let jvp = converged.ok_or_else(|| AdError::Internal("scan jvp: carry fixpoint not reached".into()))?;

    // Rearrange the jvp body's binders to the scan convention:
    // [consts, consts_dot, carries, carries_dot, xs, xs_dot] -> [carries, carries_dot, ys, ys_dot].
    let n_in = primals.len();
    let mut body = jvp.jaxpr;
    let (pin, tin) = body.invars.split_at(n_in);
    let n_cd = const_nz.iter().filter(|&&x| x).count();
    let n_id = carry_nz.iter().filter(|&&x| x).count();
    let mut invars = pin[..nc].to_vec();
    invars.extend(&tin[..n_cd]);
    invars.extend(&pin[nc..nc + ncarry]);
    invars.extend(&tin[n_cd..n_cd + n_id]);
    invars.extend(&pin[nc + ncarry..]);
    invars.extend(&tin[n_cd + n_id..]);
    body.invars = invars;
    let n_out = ncarry + nys;
    let (pout, tout) = body.outvars.split_at(n_out);
    let mut outvars = pout[..ncarry].to_vec();
    outvars.extend(&tout[..n_id]);
    outvars.extend(&pout[ncarry..]);
    outvars.extend(&tout[n_id..]);
    body.outvars = outvars;

    // Operands: tangents of carries that became nonzero are instantiated, on the tangent
    // side as JAX's `_scan_linearize` does in its `tangent_fun` (never a residual).
    let mut ops = primals[..nc].to_vec();
    let nz_tangent = |t: &Tangent| match t {
        Tangent::Nz(a) => Some(*a),
        Tangent::Zero => None,
    };
    ops.extend(tangents[..nc].iter().filter_map(nz_tangent));
    ops.extend(&primals[nc..nc + ncarry]);
    for i in 0..ncarry {
        if carry_nz[i] {
            let aval = b.aval(&primals[nc + i]);
            ops.push(match tangents[nc + i] {
                Tangent::Nz(a) => a,
                Tangent::Zero => b.zeros(&aval)?,
            });
        }
    }
    ops.extend(&primals[nc + ncarry..]);
    ops.extend(tangents[nc + ncarry..].iter().filter_map(nz_tangent));
    let prim = p.prim(body, p.body.consts.clone(), nc + n_cd, ncarry + n_id, p.reverse);
    let outs: Vec<Atom> = b.bind(prim, ops)?.into_iter().map(Atom::Var).collect();
    let carry = &outs[..ncarry];
    let carry_dot = &outs[ncarry..ncarry + n_id];
    let ys = &outs[ncarry + n_id..ncarry + n_id + nys];
    let ys_dot = &outs[ncarry + n_id + nys..];
    let mut primals_out = carry.to_vec();
    primals_out.extend(ys);
    let mut dots = carry_dot.iter().chain(ys_dot);
    let tangents_out = jvp
        .out_nonzeros
        .iter()
        .map(|&nz| if nz { Tangent::Nz(*dots.next().expect("a tangent output")) } else { Tangent::Zero })
        .collect();
    Ok((primals_out, tangents_out))
}

fn with_tangents(primals: &[Atom], tangents: &[Tangent]) -> Vec<Atom> {
    let mut args = primals.to_vec();
    args.extend(tangents.iter().filter_map(|t| match t {
        Tangent::Nz(a) => Some(*a),
        Tangent::Zero => None,
    }));
    args
}

/// Binds a call whose operands are the primals then the nonzero tangents, and whose
/// results are the primal outputs then the nonzero output tangents.
pub(crate) fn call_with_tangents(
    b: &mut Builder,
    prim: Primitive,
    primals: &[Atom],
    tangents: &[Tangent],
    out_nonzeros: &[bool],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let outs: Vec<Atom> = b.bind(prim, with_tangents(primals, tangents))?.into_iter().map(Atom::Var).collect();
    Ok(split_outs(&outs, out_nonzeros))
}

/// Splits `outs = primal outs ++ nonzero tangents` by `out_nonzeros`.
fn split_outs(outs: &[Atom], out_nonzeros: &[bool]) -> (Vec<Atom>, Vec<Tangent>) {
    let (p, t) = outs.split_at(out_nonzeros.len());
    let mut t = t.iter();
    let tangents = out_nonzeros
        .iter()
        .map(|&nz| if nz { Tangent::Nz(*t.next().expect("a tangent per nonzero")) } else { Tangent::Zero })
        .collect();
    (p.to_vec(), tangents)
}

/// Copies the equation itself onto the mapped primals (the primal half of a jvp rule),
/// with binders of the original avals.
pub(crate) fn emit_primal(b: &mut Builder, old: &Jaxpr, eqn: &Eqn, primals: &[Atom]) -> Vec<Atom> {
    b.copy_eqn_with(old, eqn, primals.to_vec()).into_iter().map(Atom::Var).collect()
}

/// The tangent as a value: zeros of `aval` when symbolically zero (`instantiate_zeros`
/// inside a jvp rule, which makes them on the primal side: see [`Builder::staged_zeros`]).
pub(crate) fn instantiate(b: &mut Builder, t: Tangent, aval: &Aval) -> Result<Atom, AdError> {
    match t {
        Tangent::Nz(a) => Ok(a),
        Tangent::Zero => b.staged_zeros(aval),
    }
}

/// `defjvp` / `defjvp2`: the primal, then `rule(input index, g, ans)` for each nonzero
/// input tangent, summed with `add_any`.
fn standard(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
    mut rule: impl FnMut(&mut Builder, usize, Atom, Atom) -> Result<Atom, AdError>,
) -> Result<JvpOut, AdError> {
    let out = emit_primal(b, old, eqn, primals);
    let ans = out[0];
    let mut acc: Option<Atom> = None;
    for (i, t) in tangents.iter().enumerate() {
        if let Tangent::Nz(g) = t {
            let r = rule(b, i, *g, ans)?;
            acc = Some(match acc {
                None => r,
                Some(a) => b.add_any(a, r)?,
            });
        }
    }
    Ok((out, vec![acc.map_or(Tangent::Zero, Tangent::Nz)]))
}

/// `defjvp_zero` (and the zero tangent of `stop_gradient`): the primal, zero tangents.
fn zero(b: &mut Builder, old: &Jaxpr, eqn: &Eqn, primals: &[Atom]) -> Result<JvpOut, AdError> {
    let out = emit_primal(b, old, eqn, primals);
    let n = out.len();
    Ok((out, vec![Tangent::Zero; n]))
}

/// `linear_jvp`: the primitive applied to the tangents, zeros instantiated.
fn linear(b: &mut Builder, old: &Jaxpr, eqn: &Eqn, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let out = emit_primal(b, old, eqn, primals);
    let mut ins = Vec::with_capacity(primals.len());
    for (p, t) in primals.iter().zip(tangents) {
        let aval = b.aval(p);
        ins.push(instantiate(b, *t, &aval)?);
    }
    let ts = b.bind(eqn.primitive.clone(), ins)?;
    let tangents = ts.into_iter().zip(&out).map(|(t, o)| tangent_if_float(b, t, o)).collect();
    Ok((out, tangents))
}

fn tangent_if_float(b: &Builder, t: remat_ir::Var, primal: &Atom) -> Tangent {
    if b.aval(primal).dtype.is_inexact() {
        Tangent::Nz(Atom::Var(t))
    } else {
        Tangent::Zero
    }
}

/// `custom_jvp_call` with a registered rule ([`crate::custom`]): the rule's jaxpr
/// `(primals, tangents) -> (outs, tangent outs)` is inlined on the call's operands after
/// its `num_consts` consts, zero tangents instantiated (`symbolic_zeros=False`), as JAX's
/// `process_custom_jvp_call` runs the rule. The primal outputs are the rule's.
pub(crate) fn jvp_custom_jvp_rule(
    b: &mut Builder,
    rule: &dyn crate::custom::CustomJvpRule,
    name: &str,
    num_consts: usize,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    let (primals, tangents) = (&primals[num_consts..], &tangents[num_consts..]);
    let avals: Vec<Aval> = primals.iter().map(|p| b.aval(p)).collect();
    let closed = rule.jvp_jaxpr(&avals).map_err(|m| AdError::Invalid(format!("custom_jvp_call `{name}`: {m}")))?;
    if !closed.consts.is_empty() {
        return Err(AdError::Invalid(format!(
            "custom_jvp_call `{name}`: its rule uses {} constant arrays; pass them as arguments",
            closed.consts.len()
        )));
    }
    let mut args = primals.to_vec();
    for (t, aval) in tangents.iter().zip(&avals) {
        args.push(instantiate(b, *t, aval)?);
    }
    let start = b.num_eqns();
    let outs = inline_jaxpr(b, &closed.jaxpr, &[], &args);
    give_rule_sources(b, start);
    let n = outs.len() / 2;
    Ok((outs[..n].to_vec(), outs[n..].iter().map(|&t| Tangent::Nz(t)).collect()))
}

/// `custom_vjp_call` with registered rules ([`crate::custom`]): `fwd` is inlined on the
/// primals (its residuals are values of the forward program), and the tangents go through
/// one linear `custom_lin` equation over the residuals and the instantiated tangents,
/// whose transpose runs `bwd` (JAX's `custom_lin`; see [`crate::custom::CUSTOM_LIN`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn jvp_custom_vjp_rule(
    b: &mut Builder,
    rule: &dyn crate::custom::CustomVjpRule,
    name: &str,
    fwd: &str,
    bwd: &str,
    num_consts: usize,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<(Vec<Atom>, Vec<Tangent>), AdError> {
    if num_consts != 0 {
        return Err(AdError::Invalid(format!(
            "custom_vjp_call `{name}`: the function uses {num_consts} values of its enclosing function; pass them as \
             arguments"
        )));
    }
    let avals: Vec<Aval> = primals.iter().map(|p| b.aval(p)).collect();
    let j = rule.vjp_jaxprs(&avals).map_err(|m| AdError::Invalid(format!("custom_vjp_call `{name}`: {m}")))?;
    if !j.fwd.consts.is_empty() || !j.bwd.consts.is_empty() {
        return Err(AdError::Invalid(format!(
            "custom_vjp_call `{name}`: its rules use constant arrays; pass them as arguments"
        )));
    }
    let start = b.num_eqns();
    let outs = inline_jaxpr(b, &j.fwd.jaxpr, &[], primals);
    give_rule_sources(b, start);
    let (outs, res) = outs.split_at(j.num_outs.min(outs.len()));
    let mut body = Builder::new();
    let mut args = Vec::new();
    for r in res {
        let aval = b.aval(r);
        body.invar(aval);
        args.push(*r);
    }
    // `process_custom_vjp_call` binds `custom_lin` on the tangent trace: zeros there are
    // never residuals.
    for (t, aval) in tangents.iter().zip(&avals) {
        body.invar(aval.clone());
        args.push(match t {
            Tangent::Nz(a) => *a,
            Tangent::Zero => b.zeros(aval)?,
        });
    }
    let mut nans = Vec::new();
    for o in outs {
        let aval = b.aval(o);
        nans.push(body.full(&aval, f64::NAN)?);
    }
    let lin = Primitive::CustomVjpCall {
        name: crate::custom::CUSTOM_LIN.to_string(),
        call_jaxpr: ClosedJaxpr::new(Arc::new(body.finish(nans))),
        fwd: fwd.to_string(),
        bwd: bwd.to_string(),
        num_consts: res.len(),
        symbolic_zeros: false,
    };
    let touts = b.bind(lin, args)?;
    Ok((outs.to_vec(), touts.into_iter().map(|v| Tangent::Nz(Atom::Var(v))).collect()))
}
