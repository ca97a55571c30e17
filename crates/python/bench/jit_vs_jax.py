"""remat.jit and remat.value_and_grad against jax.jit from Python, call overhead included:
the time a Python caller waits for one call, NumPy arrays in and out on remat's side, JAX
arrays (block_until_ready) on JAX's. Prints docs/benchmarks.md's Python table.

    python crates/python/bench/jit_vs_jax.py [--runs 20] [--rounds 3]

The programs are the benchmark models of crates/python/tests/models (the MLPs at their
small and medium sizes, the transformer at the benchmark's size, the zoo's GPT block).
Each side is timed in alternating rounds; the best median of the rounds is reported.
"""
import argparse
import os
import platform
import statistics
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from models import bench  # noqa: E402

import remat  # noqa: E402


def median_ms(call, runs):
    call()  # compile (and warm up)
    call()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def programs():
    out = []
    for tag in ("small", "medium"):
        L, d, n = bench.MLP_SIZES[tag]
        out.append((f"mlp_{tag}", bench.mlp(L, None), bench.mlp_args(L, d, n)))
    out.append(("transformer", bench.transformer_block(None), bench.transformer_args(*bench.TRANSFORMER_FULL)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; jax {jax.__version__}; "
          f"command: python crates/python/bench/jit_vs_jax.py --runs {a.runs} --rounds {a.rounds}")
    print()
    print("| program | call | remat ms | jax.jit ms | jax/remat |")
    print("|---|---|---:|---:|---:|")
    for name, f, args in programs():
        np_args = jax.tree_util.tree_map(np.asarray, args)
        sides = {
            "f": (remat.jit(f), jax.jit(f)),
            "value_and_grad": (remat.value_and_grad(f), jax.jit(jax.value_and_grad(f))),
        }
        for call, (r, j) in sides.items():
            best_r, best_j = float("inf"), float("inf")
            for _ in range(a.rounds):
                best_r = min(best_r, median_ms(lambda: r(*np_args), a.runs))
                best_j = min(best_j, median_ms(lambda: jax.block_until_ready(j(*args)), a.runs))
            print(f"| {name} | {call} | {best_r:.3f} | {best_j:.3f} | {best_j / best_r:.2f}x |")


if __name__ == "__main__":
    main()
