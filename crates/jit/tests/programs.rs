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
