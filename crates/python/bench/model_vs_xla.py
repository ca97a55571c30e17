"""remat's planned peak against XLA's own memory analysis of the same plan, on the
benchmark programs: for every plan of the frontier remat.plan finds (plans JAX runs as they
are), remat's peak (its JIT's arena for the whole value-and-grad program) beside XLA's temp
bytes for `jax.jit(jax.value_and_grad(plan.apply(f)))` on the current backend. Prints
docs/benchmarks.md's table ("Python: remat's model and XLA's memory analysis"; docs/python.md
says what it shows).

    python crates/python/bench/model_vs_xla.py [--small]
"""
import argparse
import ast
import os
import platform
import sys

import jax

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from models import bench  # noqa: E402

import remat  # noqa: E402


def programs(small):
    out = []
    for tag in ("small",) if small else ("small", "medium"):
        L, d, n = bench.MLP_SIZES[tag]
        out.append((f"mlp_{tag}", bench.mlp(L, None), bench.mlp_args(L, d, n)))
    size = bench.TRANSFORMER_SMALL if small else bench.TRANSFORMER_FULL
    out.append(("transformer", bench.transformer_block(None), bench.transformer_args(*size)))
    return out


def builtin_policy(call):
    """The JAX policy a built-in row names: `jax.checkpoint_policies.NAME` or
    `...NAME('a', 'b')` (the program's names)."""
    name, _, rest = call.rsplit(".", 1)[-1].partition("(")
    policy = getattr(jax.checkpoint_policies, name)
    return policy(*ast.literal_eval("(" + rest[:-1] + ",)")) if rest else policy


def label(plan):
    """The plan in a table cell: its policy, or its segments without their description."""
    return plan.policy_call.split(" (")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores; jax {jax.__version__} on {jax.default_backend()}; "
          f"command: python crates/python/bench/model_vs_xla.py{' --small' if a.small else ''}")
    print()
    print("| program | plan | recompute FLOPs | remat peak | XLA temp bytes | XLA / remat |")
    print("|---|---|---:|---:|---:|---:|")
    for name, f, args in programs(a.small):
        t = remat._trace.trace(f, args)
        planner = t.program.planner()
        for point in planner.frontier():
            p = remat.plan(f, *args, budget=point["peak_bytes"])
            m = p.xla_memory()
            ratio = m.temp_bytes / p.peak_bytes if p.peak_bytes else float("inf")
            print(f"| {name} | {label(p)} | {p.recompute_flops:,} | {p.peak_bytes:,} | {m.temp_bytes:,} | {ratio:.2f} |")
        for b in planner.builtins():
            g = jax.checkpoint(f, policy=builtin_policy(b["policy"]))
            m = remat._plan.xla_memory_of(g, args, remat._plan._diff_leaves(t, None))
            print(f"| {name} | {b['policy'].rsplit('.', 1)[-1]} (as JAX writes it) | {b['recompute_flops']:,} | "
                  f"{b['peak_bytes']:,} | {m.temp_bytes:,} | {m.temp_bytes / max(b['peak_bytes'], 1):.2f} |")


if __name__ == "__main__":
    main()
