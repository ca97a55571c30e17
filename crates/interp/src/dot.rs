//! `dot_general` with any dimension numbers.
//!
//! Both operands are laid out as standard `(batch, M, K)` and `(batch, K, N)` arrays; floats
//! multiply each batch with ndarray's matrix product (matrixmultiply's blocked kernels, so a
//! 1024x1024x1024 product takes a fraction of a second), `i32` (wrapping) and `bool` (or of
//! ands) with a plain loop. Output axes: batch, then lhs free axes in order, then rhs free
//! axes in order. Operands are first converted to `preferred_element_type`, which is the
//! dtype the products accumulate in.

use std::borrow::Cow;

use ndarray::linalg::general_mat_mul;
use ndarray::LinalgScalar;
use ndarray::{Array3, ArrayD, Axis, IxDyn};
use remat_ir::{Array, DType, DotDimensionNumbers};

use crate::elem::{checked_size, operands, typed, Elem, Num};
use crate::elementwise::convert_element_type;

pub(crate) fn dot_general(
    dn: &DotDimensionNumbers,
    preferred_element_type: Option<DType>,
    args: &[&Array],
) -> Result<Array, String> {
    let [lhs, rhs] = operands(args)?;
    if lhs.dtype() != rhs.dtype() && preferred_element_type.is_none() {
        return Err(format!("operands have different dtypes: {} and {}", lhs.aval(), rhs.aval()));
    }
    let (ls, rs) = (lhs.shape(), rhs.shape());
    let DotDimensionNumbers { lhs_contracting: lc, rhs_contracting: rc, lhs_batch: lb, rhs_batch: rb } = dn;
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err(format!("dimension numbers (({lc:?}, {rc:?}), ({lb:?}, {rb:?})) pair up unequal numbers of axes"));
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
    checked_size(&out_shape)?;
    let dims = |shape: &[usize], axes: &[usize]| -> usize { axes.iter().map(|&a| shape[a]).product() };
    let (b, m, k, n) = (dims(ls, lb), dims(ls, &lf), dims(ls, lc), dims(rs, &rf));

    let layout = Layout {
        lhs_order: [lb.as_slice(), &lf, lc].concat(),
        rhs_order: [rb.as_slice(), rc, &rf].concat(),
        b,
        m,
        k,
        n,
    };

    let out_dtype = preferred_element_type.unwrap_or(lhs.dtype());
    // 16-bit floats multiply and accumulate in f32 and round once at the end, as XLA's CPU
    // dot does.
    let compute_dtype = if out_dtype.is_narrow_float() { DType::F32 } else { out_dtype };
    let (lhs, rhs) = (converted(lhs, compute_dtype)?, converted(rhs, compute_dtype)?);
    let (lhs, rhs) = (lhs.as_ref(), rhs.as_ref());
    // Integers and complex numbers: a multiply-add loop in `Num`'s arithmetic.
    fn int_loop<T: Num + Default>(l: Array3<T>, r: Array3<T>) -> Array3<T> {
        matmul_loop(l, r, |acc, x, y| acc.add(x.mul(y)))
    }
    let product = match compute_dtype {
        DType::F32 => Array::F32(layout.product::<f32>(lhs, rhs, &out_shape, matmul_float)?),
        DType::F64 => Array::F64(layout.product::<f64>(lhs, rhs, &out_shape, matmul_float)?),
        DType::I8 => Array::I8(layout.product::<i8>(lhs, rhs, &out_shape, int_loop)?),
        DType::I16 => Array::I16(layout.product::<i16>(lhs, rhs, &out_shape, int_loop)?),
        DType::I32 => Array::I32(layout.product::<i32>(lhs, rhs, &out_shape, int_loop)?),
        DType::I64 => Array::I64(layout.product::<i64>(lhs, rhs, &out_shape, int_loop)?),
        DType::U8 => Array::U8(layout.product::<u8>(lhs, rhs, &out_shape, int_loop)?),
        DType::U32 => Array::U32(layout.product::<u32>(lhs, rhs, &out_shape, int_loop)?),
        DType::Bool => Array::Bool(
            layout.product::<bool>(lhs, rhs, &out_shape, |l, r| matmul_loop(l, r, |acc, x, y| acc | (x & y)))?,
        ),
        DType::C64 => Array::C64(layout.product::<remat_ir::c64>(lhs, rhs, &out_shape, int_loop)?),
        DType::C128 => Array::C128(layout.product::<remat_ir::c128>(lhs, rhs, &out_shape, int_loop)?),
        DType::BF16 | DType::F16 | DType::Key => {
            return Err(format!("dot_general is not defined on {}", lhs.dtype()));
        }
    };
    converted(&product, out_dtype).map(Cow::into_owned)
}

fn converted(a: &Array, dtype: DType) -> Result<Cow<'_, Array>, String> {
    if a.dtype() == dtype {
        Ok(Cow::Borrowed(a))
    } else {
        convert_element_type(dtype, &[a]).map(Cow::Owned)
    }
}

/// How the operands map onto `(b, m, k) x (b, k, n)`: the axis orders that bring each
/// operand into that layout.
struct Layout {
    lhs_order: Vec<usize>,
    rhs_order: Vec<usize>,
    b: usize,
    m: usize,
    k: usize,
    n: usize,
}

impl Layout {
    /// Lays out both operands, multiplies with `kernel`, and shapes the result.
    fn product<T: Elem>(
        &self,
        lhs: &Array,
        rhs: &Array,
        out_shape: &[usize],
        kernel: fn(Array3<T>, Array3<T>) -> Array3<T>,
    ) -> Result<ArrayD<T>, String> {
        let l = to_3d(typed::<T>(lhs)?, &self.lhs_order, (self.b, self.m, self.k))?;
        let r = to_3d(typed::<T>(rhs)?, &self.rhs_order, (self.b, self.k, self.n))?;
        kernel(l, r).into_dyn().into_shape_with_order(IxDyn(out_shape)).map_err(|e| e.to_string())
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
fn to_3d<T: Elem>(a: &ArrayD<T>, order: &[usize], dims: (usize, usize, usize)) -> Result<Array3<T>, String> {
    let permuted = a.view().permuted_axes(IxDyn(order));
    Array3::from_shape_vec(dims, permuted.iter().copied().collect()).map_err(|e| e.to_string())
}

fn matmul_float<T: Num + LinalgScalar>(lhs: Array3<T>, rhs: Array3<T>) -> Array3<T> {
    let ((b, m, k), n) = (lhs.dim(), rhs.dim().2);
    if k == 1 {
        // XLA rewrites a product of one term to a multiply: nothing adds it to +0.0, so a
        // zero product keeps its sign (`[[1e-20]] @ [[-1e-20]]` is -0.0 under FTZ).
        return Array3::from_shape_fn((b, m, n), |(bi, mi, ni)| Num::mul(lhs[[bi, mi, 0]], rhs[[bi, 0, ni]]));
    }
    let mut out = Array3::from_elem((b, m, n), T::ZERO);
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    for i in 0..b {
        general_mat_mul(
            T::ONE,
            &lhs.index_axis(Axis(0), i),
            &rhs.index_axis(Axis(0), i),
            T::ZERO,
            &mut out.index_axis_mut(Axis(0), i),
        );
    }
    out
}

fn matmul_loop<T: Elem + Default>(lhs: Array3<T>, rhs: Array3<T>, fma: fn(T, T, T) -> T) -> Array3<T> {
    let ((b, m, k), n) = (lhs.dim(), rhs.dim().2);
    Array3::from_shape_fn((b, m, n), |(bi, mi, ni)| {
        (0..k).fold(T::default(), |acc, ki| fma(acc, lhs[[bi, mi, ki]], rhs[[bi, ki, ni]]))
    })
}
