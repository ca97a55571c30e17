"""The arithmetic of kept recompute (issue 26): for each benchmark program whose checkpoint
recompute the default CSE (`auto`) merges with the forward pass, remat's run time with the
recompute merged and kept (`--cse within-checkpoints`), alternating, beside JAX's, and the
extra time the recomputed FLOPs predict at the rate remat reaches without them.

    python3 crates/jit/bench/recompute.py [RUNS] [ROUNDS] [NAME...]   # from the repository root

Needs a release build (`cargo build --release -p remat-cli`), python3 with jax 0.10.2 and
../shared/bench/gen_bench.py beside the repository (the models of gen_models.py are timed by
it). Prints a markdown table: per program, the products' GFLOP with the recompute merged and
kept, remat's `run_into` medians (best of ROUNDS), the extra time measured, the extra time
predicted (the extra GFLOP at the merged program's GFLOP/s), and JAX/remat with the
recompute kept.
"""
import glob
import json
import os
import subprocess
import sys

runs = sys.argv[1] if len(sys.argv) > 1 else "10"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
names = sys.argv[3:]
here = os.path.dirname(os.path.abspath(__file__))
gen = os.environ.get("GEN_BENCH", os.path.join(here, "../../../../shared/bench/gen_bench.py"))
model_gen = os.path.join(here, "gen_models.py")
model_names = set(subprocess.run(["python3", model_gen, "--names"], capture_output=True, text=True).stdout.split())
remat = "./target/release/remat"


def bench(path, cse):
    extra = [] if cse is None else ["--cse", cse]
    out = subprocess.run([remat, "bench", path, "--runs", runs, "--json", *extra], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def jax_ms(name):
    g = model_gen if name in model_names else gen
    out = subprocess.run(["python3", g, "--time", name], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["jax_cpu_run_median_ms"]


paths = sorted(glob.glob("tests/data/bench/*.jaxpr"))
if names:
    paths = [p for p in paths if os.path.basename(p)[:-6] in names]
print("| program | GFLOP merged | GFLOP kept | remat merged ms | remat kept ms | extra ms measured | "
      "extra ms predicted | JAX ms | JAX/remat kept |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in paths:
    name = os.path.basename(path)[:-6]
    first = bench(path, None)
    if not first["merged_across_checkpoints"]:
        continue
    merged, kept, jax = [first], [], []
    for r in range(rounds):
        if r:
            merged.append(bench(path, None))
        kept.append(bench(path, "within-checkpoints"))
        jax.append(jax_ms(name))
    m = min(merged, key=lambda x: x["run_median_ms"])
    k = min(kept, key=lambda x: x["run_median_ms"])
    j = min(jax)
    rate = m["dot_gflop"] / m["run_median_ms"]  # GFLOP per ms
    extra = k["dot_gflop"] - m["dot_gflop"]
    print(f"| {name} | {m['dot_gflop']:.4g} | {k['dot_gflop']:.4g} | {m['run_median_ms']:.3f} | "
          f"{k['run_median_ms']:.3f} | {k['run_median_ms'] - m['run_median_ms']:.3f} | {extra / rate:.3f} | "
          f"{j:.3f} | {j / k['run_median_ms']:.2f} |", flush=True)
