#!/usr/bin/env bash
# Speed on any input (issue 41): docs/benchmarks.md's table of every benchmark program on
# four distributions of its arguments (JAX's, uniform in [-1, 1], scaled so the softmax
# saturates, scaled so the backward pass underflows), remat's JIT and JAX's XLA on the same
# arguments, remat's outputs compared with JAX's. crates/jit/bench/distributions.py says
# what each distribution is and what each column means.
#
#   bash crates/jit/bench/distributions.sh [RUNS] [ROUNDS]      # from the repository root
#   PROGRAMS='transformer_* mlp_small_*' bash crates/jit/bench/distributions.sh 5 1
#   DISTS=jax,uniform bash crates/jit/bench/distributions.sh   # only these distributions
#   bash crates/jit/bench/distributions.sh --check             # the smoke check only
#
# --check: the arguments of every distribution are made twice, in two processes, for two
# programs (one from each generator), and their digests must be equal: the uniform values
# are seeded and the `tiny` scale is chosen from JAX's deterministic outputs.
set -euo pipefail
cd "$(dirname "$0")/../../.."
py="${PYTHON:-python3}"
if [ "${1:-}" = "--check" ]; then
  a="$($py crates/jit/bench/distributions.py --digest mlp_small_plain gelu_deep_plain)"
  b="$($py crates/jit/bench/distributions.py --digest mlp_small_plain gelu_deep_plain)"
  echo "$a"
  if [ "$a" != "$b" ] || [ "$(echo "$a" | wc -l)" != 8 ]; then
    echo "distributions.py: the arguments differ between two runs (or were not made):" >&2
    diff <(echo "$a") <(echo "$b") >&2 || true
    exit 1
  fi
  echo "deterministic: the same digests in two processes"
  exit 0
fi
runs="${1:-20}"
rounds="${2:-2}"
pattern="${PROGRAMS:-*}"
dists="${DISTS:-jax,uniform,saturate,tiny}"
cargo build --release -p remat-cli >/dev/null 2>&1
names="$(set -f; for p in $pattern; do (set +f; ls tests/data/bench/$p.jaxpr); done | xargs -n1 basename | sed 's/\.jaxpr$//')"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
simd="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx2|fma|avx512f|amx_tile' | tr '\n' ' ' | sed 's/ $//')"
echo "Machine: $cpu, $(nproc) cores ($simd), $(free -g | awk '/Mem:/{print $2}') GiB; $(rustc --version | cut -d' ' -f1-2);"
echo "jax $($py -c 'import jax; print(jax.__version__)'). Date: $(date -u '+%Y-%m-%d %H:%M UTC'). Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "Command: PROGRAMS='$pattern' DISTS=$dists bash crates/jit/bench/distributions.sh $runs $rounds"
echo
# shellcheck disable=SC2086
$py crates/jit/bench/distributions.py --header --runs "$runs" --rounds "$rounds" --dists "$dists" $names
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
