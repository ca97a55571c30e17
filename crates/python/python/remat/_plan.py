"""The memory planner for JAX functions: `remat.plan`, the `Plan` it returns, and
`Plan.apply`, which rebuilds the user's function from JAX's own equations with the
plan's `checkpoint_name`s and policy, so that JAX runs exactly the plan.

The planner (Rust) plans only what JAX can run as it is: a built-in policy over the whole
function, or a names policy over the program's `checkpoint_name`s and names it gives every
value an equation makes (`remat_plan::applicable`). It answers with the policy and, for
each name it made, where the equation making the value is (a path through the `jit`s and
checkpoints it inlined); `apply` walks the traced jaxpr the same way and names those
values. Nothing here parses text.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import source_info_util
from jax.ad_checkpoint import checkpoint_name
from jax.extend import core as jcore

from ._inspect import Residual, Residuals, human_bytes, parse_budget
from ._run import _argnums_tuple
from ._trace import RematError, canonical_dtype, check_leaves, trace, with_own_rule_memos


def _inlined(eqn):
    """The body the planner inlines for `eqn` (a `jit` without constants, a checkpoint), as
    `(jaxpr, consts)`, or None. Mirrors `remat_ad::checkpointed::inlinable`."""
    name = eqn.primitive.name
    if name in ("jit", "pjit"):
        closed = eqn.params["jaxpr"]
        if len(closed.jaxpr.constvars) == 0:
            return closed.jaxpr, []
    if name in ("remat2", "checkpoint"):
        body = eqn.params["jaxpr"]
        if len(body.constvars) == 0:
            return body, []
    return None


class _Flat:
    """The traced program flattened as the planner flattens it: one node per equation of
    the flat function (the `jit`s without constants and the checkpoints inlined, in the
    order `remat_ad::flat_paths` gives), each reading and writing values by number, so that
    runs of nodes can be cut into segments."""

    def __init__(self, closed):
        closed = with_own_rule_memos(closed)
        self.nodes = []  # (eqn, path, ins: list of ('v', id) | ('lit', value), outs: list of id or None)
        self.consts = {}
        ids = iter(range(1 << 62))
        env = {}  # var -> ('v', id) | ('lit', value)
        for v, c in zip(closed.jaxpr.constvars, closed.consts):
            env[v] = ("v", next(ids))
            self.consts[env[v][1]] = c
        self.inputs = []
        for v in closed.jaxpr.invars:
            env[v] = ("v", next(ids))
            self.inputs.append(env[v][1])
        self.outputs = self._walk(closed.jaxpr, env, (), ids)

    @staticmethod
    def _ref(env, v):
        return ("lit", v.val) if isinstance(v, jcore.Literal) else env[v]

    def _walk(self, jaxpr, env, path, ids):
        for i, eqn in enumerate(jaxpr.eqns):
            p = path + (i,)
            ins = [self._ref(env, v) for v in eqn.invars]
            body = _inlined(eqn)
            if body is not None:
                # A jit's named shardings stay on its operands and results as
                # `with_sharding_constraint`s, as `remat_ad::flatten_calls` keeps them (a
                # literal operand is not constrained).
                in_sh, out_sh = _jit_shardings(eqn, len(eqn.invars), len(eqn.outvars))
                ins = [self._constrain(r, s, eqn, p, ids) if s is not None and r[0] == "v" else r
                       for r, s in zip(ins, in_sh)]
                inner = {}
                for v, c in zip(body[0].constvars, body[1]):
                    inner[v] = ("v", next(ids))
                    self.consts[inner[v][1]] = c
                # A literal operand of the call is substituted into its body, as
                # `remat_ad::flatten_calls` inlines it: no value of its own.
                inner.update(zip(body[0].invars, ins))
                outs = self._walk(body[0], inner, p, ids)
                outs = [self._constrain(r, s, eqn, p, ids) if s is not None else r for r, s in zip(outs, out_sh)]
                for v, r in zip(eqn.outvars, outs):
                    if not isinstance(v, jcore.DropVar):
                        env[v] = r
                continue
            outs = []
            for v in eqn.outvars:
                env[v] = ("v", next(ids))
                outs.append(env[v][1])
            self.nodes.append((eqn, p, ins, outs))
        return [self._ref(env, v) for v in jaxpr.outvars]

    def _constrain(self, r, sharding, eqn, path, ids):
        """A node constraining the value `r` to `sharding` (of the `jit` `eqn`); its value."""
        out = next(ids)
        self.nodes.append((_Constraint(sharding, eqn.source_info, eqn.ctx), path, [r], [out]))
        return ("v", out)

    def run(self, args, names_at, segments=()):
        """The program's outputs at `args`, the values `names_at` names named, the node
        ranges `segments` (`(a, e, policy)`) each run under `jax.checkpoint(policy)`."""
        env = dict(self.consts)
        env.update(zip(self.inputs, args))
        read = lambda r: r[1] if r[0] == "lit" else env[r[1]]
        k = 0
        for a, e, policy in sorted(segments):
            self._run_nodes(range(k, a), env, names_at)
            self._segment(a, e, policy, env, names_at)
            k = e
        self._run_nodes(range(k, len(self.nodes)), env, names_at)
        return [read(r) for r in self.outputs]

    def _run_nodes(self, indices, env, names_at):
        read = lambda r: r[1] if r[0] == "lit" else env[r[1]]
        for n in indices:
            eqn, p, ins, outs = self.nodes[n]
            if isinstance(eqn, _Constraint):
                name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
                with source_info_util.user_context(eqn.source_info.traceback, name_stack=name_stack), eqn.ctx.manager:
                    vals = [jax.lax.with_sharding_constraint(read(ins[0]), eqn.sharding)]
            else:
                vals = _bind(eqn, [read(r) for r in ins], names_at.get(p))
            env.update(zip(outs, vals))

    def _segment(self, a, e, policy, env, names_at):
        """Nodes `a..e` as one `jax.checkpoint`: its inputs the values they read that come
        from before (in first-read order), its outputs the values they make that later
        nodes or the result read (in order made); as `remat_plan::segment::wrap` cuts."""
        made = {o for n in range(a, e) for o in self.nodes[n][3]}
        ins = []
        for n in range(a, e):
            for r in self.nodes[n][2]:
                if r[0] == "v" and r[1] not in made and r[1] not in ins:
                    ins.append(r[1])
        later = {r[1] for n in range(e, len(self.nodes)) for r in self.nodes[n][2] if r[0] == "v"}
        later |= {r[1] for r in self.outputs if r[0] == "v"}
        outs = [o for n in range(a, e) for o in self.nodes[n][3] if o in later]
        if not outs:
            self._run_nodes(range(a, e), env, names_at)
            return

        def seg(*vals):
            local = dict(self.consts)
            local.update(zip(ins, vals))
            self._run_nodes(range(a, e), local, names_at)
            return [local[o] for o in outs]

        first = self.nodes[a][0]
        with source_info_util.user_context(first.source_info.traceback, name_stack=source_info_util.current_name_stack()):
            results = jax.checkpoint(seg, policy=policy, prevent_cse=True)(*[env[i] for i in ins])
        env.update(zip(outs, results))


@dataclasses.dataclass(frozen=True)
class _Constraint:
    """A `jit`'s named sharding of an operand or result, inlined: bound as
    `jax.lax.with_sharding_constraint` under the `jit`'s source info."""

    sharding: object
    source_info: object
    ctx: object


def _jit_shardings(eqn, n_in, n_out):
    """A `jit` equation's named shardings of its operands and results (`None` where it
    names none)."""
    def named(key, n):
        got = eqn.params.get(key) if eqn.primitive.name in ("jit", "pjit") else None
        got = tuple(got) if got is not None else (None,) * n
        return [s if isinstance(s, jax.sharding.NamedSharding) else None for s in got]
    return named("in_shardings", n_in), named("out_shardings", n_out)


def _bind(eqn, invals, names):
    """`eqn` bound again on `invals`, under its own source info; outputs `names` names
    (`{output index: name}`) get `checkpoint_name`s."""
    params = eqn.primitive.get_bind_params(eqn.params)
    name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
    with source_info_util.user_context(eqn.source_info.traceback, name_stack=name_stack), eqn.ctx.manager:
        outs = eqn.primitive.bind(*invals, **params)
        outs = list(outs) if eqn.primitive.multiple_results else [outs]
        if names:
            outs = [checkpoint_name(o, names[k]) if k in names else o for k, o in enumerate(outs)]
    return outs


@dataclasses.dataclass(frozen=True)
class XlaMemory:
    """XLA's memory analysis of a compiled program (`compiled.memory_analysis()`), for one
    device. `temp_bytes` is what the program allocates beyond its arguments and outputs:
    the quantity remat's peak measures."""

    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    generated_code_bytes: int
    backend: str

    @property
    def total_bytes(self) -> int:
        return self.temp_bytes + self.argument_bytes + self.output_bytes - self.alias_bytes

    def __str__(self) -> str:
        return (
            f"XLA ({self.backend}): temp {human_bytes(self.temp_bytes)}, arguments {human_bytes(self.argument_bytes)}, "
            f"outputs {human_bytes(self.output_bytes)}"
        )


def xla_memory_of(f: Callable, args: Sequence, diff: Sequence[int]) -> XlaMemory:
    """XLA's memory analysis of `jax.jit(jax.value_and_grad(f))` at `args`, differentiating
    the flat argument leaves `diff`, compiled for the current backend."""
    leaves, tree = jax.tree_util.tree_flatten(tuple(args))

    def flat(*xs):
        return f(*jax.tree_util.tree_unflatten(tree, list(xs)))

    compiled = jax.jit(jax.value_and_grad(flat, argnums=tuple(diff))).lower(*leaves).compile()
    m = compiled.memory_analysis()
    if m is None:
        raise RematError("this backend's compiler gives no memory analysis")
    return XlaMemory(
        temp_bytes=int(m.temp_size_in_bytes),
        argument_bytes=int(m.argument_size_in_bytes),
        output_bytes=int(m.output_size_in_bytes),
        alias_bytes=int(m.alias_size_in_bytes),
        generated_code_bytes=int(m.generated_code_size_in_bytes),
        backend=jax.default_backend(),
    )


class Plan:
    """What the forward half of `f`'s gradient saves to fit a byte budget, and what the
    backward half recomputes. `apply(f)` is the plan in JAX."""

    def __init__(self, planned: dict, traced, auto_names, args, diff, xla=None):
        self._p = planned
        self._traced = traced
        self._args = args
        self._diff = list(diff)
        self._xla = xla
        names = planned.get("names")
        saved = set(names["saved"]) if names else set()
        offloaded = set(names["offloaded"]) if names else set()
        self._names_at = {}
        for name, path, output in auto_names:
            if name in saved or name in offloaded:
                self._names_at.setdefault(tuple(path), {})[output] = name

    budget: int = property(lambda self: self._p["budget"])
    peak_bytes: int = property(lambda self: self._p["peak_bytes"], doc="remat's peak: the whole value-and-grad program as remat's JIT plans it.")
    recompute_flops: int = property(lambda self: self._p["recompute_flops"])
    residual_bytes: int = property(lambda self: self._p["residual_bytes"])
    host_bytes: int = property(lambda self: self._p["host_bytes"])
    method: str = property(lambda self: self._p["method"])
    per_device: bool = property(
        lambda self: self._p["per_device"],
        doc="The function is sharded (a shard_map, shardings): every byte is one device's (docs/sharding.md).",
    )

    @property
    def saved(self) -> Residuals:
        """What the forward half saves, in JAX's words: what
        `jax.ad_checkpoint.saved_residuals(plan.apply(f), *args)` lists."""
        return Residuals(Residual(**r) for r in self._p["saved"])

    @property
    def recomputed(self) -> list:
        return list(self._p["recomputed"])

    @property
    def policy(self):
        """The plan as a JAX policy: a `jax.checkpoint_policies` policy over the whole
        function (a built-in one, or `save_only_these_names(...)` /
        `save_and_offload_only_these_names(...)` over the program's and the planner's
        names, which `apply` puts on the function)."""
        cp = jax.checkpoint_policies
        names = self._p.get("names")
        if names is not None:
            if names["offloaded"]:
                return cp.save_and_offload_only_these_names(
                    names_which_can_be_saved=list(names["saved"]),
                    names_which_can_be_offloaded=list(names["offloaded"]),
                    offload_src="device",
                    offload_dst="pinned_host",
                )
            return cp.save_only_these_names(*names["saved"])
        call = self._p.get("jax_policy") or ""
        name = call.rsplit(".", 1)[-1]
        policy = getattr(cp, name, None)
        if policy is None:
            raise RematError(f"the plan is not a JAX policy ({call or 'a per-equation plan'})")
        return policy

    @property
    def policy_call(self) -> str:
        """The Python call that makes `policy`, or what the plan does instead (checkpointed
        segments)."""
        names = self._p.get("names")
        if names is not None:
            return names["jax_policy"]
        if self._p.get("segments"):
            return self._p.get("rewrite") or "checkpointed segments"
        return self._p["jax_policy"]

    @property
    def segments(self):
        """Where the plan cuts the function into checkpointed segments: `(first, end,
        policy)` ranges of the flattened function's equations, or None."""
        s = self._p.get("segments")
        return None if s is None else [tuple(x) for x in s]

    def apply(self, f: Callable) -> Callable:
        """`f` as the plan: the traced program's equations bound again (the `jit`s and
        checkpoints the planner inlined, inlined), the values the plan saves named with
        `checkpoint_name`, the whole under `jax.checkpoint(..., policy=plan.policy)`. The
        result has `f`'s signature and can be `jax.jit`ted, differentiated and vmapped; it
        takes arguments of the structure, shapes and dtypes the plan was made for."""
        t = self._traced
        segments = self._p.get("segments")
        policy = None if segments else self.policy
        cp = jax.checkpoint_policies
        segment_policies = [(a, e, getattr(cp, keep)) for a, e, keep in (segments or [])]
        flat = _Flat(t.closed)
        names_at = self._names_at
        want = [(tuple(a.shape), a.dtype) for a in t.in_avals]

        @functools.wraps(f)
        def applied(*args):
            leaves, tree = jax.tree_util.tree_flatten(tuple(args))
            check_leaves(leaves)
            got = [(tuple(np.shape(x)), canonical_dtype(x)) for x in leaves]
            if tree != t.in_tree or got != want:
                raise RematError(
                    f"the plan was made for arguments {t.in_tree} of {want}; these are {tree} of {got}"
                )

            if segments:
                # Checkpointed segments, the rest of the function as written around them.
                outs = flat.run(list(leaves), names_at, segment_policies)
            else:
                outs = jax.checkpoint(lambda *xs: flat.run(list(xs), names_at), policy=policy, prevent_cse=True)(
                    *leaves
                )
            return jax.tree_util.tree_unflatten(t.out_tree, outs)

        return applied

    def xla_memory(self) -> XlaMemory:
        """XLA's memory analysis of `jax.jit(jax.value_and_grad(plan.apply(f)))` on the
        current backend (measured once, then kept)."""
        if self._xla is None:
            self._xla = xla_memory_of(self.apply(self._traced.function), self._args, self._diff)
        return self._xla

    def __str__(self) -> str:
        each = " per device" if self.per_device else ""
        lines = [
            f"plan for a budget of {human_bytes(self.budget)} ({self.budget} bytes){each}: peak {human_bytes(self.peak_bytes)}, "
            f"recompute {self.recompute_flops} FLOPs, saved beyond the arguments {human_bytes(self.residual_bytes)}",
            f"  policy: {self.policy_call}",
        ]
        if self._xla is not None:
            lines.append(f"  {self._xla}")
        lines.append(f"saved ({len(self.saved)}):")
        lines += [f"  {r.line}" for r in self.saved]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<remat.Plan peak={self.peak_bytes} recompute_flops={self.recompute_flops} policy={self.policy_call}>"


def _diff_leaves(traced, argnums) -> list:
    """The flat argument leaves differentiated: every float leaf (bf16 and f16 too), or
    those of `argnums` (negative ones counting from the end, as JAX's)."""
    floats = [i for i, a in enumerate(traced.in_avals) if jnp.issubdtype(a.dtype, jnp.inexact)]  # bf16 is not a NumPy inexact
    if argnums is None:
        return floats
    counts = [c.num_leaves for c in traced.in_tree.children()]
    nums = _argnums_tuple(argnums, len(counts))
    starts = np.cumsum([0] + counts)
    out = []
    for a in nums:
        out += [i for i in range(starts[a], starts[a + 1]) if i in floats]
    return out


def plan(
    f: Callable,
    *args,
    budget,
    host_budget=None,
    names_only: bool = False,
    argnums=None,
    measure: str = "model",
    max_xla_compiles: int = 64,
) -> Plan:
    """The memory plan of `jax.value_and_grad(f)` for `budget` bytes (`"12GiB"`, `1.5e9`
    as an int, ...): among the plans JAX can run as they are, the one that recomputes
    least and whose peak fits. `args` may be arrays or `jax.ShapeDtypeStruct`s.

    - `names_only`: only policies over the program's own `checkpoint_name`s.
    - `host_budget`: host memory the plan may keep saved values in
      (`save_and_offload_only_these_names`).
    - `argnums`: the arguments differentiated (every float argument by default).
    - `measure="xla"`: the budget is checked against XLA's own memory analysis of each
      candidate (`jax.jit(jax.value_and_grad(plan.apply(f))).lower(...).compile()`, temp
      bytes) on the current backend, from the plan that recomputes least up (at most
      `max_xla_compiles` compilations); remat's model is the default (`"model"`).
    """
    if measure not in ("model", "xla"):
        raise RematError(f"measure={measure!r}: 'model' (remat's peak) or 'xla' (XLA's memory analysis)")
    budget_bytes = parse_budget(budget)
    host = None if host_budget is None else parse_budget(host_budget)
    t = trace(f, args)
    t.function = f
    diff = _diff_leaves(t, argnums)
    planner = t.program.planner(argnums=diff, names_only=names_only, host_budget=host, applicable=not names_only)
    auto = planner.auto_names()
    if measure == "model":
        return Plan(planner.plan(budget_bytes), t, auto, args, diff)
    # XLA as the judge: every plan the planner evaluated (XLA's order of plans by memory is
    # not remat's: a plan off remat's frontier, such as more checkpointed segments, may be
    # XLA's smallest), from the fewest recompute FLOPs up; the first whose XLA temp bytes
    # fit the budget.
    points = sorted(planner.points(), key=lambda p: (p["recompute_flops"], p["peak_bytes"], p["index"]))
    smallest = None
    tried = 0
    seen_programs = set()
    for point in points[:max_xla_compiles]:
        planned = planner.plan_at(point["index"])
        if planned["program"] in seen_programs:
            continue
        seen_programs.add(planned["program"])
        planned["budget"] = budget_bytes
        candidate = Plan(planned, t, auto, args, diff)
        m = candidate.xla_memory()
        tried += 1
        if m.temp_bytes <= budget_bytes:
            return candidate
        if smallest is None or m.temp_bytes < smallest[0]:
            smallest = (m.temp_bytes, candidate)
    found = f"{smallest[0]} bytes ({human_bytes(smallest[0])}), under {smallest[1].policy_call}" if smallest else "none"
    raise RematError(
        f"no plan fits {budget_bytes} bytes by XLA's memory analysis on {jax.default_backend()}: "
        f"the smallest XLA temp bytes of the {tried} plans compiled is {found}"
    )
