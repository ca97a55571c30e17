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
import numpy as np
from jax import lax

g.CASES.clear()

@g.case("rev_flip", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "rev: x[::-1] and jnp.flip (a jit of rev on both axes); linear, its own transpose")
def rev_flip(x, w):
    # `x[::-1]` binds rev on one axis; jnp.flip on both axes is a `jit[name=_flip]` of rev.
    return jnp.sum(jnp.sin(x[::-1, :]) * jnp.flip(w, (0, 1)))

@g.case("conv_nhwc_same", "primitives", lambda: (g.rnd(2, 5, 6, 3), g.rnd(3, 3, 3, 4, scale=.5)),
         "conv_general_dilated: NHWC/HWIO, SAME, strides (2, 1); bilinear, transposes are convs over rev'd kernels")
def conv_nhwc_same(x, w):
    y = lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.sum(jnp.sin(y))

@g.case("conv_1d_groups_dilated", "primitives", lambda: (g.rnd(2, 4, 7), g.rnd(6, 2, 3, scale=.5)),
         "conv_general_dilated: 1-D NCH/OIH, feature_group_count=2, lhs_dilation=2, rhs_dilation=2, negative padding")
def conv_1d_groups_dilated(x, w):
    y = lax.conv_general_dilated(x, w, (1,), ((2, -1),), lhs_dilation=(2,), rhs_dilation=(2,),
                                 feature_group_count=2)
    return jnp.sum(jnp.sin(y))

@g.case("conv_3d_batch_groups", "primitives", lambda: (g.rnd(4, 2, 3, 4, 3), g.rnd(4, 2, 2, 2, 1, scale=.5)),
         "conv_general_dilated: 3-D NCDHW/OIDHW, batch_group_count=2, stride 2 on one axis, asymmetric padding")
def conv_3d_batch_groups(x, w):
    y = lax.conv_general_dilated(x, w, (1, 2, 1), ((0, 1), (1, 0), (0, 0)), batch_group_count=2)
    return jnp.sum(jnp.sin(y))

@g.case("max_pool_overlap", "primitives", lambda: (g.rnd(2, 5, 5, 3),),
         "reduce_window_max: 3x3 windows, stride 2, SAME padding; jvp select_and_gather_add, vjp select_and_scatter_add")
def max_pool_overlap(x):
    y = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return jnp.sum(jnp.sin(y))

@g.case("window_sum_min", "primitives", lambda: (g.rnd(3, 7), g.rnd(4, 6)),
         "reduce_window_sum with base and window dilation and padding; reduce_window_min")
def window_sum_min(x, z):
    s = lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), ((1, 0), (2, 1)),
                          base_dilation=(1, 2), window_dilation=(1, 2))
    m = lax.reduce_window(z, jnp.inf, lax.min, (2, 2), (2, 1), "VALID")
    return jnp.sum(jnp.sin(s)) + jnp.sum(jnp.cos(m) * m)

@g.case("cnn_pools", "primitives",
        lambda: (g.rnd(2, 8, 8, 3), g.rnd(3, 3, 3, 8, scale=.3), g.rnd(3, 3, 8, 16, scale=.2), g.rnd(16, 5, scale=.3)),
        "the zoo's cnn without u8 images and gather: conv SAME stride 1, relu, 2x2 max pool, conv SAME stride 2, "
        "relu, 2x2 average pool (reduce_window_sum / 4), dense")
def cnn_pools(x, w1, w2, wd):
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jax.nn.relu(lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=dn))
    # lax.div by a NumPy scalar: the divisor is inlined into the linear program, not saved
    # (a Python `/ 4.0` would save it "from a literal", which no text-only rule can tell).
    h = lax.div(lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), np.float32(4.0))
    return jnp.sum(jnp.tanh(h.reshape(h.shape[0], -1) @ wd))

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
