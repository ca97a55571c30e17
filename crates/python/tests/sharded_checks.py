"""The Python package on sharded programs, on JAX's simulated 8-device CPU mesh: run as its
own process (JAX reads `XLA_FLAGS` once, when it starts; `test_sharded.py` runs it, and
`crates/python/bench/sharded_vs_xla.py` prints its table).

For each program of `models/sharded.py` and each plan of its frontier (one device's peak
per plan, `Plan.per_device`): the applied plan gives `f`'s value and gradients on the mesh,
JAX saves what `plan.saved` says, and XLA's per-device memory analysis of the applied plan
is recorded beside remat's peak; then `measure="xla"` at the smallest XLA temp bytes found
returns a plan that fits by XLA's measure. Prints one JSON object (a row per plan), or with
`--table` docs/sharding.md's table.

    python crates/python/tests/sharded_checks.py [--table]
"""

import collections
import json
import os
import sys

# Only where JAX has not started yet (run as a script; `test_sharded.py` imports `table`).
if "jax" not in sys.modules:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_platform_name", "cpu")

import remat  # noqa: E402
from helpers import assert_tree_close, jax_saved_residuals  # noqa: E402
from models import sharded  # noqa: E402
from remat._plan import _diff_leaves  # noqa: E402
from remat._trace import trace  # noqa: E402


# JAX's own f32 error against the same program in f64 where it is above the usual 1e-5
# (tests/data/sharded/zero_optimizer_step.json's `f32_error`: a gradient through a gradient
# step): another exact evaluation order of the same sums lands within twice it.
F32_ERROR = {"zero_optimizer_step": 3.5e-3}


def lines(residuals) -> collections.Counter:
    return collections.Counter(residuals)


def check(name, f, args):
    """The rows of one program (module docs), after its checks."""
    t = trace(f, args)
    t.function = f
    diff = _diff_leaves(t, None)
    planner = t.program.planner(argnums=diff)
    auto = planner.auto_names()
    want = jax.value_and_grad(f, argnums=tuple(range(len(args))))(*args)
    rows = []
    for peak in sorted({p["peak_bytes"] for p in planner.frontier()}):
        plan = remat.Plan(planner.plan(peak), t, auto, args, diff)
        assert plan.per_device, (name, plan)
        g = plan.apply(f)
        got = jax.value_and_grad(g, argnums=tuple(range(len(args))))(*args)
        if name in F32_ERROR:
            for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                assert np.max(np.abs(np.asarray(a) - np.asarray(b))) <= 2 * F32_ERROR[name], (name, peak)
        else:
            assert_tree_close(got, want, loose=False)
        jax_says = lines((a.str_short(short_dtypes=True), d) for a, d in jax_saved_residuals(g, *args)
                         if d != "from a literal")
        plan_says = lines((r.aval, r.description) for r in plan.saved)
        assert jax_says == plan_says, (name, peak, sorted((jax_says - plan_says).elements()),
                                       sorted((plan_says - jax_says).elements()))
        m = plan.xla_memory()
        rows.append(dict(program=name, plan=plan.policy_call.split(" (")[0], recompute_flops=plan.recompute_flops,
                         peak_bytes=plan.peak_bytes, xla_temp_bytes=m.temp_bytes,
                         xla_argument_bytes=m.argument_bytes, xla_output_bytes=m.output_bytes))
    least = min(r["xla_temp_bytes"] for r in rows)
    by_xla = remat.plan(f, *args, budget=least, measure="xla")
    assert by_xla.xla_memory().temp_bytes <= least, (name, by_xla)
    return rows, dict(program=name, budget=least, xla_temp_bytes=by_xla.xla_memory().temp_bytes,
                      plan=by_xla.policy_call.split(" (")[0])


def run():
    """Every program's rows and its `measure="xla"` plan, after the checks."""
    assert jax.device_count() == 8, jax.devices()
    rows, xla = [], []
    for name, (f, args) in sharded.programs().items():
        r, x = check(name, f, args)
        rows += r
        xla.append(x)
    return dict(devices=jax.device_count(), plans=rows, measure_xla=xla)


def table(result) -> list:
    """docs/sharding.md's table: per plan, remat's per-device peak beside XLA's per-device
    temp bytes for the applied plan on the mesh, and their ratio."""
    out = ["| program | plan | recompute FLOPs | remat peak per device | XLA temp bytes per device | XLA / remat |",
           "|---|---|---:|---:|---:|---:|"]
    for r in result["plans"]:
        ratio = r["xla_temp_bytes"] / r["peak_bytes"] if r["peak_bytes"] else float("inf")
        out.append(f"| {r['program']} | {r['plan'].rsplit('.', 1)[-1]} | {r['recompute_flops']:,} | "
                   f"{r['peak_bytes']:,} | {r['xla_temp_bytes']:,} | {ratio:.2f} |")
    return out


def main():
    result = run()
    if "--table" in sys.argv:
        print("\n".join(table(result)))
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
