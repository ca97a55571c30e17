//! Scan's partial-evaluation rule (JAX's `_scan_partial_eval` and
//! `_scan_partial_eval_custom`): a fixpoint over unknown carries; residuals stacked as extra
//! outputs of the known scan, loop-invariant ones hoisted out of it, and (at the top of a
//! linearization) residuals that are scanned-over inputs forwarded. Inside a checkpoint the
//! hoisted part and the known scan are one `closed_call`, as JAX builds them. It reaches
//! the split under way only through `Pe`'s methods.

use std::sync::Arc;

use remat_ir::{Atom, ClosedJaxpr, Eqn, Jaxpr, Primitive, Var};

use super::state::Pe;
use super::{partial_eval_jaxpr_custom, PeMode};
use crate::builder::{inline_jaxpr, Builder};
use crate::scan::ScanParams;
use crate::AdError;

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
    let linearize = pe.mode().is_linearize();
    let (nc, ncarry, nys) = (p.num_consts, p.num_carry, p.num_ys());
    let n_in = eqn.invars.len();
    let unks: Vec<bool> = eqn.invars.iter().map(|a| pe.is_unknown(a)).collect();
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
            partial_eval_jaxpr_custom(&p.body.jaxpr, &unknowns, &in_inst, &ensure_unk, &ensure_inst, pe.mode())?;
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
    let known_ins: Vec<Atom> = pe.known_values(&eqn.invars, &unknowns)?;
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
    // hp.known's outputs: the hoisted residuals (known ones among the kept), then the
    // loop-invariant values the loop reads (its consts).
    let n_hoisted = hp.out_unknowns[num_known_outs..].iter().filter(|&&u| !u).count();
    // The loop: hp.staged takes (loop consts, known carries, known xs) and returns (known
    // outs, stacked residuals).
    let mut loop_body = hp.staged;
    let loop_outs_wanted: Vec<bool> =
        (0..hp.out_unknowns.len()).filter(|&i| hp.out_inst[i]).map(|i| hp.out_unknowns[i]).collect();
    loop_body.outvars = loop_body.outvars.iter().zip(&loop_outs_wanted).filter(|(_, &w)| w).map(|(a, _)| *a).collect();
    let n_loop_consts = hp.known.outvars.len() - n_hoisted;
    let loop_prim = p.prim(loop_body, Vec::new(), n_loop_consts, ncarry_k, p.reverse);
    // The known half: at the top of a linearization (`_scan_partial_eval`) the hoisted
    // equations and the known scan are inlined; inside a checkpoint
    // (`_scan_partial_eval_custom`) they are one `closed_call` returning (hoisted
    // residuals, known outs, stacked residuals), so the saved residuals are its outputs.
    let known_outs: Vec<Atom> = if linearize {
        let hoisted_vals = pe.inline_known(&hp.known, &known_ins[..nck]);
        let (hoisted, loop_consts) = hoisted_vals.split_at(n_hoisted);
        let mut loop_ops: Vec<Atom> = loop_consts.to_vec();
        loop_ops.extend(&known_ins[nck..]);
        let mut outs = hoisted.to_vec();
        outs.extend(pe.emit_known(loop_prim, loop_ops, eqn.source.clone())?);
        outs
    } else {
        let call = known_call(pe, &hp.known, n_hoisted, loop_prim, &known_ins, nck, eqn)?;
        pe.emit_known(call, known_ins.clone(), eqn.source.clone())?
    };
    let (hoisted, loop_outs) = known_outs.split_at(n_hoisted);
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
            ops.push(pe.residual(*a));
        }
    }
    let n_int = invars.len();
    invars.extend(&in_binders);
    for (i, a) in eqn.invars.iter().enumerate().filter(|&(i, _)| staged_in[i]) {
        // At the top of a linearization, a carry that is unknown but enters with a known
        // value is a tangent carry instantiated as zeros; JAX creates those zeros on the
        // tangent side (`_scan_linearize`'s `tangent_fun`), so they are not saved.
        let is_carry = (nc..nc + ncarry).contains(&i);
        if linearize && is_carry && !pe.is_unknown(a) && is_zeros(pe.old(), a) {
            let aval = pe.old().atom_aval(a);
            let z = pe.staged_zeros(&aval)?;
            ops.push(z);
        } else {
            let s = pe.ensure_instantiated(a)?;
            ops.push(s);
        }
    }
    for (r, s) in res_binders.iter().zip(&sources) {
        match s {
            ResSource::Xs(a) | ResSource::Stacked(a) => {
                invars.push(*r);
                ops.push(pe.residual(*a));
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
    let staged_results = pe.emit_staged(staged_prim, ops, eqn.source.clone())?;

    let mut primal_known = primal_known.iter();
    let mut staged_results = staged_results.into_iter();
    for (i, &v) in eqn.outvars.iter().enumerate() {
        let k = (!out_unknowns[i]).then(|| *primal_known.next().expect("a known scan output"));
        let s = staged_outs_flags[i].then(|| staged_results.next().expect("a staged scan output"));
        pe.write(v, k, s);
    }
    Ok(())
}

/// JAX's known `closed_call` of `_scan_partial_eval_custom`: on the known operands (consts
/// first), the hoisted part `hoist` on the consts, then the known scan `loop_prim` on the
/// loop-invariant values it returns after the `n_hoisted` residuals and the known carries
/// and xs; returns (hoisted residuals, the scan's outputs).
fn known_call(
    pe: &Pe<'_>,
    hoist: &Jaxpr,
    n_hoisted: usize,
    loop_prim: Primitive,
    known_ins: &[Atom],
    nck: usize,
    eqn: &Eqn,
) -> Result<Primitive, AdError> {
    let mut b = Builder::new();
    let ins: Vec<Atom> = known_ins.iter().map(|a| Atom::Var(b.invar(pe.known_aval(a)))).collect();
    let hoisted_vals = inline_jaxpr(&mut b, hoist, &[], &ins[..nck]);
    let (hoisted, loop_consts) = hoisted_vals.split_at(n_hoisted);
    let mut loop_ops: Vec<Atom> = loop_consts.to_vec();
    loop_ops.extend(&ins[nck..]);
    b.set_source(Some(eqn.source.clone()));
    let loop_outs = b.bind(loop_prim, loop_ops)?;
    let mut outs = hoisted.to_vec();
    outs.extend(loop_outs.into_iter().map(Atom::Var));
    Ok(Primitive::ClosedCall { call_jaxpr: ClosedJaxpr::new(Arc::new(b.finish(outs))) })
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
