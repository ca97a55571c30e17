"""The JIT's realistic-size benchmark programs (issues 21 and 26): a CNN, a ResNet basic
block, a GPT block, a deep stack of narrow gelu layers and RNN scans, as written and under
JAX's policies.

Copied from /work/main/crates/jit/bench/gen_models.py (the project's benchmark generator):
the models, the argument builders and `programs()`, verbatim. The generator records
`jax.value_and_grad(loss)`; here `loss` itself is the program. Each program has its
realistic size (`full_args`, planned from `jax.ShapeDtypeStruct`s) and the generator's
reduced size (`args`, run by the tests). The argument builders call `random` (NumPy's
draws, `common.NumpyRandom`) where the generator calls `jax.random`: the same shapes and
scales, without an XLA compile per shape.
"""

import math

import jax
import jax.numpy as jnp
from jax import lax

from .common import Case, random

P = jax.checkpoint_policies
SOURCE = "/work/main/crates/jit/bench/gen_models.py"

def conv(x, w):
    """A 3x3 'SAME' convolution, NHWC activations and HWIO kernels."""
    return lax.conv_general_dilated(x, w, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC'))


def max_pool(x):
    """2x2 max pool, stride 2 (`reduce_window_max`; its gradient is `select_and_scatter_add`)."""
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')


def cross_entropy(logits, labels):
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))


def cnn(policy):
    """conv-relu-pool, conv-relu-pool, dense; softmax cross-entropy."""
    def features(w, b, x):
        return max_pool(jax.nn.relu(conv(x, w) + b))
    if policy is not None:
        features = jax.checkpoint(features, policy=policy)

    def loss(params, x, labels):
        for w, b in params['convs']:
            x = features(w, b, x)
        x = x.reshape(x.shape[0], -1)
        return cross_entropy(x @ params['dense'] + params['bias'], labels)
    return loss


def resnet(policy):
    """A ResNet basic block (conv-norm-relu, conv-norm, identity skip, relu), then a global
    average pool and a dense head; softmax cross-entropy. The norm is batch norm in training
    mode (statistics over batch and space) with a scale and a shift."""
    def norm(x, g, b):
        mu = jnp.mean(x, axis=(0, 1, 2), keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=(0, 1, 2), keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * g + b

    def block(p, x):
        h = jax.nn.relu(norm(conv(x, p['w1']), p['g1'], p['b1']))
        h = norm(conv(h, p['w2']), p['g2'], p['b2'])
        return jax.nn.relu(x + h)
    if policy is not None:
        block = jax.checkpoint(block, policy=policy)

    def loss(params, x, labels):
        x = jnp.mean(block(params['block'], x), axis=(1, 2))
        return cross_entropy(x @ params['dense'] + params['bias'], labels)
    return loss


def gpt(heads, policy):
    """A pre-norm GPT block: layer norm, causal multi-head attention, layer norm, gelu MLP
    (4x wide), both with residuals; a final layer norm; the mean square as the loss."""
    def layer_norm(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * g + b

    def block(p, x):
        B, T, D = x.shape
        h = layer_norm(x, p['ln1_g'], p['ln1_b'])
        q = (h @ p['wq']).reshape(B, T, heads, D // heads)
        k = (h @ p['wk']).reshape(B, T, heads, D // heads)
        v = (h @ p['wv']).reshape(B, T, heads, D // heads)
        s = jnp.einsum('bthd,bshd->bhts', q, k) / math.sqrt(D // heads)
        causal = jnp.tril(jnp.ones((T, T), bool))
        s = jnp.where(causal, s, -1e9)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum('bhts,bshd->bthd', a, v).reshape(B, T, D)
        x = x + o @ p['wo']
        h = layer_norm(x, p['ln2_g'], p['ln2_b'])
        h = jax.nn.gelu(h @ p['w1'] + p['c1'])
        return x + h @ p['w2'] + p['c2']
    if policy is not None:
        block = jax.checkpoint(block, policy=policy)

    def loss(params, x):
        x = block(params['block'], x)
        return jnp.mean(layer_norm(x, params['lnf_g'], params['lnf_b']) ** 2)
    return loss


def rnn(policy):
    """An RNN over a sequence: `lax.scan` of `h = tanh(h @ W + x_t @ U + b)` from `h = 0`, the
    stacked states as the scan's ys; the mean square of all states as the loss. Under a
    policy the cell is `jax.checkpoint`ed, so the scan's backward recomputes what the policy
    does not save (JAX's `scan` saves the cell's residuals per step, stacked)."""
    def cell(p, h, x):
        return jnp.tanh(h @ p['W'] + x @ p['U'] + p['b'])
    if policy is not None:
        cell = jax.checkpoint(cell, policy=policy)

    def loss(params, xs):
        h0 = jnp.zeros((xs.shape[1], params['W'].shape[0]), xs.dtype)
        _, hs = lax.scan(lambda h, x: (lambda n: (n, n))(cell(params, h, x)), h0, xs)
        return jnp.mean(hs ** 2)
    return loss


def gelu_mlp(policy):
    """A deep stack of narrow gelu layers (issue 26's "deep stacks of small elementwise-heavy
    layers"): `x = gelu(x @ W + b)` per layer, each layer checkpointed under `policy`; the
    mean square as the loss."""
    def layer(w, b, x):
        return jax.nn.gelu(x @ w + b)
    if policy is not None:
        layer = jax.checkpoint(layer, policy=policy)

    def loss(params, x):
        for w, b in params:
            x = layer(w, b, x)
        return jnp.mean(x ** 2)
    return loss


def gelu_args(batch, width, depth):
    k = random.PRNGKey(4)
    params = [(normal(k, i, (width, width), width), jnp.zeros(width)) for i in range(depth)]
    return (params, random.normal(random.fold_in(k, 100), (batch, width)))


def normal(key, i, shape, fan_in):
    return random.normal(random.fold_in(key, i), shape) / fan_in ** .5


def one_hot(key, n, classes):
    return jax.nn.one_hot(random.randint(key, (n,), 0, classes), classes)


def cnn_args(batch, size, widths, classes=10):
    k = random.PRNGKey(1)
    chans = (3,) + tuple(widths)
    convs = [(normal(k, i, (3, 3, chans[i], chans[i + 1]), 9 * chans[i]), jnp.zeros(chans[i + 1]))
             for i in range(len(widths))]
    flat = (size // 2 ** len(widths)) ** 2 * widths[-1]
    params = dict(convs=convs, dense=normal(k, 10, (flat, classes), flat), bias=jnp.zeros(classes))
    x = random.normal(random.fold_in(k, 20), (batch, size, size, 3))
    return (params, x, one_hot(random.fold_in(k, 21), batch, classes))


def resnet_args(batch, size, width, classes=10):
    k = random.PRNGKey(2)
    block = dict(w1=normal(k, 0, (3, 3, width, width), 9 * width), g1=jnp.ones(width), b1=jnp.zeros(width),
                 w2=normal(k, 1, (3, 3, width, width), 9 * width), g2=jnp.ones(width), b2=jnp.zeros(width))
    params = dict(block=block, dense=normal(k, 2, (width, classes), width), bias=jnp.zeros(classes))
    x = random.normal(random.fold_in(k, 20), (batch, size, size, width))
    return (params, x, one_hot(random.fold_in(k, 21), batch, classes))


def gpt_args(batch, seq, d):
    k = random.PRNGKey(3)
    block = dict(ln1_g=jnp.ones(d), ln1_b=jnp.zeros(d), wq=normal(k, 0, (d, d), d), wk=normal(k, 1, (d, d), d),
                 wv=normal(k, 2, (d, d), d), wo=normal(k, 3, (d, d), d), ln2_g=jnp.ones(d), ln2_b=jnp.zeros(d),
                 w1=normal(k, 4, (d, 4 * d), d), c1=jnp.zeros(4 * d), w2=normal(k, 5, (4 * d, d), 4 * d),
                 c2=jnp.zeros(d))
    params = dict(block=block, lnf_g=jnp.ones(d), lnf_b=jnp.zeros(d))
    return (params, random.normal(random.fold_in(k, 20), (batch, seq, d)))


def rnn_args(steps, batch, width):
    k = random.PRNGKey(4)
    params = dict(W=normal(k, 0, (width, width), width), U=normal(k, 1, (width, width), width),
                  b=jnp.zeros(width))
    return (params, random.normal(random.fold_in(k, 20), (steps, batch, width)))


# name: (loss, full-size args and sizes, reduced-size args). The reduced sizes keep every
# structural feature (two pools, the skip, several heads, the causal mask).
CNN = dict(batch=32, image=32, widths=[64, 128])
RESNET = dict(batch=32, image=32, width=64)
GPT = dict(batch=4, seq=256, d_model=256, heads=4)
# Issue 26's scans: 64-256 steps, 128-512 wide bodies.
SCAN_LONG = dict(steps=256, batch=32, width=128)
SCAN_WIDE = dict(steps=64, batch=32, width=512)
GELU = dict(batch=256, width=128, depth=32)


def programs():
    return {
        'cnn_plain': (cnn(None), lambda: cnn_args(32, 32, (64, 128)), lambda: cnn_args(2, 8, (4, 8)),
                      dict(CNN, policy='plain')),
        'cnn_dots': (cnn(P.dots_saveable), lambda: cnn_args(32, 32, (64, 128)), lambda: cnn_args(2, 8, (4, 8)),
                     dict(CNN, policy='dots')),
        'resnet_plain': (resnet(None), lambda: resnet_args(32, 32, 64), lambda: resnet_args(2, 6, 8),
                         dict(RESNET, policy='plain')),
        'gpt_plain': (gpt(4, None), lambda: gpt_args(4, 256, 256), lambda: gpt_args(2, 8, 16),
                      dict(GPT, policy='plain')),
        'gpt_dots': (gpt(4, P.dots_saveable), lambda: gpt_args(4, 256, 256), lambda: gpt_args(2, 8, 16),
                     dict(GPT, policy='dots')),
        **{f'scan_{size}_{name}': (rnn(policy), lambda d=d: rnn_args(d['steps'], d['batch'], d['width']),
                                   lambda: rnn_args(16, 8, 32), dict(d, policy=name))
           for size, d in (('long', SCAN_LONG), ('wide', SCAN_WIDE))
           for name, policy in (('plain', None), ('dots', P.dots_saveable), ('nothing', P.nothing_saveable))},
        'gelu_deep_plain': (gelu_mlp(None), lambda: gelu_args(256, 128, 32), lambda: gelu_args(4, 8, 4),
                            dict(GELU, policy='plain')),
        'gelu_deep_dots': (gelu_mlp(P.dots_saveable), lambda: gelu_args(256, 128, 32),
                           lambda: gelu_args(4, 8, 4), dict(GELU, policy='dots')),
    }


CASES = [Case(name, loss, reduced, SOURCE, full_args=full) for name, (loss, full, reduced, _) in programs().items()]
