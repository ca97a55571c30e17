"""The programs the Python tests run: the project's model zoo and benchmark programs as
JAX functions with example arguments, copied from the project's generators (each module
says which) so that the tests need nothing outside crates/python/tests.

    ZOO             the shared zoo (zoo.py) and remat's own cases (zoo_more.py)
    BENCH           the benchmark programs (bench.py, jit_bench.py), at small sizes
    ALL             both
    by_name         a program by name
    float_argnums   the arguments a gradient is taken of
"""

import dataclasses

import jax
import jax.numpy as jnp

from . import bench, jit_bench, zoo, zoo_more
from .common import Case


def float_argnums(args):
    """The arguments every leaf of which is a float array: the ones differentiated."""
    return tuple(i for i, a in enumerate(args)
                 if jax.tree_util.tree_leaves(a)
                 and all(jnp.issubdtype(jnp.result_type(l), jnp.inexact) for l in jax.tree_util.tree_leaves(a)))


def _with_loss(c: Case, losses: dict) -> Case:
    if c.forward_only:
        return c
    return dataclasses.replace(c, loss=losses.get(c.name, c.fn))


ZOO = [_with_loss(c, zoo.LOSSES) for c in zoo.CASES] + [_with_loss(c, zoo_more.LOSSES) for c in zoo_more.CASES]
BENCH = [_with_loss(c, {}) for c in bench.CASES + jit_bench.CASES]
ALL = ZOO + BENCH

_BY_NAME = {c.name: c for c in ALL}
assert len(_BY_NAME) == len(ALL), "program names are unique"


def by_name(name: str) -> Case:
    return _BY_NAME[name]
