"""How far remat's and XLA's float32 results each are from a float64 computation of the same
function on the same arguments: where the two float32 results differ more than rounding in a
well-conditioned computation would explain (distributions.sh's `uniform` rows of the
transformers), this says whether remat is less accurate than XLA or both are equally far
from the exact answer.

    python3 crates/jit/bench/f64_reference.py transformer_plain uniform

Per output: the largest |f64| value, and each float32 side's largest absolute difference from
float64, relative to that value (the same measure as distributions.sh's "max rel diff").
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distributions as d  # noqa: E402
import jax  # noqa: E402


def main():
    name, dist = sys.argv[1], sys.argv[2]
    jaxpr, arg_names, f, kw, leaves, tree = d.program(name, d.model_names())
    if dist == "tiny":
        raise SystemExit("tiny needs its scale; use jax, uniform or saturate")
    arrays = d.transform(name, dist, leaves, arg_names)
    c = jax.jit(f, **kw)
    f32 = [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(c(*d.args_of(arrays, tree)))]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        d.write_inputs(f"{tmp}/in.json", arrays)
        remat = [np.asarray(x, np.float64) for x in d.remat_outputs(jaxpr, f"{tmp}/in.json", f"{tmp}/out.json")]
    jax.config.update("jax_enable_x64", True)
    wide = [a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a for a in arrays]
    f64 = [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(jax.jit(f, **kw)(*d.args_of(wide, tree)))]
    print(f"{name}, {dist} arguments: each float32 side against float64 (largest |diff| / largest |f64|)")
    print("| output | largest abs f64 | XLA f32 | remat f32 | XLA against remat |")
    print("|---|---:|---:|---:|---:|")
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(c(*d.args_of(arrays, tree)))]
    worst = [0.0, 0.0]
    for n, x, r, e in zip(names, f32, remat, f64):
        scale = float(np.abs(e).max()) or 1.0
        ex, er, xr = (float(np.abs(a - b).max()) / scale for a, b in ((x, e), (r, e), (x, r)))
        worst = [max(worst[0], ex), max(worst[1], er)]
        print(f"| {n or 'value'} | {scale:.3g} | {ex:.2e} | {er:.2e} | {xr:.2e} |")
    print(f"worst: XLA {worst[0]:.2e}, remat {worst[1]:.2e}")


if __name__ == "__main__":
    main()
