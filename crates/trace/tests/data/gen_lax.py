"""The oracle for crates/trace/tests/lax.rs: what JAX 0.10.2 records and computes for
each jax.lax function (and flax-style pooling) the Rust `lax` module mirrors. Each case
is a small program over fixed pseudo-random arguments; it records the printed jaxpr, the
outputs and, where JAX differentiates it, the gradient of the sum of the output with
respect to every float argument. The Rust test traces its twin (same name), compares the
printed jaxprs character for character and the values within 1e-4.

    python3 crates/trace/tests/data/gen_lax.py > crates/trace/tests/data/lax_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(0)
def f32(*s): return rng.standard_normal(s).astype(np.float32)

CASES = {}
def c(name, fn, *args, grad=True):
    CASES[name] = (fn, args, grad)

NHWC = ("NHWC", "HWIO", "NHWC")
c("conv_nchw_valid", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID"), f32(2, 3, 6, 6), f32(4, 3, 3, 3))
c("conv_nhwc_same_stride2", lambda x, w: lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=NHWC),
  f32(2, 7, 7, 3), f32(3, 3, 3, 4))
c("conv_same_lower", lambda x, w: lax.conv_general_dilated(x, w, (2, 2), "SAME_LOWER", dimension_numbers=NHWC),
  f32(1, 6, 6, 2), f32(2, 2, 2, 3))
c("conv_explicit_dilated", lambda x, w: lax.conv_general_dilated(
    x, w, (1, 1), ((1, 2), (0, 1)), lhs_dilation=(2, 2), rhs_dilation=(1, 2)), f32(2, 3, 5, 5), f32(4, 3, 3, 3))
c("conv_depthwise", lambda x, w: lax.conv_general_dilated(
    x, w, (1, 1), "SAME", feature_group_count=3, dimension_numbers=NHWC), f32(2, 6, 6, 3), f32(3, 3, 1, 6))
c("conv_1d_nwc", lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")),
  f32(2, 8, 3), f32(3, 3, 5))
c("conv_helper", lambda x, w: lax.conv(x, w, (1, 1), "SAME"), f32(2, 3, 6, 6), f32(4, 3, 3, 3))
c("reduce_window_max_valid", lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
  f32(2, 6, 6, 3))
c("reduce_window_sum_same", lambda x: lax.reduce_window(x, 0., lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
  f32(2, 7, 7, 3))
c("reduce_window_min", lambda x: lax.reduce_window(x, jnp.inf, lax.min, (2, 2), (1, 1), "VALID"), f32(4, 5), grad=False)

# flax.linen.max_pool / avg_pool / sum_pool on NHWC inputs (flax's own code, inlined here
# so that the oracle does not need flax): window (1, *w, 1), the average divides by the
# window's size.
def pool(x, init, op, window, strides, padding):
    return lax.reduce_window(x, init, op, (1,) + window + (1,), (1,) + strides + (1,), padding)
c("max_pool", lambda x: pool(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"), f32(2, 6, 6, 3))
c("avg_pool", lambda x: pool(x, 0., lax.add, (2, 2), (2, 2), "VALID") / 4, f32(2, 6, 6, 3))
c("sum_pool_same", lambda x: pool(x, 0., lax.add, (3, 3), (1, 1), "SAME"), f32(1, 5, 5, 2))

c("cond", lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), np.bool_(True), f32(3))
c("cond_false", lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), np.bool_(False), f32(3))
c("cond_capture", lambda p, x, y, z: lax.cond(p > 0, lambda x: x * y, lambda x: x + y * z, x),
  np.float32(1.5), f32(3), f32(3), f32(3))
c("switch", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda x: x * 2.0], x), np.int32(2), f32(3))
c("switch_clamped", lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda x: x * 2.0], x), np.int32(7), f32(3))
c("while", lambda i, x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.5), (i, x))[1],
  np.int32(0), f32(3), grad=False)
c("while_consts", lambda x, y: lax.while_loop(lambda c: c.sum() < y, lambda c: c * 2.0 + y, x),
  np.abs(f32(3)) + 0.1, np.float32(50.0), grad=False)
c("fori_static", lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), f32(3))
c("fori_dynamic", lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 1.5 + i, x), np.int32(4), f32(3), grad=False)
c("stop_gradient", lambda x: x * lax.stop_gradient(x), f32(3))
c("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)), f32(4, 5), np.int32(1))
c("map", lambda xs, w: lax.map(lambda x: jnp.sin(x) @ w, xs), f32(4, 3), f32(3, 2))
c("map_tuple", lambda xs, ys: lax.map(lambda a: a[0] * a[1].sum(), (xs, ys)), f32(3, 2), f32(3, 4))
c("cummax", lambda x: lax.cummax(x, axis=1), f32(3, 5))
c("cummin_reverse", lambda x: lax.cummin(x, axis=0, reverse=True), f32(4, 2))
c("cumlogsumexp", lambda x: lax.cumlogsumexp(x, axis=0), f32(5))
c("while_literal_carry", lambda x: lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.5, c[1] + 1), (x, jnp.int32(0)))[0],
  f32(3), grad=False)
c("while_literal_float", lambda x: lax.while_loop(lambda c: c[0].sum() < c[1], lambda c: (c[0] * 2.0, c[1]), (x, np.float32(40.0)))[0],
  np.abs(f32(3)) + 0.1, grad=False)

c("conv_transpose_same_kernel", lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", transpose_kernel=True),
  f32(1, 4, 4, 3), f32(3, 3, 5, 3))
c("conv_transpose_valid", lambda x, w: lax.conv_transpose(x, w, (2, 2), "VALID"), f32(2, 3, 3, 2), f32(3, 3, 2, 4))
c("conv_transpose_explicit", lambda x, w: lax.conv_transpose(x, w, (2,), ((1, 2),)), f32(2, 5, 3), f32(3, 3, 2))
c("conv_transpose_consistent_dilated", lambda x, w: lax.conv_transpose(
  x, w, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"),
  use_consistent_padding=True), f32(1, 2, 4, 5), f32(3, 2, 3, 2))

# lax.gather / lax.scatter* with explicit dimension numbers (jnp indexing in lax's terms).
GDN = lax.GatherDimensionNumbers
SDN = lax.ScatterDimensionNumbers
rows = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
c("gather_rows", lambda x, i: lax.gather(x, i, rows, (1, 6)), f32(4, 6), np.array([[1], [3], [0]], np.int32))
c("gather_clip_sorted", lambda x, i: lax.gather(x, i, rows, (1, 6), mode="clip", indices_are_sorted=True),
  f32(4, 6), np.array([[0], [2], [9]], np.int32))
c("gather_fill", lambda x, i: lax.gather(x, i, rows, (1, 6), mode="fill", fill_value=-1.0),
  f32(4, 6), np.array([[1], [7]], np.int32))
c("gather_2d_windows", lambda x, i: lax.gather(
    x, i, GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1)), (2, 3)),
  f32(5, 6), np.array([[0, 1], [3, 2], [1, 3]], np.int32))
c("gather_points", lambda x, i: lax.gather(
    x, i, GDN(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(1, 0)), (1, 1), unique_indices=True),
  f32(4, 5), np.array([[[1, 2], [4, 0]], [[0, 3], [2, 1]]], np.int32))
c("gather_batched", lambda x, i: lax.gather(
    x, i, GDN(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,),
              operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1, 4)),
  f32(3, 5, 4), np.array([[2], [0], [4]], np.int32))
srows = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
c("scatter_add_rows", lambda x, i, u: lax.scatter_add(x, i, u, srows),
  f32(4, 6), np.array([[1], [3], [1]], np.int32), f32(3, 6))
c("scatter_set_rows", lambda x, i, u: lax.scatter(x, i, u, srows, unique_indices=True),
  f32(4, 6), np.array([[2], [0]], np.int32), f32(2, 6))
c("scatter_mul_drop", lambda x, i, u: lax.scatter_mul(x, i, u, srows, mode="drop", unique_indices=True),
  f32(4, 6), np.array([[0], [5]], np.int32), f32(2, 6))
c("scatter_min_max", lambda x, i, u: lax.scatter_max(lax.scatter_min(x, i, u, srows), i, u * 2.0, srows),
  f32(4, 6), np.array([[3], [1]], np.int32), f32(2, 6), grad=False)
c("scatter_add_points_clip", lambda x, i, u: lax.scatter_add(
    x, i, u, SDN(update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1)),
    mode="clip", indices_are_sorted=True),
  f32(3, 4), np.array([[0, 1], [2, 3], [5, 0]], np.int32), f32(3))

# lax.sort of several operands and lax.select_n.
c("sort_two_operands", lambda a, b: lax.sort((a, b), num_keys=1), np.array([3., 1., 2., 1.], np.float32), f32(4),
  grad=False)
c("sort_two_keys_unstable", lambda a, b: lax.sort((a, b), dimension=1, is_stable=False, num_keys=2),
  np.array([[3., 1., 3.], [2., 2., 1.]], np.float32), f32(2, 3), grad=False)
c("sort_one", lambda a: lax.sort(a, dimension=0), f32(3, 2))
c("select_n_bool", lambda p, a, b: lax.select_n(p, a, b), np.array([True, False, True, False]), f32(4), f32(4))
c("select_n_three", lambda w, a, b, d: lax.select_n(w, a, b, d), np.array([0, 1, 2, 1], np.int32), f32(4), f32(4),
  f32(4))

# The small primitives of issue 45: reduce_prod (differentiated), the bitwise reductions,
# the bit counts and mulhi (integers, not differentiated).
c("reduce_prod_axis", lambda x: lax.reduce_prod(x, (1,)), f32(3, 4))
c("reduce_and_or_xor", lambda i: (lax.reduce_and(i, (0,)), lax.reduce_or(i, (1,)), lax.reduce_xor(i, (0, 1))),
  np.array([[5, -3, 12, 7], [6, 1, -1, 9], [4, 0, 2, 15]], np.int32), grad=False)
c("population_count_clz", lambda i: lax.population_count(i) + lax.clz(i),
  np.array([0, 1, -1, 255, 1 << 20, -(1 << 30)], np.int32), grad=False)
c("mulhi", lambda a, b: lax.mulhi(a, b), np.array([-7, 1 << 30, -(1 << 31), 123456789], np.int32),
  np.array([3, 8, -(1 << 31), 987654321], np.int32), grad=False)
c("optimization_barrier", lambda x, y: lax.optimization_barrier((jnp.sin(x), y)), f32(3), f32(2, 2), grad=False)
from jax.lax import linalg as lax_linalg
c("linalg_cholesky", lambda x: lax_linalg.cholesky(x @ x.T + 3.0), f32(3, 3))
c("linalg_cholesky_batched", lambda x: lax_linalg.cholesky(jnp.einsum("bij,bkj->bik", x, x) + 3.0,
                                                           symmetrize_input=False), f32(2, 3, 3))
c("linalg_triangular_solve", lambda a, b: lax_linalg.triangular_solve(a + 4.0, b, left_side=False, lower=True,
                                                                      transpose_a=True),
  f32(3, 3), f32(2, 3))
c("linalg_lu_factors", lambda x: lax_linalg.lu(x)[0], f32(3, 4))
def _lu_all(x):
    lu, pivots, perm = lax_linalg.lu(x)
    return lu, pivots, perm, lax_linalg.lu_pivots_to_permutation(pivots, 4)
c("linalg_lu_all", _lu_all, f32(2, 3, 3), grad=False)
def _qr_product(x):
    q, r = lax_linalg.qr(x, full_matrices=False)
    return jnp.sin(q) @ r
c("linalg_qr", _qr_product, f32(4, 3))
c("linalg_eigh_eigenvalues", lambda x: lax_linalg.eigh(x)[1], f32(3, 3))
c("linalg_symmetric_product", lambda a, c: lax_linalg.symmetric_product(a, c, alpha=2.0, beta=3), f32(3, 2), f32(3, 3),
  grad=False)

# The special functions of issue 45: the scaled Bessel functions and igamma/igammac under
# grad (igamma's derivative in a is igamma_grad_a), igamma_grad_a and zeta (no derivative).
c("bessel_i0e_i1e", lambda x: lax.bessel_i0e(x) * lax.bessel_i1e(x), f32(6) * 4)
c("igamma_igammac", lambda a, x: lax.igamma(a, x) + lax.igammac(x, a), np.abs(f32(5)) + 0.5, np.abs(f32(5)) * 3)
c("igamma_grad_a_zeta", lambda a, x: lax.igamma_grad_a(a, x) + lax.zeta(a + 1.5, x), np.abs(f32(4)) + 0.5,
  np.abs(f32(4)) + 0.25, grad=False)

c("betainc", lambda a, b, x: lax.betainc(a, b, x), np.abs(f32(5)) + 0.25, np.abs(f32(5)) * 4 + 0.5,
  1 / (1 + np.exp(-f32(5))), grad=False)

# Complex numbers between real arguments and results: lax.complex, real, imag, conj and
# complex products (the oracle's arrays are real).
c("complex_parts", lambda x, y: lax.real(lax.complex(x, y) * lax.complex(y, x))
  + lax.imag(lax.conj(lax.complex(x, y)) * lax.complex(x, x)), f32(4), f32(4))

# The rest of linear algebra (appended, so the cases above keep their arguments): singular
# values, and u @ vt, which does not depend on the singular vectors' signs.
c("linalg_svd_values", lambda x: lax_linalg.svd(x, compute_uv=False), f32(3, 4))
def _svd_polar(x):
    u, s, vt = lax_linalg.svd(x, full_matrices=False)
    return jnp.sin(u @ vt) * jnp.sum(s)
c("linalg_svd_polar", _svd_polar, f32(4, 3))
c("linalg_tridiagonal_solve", lambda dl, d, du, b: lax_linalg.tridiagonal_solve(dl, d, du, b), f32(4), f32(4) + 4,
  f32(4), f32(4, 2))
def _householder(x):
    from jax._src.lax import linalg as lax_linalg_impl
    a, taus = lax_linalg_impl.geqrf(x)
    return lax_linalg.householder_product(a, taus) + a
c("linalg_geqrf_householder_product", _householder, f32(4, 3), grad=False)
def _ormqr(x, c):
    from jax._src.lax import linalg as lax_linalg_impl
    a, taus = lax_linalg_impl.geqrf(x)
    return lax_linalg.ormqr(a, taus, c, left=True, transpose=True) + lax_linalg.ormqr(a, taus, c.T, left=False,
                                                                                      transpose=False).T
c("linalg_ormqr", _ormqr, f32(4, 3), f32(4, 2), grad=False)

# The generic lax.reduce (issue 45): a combiner that is no monoid JAX knows (ab + a + b)
# over one and two axes, and a variadic max that carries a payload.
def odot(a, b):
    return a * b + a + b
def pair(a, b):
    (av, ai), (bv, bi) = a, b
    p = av > bv
    return (lax.select(p, av, bv), lax.select(p, ai, bi))
c("reduce_generic", lambda x, y: lax.reduce(x * np.float32(0.25), np.float32(0), odot, (1,))
  + lax.reduce(jnp.tanh(y), np.float32(0), odot, (0, 2)), f32(4, 8), f32(2, 4, 2))
def reduce_pair(x, y):
    m, p = lax.reduce((x, y), (np.float32(-np.inf), np.float32(0)), pair, (1,))
    return m * p
c("reduce_generic_pair", reduce_pair, f32(3, 4), f32(3, 4))

# lax.rng_bit_generator (issue 45) on a key computed from an argument, chained.
def rbg(x):
    key = jnp.arange(4, dtype=jnp.uint32) * np.uint32(0x9E3779B9) + np.uint32(7)
    k1, a = lax.rng_bit_generator(key, (2, 3), dtype=jnp.uint32)
    _, b = lax.rng_bit_generator(k1, (2, 3), dtype=jnp.uint8, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    return x * a.astype(jnp.float32) + b.astype(jnp.float32)
c("rng_bit_generator", rbg, f32(2, 3))

def approx_top_k(x, y):
    v, i = lax.approx_max_k(x, 3)
    w, j = lax.approx_min_k(jnp.sin(y), 2, reduction_dimension=0, recall_target=0.9)
    return jnp.sum(v * v) + jnp.sum(w * j.astype(jnp.float32)) + jnp.sum(i.astype(jnp.float32))
c("approx_top_k", approx_top_k, f32(3, 8), f32(6, 4))

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.bool_: 'bool'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": a.reshape(-1).tolist()}

out = {}
for name, (fn, args, grad) in CASES.items():
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    case = {"jaxpr": str(jax.make_jaxpr(fn)(*args)), "args": [arr(a) for a in args],
            "outputs": [arr(o) for o in outs]}
    if grad:
        argnums = tuple(i for i, a in enumerate(args) if np.asarray(a).dtype == np.float32)
        gs = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnums)(*args)
        case["argnums"] = list(argnums)
        case["grads"] = [arr(g) for g in gs]
    out[name] = case
print(json.dumps(out, indent=1))
