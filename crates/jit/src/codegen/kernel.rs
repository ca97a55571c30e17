//! Loop nests: elementwise kernels, reductions and `argmax`.
//!
//! Every address in a loop nest is an affine function of the loop indices. The "users" of a
//! nest are the destination and every leaf of the expression (loads and iotas), each with
//! one stride per loop dimension. Before emitting loops, unit dimensions are dropped and
//! adjacent dimensions that every user walks contiguously are merged, so most kernels
//! become a single loop. The innermost loop runs over `f32x4` vectors (when the expression
//! is vectorizable) with a scalar tail for the last `n % 4` elements.

use cranelift_codegen::ir::{types, InstBuilder, Value};
use remat_ir::{DType, ReduceOp};

use super::eval::vectorizable;
use super::{clif_type, mem, Fx};
use crate::expr::{row_major_strides, Expr, View};
use crate::lower::reduce_identity;
use crate::program::BufId;
use crate::JitError;

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
    fn outer_loops(&mut self, nest: &Nest, level: usize, offs: Vec<Value>, inner: &mut dyn FnMut(&mut Self, &[Value])) {
        if level + 1 >= nest.ext.len() {
            inner(self, &offs);
            return;
        }
        let s: Vec<i64> = nest.strides.iter().map(|s| s[level]).collect();
        self.for_range(0, nest.ext[level], 1, |fx, i| {
            let o = fx.advance(&offs, &s, i);
            fx.outer_loops(nest, level + 1, o, inner);
        });
    }

    fn store(&mut self, dst_buf: BufId, dtype: DType, off: Value, x: Value, vector: bool, stride: i64) {
        let size = dtype.size_in_bytes() as i64;
        let base = self.base(dst_buf);
        let bytes = self.b.ins().imul_imm_s(off, size);
        let addr = self.b.ins().iadd(base, bytes);
        if !vector || stride == 1 {
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
        let mut strides = vec![dst.strides.clone()];
        leaf_strides(src, &mut strides);
        let Some(nest) = Nest::new(space, strides) else { return };
        let mut bases = vec![self.view_offset(dst)];
        self.leaf_bases(src, &mut bases);
        let vec_ok = vectorizable(src) && dst.dtype == DType::F32;
        let inner = nest.inner();
        let n = nest.ext.last().copied().unwrap_or(1);
        let (buf, dtype) = (dst.buf, dst.dtype);
        let rank = nest.ext.len();
        self.outer_loops(&nest, 0, bases, &mut |fx, offs| {
            if rank == 0 {
                let x = fx.eval(src, false, offs, &inner, &mut 1);
                fx.store(buf, dtype, offs[0], x, false, 0);
                return;
            }
            let n4 = if vec_ok { n / 4 * 4 } else { 0 };
            fx.for_range(0, n4, 4, |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let x = fx.eval(src, true, &o, &inner, &mut 1);
                fx.store(buf, dtype, o[0], x, true, inner[0]);
            });
            fx.for_range(n4, n, 1, |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let x = fx.eval(src, false, &o, &inner, &mut 1);
                fx.store(buf, dtype, o[0], x, false, 0);
            });
        });
    }

    /// `dst = reduce(op, src, axes)`: fill with the identity, then accumulate in input order.
    pub(super) fn reduce(
        &mut self,
        op: ReduceOp,
        space: &[usize],
        axes: &[usize],
        dst: BufId,
        src: &Expr,
    ) -> Result<(), JitError> {
        let dtype = src.dtype();
        let out_shape: Vec<usize> = (0..space.len()).filter(|k| !axes.contains(k)).map(|k| space[k]).collect();
        let id = reduce_identity(op, dtype);
        let fill_map = crate::expr::IndexMap { new_rank: out_shape.len(), old: Vec::new() };
        self.kernel(&out_shape, &View::contiguous(dst, dtype, &out_shape), &Expr::Lit(id).remap(&fill_map));
        let rm = row_major_strides(&out_shape);
        let mut kept = rm.iter();
        let dst_strides: Vec<i64> =
            (0..space.len()).map(|k| if axes.contains(&k) { 0 } else { *kept.next().unwrap_or(&0) }).collect();
        let mut strides = vec![dst_strides];
        leaf_strides(src, &mut strides);
        let Some(nest) = Nest::new(space, strides) else { return Ok(()) };
        let mut bases = vec![self.iconst(0)];
        self.leaf_bases(src, &mut bases);
        let vec_ok = vectorizable(src);
        let inner = nest.inner();
        let n = nest.ext.last().copied().unwrap_or(1);
        let rank = nest.ext.len();
        let ty = clif_type(dtype);
        self.outer_loops(&nest, 0, bases, &mut |fx, offs| {
            let load_dst = |fx: &mut Self, off: Value, vector: bool| {
                let base = fx.base(dst);
                let bytes = fx.b.ins().imul_imm_s(off, dtype.size_in_bytes() as i64);
                let addr = fx.b.ins().iadd(base, bytes);
                let t = if vector { types::F32X4 } else { ty };
                fx.b.ins().load(t, mem(), addr, 0)
            };
            if rank == 0 {
                let x = fx.eval(src, false, offs, &inner, &mut 1);
                let acc = load_dst(fx, offs[0], false);
                let r = fx.combine(op, dtype, acc, x, false);
                fx.store(dst, dtype, offs[0], r, false, 0);
                return;
            }
            let n4 = if vec_ok { n / 4 * 4 } else { 0 };
            if inner[0] != 0 {
                // The innermost dimension is kept: accumulate into the destination.
                fx.for_range(0, n4, 4, |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, true, &o, &inner, &mut 1);
                    let acc = load_dst(fx, o[0], true);
                    let r = fx.combine(op, dtype, acc, x, true);
                    fx.store(dst, dtype, o[0], r, true, 1);
                });
                fx.for_range(n4, n, 1, |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, false, &o, &inner, &mut 1);
                    let acc = load_dst(fx, o[0], false);
                    let r = fx.combine(op, dtype, acc, x, false);
                    fx.store(dst, dtype, o[0], r, false, 0);
                });
                return;
            }
            // The innermost dimension is reduced: accumulate in registers.
            let acc_s = fx.b.declare_var(ty);
            let idv = fx.lit(id, false);
            fx.b.def_var(acc_s, idv);
            if n4 > 0 {
                let acc_v = fx.b.declare_var(types::F32X4);
                let idv = fx.lit(id, true);
                fx.b.def_var(acc_v, idv);
                fx.for_range(0, n4, 4, |fx, i| {
                    let o = fx.advance(offs, &inner, i);
                    let x = fx.eval(src, true, &o, &inner, &mut 1);
                    let a = fx.b.use_var(acc_v);
                    let r = fx.combine(op, dtype, a, x, true);
                    fx.b.def_var(acc_v, r);
                });
                let v = fx.b.use_var(acc_v);
                let mut s = fx.b.ins().extractlane(v, 0);
                for lane in 1..4u8 {
                    let e = fx.b.ins().extractlane(v, lane);
                    s = fx.combine(op, dtype, s, e, false);
                }
                fx.b.def_var(acc_s, s);
            }
            fx.for_range(n4, n, 1, |fx, i| {
                let o = fx.advance(offs, &inner, i);
                let x = fx.eval(src, false, &o, &inner, &mut 1);
                let a = fx.b.use_var(acc_s);
                let r = fx.combine(op, dtype, a, x, false);
                fx.b.def_var(acc_s, r);
            });
            let a = fx.b.use_var(acc_s);
            let d = load_dst(fx, offs[0], false);
            let r = fx.combine(op, dtype, d, a, false);
            fx.store(dst, dtype, offs[0], r, false, 0);
        });
        Ok(())
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
        self.outer_loops(&nest, 0, bases, &mut |fx, offs| {
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
