"""Shared helpers of the model definitions: deterministic random arguments and the layers
several models use.

Copied from the project's conformance generators so that the tests need nothing outside
this directory: `_key` and `rnd` from /work/shared/conformance/gen_cases.py; `ints`, `unif`,
`key`, `conv`, `max_pool`, `avg_pool`, `xent_int`, `layernorm`, `batchnorm`,
`causal_attention` and the dtype names from /work/shared/conformance/gen_zoo.py.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

bf16, f16, f32 = jnp.bfloat16, jnp.float16, jnp.float32

# ---- random arguments -------------------------------------------------------------------
# gen_cases.py's `_key` and `rnd` and gen_zoo.py's `ints` and `unif`, with the same seeding
# (`_key`, one more per draw) and the same shapes, dtypes, scales and ranges, but drawn by
# NumPy: `jax.random` compiles an XLA program per shape, a minute for the whole suite. The
# values differ from the recorded cases'; the tests compare remat with JAX live.
_key = [0]


def _rng():
    _key[0] += 1
    return np.random.default_rng(_key[0])


def rnd(*shape, scale=1.0):
    return jnp.asarray((_rng().standard_normal(shape) * scale).astype(np.float32))


def ints(lo, hi, *shape, dtype=jnp.int32):
    return jnp.asarray(_rng().integers(lo, hi, shape).astype(np.dtype(dtype)))


def unif(lo, hi, *shape):
    return jnp.asarray(_rng().uniform(lo, hi, shape).astype(np.float32))


class NumpyRandom:
    """The few functions of `jax.random` the benchmark generators' argument builders call
    (`PRNGKey`, `fold_in`, `normal`, `randint`), drawn by NumPy for the same reason: a key
    is the tuple of its seed and the numbers folded in, and the draws are NumPy arrays
    of JAX's dtypes (f32, i32) and the requested shapes."""

    @staticmethod
    def PRNGKey(seed):
        return (seed,)

    @staticmethod
    def fold_in(key, data):
        return key + (data,)

    @staticmethod
    def normal(key, shape):
        return np.random.default_rng(key).standard_normal(shape).astype(np.float32)

    @staticmethod
    def randint(key, shape, minval, maxval):
        return np.random.default_rng(key).integers(minval, maxval, shape).astype(np.int32)


random = NumpyRandom()


def key(seed):
    return jax.random.PRNGKey(seed)  # legacy raw key: u32[2]


def seed_for(name: str) -> None:
    """Seeds `rnd` as the generators do before building a case's arguments."""
    _key[0] = zlib.crc32(name.encode()) % 100000


# ---- building blocks (gen_zoo.py) ------------------------------------------------------
DN = ('NHWC', 'HWIO', 'NHWC')


def conv(x, w, stride=1, padding='SAME', **kw):
    return lax.conv_general_dilated(x, w, (stride, stride), padding, dimension_numbers=DN, **kw)


def max_pool(x, k=2, s=2):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, s, s, 1), 'VALID')


def avg_pool(x, k=2, s=2):
    return lax.reduce_window(x, 0., lax.add, (1, k, k, 1), (1, s, s, 1), 'VALID') / (k * k)


def xent_int(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def layernorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def batchnorm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.var(x, axis=(0, 1, 2))
    return (x - mu) * lax.rsqrt(var + eps) * g + b, mu, var


def causal_attention(x, wqkv, wo, n_heads):
    B, T, D = x.shape
    hd = D // n_heads
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    heads = lambda t: t.reshape(B, T, n_heads, hd).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    s = jnp.einsum('bhqd,bhkd->bhqk', q, k) / np.sqrt(hd).astype(np.float32)
    mask = jnp.tril(jnp.ones((T, T), bool))
    s = jnp.where(mask, s, -1e9)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum('bhqk,bhkd->bhqd', p, v).transpose(0, 2, 1, 3).reshape(B, T, D)
    return o @ wo


# ---- a program of the suite -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One program: a JAX function and a builder of its example arguments.

    `forward_only`: JAX cannot differentiate it in reverse (no residuals, no gradient).
    `loss`: a scalar-valued function of the same arguments to take `value_and_grad` of
    (`fn` itself when it returns a scalar; a reduction of its outputs otherwise), None
    when the program has none.
    `full_args`: the realistic-size arguments of a benchmark program (planned from
    `jax.ShapeDtypeStruct`s only; the tests run `args`, the small size).
    """

    name: str
    fn: Callable
    args: Callable[[], Any]
    source: str
    forward_only: bool = False
    loss: Optional[Callable] = None
    full_args: Optional[Callable[[], Any]] = None

    def make_args(self):
        seed_for(self.name)
        return self.args()

    def __repr__(self):
        return self.name
