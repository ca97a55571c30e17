"""What the remat Python tests share: the programs' arguments (built once), JAX's own
saved residuals to compare with, the zoo's rule for comparing values, and the list of
known differences from JAX that the suite leaves out (each with its reason)."""

from __future__ import annotations

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
# JAX 0.10.2 exports only `print_saved_residuals` from `jax.ad_checkpoint`; the list it
# prints is this function's.
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

import models

P = jax.checkpoint_policies

# ---- arguments --------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def args_of(name: str):
    """A program's example arguments (small size), built once per test session."""
    return models.by_name(name).make_args()


@functools.lru_cache(maxsize=None)
def jax_outputs(name: str):
    """`jax.jit(f)(*args)` of a program, computed once per test session."""
    return jax.jit(models.by_name(name).fn)(*args_of(name))


@functools.lru_cache(maxsize=None)
def jax_value_and_grad(name: str, argnums):
    """`jax.jit(jax.value_and_grad(loss, argnums))(*args)` of a program, computed once per
    test session."""
    return jax.jit(jax.value_and_grad(models.by_name(name).loss, argnums))(*args_of(name))


def shape_structs(tree):
    """`tree` with each array replaced by its `jax.ShapeDtypeStruct`."""
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), tree)


# ---- JAX's residuals -------------------------------------------------------------------


def jax_residuals(f, *args):
    """JAX's `saved_residuals(f, *args)` as `(aval, description, bytes)` triples, the aval
    in its short form (`f32[4,8]`, `f32<host>[2]`), without the `from a literal` lines: a
    known provenance limit of the program text (docs/real_models.md, "Residuals JAX saves
    that the text cannot tell")."""
    return [(a.str_short(short_dtypes=True), d, aval_bytes(a))
            for a, d in jax_saved_residuals(f, *args) if d != "from a literal"]


def aval_bytes(aval) -> int:
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


# The policies the residual and ledger tests apply (names the programs use: the zoo's
# GPT block and scanned blocks, the benchmark transformer).
POLICIES = {
    "dots_saveable": P.dots_saveable,
    "nothing_saveable": P.nothing_saveable,
    "everything_saveable": P.everything_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_only_these_names": P.save_only_these_names("attn_out", "attn", "mlp_hidden"),
    "save_and_offload_only_these_names": P.save_and_offload_only_these_names(
        names_which_can_be_saved=["attn_out", "attn"], names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device", offload_dst="pinned_host"),
}

# ---- known differences from JAX, left out of the suite ---------------------------------
# (Reported with the suite; each test that would fail on one is not generated.)

# The residuals of the program as written: none differ. (A custom_jvp/custom_vjp function's
# rules, which JAX's text knows only by name, are traced in process: remat differentiates
# the call as JAX does.)

# The residuals under each policy: none differ. (The known half of a scan inside a
# checkpoint is one `closed_call` in remat-ad as in JAX, so both say `output of
# closed_call`; this list held every scan program under the saving policies, and
# scan_of_blocks_offload under all five, before that.)


# ---- comparing values (the zoo's rule) --------------------------------------------------


def reduced_precision(f, args) -> bool:
    """Whether the program computes in 16-bit floats (as the zoo records it)."""
    return bool(re.search(r"\b(bf16|f16)\[", str(jax.make_jaxpr(f)(*args))))


def assert_close(got, want, *, loose: bool, what: str = "") -> None:
    """One array against JAX's: the same shape and dtype; integers, bools and keys exactly;
    bf16/f16 values (and every float of a reduced-precision program, `loose`) within 2e-2
    relative or 1e-2 absolute; other floats within 1e-4 relative or 1e-5 absolute; NaN
    matches NaN."""
    if hasattr(want, "dtype") and jnp.issubdtype(want.dtype, jax.dtypes.prng_key):
        assert jnp.issubdtype(got.dtype, jax.dtypes.prng_key), f"{what}: {got.dtype}, expected a key array"
        got, want = jax.random.key_data(got), jax.random.key_data(want)
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
    assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, expected {w.dtype}"
    if not jnp.issubdtype(w.dtype, jnp.inexact):
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    loose = loose or w.dtype in (jnp.bfloat16, jnp.float16)
    rtol, atol = (2e-2, 1e-2) if loose else (1e-4, 1e-5)
    g, w = g.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= np.maximum(atol, rtol * np.abs(w)))
    if not ok.all():
        i = np.unravel_index(np.argmin(ok), ok.shape)
        raise AssertionError(f"{what}: {int((~ok).sum())} of {ok.size} values differ; at {i}: {g[i]!r}, "
                             f"expected {w[i]!r} (rel {rtol:g} or abs {atol:g})")


def assert_tree_close(got, want, *, loose: bool) -> None:
    """Two pytrees of arrays: the same structure, each leaf `assert_close`."""
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt, f"structure {gt}, expected {wt}"
    for i, (a, b) in enumerate(zip(g, w)):
        assert_close(a, b, loose=loose, what=f"leaf {i} of {wt}")
