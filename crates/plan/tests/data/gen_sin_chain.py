"""Writes sin_chain_8.jaxpr and sin_chain_16.jaxpr: issue 43's reproducers of a chain of
`sin` (crates/plan/tests/planner.rs), and dag_names.jaxpr: dag.jaxpr with each of its eight
intermediate values named by `checkpoint_name` after its variable (`--names-only`'s
brute-force oracle), and rnn_scan.jaxpr: a 16-step scanned RNN over a [3, 12] state (whose
plans save the scan's stacked `f32[16,3,12]` outputs), and names_chain_16.jaxpr: a chain of
16 named steps `sin(x) * 1.5` over 256 values (`--names-only` at its limit of 16 names,
docs/planner.md "Names-only at 16 names").

    python3 gen_sin_chain.py   (JAX 0.10.2; writes the three files next to this script)
"""
import os

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

HERE = os.path.dirname(os.path.abspath(__file__))


def sin_chain(steps):
    def f(x):
        for _ in range(steps):
            x = jnp.sin(x)
        return jnp.sum(x)

    return f


def dag_names(a, b):
    c = checkpoint_name(b * a, "c")
    d = checkpoint_name(jnp.sin(c), "d")
    e = checkpoint_name(d * d, "e")
    f = checkpoint_name(jnp.sin(e), "f")
    g = checkpoint_name(jnp.exp(f), "g")
    h = checkpoint_name(g * c, "h")
    j = checkpoint_name(jnp.tanh(d), "j")
    k = checkpoint_name(h * j, "k")
    return jnp.sum(k)


def rnn_scan(w, u, xs, h0):
    def step(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, h

    h, hs = jax.lax.scan(step, h0, xs)
    return jnp.sum(hs * hs) + jnp.sum(h)


def names_chain(x):
    for k in range(16):
        x = checkpoint_name(jnp.sin(x) * 1.5, f"n{k}")
    return jnp.sum(x)


def write(name, f, *args):
    with open(os.path.join(HERE, name), "w") as out:
        out.write(str(jax.make_jaxpr(f)(*args)) + "\n")


for steps in (8, 16):
    write(f"sin_chain_{steps}.jaxpr", sin_chain(steps), jnp.ones(32, jnp.float32))
write("dag_names.jaxpr", dag_names, 1.0, jnp.ones(2048, jnp.float32))
f32 = jnp.float32
write("rnn_scan.jaxpr", rnn_scan, jnp.ones((12, 12), f32), jnp.ones((12, 12), f32), jnp.ones((16, 3, 12), f32), jnp.ones((3, 12), f32))
write("names_chain_16.jaxpr", names_chain, jnp.ones(256, f32))
