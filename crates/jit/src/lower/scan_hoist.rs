//! A scan's products moved out of its loop: `length` small GEMMs become one large one.
//!
//! ```text
//! hoisted:   loop j { p = xs[j] . c; ... }          ->  P = xs . c (rows merged); loop j { p = P[j]; ... }
//! deferred:  loop j { carry = carry + a_j . b_j }   ->  loop j { A[j] = a_j; B[j] = b_j }; carry = carry + A . B
//! ```
//!
//! - **Hoisted** (before the loop): a product of an xs slice (a buffer the loop does not
//!   write, read at `[counter]`) by a loop-invariant operand, whose rows are the slice's
//!   outermost elements, so that the steps' rows follow each other in memory, and which the
//!   body stacks unchanged as one of its ys (a residual, as `x_t . U` under `dots_saveable`):
//!   one product of `length * m` rows written in place into that ys buffer, which the body
//!   reads at `[counter]`. No buffer is added.
//! - **Deferred** (after the loop): a carry that only accumulates a product,
//!   `carry' = carry + a_j . b_j` with nothing else in the body reading the carry or the
//!   product, the product itself not reading the carry (the weight gradients of an RNN's
//!   backward scan; not a recurrence `c + c . w`), whose contracted axis is the
//!   operands' outermost: the operands are stacked over the steps (an xs slice is stacked
//!   already, a value the body stacks as a y is read from the ys buffer, anything else is
//!   copied into a stack where the product was), and one product contracting `length * k`
//!   runs after the loop, then `carry + sum` once.
//!
//! The sums are the same terms; only their order differs (a GEMM's blocking over the merged
//! axis instead of one step at a time). A product that does not match stays in the loop.

use std::collections::{HashMap, HashSet};

use remat_ir::{Aval, BinaryOp};

use super::{Lowering, Val};
use crate::expr::{DynTerm, Expr, View};
use crate::program::{BufId, Step, Storage};

/// What the rewrites need to know about the loop.
pub(super) struct LoopFacts<'a> {
    pub counter: BufId,
    pub length: usize,
    /// The carry buffers (rewritten at the end of each iteration).
    pub carries: &'a [BufId],
    /// The stacked ys buffers, one per y.
    pub ys: &'a [BufId],
}

/// A carry whose accumulation runs after the loop: its index and the product's step.
pub(super) struct Deferred {
    pub carry: usize,
    pub product: Step,
}

impl LoopFacts<'_> {
    /// The dynamic offset of element `[counter]` of a stack of slices of `stride` elements.
    fn term(&self, stride: i64) -> DynTerm {
        DynTerm { index: self.counter, max: self.length as i64 - 1, stride }
    }

    /// Whether the loop never writes `buf` (nor is it the counter or a carry).
    fn invariant(&self, buf: BufId, written: &HashSet<BufId>) -> bool {
        buf != self.counter && !self.carries.contains(&buf) && !written.contains(&buf)
    }

    /// If `v` reads `buf[counter]` of a buffer the loop does not write, the counter's stride.
    fn slice_stride(&self, v: &View, written: &HashSet<BufId>) -> Option<i64> {
        match v.dynamic.as_slice() {
            [d] if d.index == self.counter && d.stride > 0 && self.invariant(v.buf, written) => Some(d.stride),
            _ => None,
        }
    }

    /// If `v` reads `buf[counter]` of a buffer that holds every step's slice after the loop
    /// (one the loop does not write, or a ys stack), the counter's stride.
    fn stacked_stride(&self, v: &View, written: &HashSet<BufId>) -> Option<i64> {
        match v.dynamic.as_slice() {
            [d] if d.index == self.counter && d.stride > 0 && self.ys.contains(&v.buf) => Some(d.stride),
            _ => self.slice_stride(v, written),
        }
    }
}

/// The buffers `steps` write.
fn written(steps: &[Step]) -> HashSet<BufId> {
    let mut w = Vec::new();
    steps.iter().for_each(|s| s.writes(&mut w));
    w.into_iter().collect()
}

/// Whether `e` is the whole of `buf`, row-major over `shape`.
pub(super) fn whole(e: &Expr, buf: BufId, shape: &[usize]) -> bool {
    matches!(e, Expr::Load(v) if v.buf == buf && v.offset == 0 && v.dynamic.is_empty() && v.is_row_major(shape))
}

/// `v`, or if it reads `from`, the same view of slice `[counter]` of `to` (`term`).
fn restack(v: &View, from: BufId, to: BufId, term: &DynTerm) -> View {
    if v.buf != from {
        return v.clone();
    }
    let mut dynamic = v.dynamic.clone();
    dynamic.push(term.clone());
    View { buf: to, dynamic, ..v.clone() }
}

/// `step` with every view of `from` read at `[counter]` of `to`.
fn restack_step(step: &mut Step, from: BufId, to: BufId, term: &DynTerm) {
    map_views(step, &|v| restack(v, from, to, term));
}

/// `step` with `f` applied to each of its views: a kernel's destination and loads, a
/// reduction's or an argmax's loads, a product's operands and destination. (Native steps,
/// loops and branches name buffers, not views: they are left as they are.)
pub(super) fn map_views(step: &mut Step, f: &impl Fn(&View) -> View) {
    match step {
        Step::Kernel { dst, src, .. } => {
            *dst = f(dst);
            *src = src.map_loads(&|v| Expr::Load(f(v)));
        }
        Step::Reduce { src, .. } | Step::Argmax { src, .. } => *src = src.map_loads(&|v| Expr::Load(f(v))),
        Step::Dot { lhs, rhs, dst, .. } => {
            *lhs = f(lhs);
            *rhs = f(rhs);
            *dst = f(dst);
        }
        Step::Native { .. } | Step::Loop { .. } | Step::Switch { .. } | Step::While { .. } => {}
    }
}

/// Calls `f` on each view of `step` that [`map_views`] maps (none for native steps, loops
/// and branches).
fn each_view(step: &Step, f: &mut impl FnMut(&View)) {
    let mut loads = |e: &Expr| {
        e.visit(&mut |n| {
            if let Expr::Load(v) = n {
                f(v)
            }
        })
    };
    match step {
        Step::Kernel { dst, src, .. } => {
            loads(src);
            f(dst);
        }
        Step::Reduce { src, .. } | Step::Argmax { src, .. } => loads(src),
        Step::Dot { lhs, rhs, dst, .. } => {
            f(lhs);
            f(rhs);
            f(dst);
        }
        Step::Native { .. } | Step::Loop { .. } | Step::Switch { .. } | Step::While { .. } => {}
    }
}

/// Whether a view of `step` takes a dynamic offset from `buf` (a `dynamic_slice` start, a
/// clamped index computed in the body).
fn indexes_with(step: &Step, buf: BufId) -> bool {
    let mut hit = false;
    each_view(step, &mut |v| hit |= v.dynamic.iter().any(|d| d.index == buf));
    hit
}

/// Whether `e` takes a dynamic offset from `buf`.
fn expr_indexes_with(e: &Expr, buf: BufId) -> bool {
    let mut hit = false;
    e.visit(&mut |n| {
        if let Expr::Load(v) = n {
            hit |= v.dynamic.iter().any(|d| d.index == buf);
        }
    });
    hit
}

/// Whether `step` reads `buf` only through views that [`restack_step`] rewrites: as the
/// buffer of a view, never as a dynamic offset (an offset is read from a scalar buffer,
/// which a slot of a stack is not; left unrewritten, it would read a buffer nothing writes
/// any more: issue 40's stale index).
fn reads_through_views(step: &Step, buf: BufId) -> bool {
    matches!(step, Step::Kernel { .. } | Step::Reduce { .. } | Step::Argmax { .. } | Step::Dot { .. })
        && !step.writes_to(buf)
        && !indexes_with(step, buf)
}

impl Lowering {
    /// The steps of the scope being built (a scan body).
    fn body_steps(&mut self) -> &mut Vec<Step> {
        self.scopes.last_mut().expect("a scan body's scope is open")
    }

    /// Hoists the body's products of an xs slice by a loop-invariant operand (see the module
    /// docs). `outs` are the body's results (carries, then ys), rewritten to read the stacked
    /// products; `in_place[j]` is set where y `j` is now written by a hoisted product. Returns
    /// the steps to run before the loop.
    pub(super) fn hoist_products(
        &mut self,
        f: &LoopFacts,
        outs: &mut [Val],
        nk: usize,
        in_place: &mut [bool],
    ) -> Vec<Step> {
        let mut before = Vec::new();
        let mut i = 0;
        while i < self.body_steps().len() {
            let steps = &self.scopes[self.scopes.len() - 1];
            let Step::Dot { desc, lhs, rhs, dst } = &steps[i] else {
                i += 1;
                continue;
            };
            let (desc, lhs, rhs, dst_view) = (*desc, lhs.clone(), rhs.clone(), dst.clone());
            let dst = dst_view.buf;
            let d = self.prog.dots[desc].clone();
            let written = written(steps);
            let rows_follow = f.slice_stride(&lhs, &written) == Some(d.m as i64 * d.lhs_m as i64);
            let ok = d.batch.is_empty()
                && rows_follow
                && rhs.dynamic.is_empty()
                && f.invariant(rhs.buf, &written)
                && d.out_n == 1
                && d.out_m == d.n as isize
                && dst_view.offset == 0
                && dst_view.dynamic.is_empty()
                // Only this product writes its buffer, and only views read it.
                && steps.iter().enumerate().all(|(j, s)| j == i || !s.touches(dst) || reads_through_views(s, dst))
                && outs.iter().all(|o| !expr_indexes_with(&o.expr, dst));
            if !ok {
                i += 1;
                continue;
            }
            let slice = (d.m * d.n) as i64;
            // A y that is this product unchanged: its stack is the hoisted product's buffer.
            let y = (0..outs.len() - nk).find(|&j| {
                let y = &outs[nk + j];
                !in_place[j]
                    && y.aval.dtype == d.dtype
                    && y.aval.size() as i64 == slice
                    && whole(&y.expr, dst, &y.aval.shape)
            });
            let stacked = match y {
                Some(j) => {
                    in_place[j] = true;
                    f.ys[j]
                }
                // Into a buffer of its own it would add a stack of `length` products to the
                // planned peak (4 MiB on the benchmark scans, past XLA's temp bytes) and
                // measured no faster on scan_long_* (docs/benchmarks_history.md, "Scans").
                None => {
                    i += 1;
                    continue;
                }
            };
            let mut whole_desc = d;
            whole_desc.m *= f.length;
            self.prog.dots.push(whole_desc);
            let lhs = View { dynamic: Vec::new(), ..lhs };
            let dst_view = View { buf: stacked, ..dst_view };
            before.push(Step::Dot { desc: self.prog.dots.len() - 1, lhs, rhs, dst: dst_view });
            let term = f.term(slice);
            let steps = self.body_steps();
            steps.remove(i);
            steps.iter_mut().for_each(|s| restack_step(s, dst, stacked, &term));
            for o in outs.iter_mut() {
                o.expr = o.expr.map_loads(&|v| Expr::Load(restack(v, dst, stacked, &term)));
            }
        }
        before
    }

    /// Writes the body's stacked values in place: a y that is the whole buffer of one kernel
    /// of the body (a value also read elsewhere, as an RNN's new state, both a carry and a
    /// y) is computed by that kernel straight into `ys[counter]`, and every later reader
    /// (steps and `outs`) reads it there, instead of a copy from the kernel's buffer each
    /// step. Sets `in_place[j]` for such ys.
    pub(super) fn stack_in_place(&mut self, f: &LoopFacts, outs: &mut [Val], nk: usize, in_place: &mut [bool]) {
        for j in 0..outs.len() - nk {
            let y = &outs[nk + j];
            let Expr::Load(v) = &y.expr else { continue };
            let (buf, shape) = (v.buf, y.aval.shape.clone());
            if in_place[j]
                || y.aval.size() == 0
                || !whole(&y.expr, buf, &shape)
                || outs.iter().any(|o| expr_indexes_with(&o.expr, buf))
            {
                continue;
            }
            let term = f.term(y.aval.size() as i64);
            let to = f.ys[j];
            if !self.write_into_stack(buf, y.aval.size(), to, &term) {
                continue;
            }
            for o in outs.iter_mut() {
                o.expr = o.expr.map_loads(&|v| Expr::Load(restack(v, buf, to, &term)));
            }
            in_place[j] = true;
        }
    }

    /// Defers the body's accumulations of products into carries (see the module docs).
    /// Returns the deferred carries with the product each runs after the loop (into the
    /// buffer the carry's new value reads, as before); the caller skips their rewrites in
    /// the loop and adds `outs[carry]` to the carry after it.
    pub(super) fn defer_accumulations(&mut self, f: &LoopFacts, outs: &[Val], nk: usize) -> Vec<Deferred> {
        let mut deferred = Vec::new();
        // The stacks made here, each filled by a copy per step.
        let mut made = Vec::new();
        // Stacks of body values already made: the value's buffer and its stack.
        let mut stacks: HashMap<BufId, BufId> = HashMap::new();
        for (c, out) in outs[..nk].iter().enumerate() {
            let carry = f.carries[c];
            let Expr::Binary(BinaryOp::Add | BinaryOp::AddAny, _, a, b) = &out.expr else { continue };
            let term = if whole(a, carry, &out.aval.shape) {
                b
            } else if whole(b, carry, &out.aval.shape) {
                a
            } else {
                continue;
            };
            // The term reads exactly one buffer, statically, and not the carry.
            let mut bufs = HashSet::new();
            let mut static_only = true;
            term.visit(&mut |n| {
                if let Expr::Load(v) = n {
                    bufs.insert(v.buf);
                    static_only &= v.dynamic.is_empty();
                }
            });
            let (1, true) = (bufs.len(), static_only) else { continue };
            let product = *bufs.iter().next().expect("one buffer");
            if product == carry {
                continue;
            }
            let steps = &self.scopes[self.scopes.len() - 1];
            let writers: Vec<usize> = (0..steps.len()).filter(|&j| steps[j].writes_to(product)).collect();
            let [at] = writers[..] else { continue };
            let Step::Dot { desc, lhs, rhs, dst } = &steps[at] else { continue };
            let (lhs, rhs, dst) = (lhs.clone(), rhs.clone(), dst.clone());
            let d = self.prog.dots[*desc].clone();
            // Nothing else in the body reads the product, and nothing reads the carry: not
            // the product itself either (`c + c . w` is a recurrence, each step's product
            // reading the carry the step before updated, not a sum to run after the loop).
            let alone = steps.iter().enumerate().all(|(j, s)| (j == at || !s.touches(product)) && !s.touches(carry))
                && outs.iter().enumerate().all(|(j, o)| j == c || (!o.expr.reads(product) && !o.expr.reads(carry)));
            if !d.batch.is_empty() || d.k == 0 || !alone || !dst.dynamic.is_empty() {
                continue;
            }
            let written = written(steps);
            // Each operand stacked over the steps, its contracted axis the outermost: an xs
            // slice as it is, a body value from a stack made for an earlier product or from
            // its ys buffer, else from a new stack that a copy at the product's place fills.
            enum Stack {
                Xs,
                Existing(BufId),
                Copy(usize),
            }
            let mut plan = Vec::new();
            for (v, k_stride) in [(&lhs, d.lhs_k as i64), (&rhs, d.rhs_k as i64)] {
                let merged = d.k as i64 * k_stride;
                if let Some(s) = f.stacked_stride(v, &written) {
                    if s == merged {
                        plan.push(Stack::Xs);
                    }
                    continue;
                }
                let elems = (self.prog.buffers[v.buf.0 as usize].bytes / v.dtype.size_in_bytes()) as i64;
                if !v.dynamic.is_empty() || k_stride <= 0 || elems != merged {
                    continue;
                }
                let from_ys = (0..outs.len() - nk).find(|&j| {
                    let y = &outs[nk + j];
                    y.aval.dtype == v.dtype && y.aval.size() as i64 == elems && whole(&y.expr, v.buf, &y.aval.shape)
                });
                plan.push(match (stacks.get(&v.buf), from_ys) {
                    (Some(&s), _) => Stack::Existing(s),
                    (None, Some(j)) => Stack::Existing(f.ys[j]),
                    (None, None) => Stack::Copy(elems as usize),
                });
            }
            if plan.len() != 2 {
                continue;
            }
            let mut copies = Vec::new();
            let mut stacked = Vec::new();
            for (v, how) in [&lhs, &rhs].into_iter().zip(plan) {
                let buf = match how {
                    Stack::Xs => {
                        stacked.push(View { dynamic: Vec::new(), ..v.clone() });
                        continue;
                    }
                    Stack::Existing(s) => s,
                    Stack::Copy(elems) => match stacks.get(&v.buf) {
                        // The other operand of this product, copied already.
                        Some(&s) => s,
                        None => {
                            let s = self.new_buf(&Aval::new(v.dtype, vec![f.length, elems]));
                            made.push(s);
                            let flat =
                                |buf, dynamic| View { buf, dtype: v.dtype, offset: 0, strides: vec![1], dynamic };
                            copies.push(Step::Kernel {
                                space: vec![elems],
                                dst: flat(s, vec![f.term(elems as i64)]),
                                src: Expr::Load(flat(v.buf, Vec::new())),
                            });
                            s
                        }
                    },
                };
                stacks.insert(v.buf, buf);
                stacked.push(View { buf, dynamic: Vec::new(), ..v.clone() });
            }
            let [l, r] = &stacked[..] else { continue };
            let mut whole_desc = d;
            whole_desc.k *= f.length;
            self.prog.dots.push(whole_desc);
            let product = Step::Dot { desc: self.prog.dots.len() - 1, lhs: l.clone(), rhs: r.clone(), dst };
            self.body_steps().splice(at..=at, copies);
            deferred.push(Deferred { carry: c, product });
        }
        for s in made {
            self.fill_stack_in_place(f, outs, s);
        }
        deferred
    }

    /// Removes the copy that fills stack `s` each step where the value copied is the whole
    /// buffer of one kernel of the body: that kernel writes `s[counter]` instead, and every
    /// other reader in the body (steps only: no result of the body reads such a value, which
    /// only a deferred product stacks) reads it there. The body then holds no buffer of its
    /// own for the value (the cotangent of an RNN's backward step, which the step's product
    /// by the weights also reads).
    fn fill_stack_in_place(&mut self, f: &LoopFacts, outs: &[Val], s: BufId) {
        let steps = &self.scopes[self.scopes.len() - 1];
        let writers: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].writes_to(s)).collect();
        let [c] = writers[..] else { return };
        let Step::Kernel { space, dst, src: Expr::Load(v) } = &steps[c] else { return };
        let (n, elems) = (v.buf, space.iter().product::<usize>());
        let [term] = &dst.dynamic[..] else { return };
        let term = term.clone();
        let flat = v.offset == 0 && v.dynamic.is_empty() && v.strides == [1] && space.len() == 1;
        let arena = matches!(self.prog.buffers[n.0 as usize].storage, Storage::Arena { host: false });
        if !flat || !arena || f.carries.contains(&n) || f.ys.contains(&n) || n == s {
            return;
        }
        if !outs.iter().any(|o| o.expr.reads(n)) && self.write_into_stack(n, elems, s, &term) {
            self.body_steps().remove(c);
        }
    }

    /// Makes the one kernel of the body that writes `buf` (whole, row-major, `elems`
    /// elements) write slice `[counter]` of stack `to` instead (`term`), and every later step
    /// read it there. False, changing nothing, unless that kernel is `buf`'s only writer and
    /// every other step names `buf` only in views it reads, after the kernel.
    fn write_into_stack(&mut self, buf: BufId, elems: usize, to: BufId, term: &DynTerm) -> bool {
        let steps = &self.scopes[self.scopes.len() - 1];
        let writers: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].writes_to(buf)).collect();
        let [w] = writers[..] else { return false };
        let Step::Kernel { space, dst, .. } = &steps[w] else { return false };
        let ok = dst.buf == buf
            && dst.offset == 0
            && dst.dynamic.is_empty()
            && dst.is_row_major(space)
            && space.iter().product::<usize>() == elems
            && self.prog.buffers[buf.0 as usize].bytes == elems * dst.dtype.size_in_bytes()
            && steps
                .iter()
                .enumerate()
                .all(|(i, st)| i == w || !st.touches(buf) || (i > w && reads_through_views(st, buf)));
        if !ok {
            return false;
        }
        let steps = self.body_steps();
        if let Step::Kernel { dst, .. } = &mut steps[w] {
            *dst = View {
                buf: to,
                dtype: dst.dtype,
                offset: 0,
                strides: dst.strides.clone(),
                dynamic: vec![term.clone()],
            };
        }
        steps.iter_mut().for_each(|st| restack_step(st, buf, to, term));
        true
    }
}

#[cfg(test)]
mod tests {
    use remat_ir::parse_jaxpr;

    use crate::program::{BufId, Step, Storage};

    /// The products of `tests/data/scan_products.jaxpr` at the top level and in its loops.
    fn products(steps: &[Step]) -> (usize, Vec<usize>) {
        let top = steps.iter().filter(|s| matches!(s, Step::Dot { .. })).count();
        let inner = steps
            .iter()
            .filter_map(|s| match s {
                Step::Loop { body, .. } => Some(body.iter().filter(|s| matches!(s, Step::Dot { .. })).count()),
                _ => None,
            })
            .collect();
        (top, inner)
    }

    /// The forward scan's `xs[j] . b` runs before its loop, straight into the stacked output
    /// `h`; its `carry . a` stays. The reversed scan's two weight-gradient accumulations run
    /// after it (one operand an xs slice, the other a body value stacked once for both),
    /// while its `bf . w^T` (a carry's input) and the accumulation whose carry a y also reads stay.
    #[test]
    fn products_move_out_of_scan_loops_where_their_operands_allow() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/scan_products.jaxpr");
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), "scan_products").expect("parses");
        let (prog, _) = super::super::lower_program(&jaxpr, &[], &crate::Options::default()).expect("lowers");
        assert_eq!(products(&prog.steps), (3, vec![1, 2]));
        // The hoisted product writes output 2 (`h`, the forward scan's stacked `n`) in place.
        let hoisted = prog.steps.iter().find_map(|s| match s {
            Step::Dot { dst, .. } => Some(prog.buffers[dst.buf.0 as usize].storage),
            _ => None,
        });
        assert!(matches!(hoisted, Some(Storage::Out { index: 2, .. })), "{hoisted:?}");
        // One stack of `bf`, written in the reversed loop by the kernel that computes `bf`
        // (no copy), and read whole by the deferred products after the loop.
        let loops: Vec<usize> = (0..prog.steps.len()).filter(|&i| matches!(prog.steps[i], Step::Loop { .. })).collect();
        let Step::Loop { body, .. } = &prog.steps[loops[1]] else { panic!("two loops") };
        let stacked: Vec<BufId> = body
            .iter()
            .filter_map(|s| match s {
                Step::Kernel { dst, .. }
                    if !dst.dynamic.is_empty()
                        && prog.buffers[dst.buf.0 as usize].storage == (Storage::Arena { host: false }) =>
                {
                    Some(dst.buf)
                }
                _ => None,
            })
            .collect();
        let [stack] = stacked[..] else { panic!("one kernel writes a stack slice: {stacked:?}") };
        let readers = prog.steps[loops[1] + 1..]
            .iter()
            .filter(|s| matches!(s, Step::Dot { lhs, rhs, .. } if lhs.buf == stack || rhs.buf == stack))
            .count();
        assert_eq!(readers, 2, "both deferred weight gradients read the stack");
    }
}
