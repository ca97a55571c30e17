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

use std::collections::HashMap;

use crate::expr::{row_major_strides, Expr, View};
use crate::program::{BufId, Program, Step, Storage};

/// Folds every eligible kernel into its consumer, one at a time with fresh reference
/// counts (a folded consumer may itself fold into the next).
pub(crate) fn fold_single_consumer_kernels(prog: &mut Program, max_nodes: usize) {
    let mut next_id = 0u32;
    loop {
        let mut counts = HashMap::new();
        count_references(&prog.steps, &mut counts);
        let buffers = &prog.buffers;
        let arena = |b: BufId| matches!(buffers[b.0 as usize].storage, Storage::Arena { host: false });
        let mut steps = std::mem::take(&mut prog.steps);
        let folded = fold_in(&mut steps, &counts, &arena, max_nodes, &mut next_id);
        prog.steps = steps;
        if !folded {
            break;
        }
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

/// The buffers a step writes (a loop's include its counter and its body's).
fn writes(step: &Step, out: &mut Vec<BufId>) {
    match step {
        Step::Kernel { dst, .. } => out.push(dst.buf),
        Step::Reduce { dst, .. } | Step::Argmax { dst, .. } | Step::Dot { dst, .. } => out.push(*dst),
        Step::Native { bufs, num_ins, .. } => out.extend(&bufs[*num_ins..]),
        Step::Loop { counter, body, .. } => {
            out.push(*counter);
            body.iter().for_each(|s| writes(s, out));
        }
        Step::Switch { branches, .. } => branches.iter().flatten().for_each(|s| writes(s, out)),
        Step::While { cond, body, .. } => cond.iter().chain(body).for_each(|s| writes(s, out)),
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

/// Folds the first eligible kernel of a step list or, failing that, of a loop body in it;
/// true if one folded (the counts are then stale).
fn fold_in(
    steps: &mut Vec<Step>,
    counts: &HashMap<BufId, usize>,
    arena: &impl Fn(BufId) -> bool,
    max_nodes: usize,
    next_id: &mut u32,
) -> bool {
    for p in 0..steps.len() {
        let Some(c) = consumer_of(steps, p, counts, arena, max_nodes) else { continue };
        let Step::Kernel { dst, src: value, .. } = steps.remove(p) else { unreachable!("checked a kernel") };
        let shared = Expr::Shared(*next_id, Box::new(value));
        *next_id += 1;
        match &mut steps[c - 1] {
            Step::Kernel { src, .. } | Step::Reduce { src, .. } => *src = substitute(src, dst.buf, &shared),
            _ => unreachable!("checked a kernel or a reduction"),
        }
        return true;
    }
    steps.iter_mut().any(|s| match s {
        Step::Loop { body, .. } => fold_in(body, counts, arena, max_nodes, next_id),
        Step::Switch { branches, .. } => branches.iter_mut().any(|br| fold_in(br, counts, arena, max_nodes, next_id)),
        Step::While { cond, body, .. } => {
            fold_in(cond, counts, arena, max_nodes, next_id) || fold_in(body, counts, arena, max_nodes, next_id)
        }
        _ => false,
    })
}

/// The position of the step that can absorb kernel `p`, if there is one.
fn consumer_of(
    steps: &[Step],
    p: usize,
    counts: &HashMap<BufId, usize>,
    arena: &impl Fn(BufId) -> bool,
    max_nodes: usize,
) -> Option<usize> {
    let Step::Kernel { space, dst, src: value } = &steps[p] else { return None };
    let b = dst.buf;
    if !arena(b) || !whole_row_major(dst, space) {
        return None;
    }
    // The consumer is the next step that names `b`; it must be the only other one.
    let c = (p + 1..steps.len()).find(|&j| {
        let mut bufs = Vec::new();
        steps[j].buffers(&mut bufs);
        bufs.contains(&b)
    })?;
    let (c_space, c_src, c_dst) = match &steps[c] {
        Step::Kernel { space, src, dst } => (space, src, dst.buf),
        Step::Reduce { space, src, dst, .. } => (space, src, *dst),
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
    if c_space != space || !aligned || counts.get(&b).copied().unwrap_or(0) != 1 + loads {
        return None;
    }
    // Same values at the consumer: nothing in between (nor the consumer) writes what the
    // value reads.
    let read = reads(value);
    let mut written = vec![c_dst];
    steps[p + 1..c].iter().for_each(|s| writes(s, &mut written));
    if written.iter().any(|w| read.contains(w)) {
        return None;
    }
    // Keep the consumer's vector loop, and its body within the fusion limit.
    if c_src.vectorizable() && !value.vectorizable() {
        return None;
    }
    (c_src.size() + value.size() <= max_nodes).then_some(c)
}

/// `e` with every load of `buf` replaced by `shared`.
fn substitute(e: &Expr, buf: BufId, shared: &Expr) -> Expr {
    e.map_loads(&|v: &View| if v.buf == buf { shared.clone() } else { Expr::Load(v.clone()) })
}
