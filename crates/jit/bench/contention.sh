#!/usr/bin/env bash
# A busy machine (issue 41): docs/benchmarks.md's contention table. The training example and
# two benchmark programs, each run four ways, in alternating rounds:
#   idle          nothing else computing, remat's pool on every core;
#   idle, 1 core  nothing else computing, pinned to one core (`taskset -c 0`);
#   1 competitor  one other process computing (a busy loop, one thread) the whole time;
#   1 comp, 1 core the same competitor, remat pinned to one core (the scheduler leaves the
#                 competitor the other one).
# The claim it checks: with one competitor no run is slower than the same run on one core.
#
#   bash crates/jit/bench/contention.sh [ROUNDS] [STEPS] [RUNS]   # from the repository root
#
# Each cell is the best of ROUNDS (default 3); every round's figure is printed too. The
# training example prints steps/s (higher is better) for STEPS steps (default 400) under
# policy `dots`; the benchmark programs print `remat bench`'s median run time in ms (lower is
# better) over RUNS runs (default 40), on its default inputs (uniform in [-1, 1]).
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds="${1:-3}"
steps="${2:-400}"
runs="${3:-40}"
programs="${PROGRAMS:-transformer_dots mlp_medium_plain}"
cargo build --release -p remat-cli >/dev/null 2>&1
cargo build --release -p remat --example train >/dev/null 2>&1
bin=target/release/remat
train=target/release/examples/train
cores="$(nproc)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "Machine: $cpu, $cores cores; $(rustc --version | cut -d' ' -f1-2). Date: $(date -u '+%Y-%m-%d %H:%M UTC')."
echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg). Commit: $(git rev-parse --short HEAD)."
echo "Command: PROGRAMS='$programs' bash crates/jit/bench/contention.sh $rounds $steps $runs"
echo

competitor=""
start_competitor() {
  # One thread computing without pause, as another user's process would.
  sh -c 'while :; do :; done' &
  competitor=$!
  sleep 0.5
}
stop_competitor() {
  if [ -n "$competitor" ]; then
    kill "$competitor" 2>/dev/null || true
    wait "$competitor" 2>/dev/null || true
    competitor=""
  fi
}
trap stop_competitor EXIT

# One measurement: prints one number.
measure() { # workload pin
  local w="$1" pin="$2" pre=()
  if [ "$pin" = 1 ]; then pre=(taskset -c 0); fi
  if [ "$w" = train ]; then
    "${pre[@]}" "$train" --steps "$steps" --table-steps 0 --policy dots 2>/dev/null \
      | grep -o '([0-9.]* steps/s)' | tail -1 | tr -dc '0-9.'
  else
    "${pre[@]}" "$bin" bench "tests/data/bench/$w.jaxpr" --runs "$runs" --json 2>/dev/null \
      | tail -1 | sed 's/.*"run_median_ms": *\([0-9.]*\).*/\1/' | awk '{printf "%.2f", $1}'
  fi
}

conditions=("idle" "idle, 1 core" "1 competitor" "1 competitor, 1 core")
declare -A cell
workloads=(train $programs)
for r in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    for c in 0 1 2 3; do
      pin=$((c % 2))
      if [ "$c" -ge 2 ]; then start_competitor; fi
      v="$(measure "$w" "$pin")"
      stop_competitor
      if [ -z "$v" ]; then
        echo "contention.sh: no figure from $w (${conditions[$c]})" >&2
        exit 1
      fi
      cell["$w,$c"]="${cell["$w,$c"]:+${cell["$w,$c"]} / }$v"
    done
  done
done

best() { # "a / b / c" higher|lower
  tr '/' '\n' <<<"$1" | sed 's/ //g' | sort -g | if [ "$2" = higher ]; then tail -1; else head -1; fi
}
echo "| workload | unit | idle | idle, 1 core | 1 competitor | 1 competitor, 1 core | 1 competitor against 1 core |"
echo "|---|---|---:|---:|---:|---:|---:|"
for w in "${workloads[@]}"; do
  if [ "$w" = train ]; then unit="steps/s (higher is better)"; dir=higher; else unit="ms (lower is better)"; dir=lower; fi
  row="| $([ "$w" = train ] && echo "training example ($steps steps, dots)" || echo "$w") | $unit"
  for c in 0 1 2 3; do
    row="$row | **$(best "${cell["$w,$c"]}" "$dir")** (${cell["$w,$c"]})"
  done
  b2="$(best "${cell["$w,2"]}" "$dir")"
  b1="$(best "${cell["$w,1"]}" "$dir")"
  if [ "$dir" = higher ]; then ratio="$(awk -v a="$b2" -v b="$b1" 'BEGIN{printf "%.2fx", a/b}')"; else ratio="$(awk -v a="$b2" -v b="$b1" 'BEGIN{printf "%.2fx", b/a}')"; fi
  echo "$row | $ratio |"
done
echo
echo "The last column is the speed with one competitor on every core against the speed pinned to one idle core (above 1.00x: faster than one core)."
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
