"""The oracle for crates/trace/tests/numpy2.rs: what JAX 0.10.2 records and computes for
the jax.numpy functions that index with integer arrays (`take`, `take_along_axis`,
`x[idx]`, `x.at[idx]`), scan, sort (`cumsum`, `cumprod`, `sort`, `argsort`, `argmax`,
`lax.top_k`) and cut (`tril`, `triu`, `split`), `linspace`, `jnp.repeat`, the
`jax.ops.segment_*` reductions, negative-step slices and the boolean operators. Each case is a small
program over fixed pseudo-random arguments; it records the printed jaxpr, the outputs
and, where JAX differentiates it, the gradient of the sum of the (first) output with
respect to every float argument. The Rust test traces its twin (same name), compares the
printed jaxprs character for character and the values within 1e-4.

    python3 crates/trace/tests/data/gen_numpy2.py > crates/trace/tests/data/numpy2_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(0)
def f32(*s): return rng.standard_normal(s).astype(np.float32)
def i32(*v): return np.array(v, dtype=np.int32)

CASES = {}
def c(name, fn, *args, grad=True):
    CASES[name] = (fn, args, grad)

c("take_axis1", lambda x, i: jnp.take(x, i, axis=1), f32(3, 4), i32(2, 0, -1, 3))
c("take_axis0_2d_indices", lambda x, i: jnp.take(x, i, axis=0), f32(3, 4), i32(2, 0, -3, 1).reshape(2, 2))
c("take_flat", lambda x, i: jnp.take(x, i), f32(3, 4), i32(11, 0, -1, 5))
c("take_out_of_bounds", lambda x, i: jnp.take(x, i, axis=0), f32(3, 2), i32(1, 3, -4))
c("take_int", lambda x, i: jnp.take(x, i), i32(4, -5, 6), i32(0, 3, -1), grad=False)
c("take_u32", lambda x, i: jnp.take(x, i), np.array([7, 8], np.uint32), i32(1, 2), grad=False)
c("index_array", lambda x, i: x[i], f32(3, 4), i32(2, 0, -1, 0))
c("index_array_2d", lambda x, i: x[i], f32(5, 2), i32(4, 0, -2, 1).reshape(2, 2))
c("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=1), f32(3, 4), i32(2, 0, -1, 3, 3, 1).reshape(3, 2))
c("take_along_axis_3d", lambda x, i: jnp.take_along_axis(x, i, axis=1), f32(2, 3, 2), i32(*range(-2, 6)).reshape(2, 2, 2))
c("at_set", lambda x, i, v: x.at[i].set(v), f32(3, 4), i32(2, -3), f32(2, 4))
c("at_add", lambda x, i, v: x.at[i].add(v), f32(3, 4), i32(2, 0, 2), f32(3, 4))
c("at_add_twice", lambda x, i, v: x.at[i].add(v).at[i].add(v), f32(4), i32(1, 3), f32(2))
c("at_add_dropped", lambda x, i, v: x.at[i].add(v), f32(3, 2), i32(5, 1), f32(2, 2))
c("at_set_scalar", lambda x, i: x.at[i].set(2.0), f32(3, 4), i32(1,))
c("at_get", lambda x, i: x.at[i].get(), f32(3, 4), i32(2, -1))
c("cumsum_axis1", lambda x: jnp.cumsum(x, axis=1), f32(3, 4))
c("cumsum_flat", lambda x: jnp.cumsum(x), f32(3, 4))
c("cumsum_reverse", lambda x: lax.cumsum(x, axis=0, reverse=True), f32(3, 4))
c("cumprod_axis0", lambda x: jnp.cumprod(x, axis=0), f32(3, 4))
c("cumprod_reverse", lambda x: lax.cumprod(x, axis=1, reverse=True), f32(3, 4))
c("sort_axis1", lambda x: jnp.sort(x, axis=1), f32(3, 4))
c("sort_axis0", lambda x: jnp.sort(x, axis=0), f32(3, 4))
c("argsort", lambda x: jnp.argsort(x, axis=-1), f32(3, 4), grad=False)
c("argmax", lambda x: jnp.argmax(x, axis=1), f32(3, 4), grad=False)
c("tril", lambda x: jnp.tril(x), f32(3, 4))
c("tril_k", lambda x: jnp.tril(x, -1), f32(4, 3))
c("triu", lambda x: jnp.triu(x), f32(3, 4))
c("triu_k", lambda x: jnp.triu(x, 2), f32(3, 4))
c("split_count", lambda x: tuple(jnp.split(x, 2, axis=1)), f32(3, 4))
c("split_indices", lambda x: tuple(jnp.split(x, [1, 3], axis=-1)), f32(3, 4))
c("split_rows", lambda x: tuple(jnp.split(x, 3)), f32(3, 2))
c("linspace", lambda: jnp.linspace(0.0, 1.0, 5))
c("linspace_no_endpoint", lambda: jnp.linspace(-1.0, 2.0, 4, endpoint=False))
c("top_k", lambda x: lax.top_k(x, 2), f32(3, 5))
# take_along_axis broadcasting a size-1 axis of the indices (slices of x) or of x.
c("take_along_axis_idx_broadcast", lambda x, i: jnp.take_along_axis(x, i, axis=1), f32(3, 4, 2), i32(1, -1, 0, 3, 2, 2).reshape(3, 2, 1))
c("take_along_axis_x_broadcast", lambda x, i: jnp.take_along_axis(x, i, axis=1), f32(1, 4), i32(0, 3, 1, 2, -2, 0).reshape(3, 2))
c("take_along_axis_u8", lambda x, i: jnp.take_along_axis(x, i, axis=0), f32(4), np.array([3, 0, 1], dtype=np.uint8))
# jnp.repeat with a static count: broadcast_in_dim + reshape.
c("repeat_axis1", lambda x: jnp.repeat(x, 2, axis=1), f32(3, 4))
c("repeat_axis_neg", lambda x: jnp.repeat(x, 3, axis=-1), f32(2, 2))
c("repeat_flat", lambda x: jnp.repeat(x, 3), f32(2, 3))
# jnp.repeat with total_repeat_length or per-element counts: JAX's cumsum/scatter-add/take.
c("repeat_total_count", lambda x: jnp.repeat(x, 2, axis=0, total_repeat_length=6), f32(3, 4))
c("repeat_total_traced", lambda x, r: jnp.repeat(x, r, axis=0, total_repeat_length=5), f32(3, 4), i32(1, 2, 2))
c("repeat_total_short", lambda x, r: jnp.repeat(x, r, axis=1, total_repeat_length=4), f32(2, 3), i32(3, 0, 2))
c("repeat_total_flat", lambda x: jnp.repeat(x, 2, total_repeat_length=10), f32(2, 3))
c("repeat_total_single", lambda x: jnp.repeat(x, 2, axis=0, total_repeat_length=2), f32(1, 4))
c("repeat_each", lambda x: jnp.repeat(x, np.array([1, 2, 0]), axis=0), f32(3, 4))
# jax.ops segment reductions (ids outside [0, num_segments) are dropped).
c("segment_sum", lambda d, i: jax.ops.segment_sum(d, i, num_segments=4), f32(5, 3), i32(0, 2, 2, -1, 4))
c("segment_sum_1d", lambda d, i: jax.ops.segment_sum(d, i, num_segments=3), f32(6), i32(2, 0, 2, 1, 0, 0))
c("segment_max", lambda d, i: jax.ops.segment_max(d, i, num_segments=3), f32(5, 2), i32(1, 0, 2, 1, 0))
c("segment_min", lambda d, i: jax.ops.segment_min(d, i, num_segments=3), f32(5, 2), i32(1, 0, 2, 1, 0))
c("segment_prod", lambda d, i: jax.ops.segment_prod(d, i, num_segments=3), f32(5, 2), i32(1, 0, 2, 1, 0), grad=False)  # JAX: scatter_mul grads need unique indices
c("segment_sum_int", lambda d, i: jax.ops.segment_sum(d, i, num_segments=3), i32(1, 2, 3, 4), i32(0, 2, 2, 1), grad=False)
# basic indexing with negative steps: a slice with the positive step, then rev.
c("slice_reversed", lambda x: x[::-1], f32(6))
c("slice_negative_step", lambda x: x[::-2, 5:1:-1], f32(5, 7))
c("slice_negative_step_squeezed", lambda x: x[1, 6::-3], f32(3, 8))
# &, |, ^ on booleans.
c("bool_operators", lambda x, y: ((x > 0) & (y < 0)) | ((x > y) ^ (y > 1)), f32(6), f32(6), grad=False)
# Advanced indexing beyond rows of axis 0 (added after the cases above, so that their
# arguments stay the same): arrays at any axis, several (broadcast together), mixed with
# slices, integers, `...` and `None`; the same for `.at[...]`, and `.mul/.min/.max`.
X3 = lambda: f32(4, 5, 6)
c("index_col", lambda x, i: x[:, i], X3(), i32(0, 2, -1))
c("index_two_broadcast", lambda x, i, j: x[i, j], X3(), i32(0, 2, -1), i32(1, -2).reshape(2, 1))
c("index_separated", lambda x, i, j: x[i, :, j], X3(), i32(3, 0, 1), i32(5, -6).reshape(2, 1))
c("index_slice_then_array", lambda x, i: x[1:3, i], X3(), i32(4, -1, 0))
c("index_array_then_int", lambda x, i: x[:, i, 2], X3(), i32(1, 3).reshape(1, 2))
c("index_ellipsis", lambda x, i: x[..., i], X3(), i32(5, 0, -3, 1).reshape(2, 2))
c("index_negative_int", lambda x, i: x[i, -1], X3(), i32(2, -4))
c("index_newaxis", lambda x, i: x[None, :, i], f32(3, 4), i32(3, 1))
c("at_set_col", lambda x, i, v: x.at[:, i].set(v), X3(), i32(0, 2, -1), f32(6))
c("at_add_two_scalar", lambda x, i, j: x.at[i, j].add(2.0), X3(), i32(0, 2, -1), i32(1, -2).reshape(2, 1))
c("at_mul_slice", lambda x, i: x.at[1:3, i].mul(3.0), X3(), i32(4, -1, 0))
c("at_min_rows", lambda x, i, v: x.at[i].min(v), f32(4, 3), i32(1, -1, 1), f32(3, 3))
c("at_max_separated", lambda x, i, j, v: x.at[i, :, j].max(v), X3(), i32(3, 0, 1), i32(5, -6).reshape(2, 1), f32(5))
c("at_mul_rows", lambda x, i: x.at[i].mul(2.0), f32(4, 3), i32(2, 0))
c("at_get_separated", lambda x, i, j: x.at[i, :, j].get(), X3(), i32(3, 0, 1), i32(5, -6).reshape(2, 1))
# jnp.take's other modes, and jnp.remainder (what mode="wrap" calls).
c("take_clip", lambda x, i: jnp.take(x, i, axis=1, mode="clip"), f32(3, 4), i32(0, 5, -7, 2))
c("take_wrap", lambda x, i: jnp.take(x, i, axis=1, mode="wrap"), f32(3, 4), i32(0, 5, -7, 2))
c("take_wrap_flat", lambda x, i: jnp.take(x, i, mode="wrap"), f32(3, 4), i32(13, -1, 4))
c("take_clip_u8", lambda x, i: jnp.take(x, i, axis=0, mode="clip"), f32(3, 4), np.array([[1, 9]], np.uint8))
c("remainder_float", lambda x, y: jnp.remainder(x, y), f32(6), f32(6), grad=False)
c("remainder_int_scalar", lambda x: jnp.mod(x, 3), i32(-4, -3, 0, 2, 7), grad=False)
# Strided and reversed slices next to index arrays: `start + step * iota`, `rev`.
c("index_strided_array", lambda x, i: x[::2, i], f32(5, 4), i32(0, -2))
c("index_reversed_array", lambda x, i: x[3:0:-1, i], f32(5, 4), i32(3, 1))
c("at_add_reversed", lambda x, i, v: x.at[4::-2, i].add(v), f32(5, 4), i32(0, -1), f32(3, 2))
# `.at[].subtract`: scatter-sub (issue 45), a repeated and a negative index.
c("at_subtract", lambda x, i, v: x.at[i].subtract(v), f32(3, 4), i32(2, 0, 2, -1), f32(4, 4))
c("at_subtract_separated", lambda x, i, j, v: x.at[i, :, j].subtract(v), X3(), i32(3, 0, 1),
  i32(5, -6).reshape(2, 1), f32(5))

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.uint8: 'u8', np.bool_: 'bool'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    data = [x if np.isfinite(x) else str(x) for x in a.reshape(-1).tolist()]
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": data}

def first(o):
    return o[0] if isinstance(o, (tuple, list)) else o

out = {}
for name, (fn, args, grad) in CASES.items():
    outs = fn(*map(jnp.asarray, args))  # eagerly, as JAX (not NumPy) arrays
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    case = {"jaxpr": str(jax.make_jaxpr(fn)(*args)), "args": [arr(a) for a in args],
            "outputs": [arr(o) for o in outs]}
    if grad:
        argnums = tuple(i for i, a in enumerate(args) if np.asarray(a).dtype == np.float32)
        if not argnums:
            out[name] = case
            continue
        gs = jax.grad(lambda *a: jnp.sum(first(fn(*a))), argnums=argnums)(*args)
        case["argnums"] = list(argnums)
        case["grads"] = [arr(g) for g in gs]
    out[name] = case
print(json.dumps(out, indent=1))
