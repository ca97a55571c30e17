"""`remat.saved_residuals` and `remat.print_saved_residuals` against JAX 0.10.2's
`saved_residuals` on every zoo program (but the forward-only one) and every benchmark
program: the same residuals in the same order (aval and description), from arrays and
from `jax.ShapeDtypeStruct`s, as written and under JAX's policies, with each residual's
bytes and the total."""

import math
import re

import jax
import jax.numpy as jnp
import pytest

import remat
import models
from helpers import (POLICIES, args_of, aval_bytes,
                     jax_residuals, shape_structs)

DIFFERENTIABLE = [c for c in models.ALL if not c.forward_only]
FULL_SIZE = [c for c in models.ALL if c.full_args is not None]
UNDER_POLICY = [(c, p) for c in DIFFERENTIABLE for p in POLICIES]


def assert_same_residuals(got, want):
    """remat's `Residuals` against `jax_residuals`: one line each, in order, and the bytes."""
    assert isinstance(got, remat.Residuals)
    assert [(r.aval, r.description) for r in got] == [(a, d) for a, d, _ in want]
    assert [r.bytes for r in got] == [b for _, _, b in want]
    assert got.total_bytes == sum(b for _, _, b in want)
    for r in got:
        assert r.line == f"{r.aval} {r.description}"
        assert str(r) == r.line


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=str)
def test_residuals_match_jax(case):
    args = args_of(case.name)
    assert_same_residuals(remat.saved_residuals(case.fn, *args), jax_residuals(case.fn, *args))


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=str)
def test_residuals_from_shape_dtype_structs(case):
    args = args_of(case.name)
    structs = shape_structs(args)
    assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree_util.tree_leaves(structs))
    assert_same_residuals(remat.saved_residuals(case.fn, *structs), jax_residuals(case.fn, *args))


@pytest.mark.parametrize("case", FULL_SIZE, ids=str)
def test_residuals_at_realistic_size(case):
    """The benchmark programs at the generators' realistic sizes: planned from shapes alone
    (`jax.eval_shape` of the argument builder: no array is made)."""
    structs = jax.eval_shape(case.full_args)
    assert_same_residuals(remat.saved_residuals(case.fn, *structs), jax_residuals(case.fn, *structs))


@pytest.mark.parametrize("case,policy", UNDER_POLICY, ids=lambda x: x if isinstance(x, str) else x.name)
def test_residuals_under_policy_match_jax(case, policy):
    args = args_of(case.name)
    p = POLICIES[policy]
    got = remat.saved_residuals(case.fn, *args, policy=p)
    assert_same_residuals(got, jax_residuals(jax.checkpoint(case.fn, policy=p), *args))


def test_offloaded_residual_is_on_the_host():
    """save_and_offload_only_these_names: the offloaded value's aval names the host memory,
    and its bytes still count."""
    case = models.by_name("transformer_plain")
    p = POLICIES["save_and_offload_only_these_names"]
    got = remat.saved_residuals(case.fn, *args_of(case.name), policy=p)
    host = [r for r in got if "<host>" in r.aval]
    # one per block, each the `device_put` JAX's machinery adds (no source of the user's)
    assert [(r.aval, r.what, r.source) for r in host] == [("f32<host>[2,8,128]", "device_put", "")] * 2
    assert all(r.bytes == 2 * 8 * 128 * 4 for r in host)


def test_residuals_of_a_small_function_by_hand():
    """Three sin(W @ x) layers (the seed example of the conformance cases): what the vjp
    saves, written out."""
    def f(W1, W2, W3, x):
        for W in (W1, W2, W3):
            x = jnp.sin(W @ x)
        return x
    args = [jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4)]
    got = remat.saved_residuals(f, *args)
    lines = [re.sub(r" from \S+:\d+:\d+ \(\S+\.f\)$", "", r.line) for r in got]
    assert lines == [
        "f32[5,4] from the argument W1", "f32[6,5] from the argument W2", "f32[7,6] from the argument W3",
        "f32[4] from the argument x",
        "f32[5] output of sin", "f32[5] output of cos", "f32[6] output of sin", "f32[6] output of cos",
        "f32[7] output of cos",
    ]
    assert [r.bytes for r in got] == [80, 120, 168, 16, 20, 20, 24, 24, 28]
    assert got.total_bytes == 500
    assert [r.kind for r in got] == ["argument"] * 4 + ["output"] * 5
    assert [r.what for r in got] == ["W1", "W2", "W3", "x"] + ["sin", "cos", "sin", "cos", "cos"]
    assert all(r.source.endswith(".f)") for r in got[4:]) and all(r.source == "" for r in got[:4])
    # With every layer recomputed, only the arguments are saved.
    assert [r.aval for r in remat.saved_residuals(f, *args, policy=jax.checkpoint_policies.nothing_saveable)] == \
        ["f32[5,4]", "f32[6,5]", "f32[7,6]", "f32[4]"]


def test_print_saved_residuals(capsys):
    """JAX's lines, each with its bytes, then the total."""
    case = models.by_name("gpt_block")
    args = args_of(case.name)
    remat.print_saved_residuals(case.fn, *args)
    out = capsys.readouterr().out.rstrip("\n").split("\n")
    res = remat.saved_residuals(case.fn, *args)
    assert len(out) == len(res) + 1
    for line, r in zip(out, res):
        assert line.startswith(r.line)
        size = line[len(r.line):].strip()
        assert size == remat._inspect.human_bytes(r.bytes)
    assert re.fullmatch(r"total +[\d.]+ (B|KiB|MiB|GiB) +\(15 residuals\)", out[-1])
    assert out[-1].split()[1:3] == remat._inspect.human_bytes(res.total_bytes).split()


def test_human_bytes():
    from remat._inspect import human_bytes
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 3 << 20, 5 << 30)] == \
        ["0 B", "1023 B", "1.00 KiB", "1.50 KiB", "3.00 MiB", "5.00 GiB"]


def test_bytes_of_every_dtype():
    """A residual's bytes are its aval's, for 2- and 4-byte floats, bools and a raw key."""
    def f(a, b, c, k):
        return jnp.sum(jnp.sin(a) * jnp.sin(b).astype(jnp.float32)) + jnp.sum(jnp.where(c > 0, jnp.cos(c), c)) + \
            jnp.sum(jax.random.normal(k, (3,)) * jnp.exp(a[:3]))
    args = [jnp.ones(8, jnp.float32), jnp.ones((2, 8), jnp.bfloat16), jnp.ones(5, jnp.float16), jax.random.PRNGKey(0)]
    got = remat.saved_residuals(f, *args)
    want = jax_residuals(f, *args)
    assert [(r.aval, r.description, r.bytes) for r in got] == want
    assert {"bf16[2,8]", "f16[5]", "bool[5]"} <= {r.aval for r in got}
    for r in got:
        dims = re.search(r"\[([\d,]*)\]$", r.aval).group(1)
        n = math.prod(int(d) for d in dims.split(",")) if dims else 1
        assert r.bytes == n * {"f32": 4, "bf16": 2, "f16": 2, "bool": 1, "i32": 4, "u32": 4}[r.aval.split("[")[0]]


def test_aval_bytes_helper():
    assert aval_bytes(jax.ShapeDtypeStruct((3, 4), jnp.bfloat16)) == 24
    assert aval_bytes(jax.ShapeDtypeStruct((), jnp.float32)) == 4
