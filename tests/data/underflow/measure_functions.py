"""Subnormals in the functions and rewrites remat models beyond the first cases: elementwise
functions of subnormal operands (f32 and f64), the binary library functions, XLA's deletion of
identity arithmetic, reductions over extents of 1, cumulative reductions (which start from the
operation's identity) and products with one contracted term (rewritten to a multiply).

    python measure_functions.py        # from this directory: writes out_functions_cases.json, out_functions.md
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax import lax

from common import BF16, Recorder, dump_json

assert not jax.config.jax_enable_x64
f32, f64 = np.float32, np.float64
A = lambda *v: np.array(v, f32)
R = Recorder()


def ref32(fn):
    """IEEE reference: fn in float64, rounded once to f32."""
    return lambda *a: np.asarray(fn(*[np.asarray(x, f64) for x in a])).astype(f32)


vec = lambda fn: np.vectorize(fn, otypes=[f64])
UNARY = [
    ("sin", lax.sin, np.sin), ("cos", lax.cos, np.cos), ("tan", lax.tan, np.tan),
    ("expm1", lax.expm1, np.expm1), ("log1p", lax.log1p, np.log1p), ("atan", lax.atan, np.arctan),
    ("asin", lax.asin, np.arcsin), ("sinh", lax.sinh, np.sinh), ("cosh", lax.cosh, np.cosh),
    ("asinh", lax.asinh, np.arcsinh), ("atanh", lax.atanh, np.arctanh), ("erf", lax.erf, scipy.special.erf),
    ("erfc", lax.erfc, scipy.special.erfc), ("erf_inv", lax.erf_inv, scipy.special.erfinv),
    ("lgamma", lax.lgamma, vec(lambda x: math.lgamma(x) if x != 0 else math.inf)),
    ("digamma", lax.digamma, scipy.special.digamma), ("floor", lax.floor, np.floor), ("ceil", lax.ceil, np.ceil),
    ("round", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), np.round), ("sign", lax.sign, np.sign),
    ("exp2", lax.exp2, np.exp2), ("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x)), ("square", lax.square, np.square),
    ("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x))),
]
with np.errstate(all="ignore"):
    x = A(1e-40, -1e-40, 1.4e-45, -0.0)
    R.run("unary_functions_of_subnormals", lambda x: tuple(f(x) for _, f, _ in UNARY), [x],
          lambda x: tuple(ref32(r)(x) for _, _, r in UNARY),
          "DAZ'd operands (asin, sinh, erf, lgamma = inf, digamma = NaN, floor(-sub) = -0, ...), except sin, tan, "
          "expm1 and atan, which return a tiny operand itself; outputs in the order " + " ".join(n for n, _, _ in UNARY))
    R.run("binary_library_functions", lambda a, b: (lax.rem(a, b), lax.atan2(a, b), lax.nextafter(a, b), lax.pow(a, b)),
          [A(1e-40, -1e-40, 3e-40, 2.5, 1e-40, 1.5e-38, 0.0, 1e-40), A(1.0, 1.0, 2e-40, 1e-40, -1.0, 1.4e-38, 1.0, 0.0)],
          lambda a, b: (ref32(np.fmod)(a, b), ref32(np.arctan2)(a, b), np.nextafter(a, b), ref32(np.power)(a, b)),
          "rem: the divisor DAZ'd (NaN), the remainder exact (a subnormal kept); atan2: glibc's atan2f in the float "
          "environment (bit tests, flushing arithmetic); nextafter: bit steps, but y where x == y under DAZ; "
          "pow of DAZ'd operands")
    x = A(1e-40, -1e-40, -0.0, 2.0)
    IDENT = [lambda x: x + 0.0, lambda x: 0.0 + x, lambda x: x - (-0.0), lambda x: x * 1.0, lambda x: 1.0 * x,
             lambda x: x / 1.0, lambda x: x * -1.0, lambda x: -1.0 * x, lambda x: x / -1.0,
             lambda x: jnp.maximum(x, -jnp.inf), lambda x: jnp.minimum(jnp.inf, x), lambda x: lax.pow(x, f32(1.0)),
             lambda x: x * jnp.ones_like(x), lambda x: x * 2.0, lambda x: 0.0 - x]
    R.run("literal_identities", lambda x: tuple(f(x) for f in IDENT), [x], lambda x: tuple(f(x) for f in IDENT),
          "x+0, 0+x, x-(-0), x*1, 1*x, x/1, max(x,-inf), min(inf,x), pow(x,1), x*ones_like(x): deleted (bits kept); "
          "x*-1, -1*x, x/-1: neg; x*2 and 0-x: computed (DAZ)")
    xb = np.array([1e-40, -1e-40, 2.0], BF16)
    R.run("literal_identities_bf16", lambda x: (x * BF16(1.0), x * BF16(-1.0), x + BF16(0.0), x * BF16(2.0)), [xb],
          lambda x: (x, -x, x, (x.astype(f32) * 2).astype(BF16)),
          "bf16: x*1, x*-1, x+0 deleted as for f32; x*2 computed in f32 (DAZ)", eager=False)
    m = np.array([[1e-40], [-1e-40]], f32)
    R.run("reduce_size_one_axis", lambda x: (jnp.sum(x, axis=1), jnp.max(x, axis=1), jnp.min(x, axis=1)), [m],
          lambda x: (x.sum(axis=1), x.max(axis=1), x.min(axis=1)),
          "a reduction over an extent of 1 is a reshape: bits kept")
    R.run("cumulative_from_identity",
          lambda a, b, c, d, e: (lax.cumsum(a), lax.cummin(b), lax.cumprod(c), lax.cummax(d), lax.cumlogsumexp(e)),
          [A(-0.0, -1e-40), A(-1e-40, 1.0), A(1e-40, 1.0), A(1e-40, -1.0), A(-1e-40, -0.0, 1e-40)],
          lambda a, b, c, d, e: (np.cumsum(a), np.minimum.accumulate(b), np.cumprod(c), np.maximum.accumulate(d),
                                 ref32(np.logaddexp.accumulate)(e)),
          "every element, the first too, combined with the running value from the identity: cumsum [-0] is +0")
    R.run("dot_one_term",
          lambda a, b, c, d: (jnp.einsum("bik,bkj->bij", a, b), jnp.outer(c, d), a[0] @ b[0]),
          [np.full((2, 2, 1), 1e-20, f32), np.full((2, 1, 3), -1e-20, f32), A(1e-20, -1e-20), A(1e-20, 3.0)],
          lambda a, b, c, d: (ref32(np.matmul)(a, b), ref32(np.outer)(c, d), ref32(np.matmul)(a[0], b[0])),
          "a product with one contracted term is a multiply: a flushed product keeps its sign (-0)")

jax.config.update("jax_enable_x64", True)
D = lambda *v: np.array(v, f64)
UNARY64 = [("sin", lax.sin, np.sin), ("tan", lax.tan, np.tan), ("expm1", lax.expm1, np.expm1),
           ("atan", lax.atan, np.arctan), ("tanh", lax.tanh, np.tanh), ("log1p", lax.log1p, np.log1p),
           ("asin", lax.asin, np.arcsin), ("erf", lax.erf, scipy.special.erf), ("floor", lax.floor, np.floor),
           ("sign", lax.sign, np.sign), ("cos", lax.cos, np.cos)]
with np.errstate(all="ignore"):
    R.run("f64_unary_functions_of_subnormals", lambda x: tuple(f(x) for _, f, _ in UNARY64),
          [D(1e-310, -1e-310, 5e-324, -0.0)], lambda x: tuple(np.asarray(r(x), f64) for _, _, r in UNARY64),
          "f64: sin, tan, expm1 and atan return a tiny operand itself, tanh does not (0); the rest DAZ; outputs in "
          "the order " + " ".join(n for n, _, _ in UNARY64))
jax.config.update("jax_enable_x64", False)

dump_json("out_functions_cases.json", R.cases)
with open("out_functions.md", "w") as f:
    f.write(R.markdown() + "\n")
R.print_rows()
