"""Prints a deep tanh MLP as a jaxpr, the planner's scale benchmark (docs/planner.md,
"Scale, measured for issue 43"): `x = tanh(x @ w)` for LAYERS layers, one shared
`f32[16,16]` weight and `f32[8,16]` activations, then the sum: 2 * LAYERS + 1 equations.

    python3 gen_mlp.py 5000 > mlp10k.jaxpr     # 10,001 equations
    python3 gen_mlp.py 50000 > mlp100k.jaxpr   # 100,001 equations
"""
import sys


def mlp(layers, n=8, d=16):
    lines = [f"{{ lambda ; w:f32[{d},{d}] x0:f32[{n},{d}]. let"]
    dot = "dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None preferred_element_type=float32]"
    for i in range(layers):
        lines.append(f"    h{i}:f32[{n},{d}] = {dot} x{i} w")
        lines.append(f"    x{i + 1}:f32[{n},{d}] = tanh h{i}")
    lines.append(f"    s:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] x{layers}")
    lines.append("  in (s,) }")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(mlp(int(sys.argv[1])))
