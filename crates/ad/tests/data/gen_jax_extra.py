"""More programs recorded from JAX 0.10.2, beyond the shared conformance set: nested
checkpoints, jit and scan under checkpoints, scans at the top of a vjp. For each, the
jaxpr JAX prints, inputs, cotangents, gradients and `saved_residuals`.

    python3 gen_jax_extra.py > jax_extra_cases.json
"""
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.ad_checkpoint import saved_residuals
from jax.ad_checkpoint import checkpoint_name

P = jax.checkpoint_policies


def inner(x):
    return jnp.sin(jnp.sin(x))


def outer_default_inner(x):
    return jnp.cos(jax.checkpoint(inner)(x) * 2.0)


def outer_every_inner(x):
    return jnp.cos(jax.checkpoint(inner, policy=P.everything_saveable)(x) * 2.0)


def tw(w, x):
    return jnp.tanh(w @ x)


def jitted(w, x):
    return jnp.sum(jax.jit(tw)(w, x))


def scanned(w, xs):
    def body(c, x):
        return jnp.sin(c * w) + x, jnp.cos(c)

    c, ys = jax.lax.scan(body, jnp.zeros(3), xs)
    return jnp.sum(c) + jnp.sum(ys)


def scanned_reverse(w, xs):
    def body(c, x):
        return jnp.tanh(c * w + x), c * x

    c, ys = jax.lax.scan(body, jnp.ones(3), xs, reverse=True)
    return jnp.sum(c) + jnp.sum(ys ** 2)


def scanned_named(w, xs):
    def body(c, x):
        h = checkpoint_name(jnp.sin(w @ c), "h")
        return jnp.cos(h) + x, h

    body = jax.checkpoint(body, policy=P.save_only_these_names("h"))
    c, ys = jax.lax.scan(body, jnp.ones(3), xs)
    return jnp.sum(c * ys[-1])


def remat_in_jit(w, x):
    def g(w, x):
        return jnp.sum(jax.checkpoint(tw, policy=P.dots_saveable)(w, x) ** 2)

    return jax.jit(g)(w, x)


def no_cse(x):
    return jnp.sum(jax.checkpoint(inner, prevent_cse=False)(x) ** 2)


def both_names_dots(w, x):
    a = checkpoint_name(jnp.sin(w @ x), "a")
    b = checkpoint_name(jnp.cos(w @ a), "b")
    return jnp.sum(a * b)


def relu_top(x, w):
    # A row of zeros in x puts relu at exactly 0, where its custom rule's derivative is 0.
    return jnp.sum(jax.nn.relu(x @ w) * 3.0)


X_RELU = jnp.array([[0.5, 1.0, 0.25], [0.0, 0.0, 0.0]])
x3 = jnp.linspace(-1.0, 1.0, 3)
W = jnp.arange(9.0).reshape(3, 3) / 10.0
XS = jnp.linspace(-0.5, 0.5, 12).reshape(4, 3)
CASES = [
    ("outer_every_inner_default", jax.checkpoint(outer_default_inner, policy=P.everything_saveable), (x3,), ["x"]),
    ("outer_nothing_inner_every", jax.checkpoint(outer_every_inner), (x3,), ["x"]),
    ("outer_dots_inner_every", jax.checkpoint(outer_every_inner, policy=P.dots_saveable), (x3,), ["x"]),
    ("jit_in_checkpoint_dots", jax.checkpoint(jitted, policy=P.dots_saveable), (W, x3), ["w", "x"]),
    ("jit_in_checkpoint_everything", jax.checkpoint(jitted, policy=P.everything_saveable), (W, x3), ["w", "x"]),
    ("jit_top", jitted, (W, x3), ["w", "x"]),
    ("scan_in_checkpoint_everything", jax.checkpoint(scanned, policy=P.everything_saveable), (x3, XS), ["w", "xs"]),
    ("scan_in_checkpoint_default", jax.checkpoint(scanned), (x3, XS), ["w", "xs"]),
    ("scan_top", scanned, (x3, XS), ["w", "xs"]),
    ("scan_reverse_top", scanned_reverse, (x3, XS), ["w", "xs"]),
    ("scan_of_checkpoint_names", scanned_named, (W, XS), ["w", "xs"]),
    ("remat_in_jit", remat_in_jit, (W, x3), ["w", "x"]),
    ("prevent_cse_false", no_cse, (x3,), ["x"]),
    ("relu_top", relu_top, (X_RELU, jnp.arange(9.0).reshape(3, 3) / 10.0 - 0.35), ["x", "w"]),
    (
        "save_from_both_names_dots_top",
        jax.checkpoint(both_names_dots, policy=P.save_from_both_policies(P.save_only_these_names("b"), P.dots_saveable)),
        (W, x3),
        ["w", "x"],
    ),
    # Factories JAX prints as closures without their arguments, whose arguments cannot change
    # what they save on CPU: kept as JAX prints them, and known to remat by the factory's name.
    (
        "save_anything_except_names_top",
        jax.checkpoint(both_names_dots, policy=P.save_anything_except_these_names("b")),
        (W, x3),
        ["w", "x"],
    ),
    (
        "offload_dot_no_batch_top",
        jax.checkpoint(both_names_dots, policy=P.offload_dot_with_no_batch_dims("device", "pinned_host")),
        (W, x3),
        ["w", "x"],
    ),
]


# JAX prints a function-valued policy as `<function ...>`; the ones built by a function
# call are restated as data with the same meaning (as the shared conformance set does).
RESTATE = {
    "save_from_both_policies": "SaveFromBothPolicies(policy_1=SaveOnlyTheseNames(saveable_names=frozenset({'b'})), "
    "policy_2=DotsSaveable(only_if_no_batch_dims=False))",
}


def restate(text):
    for fn, data in RESTATE.items():
        text = re.sub(r"<function " + fn + r"\.<locals>\.policy at 0x[0-9a-fA-FX]+>", data, text)
    return text


def arr(a):
    a = np.asarray(a)
    return dict(dtype="f32", shape=list(a.shape), data=[float(v) for v in a.reshape(-1)])


out = []
for name, fn, args, arg_names in CASES:
    y, f_vjp = jax.vjp(fn, *args)
    ct = jnp.ones_like(y) * 0.5
    grads = f_vjp(ct)
    res = [(a.str_short(short_dtypes=True), s.split(" from /")[0].split(" from gen")[0]) for a, s in saved_residuals(fn, *args)]
    out.append(
        dict(
            name=name,
            jaxpr=restate(str(jax.make_jaxpr(fn)(*args))),
            arg_names=arg_names,
            args=[arr(a) for a in args],
            outputs=[arr(y)],
            cotangents=[arr(ct)],
            grads=[arr(g) for g in grads],
            saved_residuals=[f"{a} {s}" for a, s in res],
        )
    )
print(json.dumps(out, indent=1))
