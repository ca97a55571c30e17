"""Records the conformance cases of the call-like primitives gen_primitives.py does not
cover (`composite`) and complex values carried by loops and conditionals, from real JAX 0.10.2, without rewriting that script's cases.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_calls.py tests/data/primitives
"""
import os, sys
from functools import partial
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
import gen_cases as g
import gen_primitives as gp
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced


@partial(lax.composite, name="my.softmax")
def _softmax(x, *, axis):
    return jax.nn.softmax(x, axis)


@partial(lax.composite, name="my.scale", version=2)
def _scale(x, *, s):
    return x * s


@g.case("composite_calls", "primitives", lambda: (g.rnd(3, 4), g.rnd(4)),
        "lax.composite (a named call whose body is its meaning; attributes printed as JAX's "
        "keyword tuples, a version): JAX defines no jvp, transpose or batching rule for it, so "
        "its operands here carry no tangent (stop_gradient) and it is evaluated, compiled and "
        "kept whole by partial evaluation")
def composite_calls(x, w):
    p = _softmax(lax.stop_gradient(x), axis=1)                     # f32[3,4]
    s = _scale(lax.stop_gradient(w), s=np.float32(2.5))             # f32[4]
    return jnp.sum(jnp.sin(x) * p) + jnp.sum(w * s * x[0])

@g.case("complex_loops", "primitives", lambda: (g.rnd(3, 4), g.rnd(4)),
        "complex values carried by a scan, a fori_loop (while) and a cond: a phasor rotated "
        "step by step, its magnitude and real part in a real loss")
def complex_loops(x, w):
    z0 = lax.complex(jnp.cos(w), jnp.sin(w))                          # c64[4]
    def step(z, row):
        z = z * lax.complex(jnp.cos(row), jnp.sin(row)) * np.float32(0.9)
        return z, jnp.real(z)
    z, ys = lax.scan(step, z0, x)                                     # c64[4], f32[3,4]
    z = lax.fori_loop(0, 3, lambda i, z: z * z0 + np.complex64(0.1), z)
    z = lax.cond(jnp.sum(w) > 0, lambda z: z * np.complex64(1j), lambda z: jnp.conj(z), z)
    return jnp.sum(jnp.abs(z) ** 2) + jnp.sum(ys * x)

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
