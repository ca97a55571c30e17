//! Kernels folded into their only consumer as shared subexpressions.
//!
//! The lowering materializes a non-trivial value with more than one use, so that it is
//! computed once. When all those uses end up in one later loop, over the same index space and
//! at the very points the value was written, the buffer is not needed: the consumer can
//! compute the value once per point, in registers ([`Expr::Shared`]). This is the backward
//! pass of a `tanh` layer: `j = g * (1 - h)` feeds both terms of `j + j * h`, which becomes
//! one loop that writes only the sum.
//!
//! What it keeps true: the folded expression reads the same values in the consumer as it
//! did in its own step (no step in between writes a buffer it reads, and the consumer does
//! not write one), the consumer's loop keeps its vectorization, and loop bodies stay within
//! the fusion size limit.

use std::collections::{HashMap, HashSet};

use crate::expr::{row_major_strides, Expr, View};
use crate::program::{BufId, Program, Step, Storage};

/// Folds every eligible kernel into its consumer. Each step list is swept front to back,
/// folding as it goes with the reference counts kept up to date, and swept again while a
/// sweep folds something (a folded consumer may itself fold into the next, and a fold can
/// make an earlier kernel eligible); loop bodies and branches after their own list. A
/// sweep is linear in the list's length (up to logarithms): the consumer of a kernel and
/// the steps that write in between are found in per-buffer position lists.
///
/// A kernel that writes one of `freeing` and whose every input its consumer reads anyway
/// may take the consumer up to twice `max_nodes`: such a fold frees the kernel's buffer and
/// keeps no other buffer alive longer. It can cost time (a `tanh` kernel of its own runs at
/// the CPU's widest vectors, `native::vmath`; inside a consumer at four lanes), so the
/// lowering names only the buffers live at the planned peak, and keeps the folds only where
/// they lower it.
///
/// Returns the buffers whose kernels were refused only because `freeing` did not name them:
/// a fold past `max_nodes` that would have been taken for a buffer in `freeing`. Folding
/// again from the same program with a `freeing` set that names none of them makes the same
/// decisions, and so the same program.
pub(crate) fn fold_single_consumer_kernels(
    prog: &mut Program,
    max_nodes: usize,
    freeing: &HashSet<BufId>,
) -> HashSet<BufId> {
    let mut counts = HashMap::new();
    count_references(&prog.steps, &mut counts);
    let buffers = &prog.buffers;
    let arena = |b: BufId| matches!(buffers[b.0 as usize].storage, Storage::Arena { host: false });
    let mut fold = Fold { counts, arena: &arena, max_nodes, freeing, next_id: 0, refused: HashSet::new() };
    let mut steps = std::mem::take(&mut prog.steps);
    fold.list(&mut steps);
    prog.steps = steps;
    fold.refused
}

/// The state of the folding: reference counts of the whole program, and the ids of the
/// shared nodes made so far.
struct Fold<'a, A: Fn(BufId) -> bool> {
    counts: HashMap<BufId, usize>,
    arena: &'a A,
    max_nodes: usize,
    /// The buffers whose kernels may take a consumer past `max_nodes` (see
    /// [`fold_single_consumer_kernels`]).
    freeing: &'a HashSet<BufId>,
    next_id: u32,
    /// The buffers whose kernels a freeing fold would have taken, had `freeing` named them.
    refused: HashSet<BufId>,
}

impl<A: Fn(BufId) -> bool> Fold<'_, A> {
    fn list(&mut self, steps: &mut Vec<Step>) {
        while self.sweep(steps) {}
        for s in steps.iter_mut() {
            match s {
                Step::Loop { body, .. } => self.list(body),
                Step::Switch { branches, .. } => branches.iter_mut().for_each(|br| self.list(br)),
                Step::While { cond, body, .. } => {
                    self.list(cond);
                    self.list(body);
                }
                Step::Kernel { .. }
                | Step::Reduce { .. }
                | Step::Argmax { .. }
                | Step::Dot { .. }
                | Step::Native { .. } => {}
            }
        }
    }

    /// One sweep over a step list; true if a kernel folded.
    fn sweep(&mut self, steps: &mut Vec<Step>) -> bool {
        let mut slots: Vec<Option<Step>> = steps.drain(..).map(Some).collect();
        // The positions of the steps that name (read or write) each buffer, and of those
        // that write it, ascending.
        let mut namers: HashMap<BufId, Vec<usize>> = HashMap::new();
        let mut writers: HashMap<BufId, Vec<usize>> = HashMap::new();
        for (i, s) in slots.iter().flatten().enumerate() {
            let mut bufs = Vec::new();
            s.buffers(&mut bufs);
            let mut w = Vec::new();
            s.writes(&mut w);
            for (map, mut list) in [(&mut namers, bufs), (&mut writers, w)] {
                list.sort_unstable();
                list.dedup();
                for b in list {
                    map.entry(b).or_default().push(i);
                }
            }
        }
        let mut folded = false;
        for p in 0..slots.len() {
            let Some((c, loads)) = self.consumer_of(&slots, p, &namers, &writers) else { continue };
            let Some(Step::Kernel { dst, src: value, .. }) = slots[p].take() else { unreachable!("checked a kernel") };
            // The value's loads move to the consumer, once per load of the buffer there.
            let read = reads(&value);
            for &r in &read {
                *self.counts.entry(r).or_default() += loads - 1;
            }
            self.counts.remove(&dst.buf);
            for r in read {
                let list = namers.entry(r).or_default();
                if let Err(at) = list.binary_search(&c) {
                    list.insert(at, c);
                }
            }
            let shared = Expr::Shared(self.next_id, Box::new(value));
            self.next_id += 1;
            match &mut slots[c] {
                Some(Step::Kernel { src, .. } | Step::Reduce { src, .. }) => *src = substitute(src, dst.buf, &shared),
                _ => unreachable!("checked a kernel or a reduction"),
            }
            folded = true;
        }
        steps.extend(slots.into_iter().flatten());
        folded
    }

    /// The position of the step that can absorb kernel `p`, if there is one, and how many
    /// times it loads the kernel's buffer.
    fn consumer_of(
        &mut self,
        slots: &[Option<Step>],
        p: usize,
        namers: &HashMap<BufId, Vec<usize>>,
        writers: &HashMap<BufId, Vec<usize>>,
    ) -> Option<(usize, usize)> {
        let Some(Step::Kernel { space, dst, src: value }) = &slots[p] else { return None };
        let b = dst.buf;
        if !(self.arena)(b) || !whole_row_major(dst, space) {
            return None;
        }
        // The consumer is the next step that names `b`; it must be the only other one.
        let named = namers.get(&b)?;
        let after = named.partition_point(|&j| j <= p);
        let c = named[after..].iter().copied().find(|&j| slots[j].is_some())?;
        let (c_space, c_src, c_dst) = match &slots[c] {
            Some(Step::Kernel { space, src, dst }) => (space, src, dst.buf),
            Some(Step::Reduce { space, src, dst, .. }) => (space, src, *dst),
            _ => return None,
        };
        let mut loads = 0;
        let mut aligned = true;
        c_src.visit(&mut |n| {
            if let Expr::Load(v) = n {
                if v.buf == b {
                    loads += 1;
                    aligned &= whole_row_major(v, space);
                }
                aligned &= v.dynamic.iter().all(|d| d.index != b);
            }
        });
        if c_space != space || !aligned || self.counts.get(&b).copied().unwrap_or(0) != 1 + loads {
            return None;
        }
        // Same values at the consumer: nothing in between (nor the consumer) writes what the
        // value reads.
        let read = reads(value);
        let written_between =
            |r: &BufId| writers.get(r).is_some_and(|w| w.get(w.partition_point(|&j| j <= p)).is_some_and(|&j| j < c));
        if read.contains(&c_dst) || read.iter().any(written_between) {
            return None;
        }
        // Keep the consumer's vector loop, and its body within the fusion limit (twice it
        // for a freeing fold: a buffer at the peak whose every input the consumer reads).
        if c_src.vectorizable() && !value.vectorizable() {
            return None;
        }
        let size = c_src.size() + value.size();
        let frees = || {
            let consumer_reads = reads(c_src);
            read.iter().all(|r| consumer_reads.contains(r))
        };
        let fits = size <= self.max_nodes || (size <= 2 * self.max_nodes && self.freeing.contains(&b) && frees());
        if !fits && size <= 2 * self.max_nodes && frees() {
            self.refused.insert(b);
        }
        fits.then_some((c, loads))
    }
}

/// How many times each buffer is named by any step (destinations and every load).
fn count_references(steps: &[Step], counts: &mut HashMap<BufId, usize>) {
    for s in steps {
        let mut bufs = Vec::new();
        s.buffers(&mut bufs);
        for b in bufs {
            *counts.entry(b).or_default() += 1;
        }
    }
}

/// The buffers an expression reads (loads and their dynamic offsets).
fn reads(e: &Expr) -> Vec<BufId> {
    let mut out = Vec::new();
    e.visit(&mut |n| {
        if let Expr::Load(v) = n {
            out.push(v.buf);
            out.extend(v.dynamic.iter().map(|d| d.index));
        }
    });
    out
}

/// Whether `v` reads a buffer of `space` row-major from its start (the way a kernel over
/// `space` writes it).
fn whole_row_major(v: &View, space: &[usize]) -> bool {
    v.offset == 0 && v.dynamic.is_empty() && v.strides == row_major_strides(space)
}

/// `e` with every load of `buf` replaced by `shared`.
fn substitute(e: &Expr, buf: BufId, shared: &Expr) -> Expr {
    e.map_loads(&|v: &View| if v.buf == buf { shared.clone() } else { Expr::Load(v.clone()) })
}
