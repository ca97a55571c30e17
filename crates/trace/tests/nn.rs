//! `remat_trace::nn` against JAX itself: each case of `tests/data/nn_oracle.json`
//! (recorded by `gen_nn.py` from JAX 0.10.2) has a Rust twin here of the same name. The
//! twin's traced jaxpr must print as JAX's, character for character, and evaluate with the
//! interpreter to JAX's outputs: the masks and initial values drawn from a key bit for
//! bit up to the few ulps of XLA's own arithmetic (`erf_inv`, fused multiply-adds), the
//! rest within rel 1e-5. Where JAX differentiates a case, remat-ad's gradient of the
//! output's sum must be JAX's within rel 1e-4 / abs 1e-5.

mod oracle;

use oracle::{check_oracle_with, p, Program};

use std::collections::BTreeMap;

use remat_ir::{Array, Aval, DType};
use remat_trace::nn::{self, initializers};
use remat_trace::{make_jaxpr, Tensor};

/// The Rust twin of each oracle case.
fn programs() -> BTreeMap<String, Program> {
    let mut m: BTreeMap<String, Program> = BTreeMap::new();
    let mut add = |name: String, f: Program| {
        assert!(m.insert(name.clone(), f).is_none(), "{name} twice");
    };
    add("softplus".into(), p(|a| nn::softplus(&a[0])));
    add("gelu_tanh".into(), p(|a| nn::gelu(&a[0])));
    add("gelu_erf".into(), p(|a| nn::gelu_erf(&a[0])));
    add("standardize".into(), p(|a| nn::standardize(&a[0], -1, 1e-5)));
    add("layer_norm".into(), p(|a| nn::layer_norm(&a[0], &a[1], &a[2], 1e-5)));
    for kn in ["k0", "k42"] {
        add(format!("dropout {kn}"), p(|a| nn::dropout(&a[0], &a[1], 0.1)));
        add(format!("glorot_uniform {kn}"), p(|a| initializers::glorot_uniform(&a[0], &[3, 4], DType::F32)));
        add(format!("glorot_uniform_conv {kn}"), p(|a| initializers::glorot_uniform(&a[0], &[3, 3, 2, 5], DType::F32)));
        add(format!("he_normal {kn}"), p(|a| initializers::he_normal(&a[0], &[3, 4], DType::F32)));
        add(format!("normal {kn}"), p(|a| initializers::normal(&a[0], &[3, 4], DType::F32, 0.02)));
        add(format!("lecun_normal {kn}"), p(|a| initializers::lecun_normal(&a[0], &[3, 4], DType::F32)));
        add(format!("lecun_uniform {kn}"), p(|a| initializers::lecun_uniform(&a[0], &[4, 3], DType::F32)));
        add(format!("xavier_normal {kn}"), p(|a| initializers::xavier_normal(&a[0], &[3, 4], DType::F32)));
        add(format!("glorot_normal_conv {kn}"), p(|a| initializers::glorot_normal(&a[0], &[2, 2, 3, 4], DType::F32)));
        add(format!("he_uniform {kn}"), p(|a| initializers::he_uniform(&a[0], &[5, 2], DType::F32)));
        add(
            format!("variance_scaling_normal_fan_out {kn}"),
            p(|a| {
                use initializers::{Distribution, FanMode};
                initializers::variance_scaling(&a[0], &[3, 4], DType::F32, 2.0, FanMode::FanOut, Distribution::Normal)
            }),
        );
    }
    m
}

/// How many `f32` values lie between `a` and `b` (0: the same bits).
fn ulp_distance(a: f64, b: f64) -> u64 {
    let ordered = |x: f64| {
        let bits = i64::from((x as f32).to_bits());
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (ordered(a) - ordered(b)).unsigned_abs()
}

/// The masks and initial values drawn from a key bit for bit up to a few ulps, the rest
/// within rel 1e-5.
fn check_values(got: &[Array], want: &[Array]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.aval() != w.aval() {
            return Err(format!("output {i} is {}, JAX's is {}", g.aval(), w.aval()));
        }
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = a == b || ulp_distance(a, b) <= 8 || (a - b).abs() <= 1e-5 * b.abs().max(1e-2);
            if !close {
                return Err(format!("output {i}, element {j}: got {a}, JAX gave {b}"));
            }
        }
    }
    Ok(())
}

#[test]
fn every_nn_case_prints_evaluates_and_differentiates_as_jax_does() {
    check_oracle_with("nn_oracle.json", &programs(), check_values);
}

fn trace_error(f: impl FnOnce(Vec<Tensor>) -> Tensor, avals: Vec<Aval>) -> String {
    let e = make_jaxpr(f, &avals).map(|t| t.to_string()).expect_err("a tracing error").to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/nn.rs:"), "{e}");
    e
}

#[test]
fn wrong_inputs_are_located_errors() {
    let key = Aval::new(DType::U32, vec![2]);
    let e = trace_error(|a| initializers::glorot_uniform(&a[0], &[5], DType::F32), vec![key.clone()]);
    assert!(e.starts_with("crates/trace/tests/nn.rs:"), "{e}");
    assert!(e.ends_with("glorot_uniform: a kernel needs at least two axes (in and out), found shape [5]"), "{e}");
    let e = trace_error(|a| initializers::lecun_normal(&a[0], &[], DType::F32), vec![key.clone()]);
    assert!(e.ends_with("lecun_normal: a kernel needs at least two axes (in and out), found shape []"), "{e}");
    let e = trace_error(
        |a| {
            use initializers::{Distribution, FanMode};
            initializers::variance_scaling(&a[0], &[4], DType::F32, 1.0, FanMode::FanIn, Distribution::Normal)
        },
        vec![key.clone()],
    );
    assert!(e.ends_with("variance_scaling: a kernel needs at least two axes (in and out), found shape [4]"), "{e}");
    let e = trace_error(|a| initializers::he_uniform(&a[0], &[2, 3], DType::F32), vec![Aval::new(DType::F32, vec![2])]);
    assert!(e.contains("uniform: expected a PRNG key"), "{e}");
    let e = trace_error(|a| nn::dropout(&a[0], &a[1], 1.0), vec![key.clone(), Aval::new(DType::F32, vec![3])]);
    assert!(e.ends_with("dropout: the rate must be in [0, 1), found 1"), "{e}");
    let e = trace_error(|a| nn::dropout(&a[1], &a[0], 0.5), vec![key, Aval::new(DType::F32, vec![3])]);
    assert!(e.starts_with("crates/trace/tests/nn.rs:"), "the error is at the user's call of dropout: {e}");
    assert!(e.ends_with("bernoulli: expected a PRNG key (a legacy u32[2] key from prng_key, or a key<fry>[] from key), found f32[3]"), "{e}");
}
