//! What an equation costs to compute, in floating-point operations: the one price of
//! recomputation that the planner, the residual ledger and the report's frontier all use.
//!
//! The model is the usual one: a `dot_general` is `2*m*n*k` per batch, a convolution
//! `2*k` per output element (`k` the kernel's elements per output feature), a call its
//! body (a `scan` its body times its length, a `cond` its most expensive branch, a `while`
//! one trip), a `reduce_precision` that keeps every value (JAX's rounding of saved
//! residuals to their own dtype, the identity in the JIT) and a `convert_element_type` to
//! the operand's own dtype (forwarded by partial evaluation) and a `device_put` (a transfer,
//! such as an offloaded residual's) nothing, and every other equation
//! one operation per element of its largest operand or result (elementwise arithmetic,
//! reductions, layout moves). It is a price for comparing choices, not a prediction of
//! time.

use remat_ir::{Eqn, Jaxpr, Primitive};

/// The cost of one equation of `jaxpr`: one arm per primitive, so a new primitive
/// does not compile until its price is decided.
pub fn eqn_flops(jaxpr: &Jaxpr, eqn: &Eqn) -> u64 {
    let elements = |avals: Vec<remat_ir::Aval>| avals.iter().map(|a| a.size() as u64).max().unwrap_or(0);
    let outs: Vec<remat_ir::Aval> = eqn.outvars.iter().map(|&v| jaxpr.aval(v).clone()).collect();
    let ins: Vec<remat_ir::Aval> = eqn.invars.iter().map(|a| jaxpr.atom_aval(a)).collect();
    let prim = &eqn.primitive;
    let bodies = || prim.subjaxprs().into_iter().map(|b| jaxpr_flops(b));
    let per_element = || elements(ins.clone()).max(elements(outs.clone()));
    match prim {
        Primitive::DotGeneral { dimension_numbers, .. } => {
            let k: u64 = dimension_numbers.lhs_contracting.iter().map(|&d| ins[0].shape[d] as u64).product();
            2 * k * elements(outs)
        }
        Primitive::ConvGeneralDilated(p) => {
            let rhs = &ins[1];
            let per_feature = rhs.size() as u64 / (rhs.shape[p.dimension_numbers.rhs_spec[0]] as u64).max(1);
            2 * per_feature * elements(outs)
        }
        // n³/3 multiply-adds per n x n matrix of the batch.
        Primitive::Cholesky => {
            let n = *ins[0].shape.last().unwrap_or(&1) as u64;
            (ins[0].size() as u64) * n / 3
        }
        // n multiply-adds per element of `b`, over its n x n triangle.
        Primitive::TriangularSolve(_) => {
            let n = *ins[0].shape.last().unwrap_or(&1) as u64;
            (ins[1].size() as u64) * n
        }
        // n³/3 multiply-adds per n x n matrix of the batch; elements × min(m, n) / 3 for an
        // m x n one (a lower bound when it is not square).
        Primitive::Lu => {
            let r = ins[0].rank();
            let k = ins[0].shape[r - 2].min(ins[0].shape[r - 1]) as u64;
            (ins[0].size() as u64) * k / 3
        }
        // Householder QR: about 2 m n k multiply-adds for the factor and as many for `q`.
        Primitive::Qr(_) => {
            let r = ins[0].rank();
            let k = ins[0].shape[r - 2].min(ins[0].shape[r - 1]) as u64;
            4 * (ins[0].size() as u64) * k
        }
        // Householder reflections: about 2 m n k per matrix (`geqrf`), 4 m n k (`orgqr`).
        Primitive::Geqrf | Primitive::HouseholderProduct => {
            let r = ins[0].rank();
            let k = ins[0].shape[r - 2].min(ins[0].shape[r - 1]) as u64;
            4 * (ins[0].size() as u64) * k
        }
        // One reflector of `k` applied to each of c's rows or columns: about 4 m k per element.
        Primitive::Ormqr { .. } => {
            let k = *ins[1].shape.last().unwrap_or(&1) as u64;
            4 * (ins[2].size() as u64) * k
        }
        // Elimination and back substitution: about 8 flops per element of b.
        Primitive::TridiagonalSolve { .. } => 8 * ins[3].size() as u64,
        // One-sided Jacobi sweeps: about 6 sweeps of 3 m n² per m x n matrix (n the smaller side).
        Primitive::Svd(_) => {
            let r = ins[0].rank();
            let k = ins[0].shape[r - 2].min(ins[0].shape[r - 1]) as u64;
            18 * (ins[0].size() as u64) * k
        }
        // Jacobi sweeps: about 9 n³ per n x n matrix.
        Primitive::Eigh(_) => {
            let n = *ins[0].shape.last().unwrap_or(&1) as u64;
            9 * (ins[0].size() as u64) * n
        }
        // m² n multiply-adds per pair.
        Primitive::SymmetricProduct { .. } => {
            let r = ins[0].rank();
            2 * (outs[0].size() as u64) * ins[0].shape[r - 1] as u64
        }
        // The combiner's equations once per operand element.
        Primitive::GenericReduce { jaxpr, .. } => ins[0].size() as u64 * jaxpr.eqns.len().max(1) as u64,
        // Once per window element of each result.
        Primitive::GenericReduceWindow { jaxpr, window } => {
            let per_window: usize = window.window_dimensions.iter().product();
            (outs[0].size() * per_window) as u64 * jaxpr.eqns.len().max(1) as u64
        }
        // A swap per pivot.
        Primitive::LuPivotsToPermutation { .. } => per_element(),
        // About 5 n log2 n per transformed element (n the transformed extent).
        Primitive::Fft { fft_lengths, .. } => {
            let n: usize = fft_lengths.iter().product();
            5 * per_element() * u64::from(n.max(2).ilog2())
        }
        // A continued fraction of up to 200 (f32) or 600 (f64) steps per element, about 20
        // steps at the operands of ordinary programs.
        Primitive::RegularizedIncompleteBeta => 20 * per_element(),
        // A transfer between memories (an offloaded residual's), not arithmetic.
        Primitive::DevicePut { .. } => 0,
        // Partial evaluation forwards one to the operand's own dtype, as JAX does (only the
        // weak type changes).
        Primitive::ConvertElementType { new_dtype, .. } => {
            if ins[0].dtype == *new_dtype {
                0
            } else {
                per_element()
            }
        }
        // The JIT makes one that keeps every value the identity (the residuals JAX's
        // `remat` rounds).
        Primitive::ReducePrecision { exponent_bits, mantissa_bits } => {
            if ins[0].dtype.reduce_precision_is_identity(*exponent_bits, *mantissa_bits) {
                0
            } else {
                per_element()
            }
        }
        // A loop over its body, `length` times.
        Primitive::Scan { length, .. } => *length as u64 * bodies().sum::<u64>(),
        // Its most expensive branch.
        Primitive::Cond { .. } => bodies().max().unwrap_or(0),
        // Its bodies once (a `while` one trip: its trip count is known only at run time).
        Primitive::Jit { .. }
        | Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::Remat2 { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::CustomVjpCall { .. }
        | Primitive::While { .. } => bodies().sum(),
        // Its body once: what one device computes (every device runs it at once on its own
        // block).
        Primitive::ShardMap(_) => bodies().sum(),
        // One operation per element of the largest operand or result: elementwise
        // arithmetic, reductions, layout moves, indexing, sorting, windows, random bits.
        Primitive::Unary { .. }
        | Primitive::Binary { .. }
        | Primitive::Compare { .. }
        | Primitive::Reduce { .. }
        | Primitive::Scatter { .. }
        | Primitive::Cumulative { .. }
        | Primitive::IntegerPow { .. }
        | Primitive::SelectN
        | Primitive::Clamp
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
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
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. }
        | Primitive::DynamicSlice { .. }
        | Primitive::DynamicUpdateSlice
        | Primitive::Iota { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::OptimizationBarrier
        | Primitive::Argmax { .. }
        | Primitive::Argmin { .. }
        | Primitive::Name { .. }
        | Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::Pvary { .. }
        | Primitive::AllReduce { .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::Pbroadcast { .. }
        | Primitive::AllToAll { .. }
        | Primitive::ShardAlike
        | Primitive::Empty2 { .. }
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
        | Primitive::Split { .. }
        | Primitive::Gather { .. }
        | Primitive::Sort { .. }
        | Primitive::TopK { .. }
        | Primitive::ApproxTopK { .. }
        | Primitive::ReduceWindow { .. }
        | Primitive::SelectAndScatterAdd { .. }
        | Primitive::SelectAndGatherAdd { .. } => per_element(),
    }
}

/// The cost of every equation of `jaxpr`.
pub fn jaxpr_flops(jaxpr: &Jaxpr) -> u64 {
    jaxpr.eqns.iter().map(|e| eqn_flops(jaxpr, e)).sum()
}
