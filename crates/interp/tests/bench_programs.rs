//! The benchmark programs (up to 1024x1024x1024 products) evaluate in reasonable time on
//! deterministic inputs, giving finite values of the declared types; the realistic-size
//! models (CNN, ResNet block, GPT block) do so in release builds, and their reduced-size
//! twins give JAX's values and gradients.

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array, DType};
use remat_testkit::{check_close, data_files, is_model_bench, reduced_bench_cases, try_arrays};

/// Small values in [-0.5, 0.5), different for every element and argument.
fn input(arg: usize, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| (((i * 7919 + arg * 104_729) % 1000) as f32 / 1000.0 - 0.5) * 0.2).collect();
    Array::F32(ArrayD::from_shape_vec(IxDyn(shape), data).expect("the element count matches"))
}

#[test]
fn benchmark_programs_evaluate() {
    let paths = data_files("bench", "jaxpr");
    assert_eq!(paths.len(), 25, "expected 25 benchmark programs");
    for path in &paths {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        // 4-12 GFLOP a step: minutes in a debug build (their values: the reduced twins below).
        if cfg!(debug_assertions) && is_model_bench(&name) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable");
        let jaxpr = parse_jaxpr(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let args: Vec<Array> = jaxpr
            .in_avals()
            .iter()
            .enumerate()
            .map(|(i, aval)| {
                assert_eq!(aval.dtype, DType::F32, "{name}: benchmark inputs are f32");
                input(i, &aval.shape)
            })
            .collect();
        let start = Instant::now();
        let outs = eval_jaxpr(&jaxpr, &[], &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let elapsed = start.elapsed();
        eprintln!("{name}: {:.3}s", elapsed.as_secs_f64());
        for (out, aval) in outs.iter().zip(jaxpr.out_avals()) {
            assert!(out.aval().same_type(&aval), "{name}: output {} should be {aval}", out.aval());
            assert!(out.to_f64_vec().iter().all(|x| x.is_finite()), "{name}: output {aval} is not finite");
        }
    }
}

/// The CNN, ResNet block and GPT block at reduced size: the interpreter gives JAX's loss and
/// gradients (rel 1e-4: sums over a few hundred terms in another order).
#[test]
fn reduced_model_programs_match_jax() {
    let cases = reduced_bench_cases();
    assert_eq!(cases.len(), 13, "expected 13 reduced-size model programs");
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let jaxpr =
            parse_jaxpr(case["jaxpr"].as_str().expect("a jaxpr"), name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let args = try_arrays(case, "args").unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = try_arrays(case, "outputs").unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = eval_jaxpr(&jaxpr, &[], &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Err(e) = check_close(&format!("{name}: interpreter vs JAX"), &got, &want, 1e-4, 1e-5) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} of {} programs differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
