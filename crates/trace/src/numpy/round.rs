//! `jnp.round(x, decimals)`, recorded as JAX 0.10.2 records it: a `jit[name=round]` whose
//! body is `round[rounding_method=1]` for `decimals = 0`, `mul`/`round`/`div` by
//! `10 ** decimals` (a literal of `x`'s dtype) otherwise, and nothing for an integer `x`
//! (rounding an integer is the identity; negative `decimals` are an error there, as in
//! JAX).

use std::panic::Location;

use remat_ir::{BinaryOp, LitValue, Primitive, RoundingMethod};

use crate::tensor::Tensor;
use crate::trace::{bind, record_error, Operand};
use crate::transforms::library_jit;

/// `jnp.round(x, decimals)`: halves to the even neighbour, at `decimals` digits after the
/// point (negative: before it).
#[track_caller]
pub fn round_decimals(x: &Tensor, decimals: i32) -> Tensor {
    round_at(x, decimals, Location::caller())
}

pub(crate) fn round_at(x: &Tensor, decimals: i32, loc: &'static Location<'static>) -> Tensor {
    let float = x.dtype().is_float();
    if !float && decimals < 0 {
        record_error(
            loc,
            format!("round: decimals = {decimals} < 0 of the integer {} is not implemented (as in JAX)", x.aval()),
        );
        return Tensor::placeholder(x.aval().clone());
    }
    library_jit(
        "round",
        &[x.into()],
        |inner| {
            let x = inner[0].clone();
            let round = Primitive::Round { rounding_method: RoundingMethod::ToNearestEven };
            if !float {
                return x;
            }
            if decimals == 0 {
                return x.apply_at(round, loc);
            }
            let factor = || Operand::Literal(LitValue::from_f64(x.dtype(), 10f64.powi(decimals)));
            let scaled = bind(Primitive::Binary(BinaryOp::Mul), &[(&x).into(), factor()], x.is_weak(), loc).remove(0);
            let rounded = scaled.apply_at(round, loc);
            bind(Primitive::Binary(BinaryOp::Div), &[rounded.into(), factor()], x.is_weak(), loc).remove(0)
        },
        loc,
    )
}
