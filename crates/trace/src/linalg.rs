//! `jax.lax.linalg`: `cholesky`, `triangular_solve`, `lu`, `lu_pivots_to_permutation`, `qr`,
//! `geqrf`, `householder_product`, `ormqr`, `eigh`, `svd`, `tridiagonal_solve` and `symmetric_product`,
//! recorded as JAX 0.10.2's wrappers record them (`cholesky` symmetrizes its input unless
//! told not to and masks the factor's upper part with `_tril`; `triangular_solve` keeps
//! `conjugate_a` only for complex `a`). Matrices are the last two axes, the leading ones a
//! batch; a wrong shape or dtype is a located [`TraceError`](crate::TraceError) from the
//! primitives' shape rules.

use std::panic::Location;

use remat_ir::{Aval, BinaryOp, CompareOp, DType, Eigh, FillValue, LitValue, Primitive, Qr, Svd};

pub use remat_ir::TriangularSolve;

use crate::elementwise::{binary_at, compare_at};
use crate::tensor::Tensor;
use crate::trace::{bind, bind_n};

/// `lax.linalg.cholesky(x, symmetrize_input=...)`: the lower Cholesky factor of each
/// symmetric positive definite matrix of `x` (NaN for one that is not). With
/// `symmetrize_input`, `x` is first replaced by `(x + xᵀ) / 2` (`transpose`, `add`, `div`);
/// the factor's upper part is then zeroed (`iota`/`ge` mask, `select_n`).
#[track_caller]
pub fn cholesky(x: &Tensor, symmetrize_input: bool) -> Tensor {
    let loc = Location::caller();
    let x = if symmetrize_input { symmetrize(x, loc) } else { x.clone() };
    let l = bind(Primitive::Cholesky, &[(&x).into()], false, loc).remove(0);
    if l.ndim() < 2 {
        return l;
    }
    tril(&l, loc)
}

/// JAX's `_tril(x)`: `x` on and below the diagonal, zeros above; the mask is built per
/// matrix and broadcast over the batch axes.
fn tril(x: &Tensor, loc: &'static Location<'static>) -> Tensor {
    let rank = x.ndim();
    let matrix = x.shape()[rank - 2..].to_vec();
    let iota = |dimension| {
        let prim = Primitive::Iota { dtype: DType::I32, shape: matrix.clone(), dimension };
        bind(prim, &[], false, loc).remove(0)
    };
    let rows = binary_at(BinaryOp::Add, iota(0).into(), 0i32.into(), loc);
    let mask = compare_at(CompareOp::Ge, rows.into(), iota(1).into(), loc);
    let mask = if rank == 2 {
        mask
    } else {
        let prim =
            Primitive::BroadcastInDim { shape: x.shape().to_vec(), broadcast_dimensions: vec![rank - 2, rank - 1] };
        mask.apply_at(prim, loc)
    };
    let zeros = crate::numpy::full_at(x.shape(), LitValue::from_f64(x.dtype(), 0.0), loc);
    bind(Primitive::SelectN, &[mask.into(), zeros.into(), x.into()], x.is_weak(), loc).remove(0)
}

/// `lax.linalg.triangular_solve(a, b, left_side=..., lower=..., transpose_a=...,
/// conjugate_a=..., unit_diagonal=...)`: `x` with `op(a) x = b` (`left_side`) or
/// `x op(a) = b`, `op(a)` the triangle of `a` that `lower` names, transposed if
/// `transpose_a`. `conjugate_a` is kept for complex `a` only, as JAX's wrapper does.
#[track_caller]
pub fn triangular_solve(a: &Tensor, b: &Tensor, t: TriangularSolve) -> Tensor {
    let t = TriangularSolve { conjugate_a: t.conjugate_a && a.dtype().is_complex(), ..t };
    bind(Primitive::TriangularSolve(t), &[a.into(), b.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.lu(x)`: `(lu, pivots, permutation)` of each `m x n` matrix of `x`: the
/// unit-lower factor below the diagonal and the upper one on and above it, the `min(m, n)`
/// row swaps of partial pivoting (`i32`) and the permutation of `0..m` they make (`i32`),
/// with `permutation`'s rows of `x` equal to `L U`.
#[track_caller]
pub fn lu(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let loc = Location::caller();
    match bind_n(Primitive::Lu, &[x.into()], &[false, false, false], loc).as_deref() {
        Some([lu, pivots, permutation]) => (lu.clone(), pivots.clone(), permutation.clone()),
        _ => {
            let r = x.ndim().max(2);
            let batch = &x.shape()[..x.ndim().saturating_sub(2)];
            let (m, n) = (x.shape().get(r - 2).copied().unwrap_or(1), x.shape().get(r - 1).copied().unwrap_or(1));
            let ints = |last: usize| Tensor::placeholder(Aval::new(DType::I32, [batch, &[last]].concat()));
            (Tensor::placeholder(x.aval().clone()), ints(m.min(n)), ints(m))
        }
    }
}

/// `lax.linalg.lu_pivots_to_permutation(pivots, permutation_size)`: the permutation of
/// `0..permutation_size` that swapping entry `i` with entry `pivots[i]`, in order, makes,
/// for each row of `i32` swaps.
#[track_caller]
pub fn lu_pivots_to_permutation(pivots: &Tensor, permutation_size: usize) -> Tensor {
    bind(Primitive::LuPivotsToPermutation { permutation_size }, &[pivots.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.qr(x, full_matrices=...)`: `(q, r)` of each `m x n` matrix of `x`, by
/// Householder reflections with LAPACK's signs (`r`'s diagonal may be negative): `q` is
/// `m x m` and `r` `m x n` with `full_matrices`, else `m x k` and `k x n`, `k = min(m, n)`.
#[track_caller]
pub fn qr(x: &Tensor, full_matrices: bool) -> (Tensor, Tensor) {
    let loc = Location::caller();
    let prim = Primitive::Qr(Qr { full_matrices, pivoting: false, use_magma: None });
    match bind_n(prim, &[x.into()], &[false, false], loc).as_deref() {
        Some([q, r]) => (q.clone(), r.clone()),
        _ => (Tensor::placeholder(x.aval().clone()), Tensor::placeholder(x.aval().clone())),
    }
}

/// JAX's `symmetrize(x)`: `(x + xᵀ) / 2` over the last two axes (`transpose`, `add`, `div`).
fn symmetrize(x: &Tensor, loc: &'static Location<'static>) -> Tensor {
    if x.ndim() < 2 {
        return x.clone();
    }
    let r = x.ndim();
    let mut permutation: Vec<usize> = (0..r).collect();
    permutation.swap(r - 2, r - 1);
    let xt = x.apply_at(Primitive::Transpose { permutation }, loc);
    let sum = binary_at(BinaryOp::Add, x.into(), xt.into(), loc);
    binary_at(BinaryOp::Div, sum.into(), 2.0.into(), loc)
}

/// `lax.linalg.eigh(x, lower=..., symmetrize_input=...)`: `(v, w)` of each symmetric matrix
/// of `x`: the unit eigenvectors as the columns of `v` (each defined up to sign) and the
/// eigenvalues `w`, ascending. Only the `lower` (or upper) triangle is read; with
/// `symmetrize_input`, `x` is first replaced by `(x + xᵀ) / 2`.
#[track_caller]
pub fn eigh(x: &Tensor, lower: bool, symmetrize_input: bool) -> (Tensor, Tensor) {
    let loc = Location::caller();
    let x = if symmetrize_input { symmetrize(x, loc) } else { x.clone() };
    let prim = Primitive::Eigh(Eigh { lower, sort_eigenvalues: true, subset_by_index: None, algorithm: None });
    match bind_n(prim, &[(&x).into()], &[false, false], loc).as_deref() {
        Some([v, w]) => (v.clone(), w.clone()),
        _ => {
            let w_shape = x.shape()[..x.ndim().saturating_sub(1)].to_vec();
            (Tensor::placeholder(x.aval().clone()), Tensor::placeholder(Aval::new(x.dtype(), w_shape)))
        }
    }
}

/// `lax.linalg.svd(x, full_matrices=..., compute_uv=True)`: `(u, s, vt)` of each `m x n`
/// matrix of `x`, `x = u diag(s) vt`: the singular values `s` descending (`k = min(m, n)`),
/// `u` `m x m` and `vt` `n x n` with `full_matrices`, else `m x k` and `k x n` (each pair
/// of singular vectors defined up to a common sign).
#[track_caller]
pub fn svd(x: &Tensor, full_matrices: bool) -> (Tensor, Tensor, Tensor) {
    let loc = Location::caller();
    let prim = Primitive::Svd(Svd { full_matrices, compute_uv: true, subset_by_index: None, algorithm: None });
    match bind_n(prim, &[x.into()], &[false, false, false], loc).as_deref() {
        Some([s, u, vt]) => (u.clone(), s.clone(), vt.clone()),
        _ => {
            let p = Tensor::placeholder(x.aval().clone());
            (p.clone(), p.clone(), p)
        }
    }
}

/// `lax.linalg.svd(x, compute_uv=False)`: the singular values of each matrix of `x`,
/// descending.
#[track_caller]
pub fn singular_values(x: &Tensor) -> Tensor {
    let prim = Primitive::Svd(Svd { full_matrices: true, compute_uv: false, subset_by_index: None, algorithm: None });
    bind(prim, &[x.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.geqrf(x)` (JAX's `jax._src.lax.linalg.geqrf`): `(a, taus)`, LAPACK's `geqrf` of
/// each `m x n` matrix: `r` on and above the diagonal of `a`, the Householder vectors below
/// it (their leading ones implied) and the `min(m, n)` `taus`. JAX defines no derivative.
#[track_caller]
pub fn geqrf(x: &Tensor) -> (Tensor, Tensor) {
    match bind_n(Primitive::Geqrf, &[x.into()], &[false, false], Location::caller()).as_deref() {
        Some([a, taus]) => (a.clone(), taus.clone()),
        _ => (Tensor::placeholder(x.aval().clone()), Tensor::placeholder(x.aval().clone())),
    }
}

/// `lax.linalg.householder_product(a, taus)`: for each `m x n` matrix of reflectors (as
/// [`geqrf`] leaves them, `m >= n`) and its `taus`, the first `n` columns of their product
/// (LAPACK's `orgqr`). JAX defines no derivative.
#[track_caller]
pub fn householder_product(a: &Tensor, taus: &Tensor) -> Tensor {
    bind(Primitive::HouseholderProduct, &[a.into(), taus.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.ormqr(a, taus, c, left=..., transpose=...)`: `q c` (`left`) or `c q`, `q`
/// transposed with `transpose`, for the `q` of the Householder reflectors `a` and `taus` (as
/// [`geqrf`] leaves them) of each matrix (LAPACK's `ormqr`). JAX defines no derivative.
#[track_caller]
pub fn ormqr(a: &Tensor, taus: &Tensor, c: &Tensor, left: bool, transpose: bool) -> Tensor {
    bind(Primitive::Ormqr { left, transpose }, &[a.into(), taus.into(), c.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.tridiagonal_solve(dl, d, du, b)`: `x` with `T x = b` for each tridiagonal
/// `T` whose sub-, main and super-diagonals are `dl`, `d` and `du` (`[..., m]`; `dl[..., 0]`
/// and `du[..., m - 1]` are not read) and `m x n` `b` (NaN for a singular `T`).
#[track_caller]
pub fn tridiagonal_solve(dl: &Tensor, d: &Tensor, du: &Tensor, b: &Tensor) -> Tensor {
    let prim = Primitive::TridiagonalSolve { perturb_singular: false };
    bind(prim, &[dl.into(), d.into(), du.into(), b.into()], false, Location::caller()).remove(0)
}

/// `lax.linalg.symmetric_product(a, c, alpha=..., beta=...)`: `alpha a aᵀ + beta c` for
/// each `m x n` matrix of `a` and `m x m` matrix of `c`; `alpha` and `beta` are recorded as
/// the Python numbers given (`FillValue::Int(2)` prints `2`, `FillValue::Float(2.0)` `2.0`).
/// JAX defines no derivative for it.
#[track_caller]
pub fn symmetric_product(a: &Tensor, c: &Tensor, alpha: FillValue, beta: FillValue) -> Tensor {
    bind(Primitive::SymmetricProduct { alpha, beta }, &[a.into(), c.into()], false, Location::caller()).remove(0)
}
