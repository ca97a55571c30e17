"""Speed on any input (issue 41): every benchmark program timed on several distributions of
its arguments, remat's JIT and JAX's XLA on the same arguments, with remat's outputs
compared to JAX's.

    python3 crates/jit/bench/distributions.py [--runs N] [--rounds R] [--dists D,...] NAME...
    python3 crates/jit/bench/distributions.py --digest NAME...   # the arguments' digests only
    python3 crates/jit/bench/distributions.py --scores NAME...   # the attention scores' saturation
    python3 crates/jit/bench/distributions.py --per-output NAME...  # also each output's agreement

Run from the repository root (crates/jit/bench/distributions.sh builds remat, selects the
programs and prints the machine first). For each program NAME the script runs its
generator's `--time NAME` (`../shared/bench/gen_bench.py`, or `gen_models.py` beside this
for the realistic-size models) with `jax.jit` wrapped, as `jax_inputs.py` does, but keeps
the jitted function `f`, `jax.jit`'s keyword arguments and the arguments of the first
`lower` instead of writing them and exiting. Then, per distribution:

- the float arguments are transformed (below); every other argument, and the one-hot
  `labels` of the CNN and the ResNet block (f32 arrays, but class indices in meaning), stay
  as JAX made them;
- the arguments are written as `remat bench --inputs` reads them;
- in ROUNDS alternating rounds, `remat bench NAME.jaxpr --inputs ... --runs N --json` (with
  glibc's allocation thresholds pinned, as `table.sh` runs it) and JAX's compiled
  `jax.jit(f, **kw)` timed in this process as the generators time it (one warm-up call,
  then the median of N calls of `block_until_ready(c(*args))`); each side keeps its best
  median over the rounds, as `table.sh` does;
- remat's outputs (`remat eval --backend jit`) are compared with JAX's outputs on the same
  arguments, element by element.

The distributions (`--dists`, default all four, in this order):

- `jax`: JAX's arguments, what the generator times the program with (weights normal over
  the square root of the fan-in, norm gains of one, inputs normal).
- `uniform`: every float argument uniform in [-1, 1], drawn from numpy's PCG64 seeded with
  (SEED, crc32(NAME), the argument's index): what `remat bench` gives a program it is not
  given arguments for, in kind (not its exact values).
- `saturate`: JAX's arguments times SATURATE = 2.5. The attention scores of the transformer
  and GPT blocks are products of two projections of a normed input whose gain is scaled
  too, so they grow by 2.5^4 = 39: in the first block, where a row's scores spread over
  about 5 units in JAX's arguments, they spread over about 200, 62% (transformer_plain) and
  69% (gpt_plain) of the softmax's `exp` arguments fall below -87.3 (`exp`'s result is not
  normal) and about 15% between -103.9 and -87.3 (where it is subnormal, before FTZ) --
  `--scores NAME` prints these shares. The CNN's logits grow by 2.5^4 too (three products
  and the input), so its softmax cross-entropy saturates; `tanh` saturates in the MLPs and
  the RNNs.
- `tiny`: JAX's arguments times the largest power of ten from 1e-1 down to 1e-30 at which
  at least 1% more of JAX's output elements are exactly 0 than on JAX's arguments: the
  scale where the backward pass starts to underflow (XLA flushes what would be subnormal
  to 0). It differs by program (in the check runs: 1e-1 for gelu_deep_plain's 32 layers,
  1e-3 for mlp_small, 1e-4 for mlp_large_plain and the transformer and GPT blocks, 1e-9 for
  scan_long_plain, 1e-12 for cnn_plain); the table names it, as `tiny (1e-04)`.

Columns: remat's `run` (fresh outputs, as JAX's call returns) best median, JAX's best
median, their ratio, and the comparison of the outputs: the largest absolute difference,
the largest difference relative to the output's largest magnitude on either side (per
output, the worst output reported: 1 where one side's output is all zeros and the other's
is not), the elements where one side is exactly 0 and the other subnormal
(a flush the other side did not do) or the other normal (a larger disagreement), the
elements where exactly one side is not finite, and the share of JAX's output elements that
are exactly 0.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_BENCH = os.environ.get("GEN_BENCH", os.path.join(HERE, "../../../../shared/bench/gen_bench.py"))
GEN_MODELS = os.path.join(HERE, "gen_models.py")
REMAT = os.environ.get("REMAT", "./target/release/remat")
# glibc's allocation thresholds pinned at their defaults, as table.sh runs remat (docs/benchmarks.md,
# "The allocator's state").
PINNED = "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072"

SEED = 41
SATURATE = 2.5
# The `tiny` scales tried, largest first, and the share of JAX's output elements that must
# newly be 0 at the chosen one.
TINY_LADDER = [10.0 ** -e for e in range(1, 31)]
TINY_ZEROS = 0.01
DISTS = ("jax", "uniform", "saturate", "tiny")
# Arguments kept as JAX made them whatever the distribution: class labels (one-hot f32).
KEEP = {"labels"}
F32_MIN_NORMAL = np.finfo(np.float32).tiny


from jax_inputs import capture  # noqa: E402 (beside this script)


def model_names():
    spec = importlib.util.spec_from_file_location("gen_models", GEN_MODELS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return set(mod.programs())


def transform(name, dist, leaves, arg_names, tiny=None):
    """The arguments of distribution `dist` (for `tiny`, scaled by `tiny`): numpy arrays,
    one per leaf, deterministic."""
    out = []
    for i, (a, an) in enumerate(zip(leaves, arg_names)):
        a = np.asarray(a)
        if not np.issubdtype(a.dtype, np.floating) or an in KEEP or dist == "jax":
            out.append(a)
        elif dist == "uniform":
            rng = np.random.Generator(np.random.PCG64([SEED, zlib.crc32(name.encode()), i]))
            out.append(rng.uniform(-1.0, 1.0, a.shape).astype(a.dtype))
        elif dist == "saturate":
            out.append((a * a.dtype.type(SATURATE)).astype(a.dtype))
        elif dist == "tiny":
            out.append((a * a.dtype.type(tiny)).astype(a.dtype))
        else:
            raise SystemExit(f"unknown distribution {dist!r}; known: {', '.join(DISTS)}")
    return out


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32"}


def write_inputs(path, arrays):
    with open(path, "w") as f:
        json.dump([{"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data": a.ravel().tolist()}
                   for a in arrays], f)


def read_outputs(path):
    with open(path) as f:
        outs = json.load(f)["outputs"]
    res = []
    for o in outs:
        dt = {"f32": np.float32, "i32": np.int32}[o["dtype"]]
        # Non-finite values are written as strings ("nan", "inf", "-inf") if at all.
        res.append(np.array([float(x) for x in o["data"]], dtype=dt).reshape(o["shape"]))
    return res


def time_jax(c, args, runs):
    """The generators' timing: one warm-up call, then the median of `runs` calls, in ms."""
    jax.block_until_ready(c(*args))
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        jax.block_until_ready(c(*args))
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def time_remat(jaxpr, inputs, runs):
    env = dict(os.environ, GLIBC_TUNABLES=PINNED)
    p = subprocess.run([REMAT, "bench", jaxpr, "--inputs", inputs, "--runs", str(runs), "--json"],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"remat bench {jaxpr} failed: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def remat_outputs(jaxpr, inputs, out):
    p = subprocess.run([REMAT, "eval", jaxpr, "--inputs", inputs, "--backend", "jit", "--nans", "propagate",
                        "--out", out], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"remat eval {jaxpr} failed: {p.stderr.strip()}")
    return read_outputs(out)


def compare(remat, jax_outs):
    """Element-wise agreement of remat's outputs with JAX's."""
    if len(remat) != len(jax_outs):
        raise SystemExit(f"remat returned {len(remat)} outputs, JAX {len(jax_outs)}")
    abs_diff = rel_diff = 0.0
    zero_sub = zero_normal = nonfinite = zeros = total = 0
    for r, j in zip(remat, jax_outs):
        r = np.asarray(r, np.float64).ravel()
        j = np.asarray(j, np.float64).ravel()
        if r.shape != j.shape:
            raise SystemExit(f"output shapes differ: remat {r.shape}, JAX {j.shape}")
        fin = np.isfinite(r) & np.isfinite(j)
        # A NaN on both sides, or the same infinity, agrees.
        same_nonfinite = ~fin & ((np.isnan(r) & np.isnan(j)) | (r == j))
        nonfinite += int(np.count_nonzero(~fin & ~same_nonfinite))
        d = np.abs(r[fin] - j[fin])
        if d.size:
            abs_diff = max(abs_diff, float(d.max()))
            scale = max(float(np.abs(j[fin]).max()), float(np.abs(r[fin]).max()))
            if scale > 0:
                rel_diff = max(rel_diff, float(d.max()) / scale)
        for a, b in ((r, j), (j, r)):
            z = (a == 0) & np.isfinite(b) & (b != 0)
            sub = np.abs(b) < F32_MIN_NORMAL
            zero_sub += int(np.count_nonzero(z & sub))
            zero_normal += int(np.count_nonzero(z & ~sub))
        zeros += int(np.count_nonzero(j == 0))
        total += j.size
    return dict(max_abs=abs_diff, max_rel=rel_diff, zero_vs_subnormal=zero_sub, zero_vs_normal=zero_normal,
                nonfinite_mismatch=nonfinite, jax_zero_pct=100.0 * zeros / max(total, 1))


def program(name, models):
    gen = GEN_MODELS if name in models else GEN_BENCH
    jaxpr = f"tests/data/bench/{name}.jaxpr"
    with open(f"tests/data/bench/{name}.json") as f:
        arg_names = json.load(f)["arg_names"]
    f, kw, args = capture(gen, name)
    leaves, tree = jax.tree_util.tree_flatten(args)
    if len(leaves) != len(arg_names):
        raise SystemExit(f"{name}: {len(leaves)} arguments captured, {len(arg_names)} in {name}.json")
    return jaxpr, arg_names, f, kw, leaves, tree


def args_of(arrays, tree):
    return jax.tree_util.tree_unflatten(tree, [jax.numpy.asarray(a) for a in arrays])


def zero_share(c, arrays, tree):
    outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.block_until_ready(c(*args_of(arrays, tree))))]
    return sum(int(np.count_nonzero(o == 0)) for o in outs) / sum(o.size for o in outs)


def choose_tiny(c, name, leaves, arg_names, tree):
    """The largest scale of TINY_LADDER at which JAX's outputs newly hold TINY_ZEROS more zeros."""
    base = zero_share(c, leaves, tree)
    for t in TINY_LADDER:
        if zero_share(c, transform(name, "tiny", leaves, arg_names, t), tree) >= base + TINY_ZEROS:
            return t
    raise SystemExit(f"{name}: no scale down to {TINY_LADDER[-1]:g} underflows JAX's outputs")


def scores(name, leaves, arg_names, tree):
    """The first attention block's softmax arguments (score minus its row's maximum) per
    distribution: the median row spread and the shares past `exp`'s normal range."""
    for d in ("jax", "uniform", "saturate"):
        params, x = args_of(transform(name, d, leaves, arg_names), tree)
        p = params[0] if isinstance(params, list) else params["block"]
        g, b = (p["g1"], 0.0) if "g1" in p else (p["ln1_g"], p["ln1_b"])
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        h = (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b
        q, k = h @ p["wq"], h @ p["wk"]
        B, T, D = q.shape
        heads = 4  # both generators' blocks
        q, k = q.reshape(B, T, heads, D // heads), k.reshape(B, T, heads, D // heads)
        s = np.asarray(jax.numpy.einsum("bthd,bshd->bhts", q, k)) / np.sqrt(D // heads)
        s = s - s.max(-1, keepdims=True)
        print(f"{name} {d}: median row spread {np.median(-s.min(-1)):.1f}; exp arguments below -87.3: "
              f"{100 * (s < -87.3).mean():.1f}%, in (-103.9, -87.3): {100 * ((s < -87.3) & (s > -103.9)).mean():.1f}%")


def fmt(x):
    return "0" if x == 0 else f"{x:.2e}"


HEADER = ("| program | distribution | remat run ms (run, fresh outputs) | JAX run ms | JAX/remat (run) | "
          "max abs diff | max rel diff | 0 vs subnormal | 0 vs normal | non-finite mismatches | JAX zeros % |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dists", default=",".join(DISTS))
    ap.add_argument("--header", action="store_true", help="print the table's header first")
    ap.add_argument("--digest", action="store_true", help="print a digest of each distribution's arguments only")
    ap.add_argument("--scores", action="store_true", help="print the attention scores' shares only")
    ap.add_argument("--per-output", action="store_true", help="after each row, compare each output on its own")
    o = ap.parse_args()
    dists = o.dists.split(",")
    for d in dists:
        if d not in DISTS:
            raise SystemExit(f"unknown distribution {d!r}; known: {', '.join(DISTS)}")
    jax.config.update("jax_platform_name", "cpu")
    models = model_names()
    if o.header:
        print(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        inputs, outputs = os.path.join(tmp, "inputs.json"), os.path.join(tmp, "outputs.json")
        for name in o.names:
            jaxpr, arg_names, f, kw, leaves, tree = program(name, models)
            if o.scores:
                scores(name, leaves, arg_names, tree)
                continue
            c = jax.jit(f, **kw).lower(*args_of(leaves, tree)).compile()
            tiny = choose_tiny(c, name, leaves, arg_names, tree) if "tiny" in dists else None
            for d in dists:
                arrays = transform(name, d, leaves, arg_names, tiny)
                label = f"tiny ({tiny:.0e})" if d == "tiny" else d
                if o.digest:
                    print(name, label, digest(arrays), flush=True)
                    continue
                write_inputs(inputs, arrays)
                args = args_of(arrays, tree)
                r, j = [], []
                for _ in range(o.rounds):
                    r.append(time_remat(jaxpr, inputs, o.runs)["run_fresh_outputs_median_ms"])
                    j.append(time_jax(c, args, o.runs))
                ours = remat_outputs(jaxpr, inputs, outputs)
                theirs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.block_until_ready(c(*args)))]
                cmp = compare(ours, theirs)
                rm, jm = min(r), min(j)
                ratio = jm / rm
                print(f"| {name} | {label} | {rm:.3f} | {jm:.3f} | {ratio:.2f}{'' if ratio >= 1.0 else ' (miss)'} | "
                      f"{fmt(cmp['max_abs'])} | {fmt(cmp['max_rel'])} | {cmp['zero_vs_subnormal']} | "
                      f"{cmp['zero_vs_normal']} | {cmp['nonfinite_mismatch']} | {cmp['jax_zero_pct']:.1f} |",
                      flush=True)
                if o.per_output:
                    for n, a, b in zip(["value"] + arg_names, ours, theirs):
                        m = compare([a], [b])
                        print(f"    {n} {list(b.shape)}: max |JAX| {fmt(float(np.abs(b).max()))}, max abs diff "
                              f"{fmt(m['max_abs'])}, max rel diff {fmt(m['max_rel'])}, 0 vs subnormal "
                              f"{m['zero_vs_subnormal']}, 0 vs normal {m['zero_vs_normal']}", flush=True)


if __name__ == "__main__":
    main()
