"""Records remat's own real-model cases (beyond the shared zoo) from real JAX 0.10.2, with the
shared zoo's engine and format (../shared/conformance/gen_zoo.py): the models a user's next
program would need. Each case is small (batch 2-4, widths 4-16) but ordinary JAX code.

    pip install jax==0.10.2
    PYTHONHASHSEED=0 python3 tests/data/zoo/gen_more.py tests/data/zoo
"""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../shared/conformance"))
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
import gen_zoo as z
from gen_zoo import case, rnd, ints, key, conv, layernorm, causal_attention, xent_int, DN, f32

z.ZOO.clear()

# ---- U-Net style down/up sampling with a skip connection ------------------------------
def unet(params, x):
    (wd, bd), (wm, bm), (wu, bu), wo = params
    d = jax.nn.relu(conv(x, wd, 2) + bd)                                # 8x8 -> 4x4
    m = jax.nn.relu(conv(d, wm, 1) + bm)
    up = jnp.repeat(jnp.repeat(m, 2, axis=1), 2, axis=2)               # nearest upsampling to 8x8
    u = jax.nn.relu(conv(jnp.concatenate([up, x], axis=-1), wu, 1) + bu)  # skip connection
    y = conv(u, wo, 1)
    return jnp.mean((y - x) ** 2)
case("unet_down_up", "zoo", lambda: [[(rnd(3, 3, 3, 8, scale=.3), rnd(8, scale=.1)), (rnd(3, 3, 8, 8, scale=.2), rnd(8, scale=.1)),
                                       (rnd(3, 3, 11, 8, scale=.2), rnd(8, scale=.1)), rnd(1, 1, 8, 3, scale=.3)], rnd(2, 8, 8, 3)],
     "U-Net style: stride-2 conv down, nearest upsampling (jnp.repeat), skip concatenation, 1x1 output conv")(unet)

# ---- LSTM over a sequence (lax.scan) ------------------------------------------------------
def lstm(params, xs, ys):
    wx, wh, b, wo = params
    H = wh.shape[0]
    def cell(carry, x):
        h, c = carry
        g = x @ wx + h @ wh + b
        i, f, o, u = jnp.split(g, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(u)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h @ wo
    B = xs.shape[1]
    _, out = lax.scan(cell, (jnp.zeros((B, H)), jnp.zeros((B, H))), xs)
    return jnp.mean((out - ys) ** 2)
case("lstm", "zoo", lambda: [[rnd(4, 32, scale=.3), rnd(8, 32, scale=.3), rnd(32, scale=.1), rnd(8, 2, scale=.3)],
                             rnd(6, 3, 4), rnd(6, 3, 2)],
     "LSTM over 6 time steps with lax.scan: sigmoid gates, split, tanh, a carried (h, c) pair")(lstm)

# ---- ViT patch embedding ----------------------------------------------------------------------
def vit(params, img, labels, P=4):
    wpatch, cls, pos, (g, b), wqkv, wo, whead = params
    B, Hh, Ww, C = img.shape
    patches = img.reshape(B, Hh // P, P, Ww // P, P, C).transpose(0, 1, 3, 2, 4, 5).reshape(B, -1, P * P * C)
    tok = patches @ wpatch
    x = jnp.concatenate([jnp.broadcast_to(cls, (B, 1, tok.shape[-1])), tok], axis=1) + pos
    x = x + causal_attention(layernorm(x, g, b), wqkv, wo, n_heads=2)
    return xent_int(x[:, 0] @ whead, labels)
case("vit_patch_embed", "zoo", lambda: [[rnd(48, 16, scale=.2), rnd(1, 1, 16, scale=.1), rnd(5, 16, scale=.1),
                                          (1.0 + rnd(16, scale=.1), rnd(16, scale=.1)), rnd(16, 48, scale=.25), rnd(16, 16, scale=.25),
                                          rnd(16, 5, scale=.3)], rnd(2, 8, 8, 3), ints(0, 5, 2)],
     "ViT: patches by reshape/transpose, linear patch embedding, class token concatenation, positional "
     "embedding, one attention layer, classification from the class token")(vit)

# ---- mixture of experts with top_k routing -----------------------------------------------------
def moe(params, x, y, k=2):
    wr, we, wo = params                                   # router, experts [E, D, H], out [H, 1]
    logits = x @ wr                                       # [N, E]
    vals, idx = lax.top_k(logits, k)                      # [N, k]
    gates = jax.nn.softmax(vals, axis=-1)
    h = jnp.einsum('nd,edh->neh', x, we)                  # every expert's output
    chosen = jnp.take_along_axis(h, idx[:, :, None], axis=1)   # [N, k, H]
    mixed = jnp.sum(gates[:, :, None] * jax.nn.relu(chosen), axis=1)
    return jnp.mean((mixed @ wo - y) ** 2) + 0.01 * jnp.mean(jax.nn.logsumexp(logits, axis=-1) ** 2)
case("moe_top_k", "zoo", lambda: [[rnd(8, 4, scale=.5), rnd(4, 8, 6, scale=.3), rnd(6, 1, scale=.3)], rnd(5, 8), rnd(5, 1)],
     "mixture of experts: router top_k (k=2), softmax gates, take_along_axis over experts, z-loss")(moe)

# ---- VAE with the reparameterisation trick ---------------------------------------------------------
def vae(params, x, rng):
    (we, be), (wmu, wlv), (wd, bd), wout = params
    h = jnp.tanh(x @ we + be)
    mu, logvar = h @ wmu, h @ wlv
    eps = jax.random.normal(rng, mu.shape)
    zz = mu + jnp.exp(0.5 * logvar) * eps
    rec = jnp.tanh(zz @ wd + bd) @ wout
    kl = -0.5 * jnp.mean(jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), axis=-1))
    return jnp.mean((rec - x) ** 2) + kl
case("vae_reparam", "zoo", lambda: [[(rnd(6, 8, scale=.3), rnd(8, scale=.1)), (rnd(8, 3, scale=.3), rnd(8, 3, scale=.2)),
                                      (rnd(3, 8, scale=.3), rnd(8, scale=.1)), rnd(8, 6, scale=.3)], rnd(4, 6), key(3)],
     "VAE: encoder to mean and log-variance, jax.random.normal noise from a raw key argument, "
     "reparameterised sample, decoder, KL term")(vae)

# ---- GNN message passing with segment_sum ------------------------------------------------------------
def gnn(params, feats, src, dst, labels):
    w1, w2, wout = params
    n = feats.shape[0]
    msg = feats[src] @ w1                                              # gather by edge source
    agg = jax.ops.segment_sum(msg, dst, num_segments=n)                # scatter-add to targets
    deg = jax.ops.segment_sum(jnp.ones_like(dst, dtype=f32), dst, num_segments=n)
    h = jax.nn.relu(agg / jnp.maximum(deg, 1.0)[:, None] + feats @ w2)
    return xent_int(h @ wout, labels)
case("gnn_segment_sum", "zoo", lambda: [[rnd(5, 8, scale=.3), rnd(5, 8, scale=.3), rnd(8, 3, scale=.3)], rnd(6, 5),
                                         ints(0, 6, 10), ints(0, 6, 10), ints(0, 3, 6)],
     "graph network: gather node features by edge source, segment_sum to edge targets (scatter-add), "
     "degree normalisation, node classification")(gnn)

# ---- label smoothing --------------------------------------------------------------------------------------
def label_smoothing(params, x, labels, eps=0.1):
    (w1, b1), (w2, b2) = params
    logits = jax.nn.gelu(x @ w1 + b1) @ w2 + b2
    n = logits.shape[-1]
    target = jax.nn.one_hot(labels, n) * (1 - eps) + eps / n
    return -jnp.mean(jnp.sum(target * jax.nn.log_softmax(logits), axis=-1))
case("label_smoothing", "zoo", lambda: [[(rnd(6, 8, scale=.3), rnd(8, scale=.1)), (rnd(8, 5, scale=.3), rnd(5, scale=.1))],
                                         rnd(4, 6), ints(0, 5, 4)],
     "classifier with label-smoothed one_hot targets and log_softmax cross-entropy")(label_smoothing)

# ---- gradient clipping by global norm (a training step: grad inside) ---------------------------------------
def mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
def clip_step(params, x, y, max_norm=0.5, lr=0.1):
    loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
    leaves = jax.tree_util.tree_leaves(g)
    norm = jnp.sqrt(sum(jnp.sum(l ** 2) for l in leaves))
    scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))
    new = jax.tree_util.tree_map(lambda p, gg: p - lr * scale * gg, params, g)
    return loss, new
case("grad_clip_global_norm", "zoo", lambda: [[(rnd(5, 8, scale=.4), rnd(8, scale=.1)), (rnd(8, 2, scale=.4), rnd(2, scale=.1))],
                                               rnd(4, 5), rnd(4, 2)],
     "an SGD step with gradients clipped by their global norm (value_and_grad inside, differentiated again)")(clip_step)

# ---- decoupled weight decay (AdamW-style step) ---------------------------------------------------------------
def adamw_step(params, m, v, x, y, step, lr=1e-2, b1=0.9, b2=0.999, wd=1e-2):
    loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
    t = step + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    c1, c2 = 1 - b1 ** t.astype(f32), 1 - b2 ** t.astype(f32)
    new = jax.tree_util.tree_map(lambda p, m, v: p - lr * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + wd * p), params, m, v)
    return loss, new, m, v
def ADAMW():
    p = [(rnd(5, 6, scale=.4), rnd(6, scale=.1)), (rnd(6, 2, scale=.4), rnd(2, scale=.1))]
    zeros = jax.tree_util.tree_map(lambda a: 0.1 * jnp.abs(a), p)
    return [p, zeros, jax.tree_util.tree_map(lambda a: 0.01 * a ** 2, p), rnd(4, 5), rnd(4, 2), jnp.int32(3)]
case("adamw_weight_decay", "zoo", ADAMW, "an AdamW step: bias-corrected moments and decoupled weight decay, i32 step counter")(adamw_step)

# ---- lax.map ------------------------------------------------------------------------------------------------------
def lax_map(params, xs):
    w1, w2 = params
    def per_item(x):
        return jnp.sum(jnp.sin(x @ w1) @ w2)
    return jnp.sum(lax.map(per_item, xs) ** 2)
case("lax_map", "zoo", lambda: [[rnd(4, 6, scale=.4), rnd(6, 3, scale=.4)], rnd(5, 2, 4)],
     "lax.map of a small network over the leading axis (a scan without a carry)")(lax_map)

# ---- causal 1-D convolution (a temporal conv net) -----------------------------------------------------------------
def tcn(params, x, y):
    w1, w2, wo = params
    def causal(h, w, dil):
        k = w.shape[0]
        return lax.conv_general_dilated(h, w, (1,), [((k - 1) * dil, 0)], rhs_dilation=(dil,),
                                        dimension_numbers=('NWC', 'WIO', 'NWC'))
    h = jax.nn.relu(causal(x, w1, 1))
    h = jax.nn.relu(causal(h, w2, 2)) + h
    return jnp.mean((h @ wo - y) ** 2)
case("causal_conv1d", "zoo", lambda: [[rnd(3, 2, 6, scale=.4), rnd(3, 6, 6, scale=.3), rnd(6, 1, scale=.3)], rnd(2, 10, 2), rnd(2, 10, 1)],
     "temporal conv net: causal 1-D convolutions (left padding, rhs_dilation 2), residual connection")(tcn)

# ---- Gaussian-process regression: negative log marginal likelihood with a Cholesky (issue 45) ------------------------
def gp_nll(params, x, y):
    log_ls, log_amp, log_noise = params
    d2 = jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    k = jnp.exp(2 * log_amp) * jnp.exp(-0.5 * d2 / jnp.exp(2 * log_ls)) + (jnp.exp(2 * log_noise) + 1e-3) * jnp.eye(x.shape[0])
    chol = jnp.linalg.cholesky(k)
    alpha = jax.scipy.linalg.cho_solve((chol, True), y)
    return 0.5 * jnp.dot(y, alpha) + jnp.sum(jnp.log(jnp.diagonal(chol))) + 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)
case("gp_cholesky", "zoo", lambda: [[jnp.float32(-0.3), jnp.float32(0.1), jnp.float32(-1.0)], rnd(6, 2), rnd(6)],
     "Gaussian-process regression's negative log marginal likelihood: RBF kernel, jnp.linalg.cholesky, "
     "cho_solve (two triangular solves), the log-determinant from jnp.diagonal")(gp_nll)

# ---- Fourier neural operator layer with complex weights (issue 45) --------------------------------------------------
def fourier_layer(params, u, target, modes=3):
    w_re, w_im, w_lin, w_out = params
    w = lax.complex(w_re, w_im)                                        # c64[modes, C, C]
    uh = jnp.fft.rfft(u, axis=1)                                       # c64[B, N//2+1, C]
    low = jnp.einsum("bmi,mio->bmo", uh[:, :modes], w)
    spec = jnp.zeros_like(uh).at[:, :modes].set(low)
    v = jnp.fft.irfft(spec, n=u.shape[1], axis=1) + u @ w_lin
    y = jax.nn.gelu(v) @ w_out
    return jnp.mean((y - target) ** 2)
case("fourier_layer", "zoo", lambda: [[rnd(3, 4, 4, scale=.3), rnd(3, 4, 4, scale=.3), rnd(4, 4, scale=.3), rnd(4, 1, scale=.3)],
                                     rnd(2, 8, 4), rnd(2, 8, 1)],
     "a Fourier neural operator layer: rfft along space, the low modes times complex weights (lax.complex of two real "
     "parameters), irfft, a pointwise linear path, gelu")(fourier_layer)

# ---- feature hashing and a pairwise ranking loss (issue 45) -------------------------------------------------------------
def hash_rank(params, ids, x, scores):
    table, w = params
    h = ids.astype(jnp.uint32) * jnp.uint32(2654435761)
    h = h ^ (h >> 15)
    bucket = (lax.population_count(h) + (h & jnp.uint32(7)).astype(jnp.int32)) % table.shape[0]
    feats = jnp.sum(table[bucket], axis=1)                             # [B, D]
    edges = jnp.linspace(-1.0, 1.0, 5)
    level = jnp.searchsorted(edges, lax.stop_gradient(x[:, 0]))        # bucketised first feature
    pred = jnp.sum(jnp.tanh(feats + x @ w), axis=1) + 0.1 * level
    diff = pred[:, None] - pred[None, :]
    better = scores[:, None] > scores[None, :]
    valid = jnp.any(better, axis=1, keepdims=True) & jnp.all(jnp.isfinite(x), axis=1, keepdims=True)
    return jnp.sum(jnp.where(better & valid, jax.nn.softplus(-diff), 0.0)) / jnp.maximum(jnp.sum(better), 1)
case("hash_rank", "zoo", lambda: [[rnd(11, 4, scale=.3), rnd(3, 4, scale=.3)], ints(0, 1000, 5, 3), rnd(5, 3), rnd(5)],
     "feature hashing (multiply, xor-shift, population_count into buckets) for an embedding table, searchsorted "
     "bucketising, a pairwise ranking loss masked with jnp.any/jnp.all")(hash_rank)

if __name__ == "__main__":
    z.run("zoo", sys.argv[1])
