//! Static buffer planning: every arena buffer gets a home and an offset, laid out by liveness.
//!
//! Steps are numbered in execution order (a loop's body steps get their own numbers inside
//! the loop's range). A buffer lives from its first to its last reference; a buffer that is
//! referenced both inside a loop and outside it lives across the whole loop, because every
//! iteration reads it again. An output lives from its first reference to the end of the
//! program, since the caller reads it. Buffers whose lifetimes do not overlap may share
//! memory; the layout is a greedy first fit in order of first use. An elementwise kernel may
//! write its result in place over an operand that dies at that kernel, when it reads that
//! operand only at the element it writes (same view): each element is read before it is
//! overwritten. In a loop, the operand must be one of the iteration's own: one from before
//! the loop is read again by the next iteration. Inside a loop, a kernel that fills slot
//! `[counter]` of a stack from the same slot of a stack that only it reads, and that nothing
//! reads after the loop, fills it in place too: the stack the loop builds is the one it
//! consumes.
//!
//! An output's memory is free until the program first writes the output, so a device buffer
//! that dies before then may live inside it, as XLA's buffer assignment does: a gradient
//! program keeps its forward activations in the memory of the weight gradients that are
//! written last. Of the outputs that are still unwritten when a buffer dies, the one written
//! first is tried first (it leaves the longer-free ones to longer-lived buffers); only what
//! fits in no output goes to the arena.
//!
//! What it keeps true: two buffers whose lifetimes overlap never overlap in memory (an
//! output counts as a buffer from its first write on), a buffer lives in an output only if
//! it dies before that output's first write, fits inside it and needs no more alignment
//! than the output's elements, every offset is a multiple of [`ALIGN`] from its home's
//! start, and `device_bytes` / `host_bytes` bound every arena buffer's end.

mod coverage;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use crate::expr::{Expr, View};
use crate::program::{BufId, Program, Step, Storage};
use coverage::Coverage;

/// The alignment of every arena buffer.
pub(crate) const ALIGN: usize = 64;

/// Where an arena buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Home {
    /// The device arena, or the host pool for a host buffer.
    Pool,
    /// The memory of an output buffer, before the program first writes that output.
    Out(BufId),
}

/// Where each arena buffer lives, and how big the arena and the host pool are.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// The home of each buffer and its byte offset there (`None` for non-arena buffers).
    pub places: Vec<Option<(Home, usize)>>,
    /// For each buffer written in place over an operand, that operand.
    pub written_over: Vec<Option<BufId>>,
    pub device_bytes: usize,
    pub host_bytes: usize,
}

/// An allocation a buffer lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allocation {
    /// The device arena (`false`) or the host pool (`true`).
    Pool(bool),
    Arg(usize),
    Const(usize),
    /// An output's memory (the output's buffer).
    Out(BufId),
}

impl Layout {
    /// The allocation `buf` lives in and its byte range there; `None` for an arena buffer
    /// the layout did not place.
    fn region(&self, prog: &Program, buf: BufId) -> Option<(Allocation, std::ops::Range<usize>)> {
        let b = &prog.buffers[buf.0 as usize];
        let (alloc, start) = match b.storage {
            Storage::Arena { host } => match self.places.get(buf.0 as usize).copied().flatten()? {
                (Home::Pool, off) => (Allocation::Pool(host), off),
                (Home::Out(out), off) => (Allocation::Out(out), off),
            },
            Storage::Arg(i) => (Allocation::Arg(i), 0),
            Storage::Const(i) => (Allocation::Const(i), 0),
            Storage::Out { .. } => (Allocation::Out(buf), 0),
        };
        Some((alloc, start..start + b.bytes))
    }

    /// Whether two buffers may share memory: the same buffer, or overlapping byte ranges of
    /// one allocation (buffers the layout did not place may share anything).
    pub fn may_overlap(&self, prog: &Program, a: BufId, b: BufId) -> bool {
        if a == b {
            return true;
        }
        match (self.region(prog, a), self.region(prog, b)) {
            (Some((x, r)), Some((y, q))) => x == y && r.start < q.end && q.start < r.end,
            _ => true,
        }
    }

    /// How many arena buffers live in outputs' memory.
    pub fn buffers_in_outputs(&self) -> usize {
        self.places.iter().filter(|p| matches!(p, Some((Home::Out(_), _)))).count()
    }
}

/// When each buffer lives, in step positions.
#[derive(Clone, Debug)]
pub(crate) struct Lifetimes {
    /// Per buffer, its first and last position (`usize::MAX` and 0 for a buffer no step
    /// names), a loop's buffers extended over the loop as the layout sees them.
    pub first: Vec<usize>,
    pub last: Vec<usize>,
    /// The half-open range of positions of each top-level step.
    pub top_steps: Vec<(usize, usize)>,
    /// The number of positions (the position the caller reads the outputs at).
    pub end: usize,
}

pub(crate) fn plan(prog: &Program) -> Layout {
    plan_with_lifetimes(prog).0
}

/// The lifetimes of the buffers, and the in-place candidates among the steps.
pub(crate) fn lifetimes(prog: &Program) -> (Lifetimes, Vec<InPlace>) {
    let n = prog.buffers.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    let mut loops = Vec::new();
    let mut pos = 0;
    let mut candidates = Vec::new();
    let mut top_steps = Vec::with_capacity(prog.steps.len());
    for step in &prog.steps {
        let start = pos;
        number(std::slice::from_ref(step), &mut pos, &mut first, &mut last, &mut loops, &mut candidates);
        top_steps.push((start, pos));
    }
    // A kernel filling a loop's stack slot by slot: its destination must be first named,
    // and its operands last named, by that kernel (before the lifetimes are stretched over
    // the loops, which makes them meet at the loop's ends).
    for c in candidates.iter_mut().filter(|c| c.at.is_some()) {
        let at = c.at.expect("filtered");
        c.ops.retain(|a| last[a.0 as usize] == at);
        if first[c.dst.0 as usize] != at {
            c.ops.clear();
        }
    }
    // The caller reads every output after the last step.
    for b in 0..n {
        if matches!(prog.buffers[b].storage, Storage::Out { .. }) && first[b] != usize::MAX {
            last[b] = pos;
        }
    }
    // A buffer used inside a loop and outside it must survive every iteration.
    for _ in 0..2 {
        for &(s, e, _) in &loops {
            for b in 0..n {
                if first[b] == usize::MAX {
                    continue;
                }
                let intersects = first[b] <= e && last[b] >= s;
                let inside = first[b] >= s && last[b] <= e;
                if intersects && !inside {
                    first[b] = first[b].min(s);
                    last[b] = last[b].max(e);
                }
            }
        }
    }
    // A kernel in a loop (or a while) writes over an operand only if the operand lives and
    // dies within one iteration. One from before the loop is read again by the next
    // iteration: its lifetime, stretched over the loop, ends at the loop's last step, which
    // may be this very kernel, as if the operand died there.
    for c in candidates.iter_mut().filter(|c| c.at.is_none()) {
        for &(s, e, iterates) in &loops {
            if iterates && (s..=e).contains(&c.start) {
                c.ops.retain(|a| first[a.0 as usize] >= s);
            }
        }
    }
    (Lifetimes { first, last, top_steps, end: pos }, candidates)
}

/// The layout, and the lifetimes it was made from.
pub(crate) fn plan_with_lifetimes(prog: &Program) -> (Layout, Lifetimes) {
    plan_with::<Active>(prog)
}

/// The layout with `L` keeping each home's live buffers (the tests compare [`Active`] with
/// the plain sweep it replaced).
fn plan_with<L: Live>(prog: &Program) -> (Layout, Lifetimes) {
    let n = prog.buffers.len();
    let (lifetimes, candidates) = lifetimes(prog);
    let (first, last) = (&lifetimes.first, &lifetimes.last);
    // In-place pairs (dst, operand): the operand's last use is the kernel that first writes
    // dst (or the loop whose stack slots that kernel fills).
    let mut in_place: Vec<Option<usize>> = vec![None; n];
    for InPlace { start, end, dst, ops, .. } in candidates {
        let d = dst.0 as usize;
        if first[d] != start || !matches!(prog.buffers[d].storage, Storage::Arena { .. }) {
            continue;
        }
        in_place[d] = ops.iter().map(|b| b.0 as usize).find(|&a| {
            a != d
                && last[a] == end
                && prog.buffers[a].storage == prog.buffers[d].storage
                && prog.buffers[a].bytes >= prog.buffers[d].bytes
        });
    }
    // Device outputs whose memory can hold buffers before their first write, in write order.
    let mut lenders: Vec<usize> = (0..n)
        .filter(|&o| {
            matches!(prog.buffers[o].storage, Storage::Out { host: false, .. })
                && first[o] != usize::MAX
                && prog.buffers[o].bytes > 0
        })
        .collect();
    lenders.sort_by_key(|&o| (first[o], prog.buffers[o].bytes));
    let mut layout = Layout { places: vec![None; n], written_over: vec![None; n], device_bytes: 0, host_bytes: 0 };
    for host in [false, true] {
        let mut order: Vec<usize> =
            (0..n).filter(|&b| prog.buffers[b].storage == Storage::Arena { host } && first[b] != usize::MAX).collect();
        order.sort_by_key(|&b| (first[b], Reverse(prog.buffers[b].bytes)));
        // The buffers are placed in order of their first use, so a placed buffer meets the
        // lifetime of every later one that starts by its last use: what each home holds
        // live is the buffers placed there that have not died yet.
        let mut placed: HashMap<Home, L> = HashMap::new();
        let mut peak = 0;
        for b in order {
            let size = prog.buffers[b].bytes.max(1);
            // Whether output `o`'s memory is free for all of `b`'s life and can hold it.
            let lends = |o: usize| {
                !host
                    && first[o] > last[b]
                    && prog.buffers[o].bytes >= size
                    && prog.buffers[o].align >= prog.buffers[b].align
            };
            let limit = |home: Home| match home {
                Home::Pool => usize::MAX,
                Home::Out(o) => prog.buffers[o.0 as usize].bytes,
            };
            let span = (first[b], last[b]);
            // Over the dying operand, if nothing else live overlaps its place.
            let reuse = in_place[b].and_then(|a| {
                let (home, start) = layout.places[a]?;
                let home_ok = match home {
                    Home::Pool => true,
                    Home::Out(o) => lends(o.0 as usize),
                };
                let operand = (start, start + prog.buffers[a].bytes.max(1));
                let free = placed.get_mut(&home).is_none_or(|h| h.expire(span.0).is_free(start, start + size, operand));
                (home_ok && start + size <= limit(home) && free).then_some((home, start))
            });
            if reuse.is_some() {
                layout.written_over[b] = in_place[b].map(|a| BufId(a as u32));
            }
            let place = reuse
                .or_else(|| {
                    let unwritten = lenders.partition_point(|&o| first[o] <= last[b]);
                    lenders[unwritten..].iter().filter(|&&o| lends(o)).find_map(|&o| {
                        let home = Home::Out(BufId(o as u32));
                        first_fit(placed.get_mut(&home).map(|h| h.expire(span.0)), size, limit(home))
                            .map(|start| (home, start))
                    })
                })
                .unwrap_or_else(|| {
                    let start = first_fit(placed.get_mut(&Home::Pool).map(|h| h.expire(span.0)), size, usize::MAX)
                        .expect("the end of the last live buffer is always free");
                    (Home::Pool, start)
                });
            let (home, start) = place;
            placed.entry(home).or_default().insert(span.1, start, start + size);
            layout.places[b] = Some(place);
            if home == Home::Pool {
                peak = peak.max(start + size);
            }
        }
        if host {
            layout.host_bytes = align(peak);
        } else {
            layout.device_bytes = align(peak);
        }
    }
    (layout, lifetimes)
}

/// What the layout asks of the buffers placed in one home that are still live.
trait Live: Default {
    /// Adds a buffer placed at `[start, end)` whose last use is `last`.
    fn insert(&mut self, last: usize, start: usize, end: usize);
    /// Drops the buffers whose last use is before `now`.
    fn expire(&mut self, now: usize) -> &Self;
    /// Whether `[lo, hi)`, which lies within `except`, overlaps no live range other than
    /// those equal to `except`.
    fn is_free(&self, lo: usize, hi: usize, except: (usize, usize)) -> bool;
    /// The lowest offset, 0 or the aligned end of a live range, where `size` bytes overlap
    /// no live range.
    fn lowest_free(&self, size: usize) -> usize;
}

/// The buffers placed in one home that are still live, by their byte ranges.
///
/// Buffers are inserted in order of their first use and queried at that use, which never
/// decreases: a buffer whose last use is before the query's first can never meet a later
/// buffer again, so [`Live::expire`] drops it for good. What remains is exactly the
/// set of placed buffers whose lifetimes meet the new buffer's (each started by then).
/// Every range starts at a multiple of [`ALIGN`] (an offset the layout gives is 0, an
/// aligned end, or an operand's offset), so which [`ALIGN`]-byte units the live ranges
/// cover answers both questions: the layout's first fit is the lowest free run of units
/// long enough, found in `O(log U)` in a home of `U` units. (A sweep over the live ranges
/// in order of their starts, which it replaced, was `O(L)` for `L` live ranges: quadratic
/// on a long forward pass, whose activations all stay live, and most of the planner's time
/// at 100,001 equations.)
#[derive(Default)]
struct Active {
    /// The live byte ranges `(start, end)`, with how many live buffers have each.
    ranges: BTreeMap<(usize, usize), usize>,
    /// The live buffers by their last use, soonest first.
    dying: BinaryHeap<Reverse<(usize, usize, usize)>>,
    /// How many live ranges cover each unit.
    units: Coverage,
}

impl Live for Active {
    fn insert(&mut self, last: usize, start: usize, end: usize) {
        *self.ranges.entry((start, end)).or_insert(0) += 1;
        self.dying.push(Reverse((last, start, end)));
        self.units.add(start, end, 1);
    }

    fn expire(&mut self, now: usize) -> &Active {
        while let Some(&Reverse((last, start, end))) = self.dying.peek() {
            if last >= now {
                break;
            }
            self.dying.pop();
            if let Some(n) = self.ranges.get_mut(&(start, end)) {
                *n -= 1;
                if *n == 0 {
                    self.ranges.remove(&(start, end));
                }
                self.units.add(start, end, -1);
            }
        }
        self
    }

    /// Each range equal to `except` covers every unit of `[lo, hi)`: the others overlap
    /// none exactly when no unit is covered more often than `except` is live.
    fn is_free(&self, lo: usize, hi: usize, except: (usize, usize)) -> bool {
        debug_assert!(except.0 <= lo && hi <= except.1);
        let excepted = self.ranges.get(&except).copied().unwrap_or(0);
        self.units.most_covering(lo, hi) as usize <= excepted
    }

    /// A free run of units starts at 0 or at the end of a covered one, an aligned end of a
    /// live range; `size` bytes fit in it when its units hold `size` rounded up.
    fn lowest_free(&self, size: usize) -> usize {
        self.units.lowest_free(size)
    }
}

/// The lowest aligned offset in a home where `size` bytes overlap no live buffer and end
/// by `limit`.
fn first_fit<L: Live>(live: Option<&L>, size: usize, limit: usize) -> Option<usize> {
    let at = live.map_or(0, |l| l.lowest_free(size));
    (at + size <= limit).then_some(at)
}

fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// An elementwise kernel's destination and the operands it reads only at the element it
/// writes: candidates for writing in place, where the destination's life starts at `start`
/// and the operand's ends at `end`. For a kernel at the top of a step list both are its
/// position. For a kernel in a loop body that writes slot `[counter]` of a stack and reads
/// an operand only at that same slot (`x[counter]`), an operand no other step of the loop
/// names, they are the loop's first and last positions: each iteration reads its own slot
/// before writing it, and no iteration reads another's, so the stack the loop fills may be
/// the one it consumes (a backward scan's cotangents, written over the incoming stack).
pub(crate) struct InPlace {
    start: usize,
    end: usize,
    dst: BufId,
    ops: Vec<BufId>,
    /// A slot-filling kernel's own position, until its lifetimes are checked.
    at: Option<usize>,
}

/// Numbers the steps, recording each buffer's first and last reference and each loop's range
/// (whether it iterates: a loop or a while, not a switch's branches).
fn number(
    steps: &[Step],
    pos: &mut usize,
    first: &mut [usize],
    last: &mut [usize],
    loops: &mut Vec<(usize, usize, bool)>,
    in_place: &mut Vec<InPlace>,
) {
    for step in steps {
        if let Step::Kernel { dst, src, .. } = step {
            if dst.dynamic.is_empty() {
                let ops = same_view_operands(dst, src);
                in_place.push(InPlace { start: *pos, end: *pos, dst: dst.buf, ops, at: None });
            }
        }
        match step {
            Step::Loop { counter, body, length, .. } => {
                let s = *pos;
                touch(*counter, s, first, last);
                number(body, pos, first, last, loops, in_place);
                let e = (*pos).max(s + 1) - 1;
                touch(*counter, e, first, last);
                loops.push((s, e, true));
                slot_candidates(body, *counter, *length, s, e, in_place);
            }
            // Only one branch runs, but a branch is numbered like a loop body: what the
            // switch reads from outside lives across all of it (simple, and safe).
            Step::Switch { index, branches } => {
                let s = *pos;
                touch(*index, s, first, last);
                for br in branches {
                    number(br, pos, first, last, loops, in_place);
                }
                let e = (*pos).max(s + 1) - 1;
                touch(*index, e, first, last);
                loops.push((s, e, false));
            }
            Step::While { cond, pred, body } => {
                let s = *pos;
                number(cond, pos, first, last, loops, in_place);
                touch(*pred, *pos, first, last);
                number(body, pos, first, last, loops, in_place);
                let e = (*pos).max(s + 1) - 1;
                touch(*pred, s, first, last);
                touch(*pred, e, first, last);
                loops.push((s, e, true));
            }
            Step::Kernel { .. }
            | Step::Reduce { .. }
            | Step::Argmax { .. }
            | Step::Dot { .. }
            | Step::Native { .. } => {
                let mut bufs = Vec::new();
                step.buffers(&mut bufs);
                for b in bufs {
                    touch(b, *pos, first, last);
                }
                *pos += 1;
            }
        }
    }
}

/// The in-place candidates of a loop's body (from `s` to `e`, counting `length` steps with
/// `counter`): its kernels that write slot `[counter]` of a stack that no other step of the
/// body writes, each iteration its own slot (no clamping merges two, and slots are apart),
/// with the operands they read only at that slot and that no other step of the body names.
/// Their lifetimes are checked by [`lifetimes`].
fn slot_candidates(body: &[Step], counter: BufId, length: usize, s: usize, e: usize, out: &mut Vec<InPlace>) {
    let mut at = s;
    for step in body {
        let here = at;
        at += positions(step);
        let Step::Kernel { space, dst, src } = step else { continue };
        let [term] = &dst.dynamic[..] else { continue };
        // The static part of a slot spans less than the slot stride: slots are disjoint.
        let span: i64 = space.iter().zip(&dst.strides).map(|(&n, &st)| (n as i64 - 1).max(0) * st.abs()).sum();
        let own_slots = term.index == counter && term.max >= length as i64 - 1 && span < term.stride.abs();
        if !own_slots || space.contains(&0) || body.iter().filter(|st| st.writes_to(dst.buf)).count() != 1 {
            continue;
        }
        let mut ops = same_view_operands(dst, src);
        ops.retain(|&a| body.iter().filter(|st| st.touches(a)).count() == 1 && a != dst.buf);
        if !ops.is_empty() && !src.reads(dst.buf) {
            out.push(InPlace { start: s, end: e, dst: dst.buf, ops, at: Some(here) });
        }
    }
}

/// How many positions `step` takes in [`number`]'s count.
fn positions(step: &Step) -> usize {
    match step {
        Step::Loop { body, .. } => body.iter().map(positions).sum(),
        Step::Switch { branches, .. } => branches.iter().flatten().map(positions).sum(),
        Step::While { cond, body, .. } => cond.iter().chain(body).map(positions).sum(),
        Step::Kernel { .. } | Step::Reduce { .. } | Step::Argmax { .. } | Step::Dot { .. } | Step::Native { .. } => 1,
    }
}

/// The buffers `src` reads only through exactly the view `dst` writes (its static part and
/// its dynamic offsets alike).
fn same_view_operands(dst: &View, src: &Expr) -> Vec<BufId> {
    let mut same = Vec::new();
    let mut other = Vec::new();
    src.visit(&mut |e| {
        if let Expr::Load(v) = e {
            let aligned = v.dtype == dst.dtype && v.offset == dst.offset && v.strides == dst.strides;
            if aligned && v.dynamic == dst.dynamic {
                same.push(v.buf);
            } else {
                other.push(v.buf);
                other.extend(v.dynamic.iter().map(|d| d.index));
            }
        }
    });
    same.retain(|b| !other.contains(b));
    same
}

fn touch(b: BufId, pos: usize, first: &mut [usize], last: &mut [usize]) {
    let b = b.0 as usize;
    first[b] = first[b].min(pos);
    last[b] = last[b].max(pos);
}

#[cfg(test)]
mod tests {
    use super::*;
    use remat_ir::{DType, LitValue};

    fn kernel(dst: BufId, src: Option<BufId>) -> Step {
        let src = match src {
            Some(b) => Expr::Load(View::contiguous(b, DType::F32, &[4])),
            None => Expr::Lit(LitValue::F32(1.0)),
        };
        Step::Kernel { space: vec![4], dst: View::contiguous(dst, DType::F32, &[4]), src }
    }

    /// `dst[i] = src[3 - i]`: reads its operand at other elements, so never in place.
    fn reversing(dst: BufId, src: BufId) -> Step {
        let reversed = View { buf: src, dtype: DType::F32, offset: 3, strides: vec![-1], dynamic: Vec::new() };
        Step::Kernel { space: vec![4], dst: View::contiguous(dst, DType::F32, &[4]), src: Expr::Load(reversed) }
    }

    #[test]
    fn buffers_with_disjoint_lifetimes_share_memory() {
        let mut p = Program::default();
        let a = arena(&mut p, 16, 4);
        let b = arena(&mut p, 16, 4);
        let c = arena(&mut p, 16, 4);
        // a -> b -> c: a is dead once b is written, so c can take a's place.
        p.steps = vec![kernel(a, None), reversing(b, a), reversing(c, b)];
        let l = plan(&p);
        assert_eq!(l.places[a.0 as usize], l.places[c.0 as usize]);
        assert_ne!(l.places[a.0 as usize], l.places[b.0 as usize]);
        assert_eq!(l.device_bytes, 128);
    }

    #[test]
    fn an_elementwise_kernel_writes_over_an_operand_that_dies_there() {
        let mut p = Program::default();
        let a = arena(&mut p, 16, 4);
        let b = arena(&mut p, 16, 4);
        let c = arena(&mut p, 16, 4);
        let d = arena(&mut p, 16, 4);
        // Each kernel reads its operand at the element it writes and the operand dies there,
        // so the whole chain lives in one place.
        p.steps = vec![kernel(a, None), kernel(b, Some(a)), kernel(c, Some(b)), kernel(d, Some(c))];
        let l = plan(&p);
        assert_eq!(l.places[a.0 as usize], l.places[b.0 as usize]);
        assert_eq!(l.places[b.0 as usize], l.places[c.0 as usize]);
        assert_eq!(l.device_bytes, 64);
    }

    #[test]
    fn buffers_read_inside_a_loop_live_across_it() {
        let mut p = Program::default();
        let outer = arena(&mut p, 16, 4);
        let counter = arena(&mut p, 4, 4);
        let inner = arena(&mut p, 16, 4);
        let body = vec![kernel(inner, None), kernel(inner, Some(outer))];
        p.steps = vec![kernel(outer, None), Step::Loop { length: 3, reverse: false, counter, body }];
        let l = plan(&p);
        let offs: Vec<(Home, usize)> =
            [outer, counter, inner].iter().map(|b| l.places[b.0 as usize].unwrap()).collect();
        assert!(offs[0] != offs[2] && offs[1] != offs[2] && offs[0] != offs[1]);
    }

    /// A kernel in a loop that reads an operand from before the loop at the element it
    /// writes: the operand's life, stretched over the loop, ends at the loop's last step,
    /// which is this kernel, but the next iteration reads the operand again, so the kernel
    /// does not write over it (the program fuzzer's seed 12845461857522408367).
    #[test]
    fn a_kernel_in_a_loop_keeps_off_an_operand_from_before_the_loop() {
        let mut p = Program::default();
        let outer = arena(&mut p, 16, 4);
        let counter = arena(&mut p, 4, 4);
        let inner = arena(&mut p, 16, 4);
        let body = vec![kernel(inner, Some(outer))];
        p.steps = vec![kernel(outer, None), Step::Loop { length: 3, reverse: false, counter, body }];
        let l = plan(&p);
        assert_eq!(l.written_over[inner.0 as usize], None);
        assert_ne!(l.places[outer.0 as usize], l.places[inner.0 as usize]);
    }

    fn arena(p: &mut Program, bytes: usize, align: usize) -> BufId {
        p.new_buffer(Storage::Arena { host: false }, bytes, align)
    }

    fn out(p: &mut Program, index: usize, bytes: usize, align: usize) -> BufId {
        p.new_buffer(Storage::Out { index, host: false }, bytes, align)
    }

    #[test]
    fn a_buffer_that_dies_before_an_output_is_written_lives_in_it() {
        let mut p = Program::default();
        let a = arena(&mut p, 16, 4);
        let b = arena(&mut p, 16, 4);
        let o = out(&mut p, 0, 16, 4);
        // a dies at b's kernel, before o is written: a lives in o. b is read by o's kernel.
        p.steps = vec![kernel(a, None), reversing(b, a), reversing(o, b)];
        let l = plan(&p);
        assert_eq!(l.places[a.0 as usize], Some((Home::Out(o), 0)));
        assert_eq!(l.places[b.0 as usize], Some((Home::Pool, 0)));
        assert_eq!(l.device_bytes, 64);
        assert_eq!(l.buffers_in_outputs(), 1);
    }

    #[test]
    fn an_output_lends_nothing_once_written_and_nothing_too_small_or_too_aligned() {
        let mut p = Program::default();
        let o1 = out(&mut p, 0, 16, 4);
        let wide = arena(&mut p, 32, 4);
        let f64s = arena(&mut p, 16, 8);
        let late = arena(&mut p, 16, 4);
        let o2 = out(&mut p, 1, 64, 4);
        let wide_kernel = Step::Kernel {
            space: vec![8],
            dst: View::contiguous(wide, DType::F32, &[8]),
            src: Expr::Lit(LitValue::F32(1.0)),
        };
        let f64_kernel = Step::Kernel {
            space: vec![2],
            dst: View::contiguous(f64s, DType::F64, &[2]),
            src: Expr::Lit(LitValue::F64(1.0)),
        };
        // o1 is written first; `late` is written after it, so only o2 (written last) may
        // hold it; `wide` does not fit in o1 and `f64s` needs more alignment than o2's f32s.
        p.steps = vec![
            kernel(o1, None),
            wide_kernel,
            f64_kernel,
            kernel(late, None),
            reversing(late, late),
            Step::Kernel {
                space: vec![4],
                dst: View::contiguous(o2, DType::F32, &[4]),
                src: Expr::Load(View::contiguous(wide, DType::F32, &[4])),
            },
        ];
        let l = plan(&p);
        assert_eq!(l.places[late.0 as usize].map(|p| p.0), Some(Home::Out(o2)));
        assert_eq!(l.places[wide.0 as usize].map(|p| p.0), Some(Home::Pool));
        assert_eq!(l.places[f64s.0 as usize].map(|p| p.0), Some(Home::Pool));
    }

    #[test]
    fn a_buffer_of_a_loop_body_never_lives_in_an_output_the_loop_writes() {
        let mut p = Program::default();
        let counter = arena(&mut p, 4, 4);
        let inner = arena(&mut p, 16, 4);
        let next = arena(&mut p, 16, 4);
        let o = out(&mut p, 0, 16, 4);
        // `inner` dies before `o` is written in each iteration, but the next iteration
        // writes `inner` again over the output: `o` counts as written from the loop's start.
        let body = vec![kernel(inner, None), reversing(next, inner), reversing(o, next)];
        p.steps = vec![Step::Loop { length: 3, reverse: false, counter, body }];
        let l = plan(&p);
        assert_eq!(l.places[inner.0 as usize].map(|p| p.0), Some(Home::Pool));
        assert_eq!(l.buffers_in_outputs(), 0);
    }

    /// `dst[counter] = 2 * src[counter]` over a stack of 4 slots of 4 `f32`, the slot at
    /// `min(counter, max)`.
    fn slot_kernel(dst: BufId, src: View, counter: BufId, max: i64) -> Step {
        let slot = View {
            buf: dst,
            dtype: DType::F32,
            offset: 0,
            strides: vec![1],
            dynamic: vec![crate::expr::DynTerm { index: counter, max, stride: 4 }],
        };
        let two = Box::new(Expr::Lit(LitValue::F32(2.0)));
        let src = Expr::Binary(remat_ir::BinaryOp::Mul, DType::F32, two, Box::new(Expr::Load(src)));
        Step::Kernel { space: vec![4], dst: slot, src }
    }

    /// A loop that fills a stack slot by slot from the slots of a stack that nothing else
    /// reads fills it in place (a backward scan's cotangents over the incoming stack); any
    /// other reader of the incoming stack (in the loop or after it), a read of other slots
    /// than the one written, another write of the new stack in the loop (which could
    /// overwrite slots not yet read), or a slot two iterations share (a clamped counter)
    /// keeps them apart.
    #[test]
    fn a_loop_fills_a_stack_over_the_stack_it_consumes_slot_by_slot() {
        let cases = [
            "alone",
            "read again in the loop",
            "read after the loop",
            "another slot",
            "written again in the loop",
            "clamped",
        ];
        for case in cases {
            let mut p = Program::default();
            let xs = arena(&mut p, 64, 4);
            let counter = arena(&mut p, 4, 4);
            let ys = arena(&mut p, 64, 4);
            let sink = arena(&mut p, 64, 4);
            let scratch = arena(&mut p, 16, 4);
            let mut read = View {
                buf: xs,
                dtype: DType::F32,
                offset: 0,
                strides: vec![1],
                dynamic: vec![crate::expr::DynTerm { index: counter, max: 3, stride: 4 }],
            };
            if case == "another slot" {
                read.offset = 4;
                read.dynamic[0].max = 2;
            }
            // The last two iterations both read and write slot 2: the last one would read
            // what the one before wrote.
            let max = if case == "clamped" { 2 } else { 3 };
            read.dynamic[0].max = read.dynamic[0].max.min(max);
            let mut body = vec![slot_kernel(ys, read, counter, max)];
            if case == "read again in the loop" {
                body.push(kernel(scratch, Some(xs)));
            }
            if case == "written again in the loop" {
                body.push(kernel(ys, None));
            }
            let mut steps = vec![
                Step::Kernel {
                    space: vec![16],
                    dst: View::contiguous(xs, DType::F32, &[16]),
                    src: Expr::Lit(LitValue::F32(1.0)),
                },
                Step::Loop { length: 4, reverse: false, counter, body },
            ];
            let after = if case == "read after the loop" { xs } else { ys };
            steps.push(Step::Kernel {
                space: vec![16],
                dst: View::contiguous(sink, DType::F32, &[16]),
                src: Expr::Load(View::contiguous(after, DType::F32, &[16])),
            });
            steps.push(kernel(scratch, Some(ys)));
            p.steps = steps;
            let l = plan(&p);
            let shared = l.places[xs.0 as usize] == l.places[ys.0 as usize];
            assert_eq!(shared, case == "alone", "{case}");
        }
    }

    /// A placed buffer: its lifetime and its byte range in its home.
    struct Placed {
        first: usize,
        last: usize,
        start: usize,
        end: usize,
    }

    /// The live set kept as a sorted map of ranges, queried by a sweep from the lowest
    /// start: what [`Active`] replaced, kept to check that the layouts are the same.
    #[derive(Default)]
    struct Sweep {
        ranges: BTreeMap<(usize, usize), usize>,
        dying: BinaryHeap<Reverse<(usize, usize, usize)>>,
    }

    impl Live for Sweep {
        fn insert(&mut self, last: usize, start: usize, end: usize) {
            *self.ranges.entry((start, end)).or_insert(0) += 1;
            self.dying.push(Reverse((last, start, end)));
        }

        fn expire(&mut self, now: usize) -> &Sweep {
            while let Some(&Reverse((last, start, end))) = self.dying.peek() {
                if last >= now {
                    break;
                }
                self.dying.pop();
                if let Some(n) = self.ranges.get_mut(&(start, end)) {
                    *n -= 1;
                    if *n == 0 {
                        self.ranges.remove(&(start, end));
                    }
                }
            }
            self
        }

        fn is_free(&self, lo: usize, hi: usize, except: (usize, usize)) -> bool {
            self.ranges.range(..(hi, 0)).all(|(&r, _)| r == except || r.1 <= lo || r.0 >= hi)
        }

        fn lowest_free(&self, size: usize) -> usize {
            let mut at = 0;
            for &(lo, hi) in self.ranges.keys() {
                if at + size <= lo {
                    break;
                }
                at = at.max(align(hi));
            }
            at
        }
    }

    fn xorshift(seed: u64) -> impl FnMut(usize) -> usize {
        let mut state = seed;
        move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        }
    }

    /// The first fit is what checking every candidate offset against every live range
    /// finds (the definition: the lowest of 0 and the ranges' aligned ends that overlaps
    /// none), and what the sweep finds; `is_free` is its definition; and the live set kept
    /// by expiry is the set of buffers whose lifetimes meet the new one's, on random sets
    /// of placed buffers at aligned offsets (inserted in order of first use), spans, sizes
    /// and limits.
    #[test]
    fn first_fit_is_the_lowest_free_candidate() {
        let reference = |ranges: &[(usize, usize)], size: usize, limit: usize| {
            let mut starts: Vec<usize> = std::iter::once(0).chain(ranges.iter().map(|&(_, e)| align(e))).collect();
            starts.sort_unstable();
            starts
                .into_iter()
                .take_while(|&o| o + size <= limit)
                .find(|&o| ranges.iter().all(|&(lo, hi)| o + size <= lo || o >= hi))
        };
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..3000 {
            let mut placed: Vec<Placed> = (0..next(12))
                .map(|_| {
                    let (first, len) = (next(20), next(10));
                    let start = next(8) * ALIGN;
                    Placed { first, last: first + len, start, end: start + 1 + next(4 * ALIGN) }
                })
                .collect();
            placed.sort_by_key(|p| p.first);
            let first = placed.last().map_or(0, |p| p.first) + next(6);
            let span = (first, first + next(8));
            let (mut active, mut sweep) = (Active::default(), Sweep::default());
            for p in &placed {
                active.insert(p.last, p.start, p.end);
                sweep.insert(p.last, p.start, p.end);
            }
            let (active, sweep) = (active.expire(span.0), sweep.expire(span.0));
            let ranges: Vec<(usize, usize)> =
                placed.iter().filter(|p| p.first <= span.1 && p.last >= span.0).map(|p| (p.start, p.end)).collect();
            let mut kept: Vec<(usize, usize)> = active.ranges.keys().copied().collect();
            let mut want = ranges.clone();
            want.sort_unstable();
            want.dedup();
            kept.sort_unstable();
            assert_eq!(kept, want, "the live set");
            let (size, limit) = (1 + next(3 * ALIGN), if next(3) == 0 { next(12 * ALIGN) } else { usize::MAX });
            let fit = first_fit(Some(active), size, limit);
            assert_eq!(fit, reference(&ranges, size, limit));
            assert_eq!(fit, first_fit(Some(sweep), size, limit));
            // A range to write over: a live one, or one that is not live.
            let except = match ranges.get(next(ranges.len() + 1)) {
                Some(&r) => r,
                None => {
                    let start = next(10) * ALIGN;
                    (start, start + 1 + next(3 * ALIGN))
                }
            };
            let hi = except.0 + 1 + next(except.1 - except.0);
            let free = ranges.iter().filter(|&&r| r != except).all(|&(a, b)| hi <= a || except.0 >= b);
            assert_eq!(active.is_free(except.0, hi, except), free);
            assert_eq!(sweep.is_free(except.0, hi, except), free);
        }
    }

    /// Long runs of the layout's own pattern (expire at a rising position, place at the
    /// first fit or over a range that dies there, insert) give the same offsets and the
    /// same answers with [`Active`] as with the sweep, through the coverage tree's growth
    /// and the release and reuse of its nodes.
    #[test]
    fn active_answers_as_the_sweep_over_long_runs() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..200 {
            let (mut active, mut sweep) = (Active::default(), Sweep::default());
            let mut now = 0;
            let mut live: Vec<(usize, usize, usize)> = Vec::new();
            for _ in 0..300 {
                now += next(3);
                live.retain(|&(last, ..)| last >= now);
                active.expire(now);
                sweep.expire(now);
                let size = 1 + if next(4) == 0 { next(40 * ALIGN) } else { next(3 * ALIGN) };
                let last = now + if next(5) == 0 { next(200) } else { next(12) };
                let dying: Vec<&(usize, usize, usize)> = live.iter().filter(|r| r.0 == now).collect();
                let over = dying.get(next(dying.len() + 1)).map(|&&(_, s, e)| (s, e));
                let at = match over {
                    Some((s, e)) if s + size <= e && active.is_free(s, s + size, (s, e)) => {
                        assert!(sweep.is_free(s, s + size, (s, e)));
                        s
                    }
                    _ => {
                        let at = active.lowest_free(size);
                        assert_eq!(at, sweep.lowest_free(size));
                        at
                    }
                };
                active.insert(last, at, at + size);
                sweep.insert(last, at, at + size);
                live.push((last, at, at + size));
            }
            let big = 1 + next(64 * ALIGN);
            assert_eq!(active.lowest_free(big), sweep.lowest_free(big));
        }
    }

    /// A random program: kernels writing device, host and output buffers of random sizes
    /// from earlier ones at the same view (so many may write in place), some in loops.
    fn random_program(next: &mut impl FnMut(usize) -> usize) -> Program {
        let mut p = Program::default();
        let mut written: Vec<BufId> = Vec::new();
        let mut outputs = 0;
        let mut new_buffer = |p: &mut Program, next: &mut dyn FnMut(usize) -> usize| {
            let bytes = 4 * next(300) + if next(9) == 0 { 0 } else { 4 };
            let storage = match next(12) {
                0 => Storage::Arena { host: true },
                1 | 2 => {
                    outputs += 1;
                    Storage::Out { index: outputs - 1, host: next(6) == 0 }
                }
                _ => Storage::Arena { host: false },
            };
            p.new_buffer(storage, bytes, [4, 8][next(2)])
        };
        let mut kernel_step = |p: &mut Program, written: &mut Vec<BufId>, next: &mut dyn FnMut(usize) -> usize| {
            let dst =
                if !written.is_empty() && next(8) == 0 { written[next(written.len())] } else { new_buffer(p, next) };
            let view = |b: BufId| View::contiguous(b, DType::F32, &[4]);
            let mut src = Expr::Lit(LitValue::F32(1.0));
            for _ in 0..next(3) {
                if written.is_empty() {
                    break;
                }
                let a = written[written.len() - 1 - next(written.len().min(6))];
                let load = Expr::Load(view(a));
                src = Expr::Binary(remat_ir::BinaryOp::Add, DType::F32, Box::new(src), Box::new(load));
            }
            written.push(dst);
            Step::Kernel { space: vec![4], dst: view(dst), src }
        };
        for _ in 0..1 + next(60) {
            if next(10) == 0 {
                let counter = arena(&mut p, 4, 4);
                let body = (0..1 + next(4)).map(|_| kernel_step(&mut p, &mut written, next)).collect();
                p.steps.push(Step::Loop { length: 1 + next(3), reverse: false, counter, body });
            } else {
                let step = kernel_step(&mut p, &mut written, next);
                p.steps.push(step);
            }
        }
        p
    }

    /// The layout with [`Active`] is the sweep's, buffer by buffer (home, offset, written
    /// over) and in its sizes, on 3,000 random programs.
    #[test]
    fn the_layout_is_the_sweeps_on_random_programs() {
        let mut next = xorshift(0xD1B5_4A32_D192_ED03);
        let (mut in_outputs, mut in_place) = (0, 0);
        for seed in 0..3000 {
            let p = random_program(&mut next);
            let (new, _) = plan_with::<Active>(&p);
            let (old, _) = plan_with::<Sweep>(&p);
            assert_eq!(new.places, old.places, "program {seed}");
            assert_eq!(new.written_over, old.written_over, "program {seed}");
            assert_eq!((new.device_bytes, new.host_bytes), (old.device_bytes, old.host_bytes), "program {seed}");
            in_outputs += new.buffers_in_outputs();
            in_place += new.written_over.iter().flatten().count();
        }
        // The programs exercise both the outputs' memory and writing in place.
        assert!(in_outputs > 100 && in_place > 100, "{in_outputs} in outputs, {in_place} in place");
    }
}
