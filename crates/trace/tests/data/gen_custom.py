"""Records JAX 0.10.2's text, saved residuals and gradients of `jax.custom_jvp` functions
for crates/remat/tests/custom_rules.rs (which writes the same functions in Rust).

Run: python3 crates/trace/tests/data/gen_custom.py > crates/trace/tests/data/custom_oracle.json
"""
import io
import json
from contextlib import redirect_stdout

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals


@jax.custom_jvp
def f(x, y):
    return jnp.sin(x) * y


@f.defjvp
def f_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    c = jnp.cos(x)
    return f(x, y), c * y * tx + jnp.sin(x) * ty


def sin_mul(x, y):
    return f(x, y).sum()


@jax.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.log1p(jnp.exp(x)), t / (jnp.exp(-x) + 1.0)


def softplus_times_x(x):
    return (softplus(x) * x).sum()


@jax.custom_jvp
def half_gradient(x):
    return x


@half_gradient.defjvp
def half_gradient_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return x, t * 0.5


def halved(x):
    return (jnp.sin(half_gradient(x * 3.0)) * x).sum()


@jax.custom_vjp
def clip_mul(x, y):
    return jnp.sin(x) * y


def clip_mul_fwd(x, y):
    return clip_mul(x, y), (jnp.cos(x), y, jnp.sin(x))


def clip_mul_bwd(res, g):
    c, y, s = res
    return (jnp.clip(c * y * g, -0.5, 0.5), s * g)


clip_mul.defvjp(clip_mul_fwd, clip_mul_bwd)


def clipped_sin_mul(x, y):
    return clip_mul(x, y).sum()


@jax.custom_vjp
def clip_gradient(x):
    return x


def clip_gradient_fwd(x):
    return x, ()


def clip_gradient_bwd(res, g):
    return (jnp.clip(g, -0.5, 0.5),)


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def clipped(x):
    return jnp.sin(clip_gradient(jnp.sin(x) * x)).sum()


def case(fun, args):
    text = str(jax.make_jaxpr(fun)(*args))
    buf = io.StringIO()
    with redirect_stdout(buf):
        print_saved_residuals(fun, *args)
    grads = jax.grad(fun, argnums=tuple(range(len(args))))(*args)
    return {
        "jaxpr": text,
        "residuals": buf.getvalue().splitlines(),
        "args": [a.tolist() for a in args],
        "grads": [g.tolist() for g in grads],
    }


x = jnp.array([0.3, -1.2, 2.0], jnp.float32)
y = jnp.array([1.5, 0.25, -0.7], jnp.float32)
print(json.dumps({
    "sin_mul": case(sin_mul, (x, y)),
    "softplus_times_x": case(softplus_times_x, (x,)),
    "halved": case(halved, (x,)),
    "clipped_sin_mul": case(clipped_sin_mul, (x, y)),
    "clipped": case(clipped, (x,)),
}, indent=1))
