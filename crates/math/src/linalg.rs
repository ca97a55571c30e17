//! The kernels of `cholesky`, `triangular_solve`, `lu`, `lu_pivots_to_permutation`, `qr`, `geqrf`,
//! `householder_product`, `ormqr`, `eigh`, `svd`, `tridiagonal_solve` and `symmetric_product` over
//! batches of row-major matrices, one definition for the interpreter and the JIT's runtime. Arithmetic is in the dtype, in the
//! order of the textbook algorithms (LAPACK's `potrf`/`trsm` compute the same values up to
//! rounding), and XLA CPU's conventions hold at the edges: a batch member whose matrix is not
//! positive definite factors to NaN in every element (JAX's `_replace_not_ok_with_nan`), and
//! the factor's strictly upper part is the operand's, which `potrf` leaves untouched. `lu` is
//! `getrf`'s partial pivoting: in column `k` the row of the largest `|value|` at or below the
//! diagonal, the first on ties (`idamax`), whole rows swapped, the column below the pivot
//! divided by it unless it is zero (a singular matrix factors without NaN, as `getrf`
//! reports it through `info > 0`, which JAX accepts). `qr` is `geqrf`'s Householder QR
//! (`dlarfg`'s reflectors: `r`'s diagonal `-sign(alpha) * norm`, so it may be negative exactly
//! where LAPACK's is; a column already zero below the diagonal gets no reflection) and
//! `orgqr`'s `q`; with pivoting, `geqp3`'s choice of the remaining column of largest norm,
//! the first on ties. `eigh` is cyclic Jacobi in f64 on the triangle `lower` names (LAPACK's
//! `syevd` computes the same eigenpairs up to rounding): eigenvalues ascending, each
//! eigenvector a unit column whose largest-magnitude component is positive (an eigenvector's
//! sign is not defined; LAPACK's may differ). `svd` is one-sided (Hestenes) Jacobi in f64 on
//! the tall orientation (a wide matrix through its transpose): singular values descending,
//! each right singular vector's largest-magnitude component positive and the left one to
//! match (`gesdd`'s signs may differ), the columns `u` lacks for `full_matrices` or for a
//! zero singular value completed by Gram-Schmidt against the unit vectors in order; a
//! matrix holding NaN gives NaN everywhere (JAX's `_replace_not_ok_with_nan`).
//! `tridiagonal_solve` is `gtsv`'s Gaussian elimination with partial pivoting between
//! neighbouring rows, in f64; an exactly singular system solves to NaN (`info > 0`).

use ndarray::{ArrayD, ArrayViewD};
use remat_ir::{Qr, Svd, TriangularSolve};

/// The float dtypes linear algebra runs on.
pub trait LinalgFloat:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const NAN: Self;
    fn sqrt(self) -> Self;
    fn abs(self) -> Self;
    fn from_f64(x: f64) -> Self;
}

impl LinalgFloat for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NAN: f32 = f32::NAN;
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

impl LinalgFloat for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NAN: f64 = f64::NAN;
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn from_f64(x: f64) -> f64 {
        x
    }
}

/// The matrices of `x` (`[..., r, c]`) in row-major order, as `(count, r, c)`.
fn matrices<T: Copy>(x: &ArrayViewD<T>) -> (Vec<T>, usize, usize, usize) {
    let rank = x.ndim();
    let (r, c) = (x.shape()[rank - 2], x.shape()[rank - 1]);
    let data: Vec<T> = x.iter().copied().collect();
    let count = x.shape()[..rank - 2].iter().product();
    (data, count, r, c)
}

/// The lower Cholesky factor of each matrix of `a` (`[..., n, n]`, symmetric: only its lower
/// part is read).
pub fn cholesky<T: LinalgFloat>(a: &ArrayViewD<T>) -> ArrayD<T> {
    let (mut data, count, n, _) = matrices(a);
    for m in 0..count {
        let l = &mut data[m * n * n..(m + 1) * n * n];
        if !cholesky_in_place(l, n) {
            l.iter_mut().for_each(|x| *x = T::NAN);
        }
    }
    ArrayD::from_shape_vec(a.raw_dim(), data).expect("the operand's shape")
}

/// Factors one `n x n` row-major matrix in place (its lower part); `false` if it is not
/// positive definite (a pivot that is not above zero, NaN included).
fn cholesky_in_place<T: LinalgFloat>(l: &mut [T], n: usize) -> bool {
    for j in 0..n {
        let mut d = l[j * n + j];
        for k in 0..j {
            d = d - l[j * n + k] * l[j * n + k];
        }
        if d.partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
            return false;
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = l[i * n + j];
            for k in 0..j {
                s = s - l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    true
}

/// `x` with `op(a) x = b` (`left_side`) or `x op(a) = b`, for each matrix pair of `a`
/// (`[..., n, n]`, triangular as `t.lower` says; the other part not read) and `b`.
pub fn triangular_solve<T: LinalgFloat>(t: &TriangularSolve, a: &ArrayViewD<T>, b: &ArrayViewD<T>) -> ArrayD<T> {
    let (a_data, count, n, _) = matrices(a);
    let (mut x, _, rows, cols) = matrices(b);
    // `op(a)[i][j]`, read from `a`'s triangle; conjugation does nothing to real values.
    let op = |m: &[T], i: usize, j: usize| if t.transpose_a { m[j * n + i] } else { m[i * n + j] };
    // `op(a)` is lower triangular when `a` is lower and not transposed, or upper and transposed.
    let op_lower = t.lower != t.transpose_a;
    for m in 0..count {
        let am = &a_data[m * n * n..(m + 1) * n * n];
        let xm = &mut x[m * rows * cols..(m + 1) * rows * cols];
        let diag = |i: usize| if t.unit_diagonal { T::ONE } else { op(am, i, i) };
        if t.left_side {
            // op(a) X = B, column by column of X (rows == n).
            for c in 0..cols {
                let order: Box<dyn Iterator<Item = usize>> =
                    if op_lower { Box::new(0..n) } else { Box::new((0..n).rev()) };
                for i in order {
                    let mut s = xm[i * cols + c];
                    let js = if op_lower { 0..i } else { i + 1..n };
                    for j in js {
                        s = s - op(am, i, j) * xm[j * cols + c];
                    }
                    xm[i * cols + c] = s / diag(i);
                }
            }
        } else {
            // X op(a) = B, row by row of X (cols == n): x_j = (b_j - sum_{i != j} x_i op(a)[i][j]) / op(a)[j][j],
            // from the last column when op(a) is lower, from the first when it is upper.
            for r in 0..rows {
                let order: Box<dyn Iterator<Item = usize>> =
                    if op_lower { Box::new((0..n).rev()) } else { Box::new(0..n) };
                for j in order {
                    let mut s = xm[r * cols + j];
                    let is = if op_lower { j + 1..n } else { 0..j };
                    for i in is {
                        s = s - xm[r * cols + i] * op(am, i, j);
                    }
                    xm[r * cols + j] = s / diag(j);
                }
            }
        }
    }
    ArrayD::from_shape_vec(b.raw_dim(), x).expect("b's shape")
}

/// `(lu, pivots, permutation)` of each matrix of `a` (`[..., m, n]`): the unit-lower factor
/// below the diagonal and the upper factor on and above it, the `min(m, n)` row swaps and
/// the permutation of `0..m` they make.
pub fn lu<T: LinalgFloat>(a: &ArrayViewD<T>) -> (ArrayD<T>, ArrayD<i32>, ArrayD<i32>) {
    let (mut data, count, m, n) = matrices(a);
    let k = m.min(n);
    let batch = &a.shape()[..a.ndim() - 2];
    let mut pivots = Vec::with_capacity(count * k);
    let mut perms = Vec::with_capacity(count * m);
    for b in 0..count {
        let x = &mut data[b * m * n..(b + 1) * m * n];
        let start = pivots.len();
        for c in 0..k {
            // The first row of the largest magnitude at or below the diagonal (`idamax`: a
            // NaN is never larger, and a NaN on the diagonal keeps its row).
            let mut p = c;
            let mut best = x[c * n + c].abs();
            for r in c + 1..m {
                let v = x[r * n + c].abs();
                if v > best {
                    p = r;
                    best = v;
                }
            }
            pivots.push(p as i32);
            if p != c {
                for j in 0..n {
                    x.swap(c * n + j, p * n + j);
                }
            }
            let d = x[c * n + c];
            if d != T::ZERO {
                for r in c + 1..m {
                    x[r * n + c] = x[r * n + c] / d;
                }
            }
            for r in c + 1..m {
                let l = x[r * n + c];
                for j in c + 1..n {
                    x[r * n + j] = x[r * n + j] - l * x[c * n + j];
                }
            }
        }
        perms.extend(swaps_to_permutation(&pivots[start..], m));
    }
    let mut piv_shape = batch.to_vec();
    piv_shape.push(k);
    let mut perm_shape = batch.to_vec();
    perm_shape.push(m);
    (
        ArrayD::from_shape_vec(a.raw_dim(), data).expect("the operand's shape"),
        ArrayD::from_shape_vec(piv_shape, pivots).expect("the pivots' shape"),
        ArrayD::from_shape_vec(perm_shape, perms).expect("the permutation's shape"),
    )
}

/// The permutation of `0..size` that swapping entry `i` with entry `swaps[i]` makes, in
/// order. A swap index is read as JAX's generic rule indexes (`permutation[j]` and
/// `.at[j].set`): a negative one from the end, and one still out of range reads the nearest
/// entry and writes nothing.
fn swaps_to_permutation(swaps: &[i32], size: usize) -> Vec<i32> {
    let mut perm: Vec<i32> = (0..size as i32).collect();
    if size == 0 {
        return perm;
    }
    for (i, &j) in swaps.iter().enumerate() {
        let j = i64::from(j);
        let j = if j < 0 { j + size as i64 } else { j };
        let read = j.clamp(0, size as i64 - 1) as usize;
        let (x, y) = (perm[i], perm[read]);
        perm[i] = y;
        if (0..size as i64).contains(&j) {
            perm[j as usize] = x;
        }
    }
    perm
}

/// `lu_pivots_to_permutation[permutation_size]` of each row of swaps of `pivots`
/// (`[..., k]`, `k <= permutation_size`, as the shape rule checked).
pub fn lu_pivots_to_permutation(pivots: &ArrayViewD<i32>, permutation_size: usize) -> ArrayD<i32> {
    let rank = pivots.ndim();
    let k = pivots.shape()[rank - 1];
    let data: Vec<i32> = pivots.iter().copied().collect();
    let count: usize = pivots.shape()[..rank - 1].iter().product();
    let mut out = Vec::with_capacity(count * permutation_size);
    for b in 0..count {
        out.extend(swaps_to_permutation(&data[b * k..(b + 1) * k], permutation_size));
    }
    let mut shape = pivots.shape().to_vec();
    shape[rank - 1] = permutation_size;
    ArrayD::from_shape_vec(shape, out).expect("the permutation's shape")
}

/// `(q, r, p)` of each matrix of `a` (`[..., m, n]`) as `qr[...]` gives them: `p`, the
/// column permutation, only with `params.pivoting`.
pub fn qr<T: LinalgFloat>(a: &ArrayViewD<T>, params: &Qr) -> (ArrayD<T>, ArrayD<T>, Option<ArrayD<i32>>) {
    let (mut data, count, m, n) = matrices(a);
    let k = m.min(n);
    let kq = if params.full_matrices { m } else { k };
    let batch = &a.shape()[..a.ndim() - 2];
    let (mut qs, mut rs, mut ps) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..count {
        let x = &mut data[b * m * n..(b + 1) * m * n];
        let mut jpvt: Vec<i32> = (0..n as i32).collect();
        let taus = geqrf_in_place(x, m, n, params.pivoting.then_some(&mut jpvt[..]));
        qs.extend(orgqr(x, m, n, &taus, kq));
        for i in 0..kq {
            for c in 0..n {
                rs.push(if c >= i { x[i * n + c] } else { T::ZERO });
            }
        }
        ps.extend(jpvt);
    }
    let with = |last: &[usize]| [batch, last].concat();
    let q = ArrayD::from_shape_vec(with(&[m, kq]), qs).expect("q's shape");
    let r = ArrayD::from_shape_vec(with(&[kq, n]), rs).expect("r's shape");
    let p = params.pivoting.then(|| ArrayD::from_shape_vec(with(&[n]), ps).expect("p's shape"));
    (q, r, p)
}

/// `geqrf` of the row-major `m x n` `x` in place (`r` on and above the diagonal, each
/// reflector's vector below it, its leading 1 implied): the `min(m, n)` `tau`s. With `jpvt`,
/// `geqp3`'s column pivoting, the columns' permutation recorded there.
fn geqrf_in_place<T: LinalgFloat>(x: &mut [T], m: usize, n: usize, mut jpvt: Option<&mut [i32]>) -> Vec<T> {
    let k = m.min(n);
    let mut taus = vec![T::ZERO; k];
    for j in 0..k {
        if let Some(jpvt) = jpvt.as_deref_mut() {
            let norm2 = |x: &[T], c: usize| (j..m).fold(T::ZERO, |s, i| s + x[i * n + c] * x[i * n + c]);
            let (mut best, mut best_norm) = (j, norm2(x, j));
            for c in j + 1..n {
                let v = norm2(x, c);
                if v > best_norm {
                    best = c;
                    best_norm = v;
                }
            }
            if best != j {
                for i in 0..m {
                    x.swap(i * n + j, i * n + best);
                }
                jpvt.swap(j, best);
            }
        }
        // `dlarfg`: the reflector that maps x[j.., j] to (beta, 0, ..., 0).
        let alpha = x[j * n + j];
        let xnorm = (j + 1..m).fold(T::ZERO, |s, i| s + x[i * n + j] * x[i * n + j]).sqrt();
        if xnorm == T::ZERO {
            continue;
        }
        let h = (alpha * alpha + xnorm * xnorm).sqrt();
        let beta = if alpha >= T::ZERO { T::ZERO - h } else { h };
        taus[j] = (beta - alpha) / beta;
        let scale = T::ONE / (alpha - beta);
        for i in j + 1..m {
            x[i * n + j] = x[i * n + j] * scale;
        }
        x[j * n + j] = beta;
        // H = I - tau v vᵀ (v[j] = 1) on the columns to the right.
        for c in j + 1..n {
            let mut w = x[j * n + c];
            for i in j + 1..m {
                w = w + x[i * n + j] * x[i * n + c];
            }
            let tw = taus[j] * w;
            x[j * n + c] = x[j * n + c] - tw;
            for i in j + 1..m {
                x[i * n + c] = x[i * n + c] - tw * x[i * n + j];
            }
        }
    }
    taus
}

/// `orgqr`: `q = H_0 H_1 ... H_{k-1}` (the reflectors below the diagonal of the row-major
/// `m x n` `x`, `k` the number of `taus`) applied to the first `kq` columns of the identity.
fn orgqr<T: LinalgFloat>(x: &[T], m: usize, n: usize, taus: &[T], kq: usize) -> Vec<T> {
    let mut q = vec![T::ZERO; m * kq];
    for i in 0..kq.min(m) {
        q[i * kq + i] = T::ONE;
    }
    for j in (0..taus.len()).rev() {
        let tau = taus[j];
        if tau == T::ZERO {
            continue;
        }
        for c in 0..kq {
            let mut w = q[j * kq + c];
            for i in j + 1..m {
                w = w + x[i * n + j] * q[i * kq + c];
            }
            let tw = tau * w;
            q[j * kq + c] = q[j * kq + c] - tw;
            for i in j + 1..m {
                q[i * kq + c] = q[i * kq + c] - tw * x[i * n + j];
            }
        }
    }
    q
}

/// `geqrf` of each matrix of `a` (`[..., m, n]`): the factored matrices (`r` on and above
/// the diagonal, the reflectors' vectors below) and the `[..., min(m, n)]` `tau`s.
pub fn geqrf<T: LinalgFloat>(a: &ArrayViewD<T>) -> (ArrayD<T>, ArrayD<T>) {
    let (mut data, count, m, n) = matrices(a);
    let k = m.min(n);
    let mut taus = Vec::with_capacity(count * k);
    for b in 0..count {
        taus.extend(geqrf_in_place(&mut data[b * m * n..(b + 1) * m * n], m, n, None));
    }
    let batch = &a.shape()[..a.ndim() - 2];
    let taus = ArrayD::from_shape_vec([batch, &[k]].concat(), taus).expect("taus' shape");
    (ArrayD::from_shape_vec(a.raw_dim(), data).expect("a's shape"), taus)
}

/// `ormqr`: for each `m x n` matrix of reflectors of `a`, its `k` `taus` and its matrix of
/// `c`, `q c` (`left`), `c q` (else), `q`'s transpose with `transpose`, `q = H_0 ... H_{k-1}`
/// and `H_j = I - taus[j] v_j v_jᵀ` (each symmetric), applied one reflector at a time.
pub fn ormqr<T: LinalgFloat>(
    a: &ArrayViewD<T>,
    taus: &ArrayViewD<T>,
    c: &ArrayViewD<T>,
    left: bool,
    transpose: bool,
) -> ArrayD<T> {
    let (refl, count, m, n) = matrices(a);
    let (mut out, _, rows, cols) = matrices(c);
    let k = taus.shape()[taus.ndim() - 1];
    let taus: Vec<T> = taus.iter().copied().collect();
    for b in 0..count {
        let x = &refl[b * m * n..(b + 1) * m * n];
        let y = &mut out[b * rows * cols..(b + 1) * rows * cols];
        // q c and c qᵀ apply H_{k-1} first; qᵀ c and c q apply H_0 first.
        let order: Vec<usize> = if left != transpose { (0..k).rev().collect() } else { (0..k).collect() };
        for j in order {
            let tau = taus[b * k + j];
            let v = |i: usize| if i == j { T::ONE } else { x[i * n + j] };
            if left {
                for col in 0..cols {
                    let w = (j..m).fold(T::ZERO, |s, i| s + v(i) * y[i * cols + col]);
                    for i in j..m {
                        y[i * cols + col] = y[i * cols + col] - tau * w * v(i);
                    }
                }
            } else {
                for row in 0..rows {
                    let w = (j..m).fold(T::ZERO, |s, i| s + y[row * cols + i] * v(i));
                    for i in j..m {
                        y[row * cols + i] = y[row * cols + i] - tau * w * v(i);
                    }
                }
            }
        }
    }
    ArrayD::from_shape_vec(c.raw_dim(), out).expect("c's shape")
}

/// `householder_product` (`orgqr`): for each `m x n` matrix of `a` (`m >= n`) and its `k`
/// `taus`, the first `n` columns of `H_0 ... H_{k-1}`.
pub fn householder_product<T: LinalgFloat>(a: &ArrayViewD<T>, taus: &ArrayViewD<T>) -> ArrayD<T> {
    let (data, count, m, n) = matrices(a);
    let k = taus.shape()[taus.ndim() - 1];
    let taus: Vec<T> = taus.iter().copied().collect();
    let mut out = Vec::with_capacity(data.len());
    for b in 0..count {
        out.extend(orgqr(&data[b * m * n..(b + 1) * m * n], m, n, &taus[b * k..(b + 1) * k], n));
    }
    ArrayD::from_shape_vec(a.raw_dim(), out).expect("q's shape")
}

/// `(v, w)` of each symmetric matrix of `a` (`[..., n, n]`; only the `lower` triangle, or
/// the upper one, is read): the eigenvectors as columns of `v`, the eigenvalues ascending.
pub fn eigh<T: LinalgFloat>(
    a: &ArrayViewD<T>,
    lower: bool,
    to_f64: fn(T) -> f64,
    from_f64: fn(f64) -> T,
) -> (ArrayD<T>, ArrayD<T>) {
    let (data, count, n, _) = matrices(a);
    let batch = &a.shape()[..a.ndim() - 2];
    let (mut vs, mut ws) = (Vec::with_capacity(count * n * n), Vec::with_capacity(count * n));
    for b in 0..count {
        let m = &data[b * n * n..(b + 1) * n * n];
        let mut s = vec![0.0f64; n * n];
        for i in 0..n {
            for j in 0..n {
                let (r, c) = if (i >= j) == lower { (i, j) } else { (j, i) };
                s[i * n + j] = to_f64(m[r * n + c]);
            }
        }
        let (v, w) = jacobi_eigh(&mut s, n);
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&x, &y| w[x].total_cmp(&w[y]));
        for i in 0..n {
            for &c in &order {
                vs.push(from_f64(v[i * n + c]));
            }
        }
        ws.extend(order.iter().map(|&c| from_f64(w[c])));
    }
    let v = ArrayD::from_shape_vec(a.raw_dim(), vs).expect("v's shape");
    let w = ArrayD::from_shape_vec([batch, &[n]].concat(), ws).expect("w's shape");
    (v, w)
}

/// Cyclic Jacobi on the symmetric `n x n` row-major `s` (destroyed): `(v, w)`, the
/// eigenvectors as columns of `v` (each with its largest-magnitude component positive) and
/// the eigenvalues, unsorted. A matrix holding NaN gives NaN.
fn jacobi_eigh(s: &mut [f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    if s.iter().any(|x| x.is_nan()) {
        return (vec![f64::NAN; n * n], vec![f64::NAN; n]);
    }
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| s[i * n + j] * s[i * n + j])
            .sum();
        let diag: f64 = (0..n).map(|i| s[i * n + i] * s[i * n + i]).sum();
        if off <= f64::EPSILON * f64::EPSILON * diag.max(f64::MIN_POSITIVE) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let (app, aqq) = (s[p * n + p], s[q * n + q]);
                let theta = (aqq - app) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let sn = t * c;
                for k in 0..n {
                    let (skp, skq) = (s[k * n + p], s[k * n + q]);
                    s[k * n + p] = c * skp - sn * skq;
                    s[k * n + q] = sn * skp + c * skq;
                }
                for k in 0..n {
                    let (spk, sqk) = (s[p * n + k], s[q * n + k]);
                    s[p * n + k] = c * spk - sn * sqk;
                    s[q * n + k] = sn * spk + c * sqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - sn * vkq;
                    v[k * n + q] = sn * vkp + c * vkq;
                }
            }
        }
    }
    for c in 0..n {
        let big = (0..n).map(|i| v[i * n + c]).fold(0.0f64, |m, x| if x.abs() > m.abs() { x } else { m });
        if big < 0.0 {
            for i in 0..n {
                v[i * n + c] = -v[i * n + c];
            }
        }
    }
    let w = (0..n).map(|i| s[i * n + i]).collect();
    (v, w)
}

/// `svd` of each matrix of `a` (`[..., m, n]`): `[s]`, or `[s, u, vt]` with `compute_uv`.
pub fn svd<T: LinalgFloat>(a: &ArrayViewD<T>, params: &Svd, to_f64: fn(T) -> f64) -> Vec<ArrayD<T>> {
    let (data, count, m, n) = matrices(a);
    let batch = &a.shape()[..a.ndim() - 2];
    let k = m.min(n);
    let (uc, vr) = if params.full_matrices { (m, n) } else { (k, k) };
    let (mut ss, mut us, mut vts) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..count {
        let x: Vec<f64> = data[b * m * n..(b + 1) * m * n].iter().map(|&v| to_f64(v)).collect();
        let (s, u, vt) = if x.iter().any(|v| v.is_nan()) {
            (vec![f64::NAN; k], vec![f64::NAN; m * uc], vec![f64::NAN; vr * n])
        } else if m >= n {
            let (s, u, v) = jacobi_svd(&x, m, n, uc);
            // vt = vᵀ: v is n x n, vt k x n or n x n (k = n here).
            let vt = (0..vr).flat_map(|i| (0..n).map(move |j| (i, j))).map(|(i, j)| v[j * n + i]).collect();
            (s, u, vt)
        } else {
            // x = (xᵀ)ᵀ = (u' s v'ᵀ)ᵀ = v' s u'ᵀ: u = v' (m x m), vt = u'ᵀ.
            let xt: Vec<f64> = (0..n).flat_map(|i| (0..m).map(move |j| (i, j))).map(|(i, j)| x[j * n + i]).collect();
            let (s, ut, v) = jacobi_svd(&xt, n, m, vr);
            let vt = (0..vr).flat_map(|i| (0..n).map(move |j| (i, j))).map(|(i, j)| ut[j * vr + i]).collect();
            (s, v, vt)
        };
        ss.extend(s.into_iter().map(T::from_f64));
        us.extend(u.into_iter().map(T::from_f64));
        vts.extend(vt.into_iter().map(T::from_f64));
    }
    let with = |last: &[usize]| [batch, last].concat();
    let mut outs = vec![ArrayD::from_shape_vec(with(&[k]), ss).expect("s's shape")];
    if params.compute_uv {
        outs.push(ArrayD::from_shape_vec(with(&[m, uc]), us).expect("u's shape"));
        outs.push(ArrayD::from_shape_vec(with(&[vr, n]), vts).expect("vt's shape"));
    }
    outs
}

/// One-sided Jacobi on the tall row-major `m x n` matrix `x` (`m >= n`): `(s, u, v)`, the
/// `n` singular values descending, `u` `m x cols` (`cols` of `n` or `m`) and `v` `n x n`,
/// with `x = u[:, :n] diag(s) vᵀ`.
fn jacobi_svd(x: &[f64], m: usize, n: usize, cols: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut w = x.to_vec();
    let mut v = vec![0.0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (mut alpha, mut beta, mut gamma) = (0.0f64, 0.0f64, 0.0f64);
                for i in 0..m {
                    let (wp, wq) = (w[i * n + p], w[i * n + q]);
                    alpha += wp * wp;
                    beta += wq * wq;
                    gamma += wp * wq;
                }
                if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = if zeta == 0.0 { 1.0 } else { zeta.signum() / (zeta.abs() + (zeta * zeta + 1.0).sqrt()) };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let sn = c * t;
                for i in 0..m {
                    let (wp, wq) = (w[i * n + p], w[i * n + q]);
                    w[i * n + p] = c * wp - sn * wq;
                    w[i * n + q] = sn * wp + c * wq;
                }
                for i in 0..n {
                    let (vp, vq) = (v[i * n + p], v[i * n + q]);
                    v[i * n + p] = c * vp - sn * vq;
                    v[i * n + q] = sn * vp + c * vq;
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..n).map(|j| (0..m).map(|i| w[i * n + j] * w[i * n + j]).sum::<f64>().sqrt()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| norms[b].total_cmp(&norms[a]));
    let s: Vec<f64> = order.iter().map(|&j| norms[j]).collect();
    let scale = s.first().copied().unwrap_or(0.0);
    let mut u = vec![0.0f64; m * cols];
    let mut vs = vec![0.0f64; n * n];
    let mut have = vec![false; cols];
    for (c, &j) in order.iter().enumerate() {
        let big = (0..n).map(|i| v[i * n + j]).fold(0.0f64, |acc, x| if x.abs() > acc.abs() { x } else { acc });
        let sign = if big < 0.0 { -1.0 } else { 1.0 };
        for i in 0..n {
            vs[i * n + c] = sign * v[i * n + j];
        }
        if norms[j] > scale * f64::EPSILON * (m as f64) && norms[j] > 0.0 {
            for i in 0..m {
                u[i * cols + c] = sign * w[i * n + j] / norms[j];
            }
            have[c] = true;
        }
    }
    complete_columns(&mut u, m, cols, &mut have);
    (s, u, vs)
}

/// Fills the columns of the row-major `m x cols` `u` not in `have` with unit vectors
/// orthogonal to every column before: Gram-Schmidt (twice) of `e_0, e_1, ...` in order.
fn complete_columns(u: &mut [f64], m: usize, cols: usize, have: &mut [bool]) {
    let mut next = 0;
    for c in 0..cols {
        if have[c] {
            continue;
        }
        while next < m {
            let mut e = vec![0.0f64; m];
            e[next] = 1.0;
            next += 1;
            for _ in 0..2 {
                for d in (0..cols).filter(|&d| have[d]) {
                    let dot: f64 = (0..m).map(|i| u[i * cols + d] * e[i]).sum();
                    for (i, ei) in e.iter_mut().enumerate() {
                        *ei -= dot * u[i * cols + d];
                    }
                }
            }
            let norm = e.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.5 {
                for (i, ei) in e.iter().enumerate() {
                    u[i * cols + c] = ei / norm;
                }
                have[c] = true;
                break;
            }
        }
    }
}

/// `tridiagonal_solve`: `x` with `T x = b` for each `[..., m]` triple of diagonals (`dl[i]`
/// is `T[i, i - 1]`, `d[i]` `T[i, i]`, `du[i]` `T[i, i + 1]`) and `[..., m, n]` `b`.
pub fn tridiagonal_solve<T: LinalgFloat>(
    dl: &ArrayViewD<T>,
    d: &ArrayViewD<T>,
    du: &ArrayViewD<T>,
    b: &ArrayViewD<T>,
    to_f64: fn(T) -> f64,
) -> ArrayD<T> {
    let (rhs, count, m, n) = matrices(b);
    let diag = |x: &ArrayViewD<T>| -> Vec<f64> { x.iter().map(|&v| to_f64(v)).collect() };
    let (dl, d, du) = (diag(dl), diag(d), diag(du));
    let mut out = Vec::with_capacity(rhs.len());
    for k in 0..count {
        let x: Vec<f64> = rhs[k * m * n..(k + 1) * m * n].iter().map(|&v| to_f64(v)).collect();
        let range = k * m..(k + 1) * m;
        let x = gtsv(&dl[range.clone()], &d[range.clone()], &du[range], x, m, n);
        out.extend(x.into_iter().map(T::from_f64));
    }
    ArrayD::from_shape_vec(b.raw_dim(), out).expect("x's shape")
}

/// `gtsv` on one system: the `m x n` row-major right-hand sides `x` replaced by the
/// solution (NaN everywhere for a singular system).
fn gtsv(dl: &[f64], d: &[f64], du: &[f64], mut x: Vec<f64>, m: usize, n: usize) -> Vec<f64> {
    if m == 0 {
        return x;
    }
    // LAPACK's names: sub[i] = T[i + 1, i], diag, sup[i] = T[i, i + 1], sup2 the fill-in.
    let mut sub: Vec<f64> = (0..m - 1).map(|i| dl[i + 1]).collect();
    let mut diag = d.to_vec();
    let mut sup: Vec<f64> = du[..m - 1].to_vec();
    let singular = vec![f64::NAN; m * n];
    for i in 0..m - 1 {
        if diag[i].abs() >= sub[i].abs() {
            if diag[i] == 0.0 {
                return singular;
            }
            let fact = sub[i] / diag[i];
            diag[i + 1] -= fact * sup[i];
            for j in 0..n {
                x[(i + 1) * n + j] -= fact * x[i * n + j];
            }
            sub[i] = 0.0;
        } else {
            let fact = diag[i] / sub[i];
            diag[i] = sub[i];
            let temp = diag[i + 1];
            diag[i + 1] = sup[i] - fact * temp;
            if i + 1 < m - 1 {
                sub[i] = sup[i + 1];
                sup[i + 1] = -fact * sub[i];
            } else {
                sub[i] = 0.0;
            }
            sup[i] = temp;
            for j in 0..n {
                let t = x[i * n + j];
                x[i * n + j] = x[(i + 1) * n + j];
                x[(i + 1) * n + j] = t - fact * x[(i + 1) * n + j];
            }
        }
    }
    if diag[m - 1] == 0.0 {
        return singular;
    }
    for j in 0..n {
        for i in (0..m).rev() {
            let mut v = x[i * n + j];
            if i + 1 < m {
                v -= sup[i] * x[(i + 1) * n + j];
            }
            if i + 2 < m {
                v -= sub[i] * x[(i + 2) * n + j];
            }
            x[i * n + j] = v / diag[i];
        }
    }
    x
}

/// `symmetric_product`: `alpha a aᵀ + beta c` for each matrix pair of `a` (`[..., m, n]`)
/// and `c` (`[..., m, m]`), every element computed (JAX's lowering off GPU: a product,
/// two scalings and a sum, in the dtype).
pub fn symmetric_product<T: LinalgFloat>(a: &ArrayViewD<T>, c: &ArrayViewD<T>, alpha: f64, beta: f64) -> ArrayD<T> {
    let (a_data, count, m, n) = matrices(a);
    let (mut out, _, _, _) = matrices(c);
    let (alpha, beta) = (T::from_f64(alpha), T::from_f64(beta));
    for b in 0..count {
        let am = &a_data[b * m * n..(b + 1) * m * n];
        let om = &mut out[b * m * m..(b + 1) * m * m];
        for i in 0..m {
            for j in 0..m {
                let mut s = T::ZERO;
                for k in 0..n {
                    s = s + am[i * n + k] * am[j * n + k];
                }
                om[i * m + j] = alpha * s + beta * om[i * m + j];
            }
        }
    }
    ArrayD::from_shape_vec(c.raw_dim(), out).expect("c's shape")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr2, ArrayD, IxDyn};

    fn dyn2(a: ndarray::Array2<f64>) -> ArrayD<f64> {
        a.into_dyn()
    }

    #[test]
    fn svd_reconstructs_each_shape_with_orthonormal_vectors() {
        let x = [[3.0, 1.0, -2.0], [0.5, 4.0, 1.0], [2.0, -1.0, 0.0], [1.0, 1.0, 1.0]];
        let tall = arr2(&x);
        let rank_one = arr2(&[[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]);
        for a in [tall.clone(), tall.t().to_owned(), rank_one.clone(), rank_one.t().to_owned()] {
            let (m, n) = a.dim();
            for full_matrices in [false, true] {
                let p = Svd { full_matrices, compute_uv: true, subset_by_index: None, algorithm: None };
                let outs = svd(&a.clone().into_dyn().view(), &p, |x| x);
                let s = outs[0].clone().into_dimensionality::<ndarray::Ix1>().unwrap();
                let u = outs[1].clone().into_dimensionality::<ndarray::Ix2>().unwrap();
                let vt = outs[2].clone().into_dimensionality::<ndarray::Ix2>().unwrap();
                let k = m.min(n);
                assert!(s.windows(2).into_iter().all(|w| w[0] >= w[1]), "descending: {s}");
                let mut us = u.slice(ndarray::s![.., ..k]).to_owned();
                for j in 0..k {
                    us.column_mut(j).mapv_inplace(|x| x * s[j]);
                }
                let back = us.dot(&vt.slice(ndarray::s![..k, ..]));
                assert!((&back - &a).iter().all(|d| d.abs() < 1e-12), "{back} != {a}");
                let eye_u = u.t().dot(&u);
                let eye_v = vt.dot(&vt.t());
                for (e, size) in [(eye_u, u.ncols()), (eye_v, vt.nrows())] {
                    assert!((&e - &ndarray::Array2::<f64>::eye(size)).iter().all(|d| d.abs() < 1e-12), "{e}");
                }
            }
        }
        let nan = arr2(&[[f64::NAN, 1.0], [0.0, 1.0]]).into_dyn();
        let p = Svd { full_matrices: false, compute_uv: false, subset_by_index: None, algorithm: None };
        assert!(svd(&nan.view(), &p, |x| x)[0].iter().all(|x| x.is_nan()));
    }

    #[test]
    fn tridiagonal_solve_pivots_and_refuses_a_singular_system() {
        // T = [[1, 4, 0], [3, 2, 1], [0, 5, 6]]: the first column pivots on the row below.
        let dl = ndarray::arr1(&[9.0, 3.0, 5.0]).into_dyn();
        let d = ndarray::arr1(&[1.0, 2.0, 6.0]).into_dyn();
        let du = ndarray::arr1(&[4.0, 1.0, 7.0]).into_dyn();
        let t = arr2(&[[1.0, 4.0, 0.0], [3.0, 2.0, 1.0], [0.0, 5.0, 6.0]]);
        let b = arr2(&[[1.0, 2.0], [0.5, -1.0], [3.0, 4.0]]);
        let x = tridiagonal_solve(&dl.view(), &d.view(), &du.view(), &b.clone().into_dyn().view(), |x| x);
        let x = x.into_dimensionality::<ndarray::Ix2>().unwrap();
        assert!((t.dot(&x) - &b).iter().all(|e| e.abs() < 1e-12), "{x}");
        let zero = ndarray::arr1(&[0.0, 0.0, 0.0]).into_dyn();
        let x = tridiagonal_solve(&zero.view(), &zero.view(), &zero.view(), &b.into_dyn().view(), |x| x);
        assert!(x.iter().all(|v| v.is_nan()));
    }

    #[test]
    fn cholesky_factors_and_refuses_what_is_not_positive_definite() {
        let a = dyn2(arr2(&[[4.0, 9.0], [2.0, 5.0]]));
        let l = cholesky(&a.view());
        // Lower part: [[2, .], [1, 2]]; the upper part is the operand's.
        assert_eq!(l, dyn2(arr2(&[[2.0, 9.0], [1.0, 2.0]])));
        let bad = dyn2(arr2(&[[1.0, 0.0], [2.0, 1.0]]));
        assert!(cholesky(&bad.view()).iter().all(|x| x.is_nan()));
    }

    #[test]
    fn triangular_solves_each_side_and_transpose() {
        let a = dyn2(arr2(&[[2.0, 7.0], [1.0, 4.0]])); // lower part [[2, 0], [1, 4]]
        let lower_a = arr2(&[[2.0, 0.0], [1.0, 4.0]]);
        let b = arr2(&[[2.0, 6.0], [9.0, 5.0]]);
        for left_side in [true, false] {
            for transpose_a in [true, false] {
                let t =
                    TriangularSolve { left_side, lower: true, transpose_a, conjugate_a: false, unit_diagonal: false };
                let x = triangular_solve(&t, &a.view(), &b.clone().into_dyn().view());
                let x = x.into_dimensionality::<ndarray::Ix2>().unwrap();
                let op = if transpose_a { lower_a.t().to_owned() } else { lower_a.clone() };
                let back = if left_side { op.dot(&x) } else { x.dot(&op) };
                assert!((back - &b).iter().all(|e| e.abs() < 1e-12), "{left_side} {transpose_a}");
            }
        }
        let t = TriangularSolve {
            left_side: true,
            lower: true,
            transpose_a: false,
            conjugate_a: false,
            unit_diagonal: true,
        };
        let x =
            triangular_solve(&t, &a.view(), &ArrayD::from_shape_vec(IxDyn(&[2, 1]), vec![1.0, 3.0]).unwrap().view());
        assert_eq!(x.iter().copied().collect::<Vec<_>>(), vec![1.0, 2.0]);
    }

    #[test]
    fn lu_pivots_as_getrf_and_reconstructs() {
        // Column 0's largest magnitude is in row 2 (and again in row 3: the first wins).
        let a = dyn2(arr2(&[[1.0, 2.0, 3.0], [-2.0, 1.0, 0.5], [4.0, 1.0, 2.0], [-4.0, 3.0, 1.0]]));
        let (lu_, piv, perm) = lu(&a.view());
        assert_eq!(piv.iter().copied().collect::<Vec<_>>()[0], 2);
        let (m, n) = (4, 3);
        let lu2 = lu_.into_dimensionality::<ndarray::Ix2>().unwrap();
        let mut l = ndarray::Array2::<f64>::zeros((m, n));
        let mut u = ndarray::Array2::<f64>::zeros((n, n));
        for i in 0..m {
            for j in 0..n {
                if i > j {
                    l[[i, j]] = lu2[[i, j]];
                } else {
                    u[[i, j]] = lu2[[i, j]];
                }
                if i == j {
                    l[[i, j]] = 1.0;
                }
            }
        }
        let a2 = a.into_dimensionality::<ndarray::Ix2>().unwrap();
        let back = l.dot(&u);
        for (i, &p) in perm.iter().enumerate() {
            for j in 0..n {
                assert!((back[[i, j]] - a2[[p as usize, j]]).abs() < 1e-12);
            }
        }
        // The permutation is the one the pivots make.
        let again = lu_pivots_to_permutation(&piv.view(), m);
        assert_eq!(again, perm);
    }

    #[test]
    fn pivots_to_permutation_swaps_in_order() {
        let p = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![2, 2, 1, 1]).unwrap();
        let perm = lu_pivots_to_permutation(&p.view(), 3);
        assert_eq!(perm.iter().copied().collect::<Vec<_>>(), vec![2, 0, 1, 1, 0, 2]);
    }

    #[test]
    fn qr_reconstructs_with_lapack_signs() {
        let a = dyn2(arr2(&[[1.0, 2.0, 0.5], [3.0, -1.0, 2.0], [0.0, 4.0, 1.0], [2.0, 1.0, -3.0]]));
        for (full_matrices, pivoting) in [(false, false), (true, false), (false, true)] {
            let params = Qr { full_matrices, pivoting, use_magma: None };
            let (q, r, p) = qr(&a.view(), &params);
            let q = q.into_dimensionality::<ndarray::Ix2>().unwrap();
            let r = r.into_dimensionality::<ndarray::Ix2>().unwrap();
            // Orthonormal columns, and q r equal to the (permuted) columns of a.
            let qtq = q.t().dot(&q);
            for i in 0..qtq.nrows() {
                for j in 0..qtq.ncols() {
                    assert!((qtq[[i, j]] - f64::from(u8::from(i == j))).abs() < 1e-12);
                }
            }
            let back = q.dot(&r);
            let a2 = a.clone().into_dimensionality::<ndarray::Ix2>().unwrap();
            let cols: Vec<usize> = p.map_or((0..3).collect(), |p| p.iter().map(|&c| c as usize).collect());
            for i in 0..4 {
                for (j, &c) in cols.iter().enumerate() {
                    assert!((back[[i, j]] - a2[[i, c]]).abs() < 1e-12);
                }
            }
            // LAPACK's sign: the first column's alpha (1.0) is positive, so r[0][0] < 0.
            if !pivoting {
                assert!(r[[0, 0]] < 0.0);
            }
        }
    }

    #[test]
    fn eigh_diagonalizes_from_one_triangle() {
        // The lower triangle of [[2, 1, 0], [1, 3, 1], [0, 1, 4]]; the upper part is junk.
        let a = dyn2(arr2(&[[2.0, 9.0, 9.0], [1.0, 3.0, 9.0], [0.0, 1.0, 4.0]]));
        let (v, w) = eigh(&a.view(), true, |x| x, |x| x);
        let w: Vec<f64> = w.iter().copied().collect();
        assert!(w.windows(2).all(|p| p[0] <= p[1]), "{w:?}");
        let s = arr2(&[[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]);
        let v = v.into_dimensionality::<ndarray::Ix2>().unwrap();
        let back = v.dot(&ndarray::Array2::from_diag(&ndarray::arr1(&w))).dot(&v.t());
        assert!((back - &s).iter().all(|e| e.abs() < 1e-12));
        assert!((w.iter().sum::<f64>() - 9.0).abs() < 1e-12);
    }

    #[test]
    fn symmetric_product_scales_both_terms() {
        let a = dyn2(arr2(&[[1.0, 2.0], [3.0, 4.0]]));
        let c = dyn2(arr2(&[[1.0, 0.0], [0.0, 1.0]]));
        let out = symmetric_product(&a.view(), &c.view(), 2.0, 0.5);
        assert_eq!(out, dyn2(arr2(&[[10.5, 22.0], [22.0, 50.5]])));
    }
}
