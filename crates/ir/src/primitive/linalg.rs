//! Linear algebra: `cholesky`, `triangular_solve`, `lu`, `lu_pivots_to_permutation`, `qr`,
//! `geqrf`, `householder_product`, `ormqr`, `eigh`, `svd`, `tridiagonal_solve` and `symmetric_product`
//! (JAX's `jax/_src/lax/linalg.py`), over the last two axes (the last one for the pivots),
//! the leading ones a batch.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`; `parse_*`)
//! and its shape rule (`*_shape`, JAX's rule). Results land in device memory.

use super::params::{ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::{Eigh, EighAlgorithm, FillValue, Qr, Svd, SvdAlgorithm, TriangularSolve};
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

// `lu x`: no parameters; for each `m x n` matrix of `x`, `(lu, pivots, permutation)`: the
// unit-lower factor below the diagonal and the upper factor on and above it, the
// `min(m, n)` row swaps of partial pivoting (i32) and the permutation they make (i32, `m`).

pub(crate) fn lu_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "lu";
    let [x] = arity(name, in_avals)?;
    linalg_float(name, x)?;
    ensure!(x.rank() >= 2, name, "{x} must have at least two axes");
    let r = x.rank();
    let (m, n) = (x.shape[r - 2], x.shape[r - 1]);
    let batch = &x.shape[..r - 2];
    let mut pivots = batch.to_vec();
    pivots.push(m.min(n));
    let mut permutation = batch.to_vec();
    permutation.push(m);
    Ok(vec![Aval::new(x.dtype, x.shape.clone()), Aval::new(DType::I32, pivots), Aval::new(DType::I32, permutation)])
}

// `lu_pivots_to_permutation[permutation_size=m] pivots`: the permutation of `0..m` that
// swapping entry `i` with entry `pivots[i]`, in order, makes (batched over leading axes).

pub(crate) fn lu_pivots_to_permutation_shape(
    permutation_size: usize,
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "lu_pivots_to_permutation";
    let [p] = arity(name, in_avals)?;
    ensure!(p.dtype == DType::I32, name, "pivots {p} must be i32");
    ensure!(p.rank() >= 1, name, "pivots {p} must have at least one axis");
    let k = p.shape[p.rank() - 1];
    ensure!(
        permutation_size >= k,
        name,
        "Output permutation size {permutation_size} has to exceed the trailing dimension of the pivots {p}"
    );
    let mut shape = p.shape.clone();
    *shape.last_mut().expect("rank >= 1") = permutation_size;
    Ok(device(DType::I32, shape))
}

// `qr[full_matrices=True pivoting=False use_magma=None] x`: for each `m x n` matrix,
// `q` (`m x k`) with orthonormal columns and upper-trapezoidal `r` (`k x n`), `k = m` with
// `full_matrices`, else `min(m, n)`; with `pivoting`, the `i32` column permutation `p`
// (`n`) with `x[:, p] = q r`.

pub(super) fn qr_params(q: &Qr) -> Params {
    vec![
        ("full_matrices", Param::Bool(q.full_matrices)),
        ("pivoting", Param::Bool(q.pivoting)),
        ("use_magma", q.use_magma.map_or(Param::None, Param::Bool)),
    ]
}

pub(super) fn parse_qr(p: &mut ParamReader) -> Result<Primitive, String> {
    let full_matrices = p.bool("full_matrices")?;
    let pivoting = p.bool("pivoting")?;
    let use_magma = match p.take("use_magma")? {
        Param::None => None,
        Param::Bool(b) => Some(b),
        other => return Err(format!("qr: parameter `use_magma` must be None, True or False, found {other}")),
    };
    Ok(Primitive::Qr(Qr { full_matrices, pivoting, use_magma }))
}

pub(crate) fn qr_shape(q: &Qr, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "qr";
    let [x] = arity(name, in_avals)?;
    linalg_float(name, x)?;
    ensure!(x.rank() >= 2, name, "{x} must have at least two axes");
    let r = x.rank();
    let (m, n) = (x.shape[r - 2], x.shape[r - 1]);
    let k = if q.full_matrices { m } else { m.min(n) };
    let batch = &x.shape[..r - 2];
    let with = |last: &[usize]| [batch, last].concat();
    let mut outs = vec![Aval::new(x.dtype, with(&[m, k])), Aval::new(x.dtype, with(&[k, n]))];
    if q.pivoting {
        outs.push(Aval::new(DType::I32, with(&[n])));
    }
    Ok(outs)
}

// `geqrf x`: no parameters; for each `m x n` matrix, LAPACK's `geqrf`: the matrix with `r`
// on and above the diagonal and the Householder vectors below it, and the `min(m, n)` `tau`s.

pub(crate) fn geqrf_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "geqrf";
    let [x] = arity(name, in_avals)?;
    linalg_float(name, x)?;
    ensure!(x.rank() >= 2, name, "{x} must have at least two axes");
    let r = x.rank();
    let k = x.shape[r - 2].min(x.shape[r - 1]);
    let mut taus = x.shape[..r - 2].to_vec();
    taus.push(k);
    Ok(vec![Aval::new(x.dtype, x.shape.clone()), Aval::new(x.dtype, taus)])
}

// `householder_product a taus`: no parameters; for each `m x n` matrix of reflectors (`m >=
// n`) and its `k <= n` `taus`, the first `n` columns of their product (LAPACK's `orgqr`).

pub(crate) fn householder_product_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "householder_product";
    let [a, taus] = arity(name, in_avals)?;
    linalg_float(name, a)?;
    ensure!(a.dtype == taus.dtype, name, "a {a} and taus {taus} must have one dtype");
    ensure!(a.rank() >= 2 && taus.rank() + 1 == a.rank(), name, "a {a} must be matrices and taus {taus} vectors");
    let r = a.rank();
    ensure!(a.shape[..r - 2] == taus.shape[..r - 2], name, "a {a} and taus {taus} must have the same batch axes");
    let (m, n) = (a.shape[r - 2], a.shape[r - 1]);
    ensure!(
        m >= n,
        name,
        "The first argument to householder_product must have at least as many rows as columns, got shape ({m}, {n})"
    );
    ensure!(
        taus.shape[r - 2] <= m.min(n),
        name,
        "The second argument to householder_product must not have more rows than the minimum of the first argument's rows and columns."
    );
    Ok(device(a.dtype, a.shape.clone()))
}

// `ormqr[left=True transpose=False] a taus c`: `q c`, `qᵀ c`, `c q` or `c qᵀ` for the `m x m`
// `q = H_0 ... H_{k-1}` of the reflectors of each `m x n` `a` and its `k` `taus`.

pub(crate) fn ormqr_shape(left: bool, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "ormqr";
    let [a, taus, c] = arity(name, in_avals)?;
    linalg_float(name, a)?;
    ensure!(a.dtype == taus.dtype && a.dtype == c.dtype, name, "a {a}, taus {taus} and c {c} must have one dtype");
    ensure!(
        a.rank() >= 2 && taus.rank() + 1 == a.rank() && c.rank() == a.rank(),
        name,
        "a {a} and c {c} must be matrices of one rank and taus {taus} vectors"
    );
    let r = a.rank();
    ensure!(
        a.shape[..r - 2] == taus.shape[..r - 2] && a.shape[..r - 2] == c.shape[..r - 2],
        name,
        "a {a}, taus {taus} and c {c} must have the same batch axes"
    );
    let (m, n, k) = (a.shape[r - 2], a.shape[r - 1], taus.shape[r - 2]);
    ensure!(k <= m.min(n), name, "taus {taus} must not have more entries than a {a} has rows or columns");
    if left {
        ensure!(
            c.shape[r - 2] == m,
            name,
            "ormqr with left=True expects c to have the same number of rows as the Householder matrix a. Got a {a} and c {c}."
        );
    } else {
        ensure!(
            c.shape[r - 1] == m,
            name,
            "ormqr with left=False expects c to have the same number of columns as the Householder matrix a has rows. Got a {a} and c {c}."
        );
    }
    Ok(device(c.dtype, c.shape.clone()))
}

// `eigh[algorithm=None lower=True sort_eigenvalues=True subset_by_index=None] x`: for each
// symmetric `n x n` matrix (its `lower` triangle read), `v` (`n x n`, the unit eigenvectors
// as columns) and `w` (`n`, the eigenvalues, ascending).

pub(super) fn eigh_params(e: &Eigh) -> Params {
    vec![
        ("algorithm", e.algorithm.map_or(Param::None, |a| Param::Word(a.name().to_string()))),
        ("lower", Param::Bool(e.lower)),
        ("sort_eigenvalues", Param::Bool(e.sort_eigenvalues)),
        (
            "subset_by_index",
            e.subset_by_index
                .map_or(Param::None, |(a, b)| Param::Tuple(vec![Param::Int(a as i64), Param::Int(b as i64)])),
        ),
    ]
}

pub(super) fn parse_eigh(p: &mut ParamReader) -> Result<Primitive, String> {
    let algorithm = match p.take("algorithm")? {
        Param::None => None,
        Param::Word(w) => Some(
            EighAlgorithm::from_name(&w)
                .ok_or_else(|| format!("eigh: unknown algorithm `{w}` (EighImplementation.QR, JACOBI or QDWH)"))?,
        ),
        other => {
            return Err(format!("eigh: parameter `algorithm` must be None or an EighImplementation, found {other}"))
        }
    };
    let lower = p.bool("lower")?;
    let sort_eigenvalues = p.bool("sort_eigenvalues")?;
    let subset_by_index = if p.is_none("subset_by_index") {
        p.optional_none("subset_by_index")?;
        None
    } else {
        match p.usizes("subset_by_index")?.as_slice() {
            [a, b] => Some((*a, *b)),
            other => return Err(format!("eigh: subset_by_index must be a pair (start, end), found {other:?}")),
        }
    };
    Ok(Primitive::Eigh(Eigh { lower, sort_eigenvalues, subset_by_index, algorithm }))
}

pub(crate) fn eigh_shape(e: &Eigh, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "eigh";
    let [x] = arity(name, in_avals)?;
    linalg_float(name, x)?;
    let n = square(name, x)?;
    ensure!(
        e.subset_by_index.is_none_or(|s| s == (0, n)),
        name,
        "subset_by_index {:?} is not supported on CPU (JAX's CPU lowering takes only the whole range (0, {n}))",
        e.subset_by_index
    );
    ensure!(
        matches!(e.algorithm, None | Some(EighAlgorithm::Qr)),
        name,
        "{} is not supported on CPU",
        e.algorithm.map_or("", EighAlgorithm::name)
    );
    let r = x.rank();
    Ok(vec![Aval::new(x.dtype, x.shape.clone()), Aval::new(x.dtype, x.shape[..r - 1].to_vec())])
}

// `svd[algorithm=None compute_uv=True full_matrices=True subset_by_index=None] x`: for each
// `m x n` matrix, `s` (`k = min(m, n)` singular values, descending) and, with `compute_uv`,
// `u` (`m x m`, or `m x k` without `full_matrices`) and `vt` (`n x n`, or `k x n`) with
// `x = u diag(s) vt`.

pub(super) fn svd_params(v: &Svd) -> Params {
    vec![
        ("algorithm", v.algorithm.map_or(Param::None, |a| Param::Word(a.name().to_string()))),
        ("compute_uv", Param::Bool(v.compute_uv)),
        ("full_matrices", Param::Bool(v.full_matrices)),
        (
            "subset_by_index",
            v.subset_by_index
                .map_or(Param::None, |(a, b)| Param::Tuple(vec![Param::Int(a as i64), Param::Int(b as i64)])),
        ),
    ]
}

pub(super) fn parse_svd(p: &mut ParamReader) -> Result<Primitive, String> {
    let algorithm = match p.take("algorithm")? {
        Param::None => None,
        Param::Word(w) => Some(SvdAlgorithm::from_name(&w).ok_or_else(|| {
            format!("svd: unknown algorithm `{w}` (SvdAlgorithm.DEFAULT, QR, JACOBI, POLAR or DIVIDE_AND_CONQUER)")
        })?),
        other => return Err(format!("svd: parameter `algorithm` must be None or an SvdAlgorithm, found {other}")),
    };
    let compute_uv = p.bool("compute_uv")?;
    let full_matrices = p.bool("full_matrices")?;
    let subset_by_index = if p.is_none("subset_by_index") {
        p.optional_none("subset_by_index")?;
        None
    } else {
        match p.usizes("subset_by_index")?.as_slice() {
            [a, b] => Some((*a, *b)),
            other => return Err(format!("svd: subset_by_index must be a pair (start, end), found {other:?}")),
        }
    };
    Ok(Primitive::Svd(Svd { full_matrices, compute_uv, subset_by_index, algorithm }))
}

pub(crate) fn svd_shape(v: &Svd, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "svd";
    let [x] = arity(name, in_avals)?;
    linalg_float(name, x)?;
    ensure!(x.rank() >= 2, name, "{x} must have at least two axes");
    let r = x.rank();
    let (m, n) = (x.shape[r - 2], x.shape[r - 1]);
    let k = m.min(n);
    if let Some(s) = v.subset_by_index {
        ensure!(!v.full_matrices || s == (0, k), name, "full_matrices and subset_by_index cannot both be set");
        ensure!(s == (0, k), name, "subset_by_index not implemented for CPU and GPU");
    }
    ensure!(
        !matches!(v.algorithm, Some(SvdAlgorithm::Jacobi | SvdAlgorithm::Polar)),
        name,
        "The SVD Jacobi and Polar algorithms are not implemented on CPU."
    );
    let batch = &x.shape[..r - 2];
    let with = |last: &[usize]| [batch, last].concat();
    let mut outs = vec![Aval::new(x.dtype, with(&[k]))];
    if v.compute_uv {
        let (uk, vk) = if v.full_matrices { (m, n) } else { (k, k) };
        outs.push(Aval::new(x.dtype, with(&[m, uk])));
        outs.push(Aval::new(x.dtype, with(&[vk, n])));
    }
    Ok(outs)
}

// `tridiagonal_solve[perturb_singular=False] dl d du b`: `x` with `T x = b` for each
// tridiagonal `T` (`[..., m]` diagonals: `dl[0]` and `du[m - 1]` unused) and `m x n` `b`.

pub(crate) fn tridiagonal_solve_shape(perturb_singular: bool, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "tridiagonal_solve";
    ensure!(
        !perturb_singular,
        name,
        "perturb_singular=True (LAPACK-style perturbation of singular pivots) is not supported yet"
    );
    let [dl, d, du, b] = arity(name, in_avals)?;
    linalg_float(name, b)?;
    ensure!(
        [dl, d, du].iter().all(|x| x.dtype == b.dtype),
        name,
        "dl {dl}, d {d}, du {du} and b {b} must have one dtype"
    );
    ensure!(
        dl.shape == d.shape && dl.shape == du.shape,
        name,
        "tridiagonal_solve requires that all diagonal arguments have the same shape."
    );
    ensure!(
        b.rank() >= 2 && dl.shape[..] == b.shape[..b.rank() - 1],
        name,
        "tridiagonal_solve requires that the leading ndim-1 dimensions of b equal the dimensions of the diagonal arguments."
    );
    Ok(device(b.dtype, b.shape.clone()))
}

// `symmetric_product[alpha=1.0 beta=0.0] a c`: `alpha a aᵀ + beta c` for each `m x n`
// matrix of `a` and `m x m` matrix of `c` (JAX's lowering off GPU computes every element).

fn number(p: &mut ParamReader, key: &str) -> Result<FillValue, String> {
    match p.take(key)? {
        Param::Float(x) => Ok(FillValue::Float(x)),
        v => v
            .as_int()
            .map(FillValue::Int)
            .ok_or_else(|| format!("symmetric_product: `{key}` must be a number, found {v}")),
    }
}

pub(super) fn parse_symmetric_product(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::SymmetricProduct { alpha: number(p, "alpha")?, beta: number(p, "beta")? })
}

pub(crate) fn symmetric_product_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "symmetric_product";
    let [a, c] = arity(name, in_avals)?;
    linalg_float(name, a)?;
    ensure!(a.dtype == c.dtype, name, "a {a} and c {c} must have one dtype");
    ensure!(a.rank() >= 2 && a.rank() == c.rank(), name, "a {a} and c {c} must be matrices of one rank");
    let m = square(name, c)?;
    let r = a.rank();
    ensure!(a.shape[..r - 2] == c.shape[..r - 2], name, "a {a} and c {c} must have the same batch axes");
    ensure!(a.shape[r - 2] == m, name, "a {a} must have c {c}'s {m} rows");
    Ok(device(c.dtype, c.shape.clone()))
}
