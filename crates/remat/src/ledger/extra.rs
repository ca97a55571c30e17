//! What recomputing one residual instead of saving it would do to the peak: the program
//! with the backward half recomputing that value (`remat_ad::recompute_in_backward`) (its recompute cone, the equations
//! [`super::LedgerRow::recompute_eqns`] counts, inside a `remat2[differentiated=True,
//! prevent_cse=True]` call placed before the value's first backward reader, as JAX's
//! partial evaluation places a checkpoint's recompute) and every other residual still
//! saved, planned by the JIT's buffer planner with the recompute kept
//! (`CseScope::WithinCheckpoints`). The difference to the ledger's peak is exact for that
//! program; it costs one buffer plan per row, so only the [`EXACT_ROWS`] largest residuals
//! get one.

use remat_ir::{Array, Jaxpr, Var};
use remat_jit::{CseScope, Options};

use crate::Error;

/// How many residuals (the largest) get their extra peak computed.
pub const EXACT_ROWS: usize = 8;

/// The planned peak of `program` with the backward half recomputing `v` (see the module
/// documentation).
pub(crate) fn peak_recomputing(
    program: &Jaxpr,
    consts: &[Array],
    num_fwd: usize,
    cone: &[usize],
    v: Var,
    options: &Options,
) -> Result<usize, Error> {
    let p = remat_ad::recompute_in_backward(program, num_fwd, cone, v)?;
    let options = Options { cse: CseScope::WithinCheckpoints, ..options.clone() };
    Ok(remat_jit::memory_plan(&p, consts, &options)?.peak_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use remat_ir::{Atom, Primitive};

    const MLP: &str = "{ lambda ; a:f32[64,8] b:f32[8,8] c:f32[8,8]. let
    e:f32[64,8] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a b
    f:f32[64,8] = tanh e
    g:f32[64,8] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] f c
    h:f32[64,8] = tanh g
    k:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] h
  in (k,) }";

    /// The program recomputing a residual verifies, computes the same values, and its
    /// backward half reads the recomputed value instead of the saved one.
    #[test]
    fn recomputing_a_residual_keeps_the_values_and_moves_the_reads() {
        let jaxpr = remat_ir::parse_jaxpr(MLP, "mlp").unwrap();
        let l = crate::ledger::explain_jaxpr(&jaxpr, &[], &[], &Options::default()).unwrap();
        let split = l.split.as_ref().unwrap();
        let (k, row) = l.rows.iter().enumerate().find(|(_, r)| r.residual.to_string().contains("tanh")).unwrap();
        let v = split.residual_atoms[k].as_var().unwrap();
        let e = row.made_by.unwrap();
        let p = remat_ad::recompute_in_backward(&l.program, split.num_fwd_eqns, &[e], v).unwrap();
        remat_ir::verify::verify(&p).unwrap();
        let args: Vec<Array> = l
            .program
            .in_avals()
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let n = a.size();
                Array::F32(
                    ndarray::ArrayD::from_shape_vec(
                        a.shape.clone(),
                        (0..n).map(|j| ((i * 7 + j) % 13) as f32 * 0.05 - 0.3).collect(),
                    )
                    .unwrap(),
                )
            })
            .collect();
        let want = remat_interp::eval_jaxpr(&l.program, &[], &args).unwrap();
        let got = remat_interp::eval_jaxpr(&p, &[], &args).unwrap();
        assert_eq!(got, want);
        // One more equation: the call, before the first backward reader.
        assert_eq!(p.eqns.len(), l.program.eqns.len() + 1);
        let calls: Vec<usize> = (0..p.eqns.len())
            .filter(|&i| matches!(p.eqns[i].primitive, Primitive::Remat2 { differentiated: true, .. }))
            .collect();
        assert_eq!(calls.len(), 1);
        assert!(calls[0] >= split.num_fwd_eqns);
        // The saved value is read by no backward equation any more.
        let reads = |j: &Jaxpr, x: Var, from: usize| j.eqns[from..].iter().any(|q| q.invars.contains(&Atom::Var(x)));
        assert!(reads(&l.program, v, split.num_fwd_eqns));
        // The forward copy of `v` (equations before the call are copied in order).
        let v_copy = p.eqns[e].outvars[0];
        assert_eq!(p.aval(v_copy), l.program.aval(v));
        assert!(!reads(&p, v_copy, calls[0]));
        assert!(reads(&p, p.eqns[calls[0]].outvars[0], calls[0] + 1));
        assert!(row.extra_peak_bytes.is_some(), "{}", l.text());
    }
}
