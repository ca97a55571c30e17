"""Shared helpers for the subnormal (FTZ/DAZ) measurements of JAX 0.10.2 on CPU.

Every case runs a function three ways on *runtime arguments* (device arrays passed to
the function, so XLA cannot constant-fold them):
  jit   : jax.jit(fn)(*args)
  eager : fn(*args)   (op-by-op dispatch; every primitive is compiled by XLA on its own)
  ieee  : a NumPy reference in IEEE arithmetic with subnormals (the main thread's MXCSR
          has FTZ and DAZ off), computed in float64 and rounded once where NumPy lacks the op.
"""
import json
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
F16 = np.float16

_UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64,
         np.dtype(BF16): np.uint16, np.dtype(np.float16): np.uint16,
         np.dtype(np.int32): np.uint32, np.dtype(np.uint32): np.uint32,
         np.dtype(np.bool_): np.uint8}
_WIDTH = {np.uint64: 16, np.uint32: 8, np.uint16: 4, np.uint8: 2}


def hexbits(a):
    """Hex of the raw bits of every element, row-major."""
    a = np.asarray(a)
    u = _UINT[a.dtype]
    w = _WIDTH[u]
    return [format(int(v), "0%dx" % w) for v in a.reshape(-1).view(u)]


def dtype_name(a):
    a = np.asarray(a)
    return {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(BF16): "bf16",
            np.dtype(np.float16): "f16", np.dtype(np.int32): "i32", np.dtype(np.uint32): "u32",
            np.dtype(np.bool_): "bool"}[a.dtype]


def _fj(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x  # json.dumps writes repr(float(x)): exact for f32/f64/bf16/f16 values


def arr(a):
    """remat's conformance JSON form of an array (non-finite floats as "nan"/"inf"/"-inf")."""
    a = np.asarray(a)
    name = dtype_name(a)
    flat = a.reshape(-1)
    if name in ("f32", "f64", "bf16", "f16"):
        data = [_fj(x) for x in flat.astype(np.float64)]
    elif name == "bool":
        data = [bool(x) for x in flat]
    else:
        data = [int(x) for x in flat]
    out = {"dtype": name, "shape": list(a.shape), "data": data}
    if a.size <= 4096:   # raw bits as hex, for reading; omitted for big arrays to keep cases.json small
        out["bits"] = hexbits(a)
    return out


def leaves(x):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def is_sub(v):
    """Per element: is it a nonzero subnormal?"""
    v = np.asarray(v)
    if v.dtype.kind != "f" and v.dtype != np.dtype(BF16):
        return np.zeros(v.shape, bool)
    tiny = {np.dtype(np.float32): np.finfo(np.float32).tiny, np.dtype(np.float64): np.finfo(np.float64).tiny,
            np.dtype(np.float16): np.finfo(np.float16).tiny, np.dtype(BF16): float(ml_dtypes.finfo(BF16).tiny)}[v.dtype]
    f = np.abs(v.astype(np.float64))
    return (f > 0) & (f < tiny)


class Recorder:
    def __init__(self):
        self.rows = []     # for the markdown tables
        self.cases = []    # for cases.json

    def run(self, name, fn, args, ref, rule="", record=True, show=True, eager=True):
        """fn: jax function; args: numpy arrays; ref: numpy function giving IEEE outputs."""
        dargs = [jax.device_put(a) for a in args]
        jit_out = leaves(jax.jit(fn)(*dargs))
        eager_out = leaves(fn(*dargs)) if eager else None
        ref_out = leaves(ref(*args))
        assert len(jit_out) == len(ref_out), name
        for o, r in zip(jit_out, ref_out):
            assert o.dtype == r.dtype and o.shape == r.shape, (name, o.dtype, r.dtype, o.shape, r.shape)
        same_eager = eager_out is None or all(
            hexbits(a) == hexbits(b) for a, b in zip(jit_out, eager_out))
        row = {"name": name, "args": args, "jit": jit_out, "eager_same": same_eager,
               "eager": eager_out, "ref": ref_out, "rule": rule, "show": show}
        self.rows.append(row)
        if record:
            self.cases.append({
                "name": name,
                "jaxpr": str(jax.make_jaxpr(fn)(*args)),
                "args": [arr(a) for a in args],
                "outputs": [arr(o) for o in jit_out],
                "ieee_outputs": [arr(o) for o in ref_out],
                "note": rule,
            })
            if sum(o.size for o in ref_out) > 4096:   # keep cases.json small: the IEEE values of big outputs are in the .md/.txt only
                del self.cases[-1]["ieee_outputs"]
            if not same_eager:
                self.cases[-1]["eager_outputs"] = [arr(o) for o in eager_out]
        return jit_out

    def print_rows(self, rows=None, limit=8):
        for row in rows or self.rows:
            print("==", row["name"], "|", row["rule"])
            for i, a in enumerate(row["args"]):
                a = np.asarray(a)
                print("   arg%d %s%s: %s" % (i, dtype_name(a), list(a.shape), _short(a, limit)))
            for i, (o, r) in enumerate(zip(row["jit"], row["ref"])):
                print("   jit  out%d: %s" % (i, _short(o, limit)))
                print("   ieee out%d: %s" % (i, _short(r, limit)))
            if not row["eager_same"]:
                for i, e in enumerate(row["eager"]):
                    print("   EAGER DIFFERS out%d: %s" % (i, _short(e, limit)))

    def markdown(self, limit=6):
        lines = ["| case | input (value = bits) | JAX jit (bits) | IEEE/NumPy (bits) | eager = jit? | rule |",
                 "|---|---|---|---|---|---|"]
        for row in self.rows:
            if not row["show"]:
                continue
            ins = "<br>".join(_short(a, limit, md=True) for a in row["args"])
            js = "<br>".join(_short(o, limit, md=True) for o in row["jit"])
            rs = "<br>".join(_short(o, limit, md=True) for o in row["ref"])
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                row["name"], ins, js, rs, "yes" if row["eager_same"] else "**no**", row["rule"]))
        return "\n".join(lines)


def _short(a, limit, md=False):
    a = np.asarray(a)
    flat = a.reshape(-1)
    n = flat.size
    if n > limit:
        # summarise big arrays: distinct values with counts
        vals, counts = np.unique(hexbits(a), return_counts=True)
        if len(vals) <= 4:
            u = _UINT[a.dtype]
            parts = []
            for v, c in zip(vals, counts):
                x = np.array([int(v, 16)], u).view(a.dtype)[0]
                parts.append("%d×%s=%s" % (c, _val(x, a.dtype), v))
            return "%s%s{%s}" % (dtype_name(a), list(a.shape), ", ".join(parts))
        flat = flat[:limit]
    hx = hexbits(flat)
    items = ["%s=%s" % (_val(x, a.dtype), h) for x, h in zip(flat, hx)]
    s = ", ".join(items) + (", …" if n > limit else "")
    return ("%s%s[%s]" % (dtype_name(a), list(a.shape), s))


def _val(x, dt):
    if dt == np.dtype(np.bool_):
        return str(bool(x))
    if dt.kind in "iu":
        return str(int(x))
    return repr(float(x))


def dump_json(path, cases):
    with open(path, "w") as f:
        json.dump(cases, f, indent=1)
