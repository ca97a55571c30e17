"""The oracle for crates/trace/tests/numpy_oracle.rs: what JAX records for each jax.numpy /
jax.nn / jax.lax function the Rust surface mirrors. Each entry is a small program over
arguments of the given types; the Rust test traces its Rust twin (same name) and compares
the printed jaxprs character for character.

    python3 crates/trace/tests/data/jnp_oracle.py > crates/trace/tests/data/jnp_oracle.json
"""
import json
import jax, jax.numpy as jnp
from jax import lax
jax.config.update('jax_platform_name', 'cpu')

F, I, B = 'f32', 'i32', 'bool'
DT = {F: jnp.float32, I: jnp.int32, B: jnp.bool_}
CASES = {}
def case(name, *args):
    def deco(fn):
        CASES[name] = (fn, args)
        return fn
    return deco

def c(name, fn, *args): case(name, *args)(fn)

# Products
c("dot_1d_1d", jnp.dot, (F, [3]), (F, [3]))
c("dot_2d_1d", jnp.dot, (F, [2, 3]), (F, [3]))
c("dot_1d_2d", jnp.dot, (F, [3]), (F, [3, 4]))
c("dot_3d_3d", jnp.dot, (F, [2, 3, 4]), (F, [6, 4, 5]))
c("dot_scalar", jnp.dot, (F, []), (F, [3]))
c("matmul_2d_2d", jnp.matmul, (F, [2, 3]), (F, [3, 4]))
c("matmul_3d_2d", jnp.matmul, (F, [2, 3, 4]), (F, [4, 5]))
c("matmul_2d_3d", jnp.matmul, (F, [3, 4]), (F, [2, 4, 5]))
c("matmul_batched", jnp.matmul, (F, [2, 3, 4]), (F, [2, 4, 5]))
c("matmul_broadcast", jnp.matmul, (F, [1, 3, 4]), (F, [2, 4, 5]))
c("matmul_both_one", jnp.matmul, (F, [1, 3, 4]), (F, [1, 4, 5]))
c("matmul_4d_3d", jnp.matmul, (F, [2, 2, 3, 4]), (F, [2, 4, 5]))
c("matmul_1d_3d", jnp.matmul, (F, [4]), (F, [2, 4, 5]))
c("matmul_int_float", jnp.matmul, (I, [3]), (I, [3, 2]))
for spec, a, b in [("ij,jk->ik", [2, 3], [3, 4]), ("ij,jk->ki", [2, 3], [3, 4]), ("ij,kj->ik", [2, 3], [4, 3]),
                   ("i,i->", [3], [3]), ("i,j->ij", [3], [4]), ("ij,ij->i", [3, 4], [3, 4]),
                   ("ijk,jl->il", [2, 3, 5], [3, 4]), ("bij,bjk->bik", [2, 3, 4], [2, 4, 5]),
                   ("bij,bjk->bki", [2, 3, 4], [2, 4, 5]), ("ij,jk", [2, 3], [3, 4]),
                   ("bqd,bkd->bqk", [2, 3, 4], [2, 5, 4]), ("bij,bjk->bik", [1, 3, 4], [2, 4, 5])]:
    c(f"einsum {spec} {a} {b}", (lambda s: lambda x, y: jnp.einsum(s, x, y))(spec), (F, a), (F, b))
c("einsum ij->ji", lambda x: jnp.einsum("ij->ji", x), (F, [2, 3]))
c("einsum ijk->ki", lambda x: jnp.einsum("ijk->ki", x), (F, [2, 3, 4]))

# Reductions
c("sum", jnp.sum, (F, [2, 3]))
c("sum_axes_unsorted", lambda x: jnp.sum(x, axis=(2, 0)), (F, [2, 3, 4]))
c("sum_keepdims", lambda x: jnp.sum(x, axis=(0, 2), keepdims=True), (F, [2, 3, 4]))
c("sum_bool", jnp.sum, (B, [2, 3]))
c("sum_int", jnp.sum, (I, [2, 3]))
c("max_keepdims", lambda x: jnp.max(x, axis=-1, keepdims=True), (F, [2, 3, 4]))
c("min", jnp.min, (F, [2, 3]))
c("mean", jnp.mean, (F, [2, 3]))
c("mean_axes", lambda x: jnp.mean(x, axis=(0, 2)), (F, [2, 3, 4]))
c("mean_keepdims", lambda x: jnp.mean(x, axis=-1, keepdims=True), (F, [3, 5]))
c("mean_int", jnp.mean, (I, [2, 3]))
c("argmax", lambda x: jnp.argmax(x, axis=1), (F, [3, 4]))
c("argmax_flat", jnp.argmax, (F, [3, 4]))

# Layout
c("reshape", lambda x: jnp.reshape(x, (-1, 2)), (F, [2, 3, 4]))
c("reshape_same", lambda x: jnp.reshape(x, (2, 3, 4)), (F, [2, 3, 4]))
c("transpose", lambda x: jnp.transpose(x, (2, 0, 1)), (F, [2, 3, 4]))
c("transpose_identity", lambda x: jnp.transpose(x, (0, 1)), (F, [2, 3]))
c("T", lambda x: x.T, (F, [2, 3, 4]))
c("broadcast_to", lambda x: jnp.broadcast_to(x, (2, 4, 3)), (F, [4, 1]))
c("broadcast_to_same", lambda x: jnp.broadcast_to(x, (2, 3)), (F, [2, 3]))
c("broadcast_add", lambda x, y: x + y, (F, [2, 1, 3]), (F, [4, 1]))
c("squeeze", lambda x: jnp.squeeze(x, 1), (F, [3, 1, 4]))
c("squeeze_all", jnp.squeeze, (F, [3, 1, 4, 1]))
c("expand_dims", lambda x: jnp.expand_dims(x, (0, 2)), (F, [3, 4]))
c("concatenate", lambda x, y: jnp.concatenate([x, y], axis=0), (F, [3, 4]), (F, [2, 4]))
c("concatenate_last", lambda x, y: jnp.concatenate([x, y], axis=-1), (F, [3, 4]), (F, [3, 2]))
c("pad", lambda x: lax.pad(x, 0.0, [(1, 2, 0), (0, 0, 1)]), (F, [2, 3]))

# Indexing
c("index_range", lambda x: x[1:4], (F, [6]))
c("index_int", lambda x: x[1], (F, [3, 4]))
c("index_negative", lambda x: x[-1], (F, [3, 4]))
c("index_column", lambda x: x[:, 2], (F, [3, 4]))
c("index_strided", lambda x: x[1:3, ::2], (F, [3, 4]))
c("index_new_axis", lambda x: x[None], (F, [3, 4]))
c("index_middle_new_axis", lambda x: x[:, None], (F, [3, 4]))
c("index_ellipsis_new_axis", lambda x: x[..., None], (F, [3, 4]))
c("index_mixed", lambda x: x[1:, None, 2], (F, [3, 4]))
c("index_full", lambda x: x[:], (F, [2, 3]))
c("index_traced", lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 4)), (F, [3, 4]), (I, []))
c("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0)), (F, [3, 4]), (F, [1, 4]), (I, []))

# Creation
c("zeros", lambda x: x + jnp.zeros((2, 3)), (F, [2, 3]))
c("ones_int", lambda x: jnp.ones((2, 3), jnp.int32), (F, [2, 3]))
c("full", lambda x: x * jnp.full((2, 3), 7.0, jnp.float32), (F, [2, 3]))
c("arange", lambda x: jnp.arange(5), (F, [1]))
c("arange_float", lambda x: jnp.arange(2.0), (F, [1]))
c("arange_from", lambda x: jnp.arange(1.0, 3.0), (F, [1]))
c("arange_step", lambda x: jnp.arange(1, 7, 2), (F, [1]))
c("arange_float_step", lambda x: jnp.arange(0.0, 2.0, 0.5), (F, [1]))

# Elementwise, promotion, weak types
c("unary_zoo", lambda x: jnp.tan(x) + jnp.log1p(x) + jnp.expm1(x) + jnp.sign(x) + lax.rsqrt(x) + jnp.square(x), (F, [3]))
c("exp_int", jnp.exp, (I, [3]))
c("abs_int", jnp.abs, (I, [3]))
c("neg", lambda x: -x, (F, [3]))
c("powers", lambda x, y: x ** 2 + x ** -1 + x ** 2.5 + x ** y + 2.0 ** x + jnp.power(x, 3), (F, [3]), (F, [3]))
c("scalar_ops", lambda x: 1.0 - x * 2 / 3.0 + 1, (F, [3]))
c("weak_tensor", lambda x: x / jnp.sqrt(4.0), (F, [3]))
c("weak_chain", lambda x: x * (jnp.sqrt(4.0) * 2.0), (F, [3]))
c("int_plus_float", lambda x: x + 1.5, (I, [3]))
c("int_times_float", lambda x, y: x * y, (I, [3]), (F, [3]))
c("comparisons", lambda x, y: ((x > 0) == (y <= x)) != (x >= 1.0), (F, [3]), (F, [3]))
c("maximum_minimum", lambda x, y: jnp.maximum(x, y) + jnp.minimum(x, 0.5), (F, [2, 3]), (F, [3]))
c("where", lambda x, y: jnp.where(x > 0, x, y), (F, [3]), (F, [3]))
c("where_scalar", lambda x: jnp.where(x > 0, x, 0.0), (F, [3]))
c("where_scalars", lambda x: jnp.where(x > 0, 1.0, 0.0), (F, [3]))
c("where_broadcast", lambda x, y: jnp.where(x > 0, x, y), (F, [2, 3]), (F, [3]))
c("where_twice", lambda x: jnp.where(x > 0, x, -x) + jnp.where(x > 0, x, -x), (F, [3]))
c("clip", lambda x: jnp.clip(x, 0.0, 1.0), (F, [3]))
c("clamp", lambda x: lax.clamp(0.0, x, 1.0), (F, [3]))
c("reduce_precision", lambda x: lax.reduce_precision(x, 5, 10), (F, [3]))
c("astype", lambda x: x.astype(jnp.int32), (F, [3]))

# jax.nn
c("relu", jax.nn.relu, (F, [3]))
c("relu_twice", lambda x: jax.nn.relu(jax.nn.relu(x)), (F, [3]))
c("sigmoid", jax.nn.sigmoid, (F, [3]))
c("silu", jax.nn.silu, (F, [3]))
c("gelu", jax.nn.gelu, (F, [3]))
c("softmax", lambda x: jax.nn.softmax(x), (F, [2, 3]))
c("softmax_axis0", lambda x: jax.nn.softmax(x, axis=0), (F, [2, 3]))
c("log_softmax", lambda x: jax.nn.log_softmax(x, axis=0), (F, [2, 3]))
c("logsumexp", lambda x: jax.nn.logsumexp(x, axis=-1), (F, [2, 3]))
c("one_hot", lambda x: jax.nn.one_hot(x, 3), (I, [3]))

# More promotion and broadcasting through the library
c("where_float_condition", lambda c, x: jnp.where(c, x, 1.0), (F, [3]), (F, [3]))
c("concatenate_mixed", lambda x, y: jnp.concatenate([x, y]), (I, [2]), (F, [3]))
c("clip_tensor_bounds", lambda x, lo: jnp.clip(x, lo, 2.0), (F, [2, 3]), (F, [3]))
c("one_hot_2d", lambda x: jax.nn.one_hot(x, 4), (I, [2, 3]))
c("softmax_3d", lambda x: jax.nn.softmax(x, axis=1), (F, [2, 3, 4]))
c("mean_bool", jnp.mean, (B, [4]))
c("matmul_vec_vec", jnp.matmul, (F, [3]), (F, [3]))

# Calls
c("jit_twice", lambda x: jax.jit(jnp.sin)(jax.jit(jnp.sin)(x)), (F, [3]))
g = jax.checkpoint(jnp.sin)
c("checkpoint_twice", lambda x: g(g(x)), (F, [3]))

out = {}
for name, (fn, args) in CASES.items():
    vals = [jnp.zeros(shape, DT[dt]) for dt, shape in args]
    out[name] = dict(args=[[dt, shape] for dt, shape in args], jaxpr=str(jax.make_jaxpr(fn)(*vals)))
print(json.dumps(out, indent=1))
