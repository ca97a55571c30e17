"""The oracle for crates/trace/tests/numpy3.rs: what JAX 0.10.2 records and computes for
`jnp.pad` with its modes, `jnp.var`/`jnp.std` with `ddof` and `keepdims`, `jnp.round`
with `decimals`, `jnp.sort`/`jnp.argsort` descending or flattened, batched `tril`/`triu`,
`jnp.linspace` with `num < 2` or an integer dtype, `jnp.array_split` and `jnp.repeat` of a
scalar. Each case is a small program over fixed pseudo-random arguments; it records the
printed jaxpr, the outputs and, where JAX differentiates it, the gradient of the sum of
the (first) output with respect to every float argument. The Rust test traces its twin
(same name), compares the printed jaxprs character for character and the values within
1e-4.

    python3 crates/trace/tests/data/gen_numpy3.py > crates/trace/tests/data/numpy3_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(3)
def f32(*s): return rng.standard_normal(s).astype(np.float32)
def i32(*v): return np.array(v, dtype=np.int32)

CASES = {}
def c(name, fn, *args, grad=True):
    CASES[name] = (fn, args, grad)

# jnp.pad: constant values (a scalar, or one per side of each axis), and the modes.
c("pad_constant_default", lambda x: jnp.pad(x, ((1, 2), (2, 1))), f32(3, 4))
c("pad_constant_scalar", lambda x: jnp.pad(x, ((0, 2), (1, 0)), constant_values=1.5), f32(3, 4))
c("pad_constant_per_axis", lambda x: jnp.pad(x, ((1, 2), (0, 1)), constant_values=((1., 2.), (3., 4.))), f32(3, 4))
c("pad_constant_int_one_width", lambda x: jnp.pad(x, ((1, 1),)), i32(1, 2, 3, 4, 5, 6).reshape(2, 3), grad=False)
c("pad_constant_traced", lambda x, v: jnp.pad(x, ((1, 0), (0, 2)), constant_values=v), f32(2, 2), np.float32(3.0))
c("pad_constant_one_pair_int", lambda x: jnp.pad(x, ((1, 1), (0, 1)), constant_values=((1., 2.),)), i32(1, 2, 3, 4).reshape(2, 2), grad=False)
c("pad_constant_one_pair_1d", lambda x: jnp.pad(x, ((2, 1),), constant_values=((-1., 5.),)), f32(3))
c("pad_scalar", lambda x: jnp.pad(x, 2), np.float32(1.25))
c("pad_symmetric_size_one", lambda x: jnp.pad(x, ((1, 2),), mode="symmetric"), f32(1))
c("pad_reflect", lambda x: jnp.pad(x, ((1, 2), (2, 1)), mode="reflect"), f32(3, 4))
c("pad_reflect_wide", lambda x: jnp.pad(x, ((5, 0), (0, 7)), mode="reflect"), f32(3, 4))
c("pad_reflect_size_one", lambda x: jnp.pad(x, ((2, 1), (1, 1)), mode="reflect"), f32(1, 3))
c("pad_symmetric", lambda x: jnp.pad(x, ((1, 2), (2, 1)), mode="symmetric"), f32(3, 4))
c("pad_symmetric_wide", lambda x: jnp.pad(x, ((0, 4), (5, 0)), mode="symmetric"), f32(2, 3))
c("pad_edge", lambda x: jnp.pad(x, ((0, 2), (1, 0)), mode="edge"), f32(3, 4))
c("pad_edge_3d", lambda x: jnp.pad(x, ((1, 1), (0, 0), (2, 0)), mode="edge"), f32(2, 2, 3))
c("pad_wrap", lambda x: jnp.pad(x, ((1, 2), (2, 1)), mode="wrap"), f32(3, 4))
c("pad_wrap_wide", lambda x: jnp.pad(x, ((0, 0), (6, 9)), mode="wrap"), f32(3, 4))
c("pad_maximum", lambda x: jnp.pad(x, ((1, 2), (2, 1)), mode="maximum"), f32(3, 4))
c("pad_minimum_int", lambda x: jnp.pad(x, ((1, 0),), mode="minimum"), i32(4, -2, 7, 0), grad=False)
c("pad_mean", lambda x: jnp.pad(x, ((1, 2), (0, 1)), mode="mean"), f32(3, 4))
c("pad_twice", lambda x: jnp.pad(jnp.pad(x, ((1, 1), (0, 0)), mode="reflect"), ((1, 1), (0, 0)), mode="edge")
  + jnp.pad(x, ((2, 2), (0, 0)), mode="reflect")[:, :], f32(3, 2))
# jnp.var / jnp.std with ddof and keepdims (ddof is a traced i32[] argument of _var).
c("var_ddof_keepdims", lambda x: jnp.var(x, axis=1, ddof=1, keepdims=True), f32(3, 4))
c("var_all", lambda x: jnp.var(x), f32(3, 4))
c("var_axis0", lambda x: jnp.var(x, axis=0, ddof=2), f32(3, 4))
c("var_ddof_too_large", lambda x: jnp.var(x, axis=0, ddof=3), f32(3, 2), grad=False)
c("std_ddof", lambda x: jnp.std(x, axis=(0, 1), ddof=1), f32(3, 4))
c("std_keepdims", lambda x: jnp.std(x, axis=-1, keepdims=True), f32(2, 3, 4))
c("std_all", lambda x: jnp.std(x), f32(5))
# jnp.round with decimals.
c("round_decimals", lambda x: jnp.round(x, 2), f32(3, 4) * 10, grad=False)
c("round_negative_decimals", lambda x: jnp.round(x, -1), f32(6) * 100, grad=False)
c("round_int", lambda x: jnp.round(x, 1), i32(3, -7, 12), grad=False)
c("round_grad", lambda x: jnp.round(x, 1) * x, f32(4))
# sort / argsort: descending, flattened.
c("sort_flat", lambda x: jnp.sort(x, axis=None), f32(3, 4))
c("sort_descending", lambda x: jnp.sort(x, axis=0, descending=True), f32(3, 4))
c("sort_flat_descending", lambda x: jnp.sort(x, axis=None, descending=True), f32(2, 3))
c("argsort_descending", lambda x: jnp.argsort(x, axis=1, descending=True), f32(3, 4), grad=False)
c("argsort_flat", lambda x: jnp.argsort(x, axis=None), f32(3, 4), grad=False)
c("argsort_descending_ties", lambda x: jnp.argsort(x, descending=True), i32(3, 1, 3, 2, 1, 3), grad=False)
# batched tril / triu.
c("tril_batched", lambda x: jnp.tril(x, 1), f32(2, 3, 4))
c("triu_batched", lambda x: jnp.triu(x, -1), f32(2, 2, 3, 3))
c("triu_batched_int", lambda x: jnp.triu(x), i32(*range(18)).reshape(2, 3, 3), grad=False)
# linspace with num < 2 and integer dtypes; array_split; repeat of a scalar.
c("linspace_one", lambda: jnp.linspace(0.0, 1.0, 1))
c("linspace_one_no_endpoint", lambda: jnp.linspace(2.0, 1.0, 1, endpoint=False))
c("linspace_zero", lambda: jnp.linspace(0.0, 1.0, 0))
c("linspace_int", lambda: jnp.linspace(0.0, 10.0, 4, dtype=jnp.int32))
c("linspace_int_no_endpoint", lambda: jnp.linspace(-3.0, 4.0, 5, endpoint=False, dtype=jnp.int32))
c("linspace_int_one", lambda: jnp.linspace(-2.0, 5.0, 1, endpoint=False, dtype=jnp.int32))
c("linspace_int_zero", lambda: jnp.linspace(0.0, 1.0, 0, dtype=jnp.int32))
c("array_split_uneven", lambda x: tuple(jnp.array_split(x, 3, axis=1)), f32(2, 5))
c("array_split_rows", lambda x: tuple(jnp.array_split(x, 3)), f32(7, 2))
c("array_split_more_than_size", lambda x: tuple(jnp.array_split(x, 4, axis=-1)), f32(3))
c("repeat_scalar", lambda x: jnp.repeat(x, 3), np.float32(1.5))
c("repeat_scalar_axis0", lambda x: jnp.repeat(x, 4, axis=0), np.float32(-0.5))
c("repeat_scalar_zero", lambda x: jnp.repeat(x, 0, axis=0), np.float32(2.0))

# Concrete scalars of every dtype (jnp.bfloat16(2.5), ...): literals where they are used.
c("bfloat16_scalar", lambda x: x * jnp.bfloat16(2.5) + jnp.bfloat16(1), np.array([0.5, -1.25, 3.0], jnp.bfloat16))
c("float16_scalar", lambda x: x * jnp.float16(2.5) - jnp.float16(0.125), np.array([0.5, -1.25, 3.0], np.float16))
c("int8_scalar", lambda x: x * jnp.int8(3) + jnp.int8(-2), np.array([1, -4, 20], np.int8))
c("int16_scalar", lambda x: x - jnp.int16(300), np.array([1, -4, 20], np.int16))
c("uint8_scalar", lambda x: x + jnp.uint8(7), np.array([1, 4, 250], np.uint8))
c("uint32_scalar", lambda x: x * jnp.uint32(3), np.array([1, 4, 250], np.uint32))
c("bool_scalar", lambda x: jnp.logical_and(x, jnp.bool_(True)), np.array([True, False]))

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.uint8: 'u8', np.bool_: 'bool',
            jnp.bfloat16: 'bf16', np.float16: 'f16', np.int8: 'i8', np.int16: 'i16'}[np.dtype(a.dtype).type]

# jnp.prod, jnp.all, jnp.any (issue 45): reduce_prod (booleans as i32), and reduce_and /
# reduce_or of the operand converted to bool.
c("prod_axes_keepdims", lambda x: jnp.prod(x, axis=(1, 0), keepdims=True), f32(3, 4))
c("prod_all", lambda x: jnp.prod(x), f32(2, 3))
c("prod_bool", lambda b: jnp.prod(b, axis=0), np.array([[True, False], [True, True]]), grad=False)
c("all_any", lambda x: (jnp.all(x > 0, axis=1), jnp.any(x, axis=0, keepdims=True), jnp.all(x)), f32(3, 4),
  grad=False)
# jnp.stack (dtypes promoted, a negative axis), jnp.unstack, jnp.tile (fewer and more reps
# than axes): the stack, unstack and tile primitives (issue 45).
c("stack_promoted", lambda x, i: jnp.stack([x, i, x * 2.0], axis=-1), f32(3, 4), i32(*range(12)).reshape(3, 4))
c("unstack_axis1", lambda x: jnp.unstack(x, axis=1), f32(3, 4))
c("tile_fewer_reps", lambda x: jnp.tile(x, (2,)), f32(3, 4))
c("tile_more_reps", lambda x: jnp.tile(x, (2, 1, 3)), f32(3, 4))

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
