//! `cholesky` and `triangular_solve`: the shared kernels of `remat_math::linalg` over the
//! operands' matrices (f32 or f64, as the shape rules admit).

use remat_ir::{Array, Primitive, TriangularSolve};
use remat_math::linalg;

use crate::indexing::check;

pub(crate) fn cholesky(args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Cholesky, args)?;
    match args[0] {
        Array::F32(a) => Ok(Array::F32(linalg::cholesky(&a.view()))),
        Array::F64(a) => Ok(Array::F64(linalg::cholesky(&a.view()))),
        other => Err(format!("cholesky: {} operands are not supported", other.dtype())),
    }
}

pub(crate) fn triangular_solve(t: &TriangularSolve, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::TriangularSolve(*t), args)?;
    match (args[0], args[1]) {
        (Array::F32(a), Array::F32(b)) => Ok(Array::F32(linalg::triangular_solve(t, &a.view(), &b.view()))),
        (Array::F64(a), Array::F64(b)) => Ok(Array::F64(linalg::triangular_solve(t, &a.view(), &b.view()))),
        (a, b) => Err(format!("triangular_solve: {} and {} operands are not supported", a.dtype(), b.dtype())),
    }
}
