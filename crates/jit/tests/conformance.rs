//! Differential tests on real JAX programs: every conformance case's jaxpr and JAX's own
//! forward and backward halves, and every benchmark program, compiled by the JIT, agree
//! with the interpreter (and so with JAX) within float32 tolerance.

mod common;

use common::differential;
use remat_ir::{parse_jaxpr, Array};
use remat_testkit::{
    check_close, conformance_cases, data_files, is_model_bench, primitive_cases, reduced_bench_cases, try_arrays, Rng,
};
use serde_json::Value;

fn run_text(case: &Value, field: &str, args: &[Array]) -> Result<Vec<Array>, String> {
    let text = case[field].as_str().ok_or_else(|| format!("field {field:?} is not a string"))?;
    let jaxpr = parse_jaxpr(text, "case.jaxpr").map_err(|e| format!("{field}: parse error: {e}"))?;
    differential(field, &jaxpr, args, 1e-4, 1e-5)?;
    let compiled = remat_jit::compile(&jaxpr).map_err(|e| format!("{field}: {e}"))?;
    compiled.run(args).map_err(|e| format!("{field}: {e}"))
}

fn check_case(case: &Value) -> Result<(), String> {
    let args = try_arrays(case, "args")?;
    let outputs = try_arrays(case, "outputs")?;
    check_close("output vs JAX", &run_text(case, "jaxpr", &args)?, &outputs, 1e-4, 1e-5)?;
    let fwd = run_text(case, "jax_fwd_jaxpr", &args)?;
    let (primals, residuals) = fwd.split_at(outputs.len().min(fwd.len()));
    check_close("fwd output vs JAX", primals, &outputs, 1e-4, 1e-5)?;
    let bwd_args: Vec<Array> = residuals.iter().cloned().chain(try_arrays(case, "cotangents")?).collect();
    check_close("grad vs JAX", &run_text(case, "jax_bwd_jaxpr", &bwd_args)?, &try_arrays(case, "grads")?, 1e-4, 1e-5)
}

#[test]
fn conformance_cases_match_the_interpreter_and_jax() {
    let cases = conformance_cases();
    let mut failures = Vec::new();
    for (name, case) in &cases {
        if let Err(e) = check_case(case) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert_eq!(cases.len(), 32, "expected 32 conformance cases");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn primitive_cases_match_the_interpreter_and_jax() {
    let cases = primitive_cases();
    let failures: Vec<String> =
        cases.iter().filter_map(|(name, case)| check_case(case).err().map(|e| format!("{name}: {e}"))).collect();
    assert!(!cases.is_empty(), "no cases in tests/data/primitives");
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

fn bench_programs() -> Vec<(String, remat_ir::Jaxpr)> {
    data_files("bench", "jaxpr")
        .iter()
        .map(|path| {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
            let text = std::fs::read_to_string(path).expect("readable");
            let jaxpr = parse_jaxpr(&text, &name).expect("parses");
            (name, jaxpr)
        })
        // The 1024-wide MLPs take most of a minute in the interpreter of a debug build, the
        // realistic-size models minutes (their values: `reduced_model_programs_match_jax`).
        .filter(|(name, _)| !(cfg!(debug_assertions) && (name.starts_with("mlp_large") || is_model_bench(name))))
        .collect()
}

/// The realistic-size models (CNN, ResNet block, GPT block) compile at full size in every
/// build (in a debug build with Cranelift's verifier on every function).
#[test]
fn realistic_size_model_programs_compile() {
    let paths: Vec<_> = data_files("bench", "jaxpr")
        .into_iter()
        .filter(|p| is_model_bench(&p.file_stem().unwrap_or_default().to_string_lossy()))
        .collect();
    assert_eq!(paths.len(), 13, "expected 13 realistic-size model programs");
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("readable");
        let jaxpr = parse_jaxpr(&text, "model.jaxpr").expect("parses");
        remat_jit::compile(&jaxpr).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Their reduced-size twins: the JIT gives the interpreter's values (rel 1e-4) and JAX's.
#[test]
fn reduced_model_programs_match_the_interpreter_and_jax() {
    let cases = reduced_bench_cases();
    assert_eq!(cases.len(), 13, "expected 13 reduced-size model programs");
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let check = || -> Result<(), String> {
            let args = try_arrays(case, "args")?;
            let got = run_text(case, "jaxpr", &args)?;
            check_close("jit vs JAX", &got, &try_arrays(case, "outputs")?, 1e-4, 1e-5)
        };
        if let Err(e) = check() {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} programs failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

fn perturbed(args: &[Array]) -> Vec<Array> {
    args.iter()
        .map(|x| match x {
            Array::F32(v) => Array::F32(v.mapv(|t| f32::from_bits(t.to_bits() ^ 1))),
            other => other.clone(),
        })
        .collect()
}

/// Benchmark programs on random inputs in [-1, 1], as the issue asks. With such weights
/// the deep tanh networks saturate and the gradients are ill-conditioned: flipping the last
/// bit of every input moves the interpreter's own weight gradients of `mlp_medium_*` by up
/// to 6x. So each output is allowed, on top of rel 1e-4 / abs 1e-5, twice the largest
/// change that a one-ulp perturbation of the inputs causes in the interpreter.
#[test]
fn benchmark_programs_on_unit_inputs_agree_within_the_interpreters_own_noise() {
    let mut failures = Vec::new();
    for (name, jaxpr) in bench_programs() {
        let mut rng = Rng(7);
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        let want = remat_interp::eval_jaxpr(&jaxpr, &[], &args).expect("the interpreter runs");
        let noise = remat_interp::eval_jaxpr(&jaxpr, &[], &perturbed(&args)).expect("the interpreter runs");
        let got = remat_jit::compile(&jaxpr).expect("compiles").run(&args).expect("runs");
        for (i, ((g, w), p)) in got.iter().zip(&want).zip(&noise).enumerate() {
            let (w, p) = (w.to_f64_vec(), p.to_f64_vec());
            let spread = w.iter().zip(&p).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            for (j, (a, b)) in g.to_f64_vec().into_iter().zip(&w).enumerate() {
                if (a - b).abs() > (1e-4 * b.abs()).max(1e-5) + 2.0 * spread {
                    failures.push(format!("{name} output {i} element {j}: jit {a}, interpreter {b}, noise {spread}"));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} outputs differ:\n{}", failures.len(), failures.join("\n"));
}

/// The same programs with weights scaled by 1/sqrt(fan-in) (how the benchmarks were
/// generated), where they are well-conditioned: tight agreement. The tolerance is rel 1e-3
/// because sums over up to 1024 products and 1024 rows round differently in GEMM order.
#[test]
fn benchmark_programs_on_scaled_inputs_match_the_interpreter() {
    let mut failures = Vec::new();
    for (name, jaxpr) in bench_programs() {
        let mut rng = Rng(11);
        let args: Vec<Array> = jaxpr
            .in_avals()
            .iter()
            .map(|a| match (rng.array(a), a.shape.as_slice()) {
                (Array::F32(v), &[fan_in, _]) if fan_in >= 64 => Array::F32(v / (fan_in as f32).sqrt()),
                (x, _) => x,
            })
            .collect();
        if let Err(e) = differential(&name, &jaxpr, &args, 1e-3, 1e-4) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} benchmark programs failed:\n{}", failures.len(), failures.join("\n"));
}
