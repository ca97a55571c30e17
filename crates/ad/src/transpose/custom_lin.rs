//! The transpose rule of `custom_lin`, the linear equation a `custom_vjp_call` with
//! registered rules leaves in the tangent program ([`crate::custom::CUSTOM_LIN`]): it
//! inlines the user's `bwd` rule, looked up in `crate::custom`'s registry.

use remat_ir::{Atom, Aval};

use super::Operand;
use crate::builder::{inline_jaxpr, Builder};
use crate::custom::custom_vjp_rule;
use crate::AdError;

/// The transpose of a `custom_lin` equation: `bwd` inlined on the residuals (its first
/// `num_consts` operands, forward values) and the output cotangents (zeros instantiated):
/// one cotangent per tangent operand.
pub(crate) fn transpose_custom_lin(
    b: &mut Builder,
    fwd: &str,
    bwd: &str,
    num_consts: usize,
    ins: &[Operand],
    ct_outs: &[Option<Atom>],
) -> Result<Vec<Option<Atom>>, AdError> {
    let rule = custom_vjp_rule(fwd, bwd)?
        .ok_or_else(|| AdError::Invalid(format!("custom_lin: no rules are registered as `{fwd}`/`{bwd}`")))?;
    let mut res = Vec::new();
    for op in &ins[..num_consts] {
        match op {
            Operand::Value(a) => res.push(*a),
            Operand::Linear(_) => {
                return Err(AdError::Internal("custom_lin: a residual operand is linear".into()));
            }
        }
    }
    let avals: Vec<Aval> = ins[num_consts..]
        .iter()
        .map(|op| match op {
            Operand::Value(a) => b.aval(a),
            Operand::Linear(aval) => aval.clone(),
        })
        .collect();
    let j = rule.vjp_jaxprs(&avals).map_err(|m| AdError::Invalid(format!("custom_lin `{fwd}`/`{bwd}`: {m}")))?;
    let out_avals = j.fwd.jaxpr.out_avals();
    let mut args = res;
    for (ct, aval) in ct_outs.iter().zip(&out_avals) {
        args.push(match ct {
            Some(a) => *a,
            None => b.zeros(aval)?,
        });
    }
    if j.bwd.jaxpr.outvars.len() != avals.len() {
        return Err(AdError::Invalid(format!(
            "custom_vjp rule `{bwd}` returns {} cotangents for {} arguments",
            j.bwd.jaxpr.outvars.len(),
            avals.len()
        )));
    }
    for (i, (got, want)) in j.bwd.jaxpr.out_avals().iter().zip(&avals).enumerate() {
        if !got.same_type(want) {
            return Err(AdError::Invalid(format!(
                "custom_vjp rule `{bwd}` returns {got} as the cotangent of argument {i}, which is {want}"
            )));
        }
    }
    let grads = inline_jaxpr(b, &j.bwd.jaxpr, &[], &args);
    let mut out = vec![None; num_consts];
    out.extend(grads.into_iter().map(Some));
    Ok(out)
}
