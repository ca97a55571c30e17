"""Records one conformance case per primitive from real JAX 0.10.2, in the format of
../conformance (gen_cases.py's `run`: jaxpr text, arguments, outputs, a cotangent, the
vjp's gradients, saved residuals, JAX's forward and backward jaxprs). Each case exercises
one primitive that the shared conformance set does not, through evaluation, jvp, transpose,
partial evaluation and the JIT.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_primitives.py tests/data/primitives
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
import gen_cases as g
import jax.numpy as jnp

g.CASES.clear()

@g.case("rev_flip", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "rev: x[::-1] and jnp.flip (a jit of rev on both axes); linear, its own transpose")
def rev_flip(x, w):
    # `x[::-1]` binds rev on one axis; jnp.flip on both axes is a `jit[name=_flip]` of rev.
    return jnp.sum(jnp.sin(x[::-1, :]) * jnp.flip(w, (0, 1)))

import numpy as np
from jax._src import core
from jax._src.lax.lax import empty2

@g.case("empty2_zero", "primitives", lambda: (g.rnd(3, 4),),
        "empty2: the uninitialised scalar JAX's cond partial eval makes for a branch's unused "
        "residual (its lowering gives zero); no operands, printed with a trailing space")
def empty2_zero(x):
    e = empty2(np.dtype("float32"), memory_space=core.MemorySpace.Device)
    return jnp.sum(jnp.sin(x) * x + e)

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
