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
import jax
import jax.numpy as jnp
from jax import lax

g.CASES.clear()

@g.case("rev_flip", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "rev: x[::-1] and jnp.flip (a jit of rev on both axes); linear, its own transpose")
def rev_flip(x, w):
    # `x[::-1]` binds rev on one axis; jnp.flip on both axes is a `jit[name=_flip]` of rev.
    return jnp.sum(jnp.sin(x[::-1, :]) * jnp.flip(w, (0, 1)))

# Control flow and custom-vjp calls (wt-ctrl).

@g.case("cond_switch", "primitives", lambda: (g.rnd(3, 4), g.rnd(4)),
        "cond: lax.cond on data and lax.switch on an argmax index (4 values, clamped to 3 "
        "branches); each branch's residuals joined into shared slots, the index saved")
def cond_switch(W, x):
    h = jnp.tanh(W @ x)
    h = lax.cond(h.sum() > 0, lambda h: jnp.cos(h) - h, lambda h: jnp.sin(h) * 2.0, h)
    y = lax.switch(jnp.argmax(x), [lambda W, h: h ** 2, lambda W, h: jnp.exp(-h),
                                   lambda W, h: h * W[:, 0]], W, h)
    return jnp.sum(y * h)

@g.case("cond_merge", "primitives", lambda: (g.rnd(3),),
        "cond whose true branch saves 4 values and false branch 1 (the example of "
        "_merge_branch_residuals): 4 slots, the false branch filling 3 with zeros")
def cond_merge(x):
    return jnp.sum(lax.cond(x.sum() > 0, lambda x: jnp.sin(x) * jnp.cos(x), lambda x: jnp.exp(x) + 1, x))

@jax.custom_vjp
def sin_vjp(x):
    return jnp.sin(x)

def _sin_fwd(x):
    return jnp.sin(x), jnp.cos(x)

def _sin_bwd(c, g):
    return (g * c,)

sin_vjp.defvjp(_sin_fwd, _sin_bwd)

@g.case("custom_vjp_sin", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "custom_vjp_call of sin whose fwd saves cos and bwd multiplies by it: the body's "
        "derivative is the rule's")
def custom_vjp_sin(x, w):
    return jnp.sum(sin_vjp(x * w) * w)

@g.case("scan_reverse_unroll", "primitives", lambda: (g.rnd(4, 4, scale=.5), g.rnd(4), g.rnd(5, 4)),
        "scan with reverse=True, unroll=2 and a closed-over const")
def scan_reverse_unroll(W, c, xs):
    def body(c, x):
        c = jnp.tanh(W @ c + x)
        return c, jnp.sin(c) * x
    c, ys = lax.scan(body, c, xs, reverse=True, unroll=2)
    return jnp.sum(c) + jnp.sum(ys)

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
