//! XLA's float environment (issue 41): the underflow cases recorded from JAX 0.10.2 on CPU
//! (`tests/data/underflow/cases.json`, `make_cases.py`), one or more per primitive family
//! that can make or meet a subnormal, each run by the interpreter and by the JIT and
//! compared with JAX's bits. `xla_float_environment.md` there says what XLA does (FTZ and
//! DAZ on every thread that computes) and where it is set; docs/jit.md, "XLA's float
//! environment", what remat does.
//!
//! The rule: where an element underflows — JAX's value or the IEEE reference's
//! (`ieee_outputs`) is zero or subnormal, or an operand element at the same index is
//! subnormal — remat's bits are JAX's; elsewhere, in the normal range, they are within 2
//! ulp of JAX's (XLA's `exp`, `tanh` and `erf` are other polynomials than remat's: `tanh(1e-3)`
//! and `erf(1e-30)` differ by an ulp). Non-float results are equal. Cases where JAX's result
//! is an artifact of how XLA generated or folded the code are listed in `ARTIFACTS`, each
//! with what remat gives instead, which is asserted.

use std::sync::Arc;

use remat::ir::parse_jaxpr;
use remat::json::ArrayJson;
use remat::run::{Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Nans};
use remat_testkit::data_dir;
use serde_json::Value;

/// A case whose JAX result does not follow the float environment's rule, why, and remat's
/// result (each output's values, in its dtype).
struct Artifact {
    name: &'static str,
    why: &'static str,
    remat: &'static [&'static [f64]],
}

const ARTIFACTS: &[Artifact] = &[
    Artifact {
        name: "log_sub_input_len5_quirk",
        why: "XLA computes log of 1-D arrays of length 3, 5, 6 or 7 with a scalar libm routine, which \
              reads a subnormal as a number (-103.97) or a NaN; remat gives what every other length gives \
              in XLA (-inf: DAZ reads the subnormal as 0)",
        remat: &[&[f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY, -87.3365478515625, 0.0]],
    },
    Artifact {
        name: "reduce_max",
        why: "XLA computes max and min beside argmax and argmin of the same array from the variadic argmax \
              reduce, which moves an operand's bits (a subnormal); remat computes reduce_max and reduce_min \
              as they are alone in XLA (reduce_max_alone: +0.0, reduce_min_alone: -0.0), never a subnormal",
        remat: &[&[0.0], &[-0.0], &[0.0], &[0.0]],
    },
    Artifact {
        name: "cbrt",
        why: "XLA's cbrt is a call of the platform's cbrtf, whose bit tests see a subnormal that its \
              arithmetic (under DAZ) reads as 0: the result is garbage (-5.6e-16 for 1e-40); remat reads \
              the subnormal as 0, as XLA's own code does for every other function: cbrt(0) = 0",
        remat: &[&[0.0, 1.000000013351432e-10]],
    },
    Artifact {
        name: "constfold_exp_literal",
        why: "folded by XLA's compiler, in IEEE arithmetic: a subnormal; remat computes the literal's exp \
              when the program runs, as XLA does with an argument: 0",
        remat: &[&[0.0]],
    },
    Artifact {
        name: "constfold_mul_literals",
        why: "folded in IEEE arithmetic: the subnormal 1e-40; at run time the product is flushed",
        remat: &[&[0.0]],
    },
    Artifact {
        name: "constfold_sqrt_literal",
        why: "folded in IEEE arithmetic: 1e-20; at run time sqrt reads the subnormal as 0",
        remat: &[&[0.0]],
    },
    Artifact {
        name: "constfold_gt_literal",
        why: "folded in IEEE arithmetic: 1e-40 > 0 is true; at run time the compare reads it as 0",
        remat: &[&[0.0]],
    },
];

/// A float format: its sign bit and exponent field.
#[derive(Clone, Copy)]
struct Format {
    sign: u64,
    exponent: u64,
}

impl Format {
    fn is_nan(self, b: u64) -> bool {
        b & self.exponent == self.exponent && b & !(self.sign | self.exponent) != 0
    }

    /// A zero or a subnormal: the exponent field 0.
    fn is_tiny(self, b: u64) -> bool {
        b & self.exponent == 0
    }

    fn is_subnormal(self, b: u64) -> bool {
        self.is_tiny(b) && b & !self.sign != 0
    }

    /// Distance in ulps of two numbers (ordered by their bits as sign-magnitude integers).
    fn ulps(self, a: u64, b: u64) -> u64 {
        let key = |x: u64| if x & self.sign != 0 { -((x & !self.sign) as i128) } else { x as i128 };
        key(a).abs_diff(key(b)) as u64
    }
}

/// Each element's bits, and the float format (`None` for integers and booleans, whose
/// elements are their values' bits as `f64`).
fn bits(a: &Array) -> (Vec<u64>, Option<Format>) {
    let format = |sign: u64, exponent: u64| Some(Format { sign, exponent });
    match a {
        Array::F32(x) => (x.iter().map(|v| u64::from(v.to_bits())).collect(), format(1 << 31, 0x7F80_0000)),
        Array::F64(x) => (x.iter().map(|v| v.to_bits()).collect(), format(1 << 63, 0x7FF0_0000_0000_0000)),
        Array::BF16(x) => (x.iter().map(|v| u64::from(v.to_bits())).collect(), format(1 << 15, 0x7F80)),
        Array::F16(x) => (x.iter().map(|v| u64::from(v.to_bits())).collect(), format(1 << 15, 0x7C00)),
        other => (other.to_f64_vec().into_iter().map(f64::to_bits).collect(), None),
    }
}

/// Every element of `got` against `want` under the module's rule; `underflows[i]` says
/// where bits must be equal.
fn check(got: &Array, want: &Array, underflows: &[bool]) -> Result<(), String> {
    if got.aval() != want.aval() {
        return Err(format!("{} where JAX gives {}", got.aval(), want.aval()));
    }
    let ((g, format), (w, _)) = (bits(got), bits(want));
    for i in 0..g.len() {
        let ok = match format {
            None => g[i] == w[i],
            // NaN matches NaN: the JSON form keeps no payloads.
            Some(f) if f.is_nan(g[i]) || f.is_nan(w[i]) => f.is_nan(g[i]) && f.is_nan(w[i]),
            Some(f) if underflows[i] || f.is_tiny(w[i]) => g[i] == w[i],
            Some(f) => f.ulps(g[i], w[i]) <= 2,
        };
        if !ok {
            return Err(format!("element {i}: got {:?}, JAX {:?}", got.to_f64_vec()[i], want.to_f64_vec()[i]));
        }
    }
    Ok(())
}

fn arrays(case: &Value, field: &str) -> Vec<Array> {
    case[field].as_array().map_or_else(Vec::new, |v| v.iter().map(|v| Array::from_json(v).expect(field)).collect())
}

/// Both backends' outputs of a case.
fn run(case: &Value) -> Vec<(Backend, Vec<Array>)> {
    let name = case["name"].as_str().expect("a name");
    let jaxpr = parse_jaxpr(case["jaxpr"].as_str().expect("a jaxpr"), name).expect("parses");
    let args = arrays(case, "args");
    [Backend::Interp, Backend::Jit]
        .into_iter()
        .map(|backend| {
            let options = RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
            let p = Program::new(ClosedJaxpr::new(Arc::new(jaxpr.clone())), &options).expect("compiles");
            (backend, p.run(&args.iter().collect::<Vec<_>>()).expect("runs"))
        })
        .collect()
}

/// Where output `out` underflows: JAX's or the IEEE element is zero or subnormal, or an
/// operand element at the same index (of an operand with as many elements) is subnormal.
fn underflows(case: &Value, out: usize, want: &Array) -> Vec<bool> {
    let tiny = |a: &Array, subnormal_only: bool| -> Vec<bool> {
        let (b, format) = bits(a);
        b.iter()
            .map(|&b| format.is_some_and(|f| if subnormal_only { f.is_subnormal(b) } else { f.is_tiny(b) }))
            .collect()
    };
    let mut u = tiny(want, false);
    let ieee = arrays(case, "ieee_outputs").into_iter().nth(out);
    let operands = arrays(case, "args").into_iter().filter(|a| a.len() == want.len());
    for (other, subnormal_only) in ieee.map(|a| (a, false)).into_iter().chain(operands.map(|a| (a, true))) {
        for (u, t) in u.iter_mut().zip(tiny(&other, subnormal_only)) {
            *u |= t;
        }
    }
    u
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(data_dir().join("underflow/cases.json")).expect("the recorded cases");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("JSON");
    assert!(cases.len() >= 90, "{} cases", cases.len());
    cases
}

#[test]
fn both_backends_give_jaxs_bits_where_values_underflow() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in &cases() {
        let name = case["name"].as_str().expect("a name");
        if ARTIFACTS.iter().any(|q| q.name == name) {
            continue;
        }
        // A folded program of literals alone is an artifact; one with arguments follows the rule.
        let folded = case["compile_time_folded"].as_bool() == Some(true);
        assert!(!folded || !arrays(case, "args").is_empty(), "{name} is folded: an artifact");
        let want = arrays(case, "outputs");
        for (backend, got) in run(case) {
            assert_eq!(got.len(), want.len(), "{name}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                if let Err(e) = check(g, w, &underflows(case, i, w)) {
                    let note = case["note"].as_str().unwrap_or("");
                    failures.push(format!("{name} ({backend:?}) output {i}, {e} ({note})"));
                }
            }
        }
        compared += 1;
    }
    assert!(compared >= 85, "{compared} cases compared");
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

/// Where JAX's result is an artifact, remat gives the rule's result on both backends, and
/// that differs from JAX's (else it would not be an artifact).
#[test]
fn artifacts_of_xlas_code_generation_give_the_rules_result() {
    let cases = cases();
    let bits = |values: &[f64]| values.iter().map(|v| v.to_bits()).collect::<Vec<u64>>();
    for artifact in ARTIFACTS {
        let case = cases.iter().find(|c| c["name"] == artifact.name).unwrap_or_else(|| panic!("{}", artifact.name));
        let rule: Vec<Vec<u64>> = artifact.remat.iter().map(|v| bits(v)).collect();
        let jax: Vec<Vec<u64>> = arrays(case, "outputs").iter().map(|a| bits(&a.to_f64_vec())).collect();
        assert_ne!(jax, rule, "{}: JAX gives the rule's result, this is no artifact", artifact.name);
        for (backend, got) in run(case) {
            let got: Vec<Vec<u64>> = got.iter().map(|a| bits(&a.to_f64_vec())).collect();
            assert_eq!(got, rule, "{} ({backend:?}): not the rule's result ({})", artifact.name, artifact.why);
        }
    }
}
