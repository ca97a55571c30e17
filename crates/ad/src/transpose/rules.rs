//! The transpose rule of every linear primitive: one exhaustive match, each arm JAX
//! 0.10.2's rule (`lax.py`, `slicing.py`). A rule receives the equation's operands (forward
//! values, or linear inputs with their avals) and the cotangents of its outputs (`None`
//! for a symbolic zero), and returns one cotangent per operand (`None` for a forward
//! value or a zero). Primitives that are never linear in an operand are errors.

use remat_ir::{
    AllReduceOp, Atom, Aval, BinaryOp, CompareOp, CopySemantics, CumulativeOp, DType, DotDimensionNumbers, Eqn,
    FftType, MemorySpace, Precision, Primitive, ReduceOp, ScatterOp, UnaryOp, WindowOp,
};

use super::{cond, custom_lin, indexing, scan_transpose, transpose_call, window, Operand};
use crate::builder::{lit, Builder};
use crate::partial_eval::WHILE_REVERSE_MODE;
use crate::AdError;

type Cts = Vec<Option<Atom>>;

pub(crate) fn transpose_rule(
    b: &mut Builder,
    eqn: &Eqn,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Cts, AdError> {
    let prim = &eqn.primitive;
    let not_linear = || AdError::Unsupported {
        primitive: prim.name(),
        message: "is not linear in its operands and cannot be transposed".into(),
    };
    let lin = |i: usize| ins[i].is_linear();
    let value = |i: usize| match &ins[i] {
        Operand::Value(a) => Ok(*a),
        Operand::Linear(_) => Err(not_linear()),
    };
    let aval = |i: usize, b: &Builder| match &ins[i] {
        Operand::Value(a) => b.aval(a),
        Operand::Linear(av) => av.clone(),
    };
    // Single-output primitives: the output cotangent (all-zero equations never get here).
    let single = || ct_outs[0];
    let mut out: Cts = vec![None; ins.len()];
    match prim {
        // JAX's `composite_transpose`.
        Primitive::Composite { .. } => {
            return Err(AdError::Unsupported {
                primitive: "composite",
                message: "Transpose rule for composite not implemented (JAX 0.10.2's `composite_transpose`)"
                    .to_string(),
            })
        }
        Primitive::Unary(op) => match op {
            UnaryOp::Neg => {
                if let Some(ct) = single() {
                    out[0] = Some(b.neg(ct)?);
                }
            }
            UnaryOp::Sign
            | UnaryOp::Abs
            | UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Square
            | UnaryOp::StopGradient => return Err(not_linear()),
            // `copy` is linear and its transpose is `copy` (`deflinear(copy_p, ...)`).
            UnaryOp::Copy => {
                if let Some(ct) = single() {
                    out[0] = Some(b.unary(UnaryOp::Copy, ct)?);
                }
            }
            UnaryOp::Not
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::IsFinite
            | UnaryOp::PopulationCount
            | UnaryOp::Clz
            | UnaryOp::Cbrt
            | UnaryOp::Exp2
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Atan
            | UnaryOp::Sinh
            | UnaryOp::Cosh
            | UnaryOp::Asinh
            | UnaryOp::Acosh
            | UnaryOp::Atanh
            | UnaryOp::Erf
            | UnaryOp::Erfc
            | UnaryOp::ErfInv
            | UnaryOp::Lgamma
            | UnaryOp::Digamma
            | UnaryOp::BesselI0e
            | UnaryOp::BesselI1e => return Err(not_linear()),
        },
        Primitive::Binary(op) => {
            let Some(ct) = single() else { return Ok(out) };
            match op {
                BinaryOp::Add | BinaryOp::AddAny => {
                    for (i, slot) in out.iter_mut().enumerate() {
                        if lin(i) {
                            *slot = Some(b.unbroadcast(&aval(i, b), ct)?);
                        }
                    }
                }
                BinaryOp::Sub => {
                    if lin(0) {
                        out[0] = Some(b.unbroadcast(&aval(0, b), ct)?);
                    }
                    if lin(1) {
                        let n = b.neg(ct)?;
                        out[1] = Some(b.unbroadcast(&aval(1, b), n)?);
                    }
                }
                BinaryOp::Mul => match (lin(0), lin(1)) {
                    (true, false) => {
                        let m = b.mul(ct, value(1)?)?;
                        out[0] = Some(b.unbroadcast(&aval(0, b), m)?);
                    }
                    (false, true) => {
                        let m = b.mul(value(0)?, ct)?;
                        out[1] = Some(b.unbroadcast(&aval(1, b), m)?);
                    }
                    _ => return Err(not_linear()),
                },
                BinaryOp::Div => {
                    if lin(1) || !lin(0) {
                        return Err(not_linear());
                    }
                    let d = b.div(ct, value(1)?)?;
                    out[0] = Some(b.unbroadcast(&aval(0, b), d)?);
                }
                BinaryOp::Pow
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::Rem
                | BinaryOp::Atan2
                | BinaryOp::Nextafter
                | BinaryOp::Polygamma
                | BinaryOp::Igamma
                | BinaryOp::Igammac
                | BinaryOp::IgammaGradA
                | BinaryOp::Zeta
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic
                | BinaryOp::Mulhi => return Err(not_linear()),
            }
        }
        Primitive::Compare(_)
        | Primitive::Round { .. }
        | Primitive::BitcastConvertType { .. }
        | Primitive::IntegerPow { .. }
        | Primitive::Clamp
        | Primitive::RegularizedIncompleteBeta
        | Primitive::Iota { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::Empty2 { .. }
        | Primitive::Argmax { .. }
        | Primitive::Argmin { .. }
        | Primitive::Sort { .. }
        | Primitive::TopK { .. }
        | Primitive::Cholesky
        | Primitive::Lu
        | Primitive::LuPivotsToPermutation { .. }
        | Primitive::Qr(_)
        | Primitive::Eigh(_)
        | Primitive::Svd(_)
        | Primitive::Geqrf
        | Primitive::HouseholderProduct
        | Primitive::Ormqr { .. }
        | Primitive::SymmetricProduct { .. }
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
        | Primitive::CustomJvpCall { .. } => return Err(not_linear()),
        // JAX's `_tridiagonal_solve_transpose_rule`: linear in `b` only; the cotangent is
        // solved against the transposed diagonals (`du` shifted down, `dl` up).
        Primitive::TridiagonalSolve { .. } => {
            if lin(0) || lin(1) || lin(2) || !lin(3) {
                return Err(not_linear());
            }
            let Some(ct) = single() else { return Ok(out) };
            let (dl, d, du) = (value(0)?, value(1)?, value(2)?);
            let (dl_t, du_t) = crate::jvp::linalg::transposed_diagonals(b, dl, du)?;
            out[3] = Some(b.bind1(prim.clone(), vec![dl_t, d, du_t, ct])?);
        }
        // JAX's `_triangular_solve_transpose_rule`: linear in `b` only; the cotangent is
        // solved against `a` transposed.
        Primitive::TriangularSolve(t) => {
            let Some(ct) = single() else { return Ok(out) };
            if lin(0) || !lin(1) {
                return Err(not_linear());
            }
            let back = remat_ir::TriangularSolve { transpose_a: !t.transpose_a, ..*t };
            out[1] = Some(crate::jvp::linalg::solve(b, back, value(0)?, ct)?);
        }
        Primitive::SelectN => {
            if lin(0) {
                return Err(not_linear());
            }
            let Some(ct) = single() else { return Ok(out) };
            let which = value(0)?;
            let ct_aval = b.aval(&ct);
            let zeros = b.full(&ct_aval, 0.0)?;
            let n = ins.len() - 1;
            for i in 0..n {
                if lin(i + 1) {
                    let cases: Vec<Atom> = (0..n).map(|j| if i == j { ct } else { zeros }).collect();
                    out[i + 1] = Some(b.select_n(which, cases)?);
                }
            }
        }
        Primitive::ConvertElementType { .. } => {
            if let Some(ct) = single() {
                let old = aval(0, b).dtype;
                if old.is_inexact() {
                    let p = Primitive::ConvertElementType { new_dtype: old, weak_type: false };
                    out[0] = Some(b.bind1(p, vec![ct])?);
                }
            }
        }
        // JAX's `deflinear2` transposes: `complex` gives `[real(t), imag(neg(t))]`, `real`
        // gives `complex(t, 0)`, `imag` gives `complex(0, neg(t))`, and `conj` of a complex
        // operand is `conj`, of a real one `real`.
        Primitive::Complex => {
            let Some(ct) = single() else { return Ok(out) };
            if lin(0) {
                let re = b.bind1(Primitive::Real, vec![ct])?;
                out[0] = Some(b.unbroadcast(&aval(0, b), re)?);
            }
            if lin(1) {
                let neg = b.neg(ct)?;
                let im = b.bind1(Primitive::Imag, vec![neg])?;
                out[1] = Some(b.unbroadcast(&aval(1, b), im)?);
            }
        }
        Primitive::Real => {
            if let Some(ct) = single() {
                let zero = lit(b.aval(&ct).dtype, 0.0);
                out[0] = Some(b.bind1(Primitive::Complex, vec![ct, zero])?);
            }
        }
        Primitive::Imag => {
            if let Some(ct) = single() {
                let zero = lit(b.aval(&ct).dtype, 0.0);
                let neg = b.neg(ct)?;
                out[0] = Some(b.bind1(Primitive::Complex, vec![zero, neg])?);
            }
        }
        Primitive::Conj { input_dtype } => {
            if let Some(ct) = single() {
                let p = if input_dtype.is_complex() { prim.clone() } else { Primitive::Real };
                out[0] = Some(b.bind1(p, vec![ct])?);
            }
        }
        // JAX's `_fft_transpose_rule`.
        Primitive::Fft { fft_type, fft_lengths } => {
            if let Some(ct) = single() {
                out[0] = Some(fft_transpose(b, *fft_type, fft_lengths, ct)?);
            }
        }
        Primitive::ReducePrecision { .. } => {
            if let Some(ct) = single() {
                out[0] = Some(b.bind1(prim.clone(), vec![ct])?);
            }
        }
        Primitive::Name { .. } => out[0] = single(),
        // Sharding annotations transpose to themselves.
        Primitive::ShardingConstraint(_) | Primitive::Reshard => {
            if let Some(ct) = single() {
                out[0] = Some(b.bind1(prim.clone(), vec![ct])?);
            }
        }
        // The collectives' transposes, as JAX 0.10.2's `lax/parallel.py` gives them: psum is
        // psum then pbroadcast, so its own transpose; psum_invariant and pvary transpose to
        // each other; all_gather and reduce_scatter too; ppermute to the inverse permutation.
        Primitive::AllReduce { op, axes } => {
            let t = match op {
                AllReduceOp::Psum => Some(prim.clone()),
                AllReduceOp::PsumInvariant => Some(Primitive::Pvary { axes: axes.clone() }),
                AllReduceOp::Pmax | AllReduceOp::Pmin => return Err(not_linear()),
            };
            if let (Some(t), Some(ct)) = (t, single()) {
                out[0] = Some(b.bind1(t, vec![ct])?);
            }
        }
        Primitive::Pvary { axes } => {
            if let Some(ct) = single() {
                let t = Primitive::AllReduce { op: AllReduceOp::PsumInvariant, axes: axes.clone() };
                out[0] = Some(b.bind1(t, vec![ct])?);
            }
        }
        Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, invariant: true } => {
            if let Some(ct) = single() {
                out[0] =
                    Some(all_gather_invariant_transpose(b, ct, axis_name, *all_gather_dimension, *axis_size, *tiled)?);
            }
        }
        Primitive::AllToAll { axis_name, bare_name, split_axis, concat_axis, tiled, axis_size } => {
            if let Some(ct) = single() {
                // JAX's `_all_to_all_transpose_rule`: the split and concatenated axes swapped.
                let t = Primitive::AllToAll {
                    axis_name: axis_name.clone(),
                    bare_name: *bare_name,
                    split_axis: *concat_axis,
                    concat_axis: *split_axis,
                    tiled: *tiled,
                    axis_size: *axis_size,
                };
                out[0] = Some(b.bind1(t, vec![ct])?);
            }
        }
        Primitive::ShardAlike => {
            // JAX's `shard_alike_transpose`: the cotangents laid out alike where both are
            // nonzero.
            match (ct_outs.first().copied().flatten(), ct_outs.get(1).copied().flatten()) {
                (Some(x), Some(y)) => {
                    let cts = b.bind(Primitive::ShardAlike, vec![x, y])?;
                    out[0] = cts.first().map(|&v| Atom::Var(v));
                    out[1] = cts.get(1).map(|&v| Atom::Var(v));
                }
                (x, y) => {
                    out[0] = x;
                    out[1] = y;
                }
            }
        }
        Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, invariant: false } => {
            if let Some(ct) = single() {
                let t = Primitive::ReduceScatter {
                    axis_name: axis_name.clone(),
                    scatter_dimension: *all_gather_dimension,
                    axis_size: *axis_size,
                    tiled: *tiled,
                };
                out[0] = Some(b.bind1(t, vec![ct])?);
            }
        }
        Primitive::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled } => {
            if let Some(ct) = single() {
                let t = Primitive::AllGather {
                    axis_name: axis_name.clone(),
                    all_gather_dimension: *scatter_dimension,
                    axis_size: *axis_size,
                    tiled: *tiled,
                    invariant: false,
                };
                out[0] = Some(b.bind1(t, vec![ct])?);
            }
        }
        Primitive::Ppermute { axis_name, perm } => {
            if let Some(ct) = single() {
                let inverse = perm.iter().map(|&(s, d)| (d, s)).collect();
                out[0] = Some(b.bind1(Primitive::Ppermute { axis_name: axis_name.clone(), perm: inverse }, vec![ct])?);
            }
        }
        Primitive::Pbroadcast { axis_name, source } => {
            if let Some(ct) = single() {
                out[0] = Some(pbroadcast_transpose(b, ct, axis_name, *source)?);
            }
        }
        Primitive::AxisIndex { .. } => return Err(not_linear()),
        Primitive::ShardMap(sm) => return super::transpose_shard_map(b, sm, ins, ct_outs),
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            if let Some(ct) = single() {
                // Sum over the broadcast axes, keeping the operand's unit axes.
                let op = aval(0, b);
                let unit_dims: Vec<usize> = (0..op.rank()).filter(|&i| op.shape[i] == 1).collect();
                let bdims: Vec<usize> = broadcast_dimensions
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !unit_dims.contains(i))
                    .map(|(_, &d)| d)
                    .collect();
                let axes: Vec<usize> = (0..shape.len()).filter(|d| !bdims.contains(d)).collect();
                let s = b.reduce_sum(ct, &axes)?;
                out[0] = Some(b.expand_dims(s, &unit_dims)?);
            }
        }
        Primitive::Reshape { new_sizes: _, dimensions: None } | Primitive::ExpandDims { .. } => {
            if let Some(ct) = single() {
                out[0] = Some(b.reshape(ct, &aval(0, b).shape)?);
            }
        }
        Primitive::Reshape { new_sizes: _, dimensions: Some(d) } => {
            // `_reshape_transpose_rule`: reshape to the permuted shape, then transpose back.
            if let Some(ct) = single() {
                let op = aval(0, b);
                let permuted: Vec<usize> = d.iter().map(|&k| op.shape[k]).collect();
                let r = b.reshape(ct, &permuted)?;
                out[0] = Some(b.transpose(r, &argsort(d))?);
            }
        }
        Primitive::Transpose { permutation } => {
            if let Some(ct) = single() {
                out[0] = Some(b.transpose(ct, &argsort(permutation))?);
            }
        }
        // `rev` is its own transpose.
        Primitive::Rev { dimensions } => {
            if let Some(ct) = single() {
                out[0] = Some(b.bind1(Primitive::Rev { dimensions: dimensions.clone() }, vec![ct])?);
            }
        }
        Primitive::Squeeze { dimensions } => {
            if let Some(ct) = single() {
                out[0] = Some(b.expand_dims(ct, dimensions)?);
            }
        }
        Primitive::Slice { start_indices, limit_indices, strides } => {
            if let Some(ct) = single() {
                let op = aval(0, b);
                let ct_shape = b.aval(&ct).shape;
                let unit = strides.as_ref().is_none_or(|s| s.iter().all(|&x| x == 1));
                let pads: Vec<(i64, i64, i64)> = (0..op.rank())
                    .map(|d| {
                        let start = start_indices[d] as i64;
                        if unit {
                            (start, op.shape[d] as i64 - limit_indices[d] as i64, 0)
                        } else {
                            let stride = strides.as_ref().map_or(1, |s| s[d]) as i64;
                            let n = ct_shape[d] as i64;
                            let real_limit = start + if n == 0 { 0 } else { 1 + (n - 1) * stride };
                            (start, op.shape[d] as i64 - real_limit, stride - 1)
                        }
                    })
                    .collect();
                out[0] = Some(b.bind1(Primitive::Pad { padding_config: pads }, vec![ct, lit(op.dtype, 0.0)])?);
            }
        }
        Primitive::Pad { padding_config } => {
            if let Some(ct) = single() {
                let dt = b.aval(&ct).dtype;
                let t_operand = if lin(0) || lin(1) {
                    let unpad: Vec<(i64, i64, i64)> = padding_config.iter().map(|&(lo, hi, _)| (-lo, -hi, 0)).collect();
                    let unpadded = b.bind1(Primitive::Pad { padding_config: unpad }, vec![ct, lit(dt, 0.0)])?;
                    let shape = b.aval(&unpadded).shape;
                    let slice = Primitive::Slice {
                        start_indices: vec![0; shape.len()],
                        limit_indices: shape.clone(),
                        strides: Some(padding_config.iter().map(|&(_, _, i)| i as usize + 1).collect()),
                    };
                    Some(b.bind1(slice, vec![unpadded])?)
                } else {
                    None
                };
                if lin(1) {
                    let total = |b: &mut Builder, x: Atom| {
                        let r = b.aval(&x).rank();
                        b.reduce_sum(x, &(0..r).collect::<Vec<_>>())
                    };
                    let t_all = total(b, ct)?;
                    let t_op = t_operand.ok_or_else(not_linear)?;
                    let t_in = total(b, t_op)?;
                    out[1] = Some(b.sub(t_all, t_in)?);
                }
                out[0] = if lin(0) { t_operand } else { None };
            }
        }
        Primitive::Concatenate { dimension } => {
            if let Some(ct) = single() {
                let ct_shape = b.aval(&ct).shape;
                let mut offset = 0;
                for (i, slot) in out.iter_mut().enumerate() {
                    let a = aval(i, b);
                    let size = a.shape[*dimension];
                    if lin(i) {
                        let mut start = vec![0; ct_shape.len()];
                        let mut limit = ct_shape.clone();
                        start[*dimension] = offset;
                        limit[*dimension] = offset + size;
                        let s = Primitive::Slice { start_indices: start, limit_indices: limit, strides: None };
                        *slot = Some(b.bind1(s, vec![ct])?);
                    }
                    offset += size;
                }
            }
        }
        Primitive::DynamicSlice { .. } => {
            if let Some(ct) = single() {
                let op = aval(0, b);
                let zeros = b.zeros(&op)?;
                let mut args = vec![zeros, ct];
                for i in 1..ins.len() {
                    args.push(value(i)?);
                }
                out[0] = Some(b.bind1(Primitive::DynamicUpdateSlice, args)?);
            }
        }
        Primitive::DynamicUpdateSlice => {
            if let Some(ct) = single() {
                let up = aval(1, b);
                let idx: Vec<Atom> = (2..ins.len()).map(value).collect::<Result<_, _>>()?;
                let zeros = b.zeros(&up)?;
                if lin(0) {
                    let mut args = vec![ct, zeros];
                    args.extend(idx.iter().copied());
                    out[0] = Some(b.bind1(Primitive::DynamicUpdateSlice, args)?);
                }
                if lin(1) {
                    let mut args = vec![ct];
                    args.extend(idx.iter().copied());
                    out[1] = Some(b.bind1(Primitive::DynamicSlice { slice_sizes: up.shape.clone() }, args)?);
                }
            }
        }
        Primitive::Reduce { op, axes } => match op {
            ReduceOp::Sum => {
                if let Some(ct) = single() {
                    let shape = aval(0, b).shape;
                    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
                    out[0] = Some(b.broadcast_in_dim(ct, &shape, &kept)?);
                }
            }
            ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod | ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => {
                return Err(not_linear())
            }
        },
        Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision } => {
            let Some(ct) = single() else { return Ok(out) };
            match (lin(0), lin(1)) {
                (true, false) => {
                    let x = aval(0, b);
                    out[0] = Some(dot_transpose_lhs(
                        b,
                        ct,
                        &x,
                        value(1)?,
                        dimension_numbers,
                        (*preferred_element_type, *precision),
                        false,
                    )?);
                }
                (false, true) => {
                    let y = aval(1, b);
                    let dn = dimension_numbers;
                    let swapped = DotDimensionNumbers {
                        lhs_contracting: dn.rhs_contracting.clone(),
                        rhs_contracting: dn.lhs_contracting.clone(),
                        lhs_batch: dn.rhs_batch.clone(),
                        rhs_batch: dn.lhs_batch.clone(),
                    };
                    out[1] = Some(dot_transpose_lhs(
                        b,
                        ct,
                        &y,
                        value(0)?,
                        &swapped,
                        (*preferred_element_type, *precision),
                        true,
                    )?);
                }
                _ => return Err(not_linear()),
            }
        }
        Primitive::OptimizationBarrier => {
            // `_opt_barrier_transpose`: a barrier of the cotangents, zeros instantiated.
            if ct_outs.iter().any(Option::is_some) {
                let mut cts = Vec::with_capacity(ct_outs.len());
                for (i, ct) in ct_outs.iter().enumerate() {
                    cts.push(match ct {
                        Some(ct) => *ct,
                        None => {
                            let a = aval(i, b);
                            b.zeros(&a)?
                        }
                    });
                }
                let outs = b.bind(Primitive::OptimizationBarrier, cts)?;
                for (i, v) in outs.into_iter().enumerate() {
                    if lin(i) {
                        out[i] = Some(Atom::Var(v));
                    }
                }
            }
        }
        Primitive::DevicePut { devices, copy_semantics: _ } => {
            for i in 0..ins.len() {
                if let (true, Some(ct)) = (lin(i), ct_outs[i]) {
                    // Back to the operand's memory space; JAX's `_device_put_transpose` puts
                    // a cotangent whose operand had no target (`None`) and was in device
                    // memory back with no target either.
                    let back = match (devices[i], aval(i, b).memory_space) {
                        (None, MemorySpace::Device) => None,
                        (_, space) => Some(space),
                    };
                    let p =
                        Primitive::DevicePut { devices: vec![back], copy_semantics: vec![CopySemantics::AlwaysCopy] };
                    out[i] = Some(b.bind1(p, vec![ct])?);
                }
            }
        }
        Primitive::ConvGeneralDilated(c) => {
            let Some(ct) = single() else { return Ok(out) };
            match (lin(0), lin(1)) {
                (true, false) => out[0] = Some(window::conv_transpose_lhs(b, c, ct, &aval(0, b), value(1)?)?),
                (false, true) => out[1] = window::conv_transpose_rhs(b, c, ct, value(0)?, &aval(1, b))?,
                _ => return Err(not_linear()),
            }
        }
        Primitive::ReduceWindow { op, window } => match op {
            WindowOp::Sum => {
                if let Some(ct) = single() {
                    out[0] = Some(window::reduce_window_sum_transpose(b, window, ct, &aval(0, b))?);
                }
            }
            WindowOp::Max | WindowOp::Min => return Err(not_linear()),
        },
        Primitive::SelectAndGatherAdd { select_prim, window } => {
            if !lin(0) || lin(1) {
                return Err(not_linear());
            }
            if let Some(ct) = single() {
                out[0] = Some(window::select_and_gather_add_transpose(b, *select_prim, window, ct, value(1)?)?);
            }
        }
        Primitive::SelectAndScatterAdd { select_prim, window_dimensions, window_strides, padding } => {
            if !lin(0) || lin(1) {
                return Err(not_linear());
            }
            if let Some(ct) = single() {
                out[0] = Some(window::select_and_scatter_add_transpose(
                    b,
                    *select_prim,
                    window_dimensions,
                    window_strides,
                    padding,
                    ct,
                    value(1)?,
                )?);
            }
        }
        Primitive::Jit { .. } | Primitive::ClosedCall { .. } | Primitive::Remat2 { .. } => {
            return transpose_call(b, eqn, ins, ct_outs)
        }
        Primitive::Scan { .. } => return scan_transpose(b, eqn, ins, ct_outs),
        Primitive::Stack { axis } => {
            // `_stack_transpose_rule`: the cotangent unstacked.
            if let Some(ct) = single() {
                let pieces = b.bind(Primitive::Unstack { axis: *axis }, vec![ct])?;
                for (i, (slot, piece)) in out.iter_mut().zip(pieces).enumerate() {
                    if lin(i) {
                        *slot = Some(Atom::Var(piece));
                    }
                }
            }
        }
        Primitive::Unstack { axis } => {
            // `_unstack_transpose_rule`: the cotangents stacked, zeros instantiated.
            if lin(0) && ct_outs.iter().any(Option::is_some) {
                let mut piece = aval(0, b);
                piece.shape.remove(*axis);
                let mut cts = Vec::with_capacity(ct_outs.len());
                for ct in ct_outs {
                    cts.push(match ct {
                        Some(ct) => *ct,
                        None => b.zeros(&piece)?,
                    });
                }
                out[0] = Some(b.bind1(Primitive::Stack { axis: *axis }, cts)?);
            }
        }
        Primitive::Tile { reps } => {
            // `_tile_transpose_rule`: the cotangent reshaped to `(reps[0], n0, reps[1], n1,
            // ...)` and summed over the repetitions.
            if let (Some(ct), true) = (single(), lin(0)) {
                let operand = aval(0, b);
                let shape: Vec<usize> = reps.iter().zip(&operand.shape).flat_map(|(&r, &n)| [r, n]).collect();
                let r = b.reshape(ct, &shape)?;
                let axes: Vec<usize> = (0..operand.rank()).map(|k| 2 * k).collect();
                out[0] = Some(b.reduce_sum(r, &axes)?);
            }
        }
        Primitive::Split { axis, sizes } => {
            // `_split_transpose_rule`: the cotangents concatenated, zeros instantiated.
            if lin(0) && ct_outs.iter().any(Option::is_some) {
                let operand = aval(0, b);
                let mut cts = Vec::with_capacity(ct_outs.len());
                for (ct, &size) in ct_outs.iter().zip(sizes) {
                    cts.push(match ct {
                        Some(ct) => *ct,
                        None => {
                            let mut piece = operand.clone();
                            piece.shape[*axis] = size;
                            b.zeros(&piece)?
                        }
                    });
                }
                out[0] = Some(b.bind1(Primitive::Concatenate { dimension: *axis }, cts)?);
            }
        }
        Primitive::Gather { .. } => {
            if let Some(ct) = single() {
                let operand = aval(0, b);
                out[0] = Some(indexing::gather_transpose(b, prim, ct, &operand, value(1)?)?);
            }
        }
        Primitive::Scatter { op: op @ (ScatterOp::Add | ScatterOp::Sub), .. } => {
            // `_scatter_addsub_transpose_rule`: the cotangent for the operand, its gather
            // for the updates (negated for `scatter-sub`).
            if let Some(ct) = single() {
                if lin(0) {
                    out[0] = Some(ct);
                }
                if lin(2) {
                    let updates = aval(2, b);
                    let g = indexing::scatter_add_transpose_updates(b, prim, ct, &updates, value(1)?)?;
                    out[2] = Some(if *op == ScatterOp::Sub { b.neg(g)? } else { g });
                }
            }
        }
        Primitive::Scatter { op: ScatterOp::Set, .. } => {
            if let Some(ct) = single() {
                let updates = aval(2, b);
                let (o, u) = indexing::scatter_transpose(b, prim, ct, (lin(0), lin(2)), &updates, value(1)?)?;
                out[0] = o;
                out[2] = u;
            }
        }
        Primitive::Scatter { op: ScatterOp::Mul, .. } => {
            // `_scatter_mul_transpose_rule`: linear in the operand, the updates a value.
            if lin(2) {
                return Err(not_linear());
            }
            if let (Some(ct), true) = (single(), lin(0)) {
                out[0] = Some(b.bind1(prim.clone(), vec![ct, value(1)?, value(2)?])?);
            }
        }
        Primitive::Scatter { .. } => return Err(not_linear()),
        Primitive::Cumulative { op: CumulativeOp::Sum, axis, reverse } => {
            if let Some(ct) = single() {
                let p = Primitive::Cumulative { op: CumulativeOp::Sum, axis: *axis, reverse: !*reverse };
                out[0] = Some(b.bind1(p, vec![ct])?);
            }
        }
        Primitive::Cumulative { .. } => return Err(not_linear()),
        Primitive::GenericReduce { .. } | Primitive::GenericReduceWindow { .. } | Primitive::ApproxTopK { .. } => {
            return Err(not_linear())
        }
        Primitive::Cond { .. } => return cond::cond_transpose(b, eqn, ins, ct_outs),
        Primitive::While { .. } => {
            return Err(AdError::Unsupported { primitive: "while", message: WHILE_REVERSE_MODE.into() })
        }
        Primitive::CustomVjpCall { name, fwd, bwd, num_consts, .. } if name == crate::custom::CUSTOM_LIN => {
            return custom_lin::transpose_custom_lin(b, fwd, bwd, *num_consts, ins, ct_outs);
        }
        Primitive::CustomVjpCall { .. } => return Err(not_linear()),
    }
    Ok(out)
}

/// JAX's `_all_gather_invariant_transpose_rule`: this device's slice of the cotangent (a
/// `dynamic_slice` at `axis_index * slice`), squeezed where the gather stacked; the
/// cotangent and the index made to vary over the same axes first (JAX's automatic `pvary`).
fn all_gather_invariant_transpose(
    b: &mut Builder,
    ct: Atom,
    axis_name: &[String],
    dim: usize,
    axis_size: usize,
    tiled: bool,
) -> Result<Atom, AdError> {
    let [axis] = axis_name else {
        return Err(AdError::Unsupported {
            primitive: "all_gather_invariant",
            message: format!("remat transposes an all_gather_invariant over one axis, not {axis_name:?}"),
        });
    };
    let aval = b.aval(&ct);
    let slice = aval.shape.get(dim).copied().unwrap_or(0) / axis_size.max(1);
    let index = b.bind1(Primitive::AxisIndex { axis_name: axis.clone() }, Vec::new())?;
    let start = b.bind1(Primitive::Binary(BinaryOp::Mul), vec![index, lit(DType::I32, slice as f64)])?;
    // The union of the varying axes, where the body tracks them (`check_vma`).
    let (ct, start) = match aval.vma.is_empty() && b.aval(&start).vma.is_empty() {
        true => (ct, start),
        false => {
            let missing = |have: &remat_ir::Vma, want: &[String]| -> Vec<String> {
                want.iter().filter(|n| !have.names().contains(n)).cloned().collect()
            };
            let mut union: Vec<String> = aval.vma.names().to_vec();
            union.extend(missing(&aval.vma, axis_name));
            let ct_more = missing(&aval.vma, &union);
            let ct = match ct_more.is_empty() {
                true => ct,
                false => b.bind1(Primitive::Pvary { axes: ct_more }, vec![ct])?,
            };
            let start_vma = b.aval(&start).vma;
            let start_more = missing(&start_vma, &union);
            let start = match start_more.is_empty() {
                true => start,
                false => b.bind1(Primitive::Pvary { axes: start_more }, vec![start])?,
            };
            (ct, start)
        }
    };
    let mut sizes = aval.shape.clone();
    sizes[dim] = slice;
    let mut ins = vec![ct];
    ins.extend((0..sizes.len()).map(|d| if d == dim { start } else { lit(DType::I32, 0.0) }));
    let out = b.bind1(Primitive::DynamicSlice { slice_sizes: sizes }, ins)?;
    match tiled {
        true => Ok(out),
        false => b.bind1(Primitive::Squeeze { dimensions: vec![dim] }, vec![out]),
    }
}

/// JAX's `_pbroadcast_transpose_rule`: the cotangents summed over `axis_name`
/// (`psum_invariant` and back to varying where the body tracks varying axes), on the source
/// device; zeros on the others (`select_n` on `axis_index == source`).
fn pbroadcast_transpose(b: &mut Builder, ct: Atom, axis_name: &[String], source: usize) -> Result<Atom, AdError> {
    let [axis] = axis_name else {
        return Err(AdError::Unsupported {
            primitive: "pbroadcast",
            message: format!("remat transposes a pbroadcast over one axis, not {axis_name:?}"),
        });
    };
    let aval = b.aval(&ct);
    let checked = !aval.vma.is_empty();
    let sum = match checked {
        true => {
            let s =
                b.bind1(Primitive::AllReduce { op: AllReduceOp::PsumInvariant, axes: axis_name.to_vec() }, vec![ct])?;
            b.bind1(Primitive::Pvary { axes: axis_name.to_vec() }, vec![s])?
        }
        false => b.bind1(Primitive::AllReduce { op: AllReduceOp::Psum, axes: axis_name.to_vec() }, vec![ct])?,
    };
    let index = b.bind1(Primitive::AxisIndex { axis_name: axis.clone() }, Vec::new())?;
    let mut is_source = b.bind1(Primitive::Compare(CompareOp::Eq), vec![index, lit(DType::I32, source as f64)])?;
    // The predicate varies over the cotangent's axes, as JAX's automatic `pvary` makes it.
    let more: Vec<String> = aval.vma.names().iter().filter(|n| *n != axis).cloned().collect();
    if checked && !more.is_empty() {
        is_source = b.bind1(Primitive::Pvary { axes: more }, vec![is_source])?;
    }
    let zero = lit(aval.dtype, 0.0);
    let mut zeros =
        b.bind1(Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: Vec::new() }, vec![zero])?;
    if checked {
        zeros = b.bind1(Primitive::Pvary { axes: aval.vma.names().to_vec() }, vec![zeros])?;
    }
    b.bind1(Primitive::SelectN, vec![is_source, zeros, sum])
}

fn argsort(xs: &[usize]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by_key(|&i| xs[i]);
    idx
}

/// JAX's `_dot_general_transpose_lhs`: the cotangent of the lhs `x` of a `dot_general`
/// with cotangent `g` and rhs value `y`; with `swap_ans`, the rhs (operands swapped).
fn dot_transpose_lhs(
    b: &mut Builder,
    g: Atom,
    x: &Aval,
    y: Atom,
    dn: &DotDimensionNumbers,
    (preferred, precision): (Option<DType>, Option<(Precision, Precision)>),
    swap_ans: bool,
) -> Result<Atom, AdError> {
    let y_ndim = b.aval(&y).rank();
    let remaining =
        |n: usize, a: &[usize], c: &[usize]| (0..n).filter(|d| !a.contains(d) && !c.contains(d)).collect::<Vec<_>>();
    let x_kept = remaining(x.rank(), &dn.lhs_contracting, &dn.lhs_batch);
    let y_kept = remaining(y_ndim, &dn.rhs_contracting, &dn.rhs_batch);
    let nb = dn.lhs_batch.len();
    let ans_batch: Vec<usize> = (0..nb).collect();
    let ans_y: Vec<usize> = if swap_ans {
        (nb..nb + y_kept.len()).collect()
    } else {
        (nb + x_kept.len()..nb + x_kept.len() + y_kept.len()).collect()
    };
    let dims = DotDimensionNumbers {
        lhs_contracting: ans_y,
        rhs_contracting: y_kept,
        lhs_batch: ans_batch,
        rhs_batch: dn.rhs_batch.clone(),
    };
    let order = argsort(&dn.rhs_contracting);
    let x_contract_sorted_by_y: Vec<usize> = order.iter().map(|&i| dn.lhs_contracting[i]).collect();
    let mut unsorted: Vec<usize> = dn.lhs_batch.clone();
    unsorted.extend(&x_kept);
    unsorted.extend(&x_contract_sorted_by_y);
    let out_axes = argsort(&unsorted);
    let d = b.dot_general(g, y, dims, preferred, precision)?;
    let t = b.transpose(d, &out_axes)?;
    b.convert(t, x.dtype)
}

/// JAX's `_fft_transpose_rule`: a complex transform is its own transpose (the DFT matrix is
/// symmetric); `rfft`'s is `N * irfft(conj(t) / mask)` and `irfft`'s is
/// `conj((1 / N) * mask * rfft(t))`, with `mask` 1 at the zero frequency (and at the Nyquist
/// frequency of an even length) and 2 elsewhere on the last axis, for the terms the real
/// transforms hold once for two.
fn fft_transpose(b: &mut Builder, fft_type: FftType, lengths: &[usize], t: Atom) -> Result<Atom, AdError> {
    let fft = |b: &mut Builder, fft_type: FftType, x: Atom| {
        b.bind1(Primitive::Fft { fft_type, fft_lengths: lengths.to_vec() }, vec![x])
    };
    let n_total: usize = lengths.iter().product();
    let last = lengths[lengths.len() - 1];
    // The mask over the last axis (`m` terms), of `dtype`, shaped to broadcast against rank `rank`.
    let mask = |b: &mut Builder, m: usize, dtype: DType, rank: usize| -> Result<Atom, AdError> {
        let even = last.is_multiple_of(2);
        let mut pieces = vec![b.full(&Aval::new(dtype, vec![1]), 1.0)?];
        let middle = m.saturating_sub(1 + usize::from(even && m > 1));
        if middle > 0 {
            pieces.push(b.full(&Aval::new(dtype, vec![middle]), 2.0)?);
        }
        if even && m > 1 {
            pieces.push(b.full(&Aval::new(dtype, vec![1]), 1.0)?);
        }
        let mask =
            if pieces.len() == 1 { pieces[0] } else { b.bind1(Primitive::Concatenate { dimension: 0 }, pieces)? };
        let mut shape = vec![1; rank - 1];
        shape.push(m);
        b.reshape(mask, &shape)
    };
    match fft_type {
        FftType::Fft | FftType::Ifft => fft(b, fft_type, t),
        FftType::Rfft => {
            let aval = b.aval(&t);
            let m = aval.shape[aval.rank() - 1];
            let mk = mask(b, m, aval.dtype, aval.rank())?;
            let mk = b.maybe_broadcast(&aval.shape, mk)?;
            let ct = b.bind1(Primitive::Conj { input_dtype: aval.dtype }, vec![t])?;
            let d = b.div(ct, mk)?;
            let x = fft(b, FftType::Irfft, d)?;
            let real = b.aval(&x).dtype;
            b.mul(lit(real, n_total as f64), x)
        }
        FftType::Irfft => {
            let x = fft(b, FftType::Rfft, t)?;
            let aval = b.aval(&x);
            let m = aval.shape[aval.rank() - 1];
            let mk = mask(b, m, aval.dtype, aval.rank())?;
            let scaled = b.mul(lit(aval.dtype, 1.0 / n_total as f64), mk)?;
            let scaled = b.maybe_broadcast(&aval.shape, scaled)?;
            let out = b.mul(scaled, x)?;
            b.bind1(Primitive::Conj { input_dtype: aval.dtype }, vec![out])
        }
    }
}
