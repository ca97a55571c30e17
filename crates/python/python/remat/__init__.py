"""remat for JAX users: see what a JAX function's gradient keeps in memory, plan what it
should recompute to fit a byte budget, apply the plan back to the function, and run it
through remat's native code.

    import remat
    remat.print_saved_residuals(loss, params, batch)      # JAX's lines, with bytes
    plan = remat.plan(loss, params, batch, budget="2GiB")   # what to save, what to recompute
    fast = jax.jit(jax.value_and_grad(plan.apply(loss)))    # the plan, in JAX

Every function takes a JAX function and example arguments (arrays or
`jax.ShapeDtypeStruct`s, in any pytree), traces it with `jax.make_jaxpr` in process and
hands the program to remat's Rust core in memory. docs/python.md describes the API.
"""

from ._remat import RematError
from ._inspect import (
    Ledger,
    Report,
    Residual,
    Residuals,
    explain,
    parse_budget,
    print_saved_residuals,
    report,
    saved_residuals,
)
from ._plan import Plan, XlaMemory, plan
from ._run import jit, value_and_grad

__all__ = [
    "RematError",
    "Ledger",
    "Report",
    "Residual",
    "Residuals",
    "explain",
    "jit",
    "parse_budget",
    "plan",
    "Plan",
    "XlaMemory",
    "print_saved_residuals",
    "report",
    "saved_residuals",
    "value_and_grad",
]
