//! `scan` under every transformation: jvp (a fixpoint over which carries have nonzero
//! tangents), dead code elimination (a fixpoint over used carries), partial evaluation
//! (a fixpoint over unknown carries; residuals stacked as extra outputs of the known scan,
//! loop-invariant ones hoisted out of it, residuals that are scanned-over inputs
//! forwarded) and transpose (a scan in the other direction).
//!
//! Operands are `consts ++ carries ++ xs`, results `carries ++ ys`; the body maps
//! `(consts, carries, x slices) -> (carries, y slices)` (see `remat_ir::shape_rule`).
//! Scan bodies are closed jaxprs; partial evaluation and transposition need them without
//! constvars (the tracer passes captured values as `num_consts` operands).

use std::sync::Arc;

use remat_ir::{Atom, Aval, ClosedJaxpr, Eqn, Jaxpr, Primitive, Var};

use crate::builder::{inline_jaxpr, Builder};
use crate::dce::{dce_jaxpr_inst, pruned};
use crate::jvp::{instantiate, jvp_jaxpr, Tangent};
use crate::partial_eval::{partial_eval_jaxpr_custom, Pe, PeMode};
use crate::transpose::{transpose_jaxpr_with, Operand};
use crate::AdError;

/// The parameters of a scan equation.
struct ScanParams<'a> {
    body: &'a ClosedJaxpr,
    length: usize,
    reverse: bool,
    num_consts: usize,
    num_carry: usize,
    unroll: usize,
}

impl ScanParams<'_> {
    fn of(eqn: &Eqn) -> Result<ScanParams<'_>, AdError> {
        let Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll } = &eqn.primitive else {
            return Err(AdError::Internal(format!("a scan rule on {}", eqn.primitive.name())));
        };
        Ok(ScanParams {
            body: jaxpr,
            length: *length,
            reverse: *reverse,
            num_consts: *num_consts,
            num_carry: *num_carry,
            unroll: *unroll,
        })
    }

    fn num_ys(&self) -> usize {
        self.body.jaxpr.outvars.len() - self.num_carry
    }

    fn prim(
        &self,
        body: Jaxpr,
        consts: Vec<remat_ir::Array>,
        num_consts: usize,
        num_carry: usize,
        reverse: bool,
    ) -> Primitive {
        Primitive::Scan {
            jaxpr: ClosedJaxpr { jaxpr: Arc::new(body), consts },
            length: self.length,
            reverse,
            num_consts,
            num_carry,
            unroll: self.unroll,
        }
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

    // Operands: tangents of carries that became nonzero are instantiated.
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
            ops.push(instantiate(b, tangents[nc + i], &aval)?);
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

/// `_scan_dce_rule`: prune the body's outputs and inputs, keeping a carry when either its
/// output or its input is used (a fixpoint).
pub(crate) fn scan_dce(eqn: &Eqn, used_outs: &[bool]) -> Result<(Eqn, Vec<bool>), AdError> {
    let p = ScanParams::of(eqn)?;
    let (nc, ncarry) = (p.num_consts, p.num_carry);
    let nxs = p.body.jaxpr.invars.len() - nc - ncarry;
    let mut used_carry_out = used_outs[..ncarry].to_vec();
    let used_ys = &used_outs[ncarry..];
    for _ in 0..=ncarry {
        let mut used_outputs = used_carry_out.clone();
        used_outputs.extend(used_ys);
        let mut inst = vec![false; nc];
        inst.extend(&used_carry_out);
        inst.extend(vec![false; nxs]);
        let (body, used_inputs) = dce_jaxpr_inst(&p.body.jaxpr, &used_outputs, &inst)?;
        let used_carry_in = &used_inputs[nc..nc + ncarry];
        if used_carry_in == used_carry_out.as_slice() {
            let num_consts = used_inputs[..nc].iter().filter(|&&u| u).count();
            let num_carry = used_carry_out.iter().filter(|&&u| u).count();
            let prim = p.prim(body, p.body.consts.clone(), num_consts, num_carry, p.reverse);
            return Ok((pruned(eqn, prim, &used_inputs, &used_outputs), used_inputs));
        }
        used_carry_out = used_carry_out.iter().zip(used_carry_in).map(|(a, b)| *a || *b).collect();
    }
    Err(AdError::Internal("scan dce: carry fixpoint not reached".into()))
}

/// Where a residual of the scan body comes from, as the staged scan receives it.
enum ResSource {
    /// Loop-invariant: computed before the loop, passed as a const.
    Hoisted(Atom),
    /// A scanned-over input of the scan: passed as it is.
    Xs(Atom),
    /// Stacked as an extra output of the known scan.
    Stacked(Atom),
}

/// Scan's partial-evaluation rule, in both modes. At the top of a linearization
/// (`_scan_partial_eval`/`_scan_linearize`) the staged scan takes only the residuals and
/// the unknown operands; inside a checkpoint (`_scan_partial_eval_custom`) it takes every
/// operand and recomputes what the policy does not save. Either way residuals become
/// stacked outputs of the known scan, except loop-invariant ones (hoisted before it) and,
/// at the top, scanned-over inputs (forwarded).
pub(crate) fn scan_partial_eval(pe: &mut Pe<'_>, eqn: &Eqn) -> Result<(), AdError> {
    let p = ScanParams::of(eqn)?;
    if !p.body.jaxpr.constvars.is_empty() {
        return Err(AdError::Unsupported {
            primitive: "scan",
            message: "partial evaluation of a scan whose body has constvars (pass them as consts)".into(),
        });
    }
    let linearize = matches!(pe.mode, PeMode::Linearize);
    let (nc, ncarry, nys) = (p.num_consts, p.num_carry, p.num_ys());
    let n_in = eqn.invars.len();
    let unks: Vec<bool> = eqn.invars.iter().map(|a| pe.read(a).0).collect();
    let (const_uk, rest) = unks.split_at(nc);
    let (init_uk, xs_uk) = rest.split_at(ncarry);
    let mut carry_uk = init_uk.to_vec();
    let mut converged = None;
    for _ in 0..=ncarry {
        let unknowns: Vec<bool> = const_uk.iter().chain(&carry_uk).chain(xs_uk).copied().collect();
        let mut ensure_unk = carry_uk.clone();
        ensure_unk.extend(vec![false; nys]);
        let (in_inst, ensure_inst) = if linearize {
            (unknowns.clone(), ensure_unk.clone())
        } else {
            (vec![true; n_in], vec![true; ncarry + nys])
        };
        let body_pe =
            partial_eval_jaxpr_custom(&p.body.jaxpr, &unknowns, &in_inst, &ensure_unk, &ensure_inst, pe.mode)?;
        let carry_uk_out = &body_pe.out_unknowns[..ncarry];
        if carry_uk_out == carry_uk.as_slice() {
            converged = Some((unknowns, body_pe));
            break;
        }
        carry_uk = carry_uk.iter().zip(carry_uk_out).map(|(a, b)| *a || *b).collect();
    }
    let (unknowns, body_pe) =
        converged.ok_or_else(|| AdError::Internal("scan partial eval: carry fixpoint not reached".into()))?;
    let num_res = body_pe.num_res;
    let out_unknowns = body_pe.out_unknowns.clone();
    let num_known_outs = out_unknowns.iter().filter(|&&u| !u).count();
    let known_ins: Vec<Atom> =
        eqn.invars.iter().zip(&unknowns).filter(|(_, &u)| !u).map(|(a, _)| pe.kmap.get(a)).collect();
    let nck = const_uk.iter().filter(|&&u| !u).count();
    let ncarry_k = carry_uk.iter().filter(|&&u| !u).count();

    // Residuals that are scanned-over inputs of the known body are forwarded (top only).
    let mut known_body = body_pe.known.clone();
    let res_outs: Vec<Atom> = known_body.outvars[num_known_outs..].to_vec();
    let xs_fwd: Vec<Option<Atom>> = res_outs
        .iter()
        .map(|r| {
            if !linearize {
                return None;
            }
            let pos = known_body.invars.iter().position(|&v| Atom::Var(v) == *r)?;
            (pos >= nck + ncarry_k).then(|| known_ins[pos])
        })
        .collect();
    let mut outs: Vec<Atom> = known_body.outvars[..num_known_outs].to_vec();
    outs.extend(res_outs.iter().zip(&xs_fwd).filter(|(_, f)| f.is_none()).map(|(r, _)| *r));
    known_body.outvars = outs;
    let n_kept = res_outs.len() - xs_fwd.iter().filter(|f| f.is_some()).count();

    // Hoist what depends only on the known consts out of the loop.
    let n_kin = known_body.invars.len();
    let hoist_unk: Vec<bool> = (0..n_kin).map(|i| i >= nck).collect();
    let mut ensure = vec![true; num_known_outs];
    ensure.extend(vec![false; n_kept]);
    let hp = partial_eval_jaxpr_custom(&known_body, &hoist_unk, &hoist_unk, &ensure, &ensure, PeMode::Linearize)?;
    let hoisted_vals = {
        let saved = pe.kb.set_source(Some(eqn.source.clone()));
        let vals = inline_jaxpr(&mut pe.kb, &hp.known, &[], &known_ins[..nck]);
        pe.kb.set_source(saved);
        vals
    };
    // hp.known's outputs: the hoisted residuals (known ones among the kept), then the
    // loop-invariant values the loop reads (its consts).
    let n_hoisted = hp.out_unknowns[num_known_outs..].iter().filter(|&&u| !u).count();
    let (hoisted, loop_consts) = hoisted_vals.split_at(n_hoisted);
    // The loop: hp.staged takes (loop consts, known carries, known xs) and returns (known
    // outs, stacked residuals).
    let mut loop_body = hp.staged;
    let loop_outs_wanted: Vec<bool> =
        (0..hp.out_unknowns.len()).filter(|&i| hp.out_inst[i]).map(|i| hp.out_unknowns[i]).collect();
    loop_body.outvars = loop_body.outvars.iter().zip(&loop_outs_wanted).filter(|(_, &w)| w).map(|(a, _)| *a).collect();
    let mut loop_ops: Vec<Atom> = loop_consts.to_vec();
    loop_ops.extend(&known_ins[nck..]);
    let loop_prim = p.prim(loop_body, Vec::new(), loop_consts.len(), ncarry_k, p.reverse);
    let saved = pe.kb.set_source(Some(eqn.source.clone()));
    let loop_outs: Vec<Atom> = pe.kb.bind(loop_prim, loop_ops)?.into_iter().map(Atom::Var).collect();
    pe.kb.set_source(saved);
    let (primal_known, stacked) = loop_outs.split_at(num_known_outs);

    // Every residual's source, in the body's residual order.
    let mut hoisted = hoisted.iter();
    let mut stacked = stacked.iter();
    let mut kept_index = 0;
    let sources: Vec<ResSource> = xs_fwd
        .iter()
        .map(|f| match f {
            Some(a) => ResSource::Xs(*a),
            None => {
                let known = !hp.out_unknowns[num_known_outs + kept_index];
                kept_index += 1;
                if known {
                    ResSource::Hoisted(*hoisted.next().expect("a hoisted residual"))
                } else {
                    ResSource::Stacked(*stacked.next().expect("a stacked residual"))
                }
            }
        })
        .collect();

    // The staged scan: [intensive residuals, consts, carries, xs, extensive residuals].
    let mut staged = body_pe.staged;
    let (res_binders, in_binders) = staged.invars.split_at(num_res);
    let (res_binders, in_binders) = (res_binders.to_vec(), in_binders.to_vec());
    let staged_in: Vec<bool> = if linearize { unknowns.clone() } else { vec![true; n_in] };
    let (sc, scarry) =
        (staged_in[..nc].iter().filter(|&&x| x).count(), staged_in[nc..nc + ncarry].iter().filter(|&&x| x).count());
    let mut invars: Vec<Var> = Vec::new();
    let mut ops: Vec<Atom> = Vec::new();
    for (r, s) in res_binders.iter().zip(&sources) {
        if let ResSource::Hoisted(a) = s {
            invars.push(*r);
            ops.push(pe.known_to_staged(*a));
        }
    }
    let n_int = invars.len();
    invars.extend(&in_binders);
    for (i, a) in eqn.invars.iter().enumerate().filter(|&(i, _)| staged_in[i]) {
        // At the top of a linearization, a carry that is unknown but enters with a known
        // value is a tangent carry instantiated as zeros; JAX creates those zeros on the
        // tangent side (`_scan_linearize`'s `tangent_fun`), so they are not saved.
        let is_carry = (nc..nc + ncarry).contains(&i);
        if linearize && is_carry && !pe.read(a).0 && is_zeros(pe.old, a) {
            let aval = pe.old.atom_aval(a);
            let z = pe.sb.zeros(&aval)?;
            ops.push(z);
        } else {
            let s = pe.staged_read(a);
            ops.push(s);
        }
    }
    for (r, s) in res_binders.iter().zip(&sources) {
        match s {
            ResSource::Xs(a) | ResSource::Stacked(a) => {
                invars.push(*r);
                ops.push(pe.known_to_staged(*a));
            }
            ResSource::Hoisted(_) => {}
        }
    }
    staged.invars = invars;
    // At the top, the staged scan returns exactly the unknown outputs.
    let staged_outs_flags: Vec<bool> = if linearize { out_unknowns.clone() } else { body_pe.out_inst.clone() };
    if linearize {
        let inst_idx: Vec<usize> = (0..ncarry + nys).filter(|&i| body_pe.out_inst[i]).collect();
        staged.outvars =
            staged.outvars.iter().zip(&inst_idx).filter(|(_, &i)| out_unknowns[i]).map(|(a, _)| *a).collect();
    }
    let staged_prim = p.prim(staged, Vec::new(), n_int + sc, scarry, p.reverse);
    let saved = pe.sb.set_source(Some(eqn.source.clone()));
    let staged_results = pe.sb.bind(staged_prim, ops)?;
    pe.sb.set_source(saved);

    let mut primal_known = primal_known.iter();
    let mut staged_results = staged_results.into_iter();
    for (i, &v) in eqn.outvars.iter().enumerate() {
        if !out_unknowns[i] {
            let k = *primal_known.next().expect("a known scan output");
            pe.kmap.set(v, k);
        }
        if staged_outs_flags[i] {
            let s = staged_results.next().expect("a staged scan output");
            pe.smap.set(v, Atom::Var(s));
        }
        pe.env[v.index()] = (out_unknowns[i], staged_outs_flags[i]);
    }
    Ok(())
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
    crate::check("scan transpose (body)", &tbody)?;

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

/// Whether `a` is a literal zero or a `broadcast_in_dim` of one (instantiated zeros).
fn is_zeros(jaxpr: &Jaxpr, a: &Atom) -> bool {
    let zero_lit = |a: &Atom| matches!(a, Atom::Lit(l) if l.value.as_f64() == 0.0);
    match a {
        Atom::Lit(_) => zero_lit(a),
        Atom::Var(v) => jaxpr.eqns.iter().any(|e| {
            e.outvars.contains(v)
                && matches!(e.primitive, Primitive::BroadcastInDim { .. })
                && e.invars.first().is_some_and(zero_lit)
        }),
    }
}
