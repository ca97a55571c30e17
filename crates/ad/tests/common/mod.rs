//! The autodiff tests' own helper: a vjp's two halves evaluated by the interpreter. Cases,
//! arrays and tolerances come from `remat-testkit`.

use remat_interp::eval_jaxpr;
use remat_ir::Array;

/// Outputs and gradients of the vjp `v` (forward then backward half, evaluated by the
/// interpreter).
pub fn vjp_values(v: &remat_ad::Vjp, args: &[Array], cts: &[Array]) -> Result<(Vec<Array>, Vec<Array>), String> {
    let fwd = eval_jaxpr(&v.fwd, &[], args).map_err(|e| format!("fwd: {e}"))?;
    let (outs, res) = fwd.split_at(v.num_outs);
    let mut bwd_args = res.to_vec();
    bwd_args.extend(cts.iter().cloned());
    let grads = eval_jaxpr(&v.bwd, &[], &bwd_args).map_err(|e| format!("bwd: {e}"))?;
    Ok((outs.to_vec(), grads))
}
