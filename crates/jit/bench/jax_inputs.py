"""The arguments JAX times a benchmark program with, as `remat bench --inputs` reads them.

    python3 crates/jit/bench/jax_inputs.py GEN NAME OUT.json

GEN is the script that times NAME in JAX (`../shared/bench/gen_bench.py` or
`crates/jit/bench/gen_models.py`). It is run as `GEN --time NAME`, with `jax.jit` wrapped
so that the first `jax.jit(f).lower(*args)` (where its timing starts) writes `args`, the
leaves in the order of the program's inputs, to OUT.json and stops. So remat times JAX's
program on the very values XLA is timed on: the same parameter initialisation (normal
divided by the square root of the fan-in, layer-norm gains of one) rather than remat
bench's default uniform values in [-1, 1], on which the transformers run 3-7% slower (their
softmax saturates: `exp` and the softmax's backward loop take twice the time on values far
into `exp`'s underflow; docs/benchmarks.md).
"""
import json
import runpy
import sys

import jax
import numpy as np


def main():
    gen, name, out = sys.argv[1:4]
    real_jit = jax.jit

    class Capture:
        def __init__(self, f, **kw):
            self.f, self.kw = f, kw

        def __call__(self, *args):
            return real_jit(self.f, **self.kw)(*args)

        def lower(self, *args):
            leaves = jax.tree_util.tree_leaves(args)
            arrays = []
            for a in leaves:
                a = np.asarray(a)
                if a.dtype != np.float32:
                    raise SystemExit(f"{name}: an argument of dtype {a.dtype}; only f32 is written")
                arrays.append({"dtype": "f32", "shape": list(a.shape), "data": a.ravel().tolist()})
            with open(out, "w") as f:
                json.dump(arrays, f)
            raise SystemExit(0)

    jax.jit = Capture
    sys.argv = [gen, "--time", name]
    runpy.run_path(gen, run_name="__main__")
    raise SystemExit(f"{gen} --time {name} never lowered a program")


if __name__ == "__main__":
    main()
