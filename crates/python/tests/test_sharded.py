"""The Python package on sharded programs (issue 46), on JAX's simulated 8-device CPU mesh.

JAX reads `XLA_FLAGS` once, when it starts, and this suite's JAX has started with one
device; so `sharded_checks.py` runs in a process of its own with
`--xla_force_host_platform_device_count=8` and checks, on eight sharded programs (jit with
shardings, shard_map with psum, all_gather/psum_scatter, ppermute, with_sharding_constraint,
the other collectives, all_to_all/all_gather_invariant/shard_alike) and every plan of each frontier: the plan is per device, the applied
plan gives `f`'s value and gradients on the mesh, JAX saves what `plan.saved` says, and
`measure="xla"` returns a plan that fits by XLA's per-device memory analysis. Here: that
process passes, and docs/sharding.md's table is the one it prints."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")

sys.path.insert(0, HERE)


def _run():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    p = subprocess.run([sys.executable, os.path.join(HERE, "sharded_checks.py")], env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)


RESULT = None


def result():
    global RESULT
    if RESULT is None:
        RESULT = _run()
    return RESULT


def test_sharded_plans_run_on_the_mesh_and_fit_by_xla():
    r = result()
    assert r["devices"] == 8
    programs = {p["program"] for p in r["plans"]}
    assert programs == {"dp_mlp_jit", "tp_mlp_shard_map", "tp_attention_shard_map", "sp_gather_scatter",
                        "pipeline_ppermute", "zero_optimizer_step", "collectives_unchecked",
                        "collectives_more"}, programs
    assert {x["program"] for x in r["measure_xla"]} == programs
    for x in r["measure_xla"]:
        assert x["xla_temp_bytes"] <= x["budget"], x


def test_the_docs_table_is_the_checks_table():
    import sharded_checks

    want = sharded_checks.table(result())
    with open(os.path.join(ROOT, "docs", "sharding.md")) as f:
        doc = [line.rstrip("\n") for line in f]
    start = doc.index(want[0])
    assert doc[start:start + len(want)] == want, "docs/sharding.md's table is stale: run " \
        "`python crates/python/tests/sharded_checks.py --table`"
