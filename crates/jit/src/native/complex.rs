//! Native steps of equations that read or make complex values (`c64`, `c128`): the
//! interpreter's rule (`remat_interp::eval_primitive`) over copies of the step's buffers,
//! so that a compiled complex program gives the interpreter's results bit for bit. The
//! copies cost a pass over each operand and result; complex programs are rare enough that
//! this is the JIT's form of them until Cranelift lowers them as pairs of float lanes.

use remat_ir::{Array, Primitive};

use super::step::Bases;

/// Runs `prim` on the step's operands and writes its results.
///
/// # Panics
/// If the interpreter refuses the equation: the lowering makes these steps only of
/// verified equations, whose dtypes the interpreter's rules define (a refusal is a bug in
/// the lowering, stopped here rather than leaving the results unwritten).
pub(super) fn run(prim: &Primitive, b: &Bases) {
    let d = b.desc;
    let args: Vec<Array> = (0..d.in_avals.len())
        .map(|i| {
            let aval = b.in_aval(i);
            Array::from_le_bytes(aval.dtype, &aval.shape, b.bytes(i)).expect("a buffer of the operand's aval")
        })
        .collect();
    let results = remat_interp::eval_primitive(prim, &args, &d.out_avals)
        .unwrap_or_else(|e| panic!("the native step of {} failed: {e}", prim.name()));
    for (j, r) in results.iter().enumerate() {
        r.write_le_bytes(b.bytes_mut(j)).expect("a result of the step's aval");
    }
}
