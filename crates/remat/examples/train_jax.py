"""The `train` example's model and train step in JAX, for comparison with remat's.

    python3 crates/remat/examples/train_jax.py > crates/remat/examples/train_jax.txt

Prints, for each checkpoint policy, `jax.ad_checkpoint.print_saved_residuals` of the loss
at the example's batch size (64), then trains with the same data split, initialisation,
shuffling and optimizer as `cargo run --release --example train` and prints the losses of
its first steps and the result. `crates/remat/tests/train.rs` reads this output: remat's
residual lists must be JAX's (up to source locations), and its first losses JAX's.

The functions mirror `examples/train/model.rs` line for line (same names, so the residual
lines name the same functions). Written against JAX 0.10.2.
"""
import contextlib
import gzip
import io
import os
import sys
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals

cp = jax.checkpoint_policies
HERE = os.path.dirname(os.path.abspath(__file__))
PIXELS, CLASSES, HELD_OUT, BATCH, STEPS, SEED = 64, 10, 360, 64, 1500, 0

SHAPES = {
    'conv1_w': (3, 3, 1, 16), 'conv1_b': (16,),
    'conv2_w': (3, 3, 16, 32), 'conv2_b': (32,),
    'dense1_w': (2 * 2 * 32, 64), 'dense1_b': (64,),
    'dense2_w': (64, CLASSES), 'dense2_b': (CLASSES,),
}


def init(key):
    he = jax.nn.initializers.he_normal()
    return {name: he(jax.random.fold_in(key, i), shape, jnp.float32) if name.endswith('_w')
            else jnp.zeros(shape, jnp.float32)
            for i, (name, shape) in enumerate(sorted(SHAPES.items()))}


def conv_block(x, w, b, name):
    y = lax.conv_general_dilated(x, w, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
    h = checkpoint_name(jax.nn.relu(y + b), name)
    return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')


def logits(p, images):
    x = images.reshape(-1, 8, 8, 1) / 16.0
    h = conv_block(x, p['conv1_w'], p['conv1_b'], 'conv1')
    h = conv_block(h, p['conv2_w'], p['conv2_b'], 'conv2')
    h = h.reshape(-1, 2 * 2 * 32)
    h = checkpoint_name(jax.nn.relu(jnp.dot(h, p['dense1_w']) + p['dense1_b']), 'dense1')
    return jnp.dot(h, p['dense2_w']) + p['dense2_b']


def loss(params, images, labels):
    logp = jax.nn.log_softmax(logits(params, images), axis=-1)
    return -jnp.take_along_axis(logp, jnp.expand_dims(labels, -1), axis=-1).mean()


POLICIES = {
    'nothing': cp.nothing_saveable,
    'dots': cp.dots_saveable,
    'names': cp.save_only_these_names('conv1', 'conv2', 'dense1'),
    'everything': cp.everything_saveable,
}

PEAK_LR, WEIGHT_DECAY, CLIP_NORM, B1, B2, EPS = 3e-3, 1e-4, 1.0, 0.9, 0.999, 1e-8
WARMUP = max(STEPS // 20, 1)


def learning_rate(step):
    t = step.astype(jnp.float32)
    ramp = t * (PEAK_LR / WARMUP)
    progress = jnp.clip((t - WARMUP) / max(STEPS - WARMUP, 1), 0.0, 1.0)
    cosine = (jnp.cos(progress * np.pi) + 1.0) * (0.5 * PEAK_LR)
    return jnp.where(t < WARMUP, ramp, cosine)


def clip_by_global_norm(grads, max_norm):
    squares = [jnp.sum(g * g) for g in grads]
    total = squares[0]
    for s in squares[1:]:
        total = total + s
    norm = jnp.sqrt(total)
    scale = jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))
    return [g * scale for g in grads], norm


def train_step(params, mu, nu, images, labels, step, policy):
    value, grads = jax.value_and_grad(jax.checkpoint(loss, policy=policy))(params, images, labels)
    names = sorted(params)
    grads, _ = clip_by_global_norm([grads[n] for n in names], CLIP_NORM)
    lr = learning_rate(step)
    count = step.astype(jnp.float32) + 1.0
    c1, c2 = 1.0 - jnp.exp(count * np.log(B1)), 1.0 - jnp.exp(count * np.log(B2))
    new_p, new_mu, new_nu = {}, {}, {}
    for n, g in zip(names, grads):
        p = params[n]
        m = mu[n] * B1 + g * (1.0 - B1)
        v = nu[n] * B2 + (g * g) * (1.0 - B2)
        update = (m / c1) / (jnp.sqrt(v / c2) + EPS)
        if p.ndim > 1:
            update = update + p * WEIGHT_DECAY
        new_p[n], new_mu[n], new_nu[n] = p - lr * update, m, v
    return new_p, new_mu, new_nu, value


def load():
    with gzip.open(os.path.join(HERE, 'train', 'data', 'digits.csv.gz'), 'rt') as f:
        rows = np.loadtxt(f, delimiter=',', dtype=np.int64)
    return rows[:, :PIXELS].astype(np.float32), rows[:, PIXELS].astype(np.int32)


def permutation(fold, n):
    return np.asarray(jax.random.permutation(jax.random.fold_in(jax.random.PRNGKey(SEED), fold), n))


def main():
    images, labels = load()
    order = permutation(0, len(labels))
    held_x, held_y = images[order[:HELD_OUT]], labels[order[:HELD_OUT]]
    train_x, train_y = images[order[HELD_OUT:]], labels[order[HELD_OUT:]]
    params = init(jax.random.PRNGKey(SEED))

    for name, policy in POLICIES.items():
        print(f'# policy {name}: what the forward pass saves')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_saved_residuals(jax.checkpoint(loss, policy=policy), params,
                                  jnp.asarray(train_x[:BATCH]), jnp.asarray(train_y[:BATCH]))
        # Source locations relative to this directory, as on any checkout.
        print(out.getvalue().replace(HERE + os.sep, ''))

    step_fn = jax.jit(lambda p, m, v, x, y, s: train_step(p, m, v, x, y, s, cp.dots_saveable))
    mu = jax.tree.map(jnp.zeros_like, params)
    nu = jax.tree.map(jnp.zeros_like, params)
    per_epoch = len(train_y) // BATCH
    losses = []
    start = time.perf_counter()
    for step in range(STEPS):
        epoch, i = divmod(step, per_epoch)
        if i == 0:
            perm = permutation(1 + epoch, len(train_y))
        idx = perm[i * BATCH:(i + 1) * BATCH]
        params, mu, nu, value = step_fn(params, mu, nu, train_x[idx], train_y[idx], jnp.int32(step))
        losses.append(float(value))
    elapsed = time.perf_counter() - start
    print('# first losses (batch 64, policy dots)')
    for step, value in enumerate(losses[:5]):
        print(f'step {step}: {value:.7f}')
    logp = jax.nn.log_softmax(logits(params, jnp.asarray(held_x)), axis=-1)
    held_loss = -jnp.take_along_axis(logp, jnp.expand_dims(jnp.asarray(held_y), -1), axis=-1).mean()
    accuracy = (jnp.argmax(logp, -1) == held_y).mean()
    tail = losses[-50:]
    print(f'\n# after {STEPS} steps')
    print(f'training loss {sum(tail) / len(tail):.4f} (mean of the last 50 steps)')
    print(f'held out: loss {float(held_loss):.4f}, accuracy {100 * float(accuracy):.2f}% ({HELD_OUT} images)')
    print(f'({elapsed:.1f} s with jax.jit on this machine)', file=sys.stderr)


if __name__ == '__main__':
    main()
