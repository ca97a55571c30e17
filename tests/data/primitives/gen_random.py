"""Records the conformance cases of threefry's parts and key copies from real JAX 0.10.2
(`threefry2x32`, `iota_2x32_shape`, `random_clone`), in the format of gen_primitives.py,
without rewriting that script's cases.

    pip install jax==0.10.2
    python3 tests/data/primitives/gen_random.py tests/data/primitives
"""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
import gen_cases as g
import gen_primitives as gp
import jax
import jax.numpy as jnp
import numpy as np
from jax._src.random import prng
from jax._src.random import threefry2x32 as t2

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced


@g.case("threefry_words", "primitives", lambda: (g.rnd(3, 4), g.rnd(6)),
        "threefry2x32 on u32 words (jax._src.random.threefry2x32.threefry_2x32: a key pair "
        "and counters split in halves), iota_2x32_shape's high and low words, random_clone "
        "of a key feeding random_bits; integer results scale differentiated floats")
def threefry_words(x, w):
    hi, lo = prng.iota_2x32_shape((3, 4))
    key = lo[0, 1:3] * np.uint32(0x9E3779B9)   # computed, so that the text has no constants
    words = t2.threefry_2x32(key, lo.reshape(-1) + hi.reshape(-1) * np.uint32(7))   # u32[12]
    scale = (words % np.uint32(1000)).astype(jnp.float32).reshape(3, 4) * np.float32(1e-3)
    k = jax.random.clone(jax.random.key(3))
    bits = jax.random.bits(k, (6,))
    noise = (bits >> np.uint32(9)).astype(jnp.float32) * np.float32(2.0 ** -23)
    return jnp.sum(jnp.sin(x) * scale) + jnp.sum(w * noise * lo[0, :].sum().astype(jnp.float32))

if __name__ == "__main__":
    g.run("primitives", sys.argv[1])
