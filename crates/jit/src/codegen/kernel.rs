//! Loop nests: elementwise kernels, reductions and `argmax`.
//!
//! Every address in a loop nest is an affine function of the loop indices. The "users" of a
//! nest are the destination and every leaf of the expression (loads and iotas), each with
//! one stride per loop dimension. Before emitting loops, unit dimensions are dropped and
//! adjacent dimensions that every user walks contiguously are merged, so most kernels
//! become a single loop. The innermost loop runs over `f32x4` vectors (when the expression
//! is vectorizable) with a scalar tail for the last `n % 4` elements.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::Variable;
use remat_ir::{BinaryOp, DType, LitValue, ReduceOp, UnaryOp};

use super::eval::vectorizable;
use super::{clif_type, mem, Fx};
use crate::expr::{row_major_strides, Expr, View};
use crate::lower::reduce_identity;
use crate::native::{vmath, Import};
use crate::program::{BufId, Step};
use crate::JitError;

/// Rows shorter than this keep `exp`/`tanh` inline: the call would cost more than it saves.
const SLICE_MIN_ROW: i64 = 16;

/// The native slice function for `op` on f32 rows of `row` elements, if there is one and
/// it is worth a call. Only with FMA, which the inline code must use for the two to agree.
fn slice_import(op: UnaryOp, row: i64, fma: bool) -> Option<Import> {
    if row < SLICE_MIN_ROW || !fma || vmath::width().is_none() {
        return None;
    }
    match op {
        UnaryOp::Exp => Some(Import::ExpF32Slice),
        UnaryOp::Tanh => Some(Import::TanhF32Slice),
        _ => None,
    }
}

/// A block of rows handed to a slice function at once holds at most this many elements
/// (16 KiB of f32: written by the kernel just before, it is still in L1). One call per row
/// of 64 elements ran latency-bound: four 16-lane vectors do not fill the pipelines of the
/// ~20-operation dependency chain of `tanh` (docs/benchmarks_history.md, "Small programs").
const SLICE_BLOCK: i64 = 4096;

/// How many rows of a slice kernel's nest go to the slice function per call, when more
/// than one: the destination's rows (the innermost dimension, stride 1) must follow each
/// other in memory, and a thread's range must not cut the row dimension.
fn slice_block(nest: &Nest, split: Option<(usize, Value, Value)>) -> Option<i64> {
    let rank = nest.ext.len();
    if rank < 2 || split.is_some_and(|(d, _, _)| d + 2 >= rank) {
        return None;
    }
    let (outer, width) = (nest.ext[rank - 2], nest.ext[rank - 1]);
    if nest.strides[0][rank - 1] != 1 || nest.strides[0][rank - 2] != width {
        return None;
    }
    let rows = (SLICE_BLOCK / width).min(outer);
    (rows >= 2).then_some(rows)
}

/// A slice kernel's expression `a + b` where, over the last two dimensions of the nest,
/// one operand walks the destination's rows and the other is one row broadcast down them
/// (a bias): the buffers of `(rows, row)` and the user index of each (1 and 2, the
/// destination being user 0), for one fused call per block instead of a loop then a call.
fn add_row_operands(x: &Expr, nest: &Nest) -> Option<[(BufId, usize); 2]> {
    let Expr::Binary(BinaryOp::Add, DType::F32, a, b) = x else { return None };
    let (Expr::Load(va), Expr::Load(vb)) = (&**a, &**b) else { return None };
    let rank = nest.ext.len();
    if nest.strides.len() != 3 || va.dtype != DType::F32 || vb.dtype != DType::F32 {
        return None;
    }
    let tail = |user: usize| &nest.strides[user][rank - 2..];
    let (rows, row) = ([nest.ext[rank - 1], 1], [0, 1]);
    if tail(1) == rows && tail(2) == row {
        Some([(va.buf, 1), (vb.buf, 2)])
    } else if tail(2) == rows && tail(1) == row {
        Some([(vb.buf, 2), (va.buf, 1)])
    } else {
        None
    }
}

/// The users of a nest: strides per dimension and base offsets.
struct Nest {
    ext: Vec<i64>,
    strides: Vec<Vec<i64>>,
}

impl Nest {
    fn new(space: &[usize], strides: Vec<Vec<i64>>) -> Option<Nest> {
        if space.contains(&0) {
            return None;
        }
        let keep: Vec<usize> = (0..space.len()).filter(|&d| space[d] != 1).collect();
        let mut ext: Vec<i64> = keep.iter().map(|&d| space[d] as i64).collect();
        let mut st: Vec<Vec<i64>> = strides.iter().map(|s| keep.iter().map(|&d| s[d]).collect()).collect();
        let mut j = 0;
        while j + 1 < ext.len() {
            let (inner_ext, mergeable) = (ext[j + 1], st.iter().all(|s| s[j] == s[j + 1] * ext[j + 1]));
            if mergeable {
                ext[j + 1] *= ext[j];
                ext.remove(j);
                for s in &mut st {
                    s.remove(j);
                }
                let _ = inner_ext;
            } else {
                j += 1;
            }
        }
        Some(Nest { ext, strides: st })
    }

    fn inner(&self) -> Vec<i64> {
        self.strides.iter().map(|s| s.last().copied().unwrap_or(0)).collect()
    }
}

/// The strides of every leaf of `e`, in evaluation order, and the base offsets to load.
fn leaf_strides(e: &Expr, out: &mut Vec<Vec<i64>>) {
    e.visit(&mut |n| match n {
        Expr::Load(v) => out.push(v.strides.clone()),
        Expr::Iota(_, a) => out.push(a.coeffs.clone()),
        _ => {}
    });
}

/// Loop nests with at least this many iterations are split over the worker threads.
///
/// The cheapest fused loops run at about 0.5 ns per element (`cargo bench -p remat-jit --
/// kernels`), so 2^13 elements are ~4 us. Handing a range to a helper thread that is
/// spinning between forks (`native::pool`) costs well under a microsecond; while forks woke
/// rayon's workers (a few microseconds each) the bound was 2^15. The wide scans' per-step
/// `[32, 512]` loops are split since (docs/benchmarks_history.md, "Forks and joins without
/// wake-ups; products side by side").
pub(crate) const PARALLEL_MIN_ELEMENTS: i64 = 1 << 13;

/// How a step's loop nest is split over threads: the split dimension's extent and the
/// multiple every range bound keeps (4 when it is the vectorized innermost dimension, so
/// each range runs whole `f32x4` vectors and only the last has a scalar tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    pub total: i64,
    pub grain: i64,
}

/// The nest of a kernel step, destination first.
fn kernel_nest(space: &[usize], dst: &View, src: &Expr) -> Option<Nest> {
    let mut strides = vec![dst.strides.clone()];
    leaf_strides(src, &mut strides);
    Nest::new(space, strides)
}

/// The shape a reduction of `space` over `axes` produces.
fn kept_shape(space: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..space.len()).filter(|k| !axes.contains(k)).map(|k| space[k]).collect()
}

/// The nest of a reduction: the destination's strides are 0 along the reduced axes.
/// The elements a vector sum adds in chains before it adds them into its compensated
/// total (`sum_blocks`): 64 additions a lane.
const SUM_BLOCK: i64 = 1024;

/// Four vector accumulators, each starting at the reduction's identity `id`.
fn chains_of(fx: &mut Fx<'_, '_>, id: LitValue) -> Vec<Variable> {
    (0..4)
        .map(|_| {
            let var = fx.b.declare_var(types::F32X4);
            let idv = fx.lit(id, true);
            fx.b.def_var(var, idv);
            var
        })
        .collect()
}

fn reduce_nest(space: &[usize], axes: &[usize], src: &Expr) -> Option<Nest> {
    let rm = row_major_strides(&kept_shape(space, axes));
    let mut kept = rm.iter();
    let dst_strides: Vec<i64> =
        (0..space.len()).map(|k| if axes.contains(&k) { 0 } else { *kept.next().unwrap_or(&0) }).collect();
    let mut strides = vec![dst_strides];
    leaf_strides(src, &mut strides);
    Nest::new(space, strides)
}

/// The dimension of a nest that threads split: the outermost one along which the
/// destination moves. Distinct indices along it write distinct destination elements (every
/// destination stride is nonzero for a kernel; a reduction's is nonzero exactly on kept
/// axes), so ranges never write the same element, and each element's reduction order is
/// the serial one.
fn split_dim(nest: &Nest) -> Option<usize> {
    nest.strides[0].iter().position(|&s| s != 0)
}

/// Whether and how a step runs split over threads (`None`: one thread).
pub(crate) fn parallel_split(step: &Step) -> Option<Split> {
    let nest = match step {
        Step::Kernel { space, dst, src } => {
            let nest = kernel_nest(space, dst, src)?;
            // Only destinations that are one-to-one views: no zero strides.
            if nest.strides[0].contains(&0) {
                return None;
            }
            nest
        }
        Step::Reduce { space, axes, src, .. } => reduce_nest(space, axes, src)?,
        Step::Argmax { .. }
        | Step::Dot { .. }
        | Step::Native { .. }
        | Step::Loop { .. }
        | Step::Switch { .. }
        | Step::While { .. } => return None,
    };
    let elements: i64 = nest.ext.iter().product();
    let d = split_dim(&nest)?;
    let grain = if d + 1 == nest.ext.len() { 4 } else { 1 };
    let total = nest.ext[d];
    (elements >= PARALLEL_MIN_ELEMENTS && total >= 2 * grain).then_some(Split { total, grain })
}

impl Fx<'_, '_> {
    fn leaf_bases(&mut self, e: &Expr, out: &mut Vec<Value>) {
        let mut leaves = Vec::new();
        e.visit(&mut |n| match n {
            Expr::Load(v) => leaves.push(Ok(v.clone())),
            Expr::Iota(_, a) => leaves.push(Err(a.base)),
            _ => {}
        });
        for l in leaves {
            let v = match l {
                Ok(view) => self.view_offset(&view),
                Err(base) => self.iconst(base),
            };
            out.push(v);
        }
    }

    /// Offsets advanced by `i` along the dimension with strides `s`.
    fn advance(&mut self, offs: &[Value], s: &[i64], i: Value) -> Vec<Value> {
        offs.iter()
            .zip(s)
            .map(|(&o, &st)| {
                if st == 0 {
                    o
                } else {
                    let t = self.b.ins().imul_imm_s(i, st);
                    self.b.ins().iadd(o, t)
                }
            })
            .collect()
    }

    /// Loops over every dimension of `nest` but the last, calling `inner` with the offsets.
    /// With `split = Some((d, lo, hi))` dimension `d` runs over `lo..hi` only.
    fn outer_loops(
        &mut self,
        nest: &Nest,
        level: usize,
        offs: Vec<Value>,
        split: Option<(usize, Value, Value)>,
        inner: &mut dyn FnMut(&mut Self, &[Value]),
    ) {
        let stop = nest.ext.len().saturating_sub(1);
        self.loops_above(nest, stop, level, offs, split, inner);
    }

    /// Loops over the dimensions of `nest` before `stop`, calling `inner` with the offsets
    /// (`inner` runs the dimensions from `stop` on). `split` as in `outer_loops`.
    fn loops_above(
        &mut self,
        nest: &Nest,
        stop: usize,
        level: usize,
        offs: Vec<Value>,
        split: Option<(usize, Value, Value)>,
        inner: &mut dyn FnMut(&mut Self, &[Value]),
    ) {
        if level >= stop {
            inner(self, &offs);
            return;
        }
        let s: Vec<i64> = nest.strides.iter().map(|s| s[level]).collect();
        let mut body = |fx: &mut Self, i: Value| {
            let o = fx.advance(&offs, &s, i);
            fx.loops_above(nest, stop, level + 1, o, split, inner);
        };
        match split {
            Some((d, lo, hi)) if d == level => self.for_range_dyn(lo, hi, 1, &mut body),
            _ => self.for_range(0, nest.ext[level], 1, body),
        }
    }

    /// The innermost loop's bounds `(start, end of whole vectors, end)`: the whole
    /// dimension, or the thread's range when the split dimension is the innermost one.
    fn inner_bounds(&mut self, nest: &Nest, split: Option<(usize, Value, Value)>, vectors: bool) -> [Value; 3] {
        let n = nest.ext.last().copied().unwrap_or(1);
        match split {
            Some((d, lo, hi)) if d + 1 == nest.ext.len() => {
                // `lo` is a multiple of 4 (the split's grain), so `hi & !3 >= lo`.
                let n4 = if vectors { self.b.ins().band_imm_s(hi, !3) } else { lo };
                [lo, n4, hi]
            }
            _ => {
                let n4 = if vectors { n / 4 * 4 } else { 0 };
                [self.iconst(0), self.iconst(n4), self.iconst(n)]
            }
        }
    }

    /// This function's thread range applied to `nest`, if it is a range function.
    fn nest_split(&self, nest: &Nest) -> Option<(usize, Value, Value)> {
        let (lo, hi) = self.range?;
        split_dim(nest).map(|d| (d, lo, hi))
    }

    fn store(&mut self, dst_buf: BufId, dtype: DType, off: Value, x: Value, vector: bool, stride: i64) {
        let size = dtype.size_in_bytes() as i64;
        let addr = self.element_address(dst_buf, off, size);
        if !vector {
            self.store_elem(dtype, x, addr, 0);
        } else if stride == 1 {
            self.b.ins().store(mem(), x, addr, 0);
        } else {
            for lane in 0..4u8 {
                let e = self.b.ins().extractlane(x, lane);
                self.b.ins().store(mem(), e, addr, (lane as i64 * stride * size) as i32);
            }
        }
    }

    /// `dst[i] = src(i)` over `space`.
    pub(super) fn kernel(&mut self, space: &[usize], dst: &View, src: &Expr) {
        let Some(nest) = kernel_nest(space, dst, src) else { return };
        let split = self.nest_split(&nest);
        let mut bases = vec![self.view_offset(dst)];
        self.leaf_bases(src, &mut bases);
        let vec_ok = vectorizable(src) && dst.dtype == DType::F32;
        let inner = nest.inner();
        let (buf, dtype) = (dst.buf, dst.dtype);
        let rank = nest.ext.len();
        // `exp` or `tanh` of an expression, written to contiguous rows: the expression is
        // computed into the row, then the function runs over the row in place at the CPU's
        // widest vectors (`native::vmath`; the same bits as the inline f32x4 code).
        let slice = match src {
            Expr::Unary(op, DType::F32, x) if vec_ok && inner.first() == Some(&1) && rank > 0 => {
                let row = nest.ext.last().copied().unwrap_or(0);
                slice_import(*op, row, self.fma_available()).map(|imp| (imp, &**x))
            }
            _ => None,
        };
        let src = slice.map_or(src, |(_, x)| x);
        let block = slice.and_then(|(imp, _)| slice_block(&nest, split).map(|rows| (imp, rows)));
        // One row: the expression at every point, then (per row) the slice function.
        let row = |fx: &mut Self, offs: &[Value], call_per_row: bool| {
            if rank == 0 {
                let x = fx.eval(src, false, offs, &inner, &mut 1);
                fx.store(buf, dtype, offs[0], x, false, 0);
                return;
            }
            let [start, n4, n] = fx.inner_bounds(&nest, split, vec_ok);
            if vec_ok {
                fx.for_range_dyn(start, n4, 4, &mut |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, true, &o, &inner, &mut 1);
                    fx.store(buf, dtype, o[0], x, true, inner[0]);
                });
            }
            fx.for_range_dyn(n4, n, 1, &mut |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let x = fx.eval(src, false, &o, &inner, &mut 1);
                fx.store(buf, dtype, o[0], x, false, 0);
            });
            if let (Some((imp, _)), true) = (slice, call_per_row) {
                let o = fx.advance(offs, &inner, start);
                let row = fx.element_address(buf, o[0], 4);
                let len = fx.b.ins().isub(n, start);
                fx.call(imp, &[row, len]);
            }
        };
        let Some((imp, rows)) = block else {
            self.outer_loops(&nest, 0, bases, split, &mut |fx, offs| row(fx, offs, true));
            return;
        };
        // Blocks of `rows` contiguous rows: the expression into every row of the block,
        // then one call of the slice function over the whole block (still in L1).
        let (outer, width) = (nest.ext[rank - 2], nest.ext[rank - 1]);
        let step: Vec<i64> = nest.strides.iter().map(|s| s[rank - 2]).collect();
        // `f(rows + bias)`: the sum is formed inside the row function's loop (the same f32
        // addition, so the same bits), not written to the block first.
        let add_row = add_row_operands(src, &nest).map(|ops| {
            let imp = if imp == Import::ExpF32Slice { Import::ExpAddRowF32 } else { Import::TanhAddRowF32 };
            (imp, ops)
        });
        self.loops_above(&nest, rank - 2, 0, bases, split, &mut |fx, offs| {
            fx.for_range(0, outer, rows, |fx, first| {
                let last = fx.b.ins().iadd_imm_s(first, rows);
                let limit = fx.iconst(outer);
                let end = fx.b.ins().smin(last, limit);
                if let Some((imp, [(rows_buf, ru), (row_buf, bu)])) = add_row {
                    let o = fx.advance(offs, &step, first);
                    let dst = fx.element_address(buf, o[0], 4);
                    let from = fx.element_address(rows_buf, o[ru], 4);
                    let row = fx.element_address(row_buf, o[bu], 4);
                    let count = fx.b.ins().isub(end, first);
                    let len = fx.b.ins().imul_imm_s(count, width);
                    let w = fx.iconst(width);
                    fx.call(imp, &[dst, from, row, len, w]);
                    return;
                }
                fx.for_range_dyn(first, end, 1, &mut |fx, r| {
                    let o = fx.advance(offs, &step, r);
                    row(fx, &o, false);
                });
                let o = fx.advance(offs, &step, first);
                let addr = fx.element_address(buf, o[0], 4);
                let count = fx.b.ins().isub(end, first);
                let len = fx.b.ins().imul_imm_s(count, width);
                fx.call(imp, &[addr, len]);
            });
        });
    }

    /// `dst = reduce(op, src, axes)`: fill with the identity (a range function leaves that
    /// to its serial prologue), then accumulate in input order; if `accumulate`, start from
    /// what `dst` holds instead.
    pub(super) fn reduce(
        &mut self,
        op: ReduceOp,
        space: &[usize],
        axes: &[usize],
        dst: BufId,
        src: &Expr,
        accumulate: bool,
    ) -> Result<(), JitError> {
        let dtype = src.dtype();
        let id = reduce_identity(op, dtype);
        if self.range.is_none() && !accumulate {
            self.reduce_fill(op, space, axes, dst, dtype);
        }
        let Some(nest) = reduce_nest(space, axes, src) else { return Ok(()) };
        let split = self.nest_split(&nest);
        let mut bases = vec![self.iconst(0)];
        self.leaf_bases(src, &mut bases);
        let vec_ok = vectorizable(src);
        let inner = nest.inner();
        let n = nest.ext.last().copied().unwrap_or(1);
        let rank = nest.ext.len();
        let ty = clif_type(dtype);
        if rank == 2 && split.is_none() && vec_ok && dtype == DType::F32 && nest.strides[0] == [0, 1] && n >= 4 {
            self.reduce_columns(op, &nest, dst, src, &bases);
            return Ok(());
        }
        // A sum of everything into one float (a loss): each row's register sum is added
        // into the total with Neumaier's compensation, so that the total's rounding error
        // does not grow with the number of rows (XLA's CPU backend sums such reductions as
        // a tree; one rounding per row made remat's loss of the benchmark transformer 100x
        // less accurate than XLA's against float64). Serial only: a split would share `dst`.
        let compensated = op == ReduceOp::Sum
            && matches!(dtype, DType::F32 | DType::F64)
            && axes.len() == space.len()
            && rank >= 2
            && split.is_none()
            && self.range.is_none();
        let comp = compensated.then(|| {
            let var = self.b.declare_var(ty);
            let zero = self.lit(LitValue::from_f64(dtype, 0.0), false);
            self.b.def_var(var, zero);
            var
        });
        self.outer_loops(&nest, 0, bases, split, &mut |fx, offs| {
            let load_dst = |fx: &mut Self, off: Value, vector: bool| {
                let addr = fx.element_address(dst, off, dtype.size_in_bytes() as i64);
                if vector {
                    fx.b.ins().load(types::F32X4, mem(), addr, 0)
                } else {
                    fx.load_elem(dtype, addr, 0)
                }
            };
            if rank == 0 {
                let x = fx.eval(src, false, offs, &inner, &mut 1);
                let acc = load_dst(fx, offs[0], false);
                let r = fx.combine(op, dtype, acc, x);
                fx.store(dst, dtype, offs[0], r, false, 0);
                return;
            }
            if inner[0] != 0 {
                // The innermost dimension is kept: accumulate into the destination.
                let [start, n4, n] = fx.inner_bounds(&nest, split, vec_ok);
                if vec_ok {
                    fx.for_range_dyn(start, n4, 4, &mut |fx, i| {
                        let o = fx.advance(offs, &inner, i);
                        let x = fx.eval(src, true, &o, &inner, &mut 1);
                        let acc = load_dst(fx, o[0], true);
                        let r = fx.combine(op, dtype, acc, x);
                        fx.store(dst, dtype, o[0], r, true, 1);
                    });
                }
                fx.for_range_dyn(n4, n, 1, &mut |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, false, &o, &inner, &mut 1);
                    let acc = load_dst(fx, o[0], false);
                    let r = fx.combine(op, dtype, acc, x);
                    fx.store(dst, dtype, o[0], r, false, 0);
                });
                return;
            }
            // The innermost dimension is reduced: accumulate in registers.
            let n4 = if vec_ok { n / 4 * 4 } else { 0 };
            let acc_s = fx.b.declare_var(ty);
            let idv = fx.lit(id, false);
            fx.b.def_var(acc_s, idv);
            if n4 > 0 {
                let acc_v = fx.b.declare_var(types::F32X4);
                let idv = fx.lit(id, true);
                fx.b.def_var(acc_v, idv);
                // Four independent vector chains over blocks of 16: one chain waits for
                // the previous vector (`max`/`min`: a ~10-instruction NaN-propagating
                // select; the softmax's row maxima ran at ~12 cycles a vector). `max`/`min`
                // are exact, so any grouping gives the same value; sums add each block of
                // `SUM_BLOCK` into a compensated total (`sum_blocks`).
                let n16 = if dtype != DType::F32 { 0 } else { n / 16 * 16 };
                if n16 > 0 {
                    let chains = chains_of(fx, id);
                    let mut load = |fx: &mut Self, at: Value| {
                        let o = fx.advance(offs, &inner, at);
                        fx.eval(src, true, &o, &inner, &mut 1)
                    };
                    if op == ReduceOp::Sum {
                        fx.sum_blocks(&chains, acc_v, n16, &mut load);
                    } else {
                        let (start, end) = (fx.iconst(0), fx.iconst(n16));
                        fx.run_chains(op, &chains, start, end, &mut load);
                        let v = fx.fold_chains(op, &chains);
                        fx.b.def_var(acc_v, v);
                    }
                }
                fx.for_range(n16, n4, 4, |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, true, &o, &inner, &mut 1);
                    let a = fx.b.use_var(acc_v);
                    let r = fx.combine(op, dtype, a, x);
                    fx.b.def_var(acc_v, r);
                });
                let v = fx.b.use_var(acc_v);
                let mut s = fx.b.ins().extractlane(v, 0);
                for lane in 1..4u8 {
                    let e = fx.b.ins().extractlane(v, lane);
                    s = fx.combine(op, dtype, s, e);
                }
                fx.b.def_var(acc_s, s);
            }
            fx.for_range(n4, n, 1, |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let x = fx.eval(src, false, &o, &inner, &mut 1);
                let a = fx.b.use_var(acc_s);
                let r = fx.combine(op, dtype, a, x);
                fx.b.def_var(acc_s, r);
            });
            let a = fx.b.use_var(acc_s);
            let d = load_dst(fx, offs[0], false);
            let r = fx.combine(op, dtype, d, a);
            if let Some(comp) = comp {
                fx.add_lost(comp, d, a, r);
            }
            fx.store(dst, dtype, offs[0], r, false, 0);
        });
        if let Some(comp) = comp {
            let zero = self.iconst(0);
            let addr = self.element_address(dst, zero, dtype.size_in_bytes() as i64);
            let total = self.load_elem(dtype, addr, 0);
            let c = self.b.use_var(comp);
            let r = self.corrected(dtype, total, c, false);
            self.store(dst, dtype, zero, r, false, 0);
        }
        Ok(())
    }

    /// `acc = sum(x[0..n16])` for a row of floats, as a vector of four partial sums: four
    /// chains of vectors (sixteen partial sums, so that additions overlap instead of each
    /// waiting for the last) over blocks of [`SUM_BLOCK`] elements, each block's sum added
    /// into a running total with Neumaier's compensation. The rounding error then grows
    /// with the block length, not the row's (a 131,072-element loss summed in one chain of
    /// four lanes was 100x further from float64 than XLA's tree-shaped sum).
    fn sum_blocks(
        &mut self,
        chains: &[Variable],
        acc: Variable,
        n16: i64,
        load: &mut dyn FnMut(&mut Self, Value) -> Value,
    ) {
        let zero = self.lit(LitValue::F32(0.0), true);
        let comp = self.b.declare_var(types::F32X4);
        self.b.def_var(comp, zero);
        self.b.def_var(acc, zero);
        let mut block = |fx: &mut Self, start: Value, len: i64| {
            let end = fx.b.ins().iadd_imm_s(start, len);
            fx.run_chains(ReduceOp::Sum, chains, start, end, load);
            let s = fx.fold_chains(ReduceOp::Sum, chains);
            for &var in chains {
                fx.b.def_var(var, zero);
            }
            let t = fx.b.use_var(acc);
            let r = fx.b.ins().fadd(t, s);
            fx.add_lost(comp, t, s, r);
            fx.b.def_var(acc, r);
        };
        let full = n16 / SUM_BLOCK * SUM_BLOCK;
        if full > 0 {
            self.for_range(0, full, SUM_BLOCK, |fx, b| block(fx, b, SUM_BLOCK));
        }
        if n16 > full {
            let start = self.iconst(full);
            block(self, start, n16 - full);
        }
        let total = self.b.use_var(acc);
        let c = self.b.use_var(comp);
        let r = self.corrected(DType::F32, total, c, true);
        self.b.def_var(acc, r);
    }

    /// `chains[g] = op(chains[g], x[i + 4g..])` for `i` from `start` to `end` by 16: four
    /// independent vector accumulators over f32 rows.
    fn run_chains(
        &mut self,
        op: ReduceOp,
        chains: &[Variable],
        start: Value,
        end: Value,
        load: &mut dyn FnMut(&mut Self, Value) -> Value,
    ) {
        self.for_range_dyn(start, end, 16, &mut |fx, i| {
            for (g, &var) in chains.iter().enumerate() {
                let at = fx.b.ins().iadd_imm_s(i, 4 * g as i64);
                let x = load(fx, at);
                let a = fx.b.use_var(var);
                let r = fx.combine(op, DType::F32, a, x);
                fx.b.def_var(var, r);
            }
        });
    }

    /// The chains combined in order, one vector.
    fn fold_chains(&mut self, op: ReduceOp, chains: &[Variable]) -> Value {
        let mut v = self.b.use_var(chains[0]);
        for &var in &chains[1..] {
            let x = self.b.use_var(var);
            v = self.combine(op, DType::F32, v, x);
        }
        v
    }

    /// Adds to `comp` what the addition `r = t + s` lost (Neumaier's step: exact when the
    /// larger magnitude comes first), lane by lane for vectors.
    fn add_lost(&mut self, comp: Variable, t: Value, s: Value, r: Value) {
        let (abs_t, abs_s) = (self.b.ins().fabs(t), self.b.ins().fabs(s));
        let t_first = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, abs_t, abs_s);
        let big = self.sel(t_first, t, s);
        let small = self.sel(t_first, s, t);
        let gone = self.b.ins().fsub(big, r);
        let lost = self.b.ins().fadd(gone, small);
        let c = self.b.use_var(comp);
        let c = self.b.ins().fadd(c, lost);
        self.b.def_var(comp, c);
    }

    /// `total + comp` where the compensation `comp` is a number; `total` where it is not
    /// (an infinity or a NaN among the terms: the sum as added is the answer).
    fn corrected(&mut self, dtype: DType, total: Value, comp: Value, vector: bool) -> Value {
        let c_minus_c = self.b.ins().fsub(comp, comp);
        let zero = self.lit(LitValue::from_f64(dtype, 0.0), vector);
        let finite = self.b.ins().fcmp(FloatCC::Equal, c_minus_c, zero);
        let sum = self.b.ins().fadd(total, comp);
        self.sel(finite, sum, total)
    }

    /// `dst[j] = op(dst[j], src[i, j])` for every row `i` in order, over a nest of two
    /// dimensions: the rows (reduced) and the destination's contiguous columns (kept): the
    /// column sums of a bias gradient. Groups of up to four column vectors accumulate in
    /// registers across all rows and are stored once, instead of a load and a store of the
    /// destination per row; each column still starts from the destination (the identity
    /// fill) and combines rows 0, 1, ... in order, so the bits are those of the row by row
    /// loop.
    fn reduce_columns(&mut self, op: ReduceOp, nest: &Nest, dst: BufId, src: &Expr, offs: &[Value]) {
        let dtype = src.dtype();
        let (rows, n) = (nest.ext[0], nest.ext[1]);
        let step: Vec<i64> = nest.strides.iter().map(|s| s[0]).collect();
        let inner = nest.inner();
        let (n16, n4) = (n / 16 * 16, n / 4 * 4);
        let group = |fx: &mut Self, col: Value, vectors: i64| {
            let cols: Vec<Vec<Value>> = (0..vectors)
                .map(|g| {
                    let c = fx.b.ins().iadd_imm_s(col, 4 * g);
                    fx.advance(offs, &inner, c)
                })
                .collect();
            let accs: Vec<_> = cols
                .iter()
                .map(|o| {
                    let var = fx.b.declare_var(types::F32X4);
                    let addr = fx.element_address(dst, o[0], 4);
                    let v = fx.b.ins().load(types::F32X4, mem(), addr, 0);
                    fx.b.def_var(var, v);
                    var
                })
                .collect();
            fx.for_range(0, rows, 1, |fx, i| {
                for (o, &var) in cols.iter().zip(&accs) {
                    let o = fx.advance(o, &step, i);
                    let x = fx.eval(src, true, &o, &inner, &mut 1);
                    let a = fx.b.use_var(var);
                    let r = fx.combine(op, dtype, a, x);
                    fx.b.def_var(var, r);
                }
            });
            for (o, &var) in cols.iter().zip(&accs) {
                let v = fx.b.use_var(var);
                fx.store(dst, dtype, o[0], v, true, 1);
            }
        };
        self.for_range(0, n16, 16, |fx, c| group(fx, c, 4));
        self.for_range(n16, n4, 4, |fx, c| group(fx, c, 1));
        // The last `n % 4` columns, one element at a time.
        self.for_range(0, rows, 1, |fx, i| {
            let row = fx.advance(offs, &step, i);
            fx.for_range(n4, n, 1, |fx, j| {
                let o = fx.advance(&row, &inner, j);
                let x = fx.eval(src, false, &o, &inner, &mut 1);
                let addr = fx.element_address(dst, o[0], dtype.size_in_bytes() as i64);
                let a = fx.load_elem(dtype, addr, 0);
                let r = fx.combine(op, dtype, a, x);
                fx.store(dst, dtype, o[0], r, false, 0);
            });
        });
    }

    /// Fills a reduction's destination with the identity of `op`.
    pub(super) fn reduce_fill(&mut self, op: ReduceOp, space: &[usize], axes: &[usize], dst: BufId, dtype: DType) {
        let out_shape = kept_shape(space, axes);
        let fill_map = crate::expr::IndexMap { new_rank: out_shape.len(), old: Vec::new() };
        let id = reduce_identity(op, dtype);
        let range = self.range.take();
        self.kernel(&out_shape, &View::contiguous(dst, dtype, &out_shape), &Expr::Lit(id).remap(&fill_map));
        self.range = range;
    }

    /// `dst = argmax(src, axis)` (first maximum, NaN the largest), one scalar loop per lane.
    pub(super) fn argmax(&mut self, space: &[usize], axis: usize, dst: BufId, src: &Expr) -> Result<(), JitError> {
        let dtype = src.dtype();
        let order: Vec<usize> = (0..space.len()).filter(|&k| k != axis).chain([axis]).collect();
        let out_shape: Vec<usize> = order[..order.len() - 1].iter().map(|&k| space[k]).collect();
        let mut dst_strides = row_major_strides(&out_shape);
        dst_strides.push(0);
        let mut strides = vec![dst_strides];
        let mut leaves = Vec::new();
        leaf_strides(src, &mut leaves);
        strides.extend(leaves.iter().map(|s| order.iter().map(|&k| s[k]).collect::<Vec<i64>>()));
        let ext: Vec<i64> = order.iter().map(|&k| space[k] as i64).collect();
        if ext.contains(&0) {
            return Ok(());
        }
        let nest = Nest { ext, strides };
        let mut bases = vec![self.iconst(0)];
        self.leaf_bases(src, &mut bases);
        let inner = nest.inner();
        let n = *nest.ext.last().unwrap_or(&1);
        let ty = clif_type(dtype);
        self.outer_loops(&nest, 0, bases, None, &mut |fx, offs| {
            let best_v = fx.b.declare_var(ty);
            let best_i = fx.b.declare_var(types::I32);
            let v0 = fx.eval(src, false, offs, &inner, &mut 1);
            fx.b.def_var(best_v, v0);
            let zero = fx.b.ins().iconst(types::I32, 0);
            fx.b.def_var(best_i, zero);
            fx.for_range(1, n, 1, |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let v = fx.eval(src, false, &o, &inner, &mut 1);
                let best = fx.b.use_var(best_v);
                let better = fx.argmax_better(dtype, v, best);
                let nv = fx.b.ins().select(better, v, best);
                fx.b.def_var(best_v, nv);
                let bi = fx.b.use_var(best_i);
                let i32v = fx.b.ins().ireduce(types::I32, i);
                let ni = fx.b.ins().select(better, i32v, bi);
                fx.b.def_var(best_i, ni);
            });
            let bi = fx.b.use_var(best_i);
            fx.store(dst, DType::I32, offs[0], bi, false, 0);
        });
        Ok(())
    }
}
