"""Subnormal behaviour of JAX 0.10.2 jit on CPU for f64 (MXCSR FTZ/DAZ cover double-precision SSE/AVX too),
and f64<->f32 conversions.     python measure_f64.py"""
import math
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from jax import lax
from common import Recorder, dump_json

f64, f32 = np.float64, np.float32
D = lambda *v: np.array(v, f64)
MN = np.finfo(f64).tiny           # 2.2250738585072014e-308
R = Recorder()
with np.errstate(all="ignore"):
    R.run("f64_add_ftz", lambda a, b: a + b, [D(3e-308, 1e-310, -3e-308), D(-2.5e-308, MN, 2.5e-308)],
          lambda a, b: a + b, "f64: FTZ on an add whose sum is subnormal; DAZ on a subnormal operand")
    R.run("f64_mul_ftz", lambda a, b: a * b, [D(1e-160, -1e-160, 1e-200), D(1e-160, 1e-160, 1e-120)],
          lambda a, b: a * b, "f64: FTZ on a subnormal product")
    R.run("f64_mul_daz", lambda a, b: a * b, [D(1e-320, 5e-324), D(2.0 ** 100, 1.0)],
          lambda a, b: a * b, "f64: DAZ on a subnormal factor")
    R.run("f64_div", lambda a, b: a / b, [D(1e-300, 1e-320), D(1e10, 1e-10)], lambda a, b: a / b, "f64 div")
    R.run("f64_exp", lambda x: jnp.exp(x), [D(-709.0, -720.0, -745.0, -708.0)], lambda x: np.exp(x),
          "f64 exp underflow")
    R.run("f64_log_sub_input", lambda x: jnp.log(x), [D(1e-310, 5e-324, MN)], lambda x: np.log(x),
          "f64 log of a subnormal")
    R.run("f64_tanh_sqrt", lambda x: (jnp.tanh(x), jnp.sqrt(x)), [D(1e-310, -1e-310)],
          lambda x: (np.tanh(x), np.sqrt(x)), "f64 tanh/sqrt of a subnormal")
    R.run("f64_compare", lambda x: (x > 0, x == 0), [D(1e-310, -1e-310, 5e-324)], lambda x: (x > 0, x == 0),
          "f64 compare: DAZ")
    R.run("f64_reduce_sum", lambda x: jnp.sum(x), [D(3e-308, -2.5e-308)], lambda x: np.sum(x), "f64 sum")
    R.run("f64_dot_small", lambda a, b: jnp.dot(a, b), [D(1e-160, 2e-160), D(1e-160, 1e-160)], lambda a, b: np.dot(a, b),
          "f64 vector dot")
    n = 64
    i = np.arange(n)
    A = (2.0 ** -530) * (((i[:, None] + i[None, :]) % 3) + 1)
    R.run("f64_dot_64", lambda a, b: a @ b, [A, A.T.copy()], lambda a, b: a @ b, "f64 64x64 dot: products 2^-1060*k are subnormal: FTZ gives 0")
    R.run("convert_f64_to_f32", lambda x: x.astype(jnp.float32), [D(1e-40, -1e-40, 1.4e-45, 1e-38, 1.2e-38, 7e-46)],
          lambda x: x.astype(f32), "f64->f32 producing f32 subnormals (cvtsd2ss): FTZ")
    R.run("convert_f32_to_f64", lambda x: x.astype(jnp.float64), [np.array([1e-40, -1e-40, 1.4e-45, 1.2e-38], f32)],
          lambda x: x.astype(f64), "f32 subnormal -> f64 (cvtss2sd): DAZ")
    R.run("convert_f64_to_bf16_f16", lambda x: (x.astype(jnp.bfloat16), x.astype(jnp.float16)),
          [D(1e-39, 1e-40, 1e-6, 3e-8)], lambda x: (x.astype(f32).astype(jnp.bfloat16), x.astype(np.float16)),
          "f64->bf16 / f64->f16")
    R.run("convert_f64_to_f32_sub_input", lambda x: x.astype(jnp.float32), [D(1e-310)], lambda x: x.astype(f32),
          "f64 subnormal -> f32 is 0 either way", record=False)
dump_json("out_f64_cases.json", R.cases)
with open("out_f64.md", "w") as f:
    f.write(R.markdown() + "\n")
R.print_rows()
