//! The user-facing transformations: `linearize` = jvp + partial evaluation, `vjp` =
//! linearize + transpose, `grad` and `value_and_grad` on scalar-output jaxprs, and `jvp`.
//!
//! ```text
//! jaxpr   : (primals)                   -> (outs)
//! fwd     : (primals)                   -> (outs, residuals)       the known half
//! tangent : (residuals, tangents)       -> (out tangents)          the staged half, linear
//! bwd     : (residuals, cotangents)     -> (grads)                 its transpose
//! ```
//!
//! At the top of a linearization everything known may be saved (JAX's `LinearizeTrace`);
//! checkpoints inside apply their policies. Residuals are ordered as JAX prints them
//! (`saved_residuals`): constants, arguments in argument order, then equation outputs in
//! forward-program order.
//!
//! `saved_residuals`, `print_saved_residuals` and `fwd_bwd_strings` are here because they
//! run `vjp`; `residuals.rs` only describes the residuals of a forward jaxpr it is given.

use remat_ir::{pp_jaxpr, Atom, Aval, Jaxpr};

use crate::builder::{inline_jaxpr, lit, Builder};
use crate::dce::dce_jaxpr_inst;
use crate::jvp::{jvp_jaxpr, JvpJaxpr};
use crate::partial_eval::{partial_eval_jaxpr_custom, PartialEval, PeMode};
use crate::residuals::{describe_residuals, residual_order, residuals_text, Residual};
use crate::transpose::transpose_jaxpr_with;
use crate::{check, check_split, AdError};

/// A linearized jaxpr: the forward (known) half and the linear (staged) half.
#[derive(Clone, Debug)]
pub struct Linearized {
    /// `(primals) -> (outs, residuals)`.
    pub primal: Jaxpr,
    /// `(residuals, tangents of the float inputs) -> (nonzero out tangents)`.
    pub tangent: Jaxpr,
    pub num_res: usize,
    /// Which inputs have a tangent input (the float ones).
    pub in_nonzeros: Vec<bool>,
    /// Which outputs have a tangent output.
    pub out_nonzeros: Vec<bool>,
}

/// Linearizes `jaxpr` with respect to all its float inputs.
pub fn linearize(jaxpr: &Jaxpr) -> Result<Linearized, AdError> {
    let n_out = jaxpr.outvars.len();
    let in_nonzeros: Vec<bool> = jaxpr.invars.iter().map(|&v| jaxpr.aval(v).dtype.is_inexact()).collect();
    let jvp = jvp_jaxpr(jaxpr, &in_nonzeros, &vec![false; n_out])?;
    linearize_jvp(jaxpr, in_nonzeros, &jvp, PeMode::Linearize)
}

/// Linearizes `jaxpr` given its jvp `jvp` (with respect to the inputs `in_nonzeros`),
/// splitting it in `mode` (`Linearize`, or `LinearizeWith` a planner's policy).
pub(crate) fn linearize_jvp(
    jaxpr: &Jaxpr,
    in_nonzeros: Vec<bool>,
    jvp: &JvpJaxpr,
    mode: PeMode<'_>,
) -> Result<Linearized, AdError> {
    let n = jaxpr.invars.len();
    let n_out = jaxpr.outvars.len();
    let n_t = in_nonzeros.iter().filter(|&&x| x).count();
    let n_tout = jvp.out_nonzeros.iter().filter(|&&x| x).count();
    let mut unknowns = vec![false; n];
    unknowns.extend(vec![true; n_t]);
    let mut out_flags = vec![false; n_out];
    out_flags.extend(vec![true; n_tout]);
    let pe = partial_eval_jaxpr_custom(&jvp.jaxpr, &unknowns, &unknowns, &out_flags, &out_flags, mode)?;
    let pe = inline_literal_residuals(pe);
    if pe.out_unknowns[..n_out].iter().any(|&u| u) {
        // JAX's error: a primitive (the generic `reduce_window`'s jvp) computes primal and
        // tangent results in one equation.
        return Err(AdError::Invalid(
            "Linearization failed to produce known values for all output primals. This is typically caused by attempting to differentiate a function uses an operation that does not support reverse-mode autodiff.".into(),
        ));
    }
    // Dead code in both halves: the staged half keeps its tangent inputs; the known half
    // keeps its primal inputs and only the residuals the staged half reads.
    let mut inst = vec![false; pe.num_res];
    inst.extend(vec![true; n_t]);
    // The staged half returns every instantiated output: the tangents, and a primal output
    // that is a literal (available to both halves, as in JAX's `read`); only the tangents
    // stay.
    let staged_used: Vec<bool> =
        pe.out_inst.iter().enumerate().filter(|(_, &returned)| returned).map(|(i, _)| i >= n_out).collect();
    let (mut tangent, used) = dce_jaxpr_inst(&pe.staged, &staged_used, &inst)?;
    let mut used_known = vec![true; n_out];
    used_known.extend_from_slice(&used[..pe.num_res]);
    let (mut primal, _) = dce_jaxpr_inst(&pe.known, &used_known, &vec![true; n])?;
    let num_res = used[..pe.num_res].iter().filter(|&&u| u).count();

    // JAX's residual order, in both halves.
    let order = residual_order(&primal, n_out);
    let res_out: Vec<Atom> = primal.outvars[n_out..].to_vec();
    primal.outvars.truncate(n_out);
    primal.outvars.extend(order.iter().map(|&i| res_out[i]));
    let res_in = tangent.invars[..num_res].to_vec();
    let rest = tangent.invars[num_res..].to_vec();
    tangent.invars = order.iter().map(|&i| res_in[i]).chain(rest).collect();
    check("linearize (primal)", &primal)?;
    check("linearize (tangent)", &tangent)?;
    check_split("linearize", &primal, &tangent, num_res)?;
    Ok(Linearized { primal, tangent, num_res, in_nonzeros, out_nonzeros: jvp.out_nonzeros.clone() })
}

/// Puts the residuals that are literals (constants a jvp rule staged, which JAX lists as
/// `from a literal`) back into the staged half: a literal costs nothing to rebuild there,
/// so the top of a linearization saves none. Inside a `jit`, `scan` or `cond` such a
/// residual stays an output of the known call, where JAX returns it too.
fn inline_literal_residuals(mut pe: PartialEval) -> PartialEval {
    let n_known_outs = pe.known.outvars.len() - pe.num_res;
    let literals: Vec<(usize, Atom)> = (0..pe.num_res)
        .filter_map(|i| match pe.known.outvars[n_known_outs + i] {
            Atom::Lit(l) => Some((i, Atom::Lit(l))),
            Atom::Var(_) => None,
        })
        .collect();
    if literals.is_empty() {
        return pe;
    }
    let mut subst: Vec<Option<Atom>> = vec![None; pe.staged.vars.len()];
    for &(i, l) in &literals {
        subst[pe.staged.invars[i].index()] = Some(l);
    }
    let replace = |a: &mut Atom| {
        if let Atom::Var(v) = *a {
            if let Some(l) = subst[v.index()] {
                *a = l;
            }
        }
    };
    for eqn in &mut pe.staged.eqns {
        eqn.invars.iter_mut().for_each(replace);
    }
    pe.staged.outvars.iter_mut().for_each(replace);
    let dropped: Vec<usize> = literals.iter().map(|&(i, _)| i).collect();
    let keep = |i: &usize| !dropped.contains(i);
    pe.staged.invars =
        pe.staged.invars.iter().enumerate().filter(|(i, _)| i >= &pe.num_res || keep(i)).map(|(_, &v)| v).collect();
    pe.known.outvars = pe
        .known
        .outvars
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < n_known_outs || keep(&(i - n_known_outs)))
        .map(|(_, &a)| a)
        .collect();
    pe.num_res -= dropped.len();
    pe
}

/// The forward and backward halves of a reverse-mode derivative.
#[derive(Clone, Debug)]
pub struct Vjp {
    /// `(primals) -> (outs, residuals)`.
    pub fwd: Jaxpr,
    /// `(residuals, one cotangent per output) -> (one gradient per input)`.
    pub bwd: Jaxpr,
    pub num_outs: usize,
    /// What each residual is, in the order `fwd` returns them.
    pub residuals: Vec<Residual>,
}

impl Vjp {
    pub fn num_res(&self) -> usize {
        self.residuals.len()
    }
}

/// `jax.vjp` on a jaxpr: the forward half, the backward half and the residuals, described
/// with the argument names `arg_names` (JAX's `f'{param}{keystr(path)}'`).
pub fn vjp(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<Vjp, AdError> {
    vjp_of(jaxpr, linearize(jaxpr)?, arg_names)
}

/// The vjp of `jaxpr` from its linearization `lin`.
pub(crate) fn vjp_of(jaxpr: &Jaxpr, lin: Linearized, arg_names: &[String]) -> Result<Vjp, AdError> {
    let num_outs = jaxpr.outvars.len();
    let n_t = lin.tangent.invars.len() - lin.num_res;
    let n_tout = lin.tangent.outvars.len();
    let mut linear = vec![false; lin.num_res];
    linear.extend(vec![true; n_t]);
    let t = transpose_jaxpr_with(&lin.tangent, &linear, &vec![true; n_tout], true)?;

    // One cotangent per output (those of outputs without a tangent are unused) and one
    // gradient per input (zeros for those without a tangent).
    let mut b = Builder::new();
    let res: Vec<Atom> =
        lin.primal.outvars[num_outs..].iter().map(|a| Atom::Var(b.invar(lin.primal.atom_aval(a)))).collect();
    let cts: Vec<Atom> = jaxpr.outvars.iter().map(|a| Atom::Var(b.invar(jaxpr.atom_aval(a)))).collect();
    let mut args = res;
    args.extend(cts.iter().zip(&lin.out_nonzeros).filter(|(_, &nz)| nz).map(|(a, _)| *a));
    let in_cts = inline_jaxpr(&mut b, &t.jaxpr, &[], &args);
    let mut in_cts = in_cts.into_iter();
    let mut grads = Vec::new();
    for (&v, &nz) in jaxpr.invars.iter().zip(&lin.in_nonzeros) {
        if nz {
            grads.push(in_cts.next().ok_or_else(|| AdError::Internal("vjp: missing cotangent".into()))?);
        } else {
            grads.push(b.zeros(jaxpr.aval(v))?);
        }
    }
    let bwd = b.finish(grads);
    check("vjp (bwd)", &bwd)?;
    check_split("vjp", &lin.primal, &bwd, lin.num_res)?;
    let residuals = describe_residuals(&lin.primal, num_outs, arg_names);
    Ok(Vjp { fwd: lin.primal, bwd, num_outs, residuals })
}

/// A vjp as one program, forward half then backward half, as a value-and-grad program runs
/// them: `(primals, one cotangent per output) -> (outs, one gradient per input)`.
#[derive(Clone, Debug)]
pub struct VjpProgram {
    pub jaxpr: Jaxpr,
    /// Equations `0..num_fwd_eqns` are the forward half's (equation `i` is `vjp.fwd`'s
    /// equation `i`), the rest the backward half's (in `vjp.bwd`'s order).
    pub num_fwd_eqns: usize,
    /// Each residual of `vjp.residuals` as an atom of `jaxpr`.
    pub residuals: Vec<Atom>,
    pub vjp: Vjp,
}

/// The vjp of `jaxpr` as one program (see [`VjpProgram`]); nothing is pruned, so every
/// equation of either half is there, once.
pub fn vjp_program(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<VjpProgram, AdError> {
    vjp_program_of(vjp(jaxpr, arg_names)?)
}

/// A vjp made elsewhere (the memory planner's plan, `Checkpointed::vjp`) as one program,
/// as [`vjp_program`] assembles it; the cotangent inputs are the backward half's.
pub fn vjp_program_of(v: Vjp) -> Result<VjpProgram, AdError> {
    let mut b = Builder::new();
    let consts: Vec<Atom> = v.fwd.constvars.iter().map(|&c| Atom::Var(b.constvar(v.fwd.aval(c).clone()))).collect();
    let primals: Vec<Atom> = v.fwd.invars.iter().map(|&x| Atom::Var(b.invar(v.fwd.aval(x).clone()))).collect();
    let num_res =
        v.fwd.outvars.len().checked_sub(v.num_outs).filter(|&r| r <= v.bwd.invars.len()).ok_or_else(|| {
            AdError::Internal("vjp_program: the halves do not agree on the number of residuals".into())
        })?;
    let cts: Vec<Atom> = v.bwd.invars[num_res..].iter().map(|&x| Atom::Var(b.invar(v.bwd.aval(x).clone()))).collect();
    let fwd_outs = inline_jaxpr(&mut b, &v.fwd, &consts, &primals);
    let (outs, res) = fwd_outs.split_at(v.num_outs);
    let mut args = res.to_vec();
    args.extend(cts);
    let grads = inline_jaxpr(&mut b, &v.bwd, &[], &args);
    let residuals = res.to_vec();
    let mut result = outs.to_vec();
    result.extend(grads);
    let whole = b.finish(result);
    if whole.eqns.len() != v.fwd.eqns.len() + v.bwd.eqns.len() {
        return Err(AdError::Internal("vjp_program: the halves' equations were not copied one to one".into()));
    }
    check("vjp_program", &whole)?;
    Ok(VjpProgram { jaxpr: whole, num_fwd_eqns: v.fwd.eqns.len(), residuals, vjp: v })
}

/// `jax.ad_checkpoint.saved_residuals`: what the vjp of `jaxpr` saves, in JAX's order.
pub fn saved_residuals(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<Vec<Residual>, AdError> {
    Ok(vjp(jaxpr, arg_names)?.residuals)
}

/// `jax.ad_checkpoint.print_saved_residuals`, as a string (one line per residual).
pub fn print_saved_residuals(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<String, AdError> {
    Ok(residuals_text(&saved_residuals(jaxpr, arg_names)?))
}

/// The forward and backward jaxprs of the vjp of `jaxpr`, printed (`remat::side_by_side`
/// lays them out in two columns).
pub fn fwd_bwd_strings(jaxpr: &Jaxpr) -> Result<(String, String), AdError> {
    let v = vjp(jaxpr, &[])?;
    Ok((pp_jaxpr(&v.fwd), pp_jaxpr(&v.bwd)))
}

fn scalar_output(jaxpr: &Jaxpr) -> Result<Aval, AdError> {
    match jaxpr.outvars.as_slice() {
        [out] => {
            let aval = jaxpr.atom_aval(out);
            if aval.rank() == 0 && aval.dtype.is_inexact() {
                Ok(aval)
            } else {
                Err(AdError::Invalid(format!("grad requires a real scalar output, got {aval}")))
            }
        }
        outs => Err(AdError::Invalid(format!("grad requires exactly one output, got {}", outs.len()))),
    }
}

/// `jax.value_and_grad`: a jaxpr `(primals) -> (value, grads of the inputs in argnums)`.
pub fn value_and_grad(jaxpr: &Jaxpr, argnums: &[usize]) -> Result<Jaxpr, AdError> {
    grad_impl(jaxpr, argnums, true)
}

/// `jax.grad`: a jaxpr `(primals) -> (grads of the inputs in argnums)`.
pub fn grad(jaxpr: &Jaxpr, argnums: &[usize]) -> Result<Jaxpr, AdError> {
    grad_impl(jaxpr, argnums, false)
}

/// `grad`'s requirements: a real scalar output (its aval is returned) and real inputs
/// `argnums` in range.
pub(crate) fn check_grad_request(jaxpr: &Jaxpr, argnums: &[usize]) -> Result<Aval, AdError> {
    let out_aval = scalar_output(jaxpr)?;
    if let Some(&bad) = argnums.iter().find(|&&i| i >= jaxpr.invars.len()) {
        return Err(AdError::Invalid(format!("argnum {bad} is out of range for {} inputs", jaxpr.invars.len())));
    }
    for &i in argnums {
        let aval = jaxpr.aval(jaxpr.invars[i]);
        if !aval.dtype.is_inexact() {
            return Err(AdError::Invalid(format!("grad requires real-valued inputs; input {i} is {aval}")));
        }
    }
    Ok(out_aval)
}

/// `jax.value_and_grad(f, argnums)` as JAX records it into an enclosing trace (a training
/// step's gradient, `vmap(grad(f))`): `(primals) -> (value, grads of the inputs in
/// argnums)`. Only the inputs in `argnums` are differentiated (JAX sees the others, and
/// values the function closes over, as constants of the differentiation), and the value is
/// computed even when the caller wants only the gradient (`make_jaxpr(jax.grad(f))`
/// prints it as an unused `_` binder).
pub fn value_and_grad_in_trace(jaxpr: &Jaxpr, argnums: &[usize]) -> Result<Jaxpr, AdError> {
    Ok(value_and_grad_vjp(jaxpr, argnums, &[])?.1)
}

/// `jax.value_and_grad(f, argnums)` without an enclosing checkpoint, with its vjp: the
/// program `(primals) -> (value, grads of argnums)` and the split it runs (residuals
/// described with `arg_names`). Only `argnums` are differentiated, so a `remat2` of `f`
/// splits by its own policy against exactly the inputs whose gradient is asked for: what
/// the memory planner measures a function rewritten into checkpointed segments with.
pub fn value_and_grad_vjp(jaxpr: &Jaxpr, argnums: &[usize], arg_names: &[String]) -> Result<(Vjp, Jaxpr), AdError> {
    check_grad_request(jaxpr, argnums)?;
    let mut in_nonzeros = vec![false; jaxpr.invars.len()];
    for &i in argnums {
        in_nonzeros[i] = true;
    }
    let jvp = jvp_jaxpr(jaxpr, &in_nonzeros, &vec![false; jaxpr.outvars.len()])?;
    let lin = linearize_jvp(jaxpr, in_nonzeros, &jvp, PeMode::Linearize)?;
    let v = vjp_of(jaxpr, lin, arg_names)?;
    let program = whole_program(jaxpr, &v, argnums, true)?;
    Ok((v, program))
}

fn grad_impl(jaxpr: &Jaxpr, argnums: &[usize], with_value: bool) -> Result<Jaxpr, AdError> {
    check_grad_request(jaxpr, argnums)?;
    let v = vjp(jaxpr, &[])?;
    whole_program(jaxpr, &v, argnums, with_value)
}

/// The program `jax.value_and_grad` (or `jax.grad`) runs, from the vjp `v` of the
/// scalar-output `jaxpr`: the forward half, then the backward half on the cotangent `1.0`.
pub(crate) fn whole_program(jaxpr: &Jaxpr, v: &Vjp, argnums: &[usize], with_value: bool) -> Result<Jaxpr, AdError> {
    let out_aval = check_grad_request(jaxpr, argnums)?;
    let mut b = Builder::new();
    let primals: Vec<Atom> = jaxpr.invars.iter().map(|&x| Atom::Var(b.invar(jaxpr.aval(x).clone()))).collect();
    let consts: Vec<Atom> = jaxpr.constvars.iter().map(|&c| Atom::Var(b.constvar(jaxpr.aval(c).clone()))).collect();
    let fwd_outs = inline_jaxpr(&mut b, &v.fwd, &consts, &primals);
    let (outs, res) = fwd_outs.split_at(v.num_outs);
    let mut args = res.to_vec();
    args.push(lit(out_aval.dtype, 1.0));
    let grads = inline_jaxpr(&mut b, &v.bwd, &[], &args);
    let mut result = Vec::new();
    if with_value {
        result.push(outs[0]);
    }
    result.extend(argnums.iter().map(|&i| grads[i]));
    let out = b.finish(result);
    // Cotangents of inputs outside `argnums` are dropped, also inside checkpointed calls
    // (a `remat2`'s unused outputs and the work behind them), as JAX's partial evaluation
    // does; every primal input stays.
    let used = vec![true; out.outvars.len()];
    let (out, _) = crate::dce::dce_jaxpr(&out, &used, true)?;
    check("grad", &out)?;
    Ok(out)
}

/// `jax.jvp` on a jaxpr: `(primals, one tangent per input) -> (outs, one tangent per
/// output)`, zero tangents instantiated.
pub fn jvp(jaxpr: &Jaxpr) -> Result<JvpJaxpr, AdError> {
    jvp_jaxpr(jaxpr, &vec![true; jaxpr.invars.len()], &vec![true; jaxpr.outvars.len()])
}
