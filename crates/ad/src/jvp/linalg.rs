//! The jvp rules of `cholesky` and `triangular_solve`, each emitting the equations of JAX
//! 0.10.2's rule (`jax/_src/lax/linalg.py`) in its order: `cholesky`'s primal is the lower
//! triangle of the factor (`_tril`: an `iota`/`ge` mask and a `select_n` against zeros), its
//! tangent `L · phi(L⁻¹ Σ̇ L⁻ᵀ)` (two triangular solves, `phi` halving the diagonal by
//! dividing by `1 + eye`, a `dot_general` at `Precision.HIGHEST`); `triangular_solve` is
//! linear in `b` and takes `a`'s tangent through `_triangular_solve_jvp_rule_a`, ordering
//! the product and the solve by the cheaper side.

use remat_ir::{Atom, CompareOp, DType, DotDimensionNumbers, Eqn, Jaxpr, Precision, Primitive, TriangularSolve};

use super::{emit_primal, JvpOut, Tangent};
use crate::builder::{lit, Builder};
use crate::AdError;

/// `iota(0) + k OP iota(1)` over `(n, m)`: `lax._tri(bool, (n, m), k)` with `ge`, the mask
/// of `lax._eye` with `eq`.
fn diagonal_mask(b: &mut Builder, n: usize, m: usize, k: i64, op: CompareOp) -> Result<Atom, AdError> {
    let i = b.bind1(Primitive::Iota { dtype: DType::I32, shape: vec![n, m], dimension: 0 }, vec![])?;
    let i = b.add(i, lit(DType::I32, k as f64))?;
    let j = b.bind1(Primitive::Iota { dtype: DType::I32, shape: vec![n, m], dimension: 1 }, vec![])?;
    b.compare(op, i, j)
}

/// `lax._tri(bool, (n, m), k)`: `iota(0) + k >= iota(1)`.
fn tri(b: &mut Builder, n: usize, m: usize, k: i64) -> Result<Atom, AdError> {
    diagonal_mask(b, n, m, k, CompareOp::Ge)
}

/// The mask of `tri` broadcast over `x`'s batch axes (`lax.broadcast`).
fn batch_mask(b: &mut Builder, mask: Atom, shape: &[usize]) -> Result<Atom, AdError> {
    let nb = shape.len() - 2;
    b.broadcast_in_dim(mask, shape, &[nb, nb + 1])
}

/// `_tril(x, k)`: `x` below diagonal `k`, zeros above.
pub(crate) fn tril(b: &mut Builder, x: Atom, k: i64) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let mask = tri(b, aval.shape[r - 2], aval.shape[r - 1], k)?;
    let mask = batch_mask(b, mask, &aval.shape)?;
    let zeros = b.zeros(&aval)?;
    b.select_n(mask, vec![zeros, x])
}

/// `_triu(x, k)`: `x` above diagonal `k`, zeros below.
fn triu(b: &mut Builder, x: Atom, k: i64) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let mask = tri(b, aval.shape[r - 2], aval.shape[r - 1], k - 1)?;
    let mask = batch_mask(b, mask, &aval.shape)?;
    let zeros = b.zeros(&aval)?;
    b.select_n(mask, vec![x, zeros])
}

/// `lax.batch_matmul(x, y, precision=HIGHEST)` (`lax.dot` for matrices, the same equation).
fn matmul_highest(b: &mut Builder, x: Atom, y: Atom) -> Result<Atom, AdError> {
    let r = b.aval(&x).rank();
    let batch: Vec<usize> = (0..r - 2).collect();
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![r - 1],
        rhs_contracting: vec![r - 2],
        lhs_batch: batch.clone(),
        rhs_batch: batch,
    };
    b.dot_general(x, y, dn, None, Some((Precision::Highest, Precision::Highest)))
}

/// `lax.linalg.triangular_solve`, whose wrapper keeps `conjugate_a` only for complex `a`.
pub(crate) fn solve(b: &mut Builder, t: TriangularSolve, a: Atom, rhs: Atom) -> Result<Atom, AdError> {
    let t = TriangularSolve { conjugate_a: t.conjugate_a && b.aval(&a).dtype.is_complex(), ..t };
    b.bind1(Primitive::TriangularSolve(t), vec![a, rhs])
}

/// JAX's `_cholesky_jvp_rule`.
pub(super) fn cholesky(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let factor = emit_primal(b, old, eqn, primals)[0];
    let l = tril(b, factor, 0)?;
    let Tangent::Nz(sigma_dot) = tangents[0] else { return Ok((vec![l], vec![Tangent::Zero])) };
    let aval = b.aval(&l);
    let r = aval.rank();
    let n = aval.shape[r - 1];
    let right =
        TriangularSolve { left_side: false, lower: true, transpose_a: true, conjugate_a: true, unit_diagonal: false };
    let tmp = solve(b, right, l, sigma_dot)?;
    let left =
        TriangularSolve { left_side: true, lower: true, transpose_a: false, conjugate_a: false, unit_diagonal: false };
    let inner = solve(b, left, l, tmp)?;
    // phi(X) = tril(X) / (1 + eye), the divisor expanded over the batch axes.
    let lower = tril(b, inner, 0)?;
    let eye = diagonal_mask(b, n, n, 0, CompareOp::Eq)?;
    let eye = b.bind1(Primitive::ConvertElementType { new_dtype: aval.dtype, weak_type: false }, vec![eye])?;
    let divisor = b.add(lit(aval.dtype, 1.0), eye)?;
    // `lax.expand_dims` over the batch axes: `[1, ..., n, n]`, which `div` broadcasts.
    let divisor = if r > 2 {
        let mut shape = vec![1; r - 2];
        shape.extend([n, n]);
        b.broadcast_in_dim(divisor, &shape, &[r - 2, r - 1])?
    } else {
        divisor
    };
    let phi = b.div(lower, divisor)?;
    let l_dot = matmul_highest(b, l, phi)?;
    Ok((vec![l], vec![Tangent::Nz(l_dot)]))
}

/// JAX's `triangular_solve` jvp: `defjvp2` of `_triangular_solve_jvp_rule_a` and, for `b`,
/// the primitive itself on the tangent (linear), summed.
pub(super) fn triangular_solve(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    t: TriangularSolve,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let ans = emit_primal(b, old, eqn, primals)[0];
    let a = primals[0];
    let mut acc: Option<Atom> = None;
    if let Tangent::Nz(g_a) = tangents[0] {
        let ans_aval = b.aval(&ans);
        let r = ans_aval.rank();
        let (m, n) = (ans_aval.shape[r - 2], ans_aval.shape[r - 1]);
        let k = i64::from(t.unit_diagonal);
        let g = if t.lower { tril(b, g_a, -k)? } else { triu(b, g_a, k)? };
        let g = b.neg(g)?;
        let g = if t.transpose_a {
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            b.transpose(g, &perm)?
        } else {
            g
        };
        // `g.conj()` on a real array is the array itself.
        let d = if t.left_side {
            if m > n {
                let p = matmul_highest(b, g, ans)?;
                solve(b, t, a, p)?
            } else {
                let s = solve(b, t, a, g)?;
                matmul_highest(b, s, ans)?
            }
        } else if m < n {
            let p = matmul_highest(b, ans, g)?;
            solve(b, t, a, p)?
        } else {
            let s = solve(b, t, a, g)?;
            matmul_highest(b, ans, s)?
        };
        acc = Some(d);
    }
    if let Tangent::Nz(g_b) = tangents[1] {
        let d = solve(b, t, a, g_b)?;
        acc = Some(match acc {
            None => d,
            Some(x) => b.add_any(x, d)?,
        });
    }
    Ok((vec![ans], vec![acc.map_or(Tangent::Zero, Tangent::Nz)]))
}
