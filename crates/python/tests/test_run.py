"""`remat.jit` and `remat.value_and_grad` against `jax.jit` and `jax.value_and_grad` (JAX
0.10.2) on every zoo program and every benchmark program at its small size: the same
values within the zoo's tolerances, in the same pytree structure; compiled once per
argument signature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import remat
import models
from models import bench
from helpers import (args_of, assert_close, assert_tree_close, jax_outputs, jax_residuals,
                     jax_value_and_grad, reduced_precision)

DIFFERENTIABLE = [c for c in models.ALL if c.loss is not None]


def assert_numpy_leaves(tree):
    """remat's results are NumPy arrays (typed keys as JAX key arrays)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        assert isinstance(leaf, np.ndarray) or jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key), type(leaf)


@pytest.mark.parametrize("case", models.ALL, ids=str)
def test_jit_matches_jax(case):
    args = args_of(case.name)
    got = remat.jit(case.fn)(*args)
    assert_numpy_leaves(got)
    assert_tree_close(got, jax_outputs(case.name), loose=reduced_precision(case.fn, args))


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=str)
def test_value_and_grad_matches_jax(case):
    """With respect to every float argument (a tuple of argnums), and to the parameter
    pytree alone (argnums 0)."""
    args = args_of(case.name)
    argnums = models.float_argnums(args)
    assert argnums[0] == 0
    loose = reduced_precision(case.loss, args)
    value, grads = jax_value_and_grad(case.name, argnums)

    got = remat.value_and_grad(case.loss, argnums)(*args)
    assert_numpy_leaves(got)
    assert isinstance(got, tuple) and isinstance(got[1], tuple) and len(got[1]) == len(argnums)
    assert_tree_close(got, (value, grads), loose=loose)

    got_value, got_grad = remat.value_and_grad(case.loss, 0)(*args)
    assert jax.tree_util.tree_structure(got_grad) == jax.tree_util.tree_structure(args[0])
    assert_tree_close((got_value, got_grad), (value, grads[0]), loose=loose)


def test_value_and_grad_of_a_parameter_dict():
    """A dict of parameters (the benchmark transformer's list of dicts) comes back as the
    same dict."""
    case = models.by_name("transformer_names")
    params, x = args_of(case.name)
    value, grads = remat.value_and_grad(case.fn)(params, x)
    assert isinstance(grads, list) and all(isinstance(g, dict) for g in grads)
    assert [sorted(g) for g in grads] == [sorted(p) for p in params]
    assert_tree_close((value, grads), jax.jit(jax.value_and_grad(case.fn))(params, x), loose=False)


def test_negative_argnums():
    case = models.by_name("mlp_small_plain")
    args = args_of(case.name)
    got = remat.value_and_grad(case.fn, (-1, 0))(*args)
    want = jax.jit(jax.value_and_grad(case.fn, (-1, 0)))(*args)
    assert_tree_close(got, want, loose=False)


@pytest.mark.parametrize("name", ["gpt_block", "scan_of_blocks_offload", "bf16_mixed_precision", "control_flow_while"])
def test_interpreter_backend_matches_jax(name):
    """`backend="interp"`: remat's reference interpreter instead of native code."""
    case = models.by_name(name)
    args = args_of(name)
    loose = reduced_precision(case.fn, args)
    assert_tree_close(remat.jit(case.fn, backend="interp")(*args), jax_outputs(name), loose=loose)
    if case.loss is not None:
        argnums = models.float_argnums(args)
        got = remat.value_and_grad(case.loss, argnums, backend="interp")(*args)
        assert_tree_close(got, jax_value_and_grad(name, argnums), loose=loose)


def test_nan_matches_nan():
    def f(x):
        return jnp.sum(jnp.log(x) * x)
    x = jnp.array([1.0, -1.0, 2.0])
    assert np.isnan(remat.jit(f)(x))
    got = remat.value_and_grad(f)(x)
    assert np.isnan(got[1][1]) and not np.isnan(got[1][0])
    assert_tree_close(got, jax.value_and_grad(f)(x), loose=False)


def test_integer_and_bool_outputs_exactly():
    def f(x):
        return jnp.argmax(x, axis=1), x > 0, jnp.cumsum(x.astype(jnp.int32) * 3, axis=0), x.astype(jnp.uint8)
    x = jnp.array([[3.7, -1.0, 9.5], [0.0, 200.2, -7.0]])
    got = remat.jit(f)(x)
    assert [g.dtype for g in got] == [np.int32, np.bool_, np.int32, np.uint8]
    assert_tree_close(got, jax.jit(f)(x), loose=False)


def test_complex_arrays_in_and_out_and_a_real_loss_through_an_fft():
    z = np.array([1 + 2j, 3 - 1j, -0.5j], np.complex64)
    got = remat.jit(lambda a: a * 2 + jnp.conj(a))(z)
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, np.asarray(jax.jit(lambda a: a * 2 + jnp.conj(a))(z)))
    f = lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)
    x = np.linspace(0, 1, 8).astype(np.float32)
    value, grad = remat.value_and_grad(f)(x)
    want_value, want_grad = jax.value_and_grad(f)(x)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


def test_scalar_arguments_and_results():
    def f(a, n):
        return a * n, n + 1
    got = remat.jit(f)(jnp.float32(1.5), jnp.int32(4))
    assert [np.shape(g) for g in got] == [(), ()]
    assert_tree_close(got, f(jnp.float32(1.5), jnp.int32(4)), loose=False)


def test_python_scalar_arguments_are_weakly_typed_as_jax_jit_takes_them():
    # A Python float beside a bf16 array keeps the array's dtype (a weak type), an int
    # counts, a bool selects; a new value of the same kind reuses the compiled program.
    def f(x, scale, n, flip):
        y = x * scale + n
        return jnp.where(flip, -y, y)
    x = jnp.arange(4, dtype=jnp.bfloat16)
    g = remat.jit(f)
    for scale, n, flip in [(0.5, 3, True), (2.0, -1, False)]:
        got, want = g(x, scale, n, flip), jax.jit(f)(x, scale, n, flip)
        assert got.dtype == want.dtype == jnp.bfloat16
        assert_close(got, want, loose=False)
    assert g.cache_size() == 1
    # value_and_grad of a float argument given as a Python float, as jax.value_and_grad
    h = lambda w, s: jnp.sum(jnp.sin(w * s))
    w = np.linspace(0, 1, 5, dtype=np.float32)
    assert_tree_close(remat.value_and_grad(h, argnums=(0, 1))(w, 1.5),
                      jax.value_and_grad(h, argnums=(0, 1))(w, 1.5), loose=False)
    # and the residuals of a function with a Python scalar argument are JAX's
    got = remat.saved_residuals(h, w, 1.5)
    assert [(r.aval, r.description, r.bytes) for r in got] == jax_residuals(h, w, 1.5)


def test_pytree_outputs_keep_their_structure():
    def f(params, x):
        return {"out": [x @ params["w"], (jnp.sum(x), None)], "count": jnp.int32(x.shape[0])}
    params = {"w": jnp.ones((3, 2))}
    x = jnp.arange(6.0).reshape(2, 3)
    got = remat.jit(f)(params, x)
    assert set(got) == {"out", "count"} and got["out"][1][1] is None
    assert_tree_close(got, jax.jit(f)(params, x), loose=False)


def _counting_trace(monkeypatch):
    """Counts the traces (one per compilation) of `remat._run`."""
    from remat import _run
    calls = []
    real = _run.trace

    def trace(f, args, **kw):
        calls.append(1)
        return real(f, args, **kw)
    monkeypatch.setattr(_run, "trace", trace)
    return calls


def test_jit_compiles_once_per_signature(monkeypatch):
    traces = _counting_trace(monkeypatch)
    case = models.by_name("mlp_small_plain")
    f = remat.jit(case.fn)
    args = args_of(case.name)
    assert f.cache_size() == 0
    first = f(*args)
    assert f.cache_size() == 1 and len(traces) == 1

    # new values, same signature: no new compilation, new results
    shifted = jax.tree_util.tree_map(lambda a: a * 0.5 + 0.25, args)
    second = f(*shifted)
    assert f.cache_size() == 1 and len(traces) == 1
    assert not np.allclose(first, second)
    assert_close(second, jax.jit(case.fn)(*shifted), loose=False)
    assert_close(f(*args), first, loose=False)

    # another shape: compiled again
    small = bench.mlp_args(2, 8, 4)
    third = f(*small)
    assert f.cache_size() == 2 and len(traces) == 2
    assert_close(third, jax.jit(case.fn)(*small), loose=False)
    f(*small)
    assert f.cache_size() == 2 and len(traces) == 2

    # another dtype, and another pytree structure: compiled again
    g = remat.jit(lambda t: jax.tree_util.tree_reduce(lambda a, b: a + b, t) * 2)
    assert_close(g([np.ones(3, np.float32)]), np.full(3, 2, np.float32), loose=False)
    assert_close(g([np.ones(3, np.int32)]), np.full(3, 2, np.int32), loose=False)
    assert_close(g((np.ones(3, np.int32), np.ones(3, np.int32))), np.full(3, 4, np.int32), loose=False)
    assert g.cache_size() == 3


def test_value_and_grad_compiles_once_per_signature(monkeypatch):
    traces = _counting_trace(monkeypatch)
    case = models.by_name("gelu_deep_dots")
    vg = remat.value_and_grad(case.fn)
    args = args_of(case.name)
    first = vg(*args)
    assert vg.cache_size() == 1 and len(traces) == 1
    shifted = jax.tree_util.tree_map(lambda a: a * 0.5 + 0.25, args)
    second = vg(*shifted)
    assert vg.cache_size() == 1 and len(traces) == 1
    assert not np.allclose(first[0], second[0])
    assert_tree_close(second, jax.jit(jax.value_and_grad(case.fn))(*shifted), loose=False)
    wider = models.jit_bench.gelu_args(2, 6, 3)
    third = vg(*wider)
    assert vg.cache_size() == 2 and len(traces) == 2
    assert_tree_close(third, jax.jit(jax.value_and_grad(case.fn))(*wider), loose=False)


def test_each_call_reads_its_own_arguments():
    """The arrays of a call's arguments are kept and written over by the next call of the
    same signature: every call, from any thread, computes on its own values, for every
    dtype (the number types are copied into the kept arrays, bool and bf16 read anew)."""
    import threading

    def f(a, i, m, h):
        return a * 2.0 + i.astype(jnp.float32) + m.astype(jnp.float32) + h.astype(jnp.float32)

    run = remat.jit(f)
    rng = np.random.default_rng(3)
    calls = [(rng.standard_normal((64, 32)).astype(np.float32), rng.integers(-5, 5, (64, 32)).astype(np.int32),
              rng.random((64, 32)) > 0.5, rng.standard_normal((64, 32)).astype(jnp.bfloat16)) for _ in range(8)]
    for args in calls + calls[::-1]:
        np.testing.assert_array_equal(run(*args), np.asarray(jax.jit(f)(*args)))
    results = [None] * len(calls)

    def worker(k):
        for _ in range(20):
            results[k] = run(*calls[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, args in enumerate(calls):
        np.testing.assert_array_equal(results[k], np.asarray(jax.jit(f)(*args)))
