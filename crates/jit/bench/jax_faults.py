"""Minor page faults and median time per call of JAX's compiled mlp_medium value-and-grad.

    python3 crates/jit/bench/jax_faults.py [CALLS]      # from the repository root

Builds the model with ../shared/bench/gen_bench.py's `mlp` (8 layers of 512, batch 256,
no checkpoint policy: mlp_medium_plain), compiles `jax.value_and_grad` of it, and counts
the process's minor page faults (getrusage) over CALLS calls, each returning fresh output
arrays as `gen_bench.py --time` does. docs/benchmarks_history.md (2026-11-23) compares this
with remat's `run`.
Run it with GLIBC_TUNABLES=glibc.malloc.trim_threshold=...:glibc.malloc.mmap_threshold=...
to see the same calls with glibc keeping freed memory.
"""
import importlib.util
import os
import resource
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "gen_bench", os.environ.get("GEN_BENCH", os.path.join(here, "../../../../shared/bench/gen_bench.py")))
gen_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_bench)
import jax  # noqa: E402  (gen_bench configures the CPU platform first)
import jax.numpy as jnp  # noqa: E402

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 50
L, d, n = 8, 512, 256
k = jax.random.PRNGKey(0)
params = [(jax.random.normal(jax.random.fold_in(k, i), (d, d)) / d ** .5, jnp.zeros(d)) for i in range(L)]
x = jax.random.normal(k, (n, d))
y = jnp.zeros((n, d))
f = jax.jit(jax.value_and_grad(gen_bench.mlp(L, None))).lower(params, x, y).compile()
for _ in range(5):
    jax.block_until_ready(f(params, x, y))
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
times = []
for _ in range(calls):
    t = time.perf_counter()
    jax.block_until_ready(f(params, x, y))
    times.append(time.perf_counter() - t)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
times.sort()
print(f"mlp_medium_plain under JAX: {faults / calls:.0f} minor faults per call, median {times[calls // 2] * 1e3:.3f} ms")
