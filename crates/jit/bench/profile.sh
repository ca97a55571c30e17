#!/usr/bin/env bash
# Where a benchmark program's time goes: `perf record -e cpu-clock` over `remat bench`
# (release build), with the samples summed by kind: remat's GEMM microkernel and its
# packing, the other GEMM crates, the JIT-compiled loops (Cranelift's perf map names them
# after their steps), the native tanh/exp row functions, the thread pool, libc, the Linux
# kernel (page faults of the fresh-output calls, scheduling) and the rest.
#
#   bash crates/jit/bench/profile.sh NAME [RUNS]   # from the repository root
#
# NAME is a program in ../shared/bench (for example mlp_medium_plain). `remat bench`
# alternates `run_into` and `run` call by call, so both are in the profile. Prefix
# GLIBC_TUNABLES=... to see the fresh-output page faults go (docs/benchmarks.md).
# Needs `perf` (Debian's linux-perf) and python3.
set -euo pipefail
cd "$(dirname "$0")/../../.."
name="$1"
runs="${2:-100}"
program="${BENCH_DIR:-../shared/bench}/$name.jaxpr"
cargo build --release -p remat-cli >/dev/null 2>&1
data="$(mktemp)"
trap 'rm -f "$data"' EXIT
perf record -q -e cpu-clock -F 2000 -o "$data" ./target/release/remat bench --runs "$runs" "$program" >/dev/null 2>&1
perf report -i "$data" --no-children --sort dso,symbol 2>/dev/null | python3 -c '
import collections, re, sys

shares = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(.+?)\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    share, dso, mode, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
    if mode == "k":
        kind = "Linux kernel (page faults, scheduling)"
    elif "sgemm::kernel" in sym:
        kind = "GEMM microkernel"
    elif "sgemm::pack_" in sym:
        kind = "GEMM packing"
    elif dso.startswith("[JIT]") or re.match(r"k\d+ ", sym):
        kind = "JIT-compiled loops"
    elif "vmath" in sym:
        kind = "native tanh/exp rows"
    elif re.search(r"faer|gemm_|matrixmultiply|pulp", sym):
        kind = "other GEMM crates"
    elif re.search(r"rayon|crossbeam|sched_yield", sym):
        kind = "thread pool"
    elif dso.startswith("libc"):
        kind = "libc"
    else:
        kind = "other"
    shares[kind] += share
print("; ".join(f"{kind} {share:.1f}%" for kind, share in shares.most_common()))
'
