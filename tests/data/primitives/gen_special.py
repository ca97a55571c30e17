"""Records the conformance cases of JAX's special functions (issue 45) from real JAX 0.10.2,
in the format of ../conformance (see gen_primitives.py): bessel_i0e, bessel_i1e, igamma,
igammac (differentiated: igamma's derivative in a is igamma_grad_a), igamma_grad_a and zeta
(JAX 0.10.2 defines no derivative of either: they see stop_gradient operands and scale a
differentiated weight), regularized_incomplete_beta (differentiated in x, the one operand
JAX differentiates). float32 only: no primitive case is recorded with x64.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_special.py tests/data/primitives
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
sys.path.insert(0, os.path.dirname(__file__))
import gen_cases as g
import gen_primitives as gp
import jax.numpy as jnp
import numpy as np
from jax import lax

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced

F = np.float32


@g.case("bessel_i0e_i1e", "primitives", lambda: (g.rnd(3, 4, scale=6.0), g.rnd(3, 4)),
        "bessel_i0e, bessel_i1e on both sides of 0 and of |x| = 8 (XLA's two Chebyshev ranges); "
        "jvps: i0e's g * (i1e(x) - sign(x) * y), i1e's select on |x| > eps")
def bessel_i0e_i1e(x, w):
    return jnp.sum(lax.bessel_i0e(x) * w + lax.bessel_i1e(x * w) * lax.bessel_i0e(w))


@g.case("igamma_igammac", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4), g.rnd(3, 4)),
        "igamma and igammac under grad in both operands: a = exp(1.8 u) from ~0.01 to ~50, x = "
        "exp(2.2 v) from near 0 to ~100 (the series and the continued fraction); the derivative "
        "in a is igamma_grad_a, in x a closed form (exp, log, lgamma)")
def igamma_igammac(u, v, w):
    a = jnp.exp(F(1.8) * u)
    x = jnp.exp(F(2.2) * v)
    return jnp.sum(lax.igamma(a, x) * w + lax.igammac(a, x * F(0.5)) * jnp.cos(w))


@g.case("igamma_grad_a_zeta", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4), g.rnd(3, 4)),
        "igamma_grad_a and zeta (Hurwitz, s > 1, q > 0) on stop_gradient operands, scaling a "
        "differentiated weight: JAX 0.10.2 defines no derivative of either primitive")
def igamma_grad_a_zeta(u, v, w):
    a = lax.stop_gradient(jnp.exp(F(1.5) * u))
    x = lax.stop_gradient(jnp.exp(F(1.5) * v))
    s = a + F(1.25)
    return jnp.sum(jnp.sin(w) * (lax.igamma_grad_a(a, x) + lax.zeta(s, x)))


@g.case("regularized_incomplete_beta", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4), g.rnd(3, 4)),
        "regularized_incomplete_beta (lax.betainc) under grad in x (JAX defines its jvp in x "
        "only; a and b are stop_gradient): a from ~0.1 to ~20, b from ~0.5 to ~10, x = "
        "logistic(v) in (0, 1) on both sides of (a + 1) / (a + b + 2)")
def regularized_incomplete_beta(u, v, w):
    a = lax.stop_gradient(jnp.exp(F(1.3) * u))
    b = lax.stop_gradient(jnp.exp(F(0.8) * w) + F(0.25))
    x = lax.logistic(F(2.0) * v)
    return jnp.sum(lax.betainc(a, b, x) * jnp.cos(v))


if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
