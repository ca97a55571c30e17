//! XLA's float environment (issue 41): the underflow cases recorded from JAX 0.10.2 on CPU
//! (`tests/data/underflow/cases.json`, `make_cases.py`), one or more per primitive family
//! that can make or meet a subnormal, each run by the interpreter and by the JIT and
//! compared with JAX's bits. `xla_float_environment.md` there says what XLA does (FTZ and
//! DAZ on every thread that computes) and where it is set.
//!
//! The cases JAX's compiler folded from literals at compile time (`compile_time_folded`:
//! IEEE in some of XLA's folding paths, flushed in others, never what the same values give
//! as arguments) are not compared; neither are the two quirks of XLA's code generation
//! listed in `QUIRKS` with what remat gives instead.

use std::sync::Arc;

use remat::ir::parse_jaxpr;
use remat::json::ArrayJson;
use remat::run::{Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Nans};
use remat_testkit::data_dir;
use serde_json::Value;

/// Cases where XLA's result depends on how it vectorized the code, not on the float
/// environment, each with why remat's differs.
const QUIRKS: &[(&str, &str)] = &[
    (
        "log_sub_input_len5_quirk",
        "XLA computes log of 1-D arrays of length 3, 5, 6 or 7 with a scalar routine that reads the subnormal \
         as a number (-103.97); remat gives what every other length gives in XLA (-inf: DAZ reads it as 0)",
    ),
    (
        "reduce_max",
        "XLA computes max beside argmax of the same array from the variadic argmax reduce, which moves an \
         operand's bits; remat computes reduce_max as reduce_max alone gives it in XLA (reduce_max_alone)",
    ),
];

fn bits(a: &Array) -> Vec<u64> {
    match a {
        Array::F32(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        Array::F64(x) => x.iter().map(|v| v.to_bits()).collect(),
        Array::BF16(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        Array::F16(x) => x.iter().map(|v| u64::from(v.to_bits())).collect(),
        other => other.to_le_bytes().into_iter().map(u64::from).collect(),
    }
}

/// Equal bits, every NaN matching every NaN (the JSON form keeps no payloads).
fn same(got: &Array, want: &Array) -> bool {
    if got.aval() != want.aval() {
        return false;
    }
    let nan = |a: &Array| a.to_f64_vec().into_iter().map(f64::is_nan).collect::<Vec<_>>();
    let (gn, wn) = (nan(got), nan(want));
    bits(got).iter().zip(bits(want)).zip(gn.iter().zip(&wn)).all(|((g, w), (a, b))| (*a && *b) || *g == w)
}

fn arrays(case: &Value, field: &str) -> Vec<Array> {
    case[field].as_array().unwrap_or_else(|| panic!("{field}")).iter().map(|v| Array::from_json(v).expect(field)).collect()
}

#[test]
fn both_backends_give_jaxs_bits_where_values_underflow() {
    let text = std::fs::read_to_string(data_dir().join("underflow/cases.json")).expect("the recorded cases");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("JSON");
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("a name");
        if case["compile_time_folded"].as_bool() == Some(true) || QUIRKS.iter().any(|(q, _)| *q == name) {
            continue;
        }
        let jaxpr = parse_jaxpr(case["jaxpr"].as_str().expect("a jaxpr"), name).expect("parses");
        let args = arrays(case, "args");
        let want = arrays(case, "outputs");
        for backend in [Backend::Interp, Backend::Jit] {
            let options = RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
            let p = Program::new(ClosedJaxpr::new(Arc::new(jaxpr.clone())), &options).expect("compiles");
            let got = p.run(&args.iter().collect::<Vec<_>>()).expect("runs");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                if !same(g, w) {
                    failures.push(format!(
                        "{name} ({backend:?}) output {i}: got {:?}, JAX {:?} ({})",
                        g.to_f64_vec(),
                        w.to_f64_vec(),
                        case["note"].as_str().unwrap_or("")
                    ));
                }
            }
        }
        compared += 1;
    }
    assert!(compared >= 80);
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}
