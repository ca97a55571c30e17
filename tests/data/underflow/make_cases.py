"""Concatenate the recorded cases into cases.json and check that every float written
round-trips to the recorded bits.   python make_cases.py"""
import json
import numpy as np
from common import BF16, hexbits

DT = {"f32": np.float32, "f64": np.float64, "bf16": BF16, "f16": np.float16, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}


def parse(a):
    vals = [float(v) if isinstance(v, str) else v for v in a["data"]]   # "nan"/"inf"/"-inf"
    x = np.array(vals, dtype=np.float64 if a["dtype"] in ("f32", "f64", "bf16", "f16") else None)
    return x.astype(DT[a["dtype"]]).reshape(a["shape"])


cases = []
for f in ["out_f32_cases.json", "out_f64_cases.json", "out_constfold_cases.json", "out_functions_cases.json"]:
    cases += json.load(open(f))
names = [c["name"] for c in cases]
assert len(names) == len(set(names))
n = 0
for c in cases:
    for key in ("args", "outputs", "ieee_outputs", "eager_outputs"):
        for a in c.get(key, []):
            x = parse(a)
            b = hexbits(x)
            # NaN payloads are not kept by the JSON form ("nan"): compare NaNs as NaNs
            for got, want, v in zip(b, a.get("bits", b), x.reshape(-1)):
                if got != want:
                    assert a["dtype"] in ("f32", "f64", "bf16", "f16") and np.isnan(v), (c["name"], key, got, want)
            n += x.size
with open("cases.json", "w") as f:   # a JSON list, one case per line
    f.write("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")
assert json.load(open("cases.json")) == json.loads(json.dumps(cases))
print(len(cases), "cases,", n, "values round-trip exactly")
print(" ".join(names))
