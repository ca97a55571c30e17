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


def fwd_bwd_traced(f, args):
    """JAX's forward and backward jaxprs of `f`'s vjp, with the backward taking the residuals
    in the forward's output order: both from one traced vjp. (gen_cases.fwd_bwd takes the
    backward from a concrete vjp, whose residuals come in another order when some are
    concrete, e.g. integer indices computed from arguments under stop_gradient.)"""
    leaves, tree = jax.tree_util.tree_flatten(args)
    def f_(*l): return f(*jax.tree_util.tree_unflatten(tree, l))
    box = {}
    def traced(*l):
        y, f_vjp = jax.vjp(f_, *l)
        res, box["tree"] = jax.tree_util.tree_flatten(f_vjp)
        return y, res
    fwd = jax.make_jaxpr(lambda *l: jax.vjp(f_, *l))(*leaves).jaxpr
    y, res = jax.eval_shape(traced, *leaves)
    def g_(*a):
        *r, ct = a
        return jax.tree_util.tree_unflatten(box["tree"], r)(ct)
    return str(fwd), str(jax.make_jaxpr(g_)(*res, y).jaxpr)

g.fwd_bwd = fwd_bwd_traced

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

# Primitives remat took before the coverage table (docs/ir.md) that no recorded case used.
from jax._src import core as _core

@g.case("argmin_min_tan", "primitives", lambda: (g.rnd(3, 5), g.rnd(3, 5)),
        "argmin (its i32 index gathered by take_along_axis), reduce_min (the tangent at the "
        "first minimum) and tan")
def argmin_min_tan(x, w):
    i = jnp.argmin(x, axis=1)
    picked = jnp.take_along_axis(w, i[:, None], axis=1)
    return jnp.sum(picked * jnp.min(x * w, axis=0).sum()) + jnp.sum(jnp.tan(x * np.float32(0.5)))

@g.case("pad_reduce_precision", "primitives", lambda: (g.rnd(3, 5),),
        "pad with negative low/high and interior padding and a differentiated padding value "
        "(linear in both, transposed to a strided slice and a sum), reduce_precision to bf16's "
        "and f16's formats (its derivative the identity). NumPy scalars where a constant meets a "
        "tangent: JAX saves a Python scalar there as a literal, which the text cannot tell "
        "(docs/real_models.md)")
def pad_reduce_precision(x):
    p = lax.pad(jnp.sin(x), jnp.mean(x), ((1, -1, 1), (-2, 2, 0)))
    r = lax.reduce_precision(x * np.float32(3.0), exponent_bits=8, mantissa_bits=7)
    h = lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10)
    return jnp.sum(p ** 2) + jnp.sum(jnp.cos(r) * h)

@g.case("scatter_set_mul_max_min", "primitives", lambda: (g.rnd(5, 4), g.rnd(3, 4)),
        "scatter (.at[].set), scatter-mul, scatter-max and scatter-min with a repeated index; "
        "JAX differentiates set, mul (unique indices only, so there on distinct rows), max and min")
def scatter_set_mul_max_min(x, v):
    order = jnp.argsort(lax.stop_gradient(v[:, 0]))        # i32[3]: 0, 1, 2 in some order
    rep = order // 2 * 2                                     # 0, 0, 2 in some order
    uniq = order + 2                                         # 2, 3, 4 in some order
    s = x.at[rep].set(v)
    m = x.at[uniq].multiply(v, unique_indices=True)
    hi = x.at[rep].max(v)
    lo = x.at[rep].min(v)
    return jnp.sum(jnp.sin(s) * m) + jnp.sum(hi * lo)

@g.case("cummin_cumlogsumexp", "primitives", lambda: (g.rnd(3, 5),),
        "cummin and cumlogsumexp, forwards and reversed. JAX differentiates both through "
        "associative_scan, whose pads' Python 0s JAX saves as six `from a literal` residuals; "
        "remat inlines literals (docs/real_models.md), and the bar compares the other lines")
def cummin_cumlogsumexp(x):
    return (jnp.sum(jnp.sin(lax.cummin(x, axis=1)))
            + jnp.sum(lax.cumlogsumexp(x, axis=0, reverse=True) ** 2))

@g.case("random_seed_fold_in", "primitives", lambda: (g.rnd(3, 4),),
        "random_seed of a constant, random_fold_in, and normal noise scaling a float input")
def random_seed_fold_in(x):
    k = jax.random.fold_in(jax.random.key(7), 3)
    return jnp.sum(jax.random.normal(k, x.shape) * jnp.sin(x))

@g.case("device_put_copy", "primitives", lambda: (g.rnd(3, 4),),
        "device_put inside a traced function (the identity on values, its own transpose)")
def device_put_copy(x):
    return jnp.sum(jnp.sin(jax.device_put(x * np.float32(2.0))) * x)

_sin_twice = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(np.zeros((3, 4), np.float32))
_closed_call_params = _core.closed_call_p.get_bind_params(dict(call_jaxpr=_sin_twice))

@g.case("closed_call_sin", "primitives", lambda: (g.rnd(3, 4),),
        "closed_call of a closed jaxpr (what JAX's own passes bind, e.g. a scan's known half "
        "under a saving policy), bound directly")
def closed_call_sin(x):
    return jnp.sum(_core.closed_call_p.bind(x * x, **_closed_call_params)[0] * x)

def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")

@g.case("select_and_gather_scatter_add", "primitives", lambda: (g.rnd(2, 4, 4, 3), g.rnd(2, 4, 4, 3)),
        "select_and_gather_add (a max pool's jvp, taken inside the program) and "
        "select_and_scatter_add (its vjp): a program that differentiates a max pool, "
        "differentiated again")
def select_and_gather_scatter_add(x, t):
    _, tangent = jax.jvp(_max_pool, (x,), (t,))
    cot = jax.grad(lambda x: jnp.sum(jnp.sin(_max_pool(x))))(x)
    return jnp.sum(jnp.cos(tangent) * np.float32(2.0)) + jnp.sum(cot * t)

# Linear algebra (issue 45): cholesky and triangular_solve with JAX's derivative rules.
from jax.lax import linalg as lax_linalg

@g.case("cholesky_spd", "primitives", lambda: (g.rnd(4, 4), g.rnd(2, 3, 3)),
        "cholesky of symmetric positive definite matrices built from the inputs, one matrix and "
        "a batch of two (jvp: two triangular solves and a Precision.HIGHEST dot_general)")
def cholesky_spd(x, xs):
    a = x @ x.T + np.float32(4.0) * jnp.eye(4, dtype=jnp.float32)
    l = lax_linalg.cholesky(a, symmetrize_input=False)
    bs = jnp.einsum("bij,bkj->bik", xs, xs) + np.float32(3.0) * jnp.eye(3, dtype=jnp.float32)
    ls = lax_linalg.cholesky(bs)
    return jnp.sum(jnp.sin(l)) + jnp.sum(ls ** 2)

@g.case("triangular_solve_sides", "primitives", lambda: (g.rnd(3, 3), g.rnd(3, 2), g.rnd(2, 3)),
        "triangular_solve on the left and the right, lower and upper, transposed or not, with a "
        "unit diagonal: differentiated in both a and b")
def triangular_solve_sides(a, b, c):
    t = a + np.float32(3.0) * jnp.eye(3, dtype=jnp.float32)
    x1 = lax_linalg.triangular_solve(t, b, left_side=True, lower=True)
    x2 = lax_linalg.triangular_solve(t, c, left_side=False, lower=False, transpose_a=True)
    x3 = lax_linalg.triangular_solve(t, b, left_side=True, lower=False, transpose_a=True, unit_diagonal=True)
    x4 = lax_linalg.triangular_solve(t, c, left_side=False, lower=True)
    return jnp.sum(jnp.sin(x1)) + jnp.sum(x2 ** 2) + jnp.sum(jnp.cos(x3)) + jnp.sum(x4 * c)

# Complex numbers (issue 45). A complex array is written as the other dtypes are, with
# dtype `c64`/`c128` and each element of `data` the pair `[re, im]` (crates/json reads
# it; `Array::to_f64_vec` gives the parts in that order). The cases keep scalar constants
# off the tangent path (`x * 0.5` makes JAX save the literal 0.5 as a residual, which
# remat inlines instead: docs/real_models.md).
_real_arr = g.arr

def _arr(a):
    a = np.asarray(a)
    if np.iscomplexobj(a):
        dt = {np.dtype('complex64'): 'c64', np.dtype('complex128'): 'c128'}[a.dtype]
        return dict(dtype=dt, shape=list(a.shape), data=[[float(v.real), float(v.imag)] for v in a.reshape(-1)])
    return _real_arr(a)

g.arr = _arr

def crnd(*shape, scale=1.0):
    """A c64 array whose real and imaginary parts are g.rnd's normals."""
    return lax.complex(g.rnd(*shape, scale=scale), g.rnd(*shape, scale=scale))

@g.case("complex_parts", "primitives", lambda: (g.rnd(3, 4), g.rnd(3, 4)),
        "complex, real, imag and conj (of a complex and of a real operand) with a real loss: "
        "linear over the reals, transposed as JAX's deflinear2 rules")
def complex_parts(x, y):
    z = lax.complex(x, y)
    w = lax.complex(jnp.sin(y), x * x)
    p = z * lax.conj(w) + lax.conj(x)
    return jnp.sum(lax.real(p) * jnp.cos(x)) + jnp.sum(lax.imag(p) ** 2) + jnp.sum(lax.real(lax.conj(z)) * y)

@g.case("complex_exp_abs", "primitives", lambda: (g.rnd(5), crnd(5)),
        "|exp(i x) w|^2 with complex weights w: exp and abs of complex values, a real operand "
        "promoted to c64 (convert_element_type); w's gradient in JAX's convention (the "
        "conjugate of d/dw*)")
def complex_exp_abs(x, w):
    phase = jnp.exp(lax.complex(jnp.zeros_like(x), x))
    return jnp.sum(jnp.abs(phase * w) ** 2) + jnp.sum(jnp.abs(w * w - x))

@g.case("complex_matmul", "primitives", lambda: (crnd(3, 4, scale=.5), crnd(4, 2, scale=.5), g.rnd(3, 2)),
        "a complex matmul (dot_general on c64) with a real loss; its transpose multiplies by "
        "the other operand without conjugating, as JAX's does")
def complex_matmul(a, b, t):
    c = a @ b
    return jnp.sum(jnp.real(c) * t) + jnp.sum(jnp.abs(c)) + jnp.sum(jnp.imag(c.T @ a) ** 2)

@g.case("complex_elementwise", "primitives", lambda: (crnd(2, 3, scale=.5), g.rnd(2, 3, scale=.5)),
        "the complex transcendentals and arithmetic (log, sqrt, sin, cos, tanh, expm1, log1p, "
        "sign, square, integer_pow, div, pow, neg, sub) and eq/select_n, with a real loss")
def complex_elementwise(z, x):
    u = z + 1.5
    a = jnp.log(u) + jnp.sqrt(u) * jnp.sin(z) - jnp.cos(z) / u
    b = jnp.tanh(z) + jnp.expm1(z) * jnp.log1p(z * lax.complex(x, x)) + lax.sign(z) - jnp.square(z)
    c = lax.integer_pow(z, 3) + u ** lax.complex(jnp.sin(x), jnp.cos(x)) - (-z)
    d = jnp.where(z == lax.stop_gradient(z), z, 1.0 + 0j) / (u * u)
    return (jnp.sum(jnp.abs(a)) + jnp.sum(jnp.real(b) * x) + jnp.sum(jnp.imag(c))
            + jnp.sum(jnp.real(d * jnp.conj(d))))

@g.case("complex_structural", "primitives", lambda: (crnd(2, 3), g.rnd(3, 2)),
        "complex values through broadcast, reshape, transpose, slice, concatenate, pad, "
        "reduce_sum, dynamic_slice and a gather, with a real loss")
def complex_structural(z, x):
    zt = z.T.reshape(6) * lax.complex(x, x).reshape(6)
    zc = jnp.concatenate([zt[1:4], zt[::2], jnp.pad(zt[:2], (1, 1))])
    order = jnp.argsort(lax.stop_gradient(x[:, 1]))          # i32[3], a permutation
    g_ = zc[order * 3]
    ds = lax.dynamic_slice(zc, (jnp.argmax(x[:, 0]),), (3,))
    s = jnp.sum(zc) + jnp.sum(ds)
    return jnp.abs(s) + jnp.sum(jnp.real(g_) ** 2) + jnp.sum(jnp.imag(jnp.broadcast_to(zt, (2, 6))))

# FFT (issue 45): each kind in 1, 2 and 3 dimensions, and a Fourier layer.
@g.case("fft_c2c", "primitives", lambda: (crnd(2, 4, 3), g.rnd(2, 4, 3)),
        "fft and ifft (complex to complex) over 1, 2 and 3 axes with a real loss; each is "
        "linear and its own transpose")
def fft_c2c(z, w):
    a = jnp.fft.fft(z)                                       # last axis, length 3
    b = jnp.fft.ifft2(z * w)                                 # lengths (4, 3)
    c = jnp.fft.fftn(jnp.sin(z))                             # lengths (2, 4, 3)
    return jnp.sum(jnp.abs(a) * w) + jnp.sum(jnp.real(b) ** 2) + jnp.sum(jnp.imag(c) * w)

@g.case("rfft_irfft", "primitives", lambda: (g.rnd(2, 4, 6), g.rnd(3, 5)),
        "rfft and irfft over 1, 2 and 3 axes (even and odd last lengths): their transposes "
        "weigh the terms the real transforms hold once for two")
def rfft_irfft(x, y):
    a = jnp.fft.rfft(x)                                      # c64[2,4,4]
    b = jnp.fft.rfft2(jnp.sin(y))                            # c64[3,3]
    c = jnp.fft.rfftn(x * x)                                 # c64[2,4,4] over 3 axes
    d = jnp.fft.irfft(a * jnp.conj(a), n=6)                  # f32[2,4,6]
    e = jnp.fft.irfft2(b * b, s=(3, 5))                      # f32[3,5]
    f = jnp.fft.irfftn(c, s=(2, 4, 6))                       # f32[2,4,6]
    return (jnp.sum(jnp.abs(a)) + jnp.sum(jnp.real(b) * jnp.imag(b)) + jnp.sum(d * x)
            + jnp.sum(jnp.tanh(e) * y) + jnp.sum(f ** 2))

@g.case("fourier_layer", "primitives", lambda: (g.rnd(4, 16), crnd(9, scale=.5), g.rnd(16, 16, scale=.25)),
        "a Fourier-layer block (an FNO's spectral convolution): rfft, multiplication by "
        "complex weights, irfft, plus a pointwise linear path and a nonlinearity")
def fourier_layer(x, w, p):
    spec = jnp.fft.rfft(x)                                   # c64[4,9]
    y = jnp.fft.irfft(spec * w, n=16)                        # f32[4,16]
    h = jnp.tanh(y + x @ p)
    return jnp.sum(h ** 2)
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
