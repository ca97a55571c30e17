"""Programs recorded from JAX 0.10.2 for the constants a jvp rule makes on the primal side
(`instantiate_zeros`, `lax.full`, `_zeros`): which of them JAX saves as residuals. Under
`linearize` such a constant is a value of the primal trace, so a tangent equation that
reads it saves it; inside a `jit`, `cond` or `scan` it comes back as an output of the
call. Each differentiated part sits in a `jit` so that the saved scalars show up as
`output of jitted function` lines (at the top JAX lists them `from a literal`, which the
test leaves out, as everywhere). The cases also pin where JAX does *not* save one: a rule
JAX traced beforehand (relu's), zeros made on the tangent side (a scan's carry, a
`custom_vjp`'s tangents), a scan body's (hoisted out of the loop as a constant) and a
checkpoint's, also inside a `jit` in it (partially evaluated as a jaxpr, where the
constant is a literal).

    python3 gen_staged_constants.py > staged_constants_cases.json
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src.ad_checkpoint import saved_residuals


def pad_vector(x):
    return lax.pad(x, 0.0, [(1, 2, 0)]) ** 2


def pad_in_jit(x):
    return jnp.sum(jax.jit(pad_vector)(x))


def pad_at_top(x):
    return jnp.sum(pad_vector(x))


def select_scalar(x):
    return jax.jit(lambda x: lax.select_n(x > 0, x, 0.0) * x)(x)


def clamp_scalar(x):
    return jax.jit(lambda x: lax.clamp(0.0, x, 1.0) * x)(x)


def relu_scalar(x):
    return jax.jit(lambda x: jax.nn.relu(x) * x)(x)


def scatter_set_scalar(x):
    return jnp.sum(jax.jit(lambda x: x.at[1].set(3.0) ** 2)(x))


def scatter_add_scalar(x):
    return jnp.sum(jax.jit(lambda x: x.at[1].add(3.0) ** 2)(x))


def dynamic_update_constant(x, u):
    return jnp.sum(jax.jit(lambda x, u: lax.dynamic_update_slice(x, jnp.ones(1), (2,)) * u)(x, u))


def cond_zero_branch(x):
    def f(x):
        return lax.cond(x > 0, lambda x: x * 2.0, lambda x: 1.0, x) * x

    return jax.jit(f)(x)


def scan_scalar_carry(x, xs):
    def f(x, xs):
        return jnp.sum(lax.scan(lambda c, r: (c * r[0] + x, c), 0.5, xs)[1])

    return jax.jit(f)(x, xs)


def scan_body_pad(x, xs):
    def body(c, r):
        return c + jnp.sum(lax.pad(r * c, 0.0, [(1, 1, 0)]) ** 2), c

    return jax.jit(lambda x, xs: jnp.sum(lax.scan(body, x, xs)[1]))(x, xs)


def cumprod_in_jit(x):
    return jnp.sum(jax.jit(jnp.cumprod)(x))


def cummax_in_jit(x):
    return jnp.sum(jax.jit(lambda x: lax.cummax(x, axis=0))(x) ** 2)


def checkpoint_pad(x):
    return jnp.sum(jax.checkpoint(lambda x: lax.pad(jnp.sin(x), 0.0, [(1, 2, 0)]) ** 2)(x))


def checkpoint_pad_everything(x):
    f = jax.checkpoint(
        lambda x: lax.pad(jnp.sin(x), 0.0, [(1, 2, 0)]) ** 2, policy=jax.checkpoint_policies.everything_saveable
    )
    return jnp.sum(f(x))


def jit_pad_in_checkpoint(x):
    f = jax.checkpoint(lambda x: jax.jit(pad_vector)(jnp.sin(x)), policy=jax.checkpoint_policies.everything_saveable)
    return jnp.sum(f(x))


def softplus_scalar(x):
    return jax.jit(lambda x: jax.nn.softplus(x) * x)(x)


x4 = jnp.linspace(-1.0, 1.0, 4)
x5 = jnp.array([0.5, -1.0, 2.0, 1.5, 0.25])
s = jnp.float32(0.3)
XS = jnp.linspace(-0.5, 0.5, 12).reshape(4, 3)
CASES = [
    ("pad_in_jit", pad_in_jit, (x4,), ["x"]),
    ("pad_at_top", pad_at_top, (x4,), ["x"]),
    ("select_scalar", select_scalar, (s,), ["x"]),
    ("clamp_scalar", clamp_scalar, (s,), ["x"]),
    ("relu_scalar", relu_scalar, (s,), ["x"]),
    ("scatter_set_scalar", scatter_set_scalar, (x4,), ["x"]),
    ("scatter_add_scalar", scatter_add_scalar, (x4,), ["x"]),
    ("dynamic_update_constant", dynamic_update_constant, (x4, s), ["x", "u"]),
    ("cond_zero_branch", cond_zero_branch, (s,), ["x"]),
    ("scan_scalar_carry", scan_scalar_carry, (s, XS), ["x", "xs"]),
    ("scan_body_pad", scan_body_pad, (s, XS), ["x", "xs"]),
    ("cumprod_in_jit", cumprod_in_jit, (x5,), ["x"]),
    ("cummax_in_jit", cummax_in_jit, (x5,), ["x"]),
    ("checkpoint_pad", checkpoint_pad, (x4,), ["x"]),
    ("checkpoint_pad_everything", checkpoint_pad_everything, (x4,), ["x"]),
    ("jit_pad_in_checkpoint", jit_pad_in_checkpoint, (x4,), ["x"]),
    ("softplus_scalar", softplus_scalar, (s,), ["x"]),
]


def arr(a):
    a = np.asarray(a)
    return dict(dtype="f32", shape=list(a.shape), data=[float(v) for v in a.reshape(-1)])


out = []
for name, fn, args, arg_names in CASES:
    y, f_vjp = jax.vjp(fn, *args)
    ct = jnp.ones_like(y) * 0.5
    grads = f_vjp(ct)
    res = [
        (a.str_short(short_dtypes=True), desc.split(" from /")[0].split(" from gen")[0])
        for a, desc in saved_residuals(fn, *args)
    ]
    out.append(
        dict(
            name=name,
            jaxpr=str(jax.make_jaxpr(fn)(*args)),
            arg_names=arg_names,
            args=[arr(a) for a in args],
            outputs=[arr(y)],
            cotangents=[arr(ct)],
            grads=[arr(g) for g in grads],
            saved_residuals=[f"{a} {d}" for a, d in res],
        )
    )
print(json.dumps(out, indent=1))
