"""The oracle for crates/remat/tests/vmap.rs: what JAX 0.10.2 records and computes for
`jax.vmap` of small programs, one or more cases per batching rule remat writes
(elementwise with every kind of operand, clamp, sort, split, top_k,
the PRNG primitives, add_any, select_n, broadcast_in_dim, reshape,
transpose, squeeze, rev, slice, concatenate, pad, the reductions, argmax, cumsum,
dot_general with either or both operands batched, jit, remat2 and custom_jvp_call
bodies, cond with an unbatched predicate, scan with a carry the body batches, nested vmap,
vmap of grad; then the indexing rules, cond/switch with a batched index, while (a predicate
the batch reaches: the while takes a `bool[B]` predicate), windows, rank-0 dynamic slices,
branches over constant arrays, and NumPy advanced indexing batched). Each case records the printed jaxpr of `jax.vmap(fn, in_axes, out_axes)`
over fixed pseudo-random arguments (in_axes/out_axes one entry per positional argument and
result) and its outputs. The Rust test traces its twin (same name), compares the printed
jaxprs character for character and the values within 1e-4.

    python3 crates/trace/tests/data/gen_vmap.py > crates/trace/tests/data/vmap_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(0)
def f32(*s): return rng.standard_normal(s).astype(np.float32)

CASES = {}
def c(name, fn, in_axes, out_axes, *args):
    CASES[name] = (fn, in_axes, out_axes, args)

B = 4
c("sin_mul_same_axes", lambda x, y: (jnp.sin(x) * y,), [0, 0], [0], f32(B, 3), f32(B, 3))
c("mul_unbatched_vector", lambda x, w: (x * w + 1.0,), [0, None], [0], f32(B, 3), f32(3))
c("mul_unbatched_scalar", lambda x, s: (x * s,), [0, None], [0], f32(B, 3), np.float32(2.5))
c("batched_scalar_times_matrix", lambda s, m: (s * m,), [0, None], [0], f32(B), f32(2, 3))
c("mixed_axes", lambda x, y: (x - y,), [1, 0], [0], f32(3, B), f32(B, 3))
c("in_axis_1_out_axis_1", lambda x: (jnp.tanh(x) ** 3,), [1], [1], f32(2, B, 3))
c("out_axis_moved", lambda x: (x * 2.0,), [0], [1], f32(B, 3))
c("unbatched_output_broadcast", lambda x, w: (x.sum(), w * 2.0), [0, None], [0, 0], f32(B, 3), f32(2))
c("compare_select", lambda x, y: (jnp.where(x > y, x, y),), [0, None], [0], f32(B, 3), f32(3))
c("reduce_sum_max_argmax", lambda x: (x.sum(axis=1), x.max(axis=0), jnp.argmax(x, axis=1)), [1], [0, 0, 0],
  f32(2, B, 3))
c("cumsum", lambda x: (lax.cumsum(x, axis=0),), [1], [0], f32(3, B))
c("matvec_unbatched_matrix", lambda x, w: (x @ w,), [0, None], [0], f32(B, 5), f32(5, 3))
c("matvec_batched_matrix", lambda x, w: (x @ w,), [None, 0], [0], f32(5), f32(B, 5, 3))
c("matmul_both_batched", lambda a, b: (a @ b,), [0, 2], [0], f32(B, 2, 5), f32(5, 3, B))
c("broadcast_to", lambda x: (jnp.broadcast_to(x, (2, 3)),), [0], [0], f32(B, 3))
c("reshape_transpose", lambda x: (x.reshape(-1), x.T), [1], [0, 1], f32(2, B, 3))
c("squeeze_rev_slice", lambda x: (jnp.squeeze(x, 0), lax.rev(x, (1,)), x[:, 1:3]), [2], [0, 0, 0], f32(1, 4, B))
c("concatenate_unbatched", lambda x, w: (jnp.concatenate([x, w]),), [0, None], [0], f32(B, 3), f32(2))
c("pad", lambda x: (lax.pad(x, 0.0, [(1, 2, 0)]),), [0], [0], f32(B, 3))
c("convert", lambda x: ((x * 3.0).astype(jnp.int32),), [0], [0], f32(B, 3))
c("jit_body", lambda x, w: (jax.jit(lambda a, b: jnp.sin(a) @ b)(x, w),), [0, None], [0], f32(B, 5), f32(5, 2))
c("checkpoint_body", lambda x: (jax.checkpoint(lambda a: jnp.sin(jnp.sin(a)))(x),), [0], [0], f32(B, 3))
c("grad_inside", lambda x: (jax.grad(lambda a: jnp.sum(jnp.sin(a) * a))(x),), [0], [0], f32(B, 3))
c("nested_vmap", lambda x, w: (jax.vmap(lambda r: r * w)(x),), [0, None], [0], f32(B, 2, 3), f32(3))
c("clamp_scalar_bounds", lambda x: (lax.clamp(0.0, x, 1.0),), [0], [0], f32(B, 3))
c("clamp_unbatched_bound", lambda x, lo: (lax.clamp(lo, x, 1.0),), [0, None], [0], f32(B, 3), f32(3))
c("sort_split_top_k", lambda x: (jnp.sort(x, axis=0), *jnp.split(x, 2, axis=1), *lax.top_k(x, 2)), [1],
  [0, 0, 0, 0, 0], f32(3, B, 4))
c("relu_custom_jvp", lambda x: (jax.nn.relu(x),), [0], [0], f32(B, 3))
c("cond_unbatched_predicate", lambda p, x, y: (lax.cond(p, lambda a: jnp.sin(a) * y, jnp.cos, x),), [None, 0, None],
  [0], np.bool_(True), f32(B, 3), f32(3))
c("scan_carry_becomes_batched", lambda c0, xs: lax.scan(lambda c, x: (c * x + 1.0, jnp.sin(c)), c0, xs),
  [None, 1], [0, 0], f32(3), f32(5, B, 3))
c("random_uniform_per_key", lambda k: (jax.random.uniform(k, (3,)),), [0], [0],
  np.asarray(jax.random.split(jax.random.PRNGKey(0), B)))
c("random_fold_in_batched_data", lambda k, d: (jax.random.fold_in(k, d),), [None, 0], [0],
  np.asarray(jax.random.PRNGKey(1)), np.arange(B, dtype=np.int32))

# The indexing rules (added after the cases above, so that their arguments stay the same).
def i32(hi, *s): return rng.randint(-hi, hi, size=s).astype(np.int32)
c("dynamic_slice_batched_index", lambda x, i: (lax.dynamic_slice(x, (i, 0), (2, 3)),), [None, 0], [0],
  f32(5, 3), i32(5, B))
c("dynamic_slice_batched_operand", lambda x, i: (lax.dynamic_slice(x, (i, 1), (2, 2)),), [1, None], [0],
  f32(5, B, 3), np.int32(2))
c("dynamic_slice_both_batched", lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 2)),), [0, 0, None], [0],
  f32(B, 5, 3), i32(5, B), np.int32(1))
c("dynamic_update_slice_batched_operand", lambda x, u, i: (lax.dynamic_update_slice(x, u, (i, 0)),),
  [0, None, None], [0], f32(B, 5, 3), f32(2, 3), np.int32(3))
c("dynamic_update_slice_batched_update", lambda x, u, i: (lax.dynamic_update_slice(x, u, (i, 0)),),
  [None, 1, None], [0], f32(5, 3), f32(2, B, 3), np.int32(-1))
c("dynamic_update_slice_batched_index", lambda x, u, i: (lax.dynamic_update_slice(x, u, (i, 0)),),
  [None, None, 0], [0], f32(5, 3), f32(2, 3), i32(5, B))
c("gather_batched_indices", lambda x, i: (jnp.asarray(x)[i],), [None, 0], [0], f32(5, 3), i32(5, B, 2))
c("gather_batched_operand", lambda x, i: (x[i],), [1, None], [0], f32(5, B, 3), i32(5, 2))
c("take_both_batched", lambda x, i: (jnp.take(x, i, axis=1),), [0, 1], [0], f32(B, 2, 5), i32(5, 3, B))
c("take_along_axis_both_batched", lambda x, i: (jnp.take_along_axis(x, i, axis=1),), [0, 0], [0],
  f32(B, 2, 5), i32(5, B, 2, 3))
c("scatter_add_batched_operand", lambda x, i, u: (x.at[i].add(u),), [0, None, None], [0], f32(B, 5, 3),
  i32(5, 2), f32(2, 3))
c("scatter_set_batched_indices", lambda x, i, u: (jnp.asarray(x).at[i].set(u),), [None, 0, None], [0], f32(5, 3),
  i32(5, B, 2), f32(2, 3))
c("scatter_add_all_batched", lambda x, i, u: (x.at[i].add(u),), [1, 0, 0], [0], f32(5, B, 3), i32(5, B, 2),
  f32(B, 2, 3))
c("cond_batched_predicate", lambda p, x, y: (lax.cond(p, lambda a: jnp.sin(a) * y, jnp.cos, x),), [0, 0, None],
  [0], np.array([True, False, False, True]), f32(B, 3), f32(3))
c("cond_batched_predicate_scalar", lambda v, s: (lax.cond(v > 0, lambda a: a * 2.0, lambda a: a + 1.0, s),),
  [0, None], [0], f32(B), np.float32(3.0))
c("switch_batched_index", lambda i, x: (lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x),), [0, 1], [0],
  np.array([0, 2, 1, 5], dtype=np.int32), f32(3, B))
c("while_batched_carry", lambda n, x, c0: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x),
  (jnp.int32(0), c0)), [None, 0, None], [0, 0], np.int32(3), f32(B, 3), f32(3))
c("fori_loop_batched_const", lambda x, c0: (lax.fori_loop(0, 3, lambda i, c: c * 0.5 + x, c0),), [0, None], [0],
  f32(B, 3), f32(3))
NHWC = ("NHWC", "HWIO", "NHWC")
c("conv_batched_lhs", lambda x, w: (lax.conv_general_dilated(x, w, (1,), "SAME"),), [0, None], [0], f32(B, 2, 3, 8),
  f32(5, 3, 3))
c("conv_both_batched_nhwc", lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=NHWC),),
  [1, 3], [0], f32(2, B, 5, 5, 3), f32(3, 3, 3, B, 4))
c("conv_batched_rhs_depthwise", lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=3,
  dimension_numbers=NHWC),), [None, 0], [0], f32(2, 6, 6, 3), f32(B, 3, 3, 1, 6))
c("conv_batched_lhs_batch_groups", lambda x, w: (lax.conv_general_dilated(x, w, (1,), "VALID", batch_group_count=2),),
  [2, None], [0], f32(4, 3, B, 8), f32(4, 3, 3))
c("reduce_window_sum_same", lambda x: (lax.reduce_window(x, 0., lax.add, (3, 3), (2, 2), "SAME"),), [0], [0],
  f32(B, 5, 6))
c("grad_of_reduce_window_max", lambda x: (jax.grad(lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (1, 1),
  "VALID").sum())(x),), [1], [0], f32(5, B, 4))
c("pad_batched_value", lambda x, v: (lax.pad(x, v, [(1, 2, 1)]),), [None, 0], [0], f32(3), f32(B))
c("pad_both_batched", lambda x, v: (lax.pad(x, v, [(1, 2, 1)]),), [1, 0], [0], f32(3, B), f32(B))

# Batched predicates (added after the cases above, so that their arguments stay the same):
# the `while` runs until no example's predicate holds, updating only the running ones.
def pos(*s): return np.abs(f32(*s)) + np.float32(0.1)
c("while_batched_predicate", lambda c0: (lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0, c0),), [0], [0],
  pos(B, 3))
c("while_batched_bound", lambda n, x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x),
  (jnp.int32(0), x)), [0, 0], [0, 0], np.array([0, 3, 1, 5], dtype=np.int32), f32(B, 3))
c("while_batched_bound_unbatched_carry", lambda n, y, w: lax.while_loop(lambda c: c[0] < n,
  lambda c: (c[0] + 1, c[1] * 0.5 + w), (jnp.int32(0), y)), [0, None, None], [0, 0],
  np.array([2, 0, 4, 1], dtype=np.int32), f32(3), f32(3))
c("while_batched_predicate_nested_vmap", lambda x: (jax.vmap(lambda r: lax.while_loop(lambda c: c.sum() < 10.0,
  lambda c: c * 2.0, r))(x),), [1], [0], pos(2, B, 3))

# Rank-0 dynamic slices (their start indices are an empty `i32[0]` constvar) and branches
# that close over constant arrays.
c("dynamic_slice_rank0", lambda x: (lax.dynamic_slice(x, (), ()),), [0], [0], f32(B))
c("dynamic_update_slice_rank0_batched_update", lambda x, u: (lax.dynamic_update_slice(x, u, ()),), [None, 0], [0],
  np.float32(1.5), f32(B))
c("dynamic_update_slice_rank0_batched_operand", lambda x, u: (lax.dynamic_update_slice(x, u, ()) * x,), [0, None],
  [0], f32(B), np.float32(-2.0))
c("jit_dynamic_slice_rank0", lambda x: (jax.jit(lambda y: lax.dynamic_slice(y, (), ()) + 1.0)(x),), [0], [0], f32(B))
c("checkpoint_dynamic_slice_rank0", lambda x: (jax.checkpoint(lambda y: lax.dynamic_slice(y, (), ()) * 2.0)(x),), [0],
  [0], f32(B))
CONST3 = np.arange(3, dtype=np.float32) - 1.0
c("cond_batched_predicate_constant_branches", lambda p, x: (lax.cond(p, lambda a: a * jnp.asarray(CONST3),
  lambda a: a + jnp.asarray(CONST3), x),), [0, 0], [0], np.array([True, False, True, False]), f32(B, 3))
# NumPy advanced indexing beyond rows of axis 0, batched.
c("index_col_batched_indices", lambda x, i: (jnp.asarray(x)[:, i],), [None, 0], [0], f32(3, 5), i32(5, B, 2))
c("index_two_batched_operand", lambda x, i, j: (x[i, 1:3, j],), [2, None, None], [0], f32(4, 3, B, 5),
  i32(4, 2), i32(5, 1, 2))
c("at_max_two_all_batched", lambda x, i, j, v: (x.at[i, :, j].max(v),), [0, 0, None, 0], [0], f32(B, 4, 3, 5),
  i32(4, B, 2), i32(5, 2), f32(B, 3))
# The outer batch reaches only the body of an inner vmap's while (whose predicate is
# batched): the carries it batches put their batch axis after the predicate's (axis 1).
c("while_inner_batched_predicate_outer_body", lambda n, x, w: (jax.vmap(lambda m, r: lax.while_loop(
  lambda c: c[0] < m, lambda c: (c[0] + 1, c[1] * w), (jnp.int32(0), r)))(n, x)[1],), [None, None, 0], [0],
  np.array([1, 0, 2, 3], dtype=np.int32), f32(B, 3), f32(2, 3))

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.bool_: 'bool'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": a.reshape(-1).tolist()}

out = {}
for name, (fn, in_axes, out_axes, args) in CASES.items():
    vf = jax.vmap(fn, in_axes=tuple(in_axes), out_axes=tuple(out_axes))
    outs = vf(*args)
    out[name] = {"jaxpr": str(jax.make_jaxpr(vf)(*args)), "in_axes": in_axes, "out_axes": out_axes,
                 "args": [arr(a) for a in args], "outputs": [arr(o) for o in outs]}
print(json.dumps(out, indent=1))
