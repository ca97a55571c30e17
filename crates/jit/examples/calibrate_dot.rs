//! Calibrates the choice between a shape-specialized loop and the GEMM call for small
//! `dot_general`s: `cargo run --release -p remat-jit --example calibrate_dot [RUNS]` compiles
//! one product per shape and layout both ways (`Options::small_dot_macs` forcing each path),
//! times the median call of each, and prints a Markdown table with the faster path. The
//! crossover it shows is `SMALL_DOT_MACS` (docs/jit.md records a run).

use std::time::Instant;

use remat_ir::{parse_jaxpr, Array, DType};
use remat_jit::{compile_with_options, Options};

/// `(label, lhs shape, rhs shape, dimension numbers)` of an f32 product of sizes m, n, k.
fn program(layout: &str, m: usize, n: usize, k: usize) -> String {
    let (a, b, dn) = match layout {
        "NN" => (format!("{m},{k}"), format!("{k},{n}"), "(([1], [0]), ([], []))"),
        "NT" => (format!("{m},{k}"), format!("{n},{k}"), "(([1], [1]), ([], []))"),
        "TN" => (format!("{k},{m}"), format!("{k},{n}"), "(([0], [0]), ([], []))"),
        _ => (format!("4,{m},{k}"), format!("4,{k},{n}"), "(([2], [1]), ([0], [0]))"),
    };
    let out = if layout == "batch4" { format!("4,{m},{n}") } else { format!("{m},{n}") };
    format!(
        "{{ lambda ; a:f32[{a}] b:f32[{b}]. let
    c:f32[{out}] = dot_general[dimension_numbers={dn} preferred_element_type=float32] a b
  in (c,) }}"
    )
}

fn median_us(compiled: &remat_jit::Compiled, args: &[Array], runs: usize) -> f64 {
    let mut outs = compiled.run(args).expect("runs");
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            compiled.run_into(args, &mut outs).expect("runs");
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let shapes = [
        (1, 4, 5),
        (4, 4, 4),
        (8, 8, 8),
        (5, 16, 12),
        (16, 16, 16),
        (8, 32, 16),
        (16, 16, 32),
        (32, 32, 32),
        (32, 64, 64),
        (64, 64, 64),
    ];
    println!("| layout | m x n x k | MACs | loop us | GEMM us | faster |");
    println!("|---|---|---:|---:|---:|---|");
    for layout in ["NN", "NT", "TN", "batch4"] {
        for &(m, n, k) in &shapes {
            let text = program(layout, m, n, k);
            let jaxpr = parse_jaxpr(&text, "calibrate").expect("parses");
            let args: Vec<Array> = jaxpr
                .in_avals()
                .iter()
                .map(|a| {
                    assert_eq!(a.dtype, DType::F32);
                    let n = a.size();
                    let data = (0..n).map(|i| ((i * 7919) % 13) as f32 / 13.0 - 0.5).collect();
                    Array::F32(ndarray::ArrayD::from_shape_vec(a.shape.clone(), data).expect("shape"))
                })
                .collect();
            let as_loop =
                compile_with_options(&jaxpr, &[], &Options { small_dot_macs: usize::MAX, ..Options::default() })
                    .expect("loop");
            let as_gemm =
                compile_with_options(&jaxpr, &[], &Options { small_dot_macs: 0, ..Options::default() }).expect("gemm");
            let (tl, tg) = (median_us(&as_loop, &args, runs), median_us(&as_gemm, &args, runs));
            let macs = m * n * k * if layout == "batch4" { 4 } else { 1 };
            let faster = if tl <= tg { "loop" } else { "GEMM" };
            println!("| {layout} | {m} x {n} x {k} | {macs} | {tl:.3} | {tg:.3} | {faster} |");
        }
    }
}
