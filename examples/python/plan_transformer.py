"""Plan a transformer's gradient for a memory budget, check the plan with XLA, and write the
report: what `remat` is for, from Python.

    pip install ./crates/python          # once (builds remat with maturin)
    python examples/python/plan_transformer.py [--small] [--budget 6MiB] [--report transformer.html]

It traces a pre-norm transformer (4 blocks, d_model 256, sequence 128, batch 4) with JAX,
asks remat's planner for the plans JAX can run as they are (built-in policies, names
policies over the model's values, checkpointed segments), prints the frontier of peak
bytes against recomputed FLOPs with XLA's own memory analysis of each plan, picks the
plan whose XLA temp bytes fit the budget (`measure="xla"`), checks that JAX saves what
the plan says and computes the same gradients, and writes the HTML report.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax._src.ad_checkpoint import saved_residuals

import remat


def block(p, x):
    h = x
    mu = jnp.mean(h, -1, keepdims=True)
    var = jnp.mean((h - mu) ** 2, -1, keepdims=True)
    h = (h - mu) * jax.lax.rsqrt(var + 1e-5) * p["g1"]
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    B, T, D = q.shape
    H = 4
    q, k, v = (a.reshape(B, T, H, D // H) for a in (q, k, v))
    s = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(D // H).astype(np.float32)
    a = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhts,bshd->bthd", a, v).reshape(B, T, D)
    x = x + checkpoint_name(o @ p["wo"], "attn_out")
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    h = (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["g2"]
    h = checkpoint_name(jax.nn.gelu(h @ p["w1"]), "mlp_hidden")
    return x + h @ p["w2"]


def loss(params, x):
    for p in params:
        x = block(p, x)
    return jnp.mean(x**2)


def make_args(layers, D, T, B):
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    params = [
        dict(g1=np.ones(D, np.float32), g2=np.ones(D, np.float32), wq=w(D, D), wk=w(D, D), wv=w(D, D),
             wo=w(D, D), w1=w(D, 4 * D), w2=w(4 * D, D))
        for _ in range(layers)
    ]
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    return params, x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small model (2 blocks, d_model 32): seconds, not a minute")
    ap.add_argument("--budget", help="the budget for XLA's temp bytes (default: between the plans' smallest and largest)")
    ap.add_argument("--report", default="transformer_report.html", help="where to write the HTML report")
    a = ap.parse_args()
    params, x = make_args(*((2, 32, 16, 2) if a.small else (4, 256, 128, 4)))

    t0 = time.perf_counter()
    traced = remat._trace.trace(loss, (params, x))
    planner = traced.program.planner()
    print(f"planned {len(traced.closed.jaxpr.eqns)} equations in {time.perf_counter() - t0:.1f} s "
          f"({planner.method()}, {planner.evaluated()} plans evaluated exactly)")

    # The frontier, each plan also measured by XLA.
    print(f"\n{'remat peak':>12} {'XLA temp':>12} {'recompute FLOPs':>16}  plan")
    rows = []
    for point in planner.frontier():
        plan = remat.plan(loss, params, x, budget=point["peak_bytes"])
        xla = plan.xla_memory()
        rows.append((plan, xla))
        print(f"{plan.peak_bytes:>12,} {xla.temp_bytes:>12,} {plan.recompute_flops:>16,}  {plan.policy_call[:70]}")
    temps = sorted(x.temp_bytes for _, x in rows)
    budget = remat.parse_budget(a.budget) if a.budget else (temps[0] + temps[-1]) // 2

    # The plan XLA says fits, checked in JAX.
    plan = remat.plan(loss, params, x, budget=budget, measure="xla")
    print(f"\nfor {remat._inspect.human_bytes(budget)} of XLA temp bytes: {plan.policy_call}")
    print(f"  XLA: {plan.xla_memory()}; remat's peak {remat._inspect.human_bytes(plan.peak_bytes)}, "
          f"{plan.recompute_flops:,} FLOPs recomputed")
    fast = jax.jit(jax.value_and_grad(plan.apply(loss)))
    value, grads = fast(params, x)
    want_value, want_grads = jax.value_and_grad(loss)(params, x)
    err = max(float(np.max(np.abs(g - w))) for g, w in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want_grads)))
    jax_lines = [f"{v.str_short(short_dtypes=True)} {d}" for v, d in saved_residuals(plan.apply(loss), params, x)]
    print(f"  loss {float(value):.6f} (as written {float(want_value):.6f}), largest gradient difference {err:.2e}")
    print(f"  JAX saves what the plan says: {jax_lines == [r.line for r in plan.saved]} ({len(jax_lines)} residuals)")

    report = remat.report(loss, params, x, policies=[jax.checkpoint_policies.dots_saveable], budgets=[plan.peak_bytes])
    report.save(a.report)
    print(f"\nwrote {a.report}")


if __name__ == "__main__":
    main()
