//! How the fuzzing differential compares the JIT with the interpreter.
//!
//! A program whose operations are all exact ([`exact`]) must agree bit for bit. Any other
//! program is first compared within a float tolerance ([`close`]); where that fails, the
//! disagreement is located ([`locate`]): each equation is run alone by the JIT on the
//! interpreter's values of its operands and held to its own bound,
//!
//! - exact equations: bit for bit;
//! - float accumulations (`dot_general`, convolutions, sums, windowed sums, scatter-add,
//!   `select_and_scatter_add`, cumulative sums), which the backends sum in different
//!   orders: `|jit - interp| <= 3 n u S + n eta` per element, where `S` is the same
//!   equation evaluated by the interpreter on the operands' absolute values (the sum of the
//!   absolute terms), `n` bounds the number of terms (the operands' element count), `u` is
//!   the unit roundoff of the result's dtype and `eta` its smallest subnormal. Any two
//!   summation orders differ by at most `2 gamma_n S` (`gamma_n = n u / (1 - n u)`, Higham,
//!   *Accuracy and Stability of Numerical Algorithms*, 4.2), plus what underflow loses; where
//!   `S` itself is beyond the dtype's range (or not finite), some order overflows, and the
//!   element is unconstrained;
//! - everything else (transcendentals, `pow`, the special functions): [`close`].
//!
//! An equation out of its bound is a finding. So is a program that disagrees although every
//! equation alone agrees bit for bit (the difference then comes from compiling the whole
//! program: fusion, planning, CSE). A program whose equations all keep their bounds, some
//! of them differing, disagrees only by those permitted differences magnified downstream (a
//! comparison, a rounding, a cancellation after a sum): that is a difference within the
//! documented bounds, not a finding.

use remat_ir::{
    Array, Atom, BinaryOp, CumulativeOp, DType, Eqn, Jaxpr, Primitive, ReduceOp, ScatterOp, SourceInfo, UnaryOp,
    WindowOp,
};

use crate::common::{check_bits, value_bits};

#[path = "locate.rs"]
mod locate;
pub(crate) use locate::locate;

/// Whether the JIT computes every value of `jaxpr` with the same operations, in the same
/// order, as the interpreter: no transcendentals (inline polynomials, within 2 ulp of libm),
/// no `pow`, no float sums or products (summed in other orders). Such programs must agree
/// bit for bit, integers, 16-bit floats and keys included.
pub(crate) fn exact(jaxpr: &Jaxpr) -> bool {
    jaxpr.eqns.iter().all(|e| {
        let float_in = || e.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
        let ok = match &e.primitive {
            Primitive::Unary(op) => {
                !(matches!(
                    op,
                    UnaryOp::Exp
                        | UnaryOp::Log
                        | UnaryOp::Log1p
                        | UnaryOp::Expm1
                        | UnaryOp::Sin
                        | UnaryOp::Cos
                        | UnaryOp::Tan
                        | UnaryOp::Tanh
                        | UnaryOp::Logistic
                ) || (remat_math::UNARY_OPS.contains(op) && float_in()))
            }
            Primitive::Binary(BinaryOp::Pow) => false,
            // Sums across devices, in the order of the devices.
            Primitive::AllReduce { .. } | Primitive::ReduceScatter { .. } => !float_in(),
            Primitive::ShardingConstraint(_)
            | Primitive::Reshard
            | Primitive::ShardMap(_)
            | Primitive::Pvary { .. }
            | Primitive::Ppermute { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::Pbroadcast { .. }
            | Primitive::AllToAll { .. }
            | Primitive::ShardAlike
            | Primitive::AllGather { .. } => true,
            // The special functions are one library for both backends, but a 16-bit
            // result may round from a 1-ulp different f32 one; compared within tolerance.
            Primitive::Binary(op) if remat_math::BINARY_OPS.contains(op) && float_in() => false,
            // Float accumulations: the backends may sum in different orders.
            Primitive::Reduce { op: ReduceOp::Sum | ReduceOp::Prod, .. }
            | Primitive::DotGeneral { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { op: WindowOp::Sum, .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::Cumulative { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::Scatter { .. } => !float_in(),
            // The rest: the other binary operations, max and min reductions, and the
            // primitives that compute without rounding (or round each element alone).
            Primitive::Binary(_)
            | Primitive::Reduce { .. }
            | Primitive::ReduceWindow { .. }
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::Fft { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::BitcastConvertType { .. }
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
            | Primitive::Iota { .. }
            | Primitive::Argmax { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. }
            | Primitive::Empty2 { .. }
            | Primitive::SelectAndGatherAdd { .. }
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
            | Primitive::Jit { .. }
            | Primitive::ClosedCall { .. }
            | Primitive::Composite { .. }
            | Primitive::CustomJvpCall { .. }
            | Primitive::Remat2 { .. }
            | Primitive::Scan { .. }
            | Primitive::Split { .. }
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::OptimizationBarrier
            | Primitive::Gather { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
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
            | Primitive::Argmin { .. }
            | Primitive::Cond { .. }
            | Primitive::While { .. }
            | Primitive::CustomVjpCall { .. } => true,
        };
        ok && e.primitive.subjaxprs().into_iter().all(|j| exact(j))
    })
}

/// Within float tolerance: f32/f64 (and integers) at `rel 1e-4, abs 1e-5`, the 16-bit
/// floats at about one ulp of their own (a 2-ulp f32 difference of a transcendental can
/// round to neighbouring narrow values).
pub(crate) fn close(what: &str, got: &[Array], want: &[Array]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (rel, abs) = match w.dtype() {
            DType::BF16 => (1.0 / 64.0, 1e-3),
            DType::F16 => (1.0 / 512.0, 1e-4),
            _ => (1e-4, 1e-5),
        };
        let what = format!("{what} {i}");
        remat_testkit::check_close(&what, std::slice::from_ref(g), std::slice::from_ref(w), rel, abs)?;
    }
    Ok(())
}

/// Whether `prim` on float operands sums terms whose order the backends may choose.
fn accumulates(prim: &Primitive) -> bool {
    match prim {
        Primitive::Reduce { op, .. } => matches!(op, ReduceOp::Sum | ReduceOp::Prod),
        Primitive::ReduceWindow { op, .. } => *op == WindowOp::Sum,
        Primitive::Scatter { op, .. } => matches!(op, ScatterOp::Add | ScatterOp::Sub),
        Primitive::Cumulative { op, .. } => *op == CumulativeOp::Sum,
        Primitive::GenericReduce { .. } | Primitive::GenericReduceWindow { .. } => true,
        Primitive::DotGeneral { .. } | Primitive::ConvGeneralDilated(_) | Primitive::SelectAndScatterAdd { .. } => true,
        // Sums across devices.
        Primitive::AllReduce { .. } | Primitive::ReduceScatter { .. } => true,
        Primitive::Unary(_)
        | Primitive::Binary(_)
        | Primitive::Compare(_)
        | Primitive::IntegerPow { .. }
        | Primitive::SelectN
        | Primitive::Clamp
        | Primitive::RegularizedIncompleteBeta
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::Fft { .. }
        | Primitive::ConvertElementType { .. }
        | Primitive::ReducePrecision { .. }
        | Primitive::Round { .. }
        | Primitive::BitcastConvertType { .. }
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
        | Primitive::Iota { .. }
        | Primitive::Argmax { .. }
        | Primitive::Name { .. }
        | Primitive::DevicePut { .. }
        | Primitive::Empty2 { .. }
        | Primitive::SelectAndGatherAdd { .. }
        | Primitive::RandomSeed
        | Primitive::RandomWrap
        | Primitive::RandomUnwrap
        | Primitive::RandomSplit { .. }
        | Primitive::RandomFoldIn
        | Primitive::RandomBits { .. }
        | Primitive::RandomClone
        | Primitive::Threefry2x32
        | Primitive::Iota2x32Shape { .. }
        | Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::ShardMap(_)
        | Primitive::Pvary { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::Pbroadcast { .. }
        | Primitive::AllToAll { .. }
        | Primitive::ShardAlike
        | Primitive::AllGather { .. }
        | Primitive::RngBitGenerator { .. }
        | Primitive::Jit { .. }
        | Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::Remat2 { .. }
        | Primitive::Scan { .. }
        | Primitive::Split { .. }
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::OptimizationBarrier
        | Primitive::Gather { .. }
        | Primitive::Sort { .. }
        | Primitive::TopK { .. }
        | Primitive::ApproxTopK { .. }
        | Primitive::Cholesky
        | Primitive::TriangularSolve(_)
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
        | Primitive::Argmin { .. }
        | Primitive::Cond { .. }
        | Primitive::While { .. }
        | Primitive::CustomVjpCall { .. } => false,
    }
}

/// The unit roundoff and the smallest subnormal of a float dtype.
fn roundoff(d: DType) -> Option<(f64, f64, f64)> {
    // (u, eta, largest finite)
    match d {
        DType::F32 => Some((2f64.powi(-24), 2f64.powi(-149), f32::MAX as f64)),
        DType::F64 => Some((2f64.powi(-53), 0.0, f64::MAX)),
        DType::BF16 => Some((2f64.powi(-8), 2f64.powi(-133), remat_ir::bf16::MAX.to_f64())),
        DType::F16 => Some((2f64.powi(-11), 2f64.powi(-24), remat_ir::f16::MAX.to_f64())),
        _ => None,
    }
}

/// The absolute values of a float array (others as they are).
fn abs(a: &Array) -> Array {
    match a {
        Array::F32(x) => Array::F32(x.mapv(f32::abs)),
        Array::F64(x) => Array::F64(x.mapv(f64::abs)),
        Array::BF16(x) => Array::BF16(x.mapv(|v| remat_ir::bf16::from_bits(v.to_bits() & 0x7fff))),
        Array::F16(x) => Array::F16(x.mapv(|v| remat_ir::f16::from_bits(v.to_bits() & 0x7fff))),
        other => other.clone(),
    }
}

/// The one equation `eqn` of `jaxpr` as a program of its own (its variable operands become
/// the inputs, literals stay).
fn alone(jaxpr: &Jaxpr, eqn: &Eqn) -> Jaxpr {
    let mut body = Jaxpr::default();
    let ins: Vec<Atom> = eqn
        .invars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => {
                let x = body.new_var(jaxpr.aval(*v).clone());
                body.invars.push(x);
                x.into()
            }
            lit => *lit,
        })
        .collect();
    let outs: Vec<remat_ir::Var> = eqn.outvars.iter().map(|&v| body.new_var(jaxpr.aval(v).clone())).collect();
    body.outvars = outs.iter().map(|&v| v.into()).collect();
    body.eqns.push(Eqn::new(eqn.primitive.clone(), ins, outs, SourceInfo::unknown()));
    body
}

/// `got` within the accumulation bound of the module's documentation, `sums` being the
/// equation on absolute values and `n` the number of terms.
pub(crate) fn within_sum_bound(what: &str, got: &Array, want: &Array, sums: &Array, n: usize) -> Result<(), String> {
    within_sums(what, got, want, &sums.to_f64_vec(), n)
}

/// [`within_sum_bound`] with the sums of absolute terms as numbers.
fn within_sums(what: &str, got: &Array, want: &Array, s: &[f64], n: usize) -> Result<(), String> {
    let Some((u, eta, max)) = roundoff(want.dtype()) else {
        return check_bits(what, std::slice::from_ref(got), std::slice::from_ref(want));
    };
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let n = n as f64;
    for (j, ((&g, &w), &s)) in g.iter().zip(&w).zip(s).enumerate() {
        let unconstrained = !s.is_finite() || s > max;
        let ok = unconstrained || (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 3.0 * n * u * s + n * eta;
        if !ok {
            return Err(format!(
                "{what}, element {j}: got {g}, expected {w}, beyond the summation bound {:e} (sum of |terms| {s})",
                3.0 * n * u * s + n * eta
            ));
        }
    }
    Ok(())
}

/// Whether two arrays hold the same values (bit for bit, NaNs as one).
fn same(a: &Array, b: &Array) -> bool {
    a.aval() == b.aval() && value_bits(a) == value_bits(b)
}

/// Whether equation `eqn` of `jaxpr` (as the program `one`), run alone on `ins`, keeps its
/// bound (the module's documentation).
fn within_bound(
    jaxpr: &Jaxpr,
    eqn: &Eqn,
    one: &Jaxpr,
    ins: &[Array],
    got: &[Array],
    want: &[Array],
    what: &str,
) -> Result<(), String> {
    let float_in = eqn.invars.first().is_some_and(|a| jaxpr.atom_aval(a).dtype.is_float());
    if exact(one) {
        check_bits(what, got, want)
    } else if accumulates(&eqn.primitive) && float_in {
        // The terms are the operands' elements, except `select_and_scatter_add`'s second
        // operand, which only selects where its first one's are added.
        let selects = matches!(eqn.primitive, Primitive::SelectAndScatterAdd { .. });
        let abs_ins: Vec<Array> =
            ins.iter().enumerate().map(|(i, a)| if selects && i > 0 { a.clone() } else { abs(a) }).collect();
        let sums = remat_interp::eval_jaxpr(one, &[], &abs_ins).map_err(|e| format!("{what}: |terms|: {e}"))?;
        let n: usize = ins.iter().map(Array::len).sum();
        for (i, ((g, w), s)) in got.iter().zip(want).zip(&sums).enumerate() {
            within_sum_bound(&format!("{what} {i}"), g, w, s, n)?;
        }
        Ok(())
    } else {
        close(what, got, want)
    }
}
