//! What an equation costs to compute, in floating-point operations: the one price of
//! recomputation that the planner, the residual ledger and the report's frontier all use.
//!
//! The model is the usual one: a `dot_general` is `2*m*n*k` per batch, a convolution
//! `2*k` per output element (`k` the kernel's elements per output feature), a call its
//! body (a `scan` its body times its length, a `cond` its most expensive branch, a `while`
//! one trip), a `reduce_precision` that keeps every value (JAX's rounding of saved
//! residuals to their own dtype, the identity in the JIT) and a `convert_element_type` to
//! the operand's own dtype (forwarded by partial evaluation) nothing, and every other equation
//! one operation per element of its largest operand or result (elementwise arithmetic,
//! reductions, layout moves). It is a price for comparing choices, not a prediction of
//! time.

use remat_ir::{Eqn, HigherOrder, Jaxpr, Primitive};

/// The cost of one equation of `jaxpr`.
pub fn eqn_flops(jaxpr: &Jaxpr, eqn: &Eqn) -> u64 {
    let elements = |avals: Vec<remat_ir::Aval>| avals.iter().map(|a| a.size() as u64).max().unwrap_or(0);
    let outs: Vec<remat_ir::Aval> = eqn.outvars.iter().map(|&v| jaxpr.aval(v).clone()).collect();
    let ins: Vec<remat_ir::Aval> = eqn.invars.iter().map(|a| jaxpr.atom_aval(a)).collect();
    match &eqn.primitive {
        Primitive::DotGeneral { dimension_numbers, .. } => {
            let k: u64 = dimension_numbers.lhs_contracting.iter().map(|&d| ins[0].shape[d] as u64).product();
            2 * k * elements(outs)
        }
        Primitive::ConvGeneralDilated(p) => {
            let rhs = &ins[1];
            let per_feature = rhs.size() as u64 / (rhs.shape[p.dimension_numbers.rhs_spec[0]] as u64).max(1);
            2 * per_feature * elements(outs)
        }
        // Partial evaluation forwards it, as JAX does (only the weak type changes).
        Primitive::ConvertElementType { new_dtype, .. } if ins[0].dtype == *new_dtype => 0,
        // The JIT makes it the identity (the residuals JAX's `remat` rounds).
        Primitive::ReducePrecision { exponent_bits, mantissa_bits }
            if ins[0].dtype.reduce_precision_is_identity(*exponent_bits, *mantissa_bits) =>
        {
            0
        }
        prim => match prim.higher_order() {
            None => elements(ins).max(elements(outs)),
            Some(kind) => {
                let bodies = prim.subjaxprs();
                let body = |j: &Jaxpr| jaxpr_flops(j);
                match kind {
                    HigherOrder::Scan => match prim {
                        Primitive::Scan { length, .. } => *length as u64 * bodies.iter().map(|b| body(b)).sum::<u64>(),
                        _ => 0,
                    },
                    HigherOrder::Cond => bodies.iter().map(|b| body(b)).max().unwrap_or(0),
                    HigherOrder::Jit
                    | HigherOrder::Remat2
                    | HigherOrder::CustomJvpCall
                    | HigherOrder::CustomVjpCall
                    | HigherOrder::While => bodies.iter().map(|b| body(b)).sum(),
                }
            }
        },
    }
}

/// The cost of every equation of `jaxpr`.
pub fn jaxpr_flops(jaxpr: &Jaxpr) -> u64 {
    jaxpr.eqns.iter().map(|e| eqn_flops(jaxpr, e)).sum()
}
