//! `dot_general` with any dimension numbers.
//!
//! Both operands are laid out as standard `(batch, M, K)` and `(batch, K, N)` arrays; floats
//! multiply each batch with ndarray's matrix product (matrixmultiply's blocked kernels, so a
//! 1024x1024x1024 product takes a fraction of a second), integers (wrapping) and `bool` (or
//! of ands) with a plain loop, complex numbers with `remat_math::complex`'s loop (which the
//! JIT runs too). The layout is `remat_math::arrays::ProductLayout`. Output axes: batch, then lhs free axes in order, then rhs free
//! axes in order. Operands are first converted to `preferred_element_type`, which is the
//! dtype the products accumulate in.

use std::borrow::Cow;

use ndarray::linalg::general_mat_mul;
use ndarray::LinalgScalar;
use ndarray::{Array3, Axis};
use remat_ir::{Array, DType, DotDimensionNumbers};

use remat_math::arrays::{matmul_loop, ProductLayout};

use crate::elem::{checked_size, operands, typed, Num};
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
    let layout = ProductLayout::new(dn, lhs, rhs)?;
    checked_size(&layout.out_shape)?;

    let out_dtype = preferred_element_type.unwrap_or(lhs.dtype());
    // 16-bit floats multiply and accumulate in f32 and round once at the end, as XLA's CPU
    // dot does.
    let compute_dtype = if out_dtype.is_narrow_float() { DType::F32 } else { out_dtype };
    let (lhs, rhs) = (converted(lhs, compute_dtype)?, converted(rhs, compute_dtype)?);
    let (lhs, rhs) = (lhs.as_ref(), rhs.as_ref());
    // Integers: a multiply-add loop in `Num`'s (wrapping) arithmetic.
    fn int_loop<T: Num>(l: Array3<T>, r: Array3<T>) -> Array3<T> {
        matmul_loop(l, r, T::ZERO, |acc, x, y| acc.add(x.mul(y)))
    }
    let product =
        match compute_dtype {
            DType::F32 => Array::F32(layout.product::<f32>(typed(lhs)?, typed(rhs)?, matmul_float)?),
            DType::F64 => Array::F64(layout.product::<f64>(typed(lhs)?, typed(rhs)?, matmul_float)?),
            DType::I8 => Array::I8(layout.product::<i8>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::I16 => Array::I16(layout.product::<i16>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::I32 => Array::I32(layout.product::<i32>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::I64 => Array::I64(layout.product::<i64>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::U8 => Array::U8(layout.product::<u8>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::U32 => Array::U32(layout.product::<u32>(typed(lhs)?, typed(rhs)?, int_loop)?),
            DType::Bool => Array::Bool(layout.product::<bool>(typed(lhs)?, typed(rhs)?, |l, r| {
                matmul_loop(l, r, false, |acc, x, y| acc | (x & y))
            })?),
            DType::C64 | DType::C128 => remat_math::complex::dot_general(&layout, lhs, rhs)?,
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
