"""The benchmark models' *primal* functions, as the memory planner takes them: what
`jax.make_jaxpr(loss)` prints (no value_and_grad), with the same model code as
`/work/shared/bench/gen_bench.py` (the MLPs, the transformer with its `checkpoint_name`s)
and `crates/jit/bench/gen_models.py` (the GPT block), at the benchmark sizes and at
reduced sizes for fast tests. The functions carry no `jax.checkpoint`: the planner treats
the whole function as `checkpoint(f)` and chooses what it saves.

    python3 crates/plan/tests/data/gen_primal.py crates/plan/tests/data/primal

Each program is `NAME.jaxpr` plus `NAME.json`: `argnums` (the inputs value_and_grad
differentiates: the parameters, `argnums=0` over a pytree), `arg_names`, and for programs
with names, `jax_saved` — for every subset of the names, the residuals JAX saves under
`jax.checkpoint(loss, policy=save_only_these_names(*subset))` (`print_saved_residuals`'s
avals and kinds), so that the Rust tests check `--names-only` against JAX without Python.

Programs with names also get `NAME.offload.json`: for every split of the names into saved,
offloaded and recomputed (3^5 = 243), keyed by the exact call `remat plan --names-only
--host-budget` prints (`offload_call`, evaluated here as Python), the residuals JAX saves
under `jax.checkpoint(loss, policy=<that call>)` beyond the arguments and constants; an offloaded residual is the output of a
`device_put` to host memory (`f32<host>[...]`). `cpu` records what JAX does with such a
policy on this CPU backend: the vjp's jaxpr moves the offloaded values with `device_put`s
to `MemorySpace.Host`, but the CPU lowering of `device_put` is the identity (no
`annotate_device_placement`), so nothing moves and the gradients are those of the
un-offloaded function.
"""
import itertools
import json
import math
import os
import sys

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name
from jax._src.ad_checkpoint import saved_residuals  # what print_saved_residuals prints, as data

jax.config.update('jax_platform_name', 'cpu')
P = jax.checkpoint_policies


def mlp(L):
    def layer(W, b, x): return jnp.tanh(x @ W + b)
    def loss(params, x, y):
        for W, b in params: x = layer(W, b, x)
        return jnp.mean((x - y) ** 2)
    return loss


def transformer():
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
    def loss(params, x):
        for p in params: x = block(p, x)
        return jnp.mean(x ** 2)
    return loss


def gpt(heads, names):
    """gen_models.py's GPT block; with `names`, its q, k, v, attention output and MLP
    hidden layer are named with checkpoint_name as in the transformer."""
    nm = (lambda x, n: checkpoint_name(x, n)) if names else (lambda x, n: x)
    def layer_norm(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * g + b
    def block(p, x):
        B, T, D = x.shape
        h = layer_norm(x, p['ln1_g'], p['ln1_b'])
        q = nm(h @ p['wq'], 'q').reshape(B, T, heads, D // heads)
        k = nm(h @ p['wk'], 'k').reshape(B, T, heads, D // heads)
        v = nm(h @ p['wv'], 'v').reshape(B, T, heads, D // heads)
        s = jnp.einsum('bthd,bshd->bhts', q, k) / math.sqrt(D // heads)
        causal = jnp.tril(jnp.ones((T, T), bool))
        s = jnp.where(causal, s, -1e9)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum('bhts,bshd->bthd', a, v).reshape(B, T, D)
        x = x + nm(o @ p['wo'], 'attn_out')
        h = layer_norm(x, p['ln2_g'], p['ln2_b'])
        h = nm(jax.nn.gelu(h @ p['w1'] + p['c1']), 'mlp_hidden')
        return x + h @ p['w2'] + p['c2']
    def loss(params, x):
        x = block(params['block'], x)
        return jnp.mean(layer_norm(x, params['lnf_g'], params['lnf_b']) ** 2)
    return loss


def mlp_args(L, d, n):
    k = jax.random.PRNGKey(0)
    params = [(jax.random.normal(jax.random.fold_in(k, i), (d, d)) / d ** .5, jnp.zeros(d)) for i in range(L)]
    return (params, jax.random.normal(k, (n, d)), jnp.zeros((n, d)))


def transformer_args(D, T, B):
    k = jax.random.PRNGKey(0)
    def bp(i):
        kk = jax.random.fold_in(k, 100 + i)
        r = lambda j, s: jax.random.normal(jax.random.fold_in(kk, j), s) / s[0] ** .5
        return dict(g1=jnp.ones(D), g2=jnp.ones(D), wq=r(0, (D, D)), wk=r(1, (D, D)), wv=r(2, (D, D)),
                    wo=r(3, (D, D)), w1=r(4, (D, 4 * D)), w2=r(5, (4 * D, D)))
    return ([bp(i) for i in range(2)], jax.random.normal(k, (B, T, D)))


def gpt_args(batch, seq, d):
    k = jax.random.PRNGKey(3)
    n = lambda i, s, f: jax.random.normal(jax.random.fold_in(k, i), s) / f ** .5
    block = dict(ln1_g=jnp.ones(d), ln1_b=jnp.zeros(d), wq=n(0, (d, d), d), wk=n(1, (d, d), d),
                 wv=n(2, (d, d), d), wo=n(3, (d, d), d), ln2_g=jnp.ones(d), ln2_b=jnp.zeros(d),
                 w1=n(4, (d, 4 * d), d), c1=jnp.zeros(4 * d), w2=n(5, (4 * d, d), 4 * d), c2=jnp.zeros(d))
    params = dict(block=block, lnf_g=jnp.ones(d), lnf_b=jnp.zeros(d))
    return (params, jax.random.normal(jax.random.fold_in(k, 20), (batch, seq, d)))


NAMES = ['q', 'k', 'v', 'attn_out', 'mlp_hidden']


def saved(loss, args, subset):
    """JAX's residuals under save_only_these_names(*subset), as (aval, kind, what)."""
    return saved_under(loss, args, P.save_only_these_names(*subset))


def offload_call(saved_names, offloaded):
    """The call `remat plan --names-only --host-budget` prints for a split, character for
    character (`crates/plan/src/names.rs`)."""
    def lst(ns): return '[' + ', '.join(f"'{n}'" for n in ns) + ']'
    return ('jax.checkpoint_policies.save_and_offload_only_these_names('
            f'names_which_can_be_saved={lst(saved_names)}, names_which_can_be_offloaded={lst(offloaded)}, '
            'offload_src="device", offload_dst="pinned_host")')


def splits():
    """Every split of NAMES into (saved, offloaded), the rest recomputed."""
    for digits in itertools.product(range(3), repeat=len(NAMES)):
        yield ([n for n, d in zip(NAMES, digits) if d == 1], [n for n, d in zip(NAMES, digits) if d == 2])


def cpu_check(loss, args):
    """What JAX 0.10.2 does on CPU with an offloading policy (offload every name)."""
    call = offload_call([], NAMES)
    f = jax.checkpoint(loss, policy=eval(call, {'jax': jax}))
    vjp_jaxpr = jax.make_jaxpr(lambda p: jax.vjp(lambda q: f(q, *args[1:]), p))(args[0])
    puts = [e for e in vjp_jaxpr.jaxpr.eqns if e.primitive.name == 'device_put']
    to_host = sum(1 for e in puts for d in e.params['devices'] if str(d) == 'MemorySpace.Host')
    grad = jax.jit(jax.grad(f))
    lowered = grad.lower(*args).as_text()
    g_off = jax.tree_util.tree_leaves(grad(*args))
    g_plain = jax.tree_util.tree_leaves(jax.jit(jax.grad(loss))(*args))
    return dict(policy=call, platform=jax.devices()[0].platform,
                memory_kinds=[m.kind for m in jax.devices()[0].addressable_memories()],
                device_puts_to_host_in_vjp=to_host,
                annotate_device_placement_in_lowered_grad='annotate_device_placement' in lowered,
                pinned_host_in_lowered_grad='pinned_host' in lowered,
                gradients_equal_unoffloaded=all(bool(jnp.allclose(a, b, rtol=1e-5, atol=1e-6))
                                                for a, b in zip(g_off, g_plain)))


def saved_under(loss, args, policy):
    """JAX's residuals under `policy`, as (aval, kind, what)."""
    f = jax.checkpoint(loss, policy=policy)
    out = []
    for aval, why in saved_residuals(lambda p: f(p, *args[1:]), args[0]):
        if why.startswith('from the argument'):
            kind, what = 'argument', why[len('from the argument '):]
        elif why.startswith('named '):
            kind, what = 'named', why.split("'")[1]
        elif why == 'from a constant':
            kind, what = 'constant', ''
        elif why == 'from a literal':
            kind, what = 'literal', ''
        elif why.startswith('output of '):
            kind, what = 'output', why[len('output of '):].split(' ')[0]
        else:
            kind, what = why, ''
        out.append(dict(aval=aval.str_short(short_dtypes=True), kind=kind, what=what))
    return out


def record(outdir, name, loss, args, with_names):
    jaxpr = jax.make_jaxpr(loss)(*args)
    with open(f"{outdir}/{name}.jaxpr", "w") as f:
        f.write(str(jaxpr) + "\n")
    nparams = len(jax.tree_util.tree_leaves(args[0]))
    meta = dict(name=name, jax_version=jax.__version__, argnums=list(range(nparams)),
                arg_names=list(jaxpr.jaxpr.debug_info.arg_names))
    if with_names:
        meta['jax_saved'] = {','.join(s): saved(loss, args, s)
                             for r in range(len(NAMES) + 1) for s in itertools.combinations(NAMES, r)}
    with open(f"{outdir}/{name}.json", "w") as f:
        json.dump(meta, f, indent=1)
    if with_names:
        policies = {}
        for s, o in splits():
            call = offload_call(s, o)
            # Beyond the arguments and constants (the same under every split), as the
            # Rust test compares.
            policies[call] = [r for r in saved_under(loss, args, eval(call, {'jax': jax}))
                              if r['kind'] not in ('argument', 'constant')]
        head = dict(name=name, jax_version=jax.__version__, cpu=cpu_check(loss, args))
        compact = dict(separators=(',', ':'))
        with open(f"{outdir}/{name}.offload.json", "w") as f:
            # One line per policy: the file stays small and its diffs readable.
            f.write(json.dumps(head, indent=1)[:-2] + ',\n "jax_saved": {\n')
            f.write(',\n'.join(f'{json.dumps(c)}:{json.dumps(r, **compact)}' for c, r in policies.items()))
            f.write('\n }\n}\n')
    print(name)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for L, d, n, tag in [(8, 64, 32, "small"), (8, 512, 256, "medium"), (4, 1024, 1024, "large"), (3, 8, 4, "tiny")]:
        record(out, f"mlp_{tag}", mlp(L), mlp_args(L, d, n), False)
    record(out, "transformer", transformer(), transformer_args(256, 128, 4), False)
    record(out, "transformer_reduced", transformer(), transformer_args(16, 8, 2), True)
    record(out, "gpt", gpt(4, False), gpt_args(4, 256, 256), False)
    record(out, "gpt_reduced", gpt(4, False), gpt_args(2, 8, 16), False)
    record(out, "gpt_names_reduced", gpt(4, True), gpt_args(2, 8, 16), True)


if __name__ == '__main__':
    main()
