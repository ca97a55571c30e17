//! Reverse mode on linear jaxprs: `transpose_jaxpr(jaxpr, linear_inputs)` (JAX's
//! `backward_pass`).
//!
//! ```text
//! jaxpr      : (ins)                                  -> (outs)        linear in the linear ins
//! transposed : (non-linear ins, cotangents of outs)   -> (cotangents of the linear ins)
//! ```
//!
//! Equations that read no linear value are evaluated forward first, in order (this is
//! how a staged `remat2` or a recomputing checkpoint body recomputes its primal values);
//! the linear equations are then transposed in reverse order, each by its primitive's
//! rule (`transpose/rules.rs`; calls' and `scan`'s rules are here and `cond`'s is
//! `transpose/cond.rs`, since they recurse into the driver; `custom_lin`'s, which inlines
//! the user's `bwd`, is `transpose/custom_lin.rs`). Cotangents are symbolic: a missing
//! cotangent is zero and is never materialized unless a result asks for it; several
//! contributions to one variable are summed with `add_any`.

mod cond;
mod custom_lin;
mod indexing;
mod rules;
mod window;

use std::sync::Arc;

use remat_ir::{AllReduceOp, Atom, Aval, Eqn, Jaxpr, Primitive};

use crate::builder::{inline_jaxpr, Builder, VarMap};
use crate::call::Call;
use crate::dce::dce_jaxpr_inst;
use crate::partial_eval::{partial_eval_jaxpr_custom, PeMode};
use crate::scan::ScanParams;
use crate::{check, AdError};

/// A transposed jaxpr and which linear inputs got a nonzero cotangent.
#[derive(Clone, Debug)]
pub struct Transposed {
    pub jaxpr: Jaxpr,
    /// Per linear input: whether the transposed jaxpr returns its cotangent (always true
    /// when zeros were instantiated).
    pub in_ct_nonzero: Vec<bool>,
}

/// Transposes `jaxpr` with respect to the invars marked in `linear_inputs`. The result
/// takes the non-linear invars, then one cotangent per outvar, and returns one cotangent
/// per linear invar (zeros where nothing flows back).
pub fn transpose_jaxpr(jaxpr: &Jaxpr, linear_inputs: &[bool]) -> Result<Transposed, AdError> {
    transpose_jaxpr_with(jaxpr, linear_inputs, &vec![true; jaxpr.outvars.len()], true)
}

/// [`transpose_jaxpr`] with symbolic zeros at both ends: only outvars marked in
/// `out_ct_nonzero` get a cotangent input, and without `instantiate` only the nonzero
/// input cotangents are returned.
pub(crate) fn transpose_jaxpr_with(
    jaxpr: &Jaxpr,
    linear_inputs: &[bool],
    out_ct_nonzero: &[bool],
    instantiate: bool,
) -> Result<Transposed, AdError> {
    if linear_inputs.len() != jaxpr.invars.len() || out_ct_nonzero.len() != jaxpr.outvars.len() {
        return Err(AdError::Invalid("transpose_jaxpr: flag counts do not match the jaxpr".into()));
    }
    let mut b = Builder::new();
    let mut fwd = VarMap::new(jaxpr);
    let mut linear = vec![false; jaxpr.vars.len()];
    for &c in &jaxpr.constvars {
        let nc = b.constvar(jaxpr.aval(c).clone());
        fwd.set(c, nc);
    }
    for (&v, &lin) in jaxpr.invars.iter().zip(linear_inputs) {
        if lin {
            linear[v.index()] = true;
        } else {
            let nv = b.invar(jaxpr.aval(v).clone());
            fwd.set(v, nv);
        }
    }
    let mut cts = Cts { slots: vec![None; jaxpr.vars.len()] };
    let mut out_cts = Vec::new();
    for (out, &nz) in jaxpr.outvars.iter().zip(out_ct_nonzero) {
        if nz {
            let ct = b.invar(jaxpr.atom_aval(out));
            out_cts.push((out, ct));
        }
    }

    // Forward: the non-linear equations, in order.
    let mut linear_eqns: Vec<&Eqn> = Vec::new();
    for eqn in &jaxpr.eqns {
        let is_linear = eqn.invars.iter().any(|a| matches!(a, Atom::Var(v) if linear[v.index()]));
        if is_linear {
            for v in &eqn.outvars {
                linear[v.index()] = true;
            }
            linear_eqns.push(eqn);
        } else {
            b.copy_eqn(jaxpr, eqn, &mut fwd);
        }
    }
    for (out, ct) in out_cts {
        if let Atom::Var(v) = out {
            if linear[v.index()] {
                cts.add(&mut b, *v, Atom::Var(ct))?;
            }
        }
    }

    // Backward: the linear equations, in reverse.
    for eqn in linear_eqns.into_iter().rev() {
        let ct_outs: Vec<Option<Atom>> = eqn.outvars.iter().map(|v| cts.slots[v.index()].take()).collect();
        if ct_outs.iter().all(Option::is_none) {
            continue;
        }
        let ins: Vec<Operand> = eqn
            .invars
            .iter()
            .map(|a| match a {
                Atom::Var(v) if linear[v.index()] => Operand::Linear(jaxpr.aval(*v).clone()),
                _ => Operand::Value(fwd.get(a)),
            })
            .collect();
        let saved = b.set_source(Some(eqn.source.clone()));
        let in_cts = rules::transpose_rule(&mut b, eqn, &ins, &ct_outs)?;
        b.set_source(saved);
        for (a, ct) in eqn.invars.iter().zip(in_cts) {
            if let (Atom::Var(v), Some(ct)) = (a, ct) {
                if linear[v.index()] {
                    cts.add(&mut b, *v, ct)?;
                }
            }
        }
    }

    let mut outvars = Vec::new();
    let mut in_ct_nonzero = Vec::new();
    for (&v, &lin) in jaxpr.invars.iter().zip(linear_inputs) {
        if !lin {
            continue;
        }
        match cts.slots[v.index()].take() {
            Some(ct) => {
                outvars.push(ct);
                in_ct_nonzero.push(true);
            }
            None if instantiate => {
                let z = b.zeros(jaxpr.aval(v))?;
                outvars.push(z);
                in_ct_nonzero.push(true);
            }
            None => in_ct_nonzero.push(false),
        }
    }
    let out = b.finish(outvars);
    check("transpose_jaxpr", &out)?;
    Ok(Transposed { jaxpr: out, in_ct_nonzero })
}

/// An operand of a linear equation as its transpose rule sees it: a forward value, or a
/// linear input whose cotangent the rule computes (JAX's `UndefinedPrimal`).
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    Value(Atom),
    Linear(Aval),
}

impl Operand {
    pub fn is_linear(&self) -> bool {
        matches!(self, Operand::Linear(_))
    }
}

/// Accumulated cotangents, summed with `add_any`.
struct Cts {
    slots: Vec<Option<Atom>>,
}

impl Cts {
    fn add(&mut self, b: &mut Builder, v: remat_ir::Var, ct: Atom) -> Result<(), AdError> {
        let slot = &mut self.slots[v.index()];
        *slot = Some(match slot.take() {
            None => ct,
            Some(prev) => b.add_any(prev, ct)?,
        });
        Ok(())
    }
}

/// The transpose of a call (`jit`, `remat2`): the same call of the transposed body, on
/// the non-linear operands and the nonzero output cotangents, returning the nonzero input
/// cotangents. A `remat2` body is first split (JAX's `remat_transpose`): its non-linear
/// part is recomputed inside the transposed `remat2` (the rematerialized computation),
/// then its linear part is transposed.
pub(crate) fn transpose_call(
    b: &mut Builder,
    eqn: &Eqn,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Vec<Option<Atom>>, AdError> {
    let linear: Vec<bool> = ins.iter().map(Operand::is_linear).collect();
    let out_nz: Vec<bool> = ct_outs.iter().map(Option::is_some).collect();
    let call = Call::of(&eqn.primitive)?;
    let (body, in_ct_nonzero) = match call {
        Call::Jit { closed, .. } | Call::Closed { closed } => {
            let t = transpose_jaxpr_with(&closed.jaxpr, &linear, &out_nz, false)?;
            (t.jaxpr, t.in_ct_nonzero)
        }
        Call::Remat { jaxpr, .. } => remat_transpose_body(jaxpr, &linear, &out_nz)?,
    };
    let mut args: Vec<Atom> = ins
        .iter()
        .filter_map(|o| match o {
            Operand::Value(a) => Some(*a),
            Operand::Linear(_) => None,
        })
        .collect();
    args.extend(ct_outs.iter().flatten().copied());
    let mut prim = call.with_body(body, None);
    // JAX's transposed `jit` lays out each input cotangent as its input was laid out (its
    // `out_shardings` are the primal's `in_shardings` of the linear operands).
    if let (Primitive::Jit { options, .. }, Primitive::Jit { options: t, .. }) = (&eqn.primitive, &mut prim) {
        let of_linear = remat_ir::JitOptions::shardings_where(&options.in_shardings, &linear, true);
        let shardings = remat_ir::JitOptions::shardings_where(&of_linear, &in_ct_nonzero, true);
        if shardings.iter().any(|s| !matches!(s, remat_ir::Sharding::Unspecified)) {
            t.out_shardings = shardings;
        }
    }
    let outs = b.bind(prim, args)?;
    let mut outs = outs.into_iter();
    let mut nz = in_ct_nonzero.into_iter();
    Ok(ins
        .iter()
        .map(|o| match o {
            Operand::Value(_) => None,
            Operand::Linear(_) => {
                if nz.next().unwrap_or(false) {
                    outs.next().map(Atom::Var)
                } else {
                    None
                }
            }
        })
        .collect())
}

/// `shard_map` (JAX's `_shard_map_transpose`): the body's transpose, once per device;
/// each nonzero output cotangent goes in with its output's spec, each input cotangent comes
/// out with its input's. Without `check_vma` the body's types do not say which values are
/// the same on every device, so (as JAX does) a cotangent that enters replicated over mesh
/// axes its spec does not name is divided by their size, and an input cotangent is summed
/// (`psum`) over the axes its input's spec does not name.
pub(crate) fn transpose_shard_map(
    b: &mut Builder,
    sm: &remat_ir::ShardMap,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Vec<Option<Atom>>, AdError> {
    let linear: Vec<bool> = ins.iter().map(Operand::is_linear).collect();
    let out_nz: Vec<bool> = ct_outs.iter().map(Option::is_some).collect();
    let t = transpose_jaxpr_with(&sm.jaxpr, &linear, &out_nz, false)?;
    let manual = sm.manual_mesh().axis_names();
    let unmentioned = |spec: &remat_ir::PartitionSpec| -> Vec<String> {
        let named = spec.all_axes();
        manual.iter().filter(|n| !named.contains(n)).cloned().collect()
    };
    let lin_specs: Vec<&remat_ir::PartitionSpec> = sm
        .in_specs
        .iter()
        .zip(&linear)
        .filter(|(_, &l)| l)
        .zip(&t.in_ct_nonzero)
        .filter(|(_, &nz)| nz)
        .map(|((s, _), _)| s)
        .collect();
    let body = if sm.check_vma {
        t.jaxpr
    } else {
        // The input cotangents summed over the axes their specs do not name.
        let mut tb = Builder::new();
        let args: Vec<Atom> = t.jaxpr.invars.iter().map(|&v| Atom::Var(tb.invar(t.jaxpr.aval(v).clone()))).collect();
        let outs = inline_jaxpr(&mut tb, &t.jaxpr, &[], &args);
        let mut summed = Vec::with_capacity(outs.len());
        for (o, spec) in outs.into_iter().zip(&lin_specs) {
            let axes = unmentioned(spec);
            summed.push(match axes.is_empty() {
                true => o,
                false => tb.bind1(Primitive::AllReduce { op: AllReduceOp::Psum, axes }, vec![o])?,
            });
        }
        tb.finish(summed)
    };
    let mut args: Vec<Atom> = ins
        .iter()
        .filter_map(|o| match o {
            Operand::Value(a) => Some(*a),
            Operand::Linear(_) => None,
        })
        .collect();
    let mut in_specs: Vec<remat_ir::PartitionSpec> =
        sm.in_specs.iter().zip(&linear).filter(|(_, &l)| !l).map(|(s, _)| s.clone()).collect();
    for (ct, spec) in ct_outs.iter().zip(&sm.out_specs) {
        let Some(ct) = ct else { continue };
        let k: usize = unmentioned(spec).iter().filter_map(|n| sm.mesh.axis(n)).map(|a| a.size).product();
        let ct = if sm.check_vma || k == 1 {
            *ct
        } else {
            let dtype = b.aval(ct).dtype;
            b.div(*ct, crate::builder::lit(dtype, k as f64))?
        };
        args.push(ct);
        in_specs.push(spec.clone());
    }
    let new = remat_ir::ShardMap {
        jaxpr: Arc::new(body),
        mesh: sm.mesh.clone(),
        in_specs,
        out_specs: lin_specs.into_iter().cloned().collect(),
        check_vma: sm.check_vma,
        manual_axes: sm.manual_axes.clone(),
    };
    let outs = b.bind(Primitive::ShardMap(Box::new(new)), args)?;
    let mut outs = outs.into_iter();
    let mut nz = t.in_ct_nonzero.into_iter();
    Ok(ins
        .iter()
        .map(|o| match o {
            Operand::Value(_) => None,
            Operand::Linear(_) => match nz.next().unwrap_or(false) {
                true => outs.next().map(Atom::Var),
                false => None,
            },
        })
        .collect())
}

/// The body of a transposed `remat2`: `(non-linear ins, nonzero cts) -> (nonzero in cts)`.
/// Partial evaluation (top-of-linearization style, JAX's `partial_eval_jaxpr_nounits`)
/// separates the recomputation from the linear part; the recomputation is inlined first,
/// then the linear part's transpose.
fn remat_transpose_body(body: &Jaxpr, linear: &[bool], out_nz: &[bool]) -> Result<(Jaxpr, Vec<bool>), AdError> {
    let n_out = body.outvars.len();
    let pe =
        partial_eval_jaxpr_custom(body, linear, linear, &vec![false; n_out], &vec![false; n_out], PeMode::Linearize)?;
    let mut tb = Builder::new();
    let nonlin: Vec<Atom> = body
        .invars
        .iter()
        .zip(linear)
        .filter(|(_, &l)| !l)
        .map(|(&v, _)| Atom::Var(tb.invar(body.aval(v).clone())))
        .collect();
    let cts: Vec<Option<Atom>> = body
        .outvars
        .iter()
        .zip(out_nz)
        .map(|(o, &nz)| if nz { Some(Atom::Var(tb.invar(body.atom_aval(o)))) } else { None })
        .collect();
    let known_outs = inline_jaxpr(&mut tb, &pe.known, &[], &nonlin);
    let res = &known_outs[known_outs.len() - pe.num_res..];
    // The staged half returns the unknown outputs; only their cotangents flow back.
    let staged_cts: Vec<Option<Atom>> =
        (0..n_out).filter(|&i| pe.out_inst[i]).map(|i| if pe.out_unknowns[i] { cts[i] } else { None }).collect();
    let n_lin = linear.iter().filter(|&&l| l).count();
    let mut lin_flags = vec![false; pe.num_res];
    lin_flags.extend(vec![true; n_lin]);
    let staged_nz: Vec<bool> = staged_cts.iter().map(Option::is_some).collect();
    let t = transpose_jaxpr_with(&pe.staged, &lin_flags, &staged_nz, false)?;
    let mut args = res.to_vec();
    args.extend(staged_cts.iter().flatten().copied());
    let in_cts = inline_jaxpr(&mut tb, &t.jaxpr, &[], &args);
    let out = tb.finish(in_cts);
    let n = out.invars.len();
    let (out, _) = dce_jaxpr_inst(&out, &vec![true; out.outvars.len()], &vec![true; n])?;
    check("remat transpose (body)", &out)?;
    Ok((out, t.in_ct_nonzero))
}

/// `_scan_transpose`: a scan in the other direction. Its consts are the non-linear consts;
/// its carries accumulate the cotangents of the linear consts and carry the carries'
/// cotangents; its xs are the ys' cotangents and the non-linear xs; it returns the
/// cotangents of the linear consts, the initial carries and the linear xs.
pub(crate) fn scan_transpose(
    b: &mut Builder,
    eqn: &Eqn,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Vec<Option<Atom>>, AdError> {
    let p = ScanParams::of(eqn)?;
    let (nc, ncarry, nys) = (p.num_consts, p.num_carry, p.num_ys());
    let body = &p.body.jaxpr;
    if !body.constvars.is_empty() {
        return Err(AdError::Unsupported {
            primitive: "scan",
            message: "transposing a scan whose body has constvars".into(),
        });
    }
    // A carry is linear when its operand is, or when the body makes it depend on a linear
    // value (a tangent carry that starts from known zeros); its operand's cotangent is
    // then dropped if the operand is a forward value.
    let mut lin: Vec<bool> = ins.iter().map(Operand::is_linear).collect();
    for _ in 0..=ncarry {
        let deps = depends_on(body, &lin);
        let mut changed = false;
        for i in 0..ncarry {
            if deps[i] && !lin[nc + i] {
                lin[nc + i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if lin[nc..nc + ncarry].iter().any(|&l| !l) {
        return Err(AdError::Unsupported {
            primitive: "scan",
            message: "cannot transpose a scan with a non-linear carry (partially evaluate it first)".into(),
        });
    }
    let value = |i: usize| match &ins[i] {
        Operand::Value(a) => Ok(*a),
        Operand::Linear(_) => Err(AdError::Internal("scan transpose: a linear operand has no value".into())),
    };
    let aval_of = |i: usize, b: &Builder| match &ins[i] {
        Operand::Value(a) => b.aval(a),
        Operand::Linear(av) => av.clone(),
    };
    let t = transpose_jaxpr_with(body, &lin, &vec![true; ncarry + nys], true)?;

    // The transposed body: (ires, acc consts, ct carries, ct ys, eres) ->
    // (acc consts + ct consts, ct carries in, ct xs).
    let ires: Vec<usize> = (0..nc).filter(|&i| !lin[i]).collect();
    let lin_consts: Vec<usize> = (0..nc).filter(|&i| lin[i]).collect();
    let xs_idx: Vec<usize> = (nc + ncarry..ins.len()).collect();
    let lin_xs: Vec<usize> = xs_idx.iter().copied().filter(|&i| lin[i]).collect();
    let eres: Vec<usize> = xs_idx.iter().copied().filter(|&i| !lin[i]).collect();
    let body_aval = |i: usize| body.aval(body.invars[i]).clone();
    let mut tb = Builder::new();
    let ires_v: Vec<Atom> = ires.iter().map(|&i| Atom::Var(tb.invar(body_aval(i)))).collect();
    let acc_v: Vec<Atom> = lin_consts.iter().map(|&i| Atom::Var(tb.invar(body_aval(i)))).collect();
    let ct_carry_v: Vec<Atom> = (0..ncarry).map(|i| Atom::Var(tb.invar(body.atom_aval(&body.outvars[i])))).collect();
    let ct_ys_v: Vec<Atom> = (0..nys).map(|i| Atom::Var(tb.invar(body.atom_aval(&body.outvars[ncarry + i])))).collect();
    let eres_v: Vec<Atom> = eres.iter().map(|&i| Atom::Var(tb.invar(body_aval(i)))).collect();
    // t's invars: the non-linear body invars in order (ires then eres), then the cts.
    let mut args: Vec<Atom> = ires_v.clone();
    args.extend(&eres_v);
    args.extend(&ct_carry_v);
    args.extend(&ct_ys_v);
    let cts = inline_jaxpr(&mut tb, &t.jaxpr, &[], &args);
    let (ct_consts, rest) = cts.split_at(lin_consts.len());
    let (ct_carry_in, ct_xs) = rest.split_at(ncarry);
    let mut outs = Vec::new();
    for (acc, ct) in acc_v.iter().zip(ct_consts) {
        outs.push(tb.add_any(*acc, *ct)?);
    }
    outs.extend(ct_carry_in);
    outs.extend(ct_xs);
    let tbody = tb.finish(outs);
    check("scan transpose (body)", &tbody)?;

    let mut ops: Vec<Atom> = ires.iter().map(|&i| value(i)).collect::<Result<_, _>>()?;
    for &i in &lin_consts {
        let z = b.zeros(&aval_of(i, b))?;
        ops.push(z);
    }
    for (i, ct) in ct_outs[..ncarry].iter().enumerate() {
        let aval = body.atom_aval(&body.outvars[i]);
        ops.push(match ct {
            Some(a) => *a,
            None => b.zeros(&aval)?,
        });
    }
    for (i, ct) in ct_outs[ncarry..].iter().enumerate() {
        let y = body.atom_aval(&body.outvars[ncarry + i]);
        let mut shape = vec![p.length];
        shape.extend(&y.shape);
        ops.push(match ct {
            Some(a) => *a,
            None => b.zeros(&Aval::new(y.dtype, shape))?,
        });
    }
    for &i in &eres {
        ops.push(value(i)?);
    }
    let prim = p.prim(tbody, Vec::new(), ires.len(), lin_consts.len() + ncarry, !p.reverse);
    let results = b.bind(prim, ops)?;
    let mut out: Vec<Option<Atom>> = vec![None; ins.len()];
    let mut r = results.into_iter().map(Atom::Var);
    for &i in &lin_consts {
        out[i] = r.next();
    }
    for (i, slot) in out.iter_mut().enumerate().skip(nc).take(ncarry) {
        let ct = r.next();
        *slot = if ins[i].is_linear() { ct } else { None };
    }
    for &i in &lin_xs {
        out[i] = r.next();
    }
    Ok(out)
}

/// Which outputs of `body` depend on the invars marked in `on`.
fn depends_on(body: &Jaxpr, on: &[bool]) -> Vec<bool> {
    let mut dep = vec![false; body.vars.len()];
    for (&v, &d) in body.invars.iter().zip(on) {
        dep[v.index()] = d;
    }
    for eqn in &body.eqns {
        if eqn.invars.iter().any(|a| matches!(a, Atom::Var(v) if dep[v.index()])) {
            for v in &eqn.outvars {
                dep[v.index()] = true;
            }
        }
    }
    body.outvars.iter().map(|a| matches!(a, Atom::Var(v) if dep[v.index()])).collect()
}
