//! Native steps of equations that compute on complex values (`c64`, `c128`): the
//! arithmetic, the parts, conversions, `fft`, sums and products, and `dot_general`, by
//! `remat_math::complex` over copies of the step's buffers, the functions the interpreter
//! evaluates them with, so that a compiled complex program gives the interpreter's results
//! bit for bit. The copies cost a pass over each operand and result. (The lowering moves
//! complex elements itself, as the bits of their parts: reshapes, slices, selects, pads and
//! the other structural equations are not steps of this file; `lower::ops::complex_route`
//! says which equations come here.)

use remat_ir::{Array, Primitive};
use remat_math::arrays::ProductLayout;
use remat_math::complex;

use super::step::Bases;

/// Runs `prim` on the step's operands and writes its results.
///
/// # Panics
/// If `remat_math::complex` refuses the equation, or `prim` is not one of the equations
/// `lower::ops::complex_route` sends here: the lowering makes these steps only of verified
/// equations on complex values, which those functions define (a refusal is a bug in the
/// lowering, stopped here rather than leaving the results unwritten).
pub(super) fn run(prim: &Primitive, b: &Bases) {
    let d = b.desc;
    let args: Vec<Array> = (0..d.in_avals.len())
        .map(|i| {
            let aval = b.in_aval(i);
            Array::from_le_bytes(aval.dtype, &aval.shape, b.bytes(i)).expect("a buffer of the operand's aval")
        })
        .collect();
    let result = eval(prim, &args).unwrap_or_else(|e| panic!("the native step of {} failed: {e}", prim.name()));
    result.write_le_bytes(b.bytes_mut(0)).expect("a result of the step's aval");
}

/// The equation's one result, by `remat_math::complex`.
fn eval(prim: &Primitive, args: &[Array]) -> Result<Array, String> {
    let arg = |i: usize| args.get(i).ok_or_else(|| format!("expected operand {i}, got {} operands", args.len()));
    match prim {
        Primitive::Unary(op) => complex::unary(*op, arg(0)?),
        Primitive::Binary(op) => complex::binary(*op, arg(0)?, arg(1)?),
        Primitive::Compare(op) => complex::compare(*op, arg(0)?, arg(1)?),
        Primitive::IntegerPow { y } => complex::integer_pow(*y, arg(0)?),
        Primitive::Complex => complex::complex(arg(0)?, arg(1)?),
        Primitive::Real => complex::part(false, arg(0)?),
        Primitive::Imag => complex::part(true, arg(0)?),
        Primitive::Conj { .. } => complex::conj(arg(0)?),
        Primitive::ConvertElementType { new_dtype, .. } => complex::convert(*new_dtype, arg(0)?),
        Primitive::Fft { fft_type, fft_lengths } => complex::fft(*fft_type, fft_lengths, arg(0)?),
        Primitive::Reduce { op, axes } => {
            let mut sorted = axes.clone();
            sorted.sort_unstable();
            complex::reduce(*op, &sorted, arg(0)?)
        }
        Primitive::DotGeneral { dimension_numbers, preferred_element_type, .. } => {
            let (lhs, rhs) = (arg(0)?, arg(1)?);
            let layout = ProductLayout::new(dimension_numbers, lhs, rhs)?;
            match preferred_element_type {
                Some(t) if *t != lhs.dtype() || *t != rhs.dtype() => {
                    complex::dot_general(&layout, &complex::convert(*t, lhs)?, &complex::convert(*t, rhs)?)
                }
                _ => complex::dot_general(&layout, lhs, rhs),
            }
        }
        other => Err(format!("{} is not a native step on complex values", other.name())),
    }
}
