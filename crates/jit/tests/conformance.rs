//! Differential tests on real JAX programs: every conformance case's jaxpr and JAX's own
//! forward and backward halves, and every benchmark program, compiled by the JIT, agree
//! with the interpreter (and so with JAX) within float32 tolerance.

mod common;

use common::differential;
use remat_ir::{parse_jaxpr, Array, CompareOp, Primitive};
use remat_testkit::{
    check_close, conformance_cases, data_files, is_model_bench, primitive_cases, reduced_bench_cases, sharded_cases,
    try_arrays, Rng,
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

/// The sharded cases (issue 46): the JIT runs each `shard_map` unrolled over its mesh's
/// devices; the program, JAX's forward and backward jaxprs and each policy's program agree
/// with the interpreter and with JAX (gradients within twice JAX's own f32 error against
/// f64 where that is larger, as the interpreter's test has it).
#[test]
fn sharded_cases_match_the_interpreter_and_jax() {
    let cases = sharded_cases();
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let atol = |what: &str| case["f32_error"][what].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
        let result = (|| {
            let args = try_arrays(case, "args")?;
            let outputs = try_arrays(case, "outputs")?;
            check_close("output vs JAX", &run_text(case, "jaxpr", &args)?, &outputs, 1e-4, atol("outputs"))?;
            let fwd = run_text(case, "jax_fwd_jaxpr", &args)?;
            let (primals, residuals) = fwd.split_at(outputs.len().min(fwd.len()));
            check_close("fwd output vs JAX", primals, &outputs, 1e-4, atol("outputs"))?;
            let bwd_args: Vec<Array> = residuals.iter().cloned().chain(try_arrays(case, "cotangents")?).collect();
            let grads = run_text(case, "jax_bwd_jaxpr", &bwd_args)?;
            check_close("grad vs JAX", &grads, &try_arrays(case, "grads")?, 1e-4, atol("grads"))?;
            for p in case["policies"].as_array().ok_or("no policies")? {
                check_close("policy output vs JAX", &run_text(p, "jaxpr", &args)?, &outputs, 1e-4, atol("outputs"))?;
            }
            Ok::<(), String>(())
        })();
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert_eq!(cases.len(), 8, "expected 8 sharded cases");
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

/// Whether the program (or a jaxpr it calls) compares floating-point values by order
/// (`gt`, `ge`, `lt`, `le`): a relu's mask, a max pool's choice. Such a program's gradient
/// jumps where a compared value crosses the other, and at full size, on random inputs, some
/// of its millions of compared pairs lie within float32 rounding of each other: there the
/// JIT and the interpreter, summing in different orders, may take different sides. Measured
/// on this suite's inputs: one max-pool window of cnn_plain whose two largest values differ
/// by 4.6e-7 relative (the JIT and the interpreter pick different ones; the float64 value
/// agrees with the interpreter), and one element of resnet_plain's normalized activation
/// within rounding of zero. One flipped gate moves the weight gradients by up to 0.4% in
/// the 2-norm (through the normalization's backward), so no tolerance separates it from a
/// bug; such programs are checked in float64 instead
/// (`gated_benchmark_programs_match_the_interpreter_in_float64`).
fn has_float_order_gates(jaxpr: &remat_ir::Jaxpr) -> bool {
    jaxpr.eqns.iter().any(|eqn| {
        let order =
            matches!(eqn.primitive, Primitive::Compare(CompareOp::Gt | CompareOp::Ge | CompareOp::Lt | CompareOp::Le));
        let float = eqn.invars.iter().any(|a| jaxpr.atom_aval(a).dtype.is_float());
        (order && float) || eqn.primitive.subjaxprs().iter().any(|j| has_float_order_gates(j))
    })
}

/// The program with every float32 value made float64 (types, literals and dtype
/// parameters: the printed text's `f32` and `float32`), as JAX would trace it under
/// `jax_enable_x64` with float64 inputs.
fn float64_twin(text: &str, name: &str) -> remat_ir::Jaxpr {
    let twin = text.replace("float32", "float64").replace("f32", "f64");
    parse_jaxpr(&twin, name).expect("the float64 twin parses")
}

/// The programs with float order gates at full size, in float64, where rounding is 2^-53 and
/// no compared pair of these inputs lies within it: the JIT's values equal the
/// interpreter's to rel 1e-9. This runs the same lowering at the same sizes as float32 (the
/// blocked im2col copies, the threads' blocks of rows, split-k, the pooling windows); the
/// float32 kernels at full size are checked by the other benchmark programs, and these
/// programs' float32 values against JAX's at reduced size
/// (`reduced_model_programs_match_the_interpreter_and_jax`).
#[test]
fn gated_benchmark_programs_match_the_interpreter_in_float64() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in data_files("bench", "jaxpr") {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).expect("readable");
        if !has_float_order_gates(&parse_jaxpr(&text, &name).expect("parses"))
            || (cfg!(debug_assertions) && is_model_bench(&name))
        {
            continue;
        }
        let jaxpr = float64_twin(&text, &name);
        let mut rng = Rng(7);
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        checked += 1;
        if let Err(e) = differential(&name, &jaxpr, &args, 1e-9, 1e-12) {
            failures.push(e);
        }
    }
    if !cfg!(debug_assertions) {
        assert_eq!(checked, 3, "expected the three gated programs (cnn_dots, cnn_plain, resnet_plain)");
    }
    assert!(failures.is_empty(), "{} gated programs failed:\n{}", failures.len(), failures.join("\n"));
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
    for (name, jaxpr) in bench_programs().into_iter().filter(|(_, j)| !has_float_order_gates(j)) {
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
    for (name, jaxpr) in bench_programs().into_iter().filter(|(_, j)| !has_float_order_gates(j)) {
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

/// Every zoo program (its jaxpr, and JAX's forward and backward halves where it has them)
/// writes every element of every output: run into garbage-filled outputs, it gives the bits
/// of a fresh run, whose outputs below 2 MiB are not zeroed (an element left unwritten would
/// show the garbage on one side). The conformance cases get the same check in
/// [`differential`]; the zoo's control flow, scatters, PRNG keys and bf16 are checked here.
#[test]
fn every_zoo_program_writes_all_of_each_output() {
    let mut checked = 0;
    for (name, case) in remat_testkit::zoo_cases() {
        let args = try_arrays(&case, "args").expect("args");
        let cotangents = try_arrays(&case, "cotangents").unwrap_or_default();
        let outputs = try_arrays(&case, "outputs").expect("outputs");
        let mut fwd_outs = None;
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            let Some(text) = case[field].as_str() else { continue };
            let jaxpr = parse_jaxpr(text, &name).expect("parses");
            if !jaxpr.constvars.is_empty() {
                continue;
            }
            let inputs: Vec<Array> = match (field, &fwd_outs) {
                ("jax_bwd_jaxpr", Some(f)) => {
                    let f: &Vec<Array> = f;
                    f[outputs.len().min(f.len())..].iter().cloned().chain(cotangents.iter().cloned()).collect()
                }
                ("jax_bwd_jaxpr", None) => continue,
                _ => args.clone(),
            };
            // The backward half's inputs as recorded (residuals then cotangents) where they
            // line up with its signature.
            let in_avals = jaxpr.in_avals();
            if inputs.len() != in_avals.len() || inputs.iter().zip(&in_avals).any(|(a, v)| !a.aval().same_type(v)) {
                assert_ne!(field, "jaxpr", "{name}: the recorded arguments fit the program");
                continue;
            }
            let compiled = remat_jit::compile(&jaxpr).unwrap_or_else(|e| panic!("{name} {field}: {e}"));
            let fresh = compiled.run(&inputs).unwrap_or_else(|e| panic!("{name} {field}: {e}"));
            let mut outs: Vec<Array> = jaxpr.out_avals().iter().map(common::garbage).collect();
            compiled.run_into(&inputs, &mut outs).unwrap_or_else(|e| panic!("{name} {field}: {e}"));
            for (i, (a, b)) in outs.iter().zip(&fresh).enumerate() {
                assert!(common::same_bits(a, b), "{name} {field}: output {i} into garbage differs from a fresh run");
            }
            if field == "jax_fwd_jaxpr" {
                fwd_outs = Some(fresh);
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked} zoo programs checked");
}
