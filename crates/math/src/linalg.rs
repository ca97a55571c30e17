//! The kernels of `cholesky` and `triangular_solve` over batches of row-major matrices, one
//! definition for the interpreter and the JIT's runtime. Arithmetic is in the dtype, in the
//! order of the textbook algorithms (LAPACK's `potrf`/`trsm` compute the same values up to
//! rounding), and XLA CPU's conventions hold at the edges: a batch member whose matrix is not
//! positive definite factors to NaN in every element (JAX's `_replace_not_ok_with_nan`), and
//! the factor's strictly upper part is the operand's, which `potrf` leaves untouched.

use ndarray::{ArrayD, ArrayViewD};
use remat_ir::TriangularSolve;

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
}

impl LinalgFloat for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NAN: f32 = f32::NAN;
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
}

impl LinalgFloat for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NAN: f64 = f64::NAN;
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
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

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr2, ArrayD, IxDyn};

    fn dyn2(a: ndarray::Array2<f64>) -> ArrayD<f64> {
        a.into_dyn()
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
}
