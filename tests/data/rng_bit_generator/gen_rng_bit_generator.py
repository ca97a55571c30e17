"""JAX 0.10.2's lax.rng_bit_generator on CPU for every algorithm, several shapes (scalar,
even, odd, without an even axis) and every unsigned dtype, from one u32[4] key whose words
make the 64-bit counters carry: the new key and the bits, for crates/interp/tests/random.rs.

    JAX_ENABLE_X64=1 python3 tests/data/rng_bit_generator/gen_rng_bit_generator.py \
        > tests/data/rng_bit_generator/jax_values.json
"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax import lax

out = []
for alg in [lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX]:
    for shape in [(), (4,), (3,), (2, 3), (3, 5), (5, 3), (2, 1, 3), (7,)]:
        for dt in [jnp.uint8, jnp.uint16, jnp.uint32, jnp.uint64]:
            k = jnp.array([0x12345678, 0xFFFFFFFF, 0xFFFFFFFE, 7], dtype=jnp.uint32)
            s, b = lax.rng_bit_generator(k, shape, dtype=dt, algorithm=alg)
            out.append(dict(algorithm=str(alg).split('.')[-1], shape=list(shape), dtype=np.dtype(dt).name,
                            key=np.asarray(k).tolist(), new_key=np.asarray(s).tolist(),
                            bits=[int(v) for v in np.asarray(b).ravel()]))
print(json.dumps(out))
