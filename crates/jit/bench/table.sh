#!/usr/bin/env bash
# Times every benchmark program with remat's JIT (release build) and with JAX, side by side
# in one run, and prints docs/benchmarks.md's table: the header (machine, date, commands),
# one row per program, and a seed-sized grad timed on both sides.
#
#   bash crates/jit/bench/table.sh [RUNS] [ROUNDS]   # from the repository root
#   PROGRAMS='cnn_* gpt_*' bash crates/jit/bench/table.sh  # only the programs matching these globs
#
# The host is a shared VM whose speed drifts by up to 2x over tens of seconds, so each program
# is timed in ROUNDS alternating rounds (default 2: remat, JAX, Rust-traced remat, then again)
# and each side reports its best median: the same rule for both sides.
#
# Needs python3 with jax 0.10.2 and ../shared/bench/gen_bench.py beside the repository; the
# realistic-size models (CNN, ResNet block, GPT block) are built and timed in JAX by
# crates/jit/bench/gen_models.py. Each MLP and transformer program appears twice: JAX's
# jaxpr compiled by remat, and the same model written in Rust
# (crates/remat/examples/bench_models.rs) traced, differentiated and compiled by remat; the
# realistic-size models have no Rust twin yet (one row each).
# GFLOP/s counts the products only (2*m*n*k per dot_general, loops per trip) over remat's
# median run time. remat runs JAX's jaxpr on the arguments JAX times it with
# (crates/jit/bench/jax_inputs.py). remat's run is timed two ways: `run_into` (the previous
# call's output arrays reused: no allocation) and `run` (fresh output arrays each call, as
# JAX's call).
# remat compiles with its default CSE (`auto`): a checkpoint's recompute is merged with the
# forward pass, as XLA does, when that does not raise the planned peak; such programs get a
# third row timed with the recompute kept. Peak bytes are remat's planned arena beside XLA's
# temp buffer (crates/jit/bench/jax_memory.py), arguments and outputs excluded on both sides.
set -euo pipefail
cd "$(dirname "$0")/../../.."
runs="${1:-20}"
rounds="${2:-2}"
pattern="${PROGRAMS:-*}"
gen="${GEN_BENCH:-../shared/bench/gen_bench.py}"
model_gen=crates/jit/bench/gen_models.py
model_names="$(python3 "$model_gen" --names)"
cargo build --release -p remat-cli >/dev/null 2>&1
files="$(set -f; for p in $pattern; do (set +f; ls tests/data/bench/$p.jaxpr); done)"
# The Rust twins, if a selected program has one.
if [ -n "$(for f in $files; do echo "$model_names" | grep -qx "$(basename "$f" .jaxpr)" || echo "$f"; done)" ]; then
  cargo build --release -p remat --example bench_models >/dev/null 2>&1
fi
bin=./target/release/remat
# Every remat process runs with glibc's allocation thresholds pinned at their defaults, so
# that `run`'s fresh outputs are measured in the same allocator state whatever the process
# did before: reading a large `--inputs` file would otherwise raise glibc's dynamic mmap
# and trim thresholds (as a Python process's large arrays do) and let the freed outputs be
# reused without page faults (docs/benchmarks.md, "The allocator's state").
pinned="glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072"
inputs="$(mktemp)"
trap 'rm -f "$inputs"' EXIT
models=./target/release/examples/bench_models
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
simd="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx2|fma|avx512f' | tr '\n' ' ' | sed 's/ $//')"
echo "Machine: $cpu, $(nproc) cores ($simd), $(free -g | awk '/Mem:/{print $2}') GiB; $(rustc --version | cut -d' ' -f1-2);"
echo "jax $(python3 -c 'import jax; print(jax.__version__)'). Date: $(date -u +%Y-%m-%d). Command: bash crates/jit/bench/table.sh $runs $rounds"
echo
echo "| program | remat compile ms | JAX compile ms | remat run ms (run_into) | remat run ms (run, fresh outputs) | JAX run ms | JAX/remat (run_into) | JAX/remat (run) | remat GFLOP/s | remat peak bytes | JAX temp bytes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
names="$(for f in $files; do basename "$f" .jaxpr; done)"
# XLA's buffer for intermediate values, per program (one JSON line each).
memory="$(python3 crates/jit/bench/jax_memory.py $names 2>/dev/null)"
for f in $files; do
  name="$(basename "$f" .jaxpr)"
  jm="$(echo "$memory" | grep "\"$name\"")"
  g="$gen"; rust=1
  if echo "$model_names" | grep -qx "$name"; then g="$model_gen"; rust=0; fi
  # remat runs JAX's program on the arguments JAX times it with.
  python3 crates/jit/bench/jax_inputs.py "$g" "$name" "$inputs" 2>/dev/null
  r="["; j="["; m="["
  for round in $(seq "$rounds"); do
    sep=$([ "$round" = 1 ] && echo "" || echo ",")
    r="$r$sep$(GLIBC_TUNABLES=$pinned $bin bench "$f" --inputs "$inputs" --runs "$runs" --json | tail -n 1)"
    j="$j$sep$(python3 "$g" --time "$name" 2>/dev/null | tail -n 1)"
    if [ "$rust" = 1 ]; then
      m="$m$sep$(GLIBC_TUNABLES=$pinned $models "$name" "$runs" | tail -n 1)"
    else
      m="$m${sep}null"
    fi
  done
  r="$r]"; j="$j]"; m="$m]"
  # Where the default (`--cse auto`) merged a checkpoint's recompute with the forward pass,
  # the program is timed again with the recompute kept (`--cse within-checkpoints`).
  s="null"
  if [ "$(echo "$r" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["merged_across_checkpoints"])')" = True ]; then
    s="$(GLIBC_TUNABLES=$pinned $bin bench "$f" --inputs "$inputs" --runs "$runs" --json --cse within-checkpoints | tail -n 1)"
  fi
  python3 - "$name" "$r" "$j" "$m" "$s" "$jm" <<'PY'
import json, sys
name, r, j, m, s = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
temp = json.loads(sys.argv[6])["temp_bytes"]
def best(rounds):
    """Each timing field's best median over the rounds; GFLOP/s from the best run_into."""
    key = "run_median_ms" if "run_median_ms" in rounds[0] else "jax_cpu_run_median_ms"
    b = dict(min(rounds, key=lambda x: x[key]))
    for k in ("run_fresh_outputs_median_ms", "compile_ms", "jax_cpu_compile_ms"):
        if k in b:
            b[k] = min(x[k] for x in rounds)
    return b
r, j = best(r), best(j)
m = None if m[0] is None else best(m)
jax = j["jax_cpu_run_median_ms"]
def ratio(ms):
    x = jax / ms
    return f"{x:.2f}" + ("" if x >= 1.0 else " (miss)")
# The JAX program, then the same model traced from Rust (its compile time includes tracing
# and value_and_grad), both beside the same JAX measurement.
rows = [(name, r)] + ([] if m is None else [(f"{name} (traced from Rust)", m)])
if s is not None:
    rows.append((f"{name} (recompute kept: --cse within-checkpoints)", s))
for label, x in rows:
    print(f"| {label} | {x['compile_ms']:.1f} | {j['jax_cpu_compile_ms']:.1f} | {x['run_median_ms']:.3f} | "
          f"{x['run_fresh_outputs_median_ms']:.3f} | {jax:.3f} | {ratio(x['run_median_ms'])} | "
          f"{ratio(x['run_fresh_outputs_median_ms'])} | {x['gflops']:.0f} | {x['peak_bytes']} | {temp} |")
PY
done
# A seed-sized grad: d/dx sum(sin(x) * y) at f32[3], as JAX's jitted grad and as its jaxpr.
seed=$(mktemp)
cat > "$seed" <<'JAXPR'
{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sin a
    d:f32[3] = mul c b
    e:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
    f:f32[3] = cos a
    g:f32[3] = mul f b
  in (e, g) }
JAXPR
r="$(GLIBC_TUNABLES=$pinned $bin bench "$seed" --runs 20000 --json | tail -n 1)"
rm -f "$seed"
j="$(python3 - <<'PY'
import time, json, statistics
import jax, jax.numpy as jnp
f = jax.jit(jax.value_and_grad(lambda x, y: jnp.sum(jnp.sin(x) * y)))
x = jnp.ones(3, jnp.float32); y = jnp.ones(3, jnp.float32)
t = time.perf_counter(); f.lower(x, y).compile(); c = (time.perf_counter() - t) * 1e3
jax.block_until_ready(f(x, y))
ts = []
for _ in range(2000):
    t = time.perf_counter(); jax.block_until_ready(f(x, y)); ts.append((time.perf_counter() - t) * 1e3)
temp = f.lower(x, y).compile().memory_analysis().temp_size_in_bytes
print(json.dumps({"jax_cpu_compile_ms": c, "jax_cpu_run_median_ms": statistics.median(ts), "jax_temp_bytes": temp}))
PY
)"
python3 - "$r" "$j" <<'PY'
import json, sys
r, j = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = j["jax_cpu_run_median_ms"] / r["run_median_ms"]
fresh = j["jax_cpu_run_median_ms"] / r["run_fresh_outputs_median_ms"]
print(f"| seed value_and_grad f32[3] | {r['compile_ms']:.1f} | {j['jax_cpu_compile_ms']:.1f} | {r['run_median_ms']:.4f} | "
      f"{r['run_fresh_outputs_median_ms']:.4f} | {j['jax_cpu_run_median_ms']:.4f} | {ratio:.0f} | {fresh:.0f} | - | {r['peak_bytes']} | {j['jax_temp_bytes']} |")
PY
