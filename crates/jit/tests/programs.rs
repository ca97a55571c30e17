//! Hand-written programs for what the random generator reaches rarely: nested scans (loop
//! lifetimes in the planner), carries that swap places, and chains of layout primitives.
//! Each `tests/data/*.jaxpr` runs on pseudo-random inputs under the JIT and the interpreter.

mod common;

use common::{differential, Rng};
use remat_ir::{parse_jaxpr, Array};

#[test]
fn hand_written_programs_match_the_interpreter() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut paths: Vec<_> =
        std::fs::read_dir(&dir).expect("the data directory exists").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), &name).expect("parses");
        for seed in 0..4 {
            let mut rng = Rng(seed);
            let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
            if let Err(e) = differential(&name, &jaxpr, &args, 1e-4, 1e-5) {
                failures.push(e);
            }
        }
    }
    assert!(paths.len() >= 5);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `parallel_kernels.jaxpr` has loops and reductions of 2^15 elements and more, which run
/// split over the worker threads: every kind of split (rank-1 ranges of whole vectors with
/// an odd tail, outer rows, a kept innermost axis of a reduction, a kept middle axis,
/// integer loops that are not vectorized, a destination inside a concatenation).
#[test]
fn large_loops_are_split_over_threads_and_agree_with_the_interpreter() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/parallel_kernels.jaxpr");
    let jaxpr = parse_jaxpr(&std::fs::read_to_string(path).expect("readable"), "parallel_kernels").expect("parses");
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    // g, h, i, j, k, l, m, r, v and the two halves of s: everything but the small fused
    // producers (f, n, o, p, q, t, u live inside their consumers' loops).
    assert_eq!(compiled.plan().parallel_steps, 11, "{:?}", compiled.plan());
    let mut rng = Rng(7);
    let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
    differential("parallel_kernels", &jaxpr, &args, 1e-4, 1e-5).expect("matches");
}

/// A value used twice by one later loop, at the points it was written, is computed in that
/// loop's registers instead of a buffer: the backward of a `tanh` layer is one loop. When
/// `g` is also an output it keeps its own loop, and then `tanh a`, read by two loops, keeps
/// its buffer.
#[test]
fn values_used_twice_in_one_loop_stay_in_registers() {
    let body = "
    e:f32[64,32] = tanh a
    f:f32[64,32] = sub 1.0:f32[] e
    g:f32[64,32] = mul b f
    h:f32[64,32] = mul g e
    i:f32[64,32] = add_any g h";
    let folded = format!("{{ lambda ; a:f32[64,32] b:f32[64,32]. let{body}\n  in (i,) }}");
    let kept = format!("{{ lambda ; a:f32[64,32] b:f32[64,32]. let{body}\n  in (i, g) }}");
    let mut rng = Rng(3);
    for (text, functions, peak) in [(folded, 2, 0), (kept, 4, 64 * 32 * 4)] {
        let jaxpr = parse_jaxpr(&text, "t").expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        assert_eq!(compiled.plan().functions, functions, "{text}");
        assert_eq!(compiled.plan().peak_bytes, peak, "{text}");
        let args: Vec<Array> = jaxpr.in_avals().iter().map(|a| rng.array(a)).collect();
        differential("tanh backward", &jaxpr, &args, 1e-5, 1e-6).expect("matches");
    }
}
