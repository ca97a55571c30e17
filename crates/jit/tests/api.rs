//! The public API's promises: arguments are checked before native code runs, the plan
//! reports what it laid out, and compiled programs can be shared across threads.

use remat_ir::{parse_jaxpr, Array, Aval, DType};
use remat_jit::{compile, Compiled, JitError};

fn f32s(shape: &[usize], data: Vec<f32>) -> Array {
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).expect("shape"))
}

const CHAIN: &str = "{ lambda ; a:f32[5] b:f32[5]. let
    c:f32[5] = mul a b
    d:f32[5] = exp c
    e:f32[5] = add d 1.0:f32[]
    f:f32[] = reduce_sum[axes=(0,) out_sharding=None] e
  in (e, f) }";

#[test]
fn wrong_arguments_are_errors_not_undefined_behaviour() {
    let c = compile(&parse_jaxpr(CHAIN, "t").expect("parses")).expect("compiles");
    let ok = f32s(&[5], vec![1.0; 5]);
    assert!(matches!(c.run(std::slice::from_ref(&ok)), Err(JitError::ArgCount { expected: 2, given: 1 })));
    let short = f32s(&[4], vec![1.0; 4]);
    assert!(matches!(c.run(&[ok.clone(), short]), Err(JitError::ArgType { index: 1, .. })));
    let ints = Array::zeros(&Aval::new(DType::I32, vec![5]));
    assert!(matches!(c.run(&[ints, ok.clone()]), Err(JitError::ArgType { index: 0, .. })));
    let out = c.run(&[ok.clone(), ok]).expect("runs");
    let sum = out[1].to_f64_vec()[0];
    assert!((sum - 5.0 * (1f64.exp() + 1.0)).abs() < 1e-5, "{sum}");
}

#[test]
fn run_into_overwrites_the_callers_arrays_and_checks_them() {
    let c = compile(&parse_jaxpr(CHAIN, "t").expect("parses")).expect("compiles");
    let args = [f32s(&[5], vec![0.5, -1.0, 2.0, 0.0, 3.0]), f32s(&[5], vec![1.0, 2.0, -0.5, 4.0, 0.25])];
    let want = c.run(&args).expect("runs");
    // Stale contents are overwritten, and the arrays keep their memory.
    let mut outs = vec![f32s(&[5], vec![f32::NAN; 5]), f32s(&[], vec![123.0])];
    let data = |a: &Array| match a {
        Array::F32(x) => x.as_ptr() as usize,
        _ => 0,
    };
    let ptr = data(&outs[0]);
    for _ in 0..2 {
        c.run_into(&args, &mut outs).expect("runs into");
        assert_eq!(outs, want);
    }
    assert_eq!(data(&outs[0]), ptr);
    // Wrong count, dtype, shape and layout are errors before any code runs.
    assert!(matches!(c.run_into(&args, &mut outs[..1]), Err(JitError::OutCount { expected: 2, given: 1 })));
    let mut wrong = vec![f32s(&[5], vec![0.0; 5]), f32s(&[1], vec![0.0])];
    assert!(matches!(c.run_into(&args, &mut wrong), Err(JitError::OutType { index: 1, .. })));
    let mut ints = vec![Array::zeros(&Aval::new(DType::I32, vec![5])), f32s(&[], vec![0.0])];
    assert!(matches!(c.run_into(&args, &mut ints), Err(JitError::OutType { index: 0, .. })));
    let mut short = vec![f32s(&[5], vec![0.0; 5])];
    assert!(matches!(c.run_into(&args[..1], &mut short), Err(JitError::ArgCount { .. })));
    // A transposed (column-major) output array is refused rather than written wrongly.
    let t = compile(&parse_jaxpr(TRANSPOSE, "t").expect("parses")).expect("compiles");
    let col_major = Array::F32(ndarray::ArrayD::zeros(vec![3, 2]).reversed_axes());
    let mut outs = vec![col_major];
    let err = t.run_into(&[f32s(&[2, 3], vec![0.0; 6])], &mut outs).expect_err("refused");
    assert!(err.to_string().contains("not row-major"), "{err}");
}

const TRANSPOSE: &str = "{ lambda ; a:f32[2,3]. let
    b:f32[2,3] = neg a
  in (b,) }";

#[test]
fn a_fused_chain_needs_no_arena_and_outputs_live_outside_it() {
    let c = compile(&parse_jaxpr(CHAIN, "t").expect("parses")).expect("compiles");
    // mul, exp and add fuse into the kernel that writes output 0; the sum reads it there.
    assert_eq!(c.plan().peak_bytes, 0);
    assert_eq!(c.plan().io_bytes, 5 * 4 * 3 + 4);
}

#[test]
fn host_values_are_reported_apart() {
    let text = "{ lambda ; a:f32[6]. let
        b:f32<host>[6] = device_put[copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) devices=(MemorySpace.Host,) srcs=(None,)] a
        c:f32[6] = device_put[copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) devices=(MemorySpace.Device,) srcs=(None,)] b
        d:f32[6] = sin c
      in (d, b) }";
    let jaxpr = parse_jaxpr(text, "t").expect("parses");
    let c = compile(&jaxpr).expect("compiles");
    assert!(c.plan().host_bytes >= 24, "{:?}", c.plan());
    let x = f32s(&[6], vec![0.5, -1.0, 2.0, 0.0, 3.0, -0.25]);
    let got = c.run(std::slice::from_ref(&x)).expect("runs");
    let want = remat_interp::eval_jaxpr(&jaxpr, &[], &[x]).expect("evaluates");
    assert_eq!(got, want);
}

#[test]
fn compiled_programs_are_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Compiled>();
    let c = compile(&parse_jaxpr(CHAIN, "t").expect("parses")).expect("compiles");
    let x = f32s(&[5], vec![0.1, 0.2, 0.3, 0.4, 0.5]);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..4).map(|_| s.spawn(|| c.run(&[x.clone(), x.clone()]).expect("runs"))).collect();
        let outs: Vec<_> = runs.into_iter().map(|h| h.join().expect("joins")).collect();
        assert!(outs.windows(2).all(|w| w[0] == w[1]));
    });
}

/// Programs whose steps fork (split loops and products: `parallel_kernels.jaxpr`; pairs of
/// products: mlp_small's backward) give the same bits when four threads run them at once
/// as when one runs them alone: one run holds the helper threads, the others' forks go to
/// rayon's pool, and each pair times itself from several threads.
#[test]
fn forking_programs_give_the_same_bits_from_four_threads_at_once() {
    let bench = remat_testkit::data_files("bench", "jaxpr");
    let small = bench.iter().find(|p| p.ends_with("mlp_small_plain.jaxpr")).expect("mlp_small_plain is a benchmark");
    let parallel = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/parallel_kernels.jaxpr");
    for path in [small.clone(), parallel] {
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(&path).expect("readable"), "t").expect("parses");
        let c = compile(&jaxpr).expect("compiles");
        assert!(c.plan().parallel_steps + c.plan().paired_steps > 0 || rayon::current_num_threads() == 1);
        let mut rng = remat_testkit::Rng(5);
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        let alone = c.run(&args).expect("runs");
        std::thread::scope(|s| {
            let runs: Vec<_> =
                (0..4).map(|_| s.spawn(|| (0..300).map(|_| c.run(&args).expect("runs")).collect::<Vec<_>>())).collect();
            for h in runs {
                for outs in h.join().expect("joins") {
                    assert!(
                        outs.iter().zip(&alone).all(|(a, b)| a
                            .to_f64_vec()
                            .iter()
                            .zip(b.to_f64_vec())
                            .all(|(x, y)| x.to_bits() == y.to_bits())),
                        "{}: a concurrent run differs from the run alone",
                        path.display()
                    );
                }
            }
        });
    }
}

/// `memory_plan` plans without generating code, and says what `compile` says: the same
/// CSE choice and the same peak, host and io bytes, on every benchmark program (the
/// checkpointed ones exercise the `Auto` choice between the two scopes), with and without
/// folding at the peak; the fold never raises the peak (the memory planner measures
/// without it, so a compiled plan's peak is at most the planner's figure).
#[test]
fn memory_plan_agrees_with_the_compiled_plan_on_every_benchmark_program() {
    let files = remat_testkit::data_files("bench", "jaxpr");
    assert!(files.len() >= 17, "{} benchmark programs", files.len());
    for path in files {
        let text = std::fs::read_to_string(&path).expect("reads");
        let jaxpr = parse_jaxpr(&text, &path.display().to_string()).expect("parses");
        for cse in [remat_jit::CseScope::Auto, remat_jit::CseScope::WithinCheckpoints] {
            let mut peaks = Vec::new();
            for fold_at_peak in [true, false] {
                let options = remat_jit::Options { cse, fold_at_peak, ..remat_jit::Options::default() };
                let planned = remat_jit::memory_plan(&jaxpr, &[], &options).expect("plans");
                let compiled = remat_jit::compile_with_options(&jaxpr, &[], &options).expect("compiles");
                let plan = compiled.plan();
                let got = (planned.peak_bytes, planned.host_bytes, planned.io_bytes, planned.cse);
                assert_eq!(got, (plan.peak_bytes, plan.host_bytes, plan.io_bytes, plan.cse), "{}", path.display());
                peaks.push(plan.peak_bytes);
            }
            // Folding at the peak is kept only where it lowers it.
            assert!(peaks[0] <= peaks[1], "{}: {peaks:?}", path.display());
        }
    }
}

/// `memory_plan_cached` gives `memory_plan`'s answer, and plans a program equal to one
/// planned before (the same text parsed again) from the cache: the same answer, on every
/// benchmark program, under one cache for them all (distinct programs never share an entry).
#[test]
fn the_cached_memory_plan_is_the_memory_plan() {
    let cache = remat_jit::MemoryPlanCache::default();
    let options = remat_jit::Options::default();
    let files = remat_testkit::data_files("bench", "jaxpr");
    for pass in 0..2 {
        for path in &files {
            let text = std::fs::read_to_string(path).expect("reads");
            let jaxpr = parse_jaxpr(&text, &path.display().to_string()).expect("parses");
            let cached = remat_jit::memory_plan_cached(&jaxpr, &[], &options, &cache).expect("plans");
            let planned = remat_jit::memory_plan(&jaxpr, &[], &options).expect("plans");
            assert_eq!(cached, planned, "{} (pass {pass})", path.display());
        }
        assert_eq!(cache.len(), files.len(), "one entry per program");
    }
    // A program that does not verify is an error each time, never a cached plan.
    let bad = parse_jaxpr("{ lambda ; a:f32[2]. let b:f32[2] = sin a in (b,) }", "bad").expect("parses");
    let mut bad = bad;
    bad.outvars.push(remat_ir::Atom::Var(remat_ir::Var(7)));
    for _ in 0..2 {
        assert!(remat_jit::memory_plan_cached(&bad, &[], &options, &cache).is_err());
    }
}
