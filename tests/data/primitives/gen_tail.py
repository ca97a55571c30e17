"""Records the conformance cases of the long tail of reductions, random bits and calls
from real JAX 0.10.2 (the generic `reduce`, ...), in the format of gen_primitives.py,
without rewriting that script's cases.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_tail.py tests/data/primitives
"""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
import gen_cases as g
import gen_primitives as gp
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced


def _odot(a, b):
    # (1 + a)(1 + b) - 1 written as ab + a + b: an associative, commutative monoid with
    # identity 0 that no reduce_* primitive is.
    return a * b + a + b


def _argmax_pair(a, b):
    (av, ai), (bv, bi) = a, b
    p = av > bv
    return (lax.select(p, av, bv), lax.select(p, ai, bi))


@g.case("reduce_generic", "primitives", lambda: (g.rnd(4, 8), g.rnd(2, 4, 2), g.rnd(4, 8)),
        "reduce (lax.reduce with a non-standard monoid ab + a + b, over a last axis of "
        "length 8 and over two axes of 4 elements; a variadic max carrying a payload, whose "
        "combiner selects with select_n; a variadic (value, index) max under stop_gradient: "
        "JAX's jvp fails on an operand with a zero tangent); the jvp is JAX's `_reduce_jvp` tree of the "
        "vmapped combiner on power-of-two lengths; lengths under 16, where XLA's CPU "
        "reduction is sequential as remat's")
def reduce_generic(x, y, z):
    s = lax.reduce(x * np.float32(0.25), np.float32(0), _odot, (1,))            # f32[4]
    t = lax.reduce(jnp.tanh(y), np.float32(0), _odot, (0, 2))                   # f32[4]
    idx = lax.broadcasted_iota(jnp.int32, (4, 8), 1)
    m, i = lax.reduce((lax.stop_gradient(x), idx), (np.float32(-np.inf), np.int32(0)), _argmax_pair, (1,))
    v, p = lax.reduce((jnp.sin(x), z * z), (np.float32(-np.inf), np.float32(0)), _argmax_pair, (1,))
    return jnp.sum(s * t) + jnp.sum(m * i.astype(jnp.float32)) + jnp.sum(v * p)


@g.case("reduce_window_generic", "primitives", lambda: (g.rnd(4, 6), g.rnd(4, 3), g.rnd(3, 4), g.rnd(2, 2)),
        "reduce_window (lax.reduce_window with the monoid ab + a + b from init 1, which is "
        "not its identity, so that XLA's skipping of padding and dilation holes shows: "
        "padded and strided; base- and window-dilated; a variadic (value, index) max over "
        "strided windows); JAX differentiates it only forward (its jvp is one reduce_window "
        "of primals and tangents, which reverse mode cannot split), so the windows are "
        "taken of stop_gradient(x) and scale differentiated weights")
def reduce_window_generic(x, w, v, u):
    s = lax.stop_gradient(x) * np.float32(0.25)
    a = lax.reduce_window(s, np.float32(1), _odot, (2, 2), (1, 2), ((1, 0), (0, 1)))          # f32[4,3]
    b = lax.reduce_window(s, np.float32(1), _odot, (3, 2), (2, 1), ((0, 0), (0, 0)),
                          base_dilation=(2, 1), window_dilation=(1, 2))                          # f32[3,4]
    idx = lax.broadcasted_iota(jnp.int32, (4, 6), 1)
    m, i = lax.reduce_window((s, idx), (np.float32(-np.inf), np.int32(0)), _argmax_pair,
                             (2, 3), (2, 3), ((0, 0), (0, 0)))                                    # f32[2,2]
    return jnp.sum(w * a) + jnp.sum(v * b) + jnp.sum(u * m * i.astype(jnp.float32))

@g.case("rng_bit_generator", "primitives", lambda: (g.rnd(2, 3), g.rnd(4), g.rnd(3, 5)),
        "rng_bit_generator (lax.rng_bit_generator on a u32[4] key computed from constants: "
        "RNG_DEFAULT, which is Philox on CPU, over an odd-sized u32 shape; RNG_THREE_FRY "
        "chained on the new key (u8 bits, a shape without an even axis); RNG_PHILOX); integer "
        "results scale differentiated floats")
def rng_bit_generator(x, w, v):
    key = lax.iota(jnp.uint32, 4) * np.uint32(0x9E3779B9) + np.uint32(7)
    k1, a = lax.rng_bit_generator(key, (2, 3), dtype=jnp.uint32)
    k2, b = lax.rng_bit_generator(k1, (3, 5), dtype=jnp.uint8, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    _, c = lax.rng_bit_generator(k2, (4,), dtype=jnp.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    fa = (a >> np.uint32(9)).astype(jnp.float32) * np.float32(2.0 ** -23)
    fc = (c >> np.uint32(9)).astype(jnp.float32) * np.float32(2.0 ** -23)
    return jnp.sum(jnp.sin(x) * fa) + jnp.sum(w * fc) + jnp.sum(v * b.astype(jnp.float32))

@g.case("approx_top_k", "primitives", lambda: (g.rnd(3, 8), g.rnd(6, 4)),
        "approx_top_k (lax.approx_max_k over the last axis, lax.approx_min_k over axis 0 with "
        "recall_target=0.9): on CPU XLA's fallback is exact, top_k for the largest and an "
        "ascending sort for the smallest; the jvp takes the tangent along the axis at the "
        "indices (jnp.take_along_axis, a jit)")
def approx_top_k(x, y):
    v, i = lax.approx_max_k(x, 3)
    w, j = lax.approx_min_k(jnp.sin(y), 2, reduction_dimension=0, recall_target=0.9)
    return jnp.sum(v * v) + jnp.sum(w * j.astype(jnp.float32)) + jnp.sum(i.astype(jnp.float32))

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
