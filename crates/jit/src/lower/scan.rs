//! `scan` as a native loop.
//!
//! ```text
//! before:   carry[i] <- init[i]                      (one buffer per carry, the result's)
//! loop j:   counter <- j (or length-1-j)
//!           body(consts, carry, xs[counter]) -> (carry', y)
//!           ys[counter] <- y
//!           temp[i] <- carry'[i]   where carry'[i] reads a carry buffer
//!           carry[i] <- temp[i] or carry'[i]
//! after:    final carries are the carry buffers, ys the stacked buffers
//! ```
//!
//! The xs are read in place: the body sees `xs[counter]` as a view with a dynamic offset.
//! Every carry is rewritten only after all of the iteration's values are computed, so no
//! lazy expression of the body reads a carry buffer that has already changed.
//!
//! Products of an xs slice by a loop-invariant operand run before the loop as one GEMM, and
//! carries that only accumulate a product run theirs after it (`scan_hoist`).

use remat_ir::{Aval, BinaryOp, ClosedJaxpr, DType};

use super::scan_hoist::{map_views, whole, Deferred, LoopFacts};
use super::{Lowering, Val};
use crate::expr::{row_major_strides, DynTerm, Expr, View};
use crate::program::{BufId, Buffer, Step, Storage};
use crate::JitError;

pub(crate) struct ScanParams<'a> {
    pub body: &'a ClosedJaxpr,
    pub length: usize,
    pub reverse: bool,
    pub num_consts: usize,
    pub num_carry: usize,
}

impl Lowering {
    pub(crate) fn scan(
        &mut self,
        s: &ScanParams,
        ins: Vec<Val>,
        out_avals: &[Aval],
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let (nc, nk, length) = (s.num_consts, s.num_carry, s.length);
        let mut ins = ins.into_iter();
        // Loop-invariant operands are computed once, before the loop.
        let consts: Vec<Val> = ins.by_ref().take(nc).map(|c| self.materialize_if_computed(c)).collect();
        let init: Vec<Val> = ins.by_ref().take(nk).collect();
        let xs: Vec<Val> = ins.collect();

        let carry_bufs: Vec<BufId> =
            out_avals[..nk].iter().zip(targets).map(|(a, t)| t.unwrap_or_else(|| self.new_buf(a))).collect();
        for (v, &buf) in init.iter().zip(&carry_bufs) {
            self.write(v, buf);
        }
        let y_bufs: Vec<BufId> =
            out_avals[nk..].iter().zip(&targets[nk..]).map(|(a, t)| t.unwrap_or_else(|| self.new_buf(a))).collect();
        let results: Vec<Val> = carry_bufs
            .iter()
            .chain(&y_bufs)
            .zip(out_avals)
            .map(|(&buf, a)| Val { expr: Expr::Load(View::contiguous(buf, a.dtype, &a.shape)), aval: a.clone() })
            .collect();
        if length == 0 {
            // The carries are their initial values, and the stacked ys have no elements:
            // nothing to write (a fill of zeros would need a literal, which keys have not).
            return Ok(results);
        }

        let counter = self.new_buf(&Aval::scalar(DType::I32));
        let xs: Vec<Val> = xs.into_iter().map(|x| self.as_view(x).1).collect();
        let ((before, deferred, outs), body_steps) = self.scoped(|lw| {
            let carries: Vec<Val> = carry_bufs
                .iter()
                .zip(&out_avals[..nk])
                .map(|(&buf, a)| Val { expr: Expr::Load(View::contiguous(buf, a.dtype, &a.shape)), aval: a.clone() })
                .collect();
            let slices: Vec<Val> = xs
                .iter()
                .map(|x| {
                    let Expr::Load(v) = &x.expr else { unreachable!("as_view gives a load") };
                    let mut dynamic = v.dynamic.clone();
                    dynamic.push(DynTerm { index: counter, max: length as i64 - 1, stride: v.strides[0] });
                    let view = View { strides: v.strides[1..].to_vec(), dynamic, ..v.clone() };
                    let aval = Aval::new(x.aval.dtype, x.aval.shape[1..].to_vec());
                    Val { expr: Expr::Load(view), aval }
                })
                .collect();
            let args: Vec<Val> = consts.iter().cloned().chain(carries).chain(slices).collect();
            let body_consts = lw.add_consts(&s.body.consts);
            let mut outs = lw.lower_jaxpr(&s.body.jaxpr, body_consts, args, &[])?;
            let facts = LoopFacts { counter, length, carries: &carry_bufs, ys: &y_bufs };
            let mut in_place = vec![false; y_bufs.len()];
            let before = lw.hoist_products(&facts, &mut outs, nk, &mut in_place);
            lw.stack_in_place(&facts, &mut outs, nk, &mut in_place);
            let (carry_outs, ys) = outs.split_at(nk);
            for ((y, &buf), &done) in ys.iter().zip(&y_bufs).zip(&in_place) {
                if done || y.aval.size() == 0 {
                    continue;
                }
                let strides = row_major_strides(&[&[length][..], &y.aval.shape].concat());
                let dst = View {
                    buf,
                    dtype: y.aval.dtype,
                    offset: 0,
                    strides: strides[1..].to_vec(),
                    dynamic: vec![DynTerm { index: counter, max: length as i64 - 1, stride: strides[0] }],
                };
                lw.push_step(Step::Kernel { space: y.aval.shape.clone(), dst, src: y.expr.clone() });
            }
            let deferred: Vec<Deferred> = lw.defer_accumulations(&facts, &outs, nk);
            let in_loop = |c: &usize| !deferred.iter().any(|d| d.carry == *c);
            // Phase 1: new carries that read an old carry go to temporaries first, also
            // where the old carry is only a dynamic offset (`dynamic_slice(x, i)` with `i` a
            // carry that this iteration updates: written after `i`, it read the new `i`).
            let reads_carry = |e: &Expr| carry_bufs.iter().any(|&c| e.reads(c));
            // A new carry that one step of the body computes whole is computed in the
            // carry's own buffer, where nothing after that step reads the old carry.
            let computed_in_place: Vec<bool> =
                (0..nk).map(|i| in_loop(&i) && lw.compute_carry_in_place(carry_outs, &carry_bufs, i)).collect();
            let mut sources = Vec::with_capacity(nk);
            for (i, c) in carry_outs.iter().enumerate().filter(|(i, _)| in_loop(i) && !computed_in_place[*i]) {
                // A new carry that reads only its own old value, at the points it writes,
                // and that no other new carry reads, is updated in place.
                let own = reads_only_at_own_points(&c.expr, carry_bufs[i], &c.aval.shape, &carry_bufs)
                    && carry_outs.iter().enumerate().all(|(j, o)| j == i || !o.expr.reads(carry_bufs[i]));
                if reads_carry(&c.expr) && !own {
                    let buf = lw.new_buf(&c.aval);
                    sources.push((i, lw.materialize(c.clone(), Some(buf))));
                } else {
                    sources.push((i, c.clone()));
                }
            }
            // Phase 2: nothing reads the old carries any more.
            for (i, src) in &sources {
                lw.write(src, carry_bufs[*i]);
            }
            // What the loop leaves for after it: the deferred carries' values.
            let after: Vec<&Expr> = deferred.iter().map(|d| &outs[d.carry].expr).collect();
            lw.accumulate_reductions(&after);
            Ok((before, deferred, outs))
        })?;
        for step in before {
            self.push_step(step);
        }
        self.push_step(Step::Loop { length, reverse: s.reverse, counter, body: body_steps });
        // A deferred carry: its product over all steps at once, then `carry + product`.
        for Deferred { carry, product } in deferred {
            self.push_step(product);
            let sum = self.materialize(outs[carry].clone(), None);
            self.write(&sum, carry_bufs[carry]);
        }
        Ok(results)
    }

    /// If new carry `i` is the whole buffer `t` of one step of the body, a kernel or a
    /// product, and neither that step nor any after it reads the old carry (nor does any
    /// other new carry read `t` or the old carry), makes that step write the carry's buffer
    /// and every later reader read it there. True if it did: the carry needs no copy.
    fn compute_carry_in_place(&mut self, carry_outs: &[Val], carry_bufs: &[BufId], i: usize) -> bool {
        let (c, carry) = (&carry_outs[i], carry_bufs[i]);
        let Expr::Load(v) = &c.expr else { return false };
        let t = v.buf;
        let whole = v.offset == 0 && v.dynamic.is_empty() && v.is_row_major(&c.aval.shape);
        let arena = matches!(self.prog.buffers[t.0 as usize].storage, Storage::Arena { host: false });
        if !whole
            || !arena
            || carry_bufs.contains(&t)
            || self.prog.buffers[t.0 as usize].bytes != c.aval.size_in_bytes()
        {
            return false;
        }
        let steps = self.scopes.last().expect("a scan body's scope is open");
        let writers: Vec<usize> = (0..steps.len()).filter(|&j| steps[j].writes_to(t)).collect();
        let [w] = writers[..] else { return false };
        let dst_whole = match &steps[w] {
            Step::Kernel { space, dst, .. } => {
                dst.buf == t && dst.dynamic.is_empty() && dst.offset == 0 && dst.is_row_major(space)
            }
            Step::Dot { dst, .. } => dst.buf == t && dst.dynamic.is_empty() && dst.offset == 0,
            _ => false,
        };
        let readers_ok = steps.iter().enumerate().all(|(j, st)| {
            let t_ok = j == w
                || !st.touches(t)
                || (j > w
                    && matches!(
                        st,
                        Step::Kernel { .. } | Step::Reduce { .. } | Step::Argmax { .. } | Step::Dot { .. }
                    )
                    && !st.writes_to(t));
            t_ok && (j < w || !st.touches(carry))
        });
        let others_ok =
            carry_outs.iter().enumerate().all(|(j, o)| j == i || (!o.expr.reads(t) && !o.expr.reads(carry)));
        if !dst_whole || !readers_ok || !others_ok {
            return false;
        }
        // Every view of `t`, and every dynamic offset read from `t`, now reads the carry.
        let rename = |v: &View| {
            let mut v = v.clone();
            if v.buf == t {
                v.buf = carry;
            }
            v.dynamic.iter_mut().filter(|d| d.index == t).for_each(|d| d.index = carry);
            v
        };
        for st in self.scopes.last_mut().expect("a scan body's scope is open").iter_mut().skip(w) {
            map_views(st, &rename);
        }
        true
    }

    /// A carry updated in place by `carry + r` (or `r + carry`, for any reduction's
    /// combination), where `r` is the result of a reduction that no other step and none of
    /// the expressions `after` (evaluated after the loop) read, becomes that reduction
    /// accumulating into the carry: the reduction needs no buffer of its own (XLA's reduce
    /// fusion adds a bias gradient's row sum into its carry the same way). The combination
    /// is then grouped from the carry on, `((c + x0) + x1) ...` instead of
    /// `c + (x0 + x1 ...)`: a reassociation, as a split reduction makes.
    fn accumulate_reductions(&mut self, after: &[&Expr]) {
        let steps = self.scopes.last_mut().expect("a scan body's scope is open");
        let mut k = 0;
        while k < steps.len() {
            if let Some(j) = accumulating_reduction(steps, k, &self.prog.buffers, after) {
                let Step::Kernel { dst, .. } = steps.remove(k) else { unreachable!("checked a kernel") };
                if let Step::Reduce { dst: r, accumulate, .. } = &mut steps[j] {
                    (*r, *accumulate) = (dst.buf, true);
                }
                continue;
            }
            k += 1;
        }
    }

    pub(crate) fn materialize_if_computed(&mut self, v: Val) -> Val {
        if v.expr.is_trivial() {
            v
        } else {
            self.materialize(v, None)
        }
    }
}

/// If step `k` is a kernel `c = c op r` that [`Lowering::accumulate_reductions`] folds into
/// the reduction writing `r`, that reduction's position.
fn accumulating_reduction(steps: &[Step], k: usize, buffers: &[Buffer], after: &[&Expr]) -> Option<usize> {
    let Step::Kernel { space, dst, src: Expr::Binary(bin, dtype, a, b) } = &steps[k] else { return None };
    let c = dst.buf;
    if dst.offset != 0 || !dst.dynamic.is_empty() || !dst.is_row_major(space) {
        return None;
    }
    let other = if whole(a, c, space) {
        b
    } else if whole(b, c, space) {
        a
    } else {
        return None;
    };
    // `identity op r` (a reduction over unit axes of `r`) is `r`: `r` is a reduction's
    // result, which starts from the identity.
    let mut other: &Expr = other;
    let mut wrapped = Vec::new();
    while let Expr::Binary(op, _, lit, x) = other {
        let Expr::Lit(l) = &**lit else { return None };
        wrapped.push((*op, *l));
        other = x;
    }
    let Expr::Load(rv) = other else { return None };
    let r = rv.buf;
    if !whole(other, r, space) || !matches!(buffers[r.0 as usize].storage, Storage::Arena { host: false }) {
        return None;
    }
    let j = (0..k).rev().find(|&j| steps[j].touches(r))?;
    let Step::Reduce { op, space: rspace, axes, src, accumulate: false, .. } = &steps[j] else { return None };
    let kept: usize = rspace.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).product();
    // `add_any` is `add` on arrays.
    let combines = |o: &BinaryOp| super::reduce_binary(*op) == if *o == BinaryOp::AddAny { BinaryOp::Add } else { *o };
    let same_op =
        combines(bin) && wrapped.iter().all(|(o, l)| combines(o) && *l == super::reduce_identity(*op, *dtype));
    let alone = steps.iter().enumerate().all(|(i, s)| i == j || i == k || !s.touches(r))
        && after.iter().all(|e| !e.reads(r))
        && steps[j + 1..k].iter().all(|s| !s.touches(c))
        && !src.reads(c);
    (same_op
        && alone
        && src.dtype() == *dtype
        && dst.dtype == *dtype
        && kept == space.iter().product::<usize>()
        && buffers[c.0 as usize].bytes == buffers[r.0 as usize].bytes)
        .then_some(j)
}

/// Whether `e`, evaluated over `shape`, reads `carry` only whole and row-major (each point
/// its own element) and reads no other of `carries`: written over `carry` point by point,
/// each element is read before it is overwritten.
fn reads_only_at_own_points(e: &Expr, carry: BufId, shape: &[usize], carries: &[BufId]) -> bool {
    let mut ok = true;
    e.visit(&mut |n| {
        if let Expr::Load(v) = n {
            if v.buf == carry {
                ok &= v.offset == 0 && v.dynamic.is_empty() && v.is_row_major(shape);
            } else {
                ok &= !carries.contains(&v.buf);
            }
            ok &= !v.dynamic.iter().any(|d| carries.contains(&d.index));
        }
    });
    ok
}
