//! Static buffer planning: every arena buffer gets an offset, laid out by liveness.
//!
//! Steps are numbered in execution order (a loop's body steps get their own numbers inside
//! the loop's range). A buffer lives from its first to its last reference; a buffer that is
//! referenced both inside a loop and outside it lives across the whole loop, because every
//! iteration reads it again. Buffers whose lifetimes do not overlap may share memory; the
//! layout is a greedy first fit in order of first use. An elementwise kernel may write its
//! result in place over an operand that dies at that kernel, when it reads that operand only
//! at the element it writes (same view): each element is read before it is overwritten.
//!
//! What it keeps true: two buffers whose lifetimes overlap never overlap in memory, every
//! offset is a multiple of [`ALIGN`], and `peak` bounds every buffer's end.

use crate::expr::{Expr, View};
use crate::program::{BufId, Program, Step, Storage};

/// The alignment of every arena buffer.
pub(crate) const ALIGN: usize = 64;

/// Where each arena buffer lives, and how big the arena and the host pool are.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// The byte offset of each buffer in its pool (`None` for non-arena buffers).
    pub offsets: Vec<Option<usize>>,
    pub device_bytes: usize,
    pub host_bytes: usize,
}

pub(crate) fn plan(prog: &Program) -> Layout {
    let n = prog.buffers.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    let mut loops = Vec::new();
    let mut pos = 0;
    let mut candidates = Vec::new();
    number(&prog.steps, &mut pos, &mut first, &mut last, &mut loops, &mut candidates);
    // A buffer used inside a loop and outside it must survive every iteration.
    for _ in 0..2 {
        for &(s, e) in &loops {
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
    // In-place pairs (dst, operand): the operand's last use is the kernel that first writes dst.
    let mut in_place: Vec<Option<usize>> = vec![None; n];
    for (s, dst, ops) in candidates {
        let d = dst.0 as usize;
        if first[d] != s || !matches!(prog.buffers[d].storage, Storage::Arena { .. }) {
            continue;
        }
        in_place[d] = ops.iter().map(|b| b.0 as usize).find(|&a| {
            a != d
                && last[a] == s
                && prog.buffers[a].storage == prog.buffers[d].storage
                && prog.buffers[a].bytes >= prog.buffers[d].bytes
        });
    }
    let mut layout = Layout { offsets: vec![None; n], device_bytes: 0, host_bytes: 0 };
    for host in [false, true] {
        let mut order: Vec<usize> =
            (0..n).filter(|&b| prog.buffers[b].storage == Storage::Arena { host } && first[b] != usize::MAX).collect();
        order.sort_by_key(|&b| (first[b], std::cmp::Reverse(prog.buffers[b].bytes)));
        let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new(); // (first, last, offset, end)
        let mut peak = 0;
        for b in order {
            let size = prog.buffers[b].bytes.max(1);
            let live: Vec<(usize, usize)> = placed
                .iter()
                .filter(|&&(f, l, _, _)| f <= last[b] && l >= first[b])
                .map(|&(_, _, o, e)| (o, e))
                .collect();
            // Over the dying operand, if nothing else live overlaps its place.
            let reuse = in_place[b].and_then(|a| layout.offsets[a]).filter(|&o| {
                let operand = (o, o + prog.buffers[in_place[b].unwrap_or(b)].bytes.max(1));
                live.iter().filter(|&&r| r != operand).all(|&(lo, hi)| o + size <= lo || o >= hi)
            });
            if let Some(offset) = reuse {
                placed.push((first[b], last[b], offset, offset + size));
                layout.offsets[b] = Some(offset);
                peak = peak.max(offset + size);
                continue;
            }
            let mut candidates: Vec<usize> = std::iter::once(0).chain(live.iter().map(|&(_, e)| align(e))).collect();
            candidates.sort_unstable();
            let offset = candidates
                .into_iter()
                .find(|&o| live.iter().all(|&(lo, hi)| o + size <= lo || o >= hi))
                .expect("the end of the last live buffer is always free");
            placed.push((first[b], last[b], offset, offset + size));
            layout.offsets[b] = Some(offset);
            peak = peak.max(offset + size);
        }
        if host {
            layout.host_bytes = align(peak);
        } else {
            layout.device_bytes = align(peak);
        }
    }
    layout
}

fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// An elementwise kernel at a step, its destination, and the operands it reads only at the
/// element it writes (candidates for writing in place).
type InPlace = (usize, BufId, Vec<BufId>);

/// Numbers the steps, recording each buffer's first and last reference and each loop's range.
fn number(
    steps: &[Step],
    pos: &mut usize,
    first: &mut [usize],
    last: &mut [usize],
    loops: &mut Vec<(usize, usize)>,
    in_place: &mut Vec<InPlace>,
) {
    for step in steps {
        if let Step::Kernel { dst, src, .. } = step {
            if dst.dynamic.is_empty() {
                in_place.push((*pos, dst.buf, same_view_operands(dst, src)));
            }
        }
        match step {
            Step::Loop { counter, body, .. } => {
                let s = *pos;
                touch(*counter, s, first, last);
                number(body, pos, first, last, loops, in_place);
                let e = (*pos).max(s + 1) - 1;
                touch(*counter, e, first, last);
                loops.push((s, e));
            }
            Step::Kernel { .. } | Step::Reduce { .. } | Step::Argmax { .. } | Step::Dot { .. } => {
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

/// The buffers `src` reads only through exactly the view `dst` writes.
fn same_view_operands(dst: &View, src: &Expr) -> Vec<BufId> {
    let mut same = Vec::new();
    let mut other = Vec::new();
    src.visit(&mut |e| {
        if let Expr::Load(v) = e {
            let aligned = v.dtype == dst.dtype && v.offset == dst.offset && v.strides == dst.strides;
            if aligned && v.dynamic.is_empty() {
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
        let a = p.new_buffer(Storage::Arena { host: false }, 16);
        let b = p.new_buffer(Storage::Arena { host: false }, 16);
        let c = p.new_buffer(Storage::Arena { host: false }, 16);
        // a -> b -> c: a is dead once b is written, so c can take a's place.
        p.steps = vec![kernel(a, None), reversing(b, a), reversing(c, b)];
        let l = plan(&p);
        assert_eq!(l.offsets[a.0 as usize], l.offsets[c.0 as usize]);
        assert_ne!(l.offsets[a.0 as usize], l.offsets[b.0 as usize]);
        assert_eq!(l.device_bytes, 128);
    }

    #[test]
    fn an_elementwise_kernel_writes_over_an_operand_that_dies_there() {
        let mut p = Program::default();
        let a = p.new_buffer(Storage::Arena { host: false }, 16);
        let b = p.new_buffer(Storage::Arena { host: false }, 16);
        let c = p.new_buffer(Storage::Arena { host: false }, 16);
        let d = p.new_buffer(Storage::Arena { host: false }, 16);
        // Each kernel reads its operand at the element it writes and the operand dies there,
        // so the whole chain lives in one place.
        p.steps = vec![kernel(a, None), kernel(b, Some(a)), kernel(c, Some(b)), kernel(d, Some(c))];
        let l = plan(&p);
        assert_eq!(l.offsets[a.0 as usize], l.offsets[b.0 as usize]);
        assert_eq!(l.offsets[b.0 as usize], l.offsets[c.0 as usize]);
        assert_eq!(l.device_bytes, 64);
    }

    #[test]
    fn buffers_read_inside_a_loop_live_across_it() {
        let mut p = Program::default();
        let outer = p.new_buffer(Storage::Arena { host: false }, 16);
        let counter = p.new_buffer(Storage::Arena { host: false }, 4);
        let inner = p.new_buffer(Storage::Arena { host: false }, 16);
        let body = vec![kernel(inner, None), kernel(inner, Some(outer))];
        p.steps = vec![kernel(outer, None), Step::Loop { length: 3, reverse: false, counter, body }];
        let l = plan(&p);
        let offs: Vec<usize> = [outer, counter, inner].iter().map(|b| l.offsets[b.0 as usize].unwrap()).collect();
        assert!(offs[0] != offs[2] && offs[1] != offs[2] && offs[0] != offs[1]);
    }
}
