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


class Captured(Exception):
    """Raised by the wrapped `jax.jit(f).lower(*args)` to stop the generator there."""

    def __init__(self, f, kw, args):
        super().__init__("captured")
        self.f, self.kw, self.args = f, kw, args


def capture(gen, name):
    """The function, `jax.jit` keywords and arguments `GEN --time NAME` lowers first."""
    real_jit = jax.jit

    class Capture:
        def __init__(self, f, **kw):
            self.f, self.kw = f, kw

        def __call__(self, *args):
            return real_jit(self.f, **self.kw)(*args)

        def lower(self, *args):
            raise Captured(self.f, self.kw, args)

    argv, stdout = sys.argv, sys.stdout
    jax.jit = Capture
    sys.argv = [gen, "--time", name]
    try:
        runpy.run_path(gen, run_name="__main__")
    except Captured as c:
        return c.f, c.kw, c.args
    finally:
        jax.jit, sys.argv, sys.stdout = real_jit, argv, stdout
    raise SystemExit(f"{gen} --time {name} never lowered a program")


def main():
    gen, name, out = sys.argv[1:4]
    _, _, args = capture(gen, name)
    arrays = []
    for a in jax.tree_util.tree_leaves(args):
        a = np.asarray(a)
        if a.dtype != np.float32:
            raise SystemExit(f"{name}: an argument of dtype {a.dtype}; only f32 is written")
        arrays.append({"dtype": "f32", "shape": list(a.shape), "data": a.ravel().tolist()})
    with open(out, "w") as f:
        json.dump(arrays, f)


if __name__ == "__main__":
    main()
