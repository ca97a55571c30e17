//! Times one jaxpr file under the JIT: `cargo run --release -p remat-jit --example
//! bench_program -- FILE [RUNS]` prints one JSON line with the compile time (parse excluded),
//! the median run time after one warm-up run (`run`, fresh output arrays each call, and
//! `run_into`, the previous call's output arrays reused), the planned peak bytes and the
//! GFLOP/s of the program's products (over the `run_into` time). Inputs are deterministic pseudo-random values in [-1, 1]; input values
//! do not change the work done. `crates/jit/bench/table.sh` runs it beside JAX.

use std::time::Instant;

use remat_ir::{parse_jaxpr, Array, DType};

fn main() {
    let mut argv = std::env::args().skip(1);
    let path = argv.next().expect("usage: bench_program FILE [RUNS]");
    let runs: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let text = std::fs::read_to_string(&path).expect("readable jaxpr file");
    let jaxpr = parse_jaxpr(&text, &path).expect("a jaxpr");
    let start = Instant::now();
    let compiled = remat_jit::compile(&jaxpr).expect("compiles");
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let args: Vec<Array> = jaxpr
        .in_avals()
        .iter()
        .map(|a| {
            let shape = ndarray::IxDyn(&a.shape);
            match a.dtype {
                DType::F32 => Array::F32(ndarray::ArrayD::from_shape_fn(shape, |_| next() as f32)),
                DType::F64 => Array::F64(ndarray::ArrayD::from_shape_fn(shape, |_| next())),
                DType::I32 => Array::I32(ndarray::ArrayD::from_shape_fn(shape, |_| (next() * 5.0) as i32)),
                DType::Bool => Array::Bool(ndarray::ArrayD::from_shape_fn(shape, |_| next() > 0.0)),
            }
        })
        .collect();
    let mut outs = compiled.run(&args).expect("runs");
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let mut fresh: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let outs = compiled.run(&args).expect("runs");
            let ms = t.elapsed().as_secs_f64() * 1e3;
            drop(outs);
            ms
        })
        .collect();
    let mut reused: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            compiled.run_into(&args, &mut outs).expect("runs");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (fresh, median) = (median(&mut fresh), median(&mut reused));
    let gflops = compiled.dot_flops() as f64 / (median * 1e-3) / 1e9;
    println!(
        "{{\"compile_ms\": {compile_ms:.3}, \"run_median_ms\": {median:.4}, \"run_fresh_outputs_median_ms\": {fresh:.4}, \"peak_bytes\": {}, \"dot_gflop\": {:.4}, \"gflops\": {gflops:.1}}}",
        compiled.plan().peak_bytes,
        compiled.dot_flops() as f64 / 1e9
    );
}
