"""A custom_jvp or custom_vjp function's rules, which JAX's text names only by their Python
functions' names: the package traces them in process at each call's operand types, so
remat differentiates the call with the user's rule, as JAX does, and refuses (with the
reason) what it cannot take."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import remat
from helpers import jax_residuals

X = np.linspace(-1.0, 1.0, 8, dtype=np.float32)


@jax.custom_jvp
def tripled(x):
    return jnp.sin(x)


@tripled.defjvp
def _tripled_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return tripled(x), 3.0 * t * jnp.cos(x)  # three times the body's derivative


@jax.custom_vjp
def halved(x):
    return jnp.tanh(x)


def _halved_fwd(x):
    y = jnp.tanh(x)
    return y, (y,)


def _halved_bwd(res, g):
    (y,) = res
    return (0.5 * g * (1.0 - y * y),)  # half the body's derivative


halved.defvjp(_halved_fwd, _halved_bwd)


def test_a_custom_jvp_rule_not_the_bodys_derivative_gives_jaxs_gradient():
    def f(x):
        return jnp.sum(tripled(x) ** 2)

    value, grad = remat.value_and_grad(f)(X)
    want_value, want_grad = jax.value_and_grad(f)(X)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
    # the rule is what differs from the body's derivative
    np.testing.assert_allclose(grad, 3.0 * jax.grad(lambda x: jnp.sum(jnp.sin(x) ** 2))(X), rtol=1e-5, atol=1e-6)


def test_a_custom_vjp_rule_not_the_bodys_derivative_gives_jaxs_gradient():
    def f(w, x):
        return jnp.sum(halved(x * w) ** 2)

    w = np.float32(0.7)
    value, grads = remat.value_and_grad(f, argnums=(0, 1))(w, X)
    want_value, want_grads = jax.value_and_grad(f, argnums=(0, 1))(w, X)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[1], 0.5 * jax.grad(lambda x: jnp.sum(jnp.tanh(x * w) ** 2))(X), rtol=1e-5)


def test_rules_inside_a_scan_are_traced_at_the_bodys_types():
    def f(xs):
        def body(c, x):
            return c + tripled(x) * halved(x), None

        c, _ = lax.scan(body, jnp.zeros(4, jnp.float32), xs)
        return jnp.sum(c ** 2)

    xs = X.reshape(2, 4)
    _, grad = remat.value_and_grad(f)(xs)
    np.testing.assert_allclose(grad, jax.grad(f)(xs), rtol=1e-5, atol=1e-6)


def test_the_residuals_are_the_rules():
    """The rule's values are what the vjp saves, in JAX's words (`output of custom_jvp_call`,
    the rule's own `cos`), not what differentiating the body would save."""

    def f(x):
        return jnp.sum(tripled(x) * halved(x))

    got = [(r.aval, r.description) for r in remat.saved_residuals(f, X)]
    assert got == [(a, d) for a, d, _ in jax_residuals(f, X)]
    assert any("custom_jvp_call" in d for _, d in got)


def _named(k):
    @jax.custom_jvp
    def scaled(x):
        return jnp.sin(x)

    @scaled.defjvp
    def scaled_jvp(primals, tangents):
        return scaled(primals[0]), k * tangents[0]

    return scaled


def test_two_different_rules_under_one_name_are_refused_when_differentiated():
    a, b = _named(2.0), _named(3.0)

    def f(x):
        return jnp.sum(a(x) + b(x))

    with pytest.raises(remat.RematError, match="give the rule functions distinct names"):
        remat.value_and_grad(f)(X)
    # the forward pass needs no rule
    np.testing.assert_allclose(remat.jit(f)(X), jax.jit(f)(X), rtol=1e-6)


def test_the_same_rule_twice_is_one_rule():
    a = _named(2.0)

    def f(x):
        return jnp.sum(a(x) * a(2.0 * x))

    _, grad = remat.value_and_grad(f)(X)
    np.testing.assert_allclose(grad, jax.grad(f)(X), rtol=1e-5, atol=1e-6)


def test_a_function_redefined_with_another_rule_takes_the_new_rule():
    """As when a notebook cell is run again: the rule traced last is the function's."""
    for k in (2.0, 5.0):
        g = _named(k)

        def f(x):
            return jnp.sum(g(x))

        _, grad = remat.value_and_grad(f)(X)
        np.testing.assert_allclose(grad, np.full_like(X, k))


def test_a_rule_over_an_integer_operand_is_refused_with_the_reason():
    @jax.custom_jvp
    def shifted(x, n):
        return x + n

    @shifted.defjvp
    def shifted_jvp(primals, tangents):
        return shifted(*primals), tangents[0]

    def f(x):
        return jnp.sum(shifted(x, jnp.int32(2)))

    with pytest.raises(remat.RematError, match=r"an operand is i32\[\]: remat takes custom rules over floating-point"):
        remat.value_and_grad(f)(X)


def test_a_rule_capturing_a_constant_array_is_refused_with_the_reason():
    weights = np.arange(8, dtype=np.float32)

    @jax.custom_jvp
    def weighted(x):
        return x * 2.0

    @weighted.defjvp
    def weighted_jvp(primals, tangents):
        return weighted(primals[0]), tangents[0] * weights

    def f(x):
        return jnp.sum(weighted(x))

    with pytest.raises(remat.RematError, match="constant arrays it captures from Python"):
        remat.value_and_grad(f)(X)


def _checkpointed_relu():
    def f(x):
        return jnp.sum(jax.nn.relu(x) * jnp.sin(x))

    return jax.checkpoint(f, policy=jax.checkpoint_policies.everything_saveable)


def test_jaxs_own_later_traces_are_as_without_remat():
    """Tracing a rule runs JAX's memoized thunk of an equation that JAX's cached
    checkpoint body shares: JAX's own residuals of the function afterwards are those of
    a twin function remat never saw (their sources included)."""
    seen, unseen = _checkpointed_relu(), _checkpointed_relu()
    remat.saved_residuals(seen, X)
    assert jax_residuals(seen, X) == jax_residuals(unseen, X)
