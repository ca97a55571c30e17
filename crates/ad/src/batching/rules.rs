//! One batching rule per primitive, each the equations JAX 0.10.2's rule emits
//! (`jax/_src/lax/lax.py`, `slicing.py`, `control_flow/loops.py`, `batching.py`'s
//! `broadcast_batcher`, `reducer_batcher`, `add_batched`), in one exhaustive match.
//!
//! Parameters JAX computes with NumPy (`np.add(1, dims)`, `np.where(..)`) print as
//! `np.int64(..)`; the rules spell them so (`np_tuple`).

use std::sync::Arc;

use remat_ir::{Atom, Aval, ClosedJaxpr, CompareOp, DType, DotDimensionNumbers, Eqn, Jaxpr, JitOptions, Primitive};

use super::control;
use super::indexing::{self, GatherParams, ScatterParams};
use super::window::{self, ScatterWindow};
use super::{
    batch_jaxpr_axes, batch_jaxpr_bools, bdim_at_front, broadcast, lax_broadcast, moveaxis, np_tuple, Batched, OutAxes,
};
use crate::builder::{lit, Builder};
use crate::AdError;

/// The batched results of `eqn` on `ins` (at least one batched).
pub(super) fn batch_eqn(b: &mut Builder, eqn: &Eqn, ins: &[Batched], size: usize) -> Result<Vec<Batched>, AdError> {
    let prim = &eqn.primitive;
    let one = |r: Result<Batched, AdError>| r.map(|x| vec![x]);
    match prim {
        // JAX 0.10.2 registers no batching rule for `composite`.
        Primitive::Composite { .. } => Err(AdError::Unsupported {
            primitive: "composite",
            message: "Batching rule for 'composite' not implemented (JAX 0.10.2 registers none)".to_string(),
        }),
        // Vectorized: the batch axis stays where it is.
        Primitive::Unary(_)
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::IntegerPow { .. }
        | Primitive::ConvertElementType { .. }
        | Primitive::ReducePrecision { .. }
        | Primitive::Round { .. }
        | Primitive::Name { .. }
        | Primitive::BitcastConvertType { .. }
        | Primitive::RandomSeed
        | Primitive::RandomSplit { .. }
        | Primitive::RandomBits { .. }
        | Primitive::RandomUnwrap
        | Primitive::RandomClone => {
            let (x, d) = ins[0];
            Ok(vec![(b.bind1(prim.clone(), vec![x])?, d)])
        }
        // JAX's `_shard_alike_batcher`: both operands batched along one axis.
        Primitive::ShardAlike => {
            let ((x, xd), (y, yd)) = (ins[0], ins[1]);
            let (x, y, d) = match (xd, yd) {
                (Some(a), Some(c)) if a == c => (x, y, Some(a)),
                (None, None) => (x, y, None),
                (Some(a), None) => (x, broadcast(b, y, size, a)?, Some(a)),
                (None, Some(c)) => (broadcast(b, x, size, c)?, y, Some(c)),
                (Some(a), Some(c)) => (x, moveaxis(b, y, c, a)?, Some(a)),
            };
            let outs = b.bind(prim.clone(), vec![x, y])?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), d)).collect())
        }
        // JAX's `_reshard_batcher`: the batch axis stays where it is.
        Primitive::Reshard => {
            let (x, d) = ins[0];
            Ok(vec![(b.bind1(prim.clone(), vec![x])?, d)])
        }
        // JAX's `_sharding_constraint_batcher`: the batch axis is not split (a `None` entry
        // at its place in the spec) and the unconstrained dimensions after it move by one.
        Primitive::ShardingConstraint(c) => {
            let (x, d) = ins[0];
            let Some(d) = d else { return Ok(vec![(b.bind1(prim.clone(), vec![x])?, None)]) };
            let mut c = (**c).clone();
            if let remat_ir::Sharding::Named { spec, .. } = &mut c.sharding {
                let rank = b.aval(&x).rank();
                while spec.0.len() + 1 < rank {
                    spec.0.push(remat_ir::SpecEntry::Replicated);
                }
                spec.0.insert(d.min(spec.0.len()), remat_ir::SpecEntry::Replicated);
            }
            c.unconstrained_dims = c.unconstrained_dims.iter().map(|&u| u + usize::from(d <= u)).collect();
            Ok(vec![(b.bind1(Primitive::ShardingConstraint(Box::new(c)), vec![x])?, Some(d))])
        }
        Primitive::ShardMap(_)
        | Primitive::AllReduce { .. }
        | Primitive::Pvary { .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::AllToAll { .. }
        | Primitive::Pbroadcast { .. } => Err(AdError::Unsupported {
            primitive: prim.name(),
            message: "remat does not vmap sharded programs yet".to_string(),
        }),
        Primitive::Binary(remat_ir::BinaryOp::AddAny) => one(add_batched(b, prim, ins, size)),
        Primitive::Binary(_) | Primitive::Compare(_) | Primitive::Complex | Primitive::RegularizedIncompleteBeta => {
            one(broadcast_batcher(b, prim, ins))
        }
        Primitive::SelectN => one(select_n(b, ins, size)),
        Primitive::RandomFoldIn => one(broadcast_batcher(b, prim, ins)),
        // JAX's `defbroadcasting`: both results batched as the operands.
        Primitive::Threefry2x32 => broadcast_batcher_all(b, prim, ins),
        // JAX's `_fft_batching_rule`: the batch axis first, the transformed axes last.
        Primitive::Fft { .. } => {
            let (x, d) = ins[0];
            let x = moveaxis(b, x, d.expect("batched"), 0)?;
            Ok(vec![(b.bind1(prim.clone(), vec![x])?, Some(0))])
        }
        Primitive::RandomWrap => {
            let (x, d) = ins[0];
            let x = bdim_at_front(b, x, d, 1)?;
            Ok(vec![(b.bind1(prim.clone(), vec![x])?, Some(0))])
        }
        // `_approx_top_k_batch_rule`: the operand keeps its batch axis, and so do both
        // results; `reduction_dimension` is renumbered past it.
        Primitive::ApproxTopK {
            k,
            reduction_dimension,
            recall_target,
            is_max_k,
            reduction_input_size_override,
            aggregate_to_topk,
        } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let rank = b.aval(&x).rank();
            let dim_map: Vec<usize> = (0..rank).filter(|&r| r != bd).collect();
            let rd = if *reduction_dimension < 0 {
                *reduction_dimension + dim_map.len() as i64
            } else {
                *reduction_dimension
            };
            let Some(&rd) = usize::try_from(rd).ok().and_then(|r| dim_map.get(r)) else {
                return Err(AdError::Invalid(format!(
                    "vmap: approx_top_k's reduction_dimension {reduction_dimension} is out of range"
                )));
            };
            let prim = Primitive::ApproxTopK {
                k: *k,
                reduction_dimension: rd as i64,
                recall_target: recall_target.clone(),
                is_max_k: *is_max_k,
                reduction_input_size_override: *reduction_input_size_override,
                aggregate_to_topk: *aggregate_to_topk,
            };
            Ok(b.bind(prim, vec![x])?.into_iter().map(|v| (Atom::Var(v), Some(bd))).collect())
        }
        // `_rng_bit_generator_batching_rule`: the first key draws the bits of every example
        // (one draw of shape `(size, *shape)`), and only that key is replaced by its new key
        // (a `jit` of `dynamic_update_index_in_dim`).
        Primitive::RngBitGenerator { algorithm, dtype, shape } => {
            let (keys, d) = ins[0];
            let keys = moveaxis(b, keys, d.expect("batched"), 0)?;
            let slice = Primitive::Slice { start_indices: vec![0, 0], limit_indices: vec![1, 4], strides: None };
            let first = b.bind1(slice, vec![keys])?;
            let key = b.bind1(Primitive::Squeeze { dimensions: vec![0] }, vec![first])?;
            let mut all = vec![size];
            all.extend(shape);
            let prim = Primitive::RngBitGenerator { algorithm: *algorithm, dtype: *dtype, shape: all };
            let outs = b.bind(prim, vec![key])?;
            let body = dynamic_update_index_in_dim(size)?;
            let jit = Primitive::Jit {
                name: "dynamic_update_index_in_dim".into(),
                jaxpr: ClosedJaxpr::new(Arc::new(body)),
                options: JitOptions::default(),
            };
            let new_keys = b.bind1(jit, vec![keys, Atom::Var(outs[0]), lit(DType::I32, 0.0)])?;
            Ok(vec![(new_keys, Some(0)), (Atom::Var(outs[1]), Some(0))])
        }
        // JAX's `_device_put_batcher`: every operand keeps its batch axis.
        Primitive::DevicePut { .. } | Primitive::OptimizationBarrier => {
            let outs = b.bind(prim.clone(), ins.iter().map(|x| x.0).collect())?;
            Ok(outs.into_iter().map(Atom::Var).zip(ins.iter().map(|x| x.1)).collect())
        }
        // No operands, so never batched: the pass copies them.
        Primitive::Iota { .. }
        | Primitive::Empty2 { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::Iota2x32Shape { .. } => {
            Err(AdError::Internal(format!("vmap: {} has no operands to batch", prim.name())))
        }
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            let (x, d) = ins[0];
            let x = moveaxis(b, x, d.expect("batched"), 0)?;
            let mut new_shape = vec![size];
            new_shape.extend(shape);
            let dims: Vec<usize> = std::iter::once(0).chain(broadcast_dimensions.iter().map(|d| d + 1)).collect();
            let spelled: Vec<(usize, bool)> = dims.iter().enumerate().map(|(i, &d)| (d, i > 0)).collect();
            let prim = Primitive::BroadcastInDim { shape: new_shape, broadcast_dimensions: dims };
            let out = b.bind1(prim, vec![x])?;
            b.spell_last_param("broadcast_dimensions", np_tuple(&spelled));
            Ok(vec![(out, Some(0))])
        }
        Primitive::Reshape { new_sizes, dimensions } => {
            let (x, d) = ins[0];
            let x = moveaxis(b, x, d.expect("batched"), 0)?;
            let mut sizes = vec![size];
            sizes.extend(new_sizes);
            let out = match dimensions {
                None => b.reshape(x, &sizes)?,
                Some(dims) => {
                    let dims: Vec<usize> = std::iter::once(0).chain(dims.iter().map(|d| d + 1)).collect();
                    let spelled: Vec<(usize, bool)> = dims.iter().enumerate().map(|(i, &d)| (d, i > 0)).collect();
                    let out = b.bind1(Primitive::Reshape { new_sizes: sizes, dimensions: Some(dims) }, vec![x])?;
                    b.spell_last_param("dimensions", np_tuple(&spelled));
                    out
                }
            };
            Ok(vec![(out, Some(0))])
        }
        Primitive::Transpose { permutation } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let perm: Vec<usize> =
                std::iter::once(bd).chain(permutation.iter().map(|&i| if i < bd { i } else { i + 1 })).collect();
            Ok(vec![(b.transpose(x, &perm)?, Some(0))])
        }
        Primitive::Squeeze { dimensions } => {
            let (x, d) = ins[0];
            let x = moveaxis(b, x, d.expect("batched"), 0)?;
            let dims: Vec<usize> = dimensions.iter().map(|d| d + 1).collect();
            if dims.is_empty() {
                return Ok(vec![(x, Some(0))]);
            }
            // `np.add(1, dimensions)`, made Python ints again by `lax.squeeze`.
            Ok(vec![(b.bind1(Primitive::Squeeze { dimensions: dims }, vec![x])?, Some(0))])
        }
        Primitive::Rev { dimensions } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let dims = dimensions.iter().map(|&i| if i >= bd { i + 1 } else { i }).collect();
            Ok(vec![(b.bind1(Primitive::Rev { dimensions: dims }, vec![x])?, d)])
        }
        Primitive::Slice { start_indices, limit_indices, strides } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let (mut start, mut limit) = (start_indices.clone(), limit_indices.clone());
            start.insert(bd, 0);
            limit.insert(bd, size);
            let strides = strides.as_ref().map(|s| {
                let mut s = s.clone();
                s.insert(bd, 1);
                s
            });
            let prim = Primitive::Slice { start_indices: start, limit_indices: limit, strides };
            Ok(vec![(b.bind1(prim, vec![x])?, d)])
        }
        Primitive::Concatenate { dimension } => {
            let mut operands = Vec::with_capacity(ins.len());
            for &(x, d) in ins {
                operands.push(match d {
                    Some(d) => moveaxis(b, x, d, 0)?,
                    None => lax_broadcast(b, x, size)?,
                });
            }
            Ok(vec![(b.bind1(Primitive::Concatenate { dimension: dimension + 1 }, operands)?, Some(0))])
        }
        Primitive::Pad { padding_config } => match (ins[0], ins[1].1) {
            ((x, Some(bd)), None) => {
                let mut config = padding_config.clone();
                config.insert(bd, (0, 0, 0));
                Ok(vec![(b.bind1(Primitive::Pad { padding_config: config }, vec![x, ins[1].0])?, Some(bd))])
            }
            ((x, bd), Some(vd)) => one(pad_batched_value(b, padding_config, (x, bd), (ins[1].0, vd), size)),
            ((_, None), None) => Err(AdError::Internal("vmap: pad without a batched operand".into())),
        },
        Primitive::Reduce { op, axes } => {
            let (x, d) = ins[0];
            let (axes, out_d) = reducer_axes(b.aval(&x).rank(), axes, d.expect("batched"));
            let out = b.bind1(Primitive::Reduce { op: *op, axes: axes.clone() }, vec![x])?;
            b.spell_last_param("axes", np_tuple(&axes.iter().map(|&a| (a, true)).collect::<Vec<_>>()));
            Ok(vec![(out, Some(out_d))])
        }
        Primitive::Argmax { axes, index_dtype } | Primitive::Argmin { axes, index_dtype } => {
            let (x, d) = ins[0];
            let (axes, out_d) = reducer_axes(b.aval(&x).rank(), axes, d.expect("batched"));
            let prim = if matches!(prim, Primitive::Argmax { .. }) {
                Primitive::Argmax { axes: axes.clone(), index_dtype: *index_dtype }
            } else {
                Primitive::Argmin { axes: axes.clone(), index_dtype: *index_dtype }
            };
            let out = b.bind1(prim, vec![x])?;
            b.spell_last_param("axes", np_tuple(&axes.iter().map(|&a| (a, true)).collect::<Vec<_>>()));
            Ok(vec![(out, Some(out_d))])
        }
        // `_reduce_batch_rule`: batched operands at the front (unbatched ones broadcast),
        // the reduced dimensions shifted; JAX implements no batched init value.
        Primitive::GenericReduce { computation, dimensions, jaxpr } => {
            let n = ins.len() / 2;
            if ins[n..].iter().any(|x| x.1.is_some()) {
                return Err(AdError::Unsupported {
                    primitive: "reduce",
                    message: "a batched init value: JAX's `_reduce_batch_rule` raises NotImplementedError".into(),
                });
            }
            let mut operands = Vec::with_capacity(ins.len());
            for &(x, d) in &ins[..n] {
                operands.push(bdim_at_front(b, x, d, size)?);
            }
            operands.extend(ins[n..].iter().map(|x| x.0));
            let prim = Primitive::GenericReduce {
                computation: computation.clone(),
                dimensions: dimensions.iter().map(|d| d + 1).collect(),
                jaxpr: jaxpr.clone(),
            };
            Ok(b.bind(prim, operands)?.into_iter().map(|v| (Atom::Var(v), Some(0))).collect())
        }
        // `_generic_reduce_window_batch_rule`: batched operands at the front (unbatched ones
        // broadcast) under a window of 1 there; JAX implements no batched init value.
        Primitive::GenericReduceWindow { jaxpr, window } => {
            let n = ins.len() / 2;
            if ins[n..].iter().any(|x| x.1.is_some()) {
                return Err(AdError::Unsupported {
                    primitive: "reduce_window",
                    message: "reduce_window batching is not implemented for initial values".into(),
                });
            }
            let mut operands = Vec::with_capacity(ins.len());
            for &(x, d) in &ins[..n] {
                operands.push(bdim_at_front(b, x, d, size)?);
            }
            operands.extend(ins[n..].iter().map(|x| x.0));
            let mut w = window.clone();
            w.window_dimensions.insert(0, 1);
            w.window_strides.insert(0, 1);
            w.padding.insert(0, (0, 0));
            w.base_dilation.insert(0, 1);
            w.window_dilation.insert(0, 1);
            let prim = Primitive::GenericReduceWindow { jaxpr: jaxpr.clone(), window: w };
            Ok(b.bind(prim, operands)?.into_iter().map(|v| (Atom::Var(v), Some(0))).collect())
        }
        Primitive::Cumulative { op, axis, reverse } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let axis = if *axis < bd { *axis } else { axis + 1 };
            Ok(vec![(b.bind1(Primitive::Cumulative { op: *op, axis, reverse: *reverse }, vec![x])?, d)])
        }
        Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision } => {
            let ((lhs, lbd), (rhs, rbd)) = (ins[0], ins[1]);
            let (lhs_ndim, rhs_ndim) = (b.aval(&lhs).rank(), b.aval(&rhs).rank());
            let (dn, out_d) = dot_general_batch_dims(lhs_ndim, rhs_ndim, lbd, rbd, dimension_numbers);
            Ok(vec![(b.dot_general(lhs, rhs, dn, *preferred_element_type, *precision)?, Some(out_d))])
        }
        Primitive::Jit { name, jaxpr, options } => {
            let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
            let body = batch_jaxpr_axes(&jaxpr.jaxpr, size, &dims, OutAxes::Infer)?;
            let out_dims = body.out_dims.clone();
            let prim =
                Primitive::Jit { name: name.clone(), jaxpr: body.close(&jaxpr.consts), options: options.clone() };
            let outs = b.bind(prim, ins.iter().map(|x| x.0).collect())?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_dims).collect())
        }
        Primitive::ClosedCall { call_jaxpr } => {
            let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
            let body = batch_jaxpr_axes(&call_jaxpr.jaxpr, size, &dims, OutAxes::Infer)?;
            let out_dims = body.out_dims.clone();
            let prim = Primitive::ClosedCall { call_jaxpr: body.close(&call_jaxpr.consts) };
            let outs = b.bind(prim, ins.iter().map(|x| x.0).collect())?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_dims).collect())
        }
        Primitive::Remat2 { jaxpr, prevent_cse, differentiated, policy } => {
            let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
            let body = batch_jaxpr_axes(jaxpr, size, &dims, OutAxes::ZeroIfMapped)?;
            let out_dims = body.out_dims.clone();
            let (body, consts) = body.consts_as_invars()?;
            let mut args: Vec<Atom> = consts.into_iter().map(|c| b.const_array(c)).collect();
            args.extend(ins.iter().map(|x| x.0));
            let prim = Primitive::Remat2 {
                jaxpr: Arc::new(body),
                prevent_cse: *prevent_cse,
                differentiated: *differentiated,
                policy: policy.clone(),
            };
            let outs = b.bind(prim, args)?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_dims).collect())
        }
        Primitive::Clamp => one(clamp(b, ins, size)),
        Primitive::Stack { axis } => {
            // `_stack_batch_rule`: one batch axis shared by all operands stays; otherwise
            // each operand's moves to the front (an unbatched one broadcast there).
            let bdim = ins[0].1;
            if let Some(bd) = bdim.filter(|_| ins.iter().all(|x| x.1 == bdim)) {
                let (out_axis, out_bdim) = if *axis <= bd { (*axis, bd + 1) } else { (axis + 1, bd) };
                let x = b.bind1(Primitive::Stack { axis: out_axis }, ins.iter().map(|x| x.0).collect())?;
                return Ok(vec![(x, Some(out_bdim))]);
            }
            let mut operands = Vec::with_capacity(ins.len());
            for &(x, d) in ins {
                operands.push(match d {
                    Some(d) => moveaxis(b, x, d, 0)?,
                    None => lax_broadcast(b, x, size)?,
                });
            }
            Ok(vec![(b.bind1(Primitive::Stack { axis: axis + 1 }, operands)?, Some(0))])
        }
        Primitive::Unstack { axis } => {
            // `_unstack_batch_rule`: the batch axis stays, the unstacked axis shifts past it.
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let (out_axis, out_bdim) = if *axis < bd { (*axis, bd - 1) } else { (axis + 1, bd) };
            let outs = b.bind(Primitive::Unstack { axis: out_axis }, vec![x])?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), Some(out_bdim))).collect())
        }
        Primitive::Tile { reps } => {
            // `_tile_batch_rule`: one repetition along the batch axis.
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let mut reps = reps.clone();
            reps.insert(bd, 1);
            Ok(vec![(b.bind1(Primitive::Tile { reps }, vec![x])?, Some(bd))])
        }
        Primitive::Split { axis, sizes } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let axis = if *axis >= bd { axis + 1 } else { *axis };
            let outs = b.bind(Primitive::Split { axis, sizes: sizes.clone() }, vec![x])?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), d)).collect())
        }
        // JAX's linalg batchers: the batch axis to the front, where the primitives take
        // leading batch axes.
        Primitive::Cholesky => {
            let (x, d) = ins[0];
            let x = bdim_at_front(b, x, d, size)?;
            Ok(vec![(b.bind1(prim.clone(), vec![x])?, Some(0))])
        }
        Primitive::TriangularSolve(t) => one(triangular_solve(b, *t, ins, size)),
        Primitive::TridiagonalSolve { .. } => one(tridiagonal_solve(b, prim, ins, size)),
        // `expand_dims_batcher`: every result batched at the front too.
        Primitive::Lu
        | Primitive::LuPivotsToPermutation { .. }
        | Primitive::Qr(_)
        | Primitive::Eigh(_)
        | Primitive::Svd(_)
        | Primitive::Geqrf
        | Primitive::HouseholderProduct
        | Primitive::Ormqr { .. }
        | Primitive::SymmetricProduct { .. } => {
            let mut operands = Vec::with_capacity(ins.len());
            for &(x, d) in ins {
                operands.push(bdim_at_front(b, x, d, size)?);
            }
            let outs = b.bind(prim.clone(), operands)?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), Some(0))).collect())
        }
        Primitive::TopK { axis, k } => {
            let (x, d) = ins[0];
            let bd = d.expect("batched");
            let axis = if bd <= *axis { axis + 1 } else { *axis };
            let outs = b.bind(Primitive::TopK { axis, k: *k }, vec![x])?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), d)).collect())
        }
        Primitive::Sort { dimension, is_stable, num_keys } => {
            let (proto, new_bd) = ins
                .iter()
                .find_map(|&(x, d)| d.map(|d| (x, d)))
                .ok_or_else(|| AdError::Internal("sort without a batched operand".into()))?;
            let shape = b.aval(&proto).shape;
            let mut args = Vec::with_capacity(ins.len());
            for &(x, d) in ins {
                args.push(match d {
                    None => {
                        let dims: Vec<usize> = (0..shape.len()).filter(|&i| i != new_bd).collect();
                        b.bind1(
                            Primitive::BroadcastInDim { shape: shape.clone(), broadcast_dimensions: dims },
                            vec![x],
                        )?
                    }
                    Some(d) => moveaxis(b, x, d, new_bd)?,
                });
            }
            let dimension = dimension + usize::from(new_bd <= *dimension);
            let prim = Primitive::Sort { dimension, is_stable: *is_stable, num_keys: *num_keys };
            let outs = b.bind(prim, args)?;
            Ok(outs.into_iter().map(|v| (Atom::Var(v), Some(new_bd))).collect())
        }
        Primitive::CustomJvpCall { name, call_jaxpr, jvp, num_consts, symbolic_zeros } => {
            // JAX's `process_custom_jvp_call`: the body batched where its inputs are, the
            // rule's name kept.
            let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
            let body = batch_jaxpr_axes(&call_jaxpr.jaxpr, size, &dims, OutAxes::Infer)?;
            let out_dims = body.out_dims.clone();
            let prim = Primitive::CustomJvpCall {
                name: name.clone(),
                call_jaxpr: body.close(&call_jaxpr.consts),
                jvp: jvp.clone(),
                num_consts: *num_consts,
                symbolic_zeros: *symbolic_zeros,
            };
            let outs = b.bind(prim, ins.iter().map(|x| x.0).collect())?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_dims).collect())
        }
        Primitive::CustomVjpCall { name, call_jaxpr, fwd, bwd, num_consts, symbolic_zeros } => {
            let dims: Vec<Option<usize>> = ins.iter().map(|x| x.1).collect();
            let body = batch_jaxpr_axes(&call_jaxpr.jaxpr, size, &dims, OutAxes::Infer)?;
            let out_dims = body.out_dims.clone();
            let prim = Primitive::CustomVjpCall {
                name: name.clone(),
                call_jaxpr: body.close(&call_jaxpr.consts),
                fwd: fwd.clone(),
                bwd: bwd.clone(),
                num_consts: *num_consts,
                symbolic_zeros: *symbolic_zeros,
            };
            let outs = b.bind(prim, ins.iter().map(|x| x.0).collect())?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_dims).collect())
        }
        Primitive::Cond { branches, branches_platforms } => {
            let ((index, index_d), ops) = (ins[0], &ins[1..]);
            if index_d.is_some() {
                return control::cond_batched_index(b, branches, ins, size);
            }
            let ops_bat: Vec<bool> = ops.iter().map(|x| x.1.is_some()).collect();
            let mut out_bat = vec![false; branches[0].jaxpr.outvars.len()];
            for br in branches {
                let (_, bat) = batch_jaxpr_bools(&br.jaxpr, size, &ops_bat, &[])?;
                out_bat.iter_mut().zip(bat).for_each(|(o, b)| *o |= b);
            }
            let mut new_branches = Vec::with_capacity(branches.len());
            for br in branches {
                let (j, _) = batch_jaxpr_bools(&br.jaxpr, size, &ops_bat, &out_bat)?;
                new_branches.push(j.close(&br.consts));
            }
            let mut args = vec![index];
            for &(x, d) in ops {
                args.push(match d {
                    Some(d) => moveaxis(b, x, d, 0)?,
                    None => x,
                });
            }
            let prim = Primitive::Cond { branches: new_branches, branches_platforms: branches_platforms.clone() };
            let outs = b.bind(prim, args)?;
            Ok(outs.into_iter().map(Atom::Var).zip(out_bat.iter().map(|&o| o.then_some(0))).collect())
        }
        Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll } => {
            let (nc, ncar) = (*num_consts, *num_carry);
            let n_out = jaxpr.jaxpr.outvars.len();
            let bat: Vec<bool> = ins.iter().map(|x| x.1.is_some()).collect();
            let (const_bat, init_bat, xs_bat) = (&bat[..nc], &bat[nc..nc + ncar], &bat[nc + ncar..]);
            // The carries batched from their init or by the body: a fixpoint.
            let mut carry_bat = init_bat.to_vec();
            let (body, out_bat) = loop {
                let batched: Vec<bool> = const_bat.iter().chain(&carry_bat).chain(xs_bat).copied().collect();
                let mut inst = carry_bat.clone();
                inst.resize(n_out, false);
                let (body, out_bat) = batch_jaxpr_bools(&jaxpr.jaxpr, size, &batched, &inst)?;
                if out_bat[..ncar] == carry_bat[..] {
                    break (body, out_bat);
                }
                carry_bat.iter_mut().zip(&out_bat[..ncar]).for_each(|(c, o)| *c |= o);
            };
            let mut args = Vec::with_capacity(ins.len());
            for (i, &(x, d)) in ins.iter().enumerate() {
                args.push(if i < nc {
                    match d {
                        Some(d) => moveaxis(b, x, d, 0)?,
                        None => x,
                    }
                } else if i < nc + ncar {
                    match (d, carry_bat[i - nc]) {
                        (None, true) => broadcast(b, x, size, 0)?,
                        (Some(d), true) => moveaxis(b, x, d, 0)?,
                        _ => x,
                    }
                } else {
                    match d {
                        Some(d) => moveaxis(b, x, d, 1)?,
                        None => x,
                    }
                });
            }
            let prim = Primitive::Scan {
                jaxpr: body.close(&jaxpr.consts),
                length: *length,
                reverse: *reverse,
                num_consts: nc,
                num_carry: ncar,
                unroll: *unroll,
            };
            let outs = b.bind(prim, args)?;
            let dims = (0..n_out).map(|j| match (j < ncar, out_bat[j]) {
                (true, true) => Some(0),
                (false, true) => Some(1),
                _ => None,
            });
            Ok(outs.into_iter().map(Atom::Var).zip(dims).collect())
        }
        Primitive::ExpandDims { dimensions } => one(indexing::expand_dims(b, dimensions, ins[0])),
        Primitive::DynamicSlice { slice_sizes } => one(indexing::dynamic_slice(b, slice_sizes, ins, size)),
        Primitive::DynamicUpdateSlice => one(indexing::dynamic_update_slice(b, ins, size)),
        Primitive::Gather { dimension_numbers, fill_value, indices_are_sorted, mode, slice_sizes, unique_indices } => {
            let params = GatherParams {
                slice_sizes,
                fill_value: *fill_value,
                indices_are_sorted: *indices_are_sorted,
                unique_indices: *unique_indices,
                mode: *mode,
            };
            one(indexing::gather(b, Some(eqn), dimension_numbers, &params, ins[0], ins[1]))
        }
        Primitive::Scatter { op, dimension_numbers, indices_are_sorted, mode, unique_indices, update_jaxpr } => {
            let params = ScatterParams {
                op: *op,
                indices_are_sorted: *indices_are_sorted,
                unique_indices: *unique_indices,
                mode: *mode,
                update_jaxpr: update_jaxpr.clone(),
            };
            one(indexing::scatter(b, Some(eqn), dimension_numbers, &params, [ins[0], ins[1], ins[2]], size))
        }
        Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } => {
            let w = control::While { cond_jaxpr, body_jaxpr, cond_nconsts: *cond_nconsts, body_nconsts: *body_nconsts };
            control::while_loop(b, &w, ins, size)
        }
        Primitive::ConvGeneralDilated(params) => one(window::conv_general_dilated(b, eqn, params, ins[0], ins[1])),
        Primitive::ReduceWindow { op, window } => one(window::reduce_window(b, *op, window, ins[0])),
        Primitive::SelectAndGatherAdd { select_prim, window } => {
            one(window::select_and_gather_add(b, *select_prim, window, ins, size))
        }
        Primitive::SelectAndScatterAdd { select_prim, window_dimensions, window_strides, padding } => {
            let w = ScatterWindow { window_dimensions, window_strides, padding };
            one(window::select_and_scatter_add(b, *select_prim, &w, ins, size))
        }
    }
}

/// JAX's `broadcast_batcher`, for the n-ary elementwise primitives.
fn broadcast_batcher(b: &mut Builder, prim: &Primitive, ins: &[Batched]) -> Result<Batched, AdError> {
    Ok(broadcast_batcher_all(b, prim, ins)?.remove(0))
}

/// `broadcast_batcher` of a primitive with several results, each batched alike.
fn broadcast_batcher_all(b: &mut Builder, prim: &Primitive, ins: &[Batched]) -> Result<Vec<Batched>, AdError> {
    let (shape, dim) = ins
        .iter()
        .find_map(|(x, d)| d.map(|d| (b.aval(x).shape, d)))
        .ok_or_else(|| AdError::Internal("broadcast_batcher without a batched operand".into()))?;
    let agree = ins.iter().all(|(x, d)| {
        let aval = b.aval(x);
        aval.rank() == 0 || (aval.shape == shape && *d == Some(dim))
    });
    if agree {
        let outs = b.bind(prim.clone(), ins.iter().map(|x| x.0).collect())?;
        return Ok(outs.into_iter().map(|v| (v.into(), Some(dim))).collect());
    }
    let mut args = Vec::with_capacity(ins.len());
    for &(x, d) in ins {
        args.push(if b.aval(&x).rank() > 0 { bdim_at_front(b, x, d, 1)? } else { x });
    }
    let nd = args.iter().map(|x| b.aval(x).rank()).max().unwrap_or(0);
    for (x, &(_, d)) in args.iter_mut().zip(ins) {
        let rank = b.aval(x).rank();
        if d.is_some() && rank != nd {
            let dims: Vec<usize> = (rank..nd).collect();
            *x = b.expand_dims(*x, &dims)?;
        }
    }
    Ok(b.bind(prim.clone(), args)?.into_iter().map(|v| (v.into(), Some(0))).collect())
}

/// JAX's `add_batched`, the rule of `add_any`.
fn add_batched(b: &mut Builder, prim: &Primitive, ins: &[Batched], _size: usize) -> Result<Batched, AdError> {
    let ((x, bdx), (y, bdy)) = (ins[0], ins[1]);
    let (x, y, d) = match (bdx, bdy) {
        (Some(dx), Some(dy)) if dx == dy => (x, y, dx),
        (None, Some(dy)) => {
            let n = b.aval(&y).shape[dy];
            (broadcast(b, x, n, dy)?, y, dy)
        }
        (Some(dx), None) => {
            let n = b.aval(&x).shape[dx];
            (x, broadcast(b, y, n, dx)?, dx)
        }
        (Some(dx), Some(dy)) => (moveaxis(b, x, dx, dy)?, y, dy),
        (None, None) => return Err(AdError::Internal("add_batched without a batched operand".into())),
    };
    Ok((b.bind1(prim.clone(), vec![x, y])?, Some(d)))
}

/// JAX's `_pad_batch_rule` with a batched padding value: the operand padded with zeros,
/// then `select_n` of a mask of the padding between it and the broadcast padding values.
fn pad_batched_value(
    b: &mut Builder,
    padding_config: &[(i64, i64, i64)],
    x: Batched,
    value: (Atom, usize),
    size: usize,
) -> Result<Batched, AdError> {
    let (x, bd) = match x.1 {
        Some(bd) => (x.0, bd),
        None => (lax_broadcast(b, x.0, size)?, 0),
    };
    if value.1 != 0 {
        return Err(AdError::Internal(format!("vmap: a batched padding value at axis {}", value.1)));
    }
    let mut config = padding_config.to_vec();
    config.insert(bd, (0, 0, 0));
    let aval = b.aval(&x);
    let padded = b.bind1(Primitive::Pad { padding_config: config.clone() }, vec![x, lit(aval.dtype, 0.0)])?;
    let ones = b.bind1(
        Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: vec![] },
        vec![lit(DType::Bool, 1.0)],
    )?;
    let mask = b.bind1(Primitive::Pad { padding_config: config }, vec![ones, lit(DType::Bool, 0.0)])?;
    let shape = b.aval(&padded).shape;
    let values = b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: vec![bd] }, vec![value.0])?;
    // `lax.select(mask, x, values)`.
    Ok((b.select_n(mask, vec![values, padded])?, Some(bd)))
}

/// JAX's `_clamp_batch_rule`: `clamp lo x hi`.
fn clamp(b: &mut Builder, ins: &[Batched], size: usize) -> Result<Batched, AdError> {
    let ((lo, lo_d), (x, x_d), (hi, hi_d)) = (ins[0], ins[1], ins[2]);
    let rank = |b: &Builder, a: &Atom| b.aval(a).rank();
    let x_shape = b.aval(&x).shape;
    if lo_d == x_d && x_d == hi_d {
        if b.aval(&lo).shape == x_shape && b.aval(&hi).shape == x_shape || rank(b, &lo) == 0 && rank(b, &hi) == 0 {
            return Ok((b.bind1(Primitive::Clamp, vec![lo, x, hi])?, x_d));
        }
        if rank(b, &lo) == 1 && rank(b, &hi) == 1 {
            let (ld, hd) = (lo_d.expect("batched"), hi_d.expect("batched"));
            let bcast = |d: usize| Primitive::BroadcastInDim { shape: x_shape.clone(), broadcast_dimensions: vec![d] };
            let lo = b.bind1(bcast(ld), vec![lo])?;
            let hi = b.bind1(bcast(hd), vec![hi])?;
            return Ok((b.bind1(Primitive::Clamp, vec![lo, x, hi])?, x_d));
        }
    } else if rank(b, &lo) == 0 && rank(b, &hi) == 0 && x_d.is_some() {
        return Ok((b.bind1(Primitive::Clamp, vec![lo, x, hi])?, x_d));
    }
    let mut lo = if rank(b, &lo) > 0 { bdim_at_front(b, lo, lo_d, size)? } else { lo };
    let mut hi = if rank(b, &hi) > 0 { bdim_at_front(b, hi, hi_d, size)? } else { hi };
    let mut x = if rank(b, &x) > 0 { bdim_at_front(b, x, x_d, size)? } else { x };
    let x_shape = b.aval(&x).shape;
    // `lax.broadcast(v, x.shape)` of a scalar bound, `broadcast_in_dim(v, x.shape, [0])` of
    // a batched scalar one.
    for v in [&mut lo, &mut hi] {
        let r = rank(b, v);
        if r == 0 && !x_shape.is_empty() {
            *v =
                b.bind1(Primitive::BroadcastInDim { shape: x_shape.clone(), broadcast_dimensions: vec![] }, vec![*v])?;
        } else if r > 0 && r < x_shape.len() {
            *v =
                b.bind1(Primitive::BroadcastInDim { shape: x_shape.clone(), broadcast_dimensions: vec![0] }, vec![*v])?;
        }
    }
    if rank(b, &lo) > x_shape.len() {
        let shape = b.aval(&lo).shape;
        x = b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: vec![] }, vec![x])?;
    }
    Ok((b.bind1(Primitive::Clamp, vec![lo, x, hi])?, Some(0)))
}

/// JAX's `_select_batch_rule`.
fn select_n(b: &mut Builder, ins: &[Batched], size: usize) -> Result<Batched, AdError> {
    let (which, which_d) = ins[0];
    let cases = &ins[1..];
    let case_shape = b.aval(&cases[0].0).shape;
    if cases.iter().all(|c| c.1 == which_d) {
        let which = if b.aval(&which).shape == case_shape {
            which
        } else {
            let d = which_d.expect("batched");
            b.bind1(Primitive::BroadcastInDim { shape: case_shape, broadcast_dimensions: vec![d] }, vec![which])?
        };
        let out = b.select_n(which, cases.iter().map(|c| c.0).collect())?;
        return Ok((out, which_d));
    }
    if b.aval(&which).rank() == 0 && cases.iter().all(|c| c.1.is_some()) {
        let d0 = cases[0].1;
        if cases.iter().all(|c| c.1 == d0) {
            return Ok((b.select_n(which, cases.iter().map(|c| c.0).collect())?, d0));
        }
        if cases.iter().all(|c| b.aval(&c.0).shape == case_shape) {
            let d = d0.expect("batched");
            let mut moved = vec![cases[0].0];
            for c in &cases[1..] {
                moved.push(moveaxis(b, c.0, c.1.expect("batched"), d)?);
            }
            return Ok((b.select_n(which, moved)?, d0));
        }
    }
    let which = if b.aval(&which).rank() > 0 { bdim_at_front(b, which, which_d, size)? } else { which };
    let mut new_cases = Vec::with_capacity(cases.len());
    let all_scalar = cases.iter().all(|c| b.aval(&c.0).rank() == 0);
    for &(c, d) in cases {
        new_cases.push(if all_scalar { c } else { bdim_at_front(b, c, d, size)? });
    }
    let case_shape = b.aval(&new_cases[0]).shape;
    let which_rank = b.aval(&which).rank();
    let which = if which_rank > 0 && which_rank < case_shape.len() {
        b.bind1(Primitive::BroadcastInDim { shape: case_shape.clone(), broadcast_dimensions: vec![0] }, vec![which])?
    } else {
        which
    };
    if b.aval(&which).rank() > case_shape.len() {
        let shape = b.aval(&which).shape;
        new_cases = new_cases
            .into_iter()
            .map(|c| b.bind1(Primitive::BroadcastInDim { shape: shape.clone(), broadcast_dimensions: vec![] }, vec![c]))
            .collect::<Result<_, _>>()?;
    }
    Ok((b.select_n(which, new_cases)?, Some(0)))
}

/// JAX's `reducer_batcher`: the reduced axes of the batched operand (of rank `rank`) and
/// where the batch axis is in the result.
fn reducer_axes(rank: usize, axes: &[usize], bdim: usize) -> (Vec<usize>, usize) {
    let axes: Vec<usize> = axes.iter().map(|&a| if a < bdim { a } else { a + 1 }).collect();
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let out = kept.iter().position(|&d| d == bdim).unwrap_or(0);
    (axes, out)
}

/// JAX's `_dot_general_batch_dim_nums`: the batched dimension numbers and the result's
/// batch axis.
fn dot_general_batch_dims(
    lhs_ndim: usize,
    rhs_ndim: usize,
    lbd: Option<usize>,
    rbd: Option<usize>,
    dn: &DotDimensionNumbers,
) -> (DotDimensionNumbers, usize) {
    let bump = |dims: &[usize], b: usize| dims.iter().map(|&d| d + usize::from(d >= b)).collect::<Vec<usize>>();
    let mut out = dn.clone();
    let result = match (lbd, rbd) {
        (Some(l), Some(r)) => {
            out.lhs_batch = std::iter::once(l).chain(bump(&dn.lhs_batch, l)).collect();
            out.rhs_batch = std::iter::once(r).chain(bump(&dn.rhs_batch, r)).collect();
            out.lhs_contracting = bump(&dn.lhs_contracting, l);
            out.rhs_contracting = bump(&dn.rhs_contracting, r);
            0
        }
        (Some(l), None) => {
            let lhs_tensor = (0..lhs_ndim).filter(|d| !dn.lhs_batch.contains(d) && !dn.lhs_contracting.contains(d));
            let result = dn.lhs_batch.len() + lhs_tensor.filter(|&d| d < l).count();
            out.lhs_batch = bump(&dn.lhs_batch, l);
            out.lhs_contracting = bump(&dn.lhs_contracting, l);
            result
        }
        (None, Some(r)) => {
            let rhs_tensor = (0..rhs_ndim).filter(|d| !dn.rhs_batch.contains(d) && !dn.rhs_contracting.contains(d));
            let result = lhs_ndim - dn.lhs_contracting.len() + rhs_tensor.filter(|&d| d < r).count();
            out.rhs_batch = bump(&dn.rhs_batch, r);
            out.rhs_contracting = bump(&dn.rhs_contracting, r);
            result
        }
        (None, None) => 0,
    };
    (out, result)
}

/// JAX's `_triangular_solve_batching_rule`: with only `b` batched, its batch axis folds into
/// the columns (left side) or rows (right side) of one solve; otherwise both batch axes go
/// to the front.
/// JAX's `_tridiagonal_solve_batching_rule`: with only `b` batched, its batch axis moved
/// next to the columns and merged with them; otherwise every operand batched at the front.
fn tridiagonal_solve(b: &mut Builder, prim: &Primitive, ins: &[Batched], size: usize) -> Result<Batched, AdError> {
    if let [(dl, None), (d, None), (du, None), (x, Some(bx))] = *ins {
        let rank = b.aval(&x).rank();
        let x = moveaxis(b, x, bx, rank - 2)?;
        let shape = b.aval(&x).shape;
        let flat = [&shape[..rank - 3], &[shape[rank - 3], shape[rank - 2] * shape[rank - 1]]].concat();
        let x_flat = b.reshape(x, &flat)?;
        let out = b.bind1(prim.clone(), vec![dl, d, du, x_flat])?;
        return Ok((b.reshape(out, &shape)?, Some(rank - 2)));
    }
    let mut operands = Vec::with_capacity(4);
    for &(x, bx) in ins {
        operands.push(bdim_at_front(b, x, bx, size)?);
    }
    Ok((b.bind1(prim.clone(), operands)?, Some(0)))
}

fn triangular_solve(
    b: &mut Builder,
    t: remat_ir::TriangularSolve,
    ins: &[Batched],
    size: usize,
) -> Result<Batched, AdError> {
    let ((x, bx), (y, by)) = (ins[0], ins[1]);
    let solve = |b: &mut Builder, x: Atom, y: Atom| crate::jvp::linalg::solve(b, t, x, y);
    match (bx, by) {
        (None, Some(by)) => {
            let rank = b.aval(&y).rank();
            let (y, bdim_out) = if t.left_side {
                (moveaxis(b, y, by, rank - 1)?, rank - 1)
            } else {
                (moveaxis(b, y, by, rank - 2)?, rank - 2)
            };
            let shape = b.aval(&y).shape;
            let flat: Vec<usize> = if t.left_side {
                [&shape[..rank - 2], &[shape[rank - 2] * shape[rank - 1]]].concat()
            } else {
                [&shape[..rank - 3], &[shape[rank - 3] * shape[rank - 2], shape[rank - 1]]].concat()
            };
            let y_flat = b.reshape(y, &flat)?;
            let out = solve(b, x, y_flat)?;
            Ok((b.reshape(out, &shape)?, Some(bdim_out)))
        }
        _ => {
            let x = bdim_at_front(b, x, bx, size)?;
            let y = bdim_at_front(b, y, by, size)?;
            Ok((solve(b, x, y)?, Some(0)))
        }
    }
}

/// JAX's `dynamic_update_index_in_dim(keys, key, i, axis=0)` on `u32[size,4]` keys as the
/// jaxpr JAX traces for it: `i` wrapped if negative, the key written at row `i`.
fn dynamic_update_index_in_dim(size: usize) -> Result<Jaxpr, AdError> {
    let mut b = Builder::new();
    let keys = Atom::Var(b.invar(Aval::new(DType::U32, vec![size, 4])));
    let key = Atom::Var(b.invar(Aval::new(DType::U32, vec![4])));
    let i = Atom::Var(b.invar(Aval::scalar(DType::I32)));
    let row = b.broadcast_in_dim(key, &[1, 4], &[1])?;
    let negative = b.compare(CompareOp::Lt, i, lit(DType::I32, 0.0))?;
    let j = b.bind1(Primitive::ConvertElementType { new_dtype: DType::I32, weak_type: false }, vec![i])?;
    let wrapped = b.add(j, lit(DType::I32, size as f64))?;
    let index = b.select_n(negative, vec![i, wrapped])?;
    let out = b.bind1(Primitive::DynamicUpdateSlice, vec![keys, row, index, lit(DType::I32, 0.0)])?;
    Ok(b.finish(vec![out]))
}
