"""Writes two_chains.jaxpr: the exact planner's oracle program (crates/plan/tests/exact.rs).

Two interleaved elementwise chains, `x` of 1,024 values and `y` of 3,072: `y` starts from
`x`, `x` later reads a slice of `y`, and `y`'s `exp` feeds both chains. Differentiated with
respect to `a` only, its checkpointed body has 19 relevant candidates (524,288 subsets)
and 2,000 distinct recompute sets, whose measured peaks take 8 values.

    python3 gen_two_chains.py > two_chains.jaxpr   (JAX 0.10.2)
"""
import jax
import jax.numpy as jnp

N = 1024


def c3(v):
    return jnp.concatenate([v, v, v])


def f(a, b):
    x = b * a
    y = c3(x) * 0.5
    x = jnp.tanh((x * 0.25 + 1.0) * 0.5 - 0.25) * 2.0
    y = jnp.exp(y - 0.5)
    x = jnp.cos(x * 0.25 + 1.0)
    x = x + y[N:2 * N]
    y = (y * 0.25 - 0.5) * 2.0
    return jnp.sum(x) + jnp.sum(y * y)


print(jax.make_jaxpr(f)(1.0, jnp.ones(N, jnp.float32)))
