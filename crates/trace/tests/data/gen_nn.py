"""The oracle for crates/trace/tests/nn.rs: what JAX 0.10.2 records and computes for the
jax.nn functions and initializers the Rust `nn` module mirrors. Each case is a small
program over fixed arguments (keys from `jax.random.PRNGKey`); it records the printed
jaxpr, the outputs and, where `grad` is set, the gradient of the output's sum with
respect to every float argument.

    python3 crates/trace/tests/data/gen_nn.py > crates/trace/tests/data/nn_oracle.json
"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax import random
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(1)
def f32(*s): return (rng.standard_normal(s) * 2).astype(np.float32)

CASES = {}
def c(name, fn, *args, grad=True):
    CASES[name] = (fn, args, grad)

K0, K42 = random.PRNGKey(0), random.PRNGKey(42)
c("softplus", jax.nn.softplus, f32(2, 5))
c("gelu_tanh", lambda x: jax.nn.gelu(x), f32(2, 5))
c("gelu_erf", lambda x: jax.nn.gelu(x, approximate=False), f32(2, 5))
c("standardize", lambda x: jax.nn.standardize(x, axis=-1, epsilon=1e-5), f32(3, 4))
c("layer_norm", lambda x, s, b: jax.nn.standardize(x, axis=-1, epsilon=1e-5) * s + b, f32(3, 4), f32(4), f32(4))
def dropout(k, x, rate):
    keep = random.bernoulli(k, 1 - rate, x.shape)
    return jnp.where(keep, x / (1 - rate), 0)
for kn, k in (("k0", K0), ("k42", K42)):
    c(f"dropout {kn}", lambda k, x: dropout(k, x, 0.1), k, f32(4, 16))
    c(f"glorot_uniform {kn}", lambda k: jax.nn.initializers.glorot_uniform()(k, (3, 4)), k, grad=False)
    c(f"glorot_uniform_conv {kn}", lambda k: jax.nn.initializers.glorot_uniform()(k, (3, 3, 2, 5)), k, grad=False)
    c(f"he_normal {kn}", lambda k: jax.nn.initializers.he_normal()(k, (3, 4)), k, grad=False)
    c(f"normal {kn}", lambda k: jax.nn.initializers.normal(0.02)(k, (3, 4)), k, grad=False)
    c(f"lecun_normal {kn}", lambda k: jax.nn.initializers.lecun_normal()(k, (3, 4)), k, grad=False)
    c(f"lecun_uniform {kn}", lambda k: jax.nn.initializers.lecun_uniform()(k, (4, 3)), k, grad=False)
    c(f"xavier_normal {kn}", lambda k: jax.nn.initializers.xavier_normal()(k, (3, 4)), k, grad=False)
    c(f"glorot_normal_conv {kn}", lambda k: jax.nn.initializers.glorot_normal()(k, (2, 2, 3, 4)), k, grad=False)
    c(f"he_uniform {kn}", lambda k: jax.nn.initializers.he_uniform()(k, (5, 2)), k, grad=False)
    c(f"variance_scaling_normal_fan_out {kn}",
      lambda k: jax.nn.initializers.variance_scaling(2.0, "fan_out", "normal")(k, (3, 4)), k, grad=False)

def dtype_name(a):
    return {np.float32: 'f32', np.int32: 'i32', np.uint32: 'u32', np.bool_: 'bool'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": a.reshape(-1).tolist()}

out = {}
for name, (fn, args, grad) in CASES.items():
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    case = {"jaxpr": str(jax.make_jaxpr(fn)(*args)), "args": [arr(a) for a in args],
            "outputs": [arr(o) for o in outs]}
    if grad:
        argnums = tuple(i for i, a in enumerate(args) if np.asarray(a).dtype == np.float32)
        gs = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnums)(*args)
        case["argnums"] = list(argnums)
        case["grads"] = [arr(g) for g in gs]
    out[name] = case
print(json.dumps(out, indent=1))
