//! Whole-array rules both backends run where their results must agree bit for bit: how two
//! operands broadcast, the order a reduction folds its axes in, the multiplication order of
//! an integer power, and a product's `(batch, M, K) x (batch, K, N)` layout with its
//! multiply-add loop. The interpreter runs every dtype through them; the JIT's native steps
//! run the complex ones (`complex`), which its generated code does not compute itself.

use ndarray::{Array3, ArrayD, Axis, IxDyn, Zip};
use remat_ir::{Array, DotDimensionNumbers};

/// The shape two operands of a binary op broadcast to: equal shapes, or one a rank-0
/// scalar, or equal ranks differing only where one has extent 1.
pub fn broadcast_shapes(x: &Array, y: &Array) -> Result<Vec<usize>, String> {
    broadcast(x.shape(), y.shape())
        .ok_or_else(|| format!("operand shapes {} and {} are incompatible", x.aval(), y.aval()))
}

/// JAX's `broadcasting_shape_rule` on two shapes: a scalar broadcasts against anything;
/// otherwise equal ranks whose extents are equal or 1. `None` where they do not broadcast.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    match (a.len(), b.len()) {
        (0, _) => Some(b.to_vec()),
        (_, 0) => Some(a.to_vec()),
        (m, n) if m != n => None,
        _ => a
            .iter()
            .zip(b)
            .map(|(&m, &n)| match (m, n) {
                _ if m == n => Some(m),
                (1, n) => Some(n),
                (m, 1) => Some(m),
                _ => None,
            })
            .collect(),
    }
}

/// `f` applied elementwise to `a` and `b` broadcast to `shape`.
pub fn zip_with<A: Copy, B: Copy, C>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    shape: &[usize],
    f: impl Fn(A, B) -> C,
) -> Result<ArrayD<C>, String> {
    let view = |s: &[usize]| format!("cannot broadcast shape {s:?} to {shape:?}");
    let a = a.broadcast(IxDyn(shape)).ok_or_else(|| view(a.shape()))?;
    let b = b.broadcast(IxDyn(shape)).ok_or_else(|| view(b.shape()))?;
    Ok(Zip::from(&a).and(&b).map_collect(|&x, &y| f(x, y)))
}

/// Folds `a` over the ascending, distinct, in-range `axes` with `f`, starting from `init`
/// at each output element: the highest axis first, each lane from its first element on.
pub fn fold_axes<T: Copy>(a: &ArrayD<T>, axes: &[usize], init: T, f: fn(T, T) -> T) -> ArrayD<T> {
    let mut out = a.clone();
    // The highest axis first, so the lower axis numbers stay valid.
    for &ax in axes.iter().rev() {
        out = out.fold_axis(Axis(ax), init, |&acc, &x| f(acc, x));
    }
    out
}

/// `x ** y` by repeated squaring, multiplying in the same order as JAX's `_integer_pow`;
/// a negative `y` gives `one / x ** -y`.
pub fn integer_pow<T: Copy>(x: T, y: i32, one: T, mul: fn(T, T) -> T, div: fn(T, T) -> T) -> T {
    let mut n = y.unsigned_abs();
    let mut base = x;
    let mut acc: Option<T> = None;
    while n > 0 {
        if n & 1 == 1 {
            acc = Some(acc.map_or(base, |a| mul(a, base)));
        }
        n >>= 1;
        if n > 0 {
            base = mul(base, base);
        }
    }
    let acc = acc.unwrap_or(one);
    if y < 0 {
        div(one, acc)
    } else {
        acc
    }
}

/// How `dot_general`'s operands map onto `(b, m, k) x (b, k, n)`: the axis orders that
/// bring each operand into that layout, and the result's shape (batch axes, then the lhs
/// free axes in order, then the rhs free axes in order).
#[derive(Debug)]
pub struct ProductLayout {
    lhs_order: Vec<usize>,
    rhs_order: Vec<usize>,
    /// The extents `(b, m, k, n)`.
    pub dims: (usize, usize, usize, usize),
    /// The result's shape.
    pub out_shape: Vec<usize>,
}

impl ProductLayout {
    /// The layout of a product of operands of shapes `ls` and `rs` (described by `lhs` and
    /// `rhs` in errors), checking the dimension numbers against them.
    pub fn new(dn: &DotDimensionNumbers, lhs: &Array, rhs: &Array) -> Result<ProductLayout, String> {
        let (ls, rs) = (lhs.shape(), rhs.shape());
        let DotDimensionNumbers { lhs_contracting: lc, rhs_contracting: rc, lhs_batch: lb, rhs_batch: rb } = dn;
        if lb.len() != rb.len() || lc.len() != rc.len() {
            return Err(format!(
                "dimension numbers (({lc:?}, {rc:?}), ({lb:?}, {rb:?})) pair up unequal numbers of axes"
            ));
        }
        distinct_axes(lhs, lb.iter().chain(lc), "lhs")?;
        distinct_axes(rhs, rb.iter().chain(rc), "rhs")?;
        for (&l, &r) in lb.iter().zip(rb).chain(lc.iter().zip(rc)) {
            if ls[l] != rs[r] {
                return Err(format!(
                    "lhs axis {l} of {} and rhs axis {r} of {} have different extents",
                    lhs.aval(),
                    rhs.aval()
                ));
            }
        }
        let free = |rank: usize, batch: &[usize], contracting: &[usize]| -> Vec<usize> {
            (0..rank).filter(|k| !batch.contains(k) && !contracting.contains(k)).collect()
        };
        let (lf, rf) = (free(ls.len(), lb, lc), free(rs.len(), rb, rc));
        let extents = |shape: &[usize], axes: &[usize]| -> Vec<usize> { axes.iter().map(|&a| shape[a]).collect() };
        let out_shape: Vec<usize> = [extents(ls, lb), extents(ls, &lf), extents(rs, &rf)].concat();
        let dims = |shape: &[usize], axes: &[usize]| -> usize { axes.iter().map(|&a| shape[a]).product() };
        Ok(ProductLayout {
            lhs_order: [lb.as_slice(), &lf, lc].concat(),
            rhs_order: [rb.as_slice(), rc, &rf].concat(),
            dims: (dims(ls, lb), dims(ls, &lf), dims(ls, lc), dims(rs, &rf)),
            out_shape,
        })
    }

    /// Lays out both operands, multiplies with `kernel`, and shapes the result.
    pub fn product<T: Copy>(
        &self,
        lhs: &ArrayD<T>,
        rhs: &ArrayD<T>,
        kernel: impl Fn(Array3<T>, Array3<T>) -> Array3<T>,
    ) -> Result<ArrayD<T>, String> {
        let (b, m, k, n) = self.dims;
        let l = to_3d(lhs, &self.lhs_order, (b, m, k))?;
        let r = to_3d(rhs, &self.rhs_order, (b, k, n))?;
        kernel(l, r).into_dyn().into_shape_with_order(IxDyn(&self.out_shape)).map_err(|e| e.to_string())
    }
}

/// Checks that `axes` are distinct axes of `a`.
fn distinct_axes<'a>(a: &Array, axes: impl Iterator<Item = &'a usize>, side: &str) -> Result<(), String> {
    let mut seen = vec![false; a.shape().len()];
    for &ax in axes {
        if ax >= seen.len() || std::mem::replace(&mut seen[ax], true) {
            return Err(format!(
                "{side} batch and contracting axes must be distinct axes of {}, found axis {ax} twice or out of range",
                a.aval()
            ));
        }
    }
    Ok(())
}

/// `a` with its axes permuted to `order`, in a standard-layout array of `dims`.
fn to_3d<T: Copy>(a: &ArrayD<T>, order: &[usize], dims: (usize, usize, usize)) -> Result<Array3<T>, String> {
    let permuted = a.view().permuted_axes(IxDyn(order));
    Array3::from_shape_vec(dims, permuted.iter().copied().collect()).map_err(|e| e.to_string())
}

/// The product of `(b, m, k)` and `(b, k, n)` arrays as a multiply-add loop: each result
/// element folds `fma(acc, lhs, rhs)` over `k` in order, from `zero`.
pub fn matmul_loop<T: Copy>(lhs: Array3<T>, rhs: Array3<T>, zero: T, fma: fn(T, T, T) -> T) -> Array3<T> {
    let ((b, m, k), n) = (lhs.dim(), rhs.dim().2);
    Array3::from_shape_fn((b, m, n), |(bi, mi, ni)| {
        (0..k).fold(zero, |acc, ki| fma(acc, lhs[[bi, mi, ki]], rhs[[bi, ki, ni]]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_pow_multiplies_in_jaxs_order() {
        let pow_f32 = |x: f32, y| integer_pow(x, y, 1.0, |a, b| a * b, |a, b| a / b);
        let pow_i32 = |x: i32, y| integer_pow(x, y, 1, i32::wrapping_mul, |a, b| a / b);
        // x^5 = x * (x^2)^2, as JAX's repeated squaring computes it.
        let x = 1.1f32;
        assert_eq!(pow_f32(x, 5).to_bits(), (x * ((x * x) * (x * x))).to_bits());
        assert_eq!(pow_i32(3, 21), 3i32.wrapping_pow(21));
        assert_eq!(integer_pow(0.5f64, -2, 1.0, |a, b| a * b, |a, b| a / b), 4.0);
        assert_eq!(pow_i32(7, 0), 1);
    }

    #[test]
    fn fold_axes_folds_the_highest_axis_first() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1, 2, 3, 4, 5, 6]).expect("2x3");
        // Subtraction is not associative: the order shows.
        let out = fold_axes(&a, &[0, 1], 100, |acc, x| acc - x);
        // Axis 1 first: 100-1-2-3 = 94 and 100-4-5-6 = 85, then 100-94-85.
        assert_eq!(out.into_raw_vec_and_offset().0, vec![100 - 94 - 85]);
    }
}
