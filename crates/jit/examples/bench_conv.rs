//! Convolutions against the equivalent matrix product: `cargo run --release -p remat-jit
//! --example bench_conv [RUNS]` compiles each `conv_general_dilated` below (NHWC/HWIO, f32)
//! and the `dot_general` of its im2col shapes, `(N*Ho*Wo, Kh*Kw*I) x (Kh*Kw*I, O)`, times
//! the median call of each and prints their GFLOP/s (2 flops per multiply-add; the conv's
//! count is per output element, padding included, as the matmul's is). The conv's time
//! includes its padding and im2col copies, which is what the comparison measures.

use std::time::Instant;

use remat_ir::{parse_jaxpr, Array};
use remat_jit::compile;

struct Case {
    name: &'static str,
    /// N, H, W, C; kernel Kh, Kw, O; stride; padding; feature groups.
    n: usize,
    hw: usize,
    c: usize,
    k: usize,
    o: usize,
    stride: usize,
    pad: usize,
    groups: usize,
}

fn conv_text(c: &Case, ho: usize) -> String {
    let i = c.c / c.groups;
    format!(
        "{{ lambda ; a:f32[{n},{h},{h},{ch}] b:f32[{k},{k},{i},{o}]. let
    c:f32[{n},{ho},{ho},{o}] = conv_general_dilated[
      batch_group_count=1
      dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
      feature_group_count={g}
      lhs_dilation=(1, 1)
      out_sharding=None
      padding=(({p}, {p}), ({p}, {p}))
      precision=None
      preferred_element_type=None
      rhs_dilation=(1, 1)
      window_strides=({s}, {s})
    ] a b
  in (c,) }}",
        n = c.n,
        h = c.hw,
        ch = c.c,
        k = c.k,
        o = c.o,
        g = c.groups,
        p = c.pad,
        s = c.stride
    )
}

fn dot_text(m: usize, k: usize, n: usize) -> String {
    format!(
        "{{ lambda ; a:f32[{m},{k}] b:f32[{k},{n}]. let
    c:f32[{m},{n}] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] a b
  in (c,) }}"
    )
}

fn median_s(text: &str, runs: usize) -> f64 {
    let jaxpr = parse_jaxpr(text, "bench").expect("parses");
    let compiled = compile(&jaxpr).expect("compiles");
    let args: Vec<Array> = jaxpr
        .in_avals()
        .iter()
        .map(|a| {
            let data: Vec<f32> = (0..a.size()).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
            Array::F32(ndarray::ArrayD::from_shape_vec(a.shape.clone(), data).expect("shape"))
        })
        .collect();
    let mut outs = compiled.run(&args).expect("runs");
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            compiled.run_into(&args, &mut outs).expect("runs");
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let cases = [
        Case { name: "3x3 s1 SAME", n: 8, hw: 32, c: 64, k: 3, o: 64, stride: 1, pad: 1, groups: 1 },
        Case { name: "3x3 s2", n: 8, hw: 32, c: 64, k: 3, o: 128, stride: 2, pad: 1, groups: 1 },
        Case { name: "1x1", n: 8, hw: 32, c: 128, k: 1, o: 128, stride: 1, pad: 0, groups: 1 },
        Case { name: "cnn zoo conv 1", n: 4, hw: 8, c: 3, k: 3, o: 8, stride: 1, pad: 1, groups: 1 },
        Case { name: "3x3 depthwise", n: 8, hw: 32, c: 64, k: 3, o: 64, stride: 1, pad: 1, groups: 64 },
    ];
    println!("| conv (NHWC/HWIO, f32) | shapes | conv ms | conv GFLOP/s | matmul (m x k x n) | matmul GFLOP/s |");
    println!("|---|---|---:|---:|---|---:|");
    for c in &cases {
        let ho = (c.hw + 2 * c.pad - c.k) / c.stride + 1;
        let i = c.c / c.groups;
        let (m, k, n) = (c.n * ho * ho, c.k * c.k * i, c.o);
        let flops = 2.0 * (m * k * n) as f64;
        let conv = median_s(&conv_text(c, ho), runs);
        // The equivalent product of a grouped conv is one product per group.
        let (dm, dk, dn) = if c.groups == 1 { (m, k, n) } else { (m, k, n / c.groups) };
        let dot = median_s(&dot_text(dm, dk, dn), runs) * c.groups as f64;
        println!(
            "| {} | {}x{}x{}x{} * {}x{}x{}x{} | {:.3} | {:.1} | {}x{}x{}{} | {:.1} |",
            c.name,
            c.n,
            c.hw,
            c.hw,
            c.c,
            c.k,
            c.k,
            i,
            c.o,
            conv * 1e3,
            flops / conv / 1e9,
            dm,
            dk,
            dn,
            if c.groups == 1 { String::new() } else { format!(" (x{} groups, timed once)", c.groups) },
            flops / dot / 1e9
        );
    }
}
