"""Records JAX 0.10.2's jaxprs and outputs of the indexing, sorting and cumulative
primitives (out-of-bounds modes, NaN order, ties) for the interpreter's tests.

Usage: python3 tests/data/indexing/gen_indexing.py tests/data/indexing
"""
import json, sys
import numpy as np
import jax, jax.numpy as jnp
from jax import lax

def arr(x):
    x = np.asarray(x)
    dt = {"float32": "f32", "int32": "i32", "bool": "bool"}[str(x.dtype)]
    data = [("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")) if dt == "f32" and not np.isfinite(v) else v.item() for v in x.ravel()]
    return {"dtype": dt, "shape": list(x.shape), "data": data}

x = np.array([[3.0, np.nan, -1.0, 2.0, -1.0], [0.5, 4.0, np.inf, -0.0, 0.0]], np.float32)
y = np.arange(20, dtype=np.float32).reshape(4, 5)
idx = np.array([2, -1, 7, 0], np.int32)
cases = {
    "gather_fill": (lambda y, i: jnp.take(y, i, axis=0, mode="fill", fill_value=1.5), (y, idx)),
    "gather_fill_nan": (lambda y, i: jnp.take(y, i, axis=1, mode="fill"), (y, idx)),
    "gather_clip": (lambda y, i: jnp.take(y, i, axis=1, mode="clip"), (y, idx)),
    "gather_int_fill": (lambda y, i: jnp.take(y.astype(jnp.int32), i, axis=0, mode="fill"), (y, idx)),
    "take_along_axis": (lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1), (x,)),
    "scatter_add_drop": (lambda y, i: y.at[i].add(10.0, mode="drop"), (y, idx)),
    "scatter_add_clip": (lambda y, i: y.at[i].add(10.0, mode="clip"), (y, idx)),
    "scatter_set": (lambda y, i: y.at[:, i].set(-5.0, mode="drop"), (y, idx)),
    "scatter_mul": (lambda y, i: y.at[i].mul(2.0, mode="drop"), (y, idx)),
    "scatter_max": (lambda y, i: y.at[i].max(7.0, mode="drop"), (y, idx)),
    "sort_nan_last": (lambda x: lax.sort(x, dimension=1), (x,)),
    "sort_axis0": (lambda x: lax.sort(x, dimension=0), (x,)),
    "argsort_stable": (lambda x: jnp.argsort(x, axis=1), (x,)),
    "sort_two_keys": (lambda x: lax.sort((x > 2.0, -x, x), dimension=1, num_keys=2), (y / 3.0,)),
    "top_k": (lambda x: lax.top_k(x, 3), (x,)),
    "argmin": (lambda x: jnp.argmin(x, axis=1), (x,)),
    "split": (lambda y: jnp.split(y, [1, 3], axis=1), (y,)),
    "cumsum_rev": (lambda y: lax.cumsum(y, axis=0, reverse=True), (y,)),
    "cumprod": (lambda y: lax.cumprod(y / 10.0 + 0.5, axis=1), (y,)),
    "cummax": (lambda x: lax.cummax(x, axis=1), (x,)),
    "cummin_rev": (lambda x: lax.cummin(x, axis=1, reverse=True), (x,)),
    "cumlogsumexp": (lambda y: lax.cumlogsumexp(y / 4.0, axis=1), (y,)),
}
out = []
for name, (f, args) in cases.items():
    jaxpr = jax.make_jaxpr(f)(*args)
    res = jax.jit(f)(*args)
    res = res if isinstance(res, (list, tuple)) else [res]
    out.append({"name": name, "jaxpr": str(jaxpr), "args": [arr(a) for a in args], "outputs": [arr(r) for r in res]})
json.dump(out, open(sys.argv[1] + "/cases.json", "w"), indent=1)
print(len(out), "cases")
