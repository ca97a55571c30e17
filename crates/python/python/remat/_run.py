"""Running a JAX function through remat's native code: `remat.jit` and
`remat.value_and_grad`, compiled once per input signature, NumPy arrays in and out."""

from __future__ import annotations

import functools
import threading
from typing import Callable, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from ._trace import RematError, array_in, array_out, canonical_dtype, check_leaves, trace


# A leaf's part of a signature, by its type and dtype: NumPy's dtype names and JAX's
# canonicalization cost microseconds a call, so each dtype is looked at once.
_CANONICAL: dict = {}


def _canonical(dtype):
    c = _CANONICAL.get(dtype)
    if c is None:
        c = _CANONICAL[dtype] = canonical_dtype(jax.ShapeDtypeStruct((), dtype))
    return c


def _leaf_signature(x):
    if type(x) in _PY_SCALARS:
        # A Python scalar is a weakly typed value of its kind, as jax.jit traces it.
        return (type(x),)
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dtype is None or shape is None:
        check_leaves([x])
    return (tuple(shape), _canonical(dtype))


_PY_SCALARS = (bool, int, float)


def _signature(leaves, tree):
    return (tree, tuple(_leaf_signature(x) for x in leaves))


def _raw_buffer(x, native):
    """A buffer of `x`'s bytes as the program reads it: the array itself when it is a
    C-ordered NumPy array of the dtype the program takes (`native`), else a converted copy
    (JAX arrays, Python scalars, f64 made f32, bf16, keys)."""
    if native is not None and type(x) is np.ndarray and x.dtype == native and x.flags.c_contiguous:
        return memoryview(x).cast("B") if x.ndim else memoryview(x.reshape(1)).cast("B")
    return array_in(x)[2]


def _native_dtype(aval):
    """The NumPy dtype a fast-path argument has for `aval` (`None`: always converted)."""
    try:
        dt = np.dtype(aval.dtype)
    except TypeError:  # a PRNG key
        return None
    return dt if dt.isbuiltin == 1 else None  # bf16 and other ml_dtypes export no buffer


class _Compiled:
    """One signature's traced program and executable, and how its outputs come back."""

    def __init__(self, traced, executable):
        self.traced = traced
        self.executable = executable
        self.natives = [_native_dtype(a) for a in traced.in_avals]
        self.outs = [(name, tuple(shape)) for name, shape in executable.out_avals]

    def run(self, leaves):
        raws = self.executable.run_raw([_raw_buffer(x, n) for x, n in zip(leaves, self.natives)])
        return [array_out((name, shape, data)) for (name, shape), data in zip(self.outs, raws)]

    def __call__(self, leaves):
        return self.run(leaves)


class _PerSignature:
    """A cache of compiled programs by argument structure, shapes and dtypes."""

    def __init__(self, build):
        self._build = build
        self._cache = {}
        self._lock = threading.Lock()

    def get(self, args):
        leaves, tree = jax.tree_util.tree_flatten(tuple(args))
        key = _signature(leaves, tree)
        hit = self._cache.get(key)
        if hit is None:
            built = self._build(args)
            with self._lock:
                hit = self._cache.setdefault(key, built)
        return hit, leaves

    def __len__(self):
        return len(self._cache)


def jit(f: Callable, *, backend: str = "jit") -> Callable:
    """`f` run by remat: traced by JAX at its first call for each signature (argument
    pytree, shapes and dtypes), compiled to native code by remat's JIT, then called with
    NumPy (or JAX) arrays; results come back as NumPy arrays in `f`'s output structure.
    `backend="interp"` runs remat's reference interpreter instead."""

    def build(args):
        t = trace(f, args)
        return _Compiled(t, t.program.compile(backend))

    cache = _PerSignature(build)

    @functools.wraps(f)
    def call(*args):
        compiled, leaves = cache.get(args)
        return jax.tree_util.tree_unflatten(compiled.traced.out_tree, compiled(leaves))

    call.cache_size = lambda: len(cache)
    return call


def _argnums_tuple(argnums, n):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or isinstance(a, bool) or not -n <= a < n:
            raise RematError(f"argnums {argnums!r}: {a!r} is not the index of one of the {n} arguments")
    nums = tuple(a % n for a in nums)
    if len(set(nums)) != len(nums):
        raise RematError(f"argnums {argnums!r} names an argument twice")
    return nums


def value_and_grad(f: Callable, argnums: Union[int, Sequence[int]] = 0, *, backend: str = "jit") -> Callable:
    """`jax.value_and_grad(f, argnums)` differentiated and compiled by remat: returns
    `(value, grads)` with `grads` in the structure of the arguments in `argnums` (one
    argument's gradient for an int). `f` returns a scalar."""

    def build(args):
        nums = _argnums_tuple(argnums, len(args))
        t = trace(f, args)
        # The flat leaves of the arguments in `nums`, in order.
        counts = [len(jax.tree_util.tree_leaves(a)) for a in args]
        starts = np.cumsum([0] + counts)
        flat = [i for a in nums for i in range(starts[a], starts[a + 1])]
        for i in flat:
            if not jnp.issubdtype(t.in_avals[i].dtype, jnp.inexact):  # bf16 is not a NumPy inexact
                raise RematError(
                    f"value_and_grad: argument leaf {t.arg_names[i]} is {t.in_avals[i].dtype}; "
                    "gradients are taken of float inputs"
                )
        vg = t.program.value_and_grad([int(i) for i in flat])
        return (nums, _Compiled(t, vg.compile(backend)))

    cache = _PerSignature(build)

    @functools.wraps(f)
    def call(*args):
        (nums, compiled), leaves = cache.get(args)
        outs = compiled.run(leaves)
        value, flat_grads = outs[0], outs[1:]
        grads, k = [], 0
        for a in nums:
            tree = jax.tree_util.tree_structure(args[a])
            n = tree.num_leaves
            grads.append(jax.tree_util.tree_unflatten(tree, flat_grads[k:k + n]))
            k += n
        return value, (grads[0] if isinstance(argnums, int) else tuple(grads))

    call.cache_size = lambda: len(cache)
    return call
