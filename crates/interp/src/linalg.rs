//! `cholesky`, `triangular_solve`, `lu`, `lu_pivots_to_permutation`, `qr`, `geqrf`, `householder_product`, `ormqr`, `eigh`, `svd`,
//! `tridiagonal_solve` and
//! `symmetric_product`: the shared kernels of `remat_math::linalg` over the
//! operands' matrices (f32 or f64, as the shape rules admit).

use remat_ir::{Array, Eigh, FillValue, Primitive, Qr, Svd, TriangularSolve};
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

pub(crate) fn lu(args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Lu, args)?;
    let (lu, pivots, perm) = match args[0] {
        Array::F32(a) => {
            let (lu, p, q) = linalg::lu(&a.view());
            (Array::F32(lu), p, q)
        }
        Array::F64(a) => {
            let (lu, p, q) = linalg::lu(&a.view());
            (Array::F64(lu), p, q)
        }
        other => return Err(format!("lu: {} operands are not supported", other.dtype())),
    };
    Ok(vec![lu, Array::I32(pivots), Array::I32(perm)])
}

pub(crate) fn lu_pivots_to_permutation(permutation_size: usize, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::LuPivotsToPermutation { permutation_size }, args)?;
    match args[0] {
        Array::I32(p) => Ok(Array::I32(linalg::lu_pivots_to_permutation(&p.view(), permutation_size))),
        other => Err(format!("lu_pivots_to_permutation: {} pivots are not supported", other.dtype())),
    }
}

pub(crate) fn qr(params: &Qr, args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Qr(*params), args)?;
    let (q, r, p) = match args[0] {
        Array::F32(a) => {
            let (q, r, p) = linalg::qr(&a.view(), params);
            (Array::F32(q), Array::F32(r), p)
        }
        Array::F64(a) => {
            let (q, r, p) = linalg::qr(&a.view(), params);
            (Array::F64(q), Array::F64(r), p)
        }
        other => return Err(format!("qr: {} operands are not supported", other.dtype())),
    };
    let mut outs = vec![q, r];
    outs.extend(p.map(Array::I32));
    Ok(outs)
}

pub(crate) fn eigh(params: &Eigh, args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Eigh(*params), args)?;
    match args[0] {
        Array::F32(a) => {
            let (v, w) = linalg::eigh(&a.view(), params.lower, f64::from, |x| x as f32);
            Ok(vec![Array::F32(v), Array::F32(w)])
        }
        Array::F64(a) => {
            let (v, w) = linalg::eigh(&a.view(), params.lower, |x| x, |x| x);
            Ok(vec![Array::F64(v), Array::F64(w)])
        }
        other => Err(format!("eigh: {} operands are not supported", other.dtype())),
    }
}

pub(crate) fn symmetric_product(alpha: FillValue, beta: FillValue, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::SymmetricProduct { alpha, beta }, args)?;
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    match (args[0], args[1]) {
        (Array::F32(a), Array::F32(c)) => Ok(Array::F32(linalg::symmetric_product(&a.view(), &c.view(), alpha, beta))),
        (Array::F64(a), Array::F64(c)) => Ok(Array::F64(linalg::symmetric_product(&a.view(), &c.view(), alpha, beta))),
        (a, c) => Err(format!("symmetric_product: {} and {} operands are not supported", a.dtype(), c.dtype())),
    }
}

pub(crate) fn svd(params: &Svd, args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Svd(*params), args)?;
    match args[0] {
        Array::F32(a) => Ok(linalg::svd(&a.view(), params, f64::from).into_iter().map(Array::F32).collect()),
        Array::F64(a) => Ok(linalg::svd(&a.view(), params, |x| x).into_iter().map(Array::F64).collect()),
        other => Err(format!("svd: {} operands are not supported", other.dtype())),
    }
}

pub(crate) fn tridiagonal_solve(perturb_singular: bool, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::TridiagonalSolve { perturb_singular }, args)?;
    match args {
        [Array::F32(dl), Array::F32(d), Array::F32(du), Array::F32(b)] => {
            Ok(Array::F32(linalg::tridiagonal_solve(&dl.view(), &d.view(), &du.view(), &b.view(), f64::from)))
        }
        [Array::F64(dl), Array::F64(d), Array::F64(du), Array::F64(b)] => {
            Ok(Array::F64(linalg::tridiagonal_solve(&dl.view(), &d.view(), &du.view(), &b.view(), |x| x)))
        }
        _ => Err("tridiagonal_solve: operands must be f32 or f64 of one dtype".into()),
    }
}

pub(crate) fn geqrf(args: &[&Array]) -> Result<Vec<Array>, String> {
    check(&Primitive::Geqrf, args)?;
    match args[0] {
        Array::F32(a) => {
            let (f, taus) = linalg::geqrf(&a.view());
            Ok(vec![Array::F32(f), Array::F32(taus)])
        }
        Array::F64(a) => {
            let (f, taus) = linalg::geqrf(&a.view());
            Ok(vec![Array::F64(f), Array::F64(taus)])
        }
        other => Err(format!("geqrf: {} operands are not supported", other.dtype())),
    }
}

pub(crate) fn householder_product(args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::HouseholderProduct, args)?;
    match args {
        [Array::F32(a), Array::F32(t)] => Ok(Array::F32(linalg::householder_product(&a.view(), &t.view()))),
        [Array::F64(a), Array::F64(t)] => Ok(Array::F64(linalg::householder_product(&a.view(), &t.view()))),
        _ => Err("householder_product: operands must be f32 or f64 of one dtype".into()),
    }
}

pub(crate) fn ormqr(left: bool, transpose: bool, args: &[&Array]) -> Result<Array, String> {
    check(&Primitive::Ormqr { left, transpose }, args)?;
    match args {
        [Array::F32(a), Array::F32(t), Array::F32(c)] => {
            Ok(Array::F32(linalg::ormqr(&a.view(), &t.view(), &c.view(), left, transpose)))
        }
        [Array::F64(a), Array::F64(t), Array::F64(c)] => {
            Ok(Array::F64(linalg::ormqr(&a.view(), &t.view(), &c.view(), left, transpose)))
        }
        _ => Err("ormqr: operands must be f32 or f64 of one dtype".into()),
    }
}
