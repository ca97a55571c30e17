"""Records the conformance cases of the rest of linear algebra (issue 45: svd, ...) from real
JAX 0.10.2, in the format of ../conformance (gen_cases.py's `run`), with JAX's forward and
backward jaxprs from one traced vjp (gen_primitives.fwd_bwd_traced). Running it writes only
the cases registered here.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_linalg2.py tests/data/primitives
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
sys.path.insert(0, os.path.dirname(__file__))
import gen_cases as g
import gen_primitives as gp
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.lax import linalg as lax_linalg

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced


@g.case("svd_spectral", "primitives", lambda: (g.rnd(4, 3), g.rnd(3, 5), g.rnd(3, 3), g.rnd(2, 3, 4)),
        "svd (one-sided Jacobi; singular values descending) of a tall matrix (jnp.linalg.svd, "
        "reduced), of a wide one through jnp.linalg.norm(ord=2) and ord='nuc' (compute_uv=False), "
        "of a square one with full_matrices=True and of a batch of two wide ones, under grad "
        "(JAX's _svd_jvp_rule: a thin svd, F, the inverse singular values on a scattered "
        "diagonal, the tall and wide projections). Singular vectors are defined up to a common "
        "sign per pair, so the loss uses only sign-independent values: the singular values, "
        "u @ diag(f(s)) @ vt and u @ vt")
def svd_spectral(t, w, sq, ws):
    u, s, vt = jnp.linalg.svd(t, full_matrices=False)
    f = (u * jnp.tanh(s)[None, :]) @ vt
    n2 = jnp.linalg.norm(w, ord=2)
    nn = jnp.linalg.norm(w, ord="nuc")
    u2, s2, vt2 = lax_linalg.svd(sq, full_matrices=True)
    p = u2 @ vt2
    us, ss, vts = lax_linalg.svd(ws, full_matrices=False)
    fs = jnp.einsum("bij,bj,bjk->bik", us, jnp.exp(ss * np.float32(0.5)), vts)
    return (jnp.sum(jnp.sin(f)) + n2 * nn + jnp.sum(p * sq) + jnp.sum(s2 ** 2)
            + jnp.sum(fs * ws) + jnp.sum(jnp.cos(ss)))



@g.case("tridiagonal_solve_grad", "primitives",
        lambda: (g.rnd(5), g.rnd(5), g.rnd(5), g.rnd(5, 2), g.rnd(3, 4, 2)),
        "tridiagonal_solve (gtsv's elimination with partial pivoting between neighbouring rows) "
        "of a diagonally dominant system with two right-hand sides, under grad in all four "
        "operands (JAX's _tridiagonal_solve_jvp_rule: _tridiagonal_product's two scatter-adds, "
        "a second solve; its transpose solves against the shifted diagonals), and a batch of "
        "three systems with one shared b (the diagonals batched, b broadcast)")
def tridiagonal_solve_grad(dl, d, du, b, bs):
    dd = d + np.float32(4.0)
    x = lax_linalg.tridiagonal_solve(dl, dd, du, b)
    dls = jnp.stack([dl[:4], du[:4], dl[1:]])
    ds = jnp.stack([dd[:4], dd[1:], dd[:4] * np.float32(1.5)])
    dus = jnp.stack([du[1:], dl[:4], du[:4]])
    xs = lax_linalg.tridiagonal_solve(dls, ds, dus, bs)
    return jnp.sum(jnp.sin(x)) + jnp.sum(x * b) + jnp.sum(xs ** 2)


@g.case("geqrf_householder_product", "primitives", lambda: (g.rnd(4, 3), g.rnd(2, 3, 5)),
        "geqrf (LAPACK's Householder QR storage: r on and above the diagonal, the reflectors' "
        "vectors below, their taus) of a tall matrix and of a batch of two wide ones, and "
        "householder_product (orgqr) rebuilding the tall one's q. JAX defines no jvp for either, "
        "so their operands are under stop_gradient and the gradient flows through what "
        "multiplies their results")
def geqrf_householder_product(t, ws):
    from jax._src.lax import linalg as lax_linalg_impl
    sg = lax.stop_gradient
    a, taus = lax_linalg_impl.geqrf(sg(t))
    q = lax_linalg.householder_product(a, taus)
    aw, tw = lax_linalg_impl.geqrf(sg(ws))
    return (jnp.sum(q * jnp.sin(t)) + jnp.sum(a * t) + jnp.sum(taus * t[0])
            + jnp.sum(aw * ws) + jnp.sum(jnp.tanh(tw) * ws[:, :, 0]))


@g.case("ormqr_sides", "primitives", lambda: (g.rnd(4, 3), g.rnd(4, 2), g.rnd(2, 3, 3)),
        "ormqr (LAPACK's: q c, q^T c, c q and c q^T for the reflectors geqrf leaves) on each side, "
        "transposed and not, of a tall matrix's reflectors and of a batch of two square ones. "
        "JAX defines no jvp for it, so the reflectors and taus are under stop_gradient and c "
        "too; the gradient flows through what multiplies the results")
def ormqr_sides(t, c, xs):
    from jax._src.lax import linalg as lax_linalg_impl
    sg = lax.stop_gradient
    a, taus = lax_linalg_impl.geqrf(sg(t))
    y1 = lax_linalg.ormqr(a, taus, sg(c), left=True, transpose=False)
    y2 = lax_linalg.ormqr(a, taus, sg(c), left=True, transpose=True)
    y3 = lax_linalg.ormqr(a, taus, sg(c.T), left=False, transpose=False)
    y4 = lax_linalg.ormqr(a, taus, sg(c.T), left=False, transpose=True)
    ab, tb = lax_linalg_impl.geqrf(sg(xs))
    y5 = lax_linalg.ormqr(ab, tb, sg(xs), left=True, transpose=True)
    return (jnp.sum(y1 * c) + jnp.sum(jnp.sin(y2)) + jnp.sum(y3 * c.T) + jnp.sum(y4 ** 2)
            + jnp.sum(y5 * xs) + jnp.sum(t * t))


if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
