"""`remat.plan` and `Plan.apply` against JAX 0.10.2, on every differentiable zoo and
benchmark program and on a few small functions (an MLP, a scanned RNN, nested scans,
`checkpoint_name`s, a `custom_vjp`), at budgets across each program's frontier (its
smallest peak, its largest, which saves everything, and two between):

- the plan's numbers hold together: its peak fits the budget, its saved bytes are the sum
  of its lines (the arguments' aside);
- JAX saves what `plan.saved` says: `jax.ad_checkpoint.saved_residuals(plan.apply(f),
  *args)` and `plan.saved` are the same multiset of `(aval, description)` lines (JAX's
  `from a literal` lines aside, as in the residual tests: `jax_lines`; the plan may list scalar
  `convert_element_type`s of literals that JAX folds: `folded_by_jax`);
- `jax.jit(jax.value_and_grad(plan.apply(f)))` gives `jax.value_and_grad(f)`'s value and
  gradients (the zoo's tolerances, `helpers.assert_tree_close`);
- `jax.vmap` of `plan.apply(f)` (and of its gradient) gives `jax.vmap(f)`'s;
- every kind of plan is made and applied: a built-in policy, a names policy (over the
  planner's names and, `names_only=True`, over the program's own), checkpointed segments,
  and plans of programs with scans (nested too);
- bad budgets are `RematError`s that say what is wrong;
- `plan.xla_memory()` is XLA's own memory analysis of the applied plan.
"""

from __future__ import annotations

import collections
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import models
import remat
from helpers import args_of, assert_tree_close, jax_saved_residuals, reduced_precision
from models.common import Case, rnd
from remat._plan import _diff_leaves
from remat._trace import trace

# ---- small functions ----------------------------------------------------------------------


def mlp(params, x):
    h = x
    for w, b in params:
        h = jnp.tanh(h @ w + b)
    return jnp.mean(h * h)


def rnn(params, xs, h0):
    """An Elman RNN scanned over time with `lax.scan`."""
    W, U = params

    def step(h, x):
        h = jnp.tanh(h @ W + x @ U)
        return h, jnp.sum(h * h)

    h, ys = lax.scan(step, h0, xs)
    return jnp.sum(ys) + jnp.sum(jnp.sin(h))


def nested_scans(w, xs):
    """A scan whose body scans again (and calls a jitted function)."""

    @jax.jit
    def cell(h, x):
        return jnp.tanh(h * w + x)

    def inner(h, x):
        h = cell(h, x)
        return h, h

    def outer(h, row):
        h, hs = lax.scan(inner, h, row)
        return h, jnp.sum(hs * hs)

    h, sums = lax.scan(outer, jnp.zeros(xs.shape[-1]), xs)
    return jnp.sum(sums) + jnp.sum(h)


def named(w1, w2, x):
    """Three layers, two of them named with `checkpoint_name`."""
    h1 = checkpoint_name(jnp.sin(x @ w1), "h1")
    h2 = checkpoint_name(jnp.tanh(h1 @ w2), "h2")
    return jnp.sum(jnp.cos(h2 @ w2.T) ** 2)


@jax.custom_vjp
def _scale_grad(x):
    return x


def _scale_grad_fwd(x):
    return x, None


def _scale_grad_bwd(_, g):
    return (0.5 * g,)


_scale_grad.defvjp(_scale_grad_fwd, _scale_grad_bwd)


def with_custom_vjp(w1, w2, x):
    """An MLP whose hidden layer's cotangent a `custom_vjp` halves."""
    h = _scale_grad(jnp.tanh(x @ w1))
    return jnp.sum(jnp.sin(h @ w2) ** 2)


@jax.jit
def _affine(x, w, scale):
    return jnp.sin(x @ w) * scale


def jit_literal(w1, w2, x):
    """Jitted layers called with Python scalars: the `jit` equations' literal operands,
    which the planner substitutes into the inlined bodies."""
    h = _affine(x, w1, 2.0)
    h = _affine(jnp.tanh(h), w2, 0.5)
    h = _affine(h * h, w2, 3.0)
    return jnp.sum(jnp.cos(h))


SMALL = [
    Case("small_mlp", mlp, lambda: [[(rnd(8, 16), rnd(16)), (rnd(16, 16), rnd(16)), (rnd(16, 4), rnd(4))], rnd(4, 8)],
         "test_plan.py", loss=mlp),
    Case("small_rnn", rnn, lambda: [(rnd(8, 8, scale=0.3), rnd(4, 8, scale=0.3)), rnd(6, 2, 4), rnd(2, 8)],
         "test_plan.py", loss=rnn),
    Case("small_nested_scans", nested_scans, lambda: [rnd(4), rnd(3, 5, 4)], "test_plan.py", loss=nested_scans),
    Case("small_named", named, lambda: [rnd(8, 8, scale=0.5), rnd(8, 8, scale=0.5), rnd(4, 8)], "test_plan.py",
         loss=named),
    Case("small_jit_literal", jit_literal, lambda: [rnd(8, 8, scale=0.5), rnd(8, 8, scale=0.5), rnd(4, 8)],
         "test_plan.py", loss=jit_literal),
    Case("small_custom_vjp", with_custom_vjp, lambda: [rnd(8, 8, scale=0.5), rnd(8, 4), rnd(4, 8)], "test_plan.py",
         loss=with_custom_vjp),
]
SMALL_BY_NAME = {c.name: c for c in SMALL}


def case_of(name: str) -> Case:
    return SMALL_BY_NAME[name] if name in SMALL_BY_NAME else models.by_name(name)


@functools.lru_cache(maxsize=None)
def arguments(name: str):
    return args_of(name) if name not in SMALL_BY_NAME else SMALL_BY_NAME[name].make_args()


# Every program with a scalar loss to differentiate, and the small functions.
PROGRAMS = [c.name for c in models.ALL if c.loss is not None] + [c.name for c in SMALL]
# The programs with `checkpoint_name`s of their own (for `names_only=True`).
# (scan_of_blocks_offload names values inside its scan's body only, which the names-only
# planner does not see: "the program names none".)
NAMED = ["small_named", "gpt_block", "transformer_names"]

# ---- budgets across the frontier --------------------------------------------------------


@functools.lru_cache(maxsize=None)
def planned(name: str, names_only: bool = False):
    """The program traced and its plans evaluated once, as `remat.plan` does it
    (`remat._plan.plan`'s steps), for the tests to ask for several budgets: `(traced,
    planner, auto names, diff)`."""
    case, args = case_of(name), arguments(name)
    t = trace(case.loss, args)
    t.function = case.loss
    diff = _diff_leaves(t, None)
    planner = t.program.planner(argnums=diff, names_only=names_only, applicable=not names_only)
    return t, planner, planner.auto_names(), diff


@functools.lru_cache(maxsize=None)
def frontier_budgets(name: str, names_only: bool = False) -> tuple:
    """Budgets across the program's frontier: the smallest peak (the least memory any
    plan reaches), the largest (the plan that recomputes nothing), and the peaks at a
    third and two thirds of the way along the frontier's distinct peaks."""
    peaks = sorted({p["peak_bytes"] for p in planned(name, names_only)[1].frontier()})
    picks = {0, len(peaks) // 3, (2 * len(peaks)) // 3, len(peaks) - 1}
    return tuple(peaks[i] for i in sorted(picks))


@functools.lru_cache(maxsize=None)
def plan_of(name: str, budget: int, names_only: bool = False) -> remat.Plan:
    """The plan for `budget`: `remat.plan`'s for the middle budget of the frontier (the
    public call, checked against the planner's below), the planner's for the others."""
    case, args = case_of(name), arguments(name)
    budgets = frontier_budgets(name, names_only)
    if budget == budgets[len(budgets) // 2]:
        return remat.plan(case.loss, *args, budget=budget, names_only=names_only)
    t, planner, auto, diff = planned(name, names_only)
    return remat.Plan(planner.plan(budget), t, auto, args, diff)


def plans_of(name: str, names_only: bool = False) -> list:
    return [plan_of(name, b, names_only) for b in frontier_budgets(name, names_only)]


def kind(plan: remat.Plan) -> str:
    """`segments`, `names` or `builtin`: how `apply` puts the plan on the function."""
    if plan.segments:
        return "segments"
    if plan._p.get("names") is not None:
        return "names"
    return "builtin"


# ---- what JAX saves ----------------------------------------------------------------------


def jax_lines(f, args) -> collections.Counter:
    """JAX's `saved_residuals(f, *args)` as a multiset of `(aval, description)` lines (the
    known half of a scan inside a checkpoint is `output of closed_call` in both). JAX's
    `from a literal` lines are left out."""
    return collections.Counter(
        (a.str_short(short_dtypes=True), d) for a, d in jax_saved_residuals(f, *args) if d != "from a literal")


def plan_lines(plan: remat.Plan) -> collections.Counter:
    return collections.Counter((r.aval, r.description) for r in plan.saved)


def folded_by_jax(aval: str, description: str) -> bool:
    """A line of the plan JAX does not save: a scalar `convert_element_type` of a literal.
    The planner inlines a `jit` called with a Python scalar with the literal in its body
    (`remat_ad::flatten_calls`), and `apply` binds the body's equations the same way, so
    the `convert_element_type` reads a constant, which JAX folds while tracing
    (`pe.const_fold_rules`) into a literal; the planner counts its value as saved (4
    bytes). Where the value crosses a checkpoint, JAX lists it `from a literal`."""
    return aval.endswith("[]") and description.startswith("output of convert_element_type from ")


def assert_saves(f, args, plan: remat.Plan, what: str = "") -> None:
    """JAX's saved residuals of `f` are `plan.saved`, line for line (`jax_lines`), but for
    the scalar `convert_element_type`s of literals JAX folds (`folded_by_jax`): each line
    only the plan has must be one, and JAX's `from a literal` lines are left out, as in
    the residual tests (`helpers.jax_residuals`)."""
    got = jax_lines(f, args)
    want = plan_lines(plan)
    only_plan = [k for k in (want - got).elements() if not folded_by_jax(*k)]
    assert not (got - want) and not only_plan, (
        f"{what} {plan!r}: JAX saves but the plan does not say {sorted((got - want).elements())}; "
        f"the plan says but JAX does not save {sorted((want - got).elements())}")


# ---- the plan's numbers ------------------------------------------------------------------


@pytest.mark.parametrize("name", PROGRAMS)
def test_plan_numbers(name):
    budgets = frontier_budgets(name)
    plans = plans_of(name)
    for budget, plan in zip(budgets, plans):
        assert plan.budget == budget
        assert plan.peak_bytes <= budget, f"{name} at {budget}: peak {plan.peak_bytes}"
        assert plan.recompute_flops >= 0
        # the bytes saved beyond the arguments: the sum of the other lines
        assert plan.residual_bytes == sum(r.bytes for r in plan.saved if r.kind != "argument")
        assert plan.saved.total_bytes == sum(r.bytes for r in plan.saved)
        for r in plan.saved:
            assert r.line == f"{r.aval} {r.description}"
        assert plan.policy_call
        assert repr(plan).startswith("<remat.Plan peak=")
        assert f"({len(plan.saved)}):" in str(plan)
    # the smallest budget gets the smallest peak, and a budget that fits every plan the
    # plan that recomputes least
    assert plans[0].peak_bytes == budgets[0]
    assert plans[-1].recompute_flops == min(p.recompute_flops for p in plans)
    flops = [p.recompute_flops for p in plans]
    assert flops == sorted(flops, reverse=True), f"{name}: more budget, more recomputation: {flops}"
    # `remat.plan` plans as the planner the tests ask
    middle = budgets[len(budgets) // 2]
    t, planner, auto, diff = planned(name)
    assert plan_of(name, middle)._p == planner.plan(middle)


# ---- JAX saves what the plan says ------------------------------------------------------------


@pytest.mark.parametrize("name", PROGRAMS)
def test_jax_saves_what_the_plan_says(name):
    case, args = case_of(name), arguments(name)
    compared = 0
    for plan in plans_of(name):
        assert_saves(plan.apply(case.loss), args, plan, name)
        compared += 1
    assert compared > 0


# ---- the applied plan computes f ----------------------------------------------------------


@functools.lru_cache(maxsize=None)
def reference_value_and_grad(name: str):
    case, args = case_of(name), arguments(name)
    argnums = models.float_argnums(args)
    return argnums, jax.jit(jax.value_and_grad(case.loss, argnums))(*args)


@pytest.mark.parametrize("name", PROGRAMS)
def test_applied_plan_value_and_grad(name):
    case, args = case_of(name), arguments(name)
    argnums, want = reference_value_and_grad(name)
    loose = reduced_precision(case.loss, args)
    for plan in plans_of(name):
        got = jax.jit(jax.value_and_grad(plan.apply(case.loss), argnums))(*args)
        assert_tree_close(got, want, loose=loose)


def _batched(args):
    """Two examples of `args` along a new leading axis (the floats of the second scaled)."""

    def two(x):
        x = jnp.asarray(x)
        y = x * 0.75 if jnp.issubdtype(x.dtype, jnp.inexact) else x
        return jnp.stack([x, y])

    return jax.tree_util.tree_map(two, args)


@pytest.mark.parametrize("name", PROGRAMS)
def test_applied_plan_vmaps(name):
    """`jax.vmap` of the applied plan, and of its gradient, as `jax.vmap` of `f`: the same
    values, or (where JAX cannot vmap `f`) the same kind of error."""
    case, args = case_of(name), arguments(name)
    batched = _batched(args)
    argnums = models.float_argnums(args)
    loose = reduced_precision(case.loss, args)
    plan = plans_of(name)[len(frontier_budgets(name)) // 2]
    applied = plan.apply(case.loss)
    for transform in (lambda g: g, lambda g: jax.value_and_grad(g, argnums)):
        try:
            want = jax.jit(jax.vmap(transform(case.loss)))(*batched)
        except Exception as e:  # JAX cannot vmap f: nor the applied plan
            with pytest.raises(type(e)):
                jax.jit(jax.vmap(transform(applied)))(*batched)
            continue
        got = jax.jit(jax.vmap(transform(applied)))(*batched)
        assert_tree_close(got, want, loose=loose)


# ---- every kind of plan -----------------------------------------------------------------------


def test_every_kind_of_plan_is_made():
    """Across the programs' frontiers the planner makes built-in policies, names policies
    and checkpointed segments (the tests above apply each); and programs with scans get
    plans that recompute (inside the scan's body: the body of scan_of_blocks_offload is a
    checkpoint of its own; scan_long_nothing's smallest plan is a names policy)."""
    kinds = collections.Counter(kind(p) for name in PROGRAMS for p in plans_of(name))
    assert kinds["builtin"] > 0 and kinds["names"] > 0 and kinds["segments"] > 0, kinds
    for name in ("scan_of_blocks_offload", "scan_long_nothing", "scan_long_dots"):
        plans = plans_of(name)
        assert "scan" in str(planned(name)[0].closed)
        assert plans[0].recompute_flops > 0, f"{name}: the smallest plan recomputes nothing"
        assert plans[0].peak_bytes < plans[-1].peak_bytes, name
    assert kind(plans_of("scan_long_nothing")[0]) == "names"


@pytest.mark.parametrize("name", ["small_rnn", "small_nested_scans", "scan_long_dots"])
def test_scan_plan_policy(name):
    """A plan of a scanned program as a built-in policy over the whole function, and
    `jax.checkpoint(f, policy=plan.policy)` saving what the plan says."""
    case, args = case_of(name), arguments(name)
    builtin = [p for p in plans_of(name) if kind(p) == "builtin"]
    assert builtin, [p.policy_call for p in plans_of(name)]
    for plan in builtin:
        assert plan.policy_call.startswith("jax.checkpoint_policies.")
        assert_saves(jax.checkpoint(case.loss, policy=plan.policy), args, plan, name)


def test_segment_plan():
    """A segment plan: its segments are ranges of the flattened function's equations, its
    policy is no JAX policy (a `RematError` that says so), and JAX saves what it says."""
    found = [(name, p) for name in PROGRAMS for p in plans_of(name) if kind(p) == "segments"]
    assert found
    for name, plan in found:
        for a, e, keep in plan.segments:
            assert 0 <= a < e, plan.segments
            assert isinstance(keep, str)
        with pytest.raises(remat.RematError, match="not a JAX policy"):
            plan.policy  # noqa: B018
        assert plan.policy_call


@pytest.mark.parametrize("name", NAMED)
def test_names_only_plans(name):
    """`names_only=True`: every plan a `save_only_these_names` policy over the program's
    own names, which the user's own `jax.checkpoint(f, policy=plan.policy)` applies as
    `plan.apply(f)` does: JAX saves what the plan says, and the gradients are f's."""
    case, args = case_of(name), arguments(name)
    argnums, want = reference_value_and_grad(name)
    own = set(plan_of(name, 1 << 40, True)._p["names"]["saved"]) | set()
    plans = plans_of(name, names_only=True)
    assert len({tuple(p._p["names"]["saved"]) for p in plans}) == len(plans), "distinct plans"
    for plan in plans:
        assert kind(plan) == "names"
        assert plan.policy_call.startswith("jax.checkpoint_policies.save_only_these_names(")
        saved = plan._p["names"]["saved"]
        assert not any(n.startswith("remat_") for n in saved), saved
        assert set(saved) <= own
        assert plan.peak_bytes <= plan.budget
        assert_saves(plan.apply(case.loss), args, plan, name)
        if "remat2" not in str(jax.make_jaxpr(case.loss)(*args)):
            # A program with no checkpoint of its own: the user's own checkpoint with the
            # policy is the plan too. (With checkpoints of its own, their policies hold
            # inside them under JAX's outer checkpoint; `apply` inlines them.)
            assert_saves(jax.checkpoint(case.loss, policy=plan.policy), args, plan, name)
        got = jax.jit(jax.value_and_grad(plan.apply(case.loss), argnums))(*args)
        assert_tree_close(got, want, loose=False)


def test_names_plan_over_the_planners_names():
    """A names plan over names the planner gave the function's values (`remat_*`): its
    policy names them, `apply` puts them on the function, and the function as written
    under the policy saves none of them (the names are not there)."""
    found = [(name, p) for name in PROGRAMS for p in plans_of(name)
             if kind(p) == "names" and any(n.startswith("remat_") for n in p._p["names"]["saved"])]
    assert found
    name, plan = found[0]
    case, args = case_of(name), arguments(name)
    assert_saves(plan.apply(case.loss), args, plan, name)
    named_lines = [r for r in plan.saved if r.kind == "named"]
    assert named_lines, [r.line for r in plan.saved]
    assert not any("remat_" in d for _, d in jax_lines(jax.checkpoint(case.loss, policy=plan.policy), args))


# ---- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("budget,msg", [
    ("12 parsecs", r"budget `12 parsecs`: expected a number of bytes with an optional unit"),
    (-5, r"budget -5: a number of bytes is not negative"),
    ("-5GiB", r"budget `-5GiB`: expected a number of bytes"),
    (1.5e9, r"budget 1500000000.0: expected bytes, such as 12 \* 2\*\*30 or '12GiB'"),
    # an int beyond a 64-bit count was an OverflowError from the native module
    (1 << 70, r"budget 1180591620717411303424: more bytes than remat counts \(at most 18446744073709551615"),
])
def test_bad_budget(budget, msg):
    case = SMALL_BY_NAME["small_mlp"]
    with pytest.raises(remat.RematError, match=msg):
        remat.plan(case.loss, *arguments(case.name), budget=budget)
    with pytest.raises(remat.RematError, match=msg):
        remat.plan(case.loss, *arguments(case.name), budget="1GiB", host_budget=budget)


def test_plan_argnums():
    """`argnums` as JAX's: a negative one counts from the end; out of range, a
    `RematError`; the plan differentiates those arguments only."""
    case = SMALL_BY_NAME["small_named"]
    args = arguments(case.name)
    budget = frontier_budgets(case.name)[-1]
    last = remat.plan(case.loss, *args, budget=budget, argnums=-1)
    assert last._p == remat.plan(case.loss, *args, budget=budget, argnums=2)._p
    assert last._diff == [2]
    got = jax.jit(jax.value_and_grad(last.apply(case.loss), argnums=2))(*args)
    assert_tree_close(got, jax.value_and_grad(case.loss, argnums=2)(*args), loose=False)
    with pytest.raises(remat.RematError, match=r"argnums 3: 3 is not the index of one of the 3 arguments"):
        remat.plan(case.loss, *args, budget=budget, argnums=3)
    with pytest.raises(remat.RematError, match=r"argnums \(0, -3\) names an argument twice"):
        remat.plan(case.loss, *args, budget=budget, argnums=(0, -3))


def test_numpy_integer_budget():
    """A budget computed with NumPy (`np.int64`) is bytes, as an int is (it was refused as
    "expected bytes"); the largest 64-bit count fits every plan."""
    case = SMALL_BY_NAME["small_mlp"]
    budget = frontier_budgets(case.name)[0]
    plan = remat.plan(case.loss, *arguments(case.name), budget=np.int64(budget))
    assert plan.budget == budget and plan.peak_bytes <= budget
    assert remat.parse_budget(np.uint64((1 << 64) - 1)) == (1 << 64) - 1
    largest = remat.plan(case.loss, *arguments(case.name), budget=(1 << 64) - 1)
    assert largest.recompute_flops == plans_of(case.name)[-1].recompute_flops


def test_budget_below_the_smallest_peak():
    case = SMALL_BY_NAME["small_mlp"]
    smallest = frontier_budgets(case.name)[0]
    with pytest.raises(remat.RematError, match=rf"no plan fits the budget of {smallest - 1} bytes: "
                                               rf"the smallest peak reachable is {smallest}"):
        remat.plan(case.loss, *arguments(case.name), budget=smallest - 1)


def test_applied_plan_refuses_other_arguments():
    case = SMALL_BY_NAME["small_named"]
    args = arguments(case.name)
    applied = plan_of(case.name, frontier_budgets(case.name)[0]).apply(case.loss)
    with pytest.raises(remat.RematError, match=r"the plan was made for arguments .* these are"):
        applied(args[0], args[1], jnp.zeros((5, 8)))


# ---- XLA's memory analysis ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["small_mlp", "small_rnn", "mlp_small_plain", "transformer_plain"])
def test_xla_memory_is_xlas_analysis(name):
    """`plan.xla_memory()` is `memory_analysis()` of `jax.jit(jax.value_and_grad(
    plan.apply(f)))` compiled here, number for number."""
    case, args = case_of(name), arguments(name)
    for plan in plans_of(name):
        m = plan.xla_memory()
        assert m.backend == "cpu"
        flat_args, tree = jax.tree_util.tree_flatten(tuple(args))
        diff = tuple(_diff_leaves(trace(case.loss, args), None))
        applied = plan.apply(case.loss)

        def flat(*xs):
            return applied(*jax.tree_util.tree_unflatten(tree, list(xs)))

        want = jax.jit(jax.value_and_grad(flat, argnums=diff)).lower(*flat_args).compile().memory_analysis()
        assert (m.temp_bytes, m.argument_bytes, m.output_bytes, m.alias_bytes) == (
            want.temp_size_in_bytes, want.argument_size_in_bytes, want.output_size_in_bytes,
            want.alias_size_in_bytes)
        assert m.total_bytes == m.temp_bytes + m.argument_bytes + m.output_bytes - m.alias_bytes
        assert plan.xla_memory() is m  # measured once
        assert "XLA (cpu): temp" in str(plan)


@pytest.mark.parametrize("name", ["mlp_small_plain", "mlp_medium_plain", "transformer_plain"])
def test_measure_xla_on_the_benchmark_programs_at_three_budgets(name):
    """The benchmark programs (at this suite's sizes), at three budgets by XLA's measure:
    the largest and the smallest XLA temp bytes of the frontier's plans, where the plan
    `measure="xla"` returns fits by XLA's own memory analysis of the applied plan, and one
    byte under the smallest, where either a plan still fits or the error names the
    smallest XLA temp bytes found, which is over the budget."""
    case, args = case_of(name), arguments(name)
    temps = sorted({p.xla_memory().temp_bytes for p in plans_of(name)})
    for budget in (temps[-1], temps[0]):
        plan = remat.plan(case.loss, *args, budget=budget, measure="xla")
        assert plan.xla_memory().temp_bytes <= budget, (name, budget, plan)
    under = temps[0] - 1
    try:
        plan = remat.plan(case.loss, *args, budget=under, measure="xla")
    except remat.RematError as e:
        found = re.search(r"the smallest XLA temp bytes of the \d+ plans compiled is (\d+) bytes", str(e))
        assert found and int(found.group(1)) > under, str(e)
    else:
        assert plan.xla_memory().temp_bytes <= under


def test_measure_xla():
    """`measure="xla"`: the plan returned fits the budget by XLA's temp bytes (a budget
    the frontier's largest plan sets by XLA's measure); where none of the plans compiled
    fits, the error says the smallest XLA temp bytes found."""
    name = "special_functions"
    case, args = case_of(name), arguments(name)
    budget = max(p.xla_memory().temp_bytes for p in plans_of(name))
    plan = remat.plan(case.loss, *args, budget=budget, measure="xla")
    assert plan.xla_memory().temp_bytes <= budget and plan.budget == budget
    with pytest.raises(remat.RematError, match=r"no plan fits 8 bytes by XLA's memory analysis on cpu: the "
                                               r"smallest XLA temp bytes of the 3 plans compiled is (\d+) ") as e:
        remat.plan(case.loss, *args, budget=8, measure="xla", max_xla_compiles=3)
    assert int(e.value.args[0].split(" is ")[1].split()[0]) > 8
    with pytest.raises(remat.RematError, match="measure='fast'"):
        remat.plan(case.loss, *args, budget=budget, measure="fast")
