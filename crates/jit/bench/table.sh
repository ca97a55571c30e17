#!/usr/bin/env bash
# Times every benchmark program with remat's JIT (release build) and with JAX, side by side
# in one run, and prints the rows of the table in docs/benchmarks.md.
#
#   bash crates/jit/bench/table.sh [RUNS]        # from the repository root
#
# Needs python3 with jax 0.10.2 and ../shared/bench/gen_bench.py beside the repository.
set -euo pipefail
cd "$(dirname "$0")/../../.."
runs="${1:-20}"
gen="${GEN_BENCH:-../shared/bench/gen_bench.py}"
cargo build --release -p remat-cli >/dev/null 2>&1
echo "| program | remat compile ms | JAX compile ms | remat run ms | JAX run ms | JAX/remat run | remat peak bytes |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for f in tests/data/bench/*.jaxpr; do
  name="$(basename "$f" .jaxpr)"
  r="$(./target/release/remat bench "$f" --runs "$runs" --json | tail -n 1)"
  j="$(python3 "$gen" --time "$name" 2>/dev/null | tail -n 1)"
  python3 - "$name" "$r" "$j" <<'PY'
import json, sys
name, r, j = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ratio = j["jax_cpu_run_median_ms"] / r["run_median_ms"]
print(f"| {name} | {r['compile_ms']:.1f} | {j['jax_cpu_compile_ms']:.1f} | {r['run_median_ms']:.3f} | "
      f"{j['jax_cpu_run_median_ms']:.3f} | {ratio:.2f} | {r['peak_bytes']} |")
PY
done
