"""Records the linear-algebra conformance cases beyond cholesky/triangular_solve (issue 45)
from real JAX 0.10.2, in the format of ../conformance (gen_cases.py's `run`), with JAX's
forward and backward jaxprs from one traced vjp (gen_primitives.fwd_bwd_traced). Running it
writes only the cases registered here.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_linalg.py tests/data/primitives
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


@g.case("lu_square_batched", "primitives", lambda: (g.rnd(4, 4), g.rnd(2, 3, 3)),
        "lu of a square matrix and of a batch of two (partial pivoting as LAPACK's getrf), "
        "under grad through the factors (JAX's _lu_jvp_rule: two triangular solves and two "
        "Precision.HIGHEST products, vmapped over the batch); the permutation gathers rows "
        "and lu_pivots_to_permutation rebuilds it from the pivots")
def lu_square_batched(x, xs):
    lu, piv, perm = lax_linalg.lu(x)
    lus, pivs, perms = lax_linalg.lu(xs)
    perm2 = lax_linalg.lu_pivots_to_permutation(piv, 4)
    rows = x[perm2]
    return (jnp.sum(jnp.sin(lu)) + jnp.sum(lus ** 2) + jnp.sum(rows * x)
            + jnp.sum(perms.astype(jnp.float32)) + jnp.sum(jnp.cos(pivs.astype(jnp.float32) * xs[:, 0, :])))


@g.case("lu_rectangular", "primitives", lambda: (g.rnd(3, 5), g.rnd(5, 3)),
        "lu of a wide (3x5) and a tall (5x3) matrix under grad: the jvp's slices of the "
        "factors and the padded identities; a permutation longer than the pivots")
def lu_rectangular(w, t):
    lw, pw, qw = lax_linalg.lu(w)
    lt, pt, qt = lax_linalg.lu(t)
    q = lax_linalg.lu_pivots_to_permutation(pt, 6)
    return (jnp.sum(jnp.tanh(lw)) + jnp.sum(lt * t) + jnp.sum(q.astype(jnp.float32))
            + jnp.sum(jnp.exp(lt[:, 0]) * qt.astype(jnp.float32)))


@g.case("qr_shapes", "primitives", lambda: (g.rnd(4, 3), g.rnd(3, 3), g.rnd(2, 3, 5)),
        "Householder qr (LAPACK's signs: r's diagonal may be negative as geqrf leaves it) of a "
        "tall matrix (jnp.linalg.qr, reduced), a square one with full_matrices=True and a batch "
        "of two wide ones, under grad (JAX's qr_jvp_rule: _thin_qr_jvp, and the wide case's "
        "split into a square block and the rest)")
def qr_shapes(t, s, w):
    q1, r1 = jnp.linalg.qr(t)
    q2, r2 = lax_linalg.qr(s, full_matrices=True)
    q3, r3 = lax_linalg.qr(w, full_matrices=False)
    return (jnp.sum(jnp.sin(q1)) + jnp.sum(r1 ** 2) + jnp.sum(q2 * s) + jnp.sum(jnp.cos(r2))
            + jnp.sum(q3 ** 3) + jnp.sum(jnp.tanh(r3)))


@g.case("eigh_spectral", "primitives", lambda: (g.rnd(4, 4), g.rnd(2, 3, 3)),
        "eigh of a symmetric matrix (jnp.linalg.eigh: symmetrized, eigenvalues ascending) and of "
        "a batch of two symmetric ones read from the lower triangle only (symmetrize_input=False), under grad (JAX's _eigh_jvp_rule). "
        "Eigenvectors are defined up to sign, so the loss uses only sign-independent values: "
        "the eigenvalues and v @ diag(f(w)) @ v.T")
def eigh_spectral(x, xs):
    w, v = jnp.linalg.eigh(x + x.T)
    vs, ws = lax_linalg.eigh(xs + jnp.swapaxes(xs, -1, -2), symmetrize_input=False)
    f = (v * jnp.tanh(w)[None, :]) @ v.T
    fs = jnp.einsum("bij,bj,bkj->bik", vs, jnp.exp(ws * np.float32(0.5)), vs)
    return jnp.sum(w ** 2) + jnp.sum(jnp.sin(f)) + jnp.sum(fs * xs) + jnp.sum(jnp.cos(ws))


@g.case("symmetric_product_scaled", "primitives", lambda: (g.rnd(3, 2), g.rnd(3, 3), g.rnd(2, 3, 4)),
        "symmetric_product (alpha a a^T + beta c, every element as JAX's CPU lowering computes "
        "it) of one pair with float alpha and beta and of a batch with an integer beta; JAX "
        "defines no jvp for it, so its operands are under stop_gradient and the gradient flows "
        "through what multiplies its result")
def symmetric_product_scaled(a, c, xs):
    sg = lax.stop_gradient
    p1 = lax_linalg.symmetric_product(sg(a), sg(c), alpha=2.0, beta=0.5)
    cs = jnp.broadcast_to(c, (2, 3, 3))
    p2 = lax_linalg.symmetric_product(sg(xs), sg(cs), alpha=1.5, beta=2)
    return jnp.sum(p1 * jnp.sin(c)) + jnp.sum(p2 * jnp.tanh(a[:, 0]))


if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
