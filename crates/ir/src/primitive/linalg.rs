//! Linear algebra: `cholesky` and `triangular_solve` (JAX's `jax/_src/lax/linalg.py`), over
//! the last two axes, the leading ones a batch.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`; `parse_*`)
//! and its shape rule (`*_shape`, JAX's rule). Results land in device memory.

use super::params::{ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::TriangularSolve;
use crate::shape::{arity, device, ensure, ShapeError};
use crate::types::{Aval, DType};

/// The float dtypes JAX's linear algebra takes (`_float`; complex ones are not remat's).
fn linalg_float(name: &'static str, x: &Aval) -> Result<(), ShapeError> {
    ensure!(matches!(x.dtype, DType::F32 | DType::F64), name, "{x} must be f32 or f64");
    Ok(())
}

/// `x` is a batch of square matrices: `[..., n, n]`.
fn square(name: &'static str, x: &Aval) -> Result<usize, ShapeError> {
    ensure!(x.rank() >= 2, name, "{x} must have at least two axes");
    let (m, n) = (x.shape[x.rank() - 2], x.shape[x.rank() - 1]);
    ensure!(m == n, name, "{x} must be square in its last two axes");
    Ok(n)
}

// `cholesky x`: no parameters; the lower Cholesky factor of each symmetric matrix of `x`
// (its strictly upper part unspecified; a batch member that is not positive definite is NaN).

pub(super) fn cholesky_params() -> Params {
    Vec::new()
}

pub(crate) fn cholesky_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("cholesky", in_avals)?;
    linalg_float("cholesky", x)?;
    square("cholesky", x)?;
    Ok(device(x.dtype, x.shape.clone()))
}

// `triangular_solve[conjugate_a=False left_side=True lower=True transpose_a=False
// unit_diagonal=False] a b`: `x` with `op(a) x = b` (or `x op(a) = b`), batched over the
// leading axes of both.

pub(super) fn triangular_solve_params(t: &TriangularSolve) -> Params {
    vec![
        ("conjugate_a", Param::Bool(t.conjugate_a)),
        ("left_side", Param::Bool(t.left_side)),
        ("lower", Param::Bool(t.lower)),
        ("transpose_a", Param::Bool(t.transpose_a)),
        ("unit_diagonal", Param::Bool(t.unit_diagonal)),
    ]
}

pub(super) fn parse_triangular_solve(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::TriangularSolve(TriangularSolve {
        conjugate_a: p.bool("conjugate_a")?,
        left_side: p.bool("left_side")?,
        lower: p.bool("lower")?,
        transpose_a: p.bool("transpose_a")?,
        unit_diagonal: p.bool("unit_diagonal")?,
    }))
}

pub(crate) fn triangular_solve_shape(t: &TriangularSolve, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "triangular_solve";
    let [a, b] = arity(name, in_avals)?;
    linalg_float(name, a)?;
    ensure!(a.dtype == b.dtype, name, "a {a} and b {b} must have one dtype");
    let n = square(name, a)?;
    ensure!(b.rank() == a.rank(), name, "a {a} and b {b} must have the same rank");
    let r = b.rank();
    ensure!(a.shape[..r - 2] == b.shape[..r - 2], name, "a {a} and b {b} must have the same batch axes");
    let common = if t.left_side { b.shape[r - 2] } else { b.shape[r - 1] };
    ensure!(
        common == n,
        name,
        "b {b}'s {} axis must have a's size {n} (left_side={})",
        if t.left_side { "second-to-last" } else { "last" },
        if t.left_side { "True" } else { "False" }
    );
    Ok(device(b.dtype, b.shape.clone()))
}
