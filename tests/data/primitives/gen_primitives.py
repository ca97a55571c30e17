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

import numpy as np
from jax._src import core
from jax._src.lax.lax import empty2

@g.case("empty2_zero", "primitives", lambda: (g.rnd(3, 4),),
        "empty2: the uninitialised scalar JAX's cond partial eval makes for a branch's unused "
        "residual (its lowering gives zero); no operands, printed with a trailing space")
def empty2_zero(x):
    e = empty2(np.dtype("float32"), memory_space=core.MemorySpace.Device)
    return jnp.sum(jnp.sin(x) * x + e)
from jax import lax

@g.case("gather_take", "primitives", lambda: (g.rnd(6, 5), g.rnd(3, 4)),
        "gather: an embedding lookup (PROMISE_IN_BOUNDS), take with mode='fill' and 'clip' "
        "(indices out of bounds), take_along_axis (batching dims); its transpose is scatter-add")
def gather_take(table, x):
    idx = jnp.argsort(lax.stop_gradient(x), axis=1)        # i32[3,4], values 0..3
    emb = table[idx]                                        # f32[3,4,5]
    filled = jnp.take(table, idx + 4, axis=0, mode="fill", fill_value=0.5)
    clipped = jnp.take(table, idx * 3 - 2, axis=0, mode="clip")
    along = jnp.take_along_axis(x, idx, axis=1)
    return (jnp.sum(jnp.sin(emb) * filled) + jnp.sum(clipped ** 2)
            + jnp.sum(jnp.cos(along) * x))

@g.case("scatter_add", "primitives", lambda: (g.rnd(6, 5), g.rnd(3, 5)),
        "scatter-add: .at[].add with repeated and out-of-bounds (dropped) rows; linear in "
        "both operand and updates, its updates' transpose a gather")
def scatter_add(table, w):
    order = jnp.argsort(lax.stop_gradient(w[:, 0]))       # i32[3]: 0, 1, 2 in some order
    t = table.at[order * 3].add(jnp.sin(w))                 # rows 0, 3, 6 (6 is dropped)
    t = t.at[order].add(jnp.cos(w))
    return jnp.sum(jnp.tanh(t) * table)

@g.case("top_k_split", "primitives", lambda: (g.rnd(4, 6),),
        "top_k (values, and i32 indices gathered into the tangent) and split (multi-output; "
        "its transpose a concatenate)")
def top_k_split(x):
    v, i = lax.top_k(jnp.sin(x), 3)
    a, b, c = jnp.split(x, [1, 4], axis=1)
    return jnp.sum(v ** 2) + jnp.sum(jnp.sin(a)) + jnp.sum(jnp.cos(b)) + jnp.sum(c ** 3)

@g.case("cumsum", "primitives", lambda: (g.rnd(3, 5),),
        "cumsum: linear, transposed to a reversed cumsum, forwards and reversed. (cumprod, "
        "cummax and cummin differentiate JAX's associative_scan, whose pads' 0.0 JAX saves "
        "as literal residuals, which remat does not yet do: they are checked in "
        "crates/ad/tests/rules.rs and tests/data/indexing instead.)")
def cumsum(x):
    return (jnp.sum(jnp.sin(lax.cumsum(x, axis=1)))
            + jnp.sum(lax.cumsum(x, axis=0, reverse=True) ** 2))
# The elementwise primitives of real programs (REAL_MODELS_NOTES §4).
from jax import lax
from jax._src.lax import special

@g.case("bitwise_and_shifts", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "and/or/xor/not on i32 and bool, the three shifts (amounts 0..40, past the width too), "
        "integer rem (divisor 0 too): zero tangents, so only w is differentiated")
def bitwise_and_shifts(x, w):
    i = lax.convert_element_type(x * 1000.0, jnp.int32)
    j = lax.convert_element_type(w * 1000.0, jnp.int32)
    amounts = jnp.arange(12, dtype=jnp.int32).reshape(3, 4) * 4 - 4
    ints = (lax.bitwise_and(i, j) + lax.bitwise_or(i, j) - lax.bitwise_xor(i, j)
            + lax.bitwise_not(i) + lax.shift_left(i, amounts)
            + lax.shift_right_logical(i, amounts) + lax.shift_right_arithmetic(j, amounts)
            + lax.rem(i, lax.rem(j, jnp.int32(7))))
    p, q = x > 0, w > 0
    mask = lax.bitwise_xor(lax.bitwise_and(p, q), lax.bitwise_not(lax.bitwise_or(p, q)))
    f = lax.convert_element_type(ints, jnp.float32) * 1e-4
    return jnp.sum(jnp.where(mask, f, 1.0) * w)

@g.case("rounding", "primitives", lambda: (g.rnd(3, 4, scale=3.0), g.rnd(3, 4)),
        "floor, ceil, round (both methods, on exact halves too), is_finite, sign: zero tangents")
def rounding(x, w):
    # -3, -2.5, ..., 2.5: exact halves and integers (a constant array would be a constvar).
    halves = (lax.iota(jnp.float32, 12).reshape(3, 4) - 6.0) * 0.5
    y = x + halves
    z = (lax.floor(y) + lax.ceil(y) * 2.0 + lax.round(y, lax.RoundingMethod.AWAY_FROM_ZERO) * 3.0
         + lax.round(y, lax.RoundingMethod.TO_NEAREST_EVEN) * 5.0 + lax.round(halves) * 7.0)
    finite = lax.is_finite(lax.div(x, halves))
    return jnp.sum(jnp.where(finite, z, -1.0) * w)

@g.case("erf_and_gamma", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "erf, erfc, erf_inv, lgamma, digamma (jvp: polygamma 1.0), polygamma (jvp: polygamma of m + 1)")
def erf_and_gamma(x, w):
    pos = x * x + 0.25
    return jnp.sum((lax.erf(x) + lax.erfc(w) + lax.erf_inv(jnp.tanh(x)) + lax.lgamma(pos)
                    + lax.digamma(pos) + special.polygamma(jnp.float32(2.0), pos)) * w)

@g.case("trig_and_hyperbolic", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "asin, acos, atan, sinh, cosh, asinh, acosh, atanh, cbrt, exp2, atan2, rem (floats), copy")
def trig_and_hyperbolic(x, w):
    t = jnp.tanh(x)
    u = lax.logistic(w)
    a = (lax.asin(t) + lax.acos(t) + lax.atan(x) + lax.sinh(x) + lax.cosh(w) + lax.asinh(x)
         + lax.acosh(x * x + 1.5) + lax.atanh(t * u) + lax.cbrt(x) + lax.exp2(w))
    b = lax.atan2(x, w) + lax.rem(x, w) + lax.copy_p.bind(x)
    return jnp.sum(a * w + b)

@g.case("bitcast_and_nextafter", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "bitcast_convert_type f32 -> i32 -> f32 (uniform's mantissa trick, on i32), nextafter "
        "(no derivative in JAX, so on stop_gradient operands)")
def bitcast_and_nextafter(x, w):
    bits = lax.bitcast_convert_type(lax.stop_gradient(x), jnp.int32)
    mant = lax.bitwise_or(lax.shift_right_logical(bits, jnp.int32(9)), jnp.int32(0x3F800000))
    u = lax.bitcast_convert_type(mant, jnp.float32) - 1.0
    n = lax.nextafter(lax.stop_gradient(x), jnp.zeros_like(x)) - lax.stop_gradient(x)
    return jnp.sum((u + n * 1e6) * w * x)
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

# The small primitives of issue 45 (wt-small).

@g.case("reduce_logical", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "reduce_and, reduce_or, reduce_xor: jnp.all/jnp.any on bool (one axis, all axes), "
        "lax.reduce_and/or/xor on i32 (bitwise): no tangents, so only w is differentiated")
def reduce_logical(x, w):
    p = x > 0
    i = lax.convert_element_type(x * 1000.0, jnp.int32)
    rows = jnp.all(p, axis=1)                                  # bool[3]
    cols = jnp.any(p, axis=0)                                  # bool[4]
    some = jnp.any(w > 1.5)                                    # bool[] over both axes
    bits = (lax.reduce_and(i, (1,))[:, None] + lax.reduce_or(i, (0,))[None, :]
            + lax.reduce_xor(i, (0, 1)) + lax.reduce_xor_p.bind(p, axes=(0,))[None, :].astype(jnp.int32))
    f = lax.convert_element_type(bits, jnp.float32) * 1e-4
    mask = jnp.logical_xor(rows[:, None], cols[None, :]) | some
    return jnp.sum(jnp.where(mask, jnp.sin(f) * w, w * w))

@g.case("reduce_prod", "primitives", lambda: (g.rnd(3, 4), g.rnd(2, 4, 2)),
        "reduce_prod: jnp.prod over a kept-last axis (the jvp's reshape permutes), over a "
        "middle axis, over all axes, and of i32; the jvp is JAX's tree of products "
        "(`_reduce_prod_jvp_rule`), on power-of-two lengths (an odd length pads with a "
        "literal 1.0 whose tangent pad's 0.0 JAX saves as a literal residual, as for cumprod)")
def reduce_prod(x, y):
    a = jnp.prod(x, axis=1)                                   # f32[3], length 4
    b = jnp.prod(y, axis=1)                                   # f32[2,2], length 4
    c = jnp.prod(jnp.tanh(y))                                 # f32[], length 16
    k = jnp.prod(lax.convert_element_type(x * 3.0, jnp.int32)[:2], axis=0)  # i32[4]
    return jnp.sum(jnp.sin(a)) + jnp.sum(b * b) + c + jnp.sum(k.astype(jnp.float32) * x[2])

@g.case("bits_count_mulhi", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "population_count, clz (i32 and u8, 0 and negatives too), mulhi (i32 and u32, "
        "overflowing products): integer results, no tangents, so only w is differentiated")
def bits_count_mulhi(x, w):
    i = lax.convert_element_type(x * 1e6, jnp.int32)
    j = lax.convert_element_type(w * 1e9, jnp.int32)
    u = lax.convert_element_type(i, jnp.uint32)
    b = lax.convert_element_type(i, jnp.uint8)
    ints = (lax.population_count(i) + lax.clz(i) * 3 + lax.clz(j)
            + lax.convert_element_type(lax.clz(b) + lax.population_count(b), jnp.int32)
            + lax.mulhi(i, j) + lax.convert_element_type(lax.mulhi(u, u) >> 16, jnp.int32))
    f = lax.convert_element_type(ints, jnp.float32) * 1e-3
    return jnp.sum(jnp.sin(f) * w)

from jax._src.lax import lax as _lax

@g.case("total_order_compares", "primitives", lambda: (g.rnd(3, 4), g.rnd(5), g.rnd(3, 4)),
        "eq_to, le_to, lt_to (XLA's TOTALORDER: -0.0 < 0.0, NaNs ordered by sign) on f32 "
        "with zeros and NaNs, i32 and bool, and jnp.searchsorted (left and right, whose scan "
        "binds le_to and lt_to); boolean and integer results have no tangents")
def total_order_compares(x, s, w):
    z = jnp.where(x > 0.5, 0.0, x) * jnp.where(w > 0, -1.0, 1.0)     # +0.0 and -0.0
    n = jnp.where(x < -1.0, jnp.nan, z)
    m = jnp.where(w < -1.0, -jnp.nan, w)
    i = lax.convert_element_type(x * 3.0, jnp.int32)
    masks = (_lax.lt_to_p.bind(n, m), _lax.le_to_p.bind(m, n), _lax.eq_to_p.bind(n, z),
             _lax.lt_to_p.bind(i, i.T.reshape(3, 4)), _lax.le_to_p.bind(x > 0, w > 0),
             _lax.eq_to_p.bind(i, 0 * i))
    total = sum(jnp.where(c, 1.0, 0.0) * (k + 1.0) for k, c in enumerate(masks))
    sorted_s = jnp.cumsum(jnp.exp(s)) - 2.0                          # increasing
    left = jnp.searchsorted(sorted_s, x.reshape(-1))
    right = jnp.searchsorted(sorted_s, jnp.round(w.reshape(-1)), side="right")
    pos = lax.convert_element_type(left + 2 * right, jnp.float32).reshape(3, 4)
    return jnp.sum(jnp.sin(total + pos) * w * x)

@g.case("scatter_sub", "primitives", lambda: (g.rnd(6, 5), g.rnd(3, 5)),
        "scatter-sub: .at[].subtract with repeated and out-of-bounds (dropped) rows; linear in "
        "both operand and updates, the updates' transpose a negated gather")
def scatter_sub(table, w):
    order = jnp.argsort(lax.stop_gradient(w[:, 0]))       # i32[3]: 0, 1, 2 in some order
    t = table.at[order * 3].subtract(jnp.sin(w))            # rows 0, 3, 6 (6 is dropped)
    t = t.at[order % 2].subtract(jnp.cos(w))                # rows 0 and 1, one twice
    return jnp.sum(jnp.tanh(t) * table)

@g.case("stack_unstack_tile", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "stack (a new middle axis; its transpose unstack), unstack (one slice unused: a zero "
        "cotangent stacked in), tile (fewer reps than axes, and more: a broadcast_in_dim first; "
        "its transpose a reshape and a reduce_sum over the repetitions)")
def stack_unstack_tile(x, w):
    s = jnp.stack([jnp.sin(x), w, x * w], axis=1)           # f32[3,3,4]
    a, b, c, d = jnp.unstack(w, axis=1)                     # four f32[3]
    t = jnp.tile(x, (2,))[:, 2:6] + jnp.tile(w, (2, 1))[1:4]  # f32[3,4]
    u = jnp.tile(jnp.cos(x), (2, 1, 1))                     # f32[2,3,4]
    return (jnp.sum(s * s[:, ::-1]) + jnp.sum(a * jnp.sin(b) + d) + jnp.sum(jnp.tanh(t))
            + jnp.sum(u[0] * u[1] * w))

@g.case("diagonal_platform_index", "primitives", lambda: (g.rnd(4, 4), g.rnd(4)),
        "platform_index and cond's branches_platforms: jnp.diagonal of a square matrix selects "
        "between a Mosaic branch and the default one by platform (remat is `cpu`: the default); "
        "jnp.trace beside it")
def diagonal_platform_index(x, w):
    d = jnp.diagonal(jnp.sin(x))
    return jnp.sum(d * w) + jnp.trace(x * x) + jnp.sum(jnp.diagonal(x, offset=1) ** 2)

@g.case("optimization_barrier", "primitives", lambda: (g.rnd(3, 4), g.rnd(4)),
        "optimization_barrier of several operands: an identity whose jvp is a barrier of the "
        "primals and one of the tangents, and whose transpose a barrier of the cotangents. "
        "(Floats only: JAX's jvp passes an integer operand's float0 zero tangent through the "
        "barrier, and remat has no float0 dtype.)")
def optimization_barrier(x, w):
    a, b = lax.optimization_barrier((jnp.sin(x), jnp.cos(w)))
    return jnp.sum(a * b * x)

@g.case("integer_control", "primitives", lambda: (g.rnd(3, 4), g.rnd(4)),
        "integers and booleans computed from differentiated floats drive control and indexing "
        "without tangents: lax.cond on x.sum() > 0, lax.switch on an argmax, a take at a float "
        "cast to int, jnp.where on a comparison, a take at searchsorted positions")
def integer_control(x, w):
    h = jnp.tanh(x @ w)                                                     # f32[3]
    h = lax.cond(h.sum() > 0, lambda h: jnp.sin(h) * 2.0, lambda h: jnp.cos(h) - h, h)
    h = lax.switch(jnp.argmax(w), [lambda h: h ** 2, lambda h: jnp.exp(-h), lambda h: h * w[0],
                                   lambda h: h + w[1]], h)
    start = jnp.clip(jnp.floor(jnp.abs(w[0]) * 2.0).astype(jnp.int32), 0, 2)
    row = jnp.take(x, start, axis=0)                                        # f32[4]
    gated = jnp.where(row > w, row * w, -row)
    edges = jnp.cumsum(jnp.exp(w))
    pos = jnp.clip(jnp.searchsorted(edges, jnp.abs(x[0]) * 3.0), 0, 3)
    return jnp.sum(h) + jnp.sum(gated) + jnp.sum(jnp.take(w, pos) * x[1])

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
