//! One rule per primitive: the exhaustive `match` of the lowering.
//!
//! Elementwise primitives build expression nodes; layout primitives that only move elements
//! (`rev` among them, as negative strides) remap expressions; `pad`, `concatenate` and `dynamic_update_slice` write pieces of a new
//! buffer; reductions, `argmax` and `dot_general` are steps of their own; calls inline;
//! `scan` becomes a loop; convolutions and windowed reductions are in `window.rs`.

use remat_ir::{
    Aval, BinaryOp, DType, DotDimensionNumbers, Identity, LitValue, MemorySpace, Primitive, ReduceOp, UnaryOp,
};

use super::dtypes::index_i32;
use super::{literal_int, unsupported, Lowering, Val};
use crate::expr::{row_major_strides, Affine, DynTerm, Expr, IndexMap, View};
use crate::program::{BufId, DotDesc, Step};
use crate::JitError;

impl Lowering {
    /// Lowers one equation to the values of its outputs.
    pub(crate) fn lower_eqn(
        &mut self,
        prim: &Primitive,
        ins: Vec<Val>,
        out_avals: &[Aval],
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let out = &out_avals[0];
        let target = targets.first().copied().flatten();
        let node = |expr: Expr| Ok(vec![Val { expr, aval: out.clone() }]);
        let b = Box::new;
        let complex = ins.iter().map(|v| &v.aval).chain(out_avals).any(|a| a.dtype.is_complex());
        if complex {
            match complex_route(prim) {
                ComplexRoute::Inline => {}
                ComplexRoute::Native => return Ok(self.native(prim, ins, out_avals, targets)),
                ComplexRoute::Refuse => {
                    return Err(unsupported(prim, "its complex form is not compiled (the interpreter runs it)"))
                }
            }
        }
        match prim {
            Primitive::Unary(UnaryOp::StopGradient) => Ok(ins),
            // Complex values are native steps (`complex_route`).
            Primitive::Complex | Primitive::Real | Primitive::Imag | Primitive::Conj { .. } | Primitive::Fft { .. } => {
                Ok(self.native(prim, ins, out_avals, targets))
            }
            Primitive::Unary(op) => {
                // The operand's dtype (`is_finite`'s result is bool).
                let x = self.operand(&ins[0], &out.shape);
                node(Expr::Unary(*op, ins[0].aval.dtype, b(x)))
            }
            Primitive::Binary(op) => {
                let (x, y) = (self.operand(&ins[0], &out.shape), self.operand(&ins[1], &out.shape));
                node(Expr::Binary(*op, out.dtype, b(x), b(y)))
            }
            Primitive::Compare(op) => {
                let (x, y) = (self.operand(&ins[0], &out.shape), self.operand(&ins[1], &out.shape));
                node(Expr::Compare(*op, ins[0].aval.dtype, b(x), b(y)))
            }
            Primitive::IntegerPow { y } => {
                let x = self.operand(&ins[0], &out.shape);
                node(Expr::IntegerPow(*y, out.dtype, b(x)))
            }
            Primitive::SelectN => {
                let exprs: Vec<Expr> = ins.iter().map(|v| self.operand(v, &out.shape)).collect();
                let (pred, cases) = exprs.split_first().ok_or_else(|| unsupported(prim, "no operands"))?;
                if cases.len() == 1 {
                    return node(cases[0].clone());
                }
                node(Expr::Select(out.dtype, b(pred.clone()), cases.to_vec()))
            }
            Primitive::Clamp => {
                let e: Vec<Expr> = ins.iter().map(|v| self.operand(v, &out.shape)).collect();
                node(Expr::Clamp(out.dtype, b(e[0].clone()), b(e[1].clone()), b(e[2].clone())))
            }
            Primitive::ConvertElementType { new_dtype, weak_type: _ } => {
                let from = ins[0].aval.dtype;
                if from == *new_dtype {
                    return node(ins[0].expr.clone());
                }
                node(Expr::Convert { from, to: *new_dtype, x: b(ins[0].expr.clone()) })
            }
            Primitive::Round { rounding_method } => {
                node(Expr::Round(*rounding_method, out.dtype, b(ins[0].expr.clone())))
            }
            Primitive::BitcastConvertType { new_dtype } => {
                let from = ins[0].aval.dtype;
                if from.size_in_bytes() != new_dtype.size_in_bytes() {
                    return Err(unsupported(prim, "bitcasts between dtypes of different widths"));
                }
                node(Expr::Bitcast { from, to: *new_dtype, x: b(ins[0].expr.clone()) })
            }
            Primitive::ReducePrecision { exponent_bits, mantissa_bits } => {
                // At or above the dtype's own widths it is the identity.
                if ins[0].aval.dtype.reduce_precision_is_identity(*exponent_bits, *mantissa_bits) {
                    return node(ins[0].expr.clone());
                }
                node(Expr::ReducePrecision {
                    dtype: out.dtype,
                    exponent_bits: *exponent_bits,
                    mantissa_bits: *mantissa_bits,
                    x: b(ins[0].expr.clone()),
                })
            }
            Primitive::BroadcastInDim { shape: _, broadcast_dimensions } => {
                let map = IndexMap::broadcast(ins[0].shape(), out.rank(), broadcast_dimensions);
                Ok(vec![self.remap(ins[0].clone(), &map, out.shape.clone())])
            }
            Primitive::Reshape { new_sizes: _, dimensions: None } => Ok(vec![self.reshape(ins[0].clone(), out)]),
            Primitive::Reshape { new_sizes: _, dimensions: Some(d) } => {
                let shape = d.iter().map(|&k| ins[0].shape()[k]).collect();
                let t = self.remap(ins[0].clone(), &IndexMap::transpose(d), shape);
                Ok(vec![self.reshape(t, out)])
            }
            Primitive::Transpose { permutation } => {
                Ok(vec![self.remap(ins[0].clone(), &IndexMap::transpose(permutation), out.shape.clone())])
            }
            Primitive::Rev { dimensions } => {
                let map = IndexMap::rev(&out.shape, dimensions);
                Ok(vec![self.remap(ins[0].clone(), &map, out.shape.clone())])
            }
            Primitive::Squeeze { dimensions } => {
                let kept: Vec<bool> = (0..ins[0].aval.rank()).map(|k| !dimensions.contains(&k)).collect();
                let map = IndexMap::regroup(&kept, &vec![true; out.rank()]);
                Ok(vec![self.remap(ins[0].clone(), &map, out.shape.clone())])
            }
            Primitive::ExpandDims { dimensions } => {
                let kept_out: Vec<bool> = (0..out.rank()).map(|j| !dimensions.contains(&j)).collect();
                let map = IndexMap::regroup(&vec![true; ins[0].aval.rank()], &kept_out);
                Ok(vec![self.remap(ins[0].clone(), &map, out.shape.clone())])
            }
            Primitive::Slice { start_indices, limit_indices: _, strides } => {
                let ones = vec![1; start_indices.len()];
                let map = IndexMap::slice(start_indices, strides.as_deref().unwrap_or(&ones));
                Ok(vec![self.remap(ins[0].clone(), &map, out.shape.clone())])
            }
            Primitive::Pad { padding_config } => Ok(vec![self.pad(&ins, padding_config, out, target)]),
            Primitive::Concatenate { dimension } => Ok(vec![self.concatenate(&ins, *dimension, out, target)]),
            Primitive::DynamicSlice { slice_sizes } => {
                let (x, idx) = ins.split_first().ok_or_else(|| unsupported(prim, "no operand"))?;
                let (mut view, _) = self.as_view(x.clone());
                self.add_dynamic(&mut view, idx, x.shape(), slice_sizes);
                node(Expr::Load(view))
            }
            Primitive::DynamicUpdateSlice => {
                let buf = target.unwrap_or_else(|| self.new_buf(out));
                self.write(&ins[0], buf);
                let update = &ins[1];
                if update.aval.size() > 0 {
                    let mut dst = View::contiguous(buf, out.dtype, &out.shape);
                    self.add_dynamic(&mut dst, &ins[2..], &out.shape, update.shape());
                    self.push_step(Step::Kernel { space: update.aval.shape.clone(), dst, src: update.expr.clone() });
                }
                node(Expr::Load(View::contiguous(buf, out.dtype, &out.shape)))
            }
            // JAX leaves `empty2`'s scalar uninitialised; its lowering (and remat's) is zero.
            Primitive::Empty2 { dtype, memory_space: _ } => node(Expr::Lit(LitValue::from_f64(*dtype, 0.0))),
            Primitive::Iota { dtype, shape, dimension } => {
                let mut coeffs = vec![0i64; shape.len()];
                coeffs[*dimension] = 1;
                node(Expr::Iota(*dtype, Affine { base: 0, coeffs }))
            }
            Primitive::Reduce { op, axes } => {
                if axes.is_empty() {
                    return Ok(ins);
                }
                Ok(vec![self.reduce_any(*op, axes, &ins[0], out, target)])
            }
            // As the interpreter: two nested scans through the combiner.
            Primitive::GenericReduce { computation: _, dimensions, jaxpr } => {
                let in_avals: Vec<Aval> = ins.iter().map(|v| v.aval.clone()).collect();
                let scans = remat_ir::generic_reduce_as_scans(dimensions, jaxpr, &in_avals)
                    .map_err(|e| unsupported(prim, e.to_string()))?;
                self.call(&scans, &[], ins, targets)
            }
            // As the interpreter: XLA's exact CPU fallback, `top_k` or a sort.
            Primitive::ApproxTopK { k, reduction_dimension, is_max_k, .. } => {
                let aval = ins[0].aval.clone();
                let axis = remat_ir::approx_top_k_axis(*reduction_dimension, aval.rank())
                    .ok_or_else(|| unsupported(prim, "reduction_dimension is out of range"))?;
                let j = remat_ir::approx_top_k_as_jaxpr(*k, axis, *is_max_k, &aval);
                self.call(&j, &[], ins, targets)
            }
            // As the interpreter: windows stacked, then the generic `reduce`.
            Primitive::GenericReduceWindow { jaxpr, window } => {
                let in_avals: Vec<Aval> = ins.iter().map(|v| v.aval.clone()).collect();
                let reduce = remat_ir::generic_reduce_window_as_reduce(window, jaxpr, &in_avals)
                    .map_err(|e| unsupported(prim, e.to_string()))?;
                self.call(&reduce, &[], ins, targets)
            }
            Primitive::Argmax { axes, index_dtype: _ } => {
                let buf = target.unwrap_or_else(|| self.new_buf(out));
                if out.size() > 0 {
                    let x = &ins[0];
                    let step =
                        Step::Argmax { space: x.aval.shape.clone(), axis: axes[0], dst: buf, src: x.expr.clone() };
                    self.push_step(step);
                }
                node(Expr::Load(View::contiguous(buf, out.dtype, &out.shape)))
            }
            Primitive::DotGeneral { dimension_numbers, preferred_element_type: _, precision: _ } => {
                Ok(vec![self.dot_general(&ins[0], &ins[1], dimension_numbers, out, target)])
            }
            Primitive::Name { name: _ } => Ok(ins),
            // Shardings say where blocks live; values are the operand's.
            Primitive::ShardingConstraint(_) | Primitive::Reshard | Primitive::ShardAlike => Ok(ins),
            // `compile_with_options` unrolls every shard_map first (`spmd.rs`).
            Primitive::ShardMap(_) => Err(unsupported(prim, "this path does not unroll shard_map")),
            Primitive::Pvary { .. }
            | Primitive::AllReduce { .. }
            | Primitive::AllGather { .. }
            | Primitive::ReduceScatter { .. }
            | Primitive::Ppermute { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::AllToAll { .. }
            | Primitive::Pbroadcast { .. } => Err(unsupported(
                prim,
                "outside a shard_map body (a shard_map is unrolled over its mesh's devices before lowering, \
                 `spmd.rs`): there is no mesh axis to exchange over",
            )),
            Primitive::DevicePut { devices, copy_semantics: _ } => Ok(ins
                .into_iter()
                .zip(devices)
                .zip(targets)
                .map(|((x, &space), &t)| {
                    let space = space.unwrap_or(x.aval.memory_space);
                    if x.aval.memory_space == space && t.is_none() {
                        return x;
                    }
                    let aval = x.aval.clone().with_memory_space(space);
                    let val = Val { expr: x.expr, aval };
                    if t.is_none() && space == MemorySpace::Host {
                        let buf = self.new_buf(&val.aval);
                        self.materialize(val, Some(buf))
                    } else {
                        self.materialize(val, t)
                    }
                })
                .collect()),
            // Threefry keys and bits: the runtime (`native/random.rs`), with the
            // interpreter's threefry (`remat_math`).
            Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomBits { .. }
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::RngBitGenerator { .. } => Ok(self.native(prim, ins, out_avals, targets)),
            // A copy of keys: the same values (the JIT's buffers are never aliased by a caller).
            Primitive::RandomClone => Ok(ins),
            Primitive::Jit { name: _, jaxpr, options: _ }
            | Primitive::ClosedCall { call_jaxpr: jaxpr }
            | Primitive::Composite { jaxpr, .. } => self.call(&jaxpr.jaxpr, &jaxpr.consts, ins, targets),
            Primitive::CustomJvpCall { name: _, call_jaxpr, jvp: _, num_consts: _, symbolic_zeros: _ } => {
                self.call(&call_jaxpr.jaxpr, &call_jaxpr.consts, ins, targets)
            }
            Primitive::Remat2 { jaxpr, prevent_cse: _, differentiated: _, policy: _ } => {
                self.call(jaxpr, &[], ins, targets)
            }
            Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll: _ } => {
                let s = super::scan::ScanParams {
                    body: jaxpr,
                    length: *length,
                    reverse: *reverse,
                    num_consts: *num_consts,
                    num_carry: *num_carry,
                };
                self.scan(&s, ins, out_avals, targets)
            }
            Primitive::Stack { axis } => {
                // Each operand with the new axis (a view), then their concatenation.
                let mut expanded = Vec::with_capacity(ins.len());
                for x in &ins {
                    let mut shape = x.shape().to_vec();
                    shape.insert(*axis, 1);
                    let kept_out: Vec<bool> = (0..shape.len()).map(|j| j != *axis).collect();
                    let map = IndexMap::regroup(&vec![true; x.aval.rank()], &kept_out);
                    expanded.push(self.remap(x.clone(), &map, shape));
                }
                Ok(vec![self.concatenate(&expanded, *axis, out, target)])
            }
            Primitive::Unstack { axis } => {
                // Slice `i` of the axis, then the axis squeezed out: two views.
                let x = &ins[0];
                let rank = x.aval.rank();
                let ones = vec![1; rank];
                let kept: Vec<bool> = (0..rank).map(|k| k != *axis).collect();
                let mut outs = Vec::with_capacity(out_avals.len());
                for (i, aval) in out_avals.iter().enumerate() {
                    let mut start = vec![0; rank];
                    start[*axis] = i;
                    let mut piece = x.shape().to_vec();
                    piece[*axis] = 1;
                    let sliced = self.remap(x.clone(), &IndexMap::slice(&start, &ones), piece);
                    let map = IndexMap::regroup(&kept, &vec![true; aval.rank()]);
                    outs.push(self.remap(sliced, &map, aval.shape.clone()));
                }
                Ok(outs)
            }
            Primitive::Tile { reps } => {
                // A broadcast to `(reps[0], n0, reps[1], n1, ...)`, reshaped to the result.
                let x = &ins[0];
                let shape: Vec<usize> = reps.iter().zip(x.shape()).flat_map(|(&r, &n)| [r, n]).collect();
                let dims: Vec<usize> = (0..x.aval.rank()).map(|k| 2 * k + 1).collect();
                let map = IndexMap::broadcast(x.shape(), shape.len(), &dims);
                let wide = self.remap(x.clone(), &map, shape);
                Ok(vec![self.reshape(wide, out)])
            }
            Primitive::Split { axis, sizes } => {
                let x = &ins[0];
                let mut start = vec![0; x.aval.rank()];
                let ones = vec![1; x.aval.rank()];
                let mut outs = Vec::with_capacity(sizes.len());
                for (&size, aval) in sizes.iter().zip(out_avals) {
                    let map = IndexMap::slice(&start, &ones);
                    outs.push(self.remap(x.clone(), &map, aval.shape.clone()));
                    start[*axis] += size;
                }
                Ok(outs)
            }
            Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::Argmin { .. }
            | Primitive::Cumulative { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::SymmetricProduct { .. } => Ok(self.native(prim, ins, out_avals, targets)),
            Primitive::ConvGeneralDilated(c) => Ok(vec![self.conv(c, &ins[0], &ins[1], out)?]),
            Primitive::ReduceWindow { op, window } => {
                Ok(vec![self.reduce_window(op.reduce_op(), window, &ins[0], out)])
            }
            Primitive::SelectAndScatterAdd { select_prim, window_dimensions, window_strides, padding } => {
                let w = remat_ir::scatter_window(window_dimensions, window_strides, padding);
                Ok(vec![self.select_and_scatter_add(prim, *select_prim, &w, &ins[0], &ins[1], out)?])
            }
            Primitive::SelectAndGatherAdd { select_prim, window } => {
                Ok(vec![self.select_and_gather_add(prim, *select_prim, window, &ins[0], &ins[1], out)?])
            }
            Primitive::Cond { branches, .. } => self.cond(branches, ins, out_avals, targets),
            // The index of the `cpu` entry, a constant (the shape rule checked one exists).
            // An identity: the operands are the results.
            Primitive::OptimizationBarrier => Ok(ins),
            Primitive::PlatformIndex { platforms } => {
                let i = remat_ir::platform_index(platforms).ok_or_else(|| unsupported(prim, "no entry for cpu"))?;
                node(Expr::Lit(LitValue::I32(i as i32)))
            }
            Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } => {
                let w = super::control::WhileParams {
                    cond: cond_jaxpr,
                    body: body_jaxpr,
                    cond_nconsts: *cond_nconsts,
                    body_nconsts: *body_nconsts,
                };
                self.while_loop(&w, ins, out_avals, targets)
            }
            Primitive::CustomVjpCall { name: _, call_jaxpr, fwd: _, bwd: _, num_consts: _, symbolic_zeros: _ } => {
                self.call(&call_jaxpr.jaxpr, &call_jaxpr.consts, ins, targets)
            }
        }
    }

    /// A reduction step over `axes` of `x` into `target` or a new buffer of `out`.
    pub(super) fn reduce(&mut self, op: ReduceOp, axes: &[usize], x: &Val, out: &Aval, target: Option<BufId>) -> Val {
        // Over unit axes only, each result is `identity op x` of one element: an expression
        // fused into its readers, with no buffer (XLA's simplifier makes it a reshape and a
        // map). A backward pass's `reduce_sum` of a `[1, n]` cotangent is one.
        let unit = axes.iter().all(|&a| x.shape().get(a) == Some(&1));
        if unit && target.is_none() && out.dtype.is_float() && x.aval.dtype == out.dtype && out.size() > 0 {
            let x = self.reshape(x.clone(), out);
            let identity = Expr::Lit(super::reduce_identity(op, out.dtype));
            return Val {
                expr: Expr::Binary(super::reduce_binary(op), out.dtype, Box::new(identity), Box::new(x.expr)),
                aval: x.aval,
            };
        }
        let buf = target.unwrap_or_else(|| self.new_buf(out));
        if out.size() > 0 {
            let step = Step::Reduce {
                op,
                space: x.aval.shape.clone(),
                axes: axes.to_vec(),
                dst: buf,
                src: x.expr.clone(),
                accumulate: false,
            };
            self.push_step(step);
        }
        Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() }
    }

    /// An elementwise operand broadcast to the result's shape (a scalar, or unit axes).
    fn operand(&mut self, x: &Val, shape: &[usize]) -> Expr {
        if x.shape() == shape {
            return x.expr.clone();
        }
        let map = if x.aval.rank() == 0 {
            IndexMap { new_rank: shape.len(), old: Vec::new() }
        } else {
            let dims: Vec<usize> = (0..shape.len()).collect();
            IndexMap::broadcast(x.shape(), shape.len(), &dims)
        };
        self.remap(x.clone(), &map, shape.to_vec()).expr
    }

    /// `reshape`: an index map when only unit axes change, a relabelled load of row-major
    /// memory otherwise.
    fn reshape(&mut self, x: Val, out: &Aval) -> Val {
        if x.shape() == out.shape.as_slice() {
            return x;
        }
        let big = |s: &[usize]| s.iter().copied().filter(|&n| n != 1).collect::<Vec<_>>();
        if big(x.shape()) == big(&out.shape) && out.size() > 0 {
            let in_kept: Vec<bool> = x.shape().iter().map(|&n| n != 1).collect();
            let out_kept: Vec<bool> = out.shape.iter().map(|&n| n != 1).collect();
            return self.remap(x, &IndexMap::regroup(&in_kept, &out_kept), out.shape.clone());
        }
        let x = match &x.expr {
            Expr::Load(v) if v.is_row_major(x.shape()) => x,
            _ => self.materialize(x, None),
        };
        let Expr::Load(v) = &x.expr else { unreachable!("materialize gives a load") };
        let view = View { strides: row_major_strides(&out.shape), ..v.clone() };
        Val { expr: Expr::Load(view), aval: out.clone().with_memory_space(x.aval.memory_space) }
    }

    /// Adds a dynamic start per axis (clamped into `0..=extent - size`) to `view`.
    fn add_dynamic(&mut self, view: &mut View, idx: &[Val], extents: &[usize], sizes: &[usize]) {
        for (k, i) in idx.iter().enumerate() {
            let max = (extents[k] - sizes[k]) as i64;
            let stride = view.strides[k];
            if let Some(c) = literal_int(i) {
                view.offset += c.clamp(0, max) * stride;
            } else if max > 0 {
                let index = self.scalar_buf(index_i32(i, max));
                view.dynamic.push(DynTerm { index, max, stride });
            }
        }
    }

    /// `pad`: fill with the padding value, then write the operand at its strided positions.
    pub(crate) fn pad(&mut self, ins: &[Val], config: &[(i64, i64, i64)], out: &Aval, target: Option<BufId>) -> Val {
        let buf = target.unwrap_or_else(|| self.new_buf(out));
        let fill = Val { expr: self.operand(&ins[1], &out.shape), aval: out.clone() };
        self.write(&fill, buf);
        let x = &ins[0];
        let out_strides = row_major_strides(&out.shape);
        let (mut start, mut space, mut dst_strides, mut offset) = (Vec::new(), Vec::new(), Vec::new(), 0i64);
        for (k, (&(lo, _, interior), &d)) in config.iter().zip(x.shape()).enumerate() {
            let (d, n, step) = (d as i64, out.shape[k] as i64, interior + 1);
            let first = if lo >= 0 { 0 } else { (-lo + step - 1) / step };
            let end = if n > lo { ((n - lo + step - 1) / step).min(d) } else { 0 };
            if first >= end {
                return Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() };
            }
            start.push(first as usize);
            space.push((end - first) as usize);
            offset += (lo + first * step) * out_strides[k];
            dst_strides.push(step * out_strides[k]);
        }
        let ones = vec![1; start.len()];
        let src = self.remap(x.clone(), &IndexMap::slice(&start, &ones), space.clone());
        let dst = View { buf, dtype: out.dtype, offset, strides: dst_strides, dynamic: Vec::new() };
        self.push_step(Step::Kernel { space, dst, src: src.expr });
        Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() }
    }

    fn concatenate(&mut self, ins: &[Val], dimension: usize, out: &Aval, target: Option<BufId>) -> Val {
        let buf = target.unwrap_or_else(|| self.new_buf(out));
        let strides = row_major_strides(&out.shape);
        let mut at = 0i64;
        for x in ins {
            if x.aval.size() > 0 {
                let dst = View {
                    buf,
                    dtype: out.dtype,
                    offset: at * strides[dimension],
                    strides: strides.clone(),
                    dynamic: Vec::new(),
                };
                self.push_step(Step::Kernel { space: x.aval.shape.clone(), dst, src: x.expr.clone() });
            }
            at += x.shape()[dimension] as i64;
        }
        Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() }
    }

    /// `dot_general` as a batched GEMM over strided views of both operands, or, for small
    /// products, as a loop nest compiled for the shape.
    pub(crate) fn dot(
        &mut self,
        lhs: &Val,
        rhs: &Val,
        dn: &DotDimensionNumbers,
        out: &Aval,
        target: Option<BufId>,
    ) -> Val {
        let (lf, rf) = (
            free_axes(lhs.aval.rank(), &dn.lhs_batch, &dn.lhs_contracting),
            free_axes(rhs.aval.rank(), &dn.rhs_batch, &dn.rhs_contracting),
        );
        let k_size: usize = dn.lhs_contracting.iter().map(|&a| lhs.shape()[a]).product();
        if k_size == 1 && out.dtype.is_float() {
            // XLA rewrites a product of one term to a multiply: nothing adds it to +0.0, so
            // a zero product keeps its sign under FTZ. A transposing reader remaps it.
            self.dot_dst = None;
            return self.dot_as_multiply(lhs, rhs, dn, (&lf, &rf), out);
        }
        if let Some(v) = self.small_dot(lhs, rhs, dn, (&lf, &rf), out, target) {
            return v;
        }
        // A transposed destination: out axis perm[j] is axis j of the row-major buffer. Only
        // when m and n are single axes, so each keeps one stride.
        let (buf, out_strides) = match self.dot_dst.take() {
            Some((buf, perm)) if lf.len() <= 1 && rf.len() <= 1 => {
                // The transposing reader's buffer holds exactly this product's elements.
                let bytes = self.prog.buffers[buf.0 as usize].bytes;
                assert_eq!(bytes, out.size_in_bytes(), "a dot_general's transposed destination does not fit it");
                let rm = row_major_strides(&perm.iter().map(|&k| out.shape[k]).collect::<Vec<_>>());
                let mut strides = vec![0i64; perm.len()];
                for (j, &k) in perm.iter().enumerate() {
                    strides[k] = rm[j];
                }
                (buf, strides)
            }
            _ => (target.unwrap_or_else(|| self.new_buf(out)), row_major_strides(&out.shape)),
        };
        let view = View { buf, dtype: out.dtype, offset: 0, strides: out_strides.clone(), dynamic: Vec::new() };
        let result = Val { expr: Expr::Load(view), aval: out.clone() };
        if out.size() == 0 {
            return result;
        }
        let dtype = out.dtype;
        let k_size: usize = dn.lhs_contracting.iter().map(|&a| lhs.shape()[a]).product();
        if k_size == 0 {
            let zero = Val { expr: Expr::Lit(LitValue::from_f64(dtype, 0.0)), aval: Aval::scalar(dtype) };
            let fill = Val { expr: self.operand(&zero, &out.shape), aval: out.clone() };
            self.write(&fill, buf);
            return result;
        }
        self.gemm(lhs, rhs, dn, out, &out_strides, View::contiguous(buf, dtype, &[]));
        result
    }

    /// A product of non-empty operands (`k > 0`) by the runtime's GEMM, written into `dst`
    /// (its static and dynamic offsets; `out_strides` are the result's strides from there).
    pub(crate) fn gemm(
        &mut self,
        lhs: &Val,
        rhs: &Val,
        dn: &DotDimensionNumbers,
        out: &Aval,
        out_strides: &[i64],
        dst: View,
    ) {
        let (lf, rf) = (
            free_axes(lhs.aval.rank(), &dn.lhs_batch, &dn.lhs_contracting),
            free_axes(rhs.aval.rank(), &dn.rhs_batch, &dn.rhs_contracting),
        );
        let dtype = out.dtype;
        let (lhs, rhs) = (converted(lhs, dtype), converted(rhs, dtype));
        let DotDimensionNumbers { lhs_contracting: lc, rhs_contracting: rc, lhs_batch: lb, rhs_batch: rb } = dn;
        let lhs_order: Vec<usize> = [lb.as_slice(), &lf, lc].concat();
        let rhs_order: Vec<usize> = [rb.as_slice(), rc, &rf].concat();
        let (mut lv, _) = self.as_view(lhs.clone());
        let (mut rv, _) = self.as_view(rhs.clone());
        // The GEMMs walk their operands forwards: a reversed view (`rev`) is copied first.
        let backwards = |v: &View| v.strides.iter().any(|&s| s < 0);
        let mut groups = dot_groups(&lv, &rv, lhs.shape(), rhs.shape(), dn, &lf, &rf);
        if groups.is_none() || backwards(&lv) || backwards(&rv) {
            lv = self.canonical(&lhs, &lhs_order);
            rv = self.canonical(&rhs, &rhs_order);
            groups = dot_groups(&lv, &rv, lhs.shape(), rhs.shape(), dn, &lf, &rf);
        }
        let Some(((m, lhs_m), (k, lhs_k, rhs_k), (n, rhs_n))) = groups else {
            unreachable!("row-major operands in canonical order always group")
        };
        let nb = lb.len();
        let batch = lb
            .iter()
            .zip(rb)
            .enumerate()
            .map(|(j, (&l, &r))| {
                (lhs.shape()[l], lv.strides[l] as isize, rv.strides[r] as isize, out_strides[j] as isize)
            })
            .collect();
        let out_n = if rf.is_empty() { 1 } else { out_strides[out.rank() - 1] };
        let out_m = if lf.is_empty() { 0 } else { out_strides[nb + lf.len() - 1] };
        let desc = DotDesc {
            dtype,
            batch,
            m,
            n,
            k,
            lhs_m: lhs_m as isize,
            lhs_k: lhs_k as isize,
            rhs_k: rhs_k as isize,
            rhs_n: rhs_n as isize,
            out_m: out_m as isize,
            out_n: out_n as isize,
        };
        self.prog.dots.push(desc);
        let desc = self.prog.dots.len() - 1;
        self.push_step(Step::Dot { desc, lhs: lv, rhs: rv, dst });
    }

    /// A product of at most `small_dot_macs` multiply-adds as a sum-reduction of the
    /// operands' products over the index space (output axes and contracted axes): no call,
    /// no packing, and operand views with any strides. The contracted axes go innermost
    /// (summed in registers) unless the right operand is contiguous along the last output
    /// axis; then they go before the right operand's free axes, so the innermost loop runs
    /// over whole vectors of the output row. `None` for the GEMM path.
    /// A product whose contracted extent is 1, as the elementwise multiply of its operands
    /// broadcast to the result's axes (batch, lhs free, rhs free).
    fn dot_as_multiply(
        &mut self,
        lhs: &Val,
        rhs: &Val,
        dn: &DotDimensionNumbers,
        (lf, rf): (&[usize], &[usize]),
        out: &Aval,
    ) -> Val {
        let nb = dn.lhs_batch.len();
        // Contracted axes have extent 1: read at index 0, whatever position they are given.
        let mut lpos = vec![0usize; lhs.aval.rank()];
        let mut rpos = vec![0usize; rhs.aval.rank()];
        for (j, (&a, &b)) in dn.lhs_batch.iter().zip(&dn.rhs_batch).enumerate() {
            lpos[a] = j;
            rpos[b] = j;
        }
        for (i, &a) in lf.iter().enumerate() {
            lpos[a] = nb + i;
        }
        for (i, &b) in rf.iter().enumerate() {
            rpos[b] = nb + lf.len() + i;
        }
        let l = self.remap(lhs.clone(), &IndexMap::broadcast(lhs.shape(), out.rank(), &lpos), out.shape.clone());
        let r = self.remap(rhs.clone(), &IndexMap::broadcast(rhs.shape(), out.rank(), &rpos), out.shape.clone());
        Val { expr: Expr::Binary(BinaryOp::Mul, out.dtype, Box::new(l.expr), Box::new(r.expr)), aval: out.clone() }
    }

    /// An equation XLA's simplifier deletes (`remat_ir::identities`): operand `k`'s value
    /// (its sign flipped for [`Identity::Negated`]), broadcast or reshaped to the result.
    pub(super) fn identity(&mut self, identity: Identity, ins: &[Val], out: &Aval) -> Val {
        let (k, negated) = match identity {
            Identity::Operand(k) => (k, false),
            Identity::Negated(k) => (k, true),
        };
        let x = ins[k].clone();
        let x = if x.shape() == out.shape.as_slice() {
            x
        } else if x.aval.size() == out.size() {
            self.reshape(x, out)
        } else {
            Val { expr: self.operand(&x, &out.shape), aval: out.clone() }
        };
        if negated {
            Val { expr: Expr::Unary(UnaryOp::Neg, out.dtype, Box::new(x.expr)), aval: out.clone() }
        } else {
            Val { expr: x.expr, aval: out.clone() }
        }
    }

    fn small_dot(
        &mut self,
        lhs: &Val,
        rhs: &Val,
        dn: &DotDimensionNumbers,
        (lf, rf): (&[usize], &[usize]),
        out: &Aval,
        target: Option<BufId>,
    ) -> Option<Val> {
        let dtype = out.dtype;
        let DotDimensionNumbers { lhs_contracting: lc, rhs_contracting: rc, lhs_batch: lb, rhs_batch: rb } = dn;
        let k_size: usize = lc.iter().map(|&a| lhs.shape()[a]).product();
        let small = out.size() > 0 && k_size > 0 && out.size() * k_size <= self.small_dot_macs;
        if !small || self.dot_dst.is_some() || !matches!(dtype, DType::F32 | DType::F64 | DType::I32) {
            return None;
        }
        // Operands that compute are computed once, not once per output element.
        let operand = |lw: &mut Self, x: &Val| -> Expr {
            let x = if x.expr.is_trivial() { x.clone() } else { lw.materialize(x.clone(), None) };
            converted(&x, dtype).expr
        };
        let (l, r) = (operand(self, lhs), operand(self, rhs));
        let (nb, nm, nc) = (lb.len(), lf.len(), lc.len());
        let rhs_row = match (&r, rf.last()) {
            (Expr::Load(v), Some(&a)) => v.strides[a] == 1,
            _ => false,
        };
        // Space positions: the contracted axes at `k0..k0 + nc`, the right free axes at `n0..`.
        let (k0, n0) = if rhs_row { (nb + nm, nb + nm + nc) } else { (nb + nm + rf.len(), nb + nm) };
        let mut space: Vec<usize> = out.shape.clone();
        let kdims: Vec<usize> = lc.iter().map(|&a| lhs.shape()[a]).collect();
        space.splice(k0..k0, kdims);
        let mut lpos = vec![0usize; lhs.aval.rank()];
        let mut rpos = vec![0usize; rhs.aval.rank()];
        for (j, (&a, &b)) in lb.iter().zip(rb).enumerate() {
            lpos[a] = j;
            rpos[b] = j;
        }
        for (i, &a) in lf.iter().enumerate() {
            lpos[a] = nb + i;
        }
        for (c, (&a, &b)) in lc.iter().zip(rc).enumerate() {
            lpos[a] = k0 + c;
            rpos[b] = k0 + c;
        }
        for (i, &b) in rf.iter().enumerate() {
            rpos[b] = n0 + i;
        }
        let lmap = IndexMap::broadcast(lhs.shape(), space.len(), &lpos);
        let rmap = IndexMap::broadcast(rhs.shape(), space.len(), &rpos);
        let src = Expr::Binary(BinaryOp::Mul, dtype, Box::new(l.remap(&lmap)), Box::new(r.remap(&rmap)));
        let buf = target.unwrap_or_else(|| self.new_buf(out));
        let axes: Vec<usize> = (k0..k0 + nc).collect();
        self.push_step(Step::Reduce { op: ReduceOp::Sum, space, axes, dst: buf, src, accumulate: false });
        Some(Val { expr: Expr::Load(View::contiguous(buf, dtype, &out.shape)), aval: out.clone() })
    }

    /// `x` written row-major with its axes in `order`, as a view over its original axes.
    fn canonical(&mut self, x: &Val, order: &[usize]) -> View {
        let shape: Vec<usize> = order.iter().map(|&k| x.shape()[k]).collect();
        let permuted =
            Val { expr: x.expr.remap(&IndexMap::transpose(order)), aval: Aval::new(x.aval.dtype, shape.clone()) };
        let buf = self.new_buf(&permuted.aval);
        self.write(&permuted, buf);
        let rm = row_major_strides(&shape);
        let mut strides = vec![0i64; order.len()];
        for (j, &k) in order.iter().enumerate() {
            strides[k] = rm[j];
        }
        View { buf, dtype: x.aval.dtype, offset: 0, strides, dynamic: Vec::new() }
    }
}

/// The axes of an operand of rank `rank` that are neither batch nor contracted, in order.
fn free_axes(rank: usize, batch: &[usize], contracting: &[usize]) -> Vec<usize> {
    (0..rank).filter(|k| !batch.contains(k) && !contracting.contains(k)).collect()
}

/// `x` converted to `dtype` (itself when it already has it).
fn converted(x: &Val, dtype: DType) -> Val {
    if x.aval.dtype == dtype {
        return x.clone();
    }
    let expr = Expr::Convert { from: x.aval.dtype, to: dtype, x: Box::new(x.expr.clone()) };
    Val { expr, aval: Aval::new(dtype, x.aval.shape.clone()) }
}

/// One (extent, stride) for a group of axes, if their strides nest (row-major within the
/// group, unit axes ignored).
fn merge(dims: &[(usize, Vec<i64>)]) -> Option<(usize, Vec<i64>)> {
    let dims: Vec<&(usize, Vec<i64>)> = dims.iter().filter(|(n, _)| *n != 1).collect();
    let Some(last) = dims.last() else { return Some((1, Vec::new())) };
    let mut extent = last.0;
    let strides = last.1.clone();
    for w in dims.windows(2).rev() {
        let outer = w[0];
        if outer.1.iter().zip(&strides).any(|(&so, &si)| so != si * extent as i64) {
            return None;
        }
        extent *= outer.0;
    }
    Some((extent, strides))
}

type Groups = ((usize, i64), (usize, i64, i64), (usize, i64));

/// The m, k and n groups of a dot over views `lv` and `rv`, if each collapses to one stride.
fn dot_groups(
    lv: &View,
    rv: &View,
    ls: &[usize],
    rs: &[usize],
    dn: &DotDimensionNumbers,
    lf: &[usize],
    rf: &[usize],
) -> Option<Groups> {
    let m_dims: Vec<(usize, Vec<i64>)> = lf.iter().map(|&a| (ls[a], vec![lv.strides[a]])).collect();
    let k_dims: Vec<(usize, Vec<i64>)> = dn
        .lhs_contracting
        .iter()
        .zip(&dn.rhs_contracting)
        .map(|(&l, &r)| (ls[l], vec![lv.strides[l], rv.strides[r]]))
        .collect();
    let n_dims: Vec<(usize, Vec<i64>)> = rf.iter().map(|&a| (rs[a], vec![rv.strides[a]])).collect();
    let (m, ms) = merge(&m_dims)?;
    let (k, ks) = merge(&k_dims)?;
    let (n, ns) = merge(&n_dims)?;
    let first = |s: &Vec<i64>, i: usize| s.get(i).copied().unwrap_or(0);
    Some(((m, first(&ms, 0)), (k, first(&ks, 0), first(&ks, 1)), (n, first(&ns, 0))))
}

/// Products of at most this many multiply-adds (`batch*m*n*k`) are compiled as loops for
/// their shape; larger ones call the GEMM. Calibrated by `cargo run --release -p remat-jit
/// --example calibrate_dot` (docs/jit.md has the measurements): below it, the GEMM's call
/// and packing cost more than the loop's lower peak.
pub(crate) const SMALL_DOT_MACS: usize = 256;

/// How an equation that reads or makes a complex value (`c64`, `c128`) is lowered.
enum ComplexRoute {
    /// As any other: calls, loops, conditionals and names, whose bodies are lowered
    /// equation by equation, and the structural equations, which only move elements (a complex element is moved as
    /// the bits of its parts: `codegen::clif_type`).
    Inline,
    /// A native step over whole buffers: `native::complex` (`remat_math::complex`, the
    /// interpreter's functions, so that the JIT's complex results are the interpreter's bit
    /// for bit), or the step's own arm for gathers, scatters, sorts and cumulative sums,
    /// which are generic over the element type.
    Native,
    /// Not compiled: the equations whose complex forms have no native step (convolutions,
    /// windows, `reduce_precision`, ...).
    Refuse,
}

fn complex_route(prim: &Primitive) -> ComplexRoute {
    match prim {
        Primitive::Jit { .. }
        | Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::GenericReduce { .. }
        | Primitive::GenericReduceWindow { .. }
        | Primitive::ApproxTopK { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::CustomVjpCall { .. }
        | Primitive::Remat2 { .. }
        | Primitive::Name { .. }
        | Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::ShardAlike
        | Primitive::OptimizationBarrier
        | Primitive::DevicePut { .. }
        | Primitive::Scan { .. }
        | Primitive::Cond { .. }
        | Primitive::While { .. }
        | Primitive::SelectN
        | Primitive::BroadcastInDim { .. }
        | Primitive::Reshape { .. }
        | Primitive::Transpose { .. }
        | Primitive::Rev { .. }
        | Primitive::Squeeze { .. }
        | Primitive::ExpandDims { .. }
        | Primitive::Slice { .. }
        | Primitive::Pad { .. }
        | Primitive::Concatenate { .. }
        | Primitive::DynamicSlice { .. }
        | Primitive::DynamicUpdateSlice
        | Primitive::Split { .. }
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. }
        | Primitive::Empty2 { .. } => ComplexRoute::Inline,
        Primitive::Unary(_)
        | Primitive::Binary(_)
        | Primitive::Compare(_)
        | Primitive::IntegerPow { .. }
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::Fft { .. }
        | Primitive::ConvertElementType { .. }
        | Primitive::Reduce { .. }
        | Primitive::DotGeneral { .. }
        | Primitive::Gather { .. }
        | Primitive::Scatter { .. }
        | Primitive::Sort { .. }
        | Primitive::Cumulative { .. } => ComplexRoute::Native,
        Primitive::Clamp
        | Primitive::ReducePrecision { .. }
        | Primitive::Round { .. }
        | Primitive::BitcastConvertType { .. }
        | Primitive::Iota { .. }
        | Primitive::Argmax { .. }
        | Primitive::Argmin { .. }
        | Primitive::TopK { .. }
        | Primitive::RandomSeed
        | Primitive::RandomWrap
        | Primitive::RandomUnwrap
        | Primitive::RandomSplit { .. }
        | Primitive::RandomFoldIn
        | Primitive::RandomBits { .. }
        | Primitive::RandomClone
        | Primitive::Threefry2x32
        | Primitive::Iota2x32Shape { .. }
        | Primitive::RngBitGenerator { .. }
        | Primitive::Cholesky
        | Primitive::TriangularSolve(_)
        | Primitive::RegularizedIncompleteBeta
        | Primitive::Lu
        | Primitive::LuPivotsToPermutation { .. }
        | Primitive::Qr(_)
        | Primitive::Eigh(_)
        | Primitive::Svd(_)
        | Primitive::Geqrf
        | Primitive::HouseholderProduct
        | Primitive::Ormqr { .. }
        | Primitive::TridiagonalSolve { .. }
        | Primitive::SymmetricProduct { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::ConvGeneralDilated(_)
        | Primitive::ReduceWindow { .. }
        | Primitive::SelectAndScatterAdd { .. }
        | Primitive::SelectAndGatherAdd { .. }
        | Primitive::ShardMap(_)
        | Primitive::Pvary { .. }
        | Primitive::AllReduce { .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::AllToAll { .. }
        | Primitive::Pbroadcast { .. } => ComplexRoute::Refuse,
    }
}
