//! The lowered program: buffers and the steps that fill them. This is what the front end
//! (`lower`) produces, the planner (`plan`) lays out and the back end (`codegen`) compiles.
//!
//! What it keeps true: every arena buffer is written by steps before it is read (values are
//! single-assignment, except a scan's or a while loop's carry buffers, which the loop
//! itself rewrites at the end of each iteration, and a switch's outputs, which every branch
//! writes and exactly one runs), and steps appear in execution order.

use remat_ir::{Aval, DType, Primitive, ReduceOp};

// A buffer of the lowered program: defined with the views that read buffers.
pub(crate) use crate::expr::BufId;
use crate::expr::{Expr, View};

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// Planned into the device arena (or the host pool, for `<host>` values).
    Arena { host: bool },
    /// The caller's argument `i` (read only).
    Arg(usize),
    /// A constant of a closed jaxpr, owned by the compiled program (read only).
    Const(usize),
    /// The caller-visible output `index`, allocated by the runtime before the call, in host
    /// memory when its aval says so. Before its first write, its memory may hold arena
    /// values (the planner's `Home::Out`).
    Out { index: usize, host: bool },
}

#[derive(Clone, Debug)]
pub(crate) struct Buffer {
    pub storage: Storage,
    pub bytes: usize,
    /// The alignment its elements need: their size in bytes.
    pub align: usize,
}

/// What one `Step::Native` computes: the primitive, its operand and result types, and
/// where each operand and result sits in the step's base-address array (operands first).
#[derive(Clone, Debug)]
pub struct NativeDesc {
    pub prim: Primitive,
    pub in_avals: Vec<Aval>,
    pub out_avals: Vec<Aval>,
    pub slots: Vec<usize>,
}

/// A `dot_general` brought to `(batch..., m, k) x (batch..., k, n) -> (batch..., m, n)` with
/// one stride per group, in elements. The runtime loops over the batch and calls a GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct DotDesc {
    pub dtype: DType,
    /// `(extent, lhs stride, rhs stride, out stride)` per batch axis.
    pub batch: Vec<(usize, isize, isize, isize)>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Strides of lhs along m and k, rhs along k and n, out along m and n.
    pub lhs_m: isize,
    pub lhs_k: isize,
    pub rhs_k: isize,
    pub rhs_n: isize,
    pub out_m: isize,
    pub out_n: isize,
}

/// One step of the program, executed in order.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// `dst[i] = src(i)` for every `i` of the index space `space`.
    Kernel { space: Vec<usize>, dst: View, src: Expr },
    /// `dst[out(i)] = op(dst[out(i)], src(i))` over `space`, after filling `dst` with `op`'s
    /// identity, or, if `accumulate`, starting from what `dst` holds (`dst op= reduce(src)`,
    /// the combination grouped from `dst` on); `dst` is row-major over the kept axes.
    Reduce { op: ReduceOp, space: Vec<usize>, axes: Vec<usize>, dst: BufId, src: Expr, accumulate: bool },
    /// The index of the first maximum of `src` along `axis` (NaN counts as the largest).
    Argmax { space: Vec<usize>, axis: usize, dst: BufId, src: Expr },
    /// A product by the runtime's GEMM; `desc` is an index into the program's descriptors.
    /// The operands and the destination are addressed from their views' (static and
    /// dynamic) offsets; their strides are the descriptor's.
    Dot { desc: usize, lhs: View, rhs: View, dst: View },
    /// A runtime function over whole row-major buffers (`native::indexing`): `bufs` are
    /// the operands' then the results'; `desc` indexes the program's `natives`.
    Native { desc: usize, bufs: Vec<BufId>, num_ins: usize },
    /// `for i in 0..length`: store `i` (or `length - 1 - i` reversed) in the `i32` buffer
    /// `counter`, then run `body`.
    Loop { length: usize, reverse: bool, counter: BufId, body: Vec<Step> },
    /// `cond`: runs `branches[k]`, where `k` is the `i32` in `index` (XLA's `Case`: out of
    /// range, negative included, runs the last branch).
    Switch { index: BufId, branches: Vec<Vec<Step>> },
    /// `while`: runs `cond`, then, while the `bool` in `pred` is true, `body` and `cond`.
    While { cond: Vec<Step>, pred: BufId, body: Vec<Step> },
}

impl Step {
    /// The buffers the step reads and writes (a loop's include its body's).
    pub fn buffers(&self, out: &mut Vec<BufId>) {
        let view = |v: &View, out: &mut Vec<BufId>| {
            out.push(v.buf);
            out.extend(v.dynamic.iter().map(|d| d.index));
        };
        let expr = |e: &Expr, out: &mut Vec<BufId>| {
            e.visit(&mut |n| {
                if let Expr::Load(v) = n {
                    view(v, out)
                }
            })
        };
        match self {
            Step::Kernel { dst, src, .. } => {
                view(dst, out);
                expr(src, out);
            }
            Step::Reduce { dst, src, .. } | Step::Argmax { dst, src, .. } => {
                out.push(*dst);
                expr(src, out);
            }
            Step::Dot { lhs, rhs, dst, .. } => {
                view(lhs, out);
                view(rhs, out);
                // The destination's buffer last (after its offset's counters).
                out.extend(dst.dynamic.iter().map(|d| d.index));
                out.push(dst.buf);
            }
            Step::Native { bufs, .. } => out.extend(bufs),
            Step::Loop { counter, body, .. } => {
                out.push(*counter);
                body.iter().for_each(|s| s.buffers(out));
            }
            Step::Switch { index, branches } => {
                out.push(*index);
                branches.iter().flatten().for_each(|s| s.buffers(out));
            }
            Step::While { cond, pred, body } => {
                cond.iter().for_each(|s| s.buffers(out));
                out.push(*pred);
                body.iter().for_each(|s| s.buffers(out));
            }
        }
    }

    /// The buffers the step writes (a loop's include its counter and its body's).
    pub fn writes(&self, out: &mut Vec<BufId>) {
        match self {
            Step::Kernel { dst, .. } => out.push(dst.buf),
            Step::Reduce { dst, .. } | Step::Argmax { dst, .. } => out.push(*dst),
            Step::Dot { dst, .. } => out.push(dst.buf),
            Step::Native { bufs, num_ins, .. } => out.extend(&bufs[*num_ins..]),
            Step::Loop { counter, body, .. } => {
                out.push(*counter);
                body.iter().for_each(|s| s.writes(out));
            }
            Step::Switch { branches, .. } => branches.iter().flatten().for_each(|s| s.writes(out)),
            Step::While { cond, body, .. } => cond.iter().chain(body).for_each(|s| s.writes(out)),
        }
    }

    /// Whether the step (or any step inside it) reads or writes `buf`.
    pub fn touches(&self, buf: BufId) -> bool {
        let mut b = Vec::new();
        self.buffers(&mut b);
        b.contains(&buf)
    }

    /// Whether the step (or any step inside it) writes `buf`.
    pub fn writes_to(&self, buf: BufId) -> bool {
        let mut w = Vec::new();
        self.writes(&mut w);
        w.contains(&buf)
    }

    /// The distinct buffers of the step in the order `buffers` names them first: the
    /// layout of the base-address array its compiled function receives.
    pub fn canonical_buffers(&self) -> Vec<BufId> {
        let mut all = Vec::new();
        self.buffers(&mut all);
        let mut seen = Vec::with_capacity(all.len());
        for b in all {
            if !seen.contains(&b) {
                seen.push(b);
            }
        }
        seen
    }

    /// The step with its buffers renamed to their positions in `canonical_buffers`: two
    /// steps with equal keys compile to the same code over different base addresses.
    pub fn code_key(&self) -> String {
        let canon = self.canonical_buffers();
        let rename = |b: BufId| BufId(canon.iter().position(|&c| c == b).unwrap_or(usize::MAX) as u32);
        let view = |v: &View| View {
            buf: rename(v.buf),
            dynamic: v.dynamic.iter().map(|d| crate::expr::DynTerm { index: rename(d.index), ..d.clone() }).collect(),
            ..v.clone()
        };
        let expr = |e: &Expr| e.map_loads(&|v: &View| Expr::Load(view(v)));
        let renamed = match self {
            Step::Kernel { space, dst, src } => Step::Kernel { space: space.clone(), dst: view(dst), src: expr(src) },
            Step::Reduce { op, space, axes, dst, src, accumulate } => Step::Reduce {
                op: *op,
                space: space.clone(),
                axes: axes.clone(),
                dst: rename(*dst),
                src: expr(src),
                accumulate: *accumulate,
            },
            Step::Argmax { space, axis, dst, src } => {
                Step::Argmax { space: space.clone(), axis: *axis, dst: rename(*dst), src: expr(src) }
            }
            // The descriptor's address is passed after the buffers' (its contents are in the
            // key the code generator builds).
            Step::Dot { lhs, rhs, dst, .. } => Step::Dot { desc: 0, lhs: view(lhs), rhs: view(rhs), dst: view(dst) },
            Step::Native { bufs, num_ins, .. } => {
                Step::Native { desc: 0, bufs: bufs.iter().map(|&b| rename(b)).collect(), num_ins: *num_ins }
            }
            Step::Loop { .. } | Step::Switch { .. } | Step::While { .. } => self.clone(),
        };
        canonical_shared_ids(&format!("{renamed:?}"))
    }
}

/// `text` with the ids of `Shared(id, ..)` nodes renumbered in order of first appearance,
/// so that the same loop folded at different places gets the same key.
fn canonical_shared_ids(text: &str) -> String {
    const TAG: &str = "Shared(";
    let mut out = String::with_capacity(text.len());
    let mut ids: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(TAG) {
        let (head, tail) = rest.split_at(at + TAG.len());
        out.push_str(head);
        let digits = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
        let id = &tail[..digits];
        let n = ids.iter().position(|&x| x == id).unwrap_or_else(|| {
            ids.push(id);
            ids.len() - 1
        });
        out.push_str(&n.to_string());
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The whole lowered program.
#[derive(Clone, Debug, Default)]
pub(crate) struct Program {
    pub buffers: Vec<Buffer>,
    pub steps: Vec<Step>,
    pub dots: Vec<DotDesc>,
    pub natives: Vec<NativeDesc>,
    pub num_args: usize,
    pub num_consts: usize,
    pub num_outs: usize,
    /// Where the buffers and the top-level steps come from (read by the memory profile
    /// only; code generation ignores it).
    pub provenance: Provenance,
}

/// Which top-level equation of the lowered jaxpr made each buffer and each top-level step.
/// Whatever lowering a call, a scan or a cond makes belongs to the enclosing top-level
/// equation; the program's arguments, constants and outputs, and the final copies into
/// outputs, belong to none.
#[derive(Clone, Debug, Default)]
pub(crate) struct Provenance {
    /// Per buffer: the equation whose lowering created it.
    pub buffer_eqn: Vec<Option<usize>>,
    /// Per buffer: the top-level variable whose value it holds, if it holds one whole.
    pub buffer_var: Vec<Option<remat_ir::Var>>,
    /// Per top-level step: the equation whose lowering emitted it.
    pub step_eqn: Vec<Option<usize>>,
}

impl Program {
    pub fn new_buffer(&mut self, storage: Storage, bytes: usize, align: usize) -> BufId {
        let id = BufId(self.buffers.len() as u32);
        self.buffers.push(Buffer { storage, bytes, align });
        id
    }

    /// The slot of a non-arena buffer in the pointer table the entry function receives:
    /// arguments, then constants, then outputs.
    pub fn table_slot(&self, storage: Storage) -> Option<usize> {
        match storage {
            Storage::Arena { .. } => None,
            Storage::Arg(i) => Some(i),
            Storage::Const(i) => Some(self.num_args + i),
            Storage::Out { index, .. } => Some(self.num_args + self.num_consts + index),
        }
    }
}

/// A one-line summary of a step for debugging: its kind, index space, destination and the
/// buffers it reads (`REMAT_JIT_STEPS=1`).
pub(crate) fn describe(step: &Step, prog: &Program) -> String {
    let mut bufs = Vec::new();
    step.buffers(&mut bufs);
    let name = |b: &BufId| match prog.buffers[b.0 as usize].storage {
        Storage::Arena { .. } => format!("t{}", b.0),
        Storage::Arg(i) => format!("arg{i}"),
        Storage::Const(i) => format!("const{i}"),
        Storage::Out { index, .. } => format!("out{index}"),
    };
    let reads: Vec<String> = bufs.iter().skip(1).map(name).collect();
    let size = |e: &Expr| e.size();
    match step {
        Step::Kernel { space, dst, src } => {
            format!("kernel {space:?} -> {} ({} nodes) reads {}", name(&dst.buf), size(src), reads.join(" "))
        }
        Step::Reduce { op, space, axes, dst, src, accumulate } => format!(
            "reduce {op:?} {space:?} axes {axes:?} {}-> {} ({} nodes) reads {}",
            if *accumulate { "accumulating " } else { "" },
            name(dst),
            size(src),
            reads.join(" ")
        ),
        Step::Argmax { space, dst, .. } => format!("argmax {space:?} -> {}", name(dst)),
        Step::Dot { desc, dst, .. } => {
            // `buffers` lists a product's destination last.
            let reads: Vec<String> = bufs[..bufs.len() - 1].iter().map(name).collect();
            let d = &prog.dots[*desc];
            format!(
                "dot m={} n={} k={} batch={:?} strides lhs ({}, {}) rhs ({}, {}) out ({}, {}) -> {} reads {}",
                d.m,
                d.n,
                d.k,
                d.batch,
                d.lhs_m,
                d.lhs_k,
                d.rhs_k,
                d.rhs_n,
                d.out_m,
                d.out_n,
                name(&dst.buf),
                reads.join(" ")
            )
        }
        Step::Native { desc, bufs, num_ins } => {
            let (ins, outs) = bufs.split_at(*num_ins);
            let names = |bs: &[BufId]| bs.iter().map(name).collect::<Vec<_>>().join(" ");
            format!("{} -> {} reads {}", prog.natives[*desc].prim, names(outs), names(ins))
        }
        Step::Loop { length, body, .. } => {
            let inner: Vec<String> = body.iter().map(|s| format!("\n    | {}", describe(s, prog))).collect();
            format!("loop x{length} ({} steps){}", body.len(), inner.concat())
        }
        Step::Switch { branches, .. } => format!("switch of {} branches", branches.len()),
        Step::While { cond, body, .. } => format!("while ({} + {} steps)", cond.len(), body.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::canonical_shared_ids;

    #[test]
    fn shared_ids_are_renumbered_by_first_appearance() {
        let a = "Binary(Mul, F32, Shared(17, Load(x)), Shared(17, Load(x))) Shared(4, Lit) Shared(170, y)";
        let want = "Binary(Mul, F32, Shared(0, Load(x)), Shared(0, Load(x))) Shared(1, Lit) Shared(2, y)";
        assert_eq!(canonical_shared_ids(a), want);
        assert_eq!(canonical_shared_ids("no shared nodes"), "no shared nodes");
    }
}
