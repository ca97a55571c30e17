"""Subnormal behaviour of JAX 0.10.2 jit on CPU: f32, bf16 and f16 programs.

    python measure_f32.py      # from this directory: writes out_f32_cases.json, out_f32.md
Every argument is passed at run time (never a Python constant), so XLA cannot fold it.
"""
import json
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from common import BF16, F16, Recorder, hexbits, dump_json, arr

assert not jax.config.jax_enable_x64
f32 = np.float32
S = f32(1e-40)                 # a subnormal f32 (bits 000116c2)
S2 = f32(2e-40)
S3 = f32(3e-40)
TINY = f32(np.finfo(f32).smallest_subnormal)   # 1.4e-45, bits 00000001
MN = f32(np.finfo(f32).tiny)                   # 1.1754944e-38, bits 00800000
A = lambda *v: np.array(v, f32)


def via64(fn, dt=f32):
    """IEEE reference: evaluate fn in float64 and round once to dt."""
    return lambda *a: fn(*[np.asarray(x, np.float64) for x in a]).astype(dt)


def vmath(fn):
    return np.vectorize(fn, otypes=[np.float64])


R = Recorder()

# ---------------------------------------------------------------- add / sub
R.run("add_ftz", lambda a, b: a + b,
      [A(1.5e-38, 1.2e-38, -1.5e-38, 1.0), A(-1.4e-38, -1.18e-38, 1.4e-38, 2.0)],
      lambda a, b: a + b, "FTZ: normal+normal with a subnormal sum gives ±0 (sign of the exact result)")
R.run("add_daz", lambda a, b: a + b,
      [A(1e-40, 1e-40, 2.5e-39, -1e-40), A(MN, 0.0, 2.5e-39, 0.0)],
      lambda a, b: a + b, "DAZ: a subnormal operand of add reads as ±0")
R.run("sub_ftz_daz", lambda a, b: a - b,
      [A(1.5e-38, 1e-40, 3e-40, -1.5e-38), A(1.4e-38, -MN, 1e-40, -1.4e-38)],
      lambda a, b: a - b, "FTZ on the result, DAZ on the inputs")
R.run("add_literal_zero", lambda x: x + 0.0, [A(1e-40, -1e-40, 1.0)], lambda x: x + f32(0.0),
      "x + 0.0 with a literal 0.0: is it simplified away (passthrough) or computed (DAZ)?")

# ---------------------------------------------------------------- mul / div
R.run("mul_ftz", lambda a, b: a * b,
      [A(1e-20, -1e-20, 3e-23, 1e-19, 1e-19), A(1e-20, 1e-20, 3e-23, 1e-19, 2e-19)],
      lambda a, b: a * b, "FTZ: normal*normal with a subnormal product gives ±0")
R.run("mul_daz", lambda a, b: a * b,
      [A(1e-40, -1e-40, 1e-40, TINY), A(2.0 ** 100, 2.0 ** 100, 1.0, 2.0 ** 120)],
      lambda a, b: a * b, "DAZ: subnormal*normal reads the subnormal as ±0 (even times a run-time 1.0)")
R.run("mul_literal", lambda x: (x * 1.0, x * 2.0, 2.0 * x),
      [A(1e-40, -1e-40, TINY)],
      lambda x: (x * f32(1.0), x * f32(2.0), f32(2.0) * x),
      "x*1.0 (literal) is removed by XLA's algebraic simplifier: passthrough; x*2.0 is computed: DAZ")
R.run("div_ftz_daz", lambda a, b: a / b,
      [A(1e-30, -1e-30, 1e-40, 1.0, 1e-40), A(1e10, 1e10, 2.0 ** -30, 3e38, 1.0)],
      lambda a, b: a / b, "FTZ on quotient (1e-40, 3.3e-39), DAZ on a subnormal dividend")
R.run("div_daz_divisor", lambda a, b: a / b, [A(1e-30, 0.0, -1.0), A(1e-40, 1e-40, 1e-40)],
      lambda a, b: a / b, "DAZ: a subnormal divisor reads as 0: x/sub = ±inf, 0/sub = nan")
R.run("square_integer_pow", lambda x: (x ** 2, x ** 3, lax.integer_pow(x, 4)),
      [A(1e-20, -1e-14, 2e-13, 1e-10)],
      lambda x: (x * x, (x * x) * x, (x * x) * (x * x)),
      "integer_pow is a chain of multiplies (x*x, x*x*x): FTZ on the subnormal result")
R.run("integer_pow_sub_input", lambda x: (x ** 2, x ** -1),
      [A(1e-40, 1e-30)], lambda x: (x * x, f32(1) / x),
      "integer_pow of a subnormal: x**-1 = 1/x with DAZ gives inf")

# ---------------------------------------------------------------- transcendental
R.run("exp", lambda x: jnp.exp(x), [A(-88.0, -100.0, -103.0, -87.0, -87.5, -104.0, 0.0, -87.6)],
      via64(np.exp), "XLA exp: clamp x>=-87.8, n=floor(x*log2e+0.5) clamped >= -127; 2^-127 is built as bits 0 -> 0; "
      "n=-126 cases give a subnormal that FTZ flushes")
R.run("exp_sub_input", lambda x: jnp.exp(x), [A(1e-40, -1e-40)], via64(np.exp),
      "exp of a subnormal is 1.0 either way")
R.run("exp2", lambda x: jnp.exp2(x), [A(-126.5, -130.0, -149.0, -126.0)], via64(np.exp2),
      "exp2 also underflows to 0")
R.run("log_sub_input", lambda x: jnp.log(x), [A(1e-40, -1e-40, TINY, MN)], via64(np.log),
      "DAZ: XLA's log polynomial tests x==0 (true for a subnormal under DAZ): log(±sub) = -inf")
R.run("log_sub_input_len5_quirk", lambda x: jnp.log(x), [A(1e-40, -1e-40, TINY, MN, 1.0)], via64(np.log),
      "QUIRK: 1-D lengths 3,5,6,7 (and the tail of 11,13,14,15) leave llvm.log on an odd vector width, "
      "lowered to a scalar libm-style logf that under DAZ gives -103.97207641601562 (c2cff1b4) for +sub and nan for -sub")
R.run("log1p", lambda x: jnp.log1p(x), [A(1e-40, -1e-40, 1e-38, 1e-30)],
      via64(vmath(math.log1p)), "log1p of a subnormal")
R.run("expm1", lambda x: jnp.expm1(x), [A(1e-40, -1e-40, 1e-38, 1e-30)],
      via64(vmath(math.expm1)), "expm1 of a subnormal")
R.run("logistic", lambda x: lax.logistic(x), [A(-88.0, -90.0, -100.0, -80.0)],
      via64(lambda x: 1.0 / (1.0 + np.exp(-x))), "logistic = 1/(1+exp(-x)) in XLA; exp(88)... underflow to 0")
R.run("tanh", lambda x: jnp.tanh(x), [A(1e-40, -1e-40, TINY, 1e-38, 3e-4, 1e-3)],
      via64(np.tanh), "XLA tanh returns x itself (a select) when |x|<4e-4: subnormal passes through")
R.run("tanh_ftz", lambda x, y: jnp.tanh(x * y), [A(1e-20, 1e-20), A(1e-20, -1e-20)],
      via64(lambda x, y: np.tanh((x * y).astype(f32).astype(np.float64))),
      "subnormal produced by mul (flushed) then tanh")
R.run("sin", lambda x: jnp.sin(x), [A(1e-40, -1e-40, 1e-38, 0.5)], via64(np.sin), "sin of a subnormal")
R.run("erf", lambda x: lax.erf(x), [A(1e-40, -1e-40, 1e-38, 1e-30, -1e-38)],
      via64(vmath(math.erf)), "erf of a subnormal / erf with a subnormal result")
R.run("sqrt_rsqrt", lambda x: (jnp.sqrt(x), lax.rsqrt(x)), [A(1e-40, TINY, MN, -1e-40)],
      lambda x: (np.sqrt(x), (1.0 / np.sqrt(x.astype(np.float64))).astype(f32)),
      "DAZ: sqrt(sub)=±0, rsqrt(sub)=±inf")
R.run("cbrt", lambda x: jnp.cbrt(x), [A(1e-40, 1e-30)], via64(np.cbrt), "cbrt of a subnormal")

# ---------------------------------------------------------------- max / min / compare / select
mx_a = A(1e-40, 0.0, 1e-40, -1e-40, 1e-40, 0.0, -0.0, 2e-40)
mx_b = A(0.0, 1e-40, -1e-40, 1e-40, 2e-40, -1e-40, 0.0, np.nan)
R.run("max", lambda a, b: lax.max(a, b), [mx_a, mx_b], lambda a, b: np.maximum(a, b),
      "max under DAZ: subnormals compare equal to 0; result is one of the operands' bits")
R.run("min", lambda a, b: lax.min(a, b), [mx_a, mx_b], lambda a, b: np.minimum(a, b),
      "min under DAZ")
R.run("relu_maximum_literal", lambda x: (jnp.maximum(x, 0.0), jax.nn.relu(x)),
      [A(1e-40, -1e-40, 1.0, -1.0)], lambda x: (np.maximum(x, f32(0)), np.maximum(x, f32(0))),
      "max(x, 0.0) with a subnormal x")
R.run("compare", lambda x, y: (x > y, x == y, x < y, x != y, x >= y),
      [A(1e-40, -1e-40, 0.0, 1e-40, 1e-40, TINY), A(0.0, 0.0, 1e-40, 2e-40, 1e-40, -TINY)],
      lambda x, y: (x > y, x == y, x < y, x != y, x >= y),
      "DAZ: comparisons read subnormal operands as ±0 (1e-40 > 0 is False, 1e-40 == 0 is True)")
R.run("compare_literal_zero", lambda x: (x > 0, x == 0, x < 0),
      [A(1e-40, -1e-40, TINY)], lambda x: (x > 0, x == 0, x < 0), "x > 0 for a subnormal x")
R.run("select_n_passthrough", lambda p, a, b: lax.select_n(p, a, b),
      [np.array([True, False, True, False]), A(1e-40, 1e-40, 1.0, -1e-40), A(2e-40, 0.0, -1e-40, TINY)],
      lambda p, a, b: np.where(p, b, a), "select_n moves bits: subnormals pass through unchanged")
R.run("where_gt0", lambda x: jnp.where(x > 0, x, 0.0), [A(1e-40, -1e-40, 1.0, 2e-38)],
      lambda x: np.where(x > 0, x, f32(0)), "where(x>0, x, 0): the compare is DAZ'd, the select is not")
R.run("clamp", lambda x: lax.clamp(f32(0.0), x, f32(1.0)), [A(1e-40, -1e-40, 0.5)],
      lambda x: np.clip(x, f32(0), f32(1)), "clamp(0, sub, 1)")
R.run("sign_floor_ceil_round", lambda x: (jnp.sign(x), jnp.floor(x), jnp.ceil(x), jnp.round(x)),
      [A(1e-40, -1e-40, TINY, 0.5)],
      lambda x: (np.sign(x), np.floor(x), np.ceil(x), np.round(x)),
      "sign/floor/ceil/round of subnormals (DAZ: ceil(1e-40)=0 not 1, sign 0 not 1?)")
R.run("is_finite_nextafter", lambda x, y: (jnp.isfinite(x), jnp.nextafter(x, y)),
      [A(0.0, 1e-40, MN, 0.0), A(1.0, 1.0, 0.0, -1.0)],
      lambda x, y: (np.isfinite(x), np.nextafter(x, y)), "nextafter (bit arithmetic) can produce subnormals")

# ---------------------------------------------------------------- sign ops, bitcast, data movement
R.run("abs_neg", lambda x: (jnp.abs(x), -x), [A(1e-40, -1e-40, TINY, -TINY)],
      lambda x: (np.abs(x), -x), "abs/neg are bit operations: subnormals kept")
R.run("bitcast_to_f32", lambda i: lax.bitcast_convert_type(i, jnp.float32),
      [np.array([1, -2147483647, 0x007fffff, 0x00800000], np.int32)],
      lambda i: i.view(f32), "bitcast from int: subnormal bit patterns kept")
R.run("bitcast_from_f32", lambda x: lax.bitcast_convert_type(x, jnp.int32), [A(1e-40, -TINY)],
      lambda x: x.view(np.int32), "bitcast to int: bits kept")
R.run("bitcast_roundtrip_add", lambda i, y: lax.bitcast_convert_type(i, jnp.float32) + y,
      [np.array([1, 0x00400000], np.int32), A(0.0, 0.0)],
      lambda i, y: i.view(f32) + y, "a subnormal made by bitcast then added to 0: DAZ")
xm = np.array([[1e-40, -2e-40, 3e-40], [TINY, -TINY, 1e-39]], f32)
R.run("transpose", lambda x: x.T, [xm], lambda x: x.T, "data movement: bits kept")
R.run("reshape_rev_slice", lambda x: (x.reshape(3, 2), lax.rev(x, (1,)), x[:, 1:]), [xm],
      lambda x: (x.reshape(3, 2), x[:, ::-1], x[:, 1:]), "data movement: bits kept")
R.run("copy_concat_bcast", lambda x, y: (jnp.copy(x), jnp.concatenate([x, y]), jnp.broadcast_to(y, (2, 2))),
      [A(1e-40, -TINY), A(2e-40, 1e-45)],
      lambda x, y: (x.copy(), np.concatenate([x, y]), np.broadcast_to(y, (2, 2)).copy()), "data movement")
R.run("pad_gather_dynslice", lambda x, pv, i: (lax.pad(x, pv, [(1, 1, 0)]), x[i], lax.dynamic_slice(x, (i[0],), (2,))),
      [A(1e-40, -2e-40, 3e-40), np.array(5e-41, f32), np.array([2, 0], np.int32)],
      lambda x, pv, i: (np.concatenate([pv.reshape(1), x, pv.reshape(1)]), x[i], x[i[0]:i[0] + 2] if i[0] + 2 <= 3 else x[1:3]),
      "pad with a subnormal padding value, gather, dynamic_slice: bits kept")

# ---------------------------------------------------------------- conversions
R.run("convert_f32_to_bf16", lambda x: x.astype(jnp.bfloat16),
      [A(1e-39, 1e-40, -1e-40, 1.1e-38, MN, TINY, 9.2e-41)],
      lambda x: x.astype(BF16), "XLA f32->bf16 is integer RNE on the bits: subnormals kept (no DAZ/FTZ)")
R.run("convert_f32_to_f16", lambda x: x.astype(jnp.float16),
      [A(1e-6, -3e-5, 6e-8, 2e-8, 6.1e-5, 1e-40, 3e-8)],
      lambda x: x.astype(F16), "f32->f16 (vcvtps2ph): f16 subnormal results from normal f32 inputs")
R.run("convert_bf16_to_f32", lambda x: x.astype(jnp.float32),
      [np.array([1, 0x40, 0x8010, 0x80, 0x7f], np.uint16).view(BF16)],
      lambda x: x.astype(f32), "bf16 subnormal -> f32 (shift of the bits)")
R.run("convert_f16_to_f32", lambda x: x.astype(jnp.float32),
      [np.array([1e-6, 6e-8, -3e-5, 6.1e-5], F16)],
      lambda x: x.astype(f32), "f16 subnormal -> f32 is exact (f16 subnormals are normal f32)")
R.run("convert_bf16_to_f32_then_add", lambda x, y: x.astype(jnp.float32) + y,
      [np.array([1, 0x40], np.uint16).view(BF16), A(0.0, 0.0)],
      lambda x, y: x.astype(f32) + y, "bf16 subnormal widened then used in arithmetic: DAZ")
R.run("convert_f32_to_i32", lambda x: x.astype(jnp.int32),
      [A(1e-40, -1e-40)], lambda x: x.astype(np.int32), "f32->int of a subnormal is 0 either way", record=False)

# ---------------------------------------------------------------- bf16 / f16 arithmetic
bfa = np.array([1e-20, -1e-20, 1e-19], BF16)
bfb = np.array([1e-20, 1e-20, 1e-19], BF16)
R.run("bf16_mul_ftz", lambda a, b: a * b, [bfa, bfb],
      lambda a, b: (a.astype(np.float64) * b.astype(np.float64)).astype(f32).astype(BF16),
      "bf16 ops are computed in f32 then rounded: the f32 product is flushed")
R.run("bf16_mul_daz", lambda a, b: a * b,
      [np.array([1, 0x40], np.uint16).view(BF16), np.array([2.0 ** 100, 2.0 ** 100], BF16)],
      lambda a, b: (a.astype(np.float64) * b.astype(np.float64)).astype(f32).astype(BF16), "bf16 subnormal input: DAZ")
R.run("bf16_exp", lambda x: jnp.exp(x), [np.array([-88, -100, -90, -80], BF16)],
      lambda x: np.exp(x.astype(np.float64)).astype(f32).astype(BF16), "bf16 exp underflow")
R.run("f16_mul_subnormal_result", lambda a, b: a * b,
      [np.array([1e-3, 2e-4, -1e-3, 1e-4], F16), np.array([1e-3, 1e-3, 1e-3, 1e-4], F16)],
      lambda a, b: (a.astype(np.float64) * b.astype(np.float64)).astype(F16),
      "f16 ops are computed in f32 (where f16 subnormals are normal) then rounded: f16 subnormals kept")
R.run("f16_sub_input", lambda a, b: (a * b, a + b, a > 0),
      [np.array([6e-8, 1e-6], F16), np.array([1000.0, 1e-6], F16)],
      lambda a, b: ((a.astype(np.float64) * b.astype(np.float64)).astype(F16),
                    (a.astype(np.float64) + b.astype(np.float64)).astype(F16), a > 0),
      "f16 subnormal inputs are exact (normal) in f32: no DAZ effect")
R.run("f16_exp", lambda x: jnp.exp(x), [np.array([-10.0, -15.0, -17.0, -16.5], F16)],
      lambda x: np.exp(x.astype(np.float64)).astype(F16), "f16 exp with f16-subnormal results")

# ---------------------------------------------------------------- reductions, scans, sort
R.run("reduce_sum_ftz", lambda x: jnp.sum(x), [A(1.5e-38, -1.4e-38)], lambda x: np.sum(x.astype(np.float64)).astype(f32),
      "sum whose result is subnormal: 0")
R.run("reduce_sum_partial", lambda x: jnp.sum(x), [A(1.5e-38, -1.4e-38, 1.2e-38, 0.0)],
      lambda x: np.sum(x.astype(np.float64)).astype(f32), "partial sum 1e-39 is flushed: result 1.2e-38 not 1.3e-38")
R.run("reduce_sum_daz", lambda x: jnp.sum(x), [np.full(8, 1e-39, f32)],
      lambda x: np.sum(x.astype(np.float64)).astype(f32), "sum of subnormal inputs: 0 (DAZ)")
R.run("reduce_sum_axis", lambda x: jnp.sum(x, axis=1),
      [np.array([[1.5e-38, -1.4e-38, 0.0], [1e-39, 1e-39, MN], [MN, -MN, 2e-38]], f32)],
      lambda x: np.sum(x.astype(np.float64), axis=1).astype(f32), "row sums")
R.run("reduce_max", lambda x: (jnp.max(x), jnp.min(x), jnp.argmax(x), jnp.argmin(x)),
      [A(0.0, 1e-40, 3e-40, 2e-40, -1e-40)],
      lambda x: (np.max(x), np.min(x), np.int32(np.argmax(x)), np.int32(np.argmin(x))),
      "max/min/argmax/argmin in one jit: XLA computes max (and min) from the variadic argmax/argmin reduce, whose comparator is compare+select (bits kept, DAZ compares: all ties, the value of the last tie wins, the index of the first); alone they give +0.0/-0.0")
R.run("reduce_max_alone", lambda x: jnp.max(x), [A(0.0, 1e-40, 3e-40, 2e-40, -1e-40, 5e-41, 0.0, 1e-45)],
      lambda x: np.max(x), "reduce_max alone is llvm.maximum (arithmetic): DAZ'd operands, result +0.0 (not a subnormal)")
R.run("reduce_min_alone", lambda x: jnp.min(x), [A(0.0, 1e-40, 3e-40, 2e-40, -1e-40, 5e-41, 0.0, 1e-45)],
      lambda x: np.min(x), "reduce_min alone: -1e-40 reads as -0.0, the minimum is -0.0")
R.run("cumsum", lambda x: jnp.cumsum(x), [A(1.5e-38, -1.4e-38, 1e-40, 1e-38, 2e-38)],
      lambda x: np.cumsum(x.astype(np.float64)).astype(f32), "cumsum with subnormal prefix sums")
R.run("sort", lambda x: jnp.sort(x), [A(2e-40, -1e-40, 0.0, 1e-40, -0.0, MN, -2e-40, 1e-45)],
      lambda x: np.sort(x), "sort of subnormals")
R.run("sort_keyed", lambda k, v: lax.sort((k, v), num_keys=1),
      [A(3e-40, 1e-40, 2e-40, 0.0), np.array([0, 1, 2, 3], np.int32)],
      lambda k, v: (np.sort(k, kind="stable"), v[np.argsort(k, kind="stable")].astype(np.int32)),
      "lax.sort with subnormal keys")

# ---------------------------------------------------------------- dot_general
R.run("dot_1x1", lambda a, b: a @ b, [np.array([[1e-20]], f32), np.array([[-1e-20]], f32)],
      lambda a, b: a @ b, "1x1 dot is rewritten to a multiply: FTZ")
R.run("dot_vec3", lambda a, b: jnp.dot(a, b), [A(1e-20, 2e-20, 3e-20), A(1e-20, 1e-20, 1e-20)],
      lambda a, b: np.float32(np.dot(a.astype(np.float64), b.astype(np.float64))),
      "vector dot = multiply+reduce fusion: every product flushed")
R.run("dot_4x4", lambda a, b: a @ b, [np.full((4, 4), 2.0 ** -70, f32), np.full((4, 4), 2.0 ** -70, f32)],
      lambda a, b: a @ b, "4x4 dot stays an HLO dot (Eigen DotThunk): FTZ")
R.run("dot_daz_small", lambda a, b: a @ b, [np.full((2, 2), 2.0 ** -140, f32), np.full((2, 2), 2.0 ** 100, f32)],
      lambda a, b: a @ b, "subnormal inputs to a dot: DAZ")


def big_pair(n, la, lb):
    i = np.arange(n)
    a = (2.0 ** la) * (((i[:, None] + i[None, :]) % 3) + 1)
    b = (2.0 ** lb) * (((i[:, None] + 2 * i[None, :]) % 3) + 1)
    return a.astype(f32), b.astype(f32)


ba, bb = big_pair(256, -70, -70)
R.run("dot_256_ftz", lambda a, b: a @ b, [ba, bb], lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(f32),
      "256x256 dot (YNNPACK fusion): every product 2^-140*k is subnormal: FTZ gives 0 (IEEE: exact subnormal sums)")
ba2, bb2 = big_pair(256, -140, 100)
R.run("dot_256_daz", lambda a, b: a @ b, [ba2, bb2], lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(f32),
      "256x256 dot with subnormal lhs: DAZ gives 0 (IEEE: normal)", record=False)
ba3, bb3 = big_pair(16, -70, -70)
R.run("dot_16_ftz", lambda a, b: a @ b, [ba3, bb3], lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(f32),
      "16x16 dot (YNNPACK fusion)")

# ---------------------------------------------------------------- control flow, custom_jvp, constants


def scan_fn(c0, xs):
    def body(c, x):
        c = c * x
        return c, c
    return lax.scan(body, c0, xs)


R.run("scan_mul", scan_fn, [A(1e-20), A(1e-10, 1e-10, 1e-10, 1e30)],
      lambda c0, xs: (f32(c0[0] * xs[0] * xs[1] * xs[2] * xs[3]).reshape(1),
                      np.array([[c0[0] * xs[0]], [c0[0] * xs[0] * xs[1]], [c0[0] * xs[0] * xs[1] * xs[2]],
                                [c0[0] * xs[0] * xs[1] * xs[2] * xs[3]]], f32)),
      "scan body (a separate while thunk): FTZ; the flushed carry stays 0")


def while_fn(x, k):
    return lax.fori_loop(0, 3, lambda i, c: c * k, x)


R.run("fori_loop_mul", while_fn, [A(1e-20, 1.0), A(1e-10, 1e-10)],
      lambda x, k: (x * k * k * k), "while body: FTZ")


@jax.custom_jvp
def cexp(x):
    return jnp.exp(x) * 1e-10


@cexp.defjvp
def cexp_jvp(p, t):
    (x,), (tx,) = p, t
    y = cexp(x)
    return y, y * tx


R.run("custom_jvp", lambda x: cexp(x), [A(-60.0, -70.0, 0.0, -65.0)],
      lambda x: (np.exp(x.astype(np.float64)).astype(f32) * f32(1e-10)),
      "custom_jvp_call body runs like any other ops: FTZ")
R.run("grad_custom_jvp", jax.grad(lambda x: jnp.sum(cexp(x))), [A(-60.0, -70.0, 0.0, -65.0)],
      lambda x: (np.exp(x.astype(np.float64)).astype(f32) * f32(1e-10)), "grad through custom_jvp")
R.run("grad_mul", jax.grad(lambda x, y: jnp.sum(x * y)), [A(1e-40, 1.0), A(1.0, 1e-40)],
      lambda x, y: y.copy(), "grad of sum(x*y) wrt x is 1.0*y: the literal 1.0 multiply is simplified away under jit (y passes through), computed eagerly (DAZ)")

out = {"rows": R.rows, "cases": R.cases}
dump_json("out_f32_cases.json", R.cases)
with open("out_f32.md", "w") as f:
    f.write(R.markdown() + "\n")
R.print_rows()
