"""The shared conformance zoo's programs (18 ordinary training programs at small sizes), as
Python functions with their example arguments.

Copied from /work/shared/conformance/gen_zoo.py (the project's conformance generator):
its sections a-o verbatim, with its building blocks and argument helpers in `common.py`.
Each `case(...)` there records a program from JAX 0.10.2; here it registers a `Case` in
`CASES`. Its policies are JAX's own (`jax.checkpoint_policies`, which the generator calls
`P` for the two used here). At the end, this suite's scalar losses of the programs with
several outputs, for `value_and_grad`.
"""

import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401  (as the generator imports it)
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from .common import (  # noqa: F401
    Case, DN, rnd, ints, unif, key, conv, max_pool, avg_pool, xent_int, layernorm, batchnorm,
    causal_attention, bf16, f16, f32,
)

P = jax.checkpoint_policies
CASES = []


def case(name, split, args, desc="", forward_only=False):
    """gen_zoo.py's registration: the decorated function with its argument builder."""
    def deco(fn):
        CASES.append(Case(name=name, fn=fn, args=args, forward_only=forward_only,
                          source="/work/shared/conformance/gen_zoo.py"))
        return fn
    return deco


# ---- a. cnn ------------------------------------------------------------------------
def cnn_loss(params, images, labels):
    (w1, b1), (w2, b2), (wd, bd) = params
    x = images.astype(f32) / 255.0
    h = jax.nn.relu(conv(x, w1, 1) + b1)          # 8x8, stride 1
    h = max_pool(h)                                # 4x4
    h = jax.nn.relu(conv(h, w2, 2) + b2)          # 2x2, stride 2
    h = avg_pool(h)                                # 1x1
    logits = h.reshape(h.shape[0], -1) @ wd + bd
    return xent_int(logits, labels)
def CNN():
    return [[(rnd(3, 3, 3, 8, scale=.3), rnd(8, scale=.1)), (rnd(3, 3, 8, 16, scale=.2), rnd(16, scale=.1)),
             (rnd(16, 10, scale=.3), rnd(10, scale=.1))],
            ints(0, 256, 4, 8, 8, 3, dtype=jnp.uint8), ints(0, 10, 4)]
case("cnn", "zoo", CNN, "conv (NHWC/HWIO, SAME, stride 1 and 2) + relu + max pool + avg pool + dense + "
     "integer-label cross-entropy (take_along_axis); u8 images, i32 labels")(cnn_loss)
case("cnn_dots_saveable", "zoo", CNN, "the cnn under jax.checkpoint(policy=dots_saveable)")(
    jax.checkpoint(cnn_loss, policy=P.dots_saveable))

# ---- b. gpt block ------------------------------------------------------------------
def gpt_block_loss(params, tokens, labels):
    emb, pos, (g1, b1), wqkv, wo, (g2, b2), w1, w2, (gf, bf) = params
    T = tokens.shape[1]
    x = emb[tokens] + pos[:T]
    a = causal_attention(layernorm(x, g1, b1), wqkv, wo, n_heads=2)
    a = checkpoint_name(a, 'attn_out')
    x = x + a
    u = layernorm(x, g2, b2) @ w1
    h = 0.5 * (jax.nn.gelu(u, approximate=True) + jax.nn.gelu(u, approximate=False))
    x = x + h @ w2
    logits = layernorm(x, gf, bf) @ emb.T          # weight-tied output
    return xent_int(logits, labels)
def GPT(V=32, D=16, T=8, B=2):
    ln = lambda: (1.0 + rnd(D, scale=.1), rnd(D, scale=.1))
    return [[rnd(V, D, scale=.5), rnd(T, D, scale=.1), ln(), rnd(D, 3 * D, scale=.25), rnd(D, D, scale=.25), ln(),
             rnd(D, 4 * D, scale=.25), rnd(4 * D, D, scale=.15), ln()],
            ints(0, V, B, T), ints(0, V, B, T)]
case("gpt_block", "zoo", GPT, "GPT block: embedding gather, positional embedding, 2-head causal attention "
     "(tril mask, where, softmax), layernorm, gelu tanh+erf, weight-tied head, integer-label xent; "
     "checkpoint(save_only_these_names('attn_out'))")(
    jax.checkpoint(gpt_block_loss, policy=P.save_only_these_names('attn_out')))

# ---- c. dropout mlp ----------------------------------------------------------------
def dropout(k, h, rate):
    keep = jax.random.bernoulli(k, 1.0 - rate, h.shape)
    return jnp.where(keep, h / (1.0 - rate), 0.0)
def dropout_mlp(params, x, y, rng):
    (W1, b1), (W2, b2), (W3, b3) = params
    k1, k2 = jax.random.split(rng)
    h = dropout(k1, jnp.tanh(x @ W1 + b1), 0.25)
    h = dropout(k2, jax.nn.relu(h @ W2 + b2), 0.5)
    return jnp.mean((h @ W3 + b3 - y) ** 2)
case("dropout_mlp", "zoo", lambda: [[(rnd(8, 16, scale=.4), rnd(16, scale=.1)), (rnd(16, 16, scale=.3), rnd(16, scale=.1)),
                                      (rnd(16, 2, scale=.3), rnd(2, scale=.1))], rnd(4, 8), rnd(4, 2), key(0)],
     "MLP with bernoulli dropout driven by a legacy raw PRNG key argument (u32[2]), split inside")(dropout_mlp)

# ---- d. control flow ---------------------------------------------------------------
def control_flow(W, x, branch):
    h = lax.fori_loop(0, 3, lambda i, h: jnp.tanh(W @ h + 0.1 * i), x)      # static bounds: a scan
    h = lax.cond(jnp.sum(h) > 0, lambda h: jnp.sin(h) * 2.0, lambda h: jnp.cos(h) - h, h)
    h = lax.switch(branch, [lambda h: h ** 2, lambda h: jnp.exp(-h), lambda h: h * W[0]], h)
    return jnp.sum(h * x)
case("control_flow", "zoo", lambda: [rnd(6, 6, scale=.4), rnd(6), jnp.int32(1)],
     "fori_loop with static bounds (scan), lax.cond on data, lax.switch on an integer argument, under grad")(control_flow)
def while_newton(a, x0):
    # sqrt(a) by Newton's method until converged: data-dependent trip count
    def cond(s): x, i = s; return (jnp.max(jnp.abs(x * x - a)) > 1e-5) & (i < 50)
    def body(s): x, i = s; return 0.5 * (x + a / x), i + 1
    x, n = lax.while_loop(cond, body, (x0, jnp.int32(0)))
    return x, n
case("control_flow_while", "zoo", lambda: [unif(0.5, 4.0, 5), jnp.ones(5)],
     "forward only: lax.while_loop with a data-dependent trip count (Newton sqrt), i32 counter output",
     forward_only=True)(while_newton)

# ---- e. bf16 mixed precision ---------------------------------------------------------
def mixed_precision(params, x, wq, qscale, y):
    (W1, b1), (W2, b2) = params
    h = jnp.dot(x.astype(bf16), W1.astype(bf16), preferred_element_type=f32) + b1
    h = jax.nn.relu(h).astype(bf16)
    wdq = (wq.astype(f32) * qscale).astype(bf16)                        # int8-quantized layer
    h = jax.nn.gelu(jnp.dot(h, wdq, preferred_element_type=f32)).astype(bf16)
    out = jnp.dot(h, W2.astype(bf16), preferred_element_type=f32) + b2
    side = jnp.sum(jnp.tanh((x[:, :4] * 0.5).astype(f16)).astype(f32))  # an f16 path
    return jnp.mean((out - y) ** 2) + 1e-2 * side
case("bf16_mixed_precision", "zoo", lambda: [[(rnd(8, 16, scale=.3), rnd(16, scale=.1)), (rnd(16, 4, scale=.3), rnd(4, scale=.1))],
                                              rnd(4, 8).astype(bf16), ints(-127, 128, 16, 16, dtype=jnp.int8), jnp.float32(0.01), rnd(4, 4)],
     "f32 master weights cast to bf16 for matmuls with f32 accumulation (preferred_element_type), bf16 input, "
     "int8-quantized weight with f32 scale, an f16 side path, f32 loss")(mixed_precision)

# ---- f. scans and sorts ------------------------------------------------------------
def scans_and_sorts(x, w):
    a = jnp.cumsum(x, axis=1)
    b = jnp.cumprod(1.0 + 0.1 * x, axis=1)
    c = lax.cummax(x, axis=1)
    s = jnp.sort(x, axis=1)
    idx = jnp.argsort(x, axis=1)
    logits = x @ w
    am = jnp.argmax(logits, axis=1)
    oh = jax.nn.one_hot(am, w.shape[1])
    tv, ti = lax.top_k(x, 3)
    ramp = jnp.arange(x.shape[1], dtype=f32)
    loss = (jnp.sum(a * b) + jnp.sum(c ** 2) + jnp.sum(s * ramp) + jnp.sum(jnp.take_along_axis(x, idx, 1) * ramp[::-1])
            + jnp.sum(oh * logits) + jnp.sum(tv ** 2))
    return loss, am, ti
case("scans_and_sorts", "zoo", lambda: [rnd(4, 8), rnd(8, 5)],
     "cumsum, cumprod, cummax, sort, argsort, argmax, one_hot, top_k; integer outputs get null cotangents")(scans_and_sorts)

# ---- g. embedding grad ---------------------------------------------------------------
def embedding_model(emb, W, tokens):
    h = emb[tokens]                                    # gather with repeated indices
    bumped = emb.at[tokens[:, 0]].add(1.0)            # forward scatter-add
    return jnp.sum(jnp.tanh(h @ W) ** 2) + jnp.sum(bumped[:3] ** 2)
case("embedding_grad", "zoo", lambda: [rnd(10, 6, scale=.5), rnd(6, 4, scale=.5), jnp.array([[1, 3, 3, 7], [3, 1, 9, 9], [0, 3, 1, 1]], jnp.int32)],
     "embedding gather with repeated indices: the gradient is a scatter-add; plus a forward .at[].add")(embedding_model)

# ---- h. batchnorm resnet block ---------------------------------------------------------
def bn_resnet_block(params, x):
    w1, (g1, b1), w2, (g2, b2) = params
    h, mu1, var1 = batchnorm(conv(x, w1), g1, b1)
    h = jax.nn.relu(h)
    h, mu2, var2 = batchnorm(conv(h, w2), g2, b2)
    y = jax.nn.relu(h + x)
    return jnp.mean(y ** 2), mu1, var1
case("batchnorm_resnet_block", "zoo", lambda: [[rnd(3, 3, 8, 8, scale=.2), (1.0 + rnd(8, scale=.1), rnd(8, scale=.1)),
                                                rnd(3, 3, 8, 8, scale=.2), (1.0 + rnd(8, scale=.1), rnd(8, scale=.1))], rnd(4, 8, 8, 8)],
     "conv + batch norm (mean/var over N,H,W) + relu + conv + batch norm + skip + relu; batch stats as outputs")(bn_resnet_block)

# ---- i. adam step ------------------------------------------------------------------
def mlp_loss(params, x, y):
    for W, b in params[:-1]:
        x = jax.nn.gelu(x @ W + b)
    W, b = params[-1]
    return jnp.mean((x @ W + b - y) ** 2)
def adam_step(params, m, v, step, x, y, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
    step = step + 1
    t = step.astype(f32)
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    upd = lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps)
    return jax.tree_util.tree_map(upd, params, m, v), m, v, step, loss
def ADAM():
    ps = [(rnd(6, 12, scale=.4), rnd(12, scale=.1)), (rnd(12, 3, scale=.3), rnd(3, scale=.1))]
    m = jax.tree_util.tree_map(lambda p: 0.01 * jnp.ones_like(p), ps)
    v = jax.tree_util.tree_map(lambda p: 0.001 * jnp.ones_like(p), ps)
    return [ps, m, v, jnp.int32(3), rnd(4, 6), rnd(4, 3)]
case("adam_step", "zoo", ADAM, "a full training step: value_and_grad of a gelu MLP, then a hand-written Adam update "
     "of the param pytree (bias-corrected, i32 step counter); the vjp of the step is second order")(adam_step)

# ---- j. per-example grads ----------------------------------------------------------
def ex_loss(params, xy):
    x, y = xy
    W1, b1, W2 = params
    return jnp.sum((jnp.tanh(x @ W1 + b1) @ W2 - y) ** 2)
def per_example_grads(params, xs, ys):
    gs = jax.vmap(jax.grad(ex_loss), in_axes=(None, 0))(params, (xs, ys))
    norms = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in gs)
    return gs, jnp.sqrt(norms)
case("per_example_grads", "zoo", lambda: [(rnd(5, 8, scale=.4), rnd(8, scale=.1), rnd(8, 2, scale=.4)), rnd(4, 5), rnd(4, 2)],
     "jax.vmap(jax.grad(loss), in_axes=(None, 0)) and per-example gradient norms; the vjp is second order")(per_example_grads)

# ---- k. custom_vjp / custom_jvp ------------------------------------------------------
@jax.custom_vjp
def clip_gradient(x):
    return x
def _clip_fwd(x): return x, None
def _clip_bwd(_, g): return (jnp.clip(g, -0.1, 0.1),)
clip_gradient.defvjp(_clip_fwd, _clip_bwd)
def custom_vjp_loss(W1, W2, x):
    h = clip_gradient(jnp.tanh(x @ W1))
    return jnp.sum((h @ W2) ** 2)
case("custom_vjp", "zoo", lambda: [rnd(6, 8, scale=.5), rnd(8, 3), rnd(4, 6)],
     "a jax.custom_vjp gradient clipper (identity forward, clipped cotangent) inside an MLP loss")(custom_vjp_loss)
@jax.custom_jvp
def safe_log(x):
    return jnp.log(jnp.maximum(x, 1e-6))
@safe_log.defjvp
def _safe_log_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return safe_log(x), t / jnp.maximum(x, 1e-6)
def custom_jvp_loss(W, x):
    p = jax.nn.softmax(x @ W, axis=-1)
    return -jnp.sum(p * safe_log(p)) + jnp.sum(safe_log(jnp.abs(x) * 0.0 + jnp.abs(W[0, 0])))
case("custom_jvp", "zoo", lambda: [rnd(6, 5), rnd(4, 6)],
     "a jax.custom_jvp safe log (custom tangent rule) in an entropy loss")(custom_jvp_loss)

# ---- l. einsum zoo -----------------------------------------------------------------
def einsum_zoo(a, b, c, d, e):
    r1 = jnp.einsum('bhqd,bhkd->bhqk', a, b)               # batch dims b,h; contract d
    r2 = jnp.einsum('abcd,cdef->abef', a, c)               # two contracting dims
    r3 = jnp.einsum('ij,jk,kl->il', d, e, d.T)             # three operands
    r4 = jnp.einsum('bhqk,bhkd->bqd', r1, b)               # contract k and h, batch b
    r5 = jnp.einsum('bi,bj->bij', d[:2], e[:2])            # outer product per batch
    return jnp.sum(r1 ** 2) + jnp.sum(jnp.sin(r2)) + jnp.sum(r3) + jnp.sum(r4 * r4) + jnp.sum(r5)
case("einsum_zoo", "zoo", lambda: [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4), rnd(3, 4, 2, 3), rnd(4, 4), rnd(4, 4)],
     "einsums with several batch and contracting dims, a 3-operand einsum, an outer product")(einsum_zoo)

# ---- m. depthwise and transposed conv ----------------------------------------------------
def depthwise_transpose(wd, wp, wt, x):
    C = x.shape[-1]
    h = conv(x, wd, 1, feature_group_count=C)                        # depthwise 3x3
    h = jax.nn.relu(conv(h, wp, 2))                                    # pointwise, stride 2
    up = lax.conv_general_dilated(h, wt, (1, 1), ((1, 2), (1, 2)), lhs_dilation=(2, 2), dimension_numbers=DN)  # transposed conv
    at = conv(x, wd, 1, rhs_dilation=(2, 2), feature_group_count=C)  # atrous depthwise
    return jnp.mean((up - x) ** 2) + jnp.mean(at ** 2)
case("depthwise_and_transpose_conv", "zoo", lambda: [rnd(3, 3, 1, 4, scale=.3), rnd(1, 1, 4, 8, scale=.3), rnd(3, 3, 8, 4, scale=.2), rnd(2, 8, 8, 4)],
     "depthwise conv (feature_group_count), stride-2 pointwise conv, transposed conv (lhs_dilation), atrous conv (rhs_dilation)")(depthwise_transpose)

# ---- n. special functions --------------------------------------------------------------
def special_functions(x, y):
    pos = jnp.abs(x) + 0.5
    t = jnp.tanh(x) * 0.9
    r = jax.nn.logsumexp(x, axis=-1).sum() + jax.nn.softplus(y).sum()
    r += jnp.sum(jax.scipy.special.erfinv(t)) + jnp.sum(jax.scipy.special.gammaln(pos)) + jnp.sum(jax.scipy.special.digamma(pos))
    r += jnp.sum(jnp.clip(x, -0.5, 0.7) * y) + jnp.sum(lax.rem(x * 3.0, 1.3) * y) + jnp.sum(jnp.floor(x * 2) * y)
    r += jnp.sum(jnp.round(x * 3) * y) + jnp.sum(jnp.sign(x) * y) + jnp.sum(jnp.expm1(t)) + jnp.sum(jnp.log1p(pos))
    r += jnp.sum(pos ** 2.5) + jnp.sum(jnp.power(pos, y)) + jnp.sum(jnp.arctan2(x, y))
    safe = jnp.where(x > 0, x, 1.0)
    r += jnp.sum(jnp.where(x > 0, jnp.sqrt(safe) * jnp.log(safe), 0.0))          # NaN-safe where
    r += jnp.sum(jnp.where(jnp.abs(y) > 1e-3, jnp.sin(y) / jnp.where(jnp.abs(y) > 1e-3, y, 1.0), 1.0))
    return r
case("special_functions", "zoo", lambda: [rnd(4, 6), rnd(4, 6)],
     "logsumexp, softplus, erf_inv, lgamma, digamma, clip, rem, floor, round, sign, expm1, log1p, pow (float "
     "exponent, scalar and array), atan2, NaN-safe double-where patterns")(special_functions)

# ---- o. scan of blocks with JAX's real offload policy ------------------------------------
def scan_blocks_offload(stacked, x, n_heads=2):
    def block(x, p):
        (g1, b1), wqkv, wo, (g2, b2), w1, w2 = p
        a = checkpoint_name(causal_attention(layernorm(x, g1, b1), wqkv, wo, n_heads), 'attn')
        x = x + a
        u = checkpoint_name(jax.nn.gelu(layernorm(x, g2, b2) @ w1), 'mlp_hidden')
        return x + u @ w2, None
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=['attn'], names_which_can_be_offloaded=['mlp_hidden'],
        offload_src='device', offload_dst='pinned_host')
    x, _ = lax.scan(jax.checkpoint(block, policy=policy), x, stacked)
    return jnp.sum(x ** 2) / x.size
def SCANBLK(L=2, D=16, B=2, T=8):
    ln = lambda: (1.0 + rnd(L, D, scale=.1), rnd(L, D, scale=.1))
    return [(ln(), rnd(L, D, 3 * D, scale=.25), rnd(L, D, D, scale=.25), ln(), rnd(L, D, 2 * D, scale=.25), rnd(L, 2 * D, D, scale=.2)),
            rnd(B, T, D)]
case("scan_of_blocks_offload", "zoo", SCANBLK, "lax.scan over 2 stacked transformer blocks, body under jax.checkpoint with "
     "JAX's real function-valued policy save_and_offload_only_these_names(saved=['attn'], offloaded=['mlp_hidden']): "
     "the jaxpr prints it as <function ... at 0x...>")(scan_blocks_offload)


# ---- this suite's own: scalar losses of the programs with several outputs -----------------
# (remat.value_and_grad, like jax.value_and_grad, takes a function with a scalar output.)
def _leaf_sum(tree):
    return sum(jnp.sum(l) for l in jax.tree_util.tree_leaves(tree))


LOSSES = {
    "scans_and_sorts": lambda x, w: scans_and_sorts(x, w)[0],
    "batchnorm_resnet_block": lambda params, x: bn_resnet_block(params, x)[0],
    # second order: the sum of the updated parameters and moments, and the loss
    "adam_step": lambda *a: _leaf_sum(adam_step(*a)[:3]) + adam_step(*a)[4],
    "per_example_grads": lambda params, xs, ys: _leaf_sum(per_example_grads(params, xs, ys)),
}
