//! Binomial checkpointing of a `scan` across its iterations, as a program transformation:
//! a top-level `scan` of length `n = f_1 * f_2 * ... * f_k` becomes `k` nested scans of
//! lengths `f_1, ..., f_k`, each level's body a checkpoint that saves nothing
//! (`remat2[policy=nothing_saveable]`). Differentiated, the forward pass keeps only the
//! carries at the start of each segment of each level (`f_1 + ... + f_k` carries, where
//! stacking every iteration's residuals keeps `n` sets of them), and the backward pass
//! recomputes each segment once per level above it: with `k` levels, about `k` extra
//! forward passes. Two levels are the classic `sqrt(n)` scheme; `k = log2 n` levels of 2
//! are Revolve's `O(log n)` memory for `O(n log n)` recompute.
//!
//! This is how a JAX user writes it by hand (a scan of checkpointed scans); the planner
//! proposes the nestings and measures them like any other plan (`rewrites.rs`), so a budget
//! below what stacking allows chooses one automatically.

use std::sync::Arc;

use remat_ad::Builder;
use remat_ir::{Atom, ClosedJaxpr, Jaxpr, Policy, Primitive};

use crate::PlanError;

/// `f` with its top-level equation `at`, a `scan` whose length is the product of
/// `factors` (at least two, each at least 2), run as nested scans of those lengths,
/// outermost first.
pub fn nest_scan(f: &Jaxpr, at: usize, factors: &[usize]) -> Result<Jaxpr, PlanError> {
    let eqn = f.eqns.get(at).ok_or_else(|| PlanError::Invalid(format!("no equation {at} to nest")))?;
    let Primitive::Scan { length, .. } = &eqn.primitive else {
        return Err(PlanError::Invalid(format!("equation {at} is `{}`, not a scan", eqn.primitive.name())));
    };
    if factors.len() < 2 || factors.iter().any(|&k| k < 2) || factors.iter().product::<usize>() != *length {
        return Err(PlanError::Invalid(format!("cannot nest a scan of length {length} as {factors:?}")));
    }
    let (mut b, mut map) = Builder::with_signature_of(f);
    for (i, e) in f.eqns.iter().enumerate() {
        if i != at {
            b.copy_eqn(f, e, &mut map);
            continue;
        }
        let ins = map.get_all(&e.invars);
        let old = b.set_source(Some(e.source.clone()));
        let outs = nested(&mut b, &e.primitive, &ins, factors)?;
        b.set_source(old);
        for (&v, o) in e.outvars.iter().zip(outs) {
            map.set(v, o);
        }
    }
    let outs = map.get_all(&f.outvars);
    Ok(b.finish(outs))
}

/// Emits `scan` (its length the product of `factors`) on `ins` as nested scans.
fn nested(b: &mut Builder, scan: &Primitive, ins: &[Atom], factors: &[usize]) -> Result<Vec<Atom>, PlanError> {
    let Primitive::Scan { jaxpr, reverse, num_consts, num_carry, unroll, .. } = scan else {
        unreachable!("nested is called on scans")
    };
    let (outer, inner) = (factors[0], factors[1..].iter().product::<usize>());
    if factors.len() == 1 {
        let prim = Primitive::Scan {
            jaxpr: jaxpr.clone(),
            length: outer,
            reverse: *reverse,
            num_consts: *num_consts,
            num_carry: *num_carry,
            unroll: *unroll,
        };
        return Ok(b.bind(prim, ins.to_vec())?.into_iter().map(Atom::Var).collect());
    }
    let fixed = num_consts + num_carry;
    // The scanned-over inputs, `[outer * inner, ...]` as `[outer, inner, ...]`.
    let mut args = ins[..fixed].to_vec();
    for x in &ins[fixed..] {
        let shape = b.aval(x).shape.clone();
        let split: Vec<usize> = [outer, inner].into_iter().chain(shape[1..].iter().copied()).collect();
        args.push(b.reshape(*x, &split)?);
    }
    // One outer iteration: a checkpoint that saves nothing around the inner scans, over
    // the consts, the carries and one `[inner, ...]` slice of each input.
    let segment_avals: Vec<_> = args
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let aval = b.aval(a);
            match k < fixed {
                true => aval,
                false => remat_ir::Aval::new(aval.dtype, aval.shape[1..].to_vec()),
            }
        })
        .collect();
    let segment = {
        let mut s = Builder::new();
        let vars: Vec<Atom> = segment_avals.iter().map(|a| Atom::Var(s.invar(a.clone()))).collect();
        let outs = nested(&mut s, scan, &vars, &factors[1..])?;
        s.finish(outs)
    };
    let body = {
        let mut o = Builder::new();
        let vars: Vec<Atom> = segment_avals.iter().map(|a| Atom::Var(o.invar(a.clone()))).collect();
        let prim = Primitive::Remat2 {
            jaxpr: Arc::new(segment),
            prevent_cse: true,
            differentiated: false,
            policy: Some(Policy::NothingSaveable),
        };
        let outs = o.bind(prim, vars)?.into_iter().map(Atom::Var).collect();
        o.finish(outs)
    };
    let prim = Primitive::Scan {
        jaxpr: ClosedJaxpr::new(Arc::new(body)),
        length: outer,
        reverse: *reverse,
        num_consts: *num_consts,
        num_carry: *num_carry,
        unroll: 1,
    };
    let outs: Vec<Atom> = b.bind(prim, args)?.into_iter().map(Atom::Var).collect();
    // The stacked outputs, `[outer, inner, ...]` back to `[outer * inner, ...]`.
    let mut result = outs[..*num_carry].to_vec();
    for y in &outs[*num_carry..] {
        let shape = b.aval(y).shape.clone();
        let joined: Vec<usize> = [shape[0] * shape[1]].into_iter().chain(shape[2..].iter().copied()).collect();
        result.push(b.reshape(*y, &joined)?);
    }
    Ok(result)
}

/// Ways to nest a scan of length `n`: two levels (the divisor pair nearest `sqrt n`) up to
/// as many levels as `n` has prime factors (Revolve's limit), each split into near-equal
/// factors, deepest last.
pub fn nestings(n: usize) -> Vec<Vec<usize>> {
    let mut primes = Vec::new();
    let mut m = n;
    let mut p = 2;
    while p * p <= m {
        while m.is_multiple_of(p) {
            primes.push(p);
            m /= p;
        }
        p += 1;
    }
    if m > 1 {
        primes.push(m);
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    for levels in 2..=primes.len().min(8) {
        // Deal the prime factors, largest first, to the level with the smallest product.
        let mut f = vec![1usize; levels];
        for &q in primes.iter().rev() {
            let k = (0..levels).min_by_key(|&k| (f[k], k)).unwrap();
            f[k] *= q;
        }
        f.sort_unstable_by(|a, b| b.cmp(a));
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::nestings;

    #[test]
    fn nestings_split_into_near_equal_factors() {
        assert_eq!(
            nestings(256),
            vec![
                vec![16, 16],
                vec![8, 8, 4],
                vec![4, 4, 4, 4],
                vec![4, 4, 4, 2, 2],
                vec![4, 4, 2, 2, 2, 2],
                vec![4, 2, 2, 2, 2, 2, 2],
                vec![2; 8]
            ]
        );
        assert_eq!(nestings(12), vec![vec![4, 3], vec![3, 2, 2]]);
        assert!(nestings(7).is_empty());
        assert_eq!(nestings(64)[0], vec![8, 8]);
    }
}
