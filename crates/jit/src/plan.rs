//! Static buffer planning: every arena buffer gets an offset, laid out by liveness.
//!
//! Steps are numbered in execution order (a loop's body steps get their own numbers inside
//! the loop's range). A buffer lives from its first to its last reference; a buffer that is
//! referenced both inside a loop and outside it lives across the whole loop, because every
//! iteration reads it again. Buffers whose lifetimes do not overlap may share memory; the
//! layout is a greedy first fit in order of first use.
//!
//! What it keeps true: two buffers whose lifetimes overlap never overlap in memory, every
//! offset is a multiple of [`ALIGN`], and `peak` bounds every buffer's end.

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
    number(&prog.steps, &mut pos, &mut first, &mut last, &mut loops);
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

/// Numbers the steps, recording each buffer's first and last reference and each loop's range.
fn number(steps: &[Step], pos: &mut usize, first: &mut [usize], last: &mut [usize], loops: &mut Vec<(usize, usize)>) {
    for step in steps {
        match step {
            Step::Loop { counter, body, .. } => {
                let s = *pos;
                touch(*counter, s, first, last);
                number(body, pos, first, last, loops);
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

fn touch(b: BufId, pos: usize, first: &mut [usize], last: &mut [usize]) {
    let b = b.0 as usize;
    first[b] = first[b].min(pos);
    last[b] = last[b].max(pos);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{Expr, View};
    use remat_ir::{DType, LitValue};

    fn kernel(dst: BufId, src: Option<BufId>) -> Step {
        let src = match src {
            Some(b) => Expr::Load(View::contiguous(b, DType::F32, &[4])),
            None => Expr::Lit(LitValue::F32(1.0)),
        };
        Step::Kernel { space: vec![4], dst: View::contiguous(dst, DType::F32, &[4]), src }
    }

    #[test]
    fn buffers_with_disjoint_lifetimes_share_memory() {
        let mut p = Program::default();
        let a = p.new_buffer(Storage::Arena { host: false }, 16);
        let b = p.new_buffer(Storage::Arena { host: false }, 16);
        let c = p.new_buffer(Storage::Arena { host: false }, 16);
        // a -> b -> c: a is dead once b is written, so c can take a's place.
        p.steps = vec![kernel(a, None), kernel(b, Some(a)), kernel(c, Some(b))];
        let l = plan(&p);
        assert_eq!(l.offsets[a.0 as usize], l.offsets[c.0 as usize]);
        assert_ne!(l.offsets[a.0 as usize], l.offsets[b.0 as usize]);
        assert_eq!(l.device_bytes, 128);
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
