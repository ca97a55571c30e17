"""Record loop programs from real JAX 0.10.2 (CPU): the class of program issue 40 found
the JIT getting wrong. Inside `fori_loop`, `scan` and `while_loop` bodies, indices are
computed (`x[i]`, `i * 2 % n`, `n - 1 - i`), fed to `dynamic_slice`,
`dynamic_update_slice`, `gather` and `scatter`, and autodiff stacks them as residuals.

For each case: the jaxpr `jax.make_jaxpr` prints, JAX's value-and-grad jaxpr of it, the
arguments, the outputs, a cotangent and the vjp of it, and `print_saved_residuals`'s lines.

    pip install jax==0.10.2
    python3 gen_loops.py tests/data/loops/
"""
import json, sys, io, contextlib
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import print_saved_residuals

jax.config.update('jax_platform_name', 'cpu')

DTYPES = {np.dtype('float32'): 'f32', np.dtype('int32'): 'i32', np.dtype('bool'): 'bool'}


def arr(x):
    x = np.asarray(x)
    return {'dtype': DTYPES[x.dtype], 'shape': list(x.shape), 'data': [float(v) if x.dtype.kind == 'f' else int(v) for v in x.ravel()]}


def fori_sum(x):
    return lax.fori_loop(0, x.shape[0], lambda i, acc: acc + x[i], 0.0)


def fori_strided(x, w):
    n = x.shape[0]
    def body(i, acc):
        j = (i * 2 + 1) % n
        return acc + w[i] * jnp.sin(x[j]) + x[n - 1 - i] ** 2
    return lax.fori_loop(0, n, body, 0.0)


def kv_cache(wq, wk, xs):
    # A decoder's loop: step t writes its key into the cache and attends over the cache so
    # far (the rest masked out).
    steps, d = xs.shape
    def body(t, carry):
        cache, loss = carry
        x = xs[t]
        k = jnp.tanh(wk @ x)
        cache = lax.dynamic_update_slice(cache, k[None, :], (t, 0))
        q = wq @ x
        scores = cache @ q
        mask = jnp.arange(steps) <= t
        scores = jnp.where(mask, scores, -1e9)
        p = jax.nn.softmax(scores)
        out = p @ cache
        return cache, loss + jnp.sum(out ** 2)
    cache0 = jnp.zeros((steps, d), xs.dtype)
    _, loss = lax.fori_loop(0, steps, body, (cache0, 0.0))
    return loss


def scan_gather(table, idx, w):
    def body(h, i):
        row = jnp.take(table, i, axis=0)
        h = jnp.tanh(h @ w + row)
        return h, h[0]
    h, ys = lax.scan(body, jnp.zeros(table.shape[1], table.dtype), idx)
    return jnp.sum(h) + jnp.sum(ys ** 2)


def nested_fori(x):
    n, m = x.shape
    def outer(i, acc):
        def inner(j, a):
            return a + x[i, j] * x[(i + 1) % n, m - 1 - j]
        return lax.fori_loop(0, m, inner, acc)
    return lax.fori_loop(0, n, outer, 0.0)


def cond_in_loop(x):
    def body(i, acc):
        return lax.cond(i % 2 == 0, lambda a: a + jnp.sin(x[i]), lambda a: a * jnp.cos(x[i]), acc)
    return lax.fori_loop(0, x.shape[0], body, 1.0)


def scatter_in_loop(x, idx):
    def body(i, y):
        return y.at[idx[i]].add(x[i] * x[i])
    y = lax.fori_loop(0, x.shape[0], body, jnp.zeros(4, x.dtype))
    return jnp.sum(jnp.sin(y))


def window_in_loop(x):
    def body(i, acc):
        win = lax.dynamic_slice(x, (i,), (3,))
        return acc + win[0] * win[1] * win[2]
    return lax.fori_loop(0, x.shape[0] - 2, body, 0.0)


def index_carry(x):
    # The index is a carry of its own, moved by data-independent arithmetic, and stacked.
    def body(carry, _):
        j, acc = carry
        j = jnp.where(j + 3 >= x.shape[0], j + 3 - x.shape[0], j + 3)
        return (j, acc + x[j] * acc), j
    (_, acc), js = lax.scan(body, (jnp.int32(0), 1.0), None, length=7)
    return acc + jnp.sum(js)


rng = np.random.default_rng(40)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
CASES = [
    ('fori_sum', fori_sum, ['x'], [f32(5)], 'sum of x[i] in a fori_loop'),
    ('fori_strided', fori_strided, ['x', 'w'], [f32(6), f32(6)], 'x[(2i+1) % n], x[n-1-i] and w[i] in one body'),
    ('kv_cache', kv_cache, ['wq', 'wk', 'xs'], [f32(4, 4) * 0.5, f32(4, 4) * 0.5, f32(5, 4)], 'a decoder loop writing a KV cache'),
    ('scan_gather', scan_gather, ['table', 'idx', 'w'],
     [f32(6, 3), np.array([2, 0, 5, 5, 1], np.int32), f32(3, 3) * 0.5], 'rows gathered by scanned indices'),
    ('nested_fori', nested_fori, ['x'], [f32(3, 4)], 'two fori_loops, indices from both counters'),
    ('cond_in_loop', cond_in_loop, ['x'], [f32(5)], 'a cond on the loop counter, x[i] in each branch'),
    ('scatter_in_loop', scatter_in_loop, ['x', 'idx'], [f32(6), np.array([3, 1, 1, 0, 2, 3], np.int32)], 'y.at[idx[i]].add in a loop'),
    ('window_in_loop', window_in_loop, ['x'], [f32(7)], 'a dynamic_slice window at the counter'),
    ('index_carry', index_carry, ['x'], [f32(5) * 0.5], 'an index carried and stacked'),
]


def record(name, f, arg_names, args, description):
    args = [jnp.asarray(a) for a in args]
    argnums = tuple(i for i, a in enumerate(args) if a.dtype.kind == 'f')
    jaxpr = str(jax.make_jaxpr(f)(*args))
    vg = jax.value_and_grad(f, argnums=argnums)
    vg_jaxpr = str(jax.make_jaxpr(vg)(*args))
    out, vjp = jax.vjp(f, *args)
    ct = np.float32(0.75)
    grads = vjp(ct)
    value, vgrads = vg(*args)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_saved_residuals(f, *args)
    grads_json = [arr(g) if a.dtype.kind == 'f' else None for g, a in zip(grads, args)]
    args = [np.asarray(a) for a in args]
    return {
        'name': name,
        'description': description,
        'jax_version': jax.__version__,
        'arg_names': arg_names,
        'args': [arr(a) for a in args],
        'argnums': list(argnums),
        'jaxpr': jaxpr,
        'outputs': [arr(out)],
        'cotangents': [arr(ct)],
        'grads': grads_json,
        'value_and_grad_jaxpr': vg_jaxpr,
        'value_and_grad_outputs': [arr(value)] + [arr(g) for g in vgrads],
        'jax_saved_residuals_text': buf.getvalue().splitlines(),
    }


if __name__ == '__main__':
    out_dir = sys.argv[1]
    for name, f, arg_names, args, description in CASES:
        case = record(name, f, arg_names, args, description)
        with open(f'{out_dir}/{name}.json', 'w') as fh:
            json.dump(case, fh, indent=1)
        print(name, len(case['jaxpr'].splitlines()), 'lines,', len(case['value_and_grad_jaxpr'].splitlines()), 'in value_and_grad')
