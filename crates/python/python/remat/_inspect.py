"""What a gradient keeps: `saved_residuals`, `print_saved_residuals`, `explain` and
`report`, each on a JAX function and example arguments."""

from __future__ import annotations

import dataclasses
import html as _html
import operator
from typing import Any, Callable, Optional

import jax

from . import _remat
from ._trace import RematError, trace


def _checkpointed(f: Callable, policy) -> Callable:
    return f if policy is None else jax.checkpoint(f, policy=policy)


def human_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


@dataclasses.dataclass(frozen=True)
class Residual:
    """One value the forward half saves for the backward half, in JAX's words."""

    aval: str
    """`f32[64,64]`."""
    bytes: int
    kind: str
    """`argument`, `output`, `named`, ... (the kind of JAX's line)."""
    what: str
    source: str
    """`model.py:12:5 (f)`, JAX's `source_info_util.summarize` (empty where unknown)."""
    line: str
    """The line `jax.ad_checkpoint.print_saved_residuals` prints."""

    @property
    def description(self) -> str:
        """What `jax.ad_checkpoint.saved_residuals` pairs with the aval: the line without it."""
        return self.line[len(self.aval) + 1:] if self.line.startswith(self.aval + " ") else self.line

    def __str__(self) -> str:
        return self.line


class Residuals(list):
    """The residuals of a vjp, in JAX's order; prints as `print_saved_residuals` does, with
    each line's bytes and the total."""

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self)

    def __str__(self) -> str:
        width = max((len(r.line) for r in self), default=0)
        lines = [f"{r.line:<{width}}  {human_bytes(r.bytes):>11}" for r in self]
        lines.append(f"{'total':<{width}}  {human_bytes(self.total_bytes):>11}  ({len(self)} residuals)")
        return "\n".join(lines)


def saved_residuals(f: Callable, *args, policy=None) -> Residuals:
    """What the vjp of `f` at `args` saves for its backward pass, as
    `jax.ad_checkpoint.saved_residuals` says it, with each value's bytes. With `policy`, `f`
    is checkpointed with it first (`jax.checkpoint(f, policy=policy)`). `args` may hold
    arrays or `jax.ShapeDtypeStruct`s, in any pytree."""
    t = trace(_checkpointed(f, policy), args)
    return Residuals(Residual(**r) for r in t.program.saved_residuals())


def print_saved_residuals(f: Callable, *args, policy=None) -> None:
    """Prints [`saved_residuals`]: JAX's lines, each with its bytes, then the total."""
    print(saved_residuals(f, *args, policy=policy))


@dataclasses.dataclass
class Ledger:
    """The residual ledger: the vjp planned as one program (forward then backward), each
    saved residual with its bytes, lifetime, why it is saved and what recomputing it would
    cost, then the other buffers at the peak and the sum that makes the planned peak."""

    rows: list
    peak: dict
    plan: dict
    equations: int
    text: str

    @property
    def peak_bytes(self) -> int:
        return self.peak["peak_bytes"]

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<pre>{_html.escape(self.text)}</pre>"


def _policy_word(policy) -> str:
    """A JAX policy as the ledger's and the report's words (`dots`, `names:a+b`)."""
    cp = jax.checkpoint_policies
    if policy is cp.nothing_saveable:
        return "nothing"
    if policy is cp.everything_saveable:
        return "everything"
    r = repr(policy)
    if r == "DotsSaveable(only_if_no_batch_dims=False)":
        return "dots"
    if r == "DotsSaveable(only_if_no_batch_dims=True)":
        return "dots_no_batch"
    names = getattr(policy, "saveable_names", None)
    if type(policy).__name__ == "SaveOnlyTheseNames" and names is not None:
        return "names:" + "+".join(sorted(names))
    raise RematError(
        f"policy {policy!r}: a report or ledger side is one of jax.checkpoint_policies' nothing_saveable, "
        "everything_saveable, dots_saveable, dots_with_no_batch_dims_saveable or save_only_these_names(...); "
        "for another policy, checkpoint the function with it and explain that"
    )


def explain(f: Callable, *args, policy=None, budget=None) -> Ledger:
    """The residual ledger of the vjp of `f` at `args`: as written, with every checkpoint
    under `policy` (the whole function checkpointed when it has none), or under the memory
    planner's plan for `budget` bytes (`12GiB`, `1.5GB`, or an int)."""
    if policy is not None and budget is not None:
        raise RematError("explain: give a policy or a budget, not both")
    t = trace(f, args)
    word = None if policy is None else _policy_word(policy)
    d = t.program.explain(policy=word, budget=None if budget is None else parse_budget(budget))
    return Ledger(rows=d["residuals"], peak=d["peak"], plan=d["plan"], equations=d["equations"], text=d["text"])


_MAX_BYTES = (1 << 64) - 1  # a usize on the 64-bit machines remat builds for


def parse_budget(budget) -> int:
    """Bytes from `12GiB`, `1.5GB`, `64MiB`, `1000000` or an int (as `remat plan --budget`)."""
    if isinstance(budget, str):
        return _remat.parse_budget(budget)
    if isinstance(budget, bool) or not hasattr(budget, "__index__"):
        raise RematError(f"budget {budget!r}: expected bytes, such as 12 * 2**30 or '12GiB'")
    n = operator.index(budget)  # an int, or a NumPy integer
    if n < 0:
        raise RematError(f"budget {n}: a number of bytes is not negative")
    if n > _MAX_BYTES:
        raise RematError(f"budget {n}: more bytes than remat counts (at most {_MAX_BYTES}, 2**64 - 1)")
    return n


class Report:
    """The HTML report of a vjp (memory over program order, the split, the frontier, the
    ledger); Jupyter shows it inline, `save` writes it."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.html)


def report(f: Callable, *args, policies=(), budgets=(), title: Optional[str] = None, figure: Optional[str] = None):
    """The report of the vjp of `f` at `args`: the function as written, and one side per
    policy in `policies` and per budget in `budgets` (at most six sides). With `figure`
    (`memory`, `split` or `frontier`), that figure alone, as SVG text; the split figure
    draws one side: the function as written, or the one policy or budget given."""
    if title is not None and not isinstance(title, str):
        raise RematError(f"report: the title is a str, not {type(title).__name__}")
    t = trace(f, args)
    sides = [_policy_word(p) for p in policies] + [f"budget:{parse_budget(b)}" for b in budgets]
    twice = next((s for i, s in enumerate(sides) if s in sides[:i]), None)
    if twice is not None:
        # As the command line's --compare: a side given twice would be drawn twice.
        raise RematError(f"report: the side {twice} is given twice")
    if figure == "split" and len(sides) > 1:
        raise RematError(
            f"report: the split figure draws one side, and {len(sides)} are given: "
            "give at most one policy or budget (none for the function as written)"
        )
    if sides and figure != "split":
        sides = ["as-written"] + sides
    if len(sides) > 6:
        raise RematError(
            f"report: {len(sides)} sides (the function as written, {len(policies)} policies and {len(budgets)} "
            "budgets); a report compares at most 6"
        )
    name = title or getattr(f, "__name__", "function")
    out = t.program.report(name, sides, figure)
    return out if figure is not None else Report(out)
