"""The oracle for crates/trace/tests/random.rs: what JAX 0.10.2 records and computes for
each jax.random / jax.nn function the Rust `random` and `nn` modules mirror. Each case is
a small program over concrete arguments (keys from `jax.random.PRNGKey`); the Rust test
traces its twin (same name), compares the printed jaxprs character for character, and
evaluates the traced program with the interpreter to JAX's outputs, bit for bit.

    python3 crates/trace/tests/data/gen_random.py > crates/trace/tests/data/random_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax import random
jax.config.update('jax_platform_name', 'cpu')

CASES = {}
def c(name, fn, *args):
    CASES[name] = (fn, args)

K0, K42 = random.PRNGKey(0), random.PRNGKey(42)

for seed in (0, 42, -1):
    c(f"PRNGKey {seed}", lambda s: random.PRNGKey(s), np.int32(seed))
c("key_data(key) 7", lambda s: random.key_data(random.key(s)), np.int32(7))
for kn, k in (("k0", K0), ("k42", K42)):
    c(f"split {kn}", lambda k: random.split(k), k)
    c(f"split3 {kn}", lambda k: random.split(k, 3), k)
    c(f"fold_in {kn}", lambda k: random.fold_in(k, 7), k)
    c(f"clone {kn}", lambda k: random.clone(k), k)
    c(f"bits {kn}", lambda k: random.bits(k, (2, 3)), k)
    c(f"uniform {kn}", lambda k: random.uniform(k, (3,)), k)
    c(f"uniform_scalar {kn}", lambda k: random.uniform(k), k)
    c(f"uniform_minmax {kn}", lambda k: random.uniform(k, (2, 3), minval=-1.0, maxval=2.0), k)
    c(f"normal {kn}", lambda k: random.normal(k, (3,)), k)
    c(f"normal_2d {kn}", lambda k: random.normal(k, (4, 5)), k)
    c(f"bernoulli {kn}", lambda k: random.bernoulli(k, 0.5, (6,)), k)
    c(f"bernoulli_p {kn}", lambda k, p: random.bernoulli(k, p), k, np.array([0.1, 0.5, 0.9, 0.3], np.float32))
    c(f"categorical {kn}", lambda k, l: random.categorical(k, l), k,
      np.array([[0.0, 1.0, 2.0, -1.0, 0.5], [3.0, 0.0, 0.0, 0.0, 0.0]], np.float32))
    c(f"categorical_axis0 {kn}", lambda k, l: random.categorical(k, l, axis=0), k,
      np.array([[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]], np.float32))
    c(f"randint {kn}", lambda k: random.randint(k, (4,), 0, 10), k)
    c(f"randint_2d {kn}", lambda k: random.randint(k, (2, 3), -5, 1000), k)
    c(f"permutation {kn}", lambda k: random.permutation(k, 5), k)
    c(f"permutation_array {kn}", lambda k, x: random.permutation(k, x), k, np.arange(6, dtype=np.float32) * 1.5)
c("split_shape", lambda k: random.split(k, (2, 3)), K42)
c("bits_u8", lambda k: random.bits(k, (5,), jnp.uint8), K0)
c("uniform_unrounded_bounds", lambda k: random.uniform(k, (2,), minval=0.1, maxval=0.7), K0)
c("randint_traced_bounds", lambda k, lo, hi: random.randint(k, (5,), lo, hi), K42, np.int32(-3), np.int32(3))
c("split_then_uniform", lambda k: random.uniform(random.split(k)[1], (2,)), K0)
c("typed_split", lambda s: random.key_data(random.split(random.key(s), 4)), np.int32(3))
c("typed_uniform", lambda s: random.uniform(random.key(s), (3,)), np.int32(3))
c("exponential", lambda k: random.exponential(k, (2, 3)), K42)
c("exponential_scalar", lambda k: random.exponential(k, ()), K0)
c("choice_rows", lambda k, a: random.choice(k, a, (3,)), K0, np.arange(5, dtype=np.float32))
c("permutation_rows", lambda k, x: random.permutation(k, x), K42, np.arange(12, dtype=np.float32).reshape(4, 3))
c("choice_matrix_rows", lambda k, a: random.choice(k, a, (2, 2)), K42, np.arange(12, dtype=np.float32).reshape(4, 3))

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.uint8: 'u8', np.bool_: 'bool'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": a.reshape(-1).tolist()}

out = {}
for name, (fn, args) in CASES.items():
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    out[name] = {
        "jaxpr": str(jax.make_jaxpr(fn)(*args)),
        "args": [arr(a) for a in args],
        "outputs": [arr(o) for o in outs],
    }
print(json.dumps(out, indent=1))
