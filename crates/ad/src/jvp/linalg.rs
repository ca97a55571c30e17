//! The jvp rules of `cholesky` and `triangular_solve`, each emitting the equations of JAX
//! 0.10.2's rule (`jax/_src/lax/linalg.py`) in its order: `cholesky`'s primal is the lower
//! triangle of the factor (`_tril`: an `iota`/`ge` mask and a `select_n` against zeros), its
//! tangent `L · phi(L⁻¹ Σ̇ L⁻ᵀ)` (two triangular solves, `phi` halving the diagonal by
//! dividing by `1 + eye`, a `dot_general` at `Precision.HIGHEST`); `triangular_solve` is
//! linear in `b` and takes `a`'s tangent through `_triangular_solve_jvp_rule_a`, ordering
//! the product and the solve by the cheaper side. `lu`'s tangent is JAX's `_lu_jvp_inner`
//! (De Hoog, Anderssen and Lukas) under `vmap` over the batch axes: the masks and identities
//! are built per matrix and broadcast over the batch, one `vmap` level at a time, as
//! JAX's batching rules emit them. `qr`'s is JAX's `qr_jvp_rule` and `_thin_qr_jvp` for a
//! tall or square matrix (`full_matrices` only when square) and for a wide one; the
//! pivoted and the full tall cases are refused. `eigh`'s is `_eigh_jvp_rule`: the primal
//! is a new `eigh` of the symmetrized operand, the tangent classic perturbation theory
//! (`Fmat`, three `Precision.HIGHEST` products, the diagonal by a `gather`). `svd`'s is
//! `_svd_jvp_rule`: a thin `svd` with vectors, `dS = Uᵀ dA V`, the singular values' tangent
//! its diagonal, the vectors' through `F` and the inverse singular values on a diagonal
//! built by a `scatter`, with the projections a tall or wide matrix adds.
//! `tridiagonal_solve`'s is `_tridiagonal_solve_jvp_rule`: the tangent of `b` less the
//! diagonals' tangents times the answer (`_tridiagonal_product`'s two `scatter-add`s),
//! solved by the primitive again.

use remat_ir::{
    Atom, Aval, CompareOp, DType, DotDimensionNumbers, Eigh, Eqn, GatherDimensionNumbers, GatherScatterMode, Jaxpr,
    Precision, Primitive, Qr, ScatterDimensionNumbers, ScatterOp, Svd, TriangularSolve,
};

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

/// An `n x n` matrix `m` as `lax.expand_dims` puts it over the batch axes of a rank-`rank`
/// operand: `[1, ..., n, n]`, which elementwise ops then broadcast (`m` itself at rank 2).
fn over_batch_axes(b: &mut Builder, m: Atom, rank: usize) -> Result<Atom, AdError> {
    if rank <= 2 {
        return Ok(m);
    }
    let n = b.aval(&m).shape[0];
    let mut shape = vec![1; rank - 2];
    shape.extend([n, n]);
    b.broadcast_in_dim(m, &shape, &[rank - 2, rank - 1])
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
    let divisor = over_batch_axes(b, divisor, r)?;
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

/// `lax._eye(dtype, (n, n))`: the `eq` mask converted.
fn eye(b: &mut Builder, dtype: DType, n: usize) -> Result<Atom, AdError> {
    let mask = diagonal_mask(b, n, n, 0, CompareOp::Eq)?;
    b.bind1(Primitive::ConvertElementType { new_dtype: dtype, weak_type: false }, vec![mask])
}

/// An operand of a per-matrix rule run under `vmap` over `batch` axes that is not batched
/// (a mask, zeros, an identity), as JAX's batching rules broadcast it to meet a batched
/// one: one leading axis per `vmap` level, innermost first, of the batch size (`full`:
/// `select_n`'s rule) or of size 1 (an elementwise binary's rule).
fn unbatched_to(b: &mut Builder, x: Atom, batch: &[usize], full: bool) -> Result<Atom, AdError> {
    let mut x = x;
    for &size in batch.iter().rev() {
        let aval = b.aval(&x);
        let mut shape = vec![if full { size } else { 1 }];
        shape.extend(&aval.shape);
        let dims: Vec<usize> = (1..=aval.rank()).collect();
        x = b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, vec![x])?;
    }
    Ok(x)
}

/// `_tril(x, k)` (`lower`) or `_triu(x, k)` of the matrices of `x` under `vmap` over its
/// first `nb` axes: the mask and zeros per matrix, broadcast by `select_n`'s batching rule.
fn vmapped_triangle(b: &mut Builder, x: Atom, nb: usize, k: i64, lower: bool) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let (rows, cols) = (aval.shape[nb], aval.shape[nb + 1]);
    let mask = tri(b, rows, cols, if lower { k } else { k - 1 })?;
    let zeros = b.zeros(&Aval::new(aval.dtype, vec![rows, cols]))?;
    let (mut mask, mut zeros) = (mask, zeros);
    for level in (0..nb).rev() {
        let batch = &aval.shape[level..level + 1];
        mask = unbatched_to(b, mask, batch, true)?;
        zeros = unbatched_to(b, zeros, batch, true)?;
    }
    if lower {
        b.select_n(mask, vec![zeros, x])
    } else {
        b.select_n(mask, vec![x, zeros])
    }
}

/// `lax.pad(x, 0, config)` of the matrices of `x` (its first `nb` axes a batch, unpadded).
fn pad_matrix(b: &mut Builder, x: Atom, nb: usize, rows: (i64, i64), cols: (i64, i64)) -> Result<Atom, AdError> {
    let dtype = b.aval(&x).dtype;
    let mut padding_config = vec![(0, 0, 0); nb];
    padding_config.push((rows.0, rows.1, 0));
    padding_config.push((cols.0, cols.1, 0));
    b.bind1(Primitive::Pad { padding_config }, vec![x, lit(dtype, 0.0)])
}

/// `x[..., :rows, :cols]`, skipping the whole array as `jnp` indexing does.
fn leading_block(b: &mut Builder, x: Atom, rows: usize, cols: usize) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    if aval.shape[r - 2] == rows && aval.shape[r - 1] == cols {
        return Ok(x);
    }
    let mut limit_indices = aval.shape.clone();
    limit_indices[r - 2] = rows;
    limit_indices[r - 1] = cols;
    b.bind1(Primitive::Slice { start_indices: vec![0; r], limit_indices, strides: None }, vec![x])
}

/// `x[permutation]` on each matrix of `x` (`[..., m, n]`, rows gathered by `perm`,
/// `[..., m]`): `jnp` indexing's negative-index fix-up and a `gather`, with JAX's gather
/// batching rule's batching axes over the leading ones.
fn take_rows(b: &mut Builder, x: Atom, perm: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let nb = r - 2;
    let (m, n) = (aval.shape[r - 2], aval.shape[r - 1]);
    let neg = b.compare(CompareOp::Lt, perm, lit(DType::I32, 0.0))?;
    let wrapped = b.add(perm, lit(DType::I32, m as f64))?;
    let idx = b.select_n(neg, vec![perm, wrapped])?;
    let mut idx_shape = aval.shape[..nb].to_vec();
    idx_shape.extend([m, 1]);
    let dims: Vec<usize> = (0..=nb).collect();
    let idx = b.bind1(Primitive::BroadcastInDim { shape: idx_shape, broadcast_dimensions: dims }, vec![idx])?;
    let batch: Vec<usize> = (0..nb).collect();
    let mut slice_sizes = vec![1; nb + 1];
    slice_sizes.push(n);
    let prim = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: vec![nb + 1],
            collapsed_slice_dims: vec![nb],
            start_index_map: vec![nb],
            operand_batching_dims: batch.clone(),
            start_indices_batching_dims: batch,
        },
        fill_value: None,
        indices_are_sorted: false,
        mode: GatherScatterMode::PromiseInBounds,
        slice_sizes,
        unique_indices: false,
    };
    b.bind1(prim, vec![x, idx])
}

/// JAX's `_lu_jvp_rule`: the primal `lu`, and `_lu_jvp_inner` on its factors, the tangent
/// and the permutation (under `vmap` over the batch axes); the pivots and the permutation
/// have no tangent.
pub(super) fn lu(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let outs = emit_primal(b, old, eqn, primals);
    let Tangent::Nz(a_dot) = tangents[0] else {
        return Ok((outs, vec![Tangent::Zero; 3]));
    };
    let (lu, permutation) = (outs[0], outs[2]);
    let aval = b.aval(&lu);
    let r = aval.rank();
    let nb = r - 2;
    let batch = aval.shape[..nb].to_vec();
    let (m, n) = (aval.shape[r - 2], aval.shape[r - 1]);
    let k = m.min(n);
    let dtype = aval.dtype;
    // l = pad(_tril(lu[:, :k], -1), (0, m - k) columns) + eye(m).
    let lk = leading_block(b, lu, m, k)?;
    let l = vmapped_triangle(b, lk, nb, -1, true)?;
    let l = pad_matrix(b, l, nb, (0, 0), (0, (m - k) as i64))?;
    let eye_m = eye(b, dtype, m)?;
    let eye_m = unbatched_to(b, eye_m, &batch, false)?;
    let l = b.add(l, eye_m)?;
    // u = pad(_triu(lu[:k, :]), (0, n - k) rows) + pad(eye(n - k), (k, 0) both).
    let u_eye = eye(b, dtype, n - k)?;
    let u_eye = pad_matrix(b, u_eye, 0, (k as i64, 0), (k as i64, 0))?;
    let uk = leading_block(b, lu, k, n)?;
    let u = vmapped_triangle(b, uk, nb, 0, false)?;
    let u = pad_matrix(b, u, nb, (0, (n - k) as i64), (0, 0))?;
    let u_eye = unbatched_to(b, u_eye, &batch, false)?;
    let u = b.add(u, u_eye)?;
    let taken = take_rows(b, a_dot, permutation)?;
    let left =
        TriangularSolve { left_side: true, lower: true, transpose_a: false, conjugate_a: false, unit_diagonal: true };
    let la = solve(b, left, l, taken)?;
    let right = TriangularSolve {
        left_side: false,
        lower: false,
        transpose_a: false,
        conjugate_a: false,
        unit_diagonal: false,
    };
    let lau = solve(b, right, u, la)?;
    let lower = vmapped_triangle(b, lau, nb, -1, true)?;
    let l_dot = matmul_highest(b, l, lower)?;
    let upper = vmapped_triangle(b, lau, nb, 0, false)?;
    let u_dot = matmul_highest(b, upper, u)?;
    let lu_dot = b.add(l_dot, u_dot)?;
    Ok((outs, vec![Tangent::Nz(lu_dot), Tangent::Zero, Tangent::Zero]))
}

/// `_H(x)` of a real `x`: its matrices transposed (`jnp.swapaxes(x, -1, -2)`).
fn transpose_matrices(b: &mut Builder, x: Atom) -> Result<Atom, AdError> {
    let r = b.aval(&x).rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    b.transpose(x, &perm)
}

/// `x @ y` (`jnp.matmul`) of two arrays of matrices with the same batch axes: one
/// `dot_general` with the batch axes paired, in the operands' dtype.
fn matmul(b: &mut Builder, x: Atom, y: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let batch: Vec<usize> = (0..r - 2).collect();
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![r - 1],
        rhs_contracting: vec![r - 2],
        lhs_batch: batch.clone(),
        rhs_batch: batch,
    };
    b.dot_general(x, y, dn, Some(aval.dtype), None)
}

/// `x[..., rows, cols]` for static ranges of the last two axes (`slice`), skipping the
/// whole array as `jnp` indexing does.
fn block(
    b: &mut Builder,
    x: Atom,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    if rows == (0..aval.shape[r - 2]) && cols == (0..aval.shape[r - 1]) {
        return Ok(x);
    }
    let mut start_indices = vec![0; r];
    let mut limit_indices = aval.shape.clone();
    (start_indices[r - 2], limit_indices[r - 2]) = (rows.start, rows.end);
    (start_indices[r - 1], limit_indices[r - 1]) = (cols.start, cols.end);
    b.bind1(Primitive::Slice { start_indices, limit_indices, strides: None }, vec![x])
}

/// JAX's `_thin_qr_jvp(q, r, dx)` for real matrices: `(dq, dr)`.
fn thin_qr_jvp(b: &mut Builder, q: Atom, r: Atom, dx: Atom) -> Result<(Atom, Atom), AdError> {
    let right = TriangularSolve {
        left_side: false,
        lower: false,
        transpose_a: false,
        conjugate_a: false,
        unit_diagonal: false,
    };
    let dx_rinv = solve(b, right, r, dx)?;
    let qt = transpose_matrices(b, q)?;
    let qt_dx_rinv = matmul(b, qt, dx_rinv)?;
    let lower = tril(b, qt_dx_rinv, -1)?;
    let lower_t = transpose_matrices(b, lower)?;
    let d_o = b.sub(lower, lower_t)?;
    // The complex correction `I * (A - real(A))`, emitted for real `A` too.
    let aval = b.aval(&r);
    let rank = aval.rank();
    let n = aval.shape[rank - 1];
    let eye_n = eye(b, aval.dtype, n)?;
    let eye_n = over_batch_axes(b, eye_n, rank)?;
    let imag = b.sub(qt_dx_rinv, qt_dx_rinv)?;
    let correction = b.mul(eye_n, imag)?;
    let d_o = b.add(d_o, correction)?;
    let inner = b.sub(d_o, qt_dx_rinv)?;
    let dq = matmul(b, q, inner)?;
    let dq = b.add(dq, dx_rinv)?;
    let left = b.sub(qt_dx_rinv, d_o)?;
    let dr = matmul(b, left, r)?;
    Ok((dq, dr))
}

/// JAX's `qr_jvp_rule`.
pub(super) fn qr(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    params: Qr,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let outs = emit_primal(b, old, eqn, primals);
    let Tangent::Nz(dx) = tangents[0] else {
        let n = outs.len();
        return Ok((outs, vec![Tangent::Zero; n]));
    };
    if params.pivoting {
        return Err(AdError::Invalid("qr: the jvp of a QR with pivoting=True is not supported yet".into()));
    }
    let (q, r) = (outs[0], outs[1]);
    let x = primals[0];
    let aval = b.aval(&x);
    let rank = aval.rank();
    let (m, n) = (aval.shape[rank - 2], aval.shape[rank - 1]);
    let (dq, dr) = if m < n {
        let x2 = block(b, x, 0..m, m..n)?;
        let dx1 = block(b, dx, 0..m, 0..m)?;
        let dx2 = block(b, dx, 0..m, m..n)?;
        let r1 = block(b, r, 0..m, 0..m)?;
        let (dq, dr1) = thin_qr_jvp(b, q, r1, dx1)?;
        let dqt = transpose_matrices(b, dq)?;
        let a = matmul(b, dqt, x2)?;
        let qt = transpose_matrices(b, q)?;
        let c = matmul(b, qt, dx2)?;
        let dr2 = b.add(a, c)?;
        let dr = b.bind1(Primitive::Concatenate { dimension: rank - 1 }, vec![dr1, dr2])?;
        (dq, dr)
    } else {
        if params.full_matrices && m > n {
            return Err(AdError::Invalid(
                "qr: the jvp of a tall QR with full_matrices=True is not supported yet".into(),
            ));
        }
        thin_qr_jvp(b, q, r, dx)?
    };
    Ok((outs, vec![Tangent::Nz(dq), Tangent::Nz(dr)]))
}

/// `symmetrize(x)`: `(x + _H(x)) / 2`.
fn symmetrize(b: &mut Builder, x: Atom) -> Result<Atom, AdError> {
    let dtype = b.aval(&x).dtype;
    let xt = transpose_matrices(b, x)?;
    let sum = b.add(x, xt)?;
    b.div(sum, lit(dtype, 2.0))
}

/// The `[n, 2]` indices `[i, i]` of `x[..., i, i]` (`i` an `n`-element iota) as `jnp`
/// indexing emits them: each column's negative entries wrapped by its axis' size.
fn diagonal_indices(b: &mut Builder, i: Atom, n: usize, sizes: [usize; 2]) -> Result<Atom, AdError> {
    let mut cols = Vec::with_capacity(2);
    for size in sizes {
        let neg = b.compare(CompareOp::Lt, i, lit(DType::I32, 0.0))?;
        let wrapped = b.add(i, lit(DType::I32, size as f64))?;
        cols.push(b.select_n(neg, vec![i, wrapped])?);
    }
    let mut idx = Vec::with_capacity(2);
    for c in cols {
        idx.push(b.bind1(Primitive::BroadcastInDim { shape: vec![n, 1], broadcast_dimensions: vec![0] }, vec![c])?);
    }
    b.bind1(Primitive::Concatenate { dimension: 1 }, idx)
}

/// `_extract_diagonal(s)`: `s[..., i, i]` for `i = iota(n)`, as `jnp` indexing emits it.
fn extract_diagonal(b: &mut Builder, s: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&s);
    let r = aval.rank();
    let nb = r - 2;
    let n = aval.shape[r - 2].min(aval.shape[r - 1]);
    let i = b.bind1(Primitive::Iota { dtype: DType::I32, shape: vec![n], dimension: 0 }, vec![])?;
    let idx = diagonal_indices(b, i, n, [aval.shape[r - 2], aval.shape[r - 1]])?;
    let mut slice_sizes = aval.shape[..nb].to_vec();
    slice_sizes.extend([1, 1]);
    let prim = Primitive::Gather {
        dimension_numbers: GatherDimensionNumbers {
            offset_dims: (0..nb).collect(),
            collapsed_slice_dims: vec![nb, nb + 1],
            start_index_map: vec![nb, nb + 1],
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
        },
        fill_value: None,
        indices_are_sorted: false,
        mode: GatherScatterMode::PromiseInBounds,
        slice_sizes,
        unique_indices: false,
    };
    b.bind1(prim, vec![s, idx])
}

/// `_construct_diagonal(s)`: zeros `[..., n, n]` with `s` (`[..., n]`) set on each
/// diagonal (`.at[..., i, i].set(s)`: a `scatter`).
fn construct_diagonal(b: &mut Builder, s: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&s);
    let nb = aval.rank() - 1;
    let n = aval.shape[nb];
    let i = b.bind1(Primitive::Iota { dtype: DType::I32, shape: vec![n], dimension: 0 }, vec![])?;
    let zeros = b.zeros(&Aval::new(aval.dtype, [&aval.shape[..], &[n]].concat()))?;
    let idx = diagonal_indices(b, i, n, [n, n])?;
    let prim = Primitive::Scatter {
        op: ScatterOp::Set,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: (0..nb).collect(),
            inserted_window_dims: vec![nb, nb + 1],
            scatter_dims_to_operand_dims: vec![nb, nb + 1],
            operand_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        },
        indices_are_sorted: false,
        mode: GatherScatterMode::FillOrDrop,
        unique_indices: false,
        update_jaxpr: None,
    };
    b.bind1(prim, vec![zeros, idx, s])
}

/// JAX's `_eigh_jvp_rule` (real matrices, the whole spectrum).
pub(super) fn eigh(b: &mut Builder, params: Eigh, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let a = primals[0];
    let sym = symmetrize(b, a)?;
    let outs = b.bind(Primitive::Eigh(params), vec![sym])?;
    let (v, w) = (Atom::Var(outs[0]), Atom::Var(outs[1]));
    let Tangent::Nz(a_dot) = tangents[0] else {
        return Ok((vec![v, w], vec![Tangent::Zero, Tangent::Zero]));
    };
    let aval = b.aval(&a);
    let r = aval.rank();
    let nb = r - 2;
    let n = aval.shape[r - 1];
    let batch = aval.shape[..nb].to_vec();
    let eye_n = eye(b, aval.dtype, n)?;
    // Fmat = (eye + w[..., None, :] - w[..., :, None]) ** -1 - eye, with rank promotion.
    let row_dims: Vec<usize> = (0..nb).chain([nb + 1]).collect();
    let w_row = b.bind1(
        Primitive::BroadcastInDim { shape: [&batch[..], &[1, n]].concat(), broadcast_dimensions: row_dims },
        vec![w],
    )?;
    let promote = |b: &mut Builder, x: Atom| -> Result<Atom, AdError> {
        if nb == 0 {
            return Ok(x);
        }
        let shape = [&vec![1; nb][..], &[n, n]].concat();
        b.bind1(Primitive::BroadcastInDim { shape, broadcast_dimensions: vec![nb, nb + 1] }, vec![x])
    };
    let eye_b = promote(b, eye_n)?;
    let sum = b.add(eye_b, w_row)?;
    let w_col = b.bind1(
        Primitive::BroadcastInDim { shape: [&batch[..], &[n, 1]].concat(), broadcast_dimensions: (0..=nb).collect() },
        vec![w],
    )?;
    let diff = b.sub(sum, w_col)?;
    let inv = b.integer_pow(diff, -1)?;
    let eye_b = promote(b, eye_n)?;
    let fmat = b.sub(inv, eye_b)?;
    let vt = transpose_matrices(b, v)?;
    let t = matmul_highest(b, vt, a_dot)?;
    let vdag_adot_v = matmul_highest(b, t, v)?;
    let scaled = b.mul(fmat, vdag_adot_v)?;
    let dv = matmul_highest(b, v, scaled)?;
    let dw = extract_diagonal(b, vdag_adot_v)?;
    Ok((vec![v, w], vec![Tangent::Nz(dv), Tangent::Nz(dw)]))
}

/// JAX's `_svd_jvp_rule` (real matrices, the whole spectrum): the primal is a thin `svd`
/// with vectors (its `s` alone without `compute_uv`); `full_matrices` with vectors of a
/// matrix that is not square is JAX's `NotImplementedError`.
pub(super) fn svd(b: &mut Builder, params: Svd, primals: &[Atom], tangents: &[Tangent]) -> Result<JvpOut, AdError> {
    let a = primals[0];
    let Tangent::Nz(da) = tangents[0] else {
        let outs: Vec<Atom> = b.bind(Primitive::Svd(params), vec![a])?.into_iter().map(Atom::Var).collect();
        let zeros = vec![Tangent::Zero; outs.len()];
        return Ok((outs, zeros));
    };
    let aval = b.aval(&a);
    let r = aval.rank();
    let nb = r - 2;
    let (m, n) = (aval.shape[r - 2], aval.shape[r - 1]);
    let k = m.min(n);
    let dtype = aval.dtype;
    let thin = Svd { full_matrices: false, compute_uv: true, ..params };
    let outs = b.bind(Primitive::Svd(thin), vec![a])?;
    let (s, u, vt) = (Atom::Var(outs[0]), Atom::Var(outs[1]), Atom::Var(outs[2]));
    if params.compute_uv && params.full_matrices && m != n {
        return Err(AdError::Invalid("Singular value decomposition JVP not implemented for full matrices".into()));
    }
    let ut = transpose_matrices(b, u)?;
    let v = transpose_matrices(b, vt)?;
    let batch = aval.shape[..nb].to_vec();
    let s_dim = b.bind1(
        Primitive::BroadcastInDim {
            shape: [&batch[..], &[1, k]].concat(),
            broadcast_dimensions: (0..nb).chain([nb + 1]).collect(),
        },
        vec![s],
    )?;
    let t = matmul_highest(b, ut, da)?;
    let ds_mat = matmul_highest(b, t, v)?;
    let ds = extract_diagonal(b, ds_mat)?;
    if !params.compute_uv {
        return Ok((vec![s], vec![Tangent::Nz(ds)]));
    }
    // s_diffs = (s_dim + s_dimᵀ) * (s_dim - s_dimᵀ); F = 1 / (s_diffs + eye) - eye.
    let st = transpose_matrices(b, s_dim)?;
    let plus = b.add(s_dim, st)?;
    let st = transpose_matrices(b, s_dim)?;
    let minus = b.sub(s_dim, st)?;
    let s_diffs = b.mul(plus, minus)?;
    let eye_k = eye(b, dtype, k)?;
    let eye_k = over_batch_axes(b, eye_k, r)?;
    let shifted = b.add(s_diffs, eye_k)?;
    let inv = b.div(lit(dtype, 1.0), shifted)?;
    let f = b.sub(inv, eye_k)?;
    let dss = b.mul(s_dim, ds_mat)?;
    let st = transpose_matrices(b, s_dim)?;
    let sds = b.mul(st, ds_mat)?;
    // s_inv = 1 / (s + (s == 0)) - (s == 0), on a diagonal.
    let s_zero = b.compare(CompareOp::Eq, s, lit(dtype, 0.0))?;
    let s_zeros = b.convert(s_zero, dtype)?;
    let shifted = b.add(s, s_zeros)?;
    let inv = b.div(lit(dtype, 1.0), shifted)?;
    let s_inv = b.sub(inv, s_zeros)?;
    let s_inv_mat = construct_diagonal(b, s_inv)?;
    let dst = transpose_matrices(b, ds_mat)?;
    let skew = b.sub(ds_mat, dst)?;
    // JAX stages the Python scalar `.5` (a residual where the tangent reads it).
    let half_lit = b.staged_full(&Aval::new(dtype, vec![]), 0.5)?;
    let half = b.mul(half_lit, skew)?;
    let dudv_diag = b.mul(half, s_inv_mat)?;
    let dsst = transpose_matrices(b, dss)?;
    let sym = b.add(dss, dsst)?;
    let scaled = b.mul(f, sym)?;
    let inner = b.add(scaled, dudv_diag)?;
    let mut du = matmul_highest(b, u, inner)?;
    let sdst = transpose_matrices(b, sds)?;
    let sym = b.add(sds, sdst)?;
    let scaled = b.mul(f, sym)?;
    let mut dv = matmul_highest(b, v, scaled)?;
    if m > n {
        let dav = matmul_highest(b, da, v)?;
        let proj = matmul_highest(b, ut, dav)?;
        let proj = matmul_highest(b, u, proj)?;
        let rest = b.sub(dav, proj)?;
        let rest = b.div(rest, s_dim)?;
        du = b.add(du, rest)?;
    }
    if n > m {
        let dat = transpose_matrices(b, da)?;
        let dahu = matmul_highest(b, dat, u)?;
        let proj = matmul_highest(b, vt, dahu)?;
        let proj = matmul_highest(b, v, proj)?;
        let rest = b.sub(dahu, proj)?;
        let rest = b.div(rest, s_dim)?;
        dv = b.add(dv, rest)?;
    }
    let dvt = transpose_matrices(b, dv)?;
    Ok((vec![s, u, vt], vec![Tangent::Nz(ds), Tangent::Nz(du), Tangent::Nz(dvt)]))
}

/// A `[..., k]` slice of the last axis of `x`.
fn last_axis_slice(b: &mut Builder, x: Atom, range: std::ops::Range<usize>) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let mut start_indices = vec![0; r];
    let mut limit_indices = aval.shape.clone();
    (start_indices[r - 1], limit_indices[r - 1]) = (range.start, range.end);
    b.bind1(Primitive::Slice { start_indices, limit_indices, strides: None }, vec![x])
}

/// `_tridiagonal_solve_transpose_rule`'s diagonals of `Tᵀ`: `dl_trans = [0, du[..., :-1]]`
/// and `du_trans = [dl[..., 1:], 0]` (each zero `lax.full_like` of a one-element slice).
pub(crate) fn transposed_diagonals(b: &mut Builder, dl: Atom, du: Atom) -> Result<(Atom, Atom), AdError> {
    let aval = b.aval(&du);
    let r = aval.rank();
    let m = aval.shape[r - 1];
    let last = last_axis_slice(b, du, m - 1..m)?;
    let zero = b.zeros(&b.aval(&last))?;
    let head = last_axis_slice(b, du, 0..m - 1)?;
    let dl_t = b.bind1(Primitive::Concatenate { dimension: r - 1 }, vec![zero, head])?;
    let tail = last_axis_slice(b, dl, 1..m)?;
    let first = last_axis_slice(b, dl, 0..1)?;
    let zero = b.zeros(&b.aval(&first))?;
    let du_t = b.bind1(Primitive::Concatenate { dimension: r - 1 }, vec![tail, zero])?;
    Ok((dl_t, du_t))
}

/// `y.at[..., rows, :].add(update)` for the static row range starting at `start` (a
/// `scatter-add` of the whole update window at one index, as `jnp` emits a slice update).
fn add_rows(b: &mut Builder, y: Atom, start: usize, update: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&y);
    let r = aval.rank();
    let idx = b.full(&Aval::new(DType::I32, vec![1]), start as f64)?;
    let prim = Primitive::Scatter {
        op: ScatterOp::Add,
        dimension_numbers: ScatterDimensionNumbers {
            update_window_dims: (0..r).collect(),
            inserted_window_dims: vec![],
            scatter_dims_to_operand_dims: vec![r - 2],
            operand_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        },
        indices_are_sorted: true,
        mode: GatherScatterMode::FillOrDrop,
        unique_indices: true,
        update_jaxpr: Some(super::indexing::add_jaxpr(aval.dtype)?),
    };
    b.bind1(prim, vec![y, idx, update])
}

/// `_tridiagonal_product(dl, d, du, x)`: `T x` for the diagonals' tangents.
fn tridiagonal_product(b: &mut Builder, dl: Atom, d: Atom, du: Atom, x: Atom) -> Result<Atom, AdError> {
    let aval = b.aval(&x);
    let r = aval.rank();
    let m = aval.shape[r - 2];
    let d_col = b.reshape(d, &[&b.aval(&d).shape[..], &[1]].concat())?;
    let y = b.mul(d_col, x)?;
    let column = |b: &mut Builder, v: Atom| -> Result<Atom, AdError> {
        let shape = [&b.aval(&v).shape[..], &[1]].concat();
        b.broadcast_in_dim(v, &shape, &(0..r - 1).collect::<Vec<_>>())
    };
    let rows = |b: &mut Builder, v: Atom, range: std::ops::Range<usize>| -> Result<Atom, AdError> {
        let cols = b.aval(&v).shape[r - 1];
        block(b, v, range, 0..cols)
    };
    let lower = last_axis_slice(b, dl, 1..m)?;
    let lower = column(b, lower)?;
    let above = rows(b, x, 0..m - 1)?;
    let lower = b.mul(lower, above)?;
    let y = add_rows(b, y, 1, lower)?;
    let upper = last_axis_slice(b, du, 0..m - 1)?;
    let upper = column(b, upper)?;
    let below = rows(b, x, 1..m)?;
    let upper = b.mul(upper, below)?;
    add_rows(b, y, 0, upper)
}

/// JAX's `_tridiagonal_solve_jvp_rule`.
pub(super) fn tridiagonal_solve(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let ans = emit_primal(b, old, eqn, primals)[0];
    let rhs = if tangents[..3].iter().all(Tangent::is_zero) {
        tangents[3]
    } else {
        let mut diags = Vec::with_capacity(3);
        for (t, p) in tangents[..3].iter().zip(primals) {
            let aval = b.aval(p);
            diags.push(super::instantiate(b, *t, &aval)?);
        }
        let matvec_dot = tridiagonal_product(b, diags[0], diags[1], diags[2], ans)?;
        let neg = b.neg(matvec_dot)?;
        match tangents[3] {
            Tangent::Nz(b_dot) => Tangent::Nz(b.add_any(b_dot, neg)?),
            Tangent::Zero => Tangent::Nz(neg),
        }
    };
    let Tangent::Nz(rhs) = rhs else { return Ok((vec![ans], vec![Tangent::Zero])) };
    let ans_dot = b.bind1(eqn.primitive.clone(), vec![primals[0], primals[1], primals[2], rhs])?;
    Ok((vec![ans], vec![Tangent::Nz(ans_dot)]))
}
