//! The jvp rule of every primitive: one exhaustive match, each arm JAX 0.10.2's rule
//! (`jax/_src/lax/lax.py`, `slicing.py`) written against the builder.
//!
//! The rules must be JAX's exactly, not merely correct: which known values the backward
//! pass needs (and so which residuals the forward pass saves, and in what order) depends
//! on how each rule is written. `sin` multiplies by `cos x`; `x**2` by `2*x` (a `mul`);
//! `tanh` by `1 - ans`; `max` splits ties through `select_n`s of broadcast constants; `abs`
//! selects on `x >= 0`; `div` uses `integer_pow(y, -2)`. Known values are computed in the
//! order the Python rule computes them.
//!
//! Every rule runs only when some input tangent is nonzero (the driver copies the
//! equation otherwise), emits the primal equation first, and returns the primal outputs
//! and one tangent per output.

use remat_ir::{
    AllReduceOp, Atom, BinaryOp, CompareOp, CumulativeOp, Eqn, Jaxpr, Primitive, ReduceOp, UnaryOp, WindowOp,
};

use super::{
    cond, emit_primal, indexing, instantiate, jvp_call, jvp_custom_jvp_call, jvp_custom_jvp_rule, jvp_custom_vjp_call,
    jvp_custom_vjp_rule, linear, scan_jvp, standard, zero, JvpOut, Tangent,
};
use crate::builder::{lit, Builder};
use crate::AdError;

/// The jvp of one equation whose input tangents are not all zero.
pub(crate) fn jvp_rule(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    match &eqn.primitive {
        // JAX's `composite_jvp`: a composite is not differentiated (wrap it in a custom_jvp).
        Primitive::Composite { .. } => Err(AdError::Unsupported {
            primitive: "composite",
            message: "JVP rule for composite not implemented. You can use `jax.custom_jvp` to add support \
                      (JAX 0.10.2's `composite_jvp`)"
                .to_string(),
        }),
        // Sharding annotations and collectives are linear (JAX's `deflinear2` for psum,
        // psum_invariant, pvary, all_gather, reduce_scatter, ppermute, pbroadcast; the
        // identity's jvp for sharding_constraint and reshard).
        Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::Pvary { .. }
        | Primitive::AllReduce { op: AllReduceOp::Psum | AllReduceOp::PsumInvariant, .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AllToAll { .. }
        | Primitive::ShardAlike
        | Primitive::Pbroadcast { .. } => linear(b, old, eqn, primals, tangents),
        Primitive::AllReduce { op: op @ (AllReduceOp::Pmax | AllReduceOp::Pmin), .. } => Err(AdError::Unsupported {
            primitive: op.name(),
            message: format!("Differentiation rule for '{}' not implemented (JAX 0.10.2 registers none)", op.name()),
        }),
        Primitive::AxisIndex { .. } => zero(b, old, eqn, primals),
        Primitive::ShardMap(sm) => super::jvp_shard_map(b, sm, primals, tangents),
        Primitive::Unary(op) => unary(b, old, eqn, *op, primals, tangents),
        Primitive::Binary(op) => binary(b, old, eqn, *op, primals, tangents),
        Primitive::Compare(_)
        | Primitive::Argmax { .. }
        | Primitive::Argmin { .. }
        | Primitive::Iota { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::Empty2 { .. } => zero(b, old, eqn, primals),
        Primitive::Round { .. } | Primitive::BitcastConvertType { .. } => zero(b, old, eqn, primals),
        // JAX's `defjvp_zero`: keys and bits have float0 tangents.
        Primitive::RandomSeed
        | Primitive::RandomWrap
        | Primitive::RandomUnwrap
        | Primitive::RandomSplit { .. }
        | Primitive::RandomFoldIn
        | Primitive::RandomBits { .. }
        | Primitive::RandomClone
        | Primitive::Threefry2x32
        | Primitive::Iota2x32Shape { .. }
        | Primitive::RngBitGenerator { .. } => zero(b, old, eqn, primals),
        Primitive::IntegerPow { y } => {
            let y = *y;
            let x = primals[0];
            standard(b, old, eqn, primals, tangents, |b, _, g, _| {
                let dt = b.aval(&x).dtype;
                match y {
                    0 => {
                        let aval = b.aval(&g);
                        b.zeros(&aval)
                    }
                    1 => Ok(g),
                    2 => {
                        let two_x = b.mul(lit(dt, 2.0), x)?;
                        b.mul(g, two_x)
                    }
                    _ => {
                        let p = b.integer_pow(x, y - 1)?;
                        let c = b.mul(lit(dt, y as f64), p)?;
                        b.mul(g, c)
                    }
                }
            })
        }
        Primitive::SelectN => {
            // `_select_jvp`: the predicate has no tangent; zero cases become `_zeros`.
            let out = emit_primal(b, old, eqn, primals);
            let cases = &tangents[1..];
            let Some(first) = cases.iter().find_map(|t| match t {
                Tangent::Nz(a) => Some(*a),
                Tangent::Zero => None,
            }) else {
                return Ok((out, vec![Tangent::Zero]));
            };
            let aval = b.aval(&first);
            let z = b.staged_zeros(&aval)?;
            let cases: Vec<Atom> = cases
                .iter()
                .map(|t| match t {
                    Tangent::Nz(a) => *a,
                    Tangent::Zero => z,
                })
                .collect();
            let t = b.select_n(primals[0], cases)?;
            Ok((out, vec![Tangent::Nz(t)]))
        }
        Primitive::RegularizedIncompleteBeta => super::special::betainc(b, old, eqn, primals, tangents),
        Primitive::Clamp => {
            let (lo, x, hi) = (primals[0], primals[1], primals[2]);
            standard(b, old, eqn, primals, tangents, |b, i, g, _| {
                let x_aval = b.aval(&x);
                let pred = match i {
                    0 => {
                        let a = b.compare(CompareOp::Gt, lo, x)?;
                        let c = b.compare(CompareOp::Lt, lo, hi)?;
                        logical_and(b, a, c, &x_aval.shape)?
                    }
                    1 => {
                        let a = b.compare(CompareOp::Gt, x, lo)?;
                        let c = b.compare(CompareOp::Lt, x, hi)?;
                        logical_and(b, a, c, &x_aval.shape)?
                    }
                    _ => b.compare(CompareOp::Lt, hi, x)?,
                };
                let pred = b.maybe_broadcast(&x_aval.shape, pred)?;
                let g = b.maybe_broadcast(&x_aval.shape, g)?;
                let zeros = b.staged_zeros(&x_aval)?;
                b.select_n(pred, vec![zeros, g])
            })
        }
        Primitive::ConvertElementType { new_dtype, weak_type } => {
            let out = emit_primal(b, old, eqn, primals);
            if !new_dtype.is_inexact() {
                return Ok((out, vec![Tangent::Zero]));
            }
            let Tangent::Nz(g) = tangents[0] else { return Ok((out, vec![Tangent::Zero])) };
            let prim = Primitive::ConvertElementType { new_dtype: *new_dtype, weak_type: *weak_type };
            let t = b.bind1(prim, vec![g])?;
            Ok((out, vec![Tangent::Nz(t)]))
        }
        Primitive::ReducePrecision { .. }
        | Primitive::BroadcastInDim { .. }
        | Primitive::Reshape { .. }
        | Primitive::Transpose { .. }
        | Primitive::Rev { .. }
        | Primitive::Squeeze { .. }
        | Primitive::ExpandDims { .. }
        | Primitive::Slice { .. }
        | Primitive::Pad { .. }
        | Primitive::Concatenate { .. }
        | Primitive::DevicePut { .. }
        | Primitive::Split { .. }
        // Linear (over the reals): JAX's `deflinear2` for `complex`, `real`, `imag`, `conj`.
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::Fft { .. }
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. } => linear(b, old, eqn, primals, tangents),
        Primitive::OptimizationBarrier => {
            // `_opt_barrier_jvp`: a barrier of the primals, and one of the tangents, zeros
            // instantiated (for the float operands: integers have no tangent).
            let out = emit_primal(b, old, eqn, primals);
            let floats: Vec<usize> = (0..primals.len()).filter(|&i| b.aval(&primals[i]).dtype.is_inexact()).collect();
            let mut ts = Vec::with_capacity(floats.len());
            for &i in &floats {
                let aval = b.aval(&primals[i]);
                ts.push(instantiate(b, tangents[i], &aval)?);
            }
            let mut t_out = vec![Tangent::Zero; primals.len()];
            if !ts.is_empty() {
                let vs = b.bind(Primitive::OptimizationBarrier, ts)?;
                for (&i, v) in floats.iter().zip(vs) {
                    t_out[i] = Tangent::Nz(Atom::Var(v));
                }
            }
            Ok((out, t_out))
        }
        Primitive::DynamicSlice { .. } => {
            // Linear in the operand; the start indices are integers.
            let out = emit_primal(b, old, eqn, primals);
            let aval = b.aval(&primals[0]);
            let t = instantiate(b, tangents[0], &aval)?;
            let mut ins = vec![t];
            ins.extend_from_slice(&primals[1..]);
            let t = b.bind1(eqn.primitive.clone(), ins)?;
            Ok((out, vec![Tangent::Nz(t)]))
        }
        Primitive::DynamicUpdateSlice => {
            let out = emit_primal(b, old, eqn, primals);
            let (op_aval, up_aval) = (b.aval(&primals[0]), b.aval(&primals[1]));
            let t_op = instantiate(b, tangents[0], &op_aval)?;
            let t_up = instantiate(b, tangents[1], &up_aval)?;
            let mut ins = vec![t_op, t_up];
            ins.extend_from_slice(&primals[2..]);
            let t = b.bind1(Primitive::DynamicUpdateSlice, ins)?;
            Ok((out, vec![Tangent::Nz(t)]))
        }
        Primitive::Reduce { op, axes } => match op {
            ReduceOp::Sum => linear(b, old, eqn, primals, tangents),
            ReduceOp::Max | ReduceOp::Min => {
                // `_reduce_chooser_jvp_rule`: the tangent averages over tied locations.
                let operand = primals[0];
                let axes = axes.clone();
                standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
                    let op_aval = b.aval(&operand);
                    let shape: Vec<usize> =
                        (0..op_aval.rank()).map(|i| if axes.contains(&i) { 1 } else { op_aval.shape[i] }).collect();
                    let r = b.reshape(ans, &shape)?;
                    let eq = b.compare(CompareOp::Eq, operand, r)?;
                    let g_dtype = b.aval(&g).dtype;
                    let location_indicators = b.convert(eq, g_dtype)?;
                    let counts = b.reduce_sum(location_indicators, &axes)?;
                    let m = b.mul(g, location_indicators)?;
                    let s = b.reduce_sum(m, &axes)?;
                    b.div(s, counts)
                })
            }
            // `_reduce_prod_jvp_rule`: the jvp of JAX's tree of products.
            ReduceOp::Prod => indexing::reduce_prod(b, eqn, primals, tangents),
            // Integers and booleans: no tangent.
            ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => zero(b, old, eqn, primals),
        },
        Primitive::DotGeneral { .. } | Primitive::ConvGeneralDilated(_) => {
            // Bilinear: dot(xdot, y) + dot(x, ydot) (likewise conv).
            let (x, y) = (primals[0], primals[1]);
            let prim = eqn.primitive.clone();
            standard(b, old, eqn, primals, tangents, |b, i, g, _| {
                let ins = if i == 0 { vec![g, y] } else { vec![x, g] };
                b.bind1(prim.clone(), ins)
            })
        }
        Primitive::ReduceWindow { op: WindowOp::Sum, .. } => linear(b, old, eqn, primals, tangents),
        Primitive::ReduceWindow { op: op @ (WindowOp::Max | WindowOp::Min), window } => {
            // `_reduce_window_chooser_jvp_rule`: the tangent at the position `ge` (`le`) picks.
            let select_prim = if *op == WindowOp::Max { CompareOp::Ge } else { CompareOp::Le };
            let (operand, window) = (primals[0], window.clone());
            standard(b, old, eqn, primals, tangents, |b, _, g, _| {
                let prim = Primitive::SelectAndGatherAdd { select_prim, window: window.clone() };
                b.bind1(prim, vec![g, operand])
            })
        }
        Primitive::SelectAndScatterAdd { .. } | Primitive::SelectAndGatherAdd { .. } => {
            // Linear in the first operand (source or tangent); the operand only selects.
            let out = emit_primal(b, old, eqn, primals);
            let Tangent::Nz(g) = tangents[0] else { return Ok((out, vec![Tangent::Zero])) };
            let t = b.bind1(eqn.primitive.clone(), vec![g, primals[1]])?;
            Ok((out, vec![Tangent::Nz(t)]))
        }
        Primitive::Name { .. } => {
            // `checkpoint_name` names the primal only.
            let out = emit_primal(b, old, eqn, primals);
            Ok((out, vec![tangents[0]]))
        }
        Primitive::Jit { .. } | Primitive::ClosedCall { .. } => jvp_call(b, eqn, primals, tangents),
        Primitive::CustomJvpCall { name, call_jaxpr, jvp, num_consts, .. } => {
            match (KnownCustomJvp::of(name, jvp, primals.len()), crate::custom::custom_jvp_rule(name, jvp)?) {
                (Some(rule), _) => rule.jvp(b, old, eqn, primals, tangents),
                (None, Some(rule)) => jvp_custom_jvp_rule(b, rule.as_ref(), name, *num_consts, primals, tangents),
                (None, None) => jvp_custom_jvp_call(b, old, eqn, name, call_jaxpr, primals, tangents),
            }
        }
        Primitive::Remat2 { .. } => jvp_call(b, eqn, primals, tangents),
        Primitive::Scan { .. } => scan_jvp(b, eqn, primals, tangents),
        Primitive::Gather { .. } => indexing::gather(b, old, eqn, primals, tangents),
        Primitive::Scatter { .. } => indexing::scatter(b, old, eqn, primals, tangents),
        Primitive::Sort { .. } => indexing::sort(b, eqn, primals, tangents),
        Primitive::TopK { .. } => indexing::top_k(b, old, eqn, primals, tangents),
        Primitive::Cholesky => super::linalg::cholesky(b, old, eqn, primals, tangents),
        Primitive::Lu => super::linalg::lu(b, old, eqn, primals, tangents),
        Primitive::Qr(q) => super::linalg::qr(b, old, eqn, *q, primals, tangents),
        Primitive::Eigh(e) => super::linalg::eigh(b, *e, primals, tangents),
        Primitive::Svd(v) => super::linalg::svd(b, *v, primals, tangents),
        Primitive::TridiagonalSolve { .. } => super::linalg::tridiagonal_solve(b, old, eqn, primals, tangents),
        // JAX defines no jvp for it: differentiating through it is JAX's error.
        Primitive::SymmetricProduct { .. } => {
            Err(AdError::Invalid("Differentiation rule for 'symmetric_product' not implemented".into()))
        }
        Primitive::Geqrf => Err(AdError::Invalid("Differentiation rule for 'geqrf' not implemented".into())),
        Primitive::Ormqr { .. } => Err(AdError::Invalid("Differentiation rule for 'ormqr' not implemented".into())),
        Primitive::HouseholderProduct => {
            Err(AdError::Invalid("Differentiation rule for 'householder_product' not implemented".into()))
        }
        // Integer pivots in, an integer permutation out: no tangent.
        Primitive::LuPivotsToPermutation { .. } => zero(b, old, eqn, primals),
        Primitive::TriangularSolve(t) => super::linalg::triangular_solve(b, old, eqn, *t, primals, tangents),
        Primitive::Cumulative { op: CumulativeOp::Sum, .. } => linear(b, old, eqn, primals, tangents),
        Primitive::Cumulative { .. } => indexing::cumulative(b, eqn, primals, tangents),
        Primitive::GenericReduce { .. } => indexing::generic_reduce(b, eqn, primals, tangents),
        Primitive::ApproxTopK { .. } => indexing::approx_top_k(b, old, eqn, primals, tangents),
        Primitive::GenericReduceWindow { .. } => indexing::generic_reduce_window(b, eqn, primals, tangents),
        Primitive::Cond { .. } => cond::cond_jvp(b, eqn, primals, tangents),
        Primitive::While { .. } => cond::while_jvp(b, eqn, primals, tangents),
        // The fwd/bwd rules are known only by name: the primal function is differentiated.
        // `fwd` computes the primal outputs, here the body's (inlined, as a `fwd` that
        // computes the function does); the tangent is the body's.
        Primitive::CustomVjpCall { name, call_jaxpr, fwd, bwd, num_consts, .. } => {
            if name == crate::custom::CUSTOM_LIN {
                return Err(AdError::Unsupported {
                    primitive: "custom_vjp_call",
                    message: "the linear custom_lin equation of a custom_vjp function cannot be differentiated again"
                        .into(),
                });
            }
            match crate::custom::custom_vjp_rule(fwd, bwd)? {
                Some(rule) => jvp_custom_vjp_rule(b, rule.as_ref(), name, fwd, bwd, *num_consts, primals, tangents),
                None => jvp_custom_vjp_call(b, name, call_jaxpr, primals, tangents),
            }
        }
    }
}

fn unary(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    op: UnaryOp,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let x = primals[0];
    let dt = b.aval(&x).dtype;
    let one = lit(dt, 1.0);
    match op {
        UnaryOp::Neg => linear(b, old, eqn, primals, tangents),
        UnaryOp::Sign | UnaryOp::StopGradient => zero(b, old, eqn, primals),
        // JAX's `_abs_jvp_rule` on complex values: real(g * conj(x) / _replace_zero(ans)).
        UnaryOp::Abs if dt.is_complex() => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            let cx = b.bind1(Primitive::Conj { input_dtype: dt }, vec![x])?;
            let a = b.convert(ans, dt)?;
            let rz = replace_zero(b, a)?;
            let d = b.div(cx, rz)?;
            let m = b.mul(g, d)?;
            b.bind1(Primitive::Real, vec![m])
        }),
        UnaryOp::Abs => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            // select(x >= 0, g, -g)
            let ge = b.compare(CompareOp::Ge, x, lit(dt, 0.0))?;
            let ng = b.neg(g)?;
            b.select_n(ge, vec![ng, g])
        }),
        UnaryOp::Exp => standard(b, old, eqn, primals, tangents, |b, _, g, ans| b.mul(g, ans)),
        UnaryOp::Log => standard(b, old, eqn, primals, tangents, |b, _, g, _| b.div(g, x)),
        UnaryOp::Log1p => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let d = b.add(x, one)?;
            b.div(g, d)
        }),
        UnaryOp::Expm1 => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            let d = b.add(ans, one)?;
            b.mul(g, d)
        }),
        UnaryOp::Sin => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let c = b.unary(UnaryOp::Cos, x)?;
            b.mul(g, c)
        }),
        UnaryOp::Cos => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let s = b.unary(UnaryOp::Sin, x)?;
            let m = b.mul(g, s)?;
            b.neg(m)
        }),
        UnaryOp::Tan => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            let sq = b.unary(UnaryOp::Square, ans)?;
            let d = b.add(one, sq)?;
            b.mul(g, d)
        }),
        UnaryOp::Tanh => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // (g + g * ans) * (1 - ans)
            let ga = b.mul(g, ans)?;
            let s = b.add(g, ga)?;
            let d = b.sub(one, ans)?;
            b.mul(s, d)
        }),
        UnaryOp::Logistic => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // g * (ans * (1 - ans))
            let d = b.sub(one, ans)?;
            let m = b.mul(ans, d)?;
            b.mul(g, m)
        }),
        UnaryOp::Sqrt => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            let d = b.div(lit(dt, 0.5), ans)?;
            b.mul(g, d)
        }),
        UnaryOp::Rsqrt => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // g * (-0.5 * (ans / x))
            let q = b.div(ans, x)?;
            let m = b.mul(lit(dt, -0.5), q)?;
            b.mul(g, m)
        }),
        UnaryOp::Square => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let m = b.mul(lit(dt, 2.0), x)?;
            b.mul(g, m)
        }),
        UnaryOp::Not
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::IsFinite
        | UnaryOp::Copy
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
        | UnaryOp::BesselI1e
        | UnaryOp::PopulationCount
        | UnaryOp::Clz => super::special::unary(b, old, eqn, op, primals, tangents),
    }
}

fn binary(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    op: BinaryOp,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let (x, y) = (primals[0], primals[1]);
    match op {
        BinaryOp::Add | BinaryOp::AddAny | BinaryOp::Sub => {
            // `_add_jvp` / `_sub_jvp`: a lone tangent is broadcast to the output's shape.
            let out = emit_primal(b, old, eqn, primals);
            let shape = b.aval(&out[0]).shape;
            let t = match (tangents[0], tangents[1]) {
                (Tangent::Zero, Tangent::Zero) => return Ok((out, vec![Tangent::Zero])),
                (Tangent::Zero, Tangent::Nz(yd)) => {
                    let yd = if op == BinaryOp::Sub { b.neg(yd)? } else { yd };
                    b.maybe_broadcast(&shape, yd)?
                }
                (Tangent::Nz(xd), Tangent::Zero) => b.maybe_broadcast(&shape, xd)?,
                (Tangent::Nz(xd), Tangent::Nz(yd)) => b.binary(op, xd, yd)?,
            };
            Ok((out, vec![Tangent::Nz(t)]))
        }
        BinaryOp::Mul => {
            standard(b, old, eqn, primals, tangents, |b, i, g, _| if i == 0 { b.mul(g, y) } else { b.mul(x, g) })
        }
        BinaryOp::Div => standard(b, old, eqn, primals, tangents, |b, i, g, _| {
            if i == 0 {
                b.div(g, y)
            } else {
                // -g * x * y**-2
                let ng = b.neg(g)?;
                let m = b.mul(ng, x)?;
                let p = b.integer_pow(y, -2)?;
                b.mul(m, p)
            }
        }),
        BinaryOp::Pow => standard(b, old, eqn, primals, tangents, |b, i, g, ans| {
            if i == 0 {
                pow_jvp_lhs(b, g, x, y)
            } else {
                // g * (log(_replace_zero(x)) * ans)
                let rz = replace_zero(b, x)?;
                let l = b.unary(UnaryOp::Log, rz)?;
                let m = b.mul(l, ans)?;
                b.mul(g, m)
            }
        }),
        BinaryOp::Max | BinaryOp::Min => standard(b, old, eqn, primals, tangents, |b, i, g, ans| {
            let be = if i == 0 { balanced_eq(b, x, ans, y)? } else { balanced_eq(b, y, ans, x)? };
            b.mul(g, be)
        }),
        BinaryOp::Rem
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
        | BinaryOp::Mulhi => super::special::binary(b, old, eqn, op, primals, tangents),
    }
}

/// `_pow_jvp_lhs`: `g * y * x**(y-1)`, with `y == 0` giving 0 for integer exponents.
fn pow_jvp_lhs(b: &mut Builder, g: Atom, x: Atom, y: Atom) -> Result<Atom, AdError> {
    let x_aval = b.aval(&x);
    let y_dtype = b.aval(&y).dtype;
    let jac = if y_dtype.is_inexact() {
        let y_aval = b.aval(&y);
        let ones = b.full(&y_aval, 1.0)?;
        let ym1 = b.sub(y, ones)?;
        let p = b.binary(BinaryOp::Pow, x, ym1)?;
        b.mul(y, p)?
    } else {
        let mut y = b.convert(y, x_aval.dtype)?;
        let mut x = x;
        let (xs, ys) = (x_aval.shape.clone(), b.aval(&y).shape);
        if xs != ys {
            let shape = if xs.is_empty() { ys.clone() } else { xs.clone() };
            x = b.maybe_broadcast(&shape, x)?;
            y = b.maybe_broadcast(&shape, y)?;
        }
        let y_aval = b.aval(&y);
        let is_zero = b.compare(CompareOp::Eq, y, lit(y_aval.dtype, 0.0))?;
        let zeros = b.zeros(&y_aval)?;
        let rz = replace_zero(b, y)?;
        let ones = b.full(&y_aval, 1.0)?;
        let ym1 = b.sub(y, ones)?;
        let p = b.binary(BinaryOp::Pow, x, ym1)?;
        let m = b.mul(rz, p)?;
        b.select_n(is_zero, vec![m, zeros])?
    };
    b.mul(g, jac)
}

/// `_replace_zero(x)`: `select(x == 0, ones_like(x), x)`.
fn replace_zero(b: &mut Builder, x: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let is_zero = b.compare(CompareOp::Eq, x, lit(aval.dtype, 0.0))?;
    let ones = b.full(&aval, 1.0)?;
    b.select_n(is_zero, vec![x, ones])
}

/// `_balanced_eq(x, z, y)`: 1 where `x == z`, halved where `y == z` too (ties split).
fn balanced_eq(b: &mut Builder, x: Atom, z: Atom, y: Atom) -> Result<Atom, AdError> {
    let z_aval = b.aval(&z);
    let e1 = b.compare(CompareOp::Eq, x, z)?;
    let ones = b.full(&z_aval, 1.0)?;
    let zeros = b.full(&z_aval, 0.0)?;
    let num = b.select_n(e1, vec![zeros, ones])?;
    let e2 = b.compare(CompareOp::Eq, y, z)?;
    let twos = b.full(&z_aval, 2.0)?;
    let ones2 = b.full(&z_aval, 1.0)?;
    let den = b.select_n(e2, vec![ones2, twos])?;
    b.div(num, den)
}

/// `bitwise_and` of two predicates, as `select_n(a, a, c)` (the IR has no `and`), with a
/// scalar operand broadcast to `shape`.
fn logical_and(b: &mut Builder, a: Atom, c: Atom, shape: &[usize]) -> Result<Atom, AdError> {
    let (ra, rc) = (b.aval(&a).rank(), b.aval(&c).rank());
    if ra == rc {
        return b.select_n(a, vec![a, c]);
    }
    let a = b.maybe_broadcast(shape, a)?;
    let c = b.maybe_broadcast(shape, c)?;
    b.select_n(a, vec![a, c])
}

/// The rules of JAX's own `custom_jvp` functions, recovered by the name JAX prints.
///
/// A `custom_jvp_call` carries its rule only as opaque text (`jvp=jvp`), so in general it
/// is differentiated through its body (a user's rule is Python code the text does not
/// hold). The functions below are JAX library functions whose rules are part of JAX
/// itself, and using them gives JAX's results where the body's derivative differs:
/// `jax.nn.relu`'s rule has derivative 0 at 0 (the body's `max` splits the tie, giving
/// 1/2), and its forward half saves JAX's `gt` mask and zeros rather than what `max`
/// needs; `jnp.logaddexp`'s rule is `_logaddexp_jvp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KnownCustomJvp {
    /// `jax.nn.relu`: `select(x > 0, g, full_like(g, 0))`.
    Relu,
    /// `logaddexp` (`cumlogsumexp`'s combiner): `t1 * exp(x1 - out) + t2 * exp(x2 - out)`
    /// with `+inf` replaced by 0 in each exponent's terms (`_logaddexp_jvp`).
    LogAddExp,
}

impl KnownCustomJvp {
    /// The library function of `custom_jvp_call[name=NAME ... jvp=JVP]` on this many
    /// operands (JAX's own names: `relu`'s rule is the `jvp` that `defjvps` makes). These
    /// come before a registered rule: the Python package registers every call's traced
    /// rule, and remat's own is JAX's with JAX's provenance.
    fn of(name: &str, jvp: &str, num_operands: usize) -> Option<KnownCustomJvp> {
        match (name, jvp, num_operands) {
            ("relu", "jvp", 1) => Some(KnownCustomJvp::Relu),
            ("logaddexp", "_logaddexp_jvp", 2) => Some(KnownCustomJvp::LogAddExp),
            _ => None,
        }
    }

    /// The primal is the `custom_jvp_call` itself, as in JAX; the tangent comes from the
    /// rule, whose primal-only parts land on the known side of a linearization.
    fn jvp(
        self,
        b: &mut Builder,
        old: &Jaxpr,
        eqn: &Eqn,
        primals: &[Atom],
        tangents: &[Tangent],
    ) -> Result<JvpOut, AdError> {
        let out = emit_primal(b, old, eqn, primals);
        if self == KnownCustomJvp::LogAddExp {
            return logaddexp_jvp(b, out, primals, tangents);
        }
        let Tangent::Nz(g) = tangents[0] else {
            return Ok((out, vec![Tangent::Zero]));
        };
        match self {
            KnownCustomJvp::Relu => {
                let x = primals[0];
                let aval = b.aval(&x);
                let positive = b.compare(CompareOp::Gt, x, lit(aval.dtype, 0.0))?;
                // JAX runs relu's rule as a jaxpr traced beforehand, where `full_like(g, 0)`
                // is already a plain literal: a scalar zero here is never saved.
                let zeros = b.zeros(&aval)?;
                let t = b.select_n(positive, vec![zeros, g])?;
                Ok((out, vec![Tangent::Nz(t)]))
            }
            KnownCustomJvp::LogAddExp => logaddexp_jvp(b, out, primals, tangents),
        }
    }
}

/// `_logaddexp_jvp`: both tangents instantiated (a `custom_jvp` without symbolic zeros).
fn logaddexp_jvp(b: &mut Builder, out: Vec<Atom>, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let ans = out[0];
    let mut terms = Vec::with_capacity(2);
    for (x, t) in primals.iter().zip(tangents) {
        let aval = b.aval(x);
        let t = instantiate(b, *t, &aval)?;
        let x = replace_inf(b, *x)?;
        let a = replace_inf(b, ans)?;
        let d = b.sub(x, a)?;
        let e = b.unary(UnaryOp::Exp, d)?;
        terms.push(b.mul(t, e)?);
    }
    let t = b.add(terms[0], terms[1])?;
    Ok((out, vec![Tangent::Nz(t)]))
}

/// `_replace_inf(x)`: `select(x == inf, zeros, x)`.
fn replace_inf(b: &mut Builder, x: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let is_inf = b.compare(CompareOp::Eq, x, lit(aval.dtype, f64::INFINITY))?;
    let zeros = b.zeros(&aval)?;
    b.select_n(is_inf, vec![x, zeros])
}

/// One line per custom-derivative call in `jaxpr` (nested ones included) whose rule is
/// known only by name and so is not what differentiates it: the primal `call_jaxpr` is
/// differentiated instead, and gradients and residuals may differ from JAX's.
pub fn custom_rule_notes(jaxpr: &Jaxpr) -> Vec<String> {
    let mut notes = Vec::new();
    for eqn in &jaxpr.eqns {
        if let Primitive::CustomJvpCall { name, jvp, .. } = &eqn.primitive {
            let registered = matches!(crate::custom::custom_jvp_rule(name, jvp), Ok(Some(_)));
            if !registered && KnownCustomJvp::of(name, jvp, eqn.invars.len()).is_none() {
                notes.push(format!(
                    "custom_jvp_call `{name}` at {}: its rule `{jvp}` is not known; its call_jaxpr is differentiated",
                    eqn.source
                ));
            }
        }
        let registered = |fwd: &str, bwd: &str| matches!(crate::custom::custom_vjp_rule(fwd, bwd), Ok(Some(_)));
        if let Primitive::CustomVjpCall { name, fwd, bwd, .. } = &eqn.primitive {
            if !registered(fwd, bwd) {
                notes.push(format!(
                    "custom_vjp_call `{name}` at {}: its rules `{fwd}`/`{bwd}` are not known; its call_jaxpr is \
                 differentiated",
                    eqn.source
                ));
            }
        }
        for sub in eqn.primitive.subjaxprs() {
            notes.extend(custom_rule_notes(sub));
        }
    }
    notes
}
