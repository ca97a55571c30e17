"""Records the conformance cases of the call-like primitives gen_primitives.py does not
cover (`composite`), from real JAX 0.10.2, without rewriting that script's cases.

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

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
