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
}, indent=1))
