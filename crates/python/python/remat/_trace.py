"""Tracing a JAX function for remat: `jax.make_jaxpr` in process, the policies JAX prints
without their arguments made explicit, and the program handed to the native module as
JAX's own text (with each equation's source) and its constants' bytes.

Nothing here parses a jaxpr: the text is JAX's printer's, read by remat's parser in Rust.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import linear_util as lu
from jax._src import source_info_util
from jax._src.interpreters import partial_eval as pe
from jax.extend import core as jcore

from . import _remat

RematError = _remat.RematError

# remat's own frames are no user's: an equation JAX stages while remat traces a rule of
# JAX's library takes no source from them (JAX's rule for its own files).
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)) + os.sep)


# Policies as data. JAX's closure policies print as `<function save_and_offload_only_these
# _names.<locals>.policy at 0x...>`, without what they save; in process the closure's cells
# hold it, so the program is printed with these stand-ins instead, whose reprs say
# everything and which remat's parser reads (`remat_ir::Policy::from_param`).


@dataclasses.dataclass(frozen=True)
class SaveAndOffloadOnlyTheseNames:
    names_which_can_be_saved: frozenset
    names_which_can_be_offloaded: frozenset
    offload_src: str
    offload_dst: str


@dataclasses.dataclass(frozen=True)
class OffloadDotWithNoBatchDims:
    offload_src: str
    offload_dst: str


@dataclasses.dataclass(frozen=True)
class SaveFromBothPolicies:
    policy_1: Any
    policy_2: Any


class EverythingSaveable:
    def __repr__(self):
        return "EverythingSaveable()"


class NothingSaveable:
    def __repr__(self):
        return "NothingSaveable()"


def _cells(f) -> dict:
    return {name: cell.cell_contents for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ())}


def explicit_policy(policy):
    """`policy` as a value whose repr says what it saves, or a `RematError` for a policy
    remat cannot see into (a Python function of the user's)."""
    if policy is None or not callable(policy) or not hasattr(policy, "__code__"):
        return policy  # None, or a JAX policy object with a full repr (DotsSaveable(...), ...)
    qualname = getattr(policy, "__qualname__", "")
    if qualname in ("nothing_saveable", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable"):
        return policy  # known by name
    cells = _cells(policy)
    if qualname == "save_and_offload_only_these_names.<locals>.policy":
        return SaveAndOffloadOnlyTheseNames(
            frozenset(cells["names_which_can_be_saved"]),
            frozenset(cells["names_which_can_be_offloaded"]),
            cells["offload_src"],
            cells["offload_dst"],
        )
    if qualname == "offload_dot_with_no_batch_dims.<locals>.policy":
        return OffloadDotWithNoBatchDims(cells["offload_src"], cells["offload_dst"])
    if qualname == "save_from_both_policies.<locals>.policy":
        return SaveFromBothPolicies(explicit_policy(cells["policy_1"]), explicit_policy(cells["policy_2"]))
    if qualname == "save_anything_except_these_names.<locals>.<lambda>":
        # JAX 0.10.2 ships this factory as a stub that saves everything: remat does what
        # JAX does, so that its residuals are JAX's.
        return EverythingSaveable()
    raise RematError(
        f"the checkpoint policy {policy!r} is a Python function of its own: remat cannot see what it saves "
        "(use jax.checkpoint_policies, whose policies remat knows)"
    )


def _map_jaxpr(j, eqn_fn, memo):
    key = id(j)
    if key in memo:
        return memo[key]
    eqns = [eqn_fn(e.replace(params={k: _map_param(v, eqn_fn, memo) for k, v in e.params.items()})) for e in j.eqns]
    out = j.replace(eqns=eqns)
    memo[key] = out
    return out


def _map_param(v, eqn_fn, memo):
    if isinstance(v, jcore.ClosedJaxpr):
        key = id(v)
        if key not in memo:
            memo[key] = jcore.ClosedJaxpr(_map_jaxpr(v.jaxpr, eqn_fn, memo), v.consts)
        return memo[key]
    if isinstance(v, jcore.Jaxpr):
        return _map_jaxpr(v, eqn_fn, memo)
    if isinstance(v, tuple) and any(isinstance(x, (jcore.Jaxpr, jcore.ClosedJaxpr)) for x in v):
        return tuple(_map_param(x, eqn_fn, memo) for x in v)
    return v


def _explicit_policies(closed):
    def eqn_fn(e):
        if e.primitive.name == "remat2" and "policy" in e.params:
            return e.replace(params={**e.params, "policy": explicit_policy(e.params["policy"])})
        return e

    return jcore.ClosedJaxpr(_map_jaxpr(closed.jaxpr, eqn_fn, {}), closed.consts)


# Custom derivative rules. JAX's text names a custom_jvp/custom_vjp function's rules only by
# their Python functions' names; in process they are traced here, at each call's operand
# types, and registered with the native module under those names before the program is
# differentiated (crates/python/src/rules.rs).


def _short(aval) -> str:
    return aval.str_short(short_dtypes=True)


def _check_float(avals) -> None:
    """`_Refused` for a non-float operand, whose tangent JAX types as float0."""
    for a in avals:
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            raise _Refused(f"an operand is {_short(a)}: remat takes custom rules over floating-point operands only")


class _Refused(Exception):
    """Why remat cannot take a rule: registered as the rule's reason."""


def _rule_text(closed) -> str:
    """A rule's jaxpr as the text remat reads; `_Refused` if it cannot be given."""
    if closed.consts:
        raise _Refused(
            f"the rule computes with {len(closed.consts)} constant arrays it captures from Python, which remat "
            "cannot take (pass them as arguments of the custom function)"
        )
    return _explicit_policies(closed).pretty_print(source_info=True, name_stack=False)


def _jvp_rule(eqn) -> dict:
    """`register_jvp_rule`'s `rule`: `(primals, tangents) -> (outs, tangent outs)` of a
    custom_jvp_call, as JAX's `process_custom_jvp_call` runs it: the rule JAX traced
    (`jvp_jaxpr_fun`), every tangent given, symbolic zero outputs instantiated."""
    num_consts = eqn.params["num_consts"]
    avals = [v.aval for v in eqn.invars[num_consts:]]
    _check_float(avals)
    jaxpr, consts, out_zeros = eqn.params["jvp_jaxpr_fun"].call_wrapped(*[False] * len(avals))

    as_fun = jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, consts))

    def rule(*xs):
        out = as_fun(*xs)
        primals_out, tangents = out[: len(out_zeros)], iter(out[len(out_zeros):])
        tangents_out = [jnp.zeros(np.shape(p), p.dtype) if z else next(tangents) for p, z in zip(primals_out, out_zeros)]
        return [*primals_out, *tangents_out]

    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    return {"rule": _rule_text(jax.make_jaxpr(rule)(*structs, *structs))}


def _vjp_rules(eqn) -> dict:
    """`register_vjp_rule`'s `fwd`, `bwd` and `num_outs` of a custom_vjp_call: `fwd`
    `(primals) -> (outs, residuals)` and `bwd` `(residuals, cotangents) -> (a cotangent
    per primal)`, JAX's own `jax.vjp` of the call (its fwd rule, and the transpose of its
    `custom_lin`, which runs bwd)."""
    avals = [v.aval for v in eqn.invars]
    num_outs = len(eqn.outvars)
    _check_float(avals)
    _check_float([v.aval for v in eqn.outvars])
    trees = []

    params = eqn.primitive.get_bind_params(eqn.params)

    def fwd(*primals):
        # Bound without the equation's source info, so that the rules' own equations keep
        # theirs (as when JAX differentiates the function itself).
        outs, vjp_fn = jax.vjp(lambda *xs: eqn.primitive.bind(*xs, **params), *primals)
        residuals, tree = jax.tree_util.tree_flatten(vjp_fn)
        trees.append(tree)
        return [*outs, *residuals]

    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    fwd_closed = jax.make_jaxpr(fwd)(*structs)
    res_avals = fwd_closed.out_avals[num_outs:]

    def bwd(*xs):
        vjp_fn = jax.tree_util.tree_unflatten(trees[0], xs[: len(res_avals)])
        return list(vjp_fn(list(xs[len(res_avals):])))

    res_structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in res_avals]
    ct_structs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.outvars]
    bwd_closed = jax.make_jaxpr(bwd)(*res_structs, *ct_structs)
    return {"fwd": _rule_text(fwd_closed), "bwd": _rule_text(bwd_closed), "num_outs": num_outs}


def _custom_calls(j, seen):
    """Every custom_jvp_call and custom_vjp_call equation of `j` and its sub-jaxprs."""
    if id(j) in seen:
        return
    seen.add(id(j))
    for e in j.eqns:
        if e.primitive.name in ("custom_jvp_call", "custom_vjp_call"):
            yield e
        for sub in jcore.jaxprs_in_params(e.params):
            yield from _custom_calls(sub, seen)


def _memo(thunk):
    """`(memo, traced function)` of a rule thunk JAX memoizes (`_memoize`'s closure:
    `cells`, `fn`), or None where the thunk is not JAX's memoized function."""
    f = getattr(thunk, "f", None)
    names = getattr(getattr(f, "__code__", None), "co_freevars", ())
    if "fn" not in names or "cells" not in names:
        return None
    return f.__closure__[names.index("cells")].cell_contents, f.__closure__[names.index("fn")].cell_contents


@contextlib.contextmanager
def _jax_memo_kept(thunk):
    """JAX memoizes a rule's trace in the equation's thunk, and the equation may be shared
    with JAX's own later traces (a cached `jit` or `checkpoint` body): the traces made here
    are dropped after, so that JAX traces the rule itself when it needs it, under the
    user's call stack, as it would have without remat (the sources in its residuals depend
    on it)."""
    memo = _memo(thunk)
    before = set(memo[0]) if memo else set()
    try:
        yield
    finally:
        if memo:
            for key in [k for k in memo[0] if k not in before]:
                del memo[0][key]


def _own_memo(thunk):
    """`thunk` with a memo of its own, or `thunk` itself where it is not JAX's memoized
    function."""
    memo = _memo(thunk)
    return thunk if memo is None else lu.wrap_init(pe._memoize(memo[1]), debug_info=thunk.debug_info)


def with_own_rule_memos(closed):
    """`closed` with every custom_jvp/custom_vjp call's rule thunk given a memo of its own,
    at any depth: binding these equations again (`Plan.apply`) then traces the rules into
    the copy, never into the memo of the user's function, which JAX's own later traces of
    it read (the sources of its residuals depend on the stack the rule was traced under)."""

    def eqn_fn(e):
        for key in ("jvp_jaxpr_fun", "fwd_jaxpr_thunk"):
            if key in e.params:
                return e.replace(params={**e.params, key: _own_memo(e.params[key])})
        return e

    return jcore.ClosedJaxpr(_map_jaxpr(closed.jaxpr, eqn_fn, {}), closed.consts)


def _traced_or_reason(trace_rule, thunk) -> dict:
    """A rule's registration keywords: its trace, or `reason` (why remat cannot take it,
    or JAX's error while tracing it)."""
    try:
        with _jax_memo_kept(thunk):
            return trace_rule()
    except RematError:
        raise
    except _Refused as e:
        return {"reason": str(e)}
    except Exception as e:  # the user's rule failed to trace at these types
        return {"reason": f"JAX could not trace the rule: {type(e).__name__}: {e}"}


def register_rules(closed) -> None:
    """Traces the rules of every custom_jvp/custom_vjp call in `closed` at the call's operand
    types and registers them with the native module. Two calls with the same rule names and
    types but different rules in one program register the reason instead: remat finds rules
    by name, and would otherwise pick one silently."""
    found: dict = {}
    for e in _custom_calls(closed.jaxpr, set()):
        if e.primitive.name == "custom_jvp_call":
            names = ("jvp", e.params["call_jaxpr"].jaxpr.debug_info.func_name,
                     e.params["jvp_jaxpr_fun"].debug_info.func_name)
            types = tuple(_short(v.aval) for v in e.invars[e.params["num_consts"]:])
            trace_rule, thunk = (lambda e=e: _jvp_rule(e)), e.params["jvp_jaxpr_fun"]
        else:
            names = ("vjp", e.params["fwd_jaxpr_thunk"].debug_info.func_name, e.params["bwd"].debug_info.func_name)
            types = tuple(_short(v.aval) for v in e.invars)
            trace_rule, thunk = (lambda e=e: _vjp_rules(e)), e.params["fwd_jaxpr_thunk"]
        traced = _traced_or_reason(trace_rule, thunk)
        key = (names, types)
        if key in found and found[key] != traced:
            what = f"`{names[2]}`" if names[0] == "jvp" else f"`{names[1]}`/`{names[2]}`"
            traced = {"reason": f"two custom functions in the program have rules named {what} at "
                                f"({', '.join(types)}) that differ; remat finds a rule by its name, so give the rule "
                                "functions distinct names"}
        found[key] = traced
    for (names, types), traced in found.items():
        register = _remat.register_jvp_rule if names[0] == "jvp" else _remat.register_vjp_rule
        register(names[1], names[2], list(types), **traced)


# Arrays across the edge.

def _dtype_name(x) -> str:
    dt = x.dtype
    if jnp.issubdtype(dt, jax.dtypes.prng_key):
        return "key<fry>"
    return np.dtype(dt).name


def _c_bytes(x):
    """A C-ordered NumPy array of `x` in JAX's canonical dtype (as `jax.jit` converts it:
    f64 is f32 unless `jax_enable_x64`) and a buffer of its bytes. (`np.ascontiguousarray`
    would make a 0-d array 1-d, and NumPy exports no buffer of an `ml_dtypes` array such
    as bf16: its bytes are taken as `uint8`.)"""
    a = np.asarray(x, order="C")
    dtype = jax.dtypes.canonicalize_dtype(a.dtype)
    if dtype != a.dtype:
        a = a.astype(dtype)
    return a, memoryview(a.reshape(-1).view(np.uint8))


def array_in(x) -> tuple:
    """`(dtype, shape, buffer)` of an array (a NumPy or JAX array, or a typed PRNG key)."""
    if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        data, buf = _c_bytes(jax.random.key_data(x))
        return ("key<fry>", list(data.shape[:-1]), buf)
    a, buf = _c_bytes(x)
    return (np.dtype(a.dtype).name, list(a.shape), buf)


def array_out(triple):
    dtype, shape, data = triple
    if dtype == "key<fry>":
        words = np.frombuffer(data, np.uint32).reshape(tuple(shape) + (2,))
        return jax.random.wrap_key_data(words)
    return np.frombuffer(data, jnp.dtype(dtype)).reshape(shape)


@dataclasses.dataclass
class Traced:
    """A JAX function traced at example arguments: the native program, the pytree
    structures of its arguments and results, its argument names, and the jaxpr as JAX
    traced it (`closed`: its checkpoints' policies JAX's own functions, so that its
    equations can be bound again; the program remat parsed printed the stand-ins)."""

    program: Any
    in_tree: Any
    out_tree: Any
    in_avals: list
    arg_names: list
    closed: Any


def check_leaves(leaves) -> None:
    """A `RematError` for an argument leaf that is not an array or a `jax.ShapeDtypeStruct`."""
    for leaf in leaves:
        if type(leaf) in (bool, int, float):
            continue  # a weakly typed scalar, as jax.jit takes it
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise RematError(
                f"an argument leaf is {type(leaf).__name__}, not an array or jax.ShapeDtypeStruct: "
                "remat traces arrays (static values belong in a closure or functools.partial)"
            )


def canonical_dtype(x):
    """The dtype `jax.jit` gives an argument: f64 is f32 unless `jax_enable_x64`."""
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype  # a Python scalar
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return dtype
    return jax.dtypes.canonicalize_dtype(dtype)


def trace(f: Callable, args: Sequence, *, name: str | None = None) -> Traced:
    """Traces `f(*args)` with `jax.make_jaxpr`; `args` may hold arrays or
    `jax.ShapeDtypeStruct`s in any pytree."""
    leaves, in_tree = jax.tree_util.tree_flatten(tuple(args))
    check_leaves(leaves)
    try:
        closed, out_shape = jax.make_jaxpr(f, return_shape=True)(*args)
    except RematError:
        raise
    except Exception as e:  # JAX's own error while tracing the user's function
        raise RematError(f"JAX could not trace the function: {type(e).__name__}: {e}") from e
    register_rules(closed)
    printed = _explicit_policies(closed)
    debug = closed.jaxpr.debug_info
    names = list(debug.arg_names) if debug is not None and debug.arg_names else []
    if len(names) != len(closed.jaxpr.invars):
        names = [f"arg{i}" for i in range(len(closed.jaxpr.invars))]
    text = printed.pretty_print(source_info=True, name_stack=False)
    consts = [array_in(c) for c in printed.consts]
    file = name or getattr(f, "__name__", "function")
    program = _remat.parse(text, file, consts, names)
    out_tree = jax.tree_util.tree_structure(out_shape)
    in_avals = [jax.ShapeDtypeStruct(np.shape(x), canonical_dtype(x)) for x in leaves]
    return Traced(program, in_tree, out_tree, in_avals, names, closed)
