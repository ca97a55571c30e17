#!/bin/sh
# Step time of the transformer's planned frontier (issue 24's step-time target; the table
# in docs/benchmarks.md, "Step time of the planner's plans"): every frontier point planned
# with `remat plan --budget P -o`, then the programs benched alternately, three rounds.
# Run from the repository root on an idle machine:  sh crates/plan/bench/step_time.sh
set -e
cargo build --release -q -p remat-cli
ROOT=$(pwd)
R=$ROOT/target/release/remat
F=$ROOT/crates/plan/tests/data/primal/transformer.jaxpr
A=$(python3 -c "import json; print(','.join(map(str, json.load(open('$ROOT/crates/plan/tests/data/primal/transformer.json'))['argnums'])))")
OUT=$(mktemp -d)
PEAKS=$($R plan "$F" --argnums "$A" --frontier | awk '/^ *[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+/ {print $1}')
for b in $PEAKS; do $R plan "$F" --argnums "$A" --budget "$b" -o "$OUT/t_$b.jaxpr" > /dev/null; done
for r in 1 2 3; do for b in $PEAKS; do
  echo "round $r peak $b $($R bench "$OUT/t_$b.jaxpr" --runs 20 --json 2>/dev/null | tail -1)"
done; done
rm -rf "$OUT"
