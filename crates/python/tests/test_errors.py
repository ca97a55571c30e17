"""Bad input to the remat package: every one is a `remat.RematError` (a `ValueError`) whose
message says what is wrong, never a crash of the interpreter nor another exception; a
JAX error while tracing is wrapped; Ctrl-C during remat's native work is not swallowed."""

import os
import signal
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import remat
import models
from helpers import args_of

P = jax.checkpoint_policies


def f(x):
    return jnp.sum(jnp.sin(x) ** 2)


X = jnp.linspace(0.0, 1.0, 6)
OWN_POLICY = lambda prim, *args, **params: prim.name == "sin"  # noqa: E731  (a Python policy)
OFFLOAD = P.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
                                              offload_src="device", offload_dst="pinned_host")


def test_remat_error_is_a_value_error():
    assert issubclass(remat.RematError, ValueError)
    with pytest.raises(ValueError):
        remat.parse_budget("12 parsecs")


# ---- policies ---------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: remat.saved_residuals(f, X, policy=OWN_POLICY),
    lambda: remat.saved_residuals(jax.checkpoint(f, policy=OWN_POLICY), X),
    lambda: remat.print_saved_residuals(f, X, policy=OWN_POLICY),
    lambda: remat.jit(jax.checkpoint(f, policy=OWN_POLICY))(X),
    lambda: remat.value_and_grad(jax.checkpoint(f, policy=OWN_POLICY))(X),
    lambda: remat.explain(jax.checkpoint(f, policy=OWN_POLICY), X),
], ids=["saved_residuals", "checkpointed", "print_saved_residuals", "jit", "value_and_grad", "explain"])
def test_a_python_lambda_policy(call):
    with pytest.raises(remat.RematError, match=r"the checkpoint policy <function .*<lambda>.* is a Python function "
                                               r"of its own: remat cannot see what it saves"):
        call()


@pytest.mark.parametrize("policy", [OWN_POLICY, OFFLOAD], ids=["lambda", "offload"])
def test_a_policy_no_ledger_or_report_side_can_be(policy):
    msg = r"a report or ledger side is one of jax.checkpoint_policies' nothing_saveable, .*save_only_these_names"
    with pytest.raises(remat.RematError, match=msg):
        remat.explain(f, X, policy=policy)
    with pytest.raises(remat.RematError, match=msg):
        remat.report(f, X, policies=[policy])


def test_a_policy_of_names_the_program_lacks():
    with pytest.raises(remat.RematError, match=r"the program has no checkpoint_name 'nope' \(it names no values\)"):
        remat.explain(f, X, policy=P.save_only_these_names("nope"))
    case = models.by_name("transformer_plain")
    with pytest.raises(remat.RematError, match=r"no checkpoint_name 'nope'"):
        remat.report(case.fn, *args_of(case.name), policies=[P.save_only_these_names("attn_out", "nope")])


# ---- arguments ---------------------------------------------------------------------------

NOT_AN_ARRAY = r"an argument leaf is {}, not an array or jax.ShapeDtypeStruct"


@pytest.mark.parametrize("call", [
    lambda g, *a: remat.saved_residuals(g, *a),
    lambda g, *a: remat.print_saved_residuals(g, *a),
    lambda g, *a: remat.explain(g, *a),
    lambda g, *a: remat.report(g, *a),
    lambda g, *a: remat.jit(g)(*a),
    lambda g, *a: remat.value_and_grad(g)(*a),
], ids=["saved_residuals", "print_saved_residuals", "explain", "report", "jit", "value_and_grad"])
@pytest.mark.parametrize("leaf,kind", [("relu", "str"), (b"x", "bytes"), (object(), "object")],
                         ids=["str", "bytes", "object"])
def test_a_leaf_that_is_no_array(call, leaf, kind):
    def g(x, params):
        return f(x)
    with pytest.raises(remat.RematError, match=NOT_AN_ARRAY.format(kind)):
        call(g, X, {"activation": leaf, "w": X})


def test_an_array_with_a_dtype_remat_lacks():
    with pytest.raises(remat.RematError, match=r"expected a dtype \(f32, .*\), found `u16`"):
        remat.jit(lambda a: a * 2)(np.ones(2, np.uint16))


# ---- budgets ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget,msg", [
    ("12 parsecs", r"budget `12 parsecs`: expected a number of bytes with an optional unit \(B, KB, MB, GB, TB, KiB, "
                   r"MiB, GiB, TiB\), such as 64MiB or 1.5GB"),
    ("", r"budget ``: expected a number of bytes"),
    ("12GiBs", r"budget `12GiBs`: expected a number of bytes"),
    ("-5MiB", r"budget `-5MiB`: expected a number of bytes"),
    ("1.5B", r"budget `1.5B`: a count of bytes is a whole number"),
    ("0.5", r"budget `0.5`: a count of bytes is a whole number"),
    ("2.0B", r"budget `2.0B`: a count of bytes is a whole number"),
    (-1, r"budget -1: a number of bytes is not negative"),
    (True, r"budget True: expected bytes, such as 12 \* 2\*\*30 or '12GiB'"),
    (False, r"budget False: expected bytes"),
    (1.5, r"budget 1.5: expected bytes"),
    ([1024], r"budget \[1024\]: expected bytes"),
])
def test_a_bad_budget(budget, msg):
    with pytest.raises(remat.RematError, match=msg):
        remat.parse_budget(budget)
    with pytest.raises(remat.RematError, match=msg):
        remat.explain(f, X, budget=budget)
    with pytest.raises(remat.RematError, match=msg):
        remat.report(f, X, budgets=[budget])


def test_a_fraction_of_a_larger_unit_rounds_down():
    assert remat.parse_budget("1.5KiB") == 1536
    assert remat.parse_budget("0.5KB") == 500
    assert remat.parse_budget("1.1KiB") == 1126


def test_explain_with_both_policy_and_budget():
    with pytest.raises(remat.RematError, match=r"explain: give a policy or a budget, not both"):
        remat.explain(f, X, policy=P.dots_saveable, budget="1KiB")


# ---- value_and_grad ---------------------------------------------------------------------


def weighted(w, n):
    return jnp.sum(w * n)


W, N = jnp.ones(3), jnp.arange(3)


def test_value_and_grad_of_an_int_argument():
    with pytest.raises(remat.RematError, match=r"value_and_grad: argument leaf n is int32; gradients are taken of "
                                               r"float inputs"):
        remat.value_and_grad(weighted, 1)(W, N)
    with pytest.raises(remat.RematError, match=r"argument leaf n is int32"):
        remat.value_and_grad(weighted, (0, 1))(W, N)


def test_value_and_grad_of_an_int_leaf_in_a_pytree():
    def g(params):
        return jnp.sum(params["w"] * params["steps"])
    with pytest.raises(remat.RematError, match=r"argument leaf params\['steps'\] is int32"):
        remat.value_and_grad(g)({"w": W, "steps": N})


@pytest.mark.parametrize("argnums,msg", [
    (2, r"argnums 2: 2 is not the index of one of the 2 arguments"),
    (-3, r"argnums -3: -3 is not the index of one of the 2 arguments"),
    ((0, 5), r"argnums \(0, 5\): 5 is not the index of one of the 2 arguments"),
    (True, r"argnums True: True is not the index of one of the 2 arguments"),
    ("0", r"argnums '0': '0' is not the index"),
    ((0, 0), r"argnums \(0, 0\) names an argument twice"),
    ((0, -2), r"argnums \(0, -2\) names an argument twice"),
])
def test_value_and_grad_with_bad_argnums(argnums, msg):
    with pytest.raises(remat.RematError, match=msg):
        remat.value_and_grad(weighted, argnums)(W, N)


@pytest.mark.parametrize("g,msg", [
    (lambda w: w * 2, r"grad requires a real scalar output, got f32\[3\]"),
    (lambda w: jnp.sum(w).astype(jnp.int32), r"grad requires a real scalar output, got i32\[\]"),
])
def test_value_and_grad_of_no_scalar_loss(g, msg):
    with pytest.raises(remat.RematError, match=msg):
        remat.value_and_grad(g)(W)


@pytest.mark.parametrize("call", [
    lambda: remat.jit(f, backend="gpu")(X),
    lambda: remat.value_and_grad(f, backend="gpu")(X),
], ids=["jit", "value_and_grad"])
def test_an_unknown_backend(call):
    with pytest.raises(remat.RematError, match=r"unknown backend `gpu`: jit or interp"):
        call()


# ---- functions JAX cannot trace or differentiate ----------------------------------------


def boom(x):
    raise RuntimeError("boom inside the model")


@pytest.mark.parametrize("call", [
    lambda g: remat.saved_residuals(g, X),
    lambda g: remat.explain(g, X),
    lambda g: remat.report(g, X),
    lambda g: remat.jit(g)(X),
    lambda g: remat.value_and_grad(g)(X),
], ids=["saved_residuals", "explain", "report", "jit", "value_and_grad"])
def test_a_function_that_raises_is_wrapped(call):
    with pytest.raises(remat.RematError, match=r"JAX could not trace the function: RuntimeError: boom inside the model") as e:
        call(boom)
    assert isinstance(e.value.__cause__, RuntimeError)


def test_a_jax_error_while_tracing_is_wrapped():
    with pytest.raises(remat.RematError, match=r"JAX could not trace the function: TypeError: dot_general requires "
                                               r"contracting dimensions to have the same shape") as e:
        remat.jit(lambda a: a @ a)(jnp.ones((2, 3)))
    assert isinstance(e.value.__cause__, TypeError)
    with pytest.raises(remat.RematError, match=r"JAX could not trace the function: TracerBoolConversionError"):
        remat.saved_residuals(lambda a: a if a.sum() > 0 else -a, X)
    with pytest.raises(remat.RematError, match=r"JAX could not trace the function: TypeError: .*callable"):
        remat.saved_residuals(3, X)


def test_the_gradient_of_a_while_loop():
    """The zoo's forward-only program: JAX's reverse mode refuses a while_loop with a
    data-dependent trip count, and so does remat, in JAX's words."""
    case = models.by_name("control_flow_while")
    args = args_of(case.name)
    loss = lambda a, x0: jnp.sum(case.fn(a, x0)[0])  # noqa: E731
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        jax.grad(loss)(*args)
    msg = r"Reverse-mode differentiation does not work for lax.while_loop"
    with pytest.raises(remat.RematError, match=msg):
        remat.saved_residuals(case.fn, *args)
    with pytest.raises(remat.RematError, match=msg):
        remat.value_and_grad(loss)(*args)


# ---- the report -------------------------------------------------------------------------


def test_report_with_an_unknown_figure():
    with pytest.raises(remat.RematError, match=r"unknown figure `pie`: memory, split or frontier"):
        remat.report(f, X, figure="pie")


def test_report_split_of_two_sides():
    with pytest.raises(remat.RematError, match=r"the split figure draws one side, and 2 are given: give at most one "
                                               r"policy or budget"):
        remat.report(f, X, figure="split", policies=[P.dots_saveable], budgets=["1KiB"])


def test_report_with_a_title_that_is_no_str():
    with pytest.raises(remat.RematError, match=r"report: the title is a str, not int"):
        remat.report(f, X, title=3)


def test_report_with_more_than_six_sides():
    with pytest.raises(remat.RematError, match=r"report: 7 sides \(the function as written, 3 policies and 3 "
                                               r"budgets\); a report compares at most 6"):
        remat.report(f, X, policies=[P.dots_saveable, P.nothing_saveable, P.everything_saveable],
                     budgets=[1000, 2000, 3000])
    assert remat.report(f, X, policies=[P.dots_saveable, P.nothing_saveable],
                        budgets=[1000, 2000, 3000])._repr_html_().startswith("<!DOCTYPE html>")


# ---- Ctrl-C -----------------------------------------------------------------------------


def test_keyboard_interrupt_stops_the_wait():
    """SIGINT while remat's native code works (the realistic-size transformer's frontier,
    seconds of work after a trace of milliseconds) raises KeyboardInterrupt at once: it is
    neither swallowed nor held until the work ends."""
    case = models.by_name("transformer_plain")
    structs = jax.eval_shape(case.full_args)
    # Once to warm the caches (a first call can take several times a later one's time),
    # then once timed: the interrupt comes a tenth of the way into a call like it.
    remat.report(case.fn, *structs, figure="frontier")
    start = time.perf_counter()
    remat.report(case.fn, *structs, figure="frontier")
    whole = time.perf_counter() - start
    assert whole > 0.5, "the work is long enough to interrupt"

    timer = threading.Timer(whole / 10, os.kill, (os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            remat.report(case.fn, *structs, figure="frontier")
    finally:
        timer.cancel()
    assert time.perf_counter() - start < whole / 2
