"""The shared benchmark programs: an MLP (8 tanh layers; small, medium and large) and a
two-block pre-norm transformer, each as written and under JAX's policies.

Copied from /work/shared/bench/gen_bench.py (the project's benchmark generator): `mlp`,
`transformer_block` and the argument builders of its `__main__`. The generator records
`jax.value_and_grad(loss)`; here `loss` itself is the program. The tests run the small
sizes (`args`); the realistic sizes (`full_args`: the MLP's medium and large, the
transformer's d_model 256, seq 128, batch 4) are planned from `jax.ShapeDtypeStruct`s.
The argument builders call `random` (NumPy's draws, `common.NumpyRandom`) where the
generator calls `jax.random`: the same shapes and scales, without an XLA compile per shape.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from .common import Case, random

P = jax.checkpoint_policies
SOURCE = "/work/shared/bench/gen_bench.py"


def mlp(L, policy):
    def layer(W, b, x): return jnp.tanh(x @ W + b)
    if policy is not None: layer = jax.checkpoint(layer, policy=policy)
    def loss(params, x, y):
        for W, b in params: x = layer(W, b, x)
        return jnp.mean((x - y) ** 2)
    return loss


def transformer_block(policy):
    def block(p, x):
        h = x
        mu = jnp.mean(h, -1, keepdims=True); var = jnp.mean((h - mu) ** 2, -1, keepdims=True)
        h = (h - mu) * jax.lax.rsqrt(var + 1e-5) * p['g1']
        q = checkpoint_name(h @ p['wq'], 'q'); k = checkpoint_name(h @ p['wk'], 'k'); v = checkpoint_name(h @ p['wv'], 'v')
        B, T, D = q.shape; H = 4
        q = q.reshape(B, T, H, D // H); k = k.reshape(B, T, H, D // H); v = v.reshape(B, T, H, D // H)
        s = jnp.einsum('bthd,bshd->bhts', q, k) / jnp.sqrt(D // H).astype(jnp.float32)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum('bhts,bshd->bthd', a, v).reshape(B, T, D)
        x = x + checkpoint_name(o @ p['wo'], 'attn_out')
        mu = jnp.mean(x, -1, keepdims=True); var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        h = (x - mu) * jax.lax.rsqrt(var + 1e-5) * p['g2']
        h = checkpoint_name(jnp.maximum(h @ p['w1'], 0.0), 'mlp_hidden')
        return x + h @ p['w2']
    if policy is not None: block = jax.checkpoint(block, policy=policy)
    def loss(params, x):
        for p in params: x = block(p, x)
        return jnp.mean(x ** 2)
    return loss


# The argument builders of gen_bench.py's __main__, by size.
def mlp_args(L, d, n):
    k = random.PRNGKey(0)
    params = [(random.normal(random.fold_in(k, i), (d, d)) / d ** .5, jnp.zeros(d)) for i in range(L)]
    x = random.normal(k, (n, d)); y = jnp.zeros((n, d))
    return (params, x, y)


def transformer_args(D, T, B):
    k = random.PRNGKey(0)
    def bp(i):
        kk = random.fold_in(k, 100 + i)
        r = lambda j, s: random.normal(random.fold_in(kk, j), s) / s[0] ** .5
        return dict(g1=jnp.ones(D), g2=jnp.ones(D), wq=r(0, (D, D)), wk=r(1, (D, D)), wv=r(2, (D, D)), wo=r(3, (D, D)), w1=r(4, (D, 4 * D)), w2=r(5, (4 * D, D)))
    params = [bp(i) for i in range(2)]
    x = random.normal(k, (B, T, D))
    return (params, x)


MLP_SIZES = {"small": (8, 64, 32), "medium": (8, 512, 256), "large": (4, 1024, 1024)}  # (L, d, n)
TRANSFORMER_FULL = (256, 128, 4)   # D, T, B (gen_bench.py)
TRANSFORMER_SMALL = (32, 8, 2)     # this suite's size: same code, 4 heads of 8

CASES = []
for pname, pol in [("plain", None), ("nothing", P.nothing_saveable), ("dots", P.dots_with_no_batch_dims_saveable)]:
    # small: the generator's own small size, run; medium and large: planned only
    L, d, n = MLP_SIZES["small"]
    CASES.append(Case(f"mlp_small_{pname}", mlp(L, pol), lambda L=L, d=d, n=n: mlp_args(L, d, n), SOURCE))
    for tag in ("medium", "large"):
        L, d, n = MLP_SIZES[tag]
        CASES.append(Case(f"mlp_{tag}_{pname}", mlp(L, pol), lambda: mlp_args(2, 8, 4), SOURCE,
                          full_args=lambda L=L, d=d, n=n: mlp_args(L, d, n)))
for pname, pol in [("plain", None), ("names", P.save_only_these_names('attn_out', 'mlp_hidden')), ("dots", P.dots_saveable)]:
    CASES.append(Case(f"transformer_{pname}", transformer_block(pol), lambda: transformer_args(*TRANSFORMER_SMALL), SOURCE,
                      full_args=lambda: transformer_args(*TRANSFORMER_FULL)))
