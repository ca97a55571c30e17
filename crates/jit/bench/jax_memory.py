"""XLA's memory plan for the benchmark programs: one JSON line per program.

    python3 crates/jit/bench/jax_memory.py NAME...      # from the repository root

Runs ../shared/bench/gen_bench.py --time NAME (which builds the program's model, jits its
value_and_grad, compiles and times it) with `jax.stages.Lowered.compile` wrapped to keep
the compiled executable, and prints its `memory_analysis()`: `temp_bytes` is XLA's buffer
for intermediate values (arguments and outputs excluded, as remat's `peak_bytes`). XLA,
like remat, keeps intermediate values in output buffers before the outputs are written, so
neither figure counts those.
"""
import importlib.util
import json
import os
import runpy
import sys

import jax

here = os.path.dirname(os.path.abspath(__file__))
gen = os.environ.get("GEN_BENCH", os.path.join(here, "../../../../shared/bench/gen_bench.py"))
# The realistic-size models (CNN, ResNet block, GPT block, ...) come from gen_models.py
# beside this: every program its `programs()` names.
model_gen = os.path.join(here, "gen_models.py")
spec = importlib.util.spec_from_file_location("gen_models", model_gen)
gen_models = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_models)
model_names = set(gen_models.programs())
compiled = []
compile_ = jax.stages.Lowered.compile


def keep(self, *args, **kwargs):
    c = compile_(self, *args, **kwargs)
    compiled.append(c)
    return c


jax.stages.Lowered.compile = keep
for name in sys.argv[1:]:
    compiled.clear()
    g = model_gen if name in model_names else gen
    sys.argv = [g, "--time", name]
    stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")  # gen_bench's own timing line
    try:
        runpy.run_path(g, run_name="__main__")
    finally:
        sys.stdout.close()
        sys.stdout = stdout
    m = compiled[-1].memory_analysis()
    print(json.dumps(dict(name=name, temp_bytes=m.temp_size_in_bytes, argument_bytes=m.argument_size_in_bytes,
                          output_bytes=m.output_size_in_bytes)), flush=True)
