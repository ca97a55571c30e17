//! Lowering of convolutions and windowed reductions.
//!
//! Every one starts the same way: the operand is padded (and base-dilated) into a buffer of
//! its own with the reduction's identity, so that a window position is a plain affine view
//! of that buffer: output position `p`, window offset `k` read element `p * stride + k *
//! dilation`. Then:
//! - `conv_general_dilated` is a batched GEMM: the patches view `[group, N, out spatial...,
//!   window..., I]` (copied to an arena buffer by the GEMM path: im2col) times the kernel
//!   view `[group, window..., I, O / group]`, with feature or batch groups as the GEMM's
//!   batch axis; the product is laid out in `out_spec` order by a view (one group) or a copy;
//! - `reduce_window_*` is a `Reduce` step over `[out..., window...]`;
//! - `select_and_gather_add` and `select_and_scatter_add` unroll the selection walk over the
//!   window offsets in row-major order (one elementwise step per offset, carrying the value
//!   and offset chosen so far), as the interpreter defines it; the scatter then adds each
//!   window's source value at its chosen offset, offset by offset, into a padded buffer.

use remat_ir::{
    Aval, BinaryOp, CompareOp, ConvParams, DType, DotDimensionNumbers, LitValue, Primitive, ReduceOp, UnaryOp, Window,
};

use super::dtypes::reduce_identity;
use super::{unsupported, Lowering, Val};
use crate::expr::{row_major_strides, Expr, View};
use crate::program::{BufId, Step};
use crate::JitError;

/// Convolutions with at most this many multiply-adds per output element (`O / group *
/// window * I`) reduce in place rather than call the GEMM on im2col patches: a depthwise
/// 3x3 conv (9) ran at 0.1 GFLOP/s through 64 thin GEMMs (`examples/bench_conv.rs`).
const DIRECT_CONV_MACS_PER_OUTPUT: usize = 64;

/// The most window offsets a selection walk is unrolled over.
const MAX_WALK: usize = 4096;

fn lit_val(value: LitValue) -> Val {
    Val { expr: Expr::Lit(value), aval: Aval::scalar(value.dtype()) }
}

/// `(offset, strides)` of view `v` moved by `k * dilation` along each axis and stepping by
/// `stride` along each output axis.
fn window_view(v: &View, k: &[usize], dilation: &[usize], stride: &[usize]) -> View {
    let offset = v.offset + (0..k.len()).map(|d| (k[d] * dilation[d]) as i64 * v.strides[d]).sum::<i64>();
    let strides = (0..k.len()).map(|d| stride[d] as i64 * v.strides[d]).collect();
    View { buf: v.buf, dtype: v.dtype, offset, strides, dynamic: v.dynamic.clone() }
}

/// The multi-index of `flat` in `shape`, row-major.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        out[d] = flat % shape[d].max(1);
        flat /= shape[d].max(1);
    }
    out
}

impl Lowering {
    /// `x` padded by `(lo, hi, interior)` per axis with `fill`, as a view (no copy when
    /// nothing is padded).
    fn padded(&mut self, x: &Val, config: &[(i64, i64, i64)], fill: LitValue) -> (View, Vec<usize>) {
        let shape: Vec<usize> = x
            .shape()
            .iter()
            .zip(config)
            .map(|(&n, &(lo, hi, interior))| {
                let n = n as i64;
                (lo + hi + n + (n - 1).max(0) * interior).max(0) as usize
            })
            .collect();
        if config.iter().all(|&c| c == (0, 0, 0)) {
            let (v, _) = self.as_view(x.clone());
            return (v, shape);
        }
        let aval = Aval::new(x.aval.dtype, shape.clone());
        let p = self.pad(&[x.clone(), lit_val(fill)], config, &aval, None);
        let (v, _) = self.as_view(p);
        (v, shape)
    }

    pub(crate) fn conv(&mut self, c: &ConvParams, lhs: &Val, rhs: &Val, out: &Aval) -> Result<Val, JitError> {
        let dn = &c.dimension_numbers;
        let ns = lhs.aval.rank() - 2;
        let (g, b) = (c.feature_group_count, c.batch_group_count);
        let (n_axis, c_axis) = (dn.lhs_spec[0], dn.lhs_spec[1]);
        let (o_axis, i_axis) = (dn.rhs_spec[0], dn.rhs_spec[1]);
        let (n_out, o_all, i_feat) = (lhs.shape()[n_axis] / b, rhs.shape()[o_axis], rhs.shape()[i_axis]);
        let groups = g.max(b);
        let og = o_all / groups;
        if out.size() == 0 {
            let buf = self.new_buf(out);
            return Ok(Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() });
        }
        // Operands convert to the result's dtype (as the interpreter's); a 16-bit float
        // convolution then multiplies and accumulates in f32 and rounds once at the end.
        let compute = if out.dtype.is_narrow_float() { DType::F32 } else { out.dtype };
        // Padding and lhs dilation on the spatial axes.
        let mut config = vec![(0, 0, 0); lhs.aval.rank()];
        for s in 0..ns {
            let (lo, hi) = c.padding[s];
            config[dn.lhs_spec[2 + s]] = (lo, hi, c.lhs_dilation[s] as i64 - 1);
        }
        let (pv, _) = self.padded(lhs, &config, LitValue::from_f64(lhs.aval.dtype, 0.0));
        let kern: Vec<usize> = (0..ns).map(|s| rhs.shape()[dn.rhs_spec[2 + s]]).collect();
        let sp_out: Vec<usize> = (0..ns).map(|s| out.shape[dn.out_spec[2 + s]]).collect();
        // Patches: [group, N, out spatial..., window..., I] (window before features, so that
        // the common NHWC/HWIO layouts need no copy of the kernel and copy runs of features).
        let st = &pv.strides;
        let group_stride = if g > 1 {
            i_feat as i64 * st[c_axis]
        } else if b > 1 {
            n_out as i64 * st[n_axis]
        } else {
            0
        };
        let mut p_strides = vec![group_stride, st[n_axis]];
        p_strides.extend((0..ns).map(|s| c.window_strides[s] as i64 * st[dn.lhs_spec[2 + s]]));
        p_strides.extend((0..ns).map(|s| c.rhs_dilation[s] as i64 * st[dn.lhs_spec[2 + s]]));
        p_strides.push(st[c_axis]);
        let mut p_shape = vec![groups, n_out];
        p_shape.extend(&sp_out);
        p_shape.extend(&kern);
        p_shape.push(i_feat);
        let patches = View { strides: p_strides, ..pv.clone() };
        // Kernel: [group, window..., I, O / group].
        let (rv, _) = self.as_view(rhs.clone());
        let rs = &rv.strides;
        let mut k_strides = vec![og as i64 * rs[o_axis]];
        k_strides.extend((0..ns).map(|s| rs[dn.rhs_spec[2 + s]]));
        k_strides.extend([rs[i_axis], rs[o_axis]]);
        let mut k_shape = vec![groups];
        k_shape.extend(&kern);
        k_shape.extend([i_feat, og]);
        let kernel = View { strides: k_strides, ..rv.clone() };
        let mut r_shape = vec![groups, n_out];
        r_shape.extend(&sp_out);
        r_shape.push(og);
        let r_aval = Aval::new(compute, r_shape.clone());
        let prod = ConvProduct { patches, p_shape, kernel, k_shape, ns, out_dtype: out.dtype, out: r_aval };
        // Padding and dilation holes are zeros in the patches, where the interpreter (as
        // XLA's evaluator) forms no product: `0 * inf` would be NaN. With a non-finite float
        // in the kernel, a hole-aware product runs instead (chosen at run time).
        let holes = c.padding.iter().any(|&(lo, hi)| lo > 0 || hi > 0) || c.lhs_dilation.iter().any(|&d| d > 1);
        let r = if holes && compute.is_float() {
            let finite = self.all_finite(&prod.kernel, &prod.k_shape);
            let buf = self.new_buf(&prod.out);
            let (_, slow) = self.scoped(|lw| {
                let mask = lw.hole_mask(lhs, &config);
                let r = lw.conv_direct(&prod, Some(&mask));
                lw.write(&r, buf);
                Ok(())
            })?;
            let (_, fast) = self.scoped(|lw| {
                let r = lw.conv_product(&prod)?;
                if !lw.is_whole(&r, buf) {
                    lw.write(&r, buf);
                }
                Ok(())
            })?;
            // `all_finite` is 1 (the fast branch) or 0.
            self.push_step(Step::Switch { index: finite, branches: vec![slow, fast] });
            Val { expr: Expr::Load(View::contiguous(buf, compute, &r_shape)), aval: prod.out.clone() }
        } else {
            self.conv_product(&prod)?
        };
        let (r, _) = self.as_view(r);
        let rounded = |e: Expr| {
            if compute == out.dtype {
                e
            } else {
                Expr::Convert { from: compute, to: out.dtype, x: Box::new(e) }
            }
        };
        // The product's axes in `out_spec` order: a view for one group, else a copy.
        let out_strides = row_major_strides(&out.shape);
        if groups == 1 {
            let mut strides = vec![0i64; out.rank()];
            strides[dn.out_spec[0]] = r.strides[1];
            strides[dn.out_spec[1]] = r.strides[2 + ns];
            for s in 0..ns {
                strides[dn.out_spec[2 + s]] = r.strides[2 + s];
            }
            return Ok(Val { expr: rounded(Expr::Load(View { strides, ..r })), aval: out.clone() });
        }
        let buf = self.new_buf(out);
        let mut dst_strides = vec![og as i64 * out_strides[dn.out_spec[1]], out_strides[dn.out_spec[0]]];
        dst_strides.extend((0..ns).map(|s| out_strides[dn.out_spec[2 + s]]));
        dst_strides.push(out_strides[dn.out_spec[1]]);
        let dst = View { buf, dtype: out.dtype, offset: 0, strides: dst_strides, dynamic: Vec::new() };
        self.push_step(Step::Kernel { space: r_shape, dst, src: rounded(Expr::Load(r)) });
        Ok(Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() })
    }

    /// The convolution's product `[group, N, out spatial..., O / group]` in the compute
    /// dtype: reduced in place when each output needs few multiply-adds, else a GEMM of
    /// the im2col patches (copied in the compute dtype) and the kernel.
    fn conv_product(&mut self, p: &ConvProduct) -> Result<Val, JitError> {
        let ns = p.ns;
        let k_total: usize = p.k_shape[1..].iter().product();
        if k_total <= DIRECT_CONV_MACS_PER_OUTPUT {
            return Ok(self.conv_direct(p, None));
        }
        let dims = DotDimensionNumbers {
            lhs_contracting: (2 + ns..3 + 2 * ns).collect(),
            rhs_contracting: (1..2 + ns).collect(),
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        let operand = |v: &View, shape: &[usize]| Val {
            expr: p.to_compute(Expr::Load(v.clone())),
            aval: Aval::new(p.out.dtype, shape.to_vec()),
        };
        let (patches, kernel) = (operand(&p.patches, &p.p_shape), operand(&p.kernel, &p.k_shape));
        if let (Expr::Load(_), Expr::Load(_)) = (&patches.expr, &kernel.expr) {
            let r = self.conv_gemm(&patches, &kernel, ns, &p.out)?;
            Ok(Val { expr: Expr::Load(r), aval: p.out.clone() })
        } else {
            // 16-bit operands converted to f32: the GEMM path copies them as they convert.
            Ok(self.dot(&patches, &kernel, &dims, &p.out, None))
        }
    }

    /// An `i32` scalar buffer holding 1 when every element of `v` (over `shape`) is finite,
    /// else 0.
    fn all_finite(&mut self, v: &View, shape: &[usize]) -> BufId {
        let finite = Expr::Unary(UnaryOp::IsFinite, v.dtype, Box::new(Expr::Load(v.clone())));
        let flag = self.new_buf(&Aval::scalar(DType::Bool));
        if shape.iter().product::<usize>() == 0 {
            self.push_step(Step::Kernel {
                space: Vec::new(),
                dst: View::contiguous(flag, DType::Bool, &[]),
                src: Expr::Lit(LitValue::Bool(true)),
            });
        } else {
            let axes = (0..shape.len()).collect();
            self.push_step(Step::Reduce {
                op: ReduceOp::Min,
                space: shape.to_vec(),
                axes,
                dst: flag,
                src: finite,
                accumulate: false,
            });
        }
        let as_i32 = Expr::Convert {
            from: DType::Bool,
            to: DType::I32,
            x: Box::new(Expr::Load(View::contiguous(flag, DType::Bool, &[]))),
        };
        self.scalar_buf(Val { expr: as_i32, aval: Aval::scalar(DType::I32) })
    }

    /// A `bool` buffer of `x`'s padded shape: true at real elements, false in padding and
    /// dilation holes (`config` as for [`Self::padded`]).
    fn hole_mask(&mut self, x: &Val, config: &[(i64, i64, i64)]) -> View {
        let ones = Val { expr: Expr::Lit(LitValue::Bool(true)), aval: Aval::new(DType::Bool, x.shape().to_vec()) };
        let (v, _) = self.padded(&ones, config, LitValue::Bool(false));
        v
    }

    pub(crate) fn reduce_window(&mut self, op: ReduceOp, w: &Window, x: &Val, out: &Aval) -> Val {
        let buf = self.new_buf(out);
        let result = Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() };
        if out.size() == 0 {
            return result;
        }
        let identity = reduce_identity(op, x.aval.dtype);
        if w.window_dimensions.contains(&0) {
            let dst = View::contiguous(buf, out.dtype, &out.shape);
            self.push_step(Step::Kernel { space: out.shape.clone(), dst, src: Expr::Lit(identity) });
            return result;
        }
        let config: Vec<(i64, i64, i64)> =
            w.padding.iter().zip(&w.base_dilation).map(|(&(lo, hi), &d)| (lo, hi, d as i64 - 1)).collect();
        let (pv, _) = self.padded(x, &config, identity);
        if self.reduce_window_unrolled(op, w, &pv, out, buf) {
            return result;
        }
        let rank = out.rank();
        let mut strides: Vec<i64> = (0..rank).map(|d| w.window_strides[d] as i64 * pv.strides[d]).collect();
        strides.extend((0..rank).map(|d| w.window_dilation[d] as i64 * pv.strides[d]));
        let mut space = out.shape.clone();
        space.extend(&w.window_dimensions);
        let src = Expr::Load(View { strides, ..pv });
        let axes = (rank..2 * rank).collect();
        if op == ReduceOp::Sum && out.dtype.is_narrow_float() {
            // A 16-bit float sum accumulates in f32 and rounds once, as `reduce_sum`.
            let from = out.dtype;
            let wide = self.new_buf(&Aval::new(DType::F32, out.shape.clone()));
            let src = Expr::Convert { from, to: DType::F32, x: Box::new(src) };
            self.push_step(Step::Reduce { op, space, axes, dst: wide, src, accumulate: false });
            let sum = Expr::Load(View::contiguous(wide, DType::F32, &out.shape));
            self.write(
                &Val { expr: Expr::Convert { from: DType::F32, to: from, x: Box::new(sum) }, aval: out.clone() },
                buf,
            );
            return result;
        }
        self.push_step(Step::Reduce { op, space, axes, dst: buf, src, accumulate: false });
        result
    }

    /// The selection walk over the windows of `x` (padded with the selection's identity):
    /// the offset each window ends on (an `i32` value over the windows), and, if `t` is
    /// given, the element of `t` (padded with 0) at that offset.
    fn select_walk(
        &mut self,
        prim: &Primitive,
        select_prim: CompareOp,
        w: &Window,
        x: &Val,
        t: Option<&Val>,
        out_shape: &[usize],
    ) -> Result<(Val, Option<Val>), JitError> {
        let n_win: usize = w.window_dimensions.iter().product();
        if n_win == 0 || n_win > MAX_WALK {
            return Err(unsupported(prim, format!("windows of {n_win} elements (1 to {MAX_WALK} are compiled)")));
        }
        let dtype = x.aval.dtype;
        let init = match select_prim {
            CompareOp::Ge | CompareOp::Gt => reduce_identity(ReduceOp::Max, dtype),
            CompareOp::Le
            | CompareOp::Lt
            | CompareOp::Eq
            | CompareOp::Ne
            | CompareOp::EqTo
            | CompareOp::LeTo
            | CompareOp::LtTo => reduce_identity(ReduceOp::Min, dtype),
        };
        let config: Vec<(i64, i64, i64)> =
            w.padding.iter().zip(&w.base_dilation).map(|(&(lo, hi), &d)| (lo, hi, d as i64 - 1)).collect();
        let (xv, _) = self.padded(x, &config, init);
        let tv = t.map(|t| self.padded(t, &config, LitValue::from_f64(dtype, 0.0)).0);
        let at = |v: &View, j: usize| {
            let k = unravel(j, &w.window_dimensions);
            Expr::Load(window_view(v, &k, &w.window_dilation, &w.window_strides))
        };
        let val_aval = Aval::new(dtype, out_shape.to_vec());
        let idx_aval = Aval::new(DType::I32, out_shape.to_vec());
        let mut cur_v = Val { expr: at(&xv, 0), aval: val_aval.clone() };
        let mut cur_i = lit_val(LitValue::I32(0));
        let mut cur_t = tv.as_ref().map(|tv| Val { expr: at(tv, 0), aval: val_aval.clone() });
        for j in 1..n_win {
            let e = at(&xv, j);
            let keep = Box::new(Expr::Compare(select_prim, dtype, Box::new(cur_v.expr.clone()), Box::new(e.clone())));
            let v = Expr::Select(dtype, keep.clone(), vec![e, cur_v.expr.clone()]);
            let i =
                Expr::Select(DType::I32, keep.clone(), vec![Expr::Lit(LitValue::I32(j as i32)), cur_i.expr.clone()]);
            let next_t = match (&tv, &cur_t) {
                (Some(tv), Some(ct)) => {
                    let t = Expr::Select(dtype, keep, vec![at(tv, j), ct.expr.clone()]);
                    Some(self.materialize(Val { expr: t, aval: val_aval.clone() }, None))
                }
                _ => None,
            };
            cur_v = self.materialize(Val { expr: v, aval: val_aval.clone() }, None);
            cur_i = self.materialize(Val { expr: i, aval: idx_aval.clone() }, None);
            cur_t = next_t;
        }
        Ok((cur_i, cur_t))
    }

    pub(crate) fn select_and_gather_add(
        &mut self,
        prim: &Primitive,
        select_prim: CompareOp,
        w: &Window,
        t: &Val,
        x: &Val,
        out: &Aval,
    ) -> Result<Val, JitError> {
        if out.size() == 0 {
            let buf = self.new_buf(out);
            return Ok(Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() });
        }
        let (_, chosen) = self.select_walk(prim, select_prim, w, x, Some(t), &out.shape)?;
        let chosen = chosen.expect("a tangent was walked");
        // A window of one offset reads the tangent directly; make it a value of its own.
        Ok(self.materialize(Val { expr: chosen.expr, aval: out.clone() }, None))
    }

    pub(crate) fn select_and_scatter_add(
        &mut self,
        prim: &Primitive,
        select_prim: CompareOp,
        w: &Window,
        source: &Val,
        x: &Val,
        out: &Aval,
    ) -> Result<Val, JitError> {
        let dtype = out.dtype;
        let zero = LitValue::from_f64(dtype, 0.0);
        let padded_shape: Vec<usize> =
            x.shape().iter().zip(&w.padding).map(|(&n, &(lo, hi))| (n as i64 + lo + hi).max(0) as usize).collect();
        let padded_aval = Aval::new(dtype, padded_shape.clone());
        let buf = self.new_buf(&padded_aval);
        let pst = row_major_strides(&padded_shape);
        let lo_offset: i64 = w.padding.iter().zip(&pst).map(|(&(lo, _), &s)| lo * s).sum();
        let result = Val {
            expr: Expr::Load(View { buf, dtype, offset: lo_offset, strides: pst.clone(), dynamic: Vec::new() }),
            aval: out.clone(),
        };
        if padded_aval.size() == 0 {
            return Ok(result);
        }
        let dst_all = View::contiguous(buf, dtype, &padded_shape);
        self.push_step(Step::Kernel { space: padded_shape.clone(), dst: dst_all.clone(), src: Expr::Lit(zero) });
        let windows = &source.aval.shape;
        if source.aval.size() == 0 {
            return Ok(result);
        }
        let (chosen, _) = self.select_walk(prim, select_prim, w, x, None, windows)?;
        let src = if source.expr.is_trivial() { source.clone() } else { self.materialize(source.clone(), None) };
        let n_win: usize = w.window_dimensions.iter().product();
        for j in 0..n_win {
            let k = unravel(j, &w.window_dimensions);
            let dst = window_view(&dst_all, &k, &w.window_dilation, &w.window_strides);
            let old = Expr::Load(dst.clone());
            let picked = Expr::Compare(
                CompareOp::Eq,
                DType::I32,
                Box::new(chosen.expr.clone()),
                Box::new(Expr::Lit(LitValue::I32(j as i32))),
            );
            let added = Expr::Binary(BinaryOp::Add, dtype, Box::new(old.clone()), Box::new(src.expr.clone()));
            let value = Expr::Select(dtype, Box::new(picked), vec![old, added]);
            self.push_step(Step::Kernel { space: windows.clone(), dst, src: value });
        }
        Ok(result)
    }

    /// The product of `conv_gemm_operands`' reordered patches and kernel, as a view with
    /// `out`'s axes `[group, N, out spatial..., O / group]`.
    fn conv_gemm(&mut self, patches: &Val, kernel: &Val, ns: usize, out: &Aval) -> Result<View, JitError> {
        let ops = self.conv_gemm_operands(patches, kernel, ns);
        let mut r_shape = vec![out.shape[0]];
        r_shape.extend(ops.m_order.iter().map(|&a| out.shape[1 + a]));
        r_shape.push(out.shape[2 + ns]);
        let r = self.conv_gemm_product(&ops, 1 + ns, &Aval::new(out.dtype, r_shape))?;
        let (r, _) = self.as_view(r);
        let mut strides = r.strides.clone();
        for (j, &a) in ops.m_order.iter().enumerate() {
            strides[1 + a] = r.strides[1 + j];
        }
        Ok(View { strides, ..r })
    }

    /// The convolution's product as one reduce step over `[N, out spatial..., group, O /
    /// group, window..., I]`, reading the patches and the kernel in place: no im2col copy and
    /// no GEMM call, for products whose GEMM would be thin (depthwise convolutions). The
    /// group runs inside the spatial axes, so an NHWC operand is swept once, not once per
    /// group; the result is a view with `out`'s axes `[group, N, out spatial..., O / group]`.
    /// With a `mask` (a view of the padded operand's shape, as the patches' buffer), a
    /// product at a hole is `0` instead: the hole-aware product.
    fn conv_direct(&mut self, p: &ConvProduct, mask: Option<&View>) -> Val {
        let (pv, kv, ns, out) = (&p.patches, &p.kernel, p.ns, &p.out);
        // Patches are [group, N, out spatial..., window..., I]; the kernel [group, window...,
        // I, O / group].
        let lhs_strides = |strides: &[i64]| {
            let mut s = strides[1..2 + ns].to_vec();
            s.extend([strides[0], 0]);
            s.extend(&strides[2 + ns..]);
            s
        };
        let mut rhs_strides = vec![0; 1 + ns];
        rhs_strides.extend([kv.strides[0], kv.strides[2 + ns]]);
        rhs_strides.extend(&kv.strides[1..2 + ns]);
        let l = p.to_compute(Expr::Load(View { strides: lhs_strides(&pv.strides), ..pv.clone() }));
        let r = p.to_compute(Expr::Load(View { strides: rhs_strides, ..kv.clone() }));
        let mut src = Expr::Binary(BinaryOp::Mul, out.dtype, Box::new(l), Box::new(r));
        if let Some(m) = mask {
            // The mask's buffer has the padded operand's shape, row-major like the padded
            // operand's own buffer, so the patches' strides address it too.
            debug_assert!(m.offset == 0 && pv.offset == 0 && m.dynamic.is_empty());
            let m =
                Expr::Load(View { buf: m.buf, dtype: DType::Bool, strides: lhs_strides(&pv.strides), ..pv.clone() });
            let zero = Expr::Lit(LitValue::from_f64(out.dtype, 0.0));
            src = Expr::Select(out.dtype, Box::new(m), vec![zero, src]);
        }
        let mut kept: Vec<usize> = out.shape[1..2 + ns].to_vec();
        kept.extend([out.shape[0], out.shape[2 + ns]]);
        let mut space = kept.clone();
        space.extend(&p.p_shape[2 + ns..]);
        let buf = self.new_buf(out);
        let axes = (kept.len()..space.len()).collect();
        self.push_step(Step::Reduce { op: ReduceOp::Sum, space, axes, dst: buf, src, accumulate: false });
        let rm = row_major_strides(&kept);
        let mut strides = vec![rm[ns + 1], rm[0]];
        strides.extend(&rm[1..1 + ns]);
        strides.push(rm[ns + 2]);
        let view = View { buf, dtype: out.dtype, offset: 0, strides, dynamic: Vec::new() };
        Val { expr: Expr::Load(view), aval: out.clone() }
    }
}

/// A convolution's product in the compute dtype (the result's, or f32 for a 16-bit
/// result): the patches `[group, N, out spatial..., window..., I]` and the kernel `[group,
/// window..., I, O / group]`, as views of the padded operand and of the kernel.
struct ConvProduct {
    patches: View,
    p_shape: Vec<usize>,
    kernel: View,
    k_shape: Vec<usize>,
    ns: usize,
    /// The convolution's result dtype, which operands round to first.
    out_dtype: DType,
    /// `[group, N, out spatial..., O / group]` in the compute dtype.
    out: Aval,
}

impl ConvProduct {
    /// An operand element converted to the result's dtype, then to the compute dtype.
    fn to_compute(&self, e: Expr) -> Expr {
        let from = e.dtype();
        let e = if from == self.out_dtype { e } else { Expr::Convert { from, to: self.out_dtype, x: Box::new(e) } };
        if self.out_dtype == self.out.dtype {
            e
        } else {
            Expr::Convert { from: self.out_dtype, to: self.out.dtype, x: Box::new(e) }
        }
    }
}
