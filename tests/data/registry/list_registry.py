"""Lists JAX's primitive registry: every `jax._src.core.Primitive` instance that a module under
`jax._src` defines, one line per name, `NAME MODULE` (the first module, in import order, that holds
it), sorted by name. Modules for accelerators only (tpu, mosaic, pallas, gpu, cuda, rocm, triton)
and modules that fail to import on this machine are skipped, as ../shared/guide/WAVE3_NOTES.md
describes. The output is `jax_0.10.2_primitives.txt` beside this script; docs/ir.md's coverage
table lists every name in it, which crates/remat/tests/registry.rs checks.

    pip install jax==0.10.2
    python3 tests/data/registry/list_registry.py > tests/data/registry/jax_0.10.2_primitives.txt
"""
import importlib
import pkgutil
import sys

import jax
import jax._src
from jax._src import core

SKIP = ("tpu", "mosaic", "pallas", "gpu", "cuda", "rocm", "triton")


def registry():
    found = {}
    for info in pkgutil.walk_packages(jax._src.__path__, "jax._src."):
        if any(s in info.name for s in SKIP):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # a module this machine cannot import holds no CPU primitive
            continue
        for value in vars(module).values():
            if isinstance(value, core.Primitive):
                found.setdefault(value.name, info.name)
    return found


if __name__ == "__main__":
    if jax.__version__ != "0.10.2":
        sys.exit(f"this lists JAX 0.10.2's registry; jax {jax.__version__} is installed")
    for name, module in sorted(registry().items()):
        print(name, module)
