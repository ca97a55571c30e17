//! Kernel benchmarks (`cargo bench -p remat-jit`): the GEMM shapes of the benchmark programs,
//! a fused elementwise chain and reductions, each compiled by the JIT from a one-equation
//! jaxpr and timed through `Compiled::run` (so call overhead and output allocation count).
//!
//! Criterion reports GEMM throughput in elements/s where one element is one flop (so
//! `Gelem/s` reads as GFLOP/s); after each GEMM a line gives GFLOP/s and the percent of the
//! two-core peak (`PEAK_GFLOPS`, 2 x ~100 GFLOP/s with 256-bit FMA on the Zen3 machine of
//! docs/benchmarks.md).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use remat_ir::{parse_jaxpr, Array};

/// Two cores x ~100 GFLOP/s (f32, 256-bit FMA).
const PEAK_GFLOPS: f64 = 200.0;

fn dot(m: usize, k: usize, n: usize, layout: &str) -> (String, u64) {
    let (a, b, dims) = match layout {
        "nn" => (format!("{m},{k}"), format!("{k},{n}"), "([1], [0])"),
        "nt" => (format!("{m},{k}"), format!("{n},{k}"), "([1], [1])"),
        _ => (format!("{k},{m}"), format!("{k},{n}"), "([0], [0])"),
    };
    let text = format!(
        "{{ lambda ; a:f32[{a}] b:f32[{b}]. let\n    c:f32[{m},{n}] = dot_general[dimension_numbers=({dims}, ([], [])) preferred_element_type=float32] a b\n  in (c,) }}"
    );
    (text, 2 * (m * n * k) as u64)
}

fn inputs(jaxpr: &remat_ir::Jaxpr) -> Vec<Array> {
    let mut x = 0.1f32;
    jaxpr
        .in_avals()
        .iter()
        .map(|a| {
            let shape = ndarray::IxDyn(&a.shape);
            Array::F32(ndarray::ArrayD::from_shape_fn(shape, |_| {
                x = (x * 1.7 + 0.31) % 2.0 - 1.0;
                x
            }))
        })
        .collect()
}

fn median_ms(f: &mut impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..21)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[10]
}

fn gemm(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm");
    g.sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    // mlp_medium: batch 256, width 512; mlp_large: 1024 x 1024; transformer: 512 x 256 x 256.
    let shapes = [
        (256, 512, 512, "nn"),
        (256, 512, 512, "nt"),
        (512, 256, 512, "tn"),
        (1024, 1024, 1024, "nn"),
        (1024, 1024, 1024, "nt"),
        (1024, 1024, 1024, "tn"),
        (512, 256, 256, "nn"),
        (32, 64, 64, "nn"),
    ];
    for (m, k, n, layout) in shapes {
        let (text, flops) = dot(m, k, n, layout);
        let jaxpr = parse_jaxpr(&text, "dot").expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        let args = inputs(&jaxpr);
        let name = format!("{layout}_{m}x{k}x{n}");
        g.throughput(Throughput::Elements(flops));
        g.bench_function(&name, |b| b.iter(|| compiled.run(&args).expect("runs")));
        let ms = median_ms(&mut || drop(compiled.run(&args).expect("runs")));
        let gflops = flops as f64 / (ms * 1e-3) / 1e9;
        println!("gemm/{name}: {gflops:.1} GFLOP/s, {:.0}% of the two-core peak", 100.0 * gflops / PEAK_GFLOPS);
    }
    g.finish();
}

fn elementwise_and_reductions(c: &mut Criterion) {
    let mut g = c.benchmark_group("kernels");
    g.sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    let programs = [
        (
            "bias_tanh_256x512",
            "{ lambda ; a:f32[256,512] b:f32[512]. let
    c:f32[1,512] = broadcast_in_dim[broadcast_dimensions=(1,)] b
    d:f32[256,512] = add a c
    e:f32[256,512] = tanh d
  in (e,) }",
            256 * 512,
        ),
        (
            "tanh_backward_1024x1024",
            "{ lambda ; a:f32[1024,1024] b:f32[1024,1024]. let
    c:f32[1024,1024] = sub 1.0:f32[] a
    d:f32[1024,1024] = mul b c
    e:f32[1024,1024] = mul d a
    f:f32[1024,1024] = add_any d e
  in (f,) }",
            1024 * 1024,
        ),
        (
            "reduce_rows_1024x1024",
            "{ lambda ; a:f32[1024,1024]. let
    b:f32[1024] = reduce_sum[axes=(0,) out_sharding=None] a
  in (b,) }",
            1024 * 1024,
        ),
        (
            "reduce_all_squared_1024x1024",
            "{ lambda ; a:f32[1024,1024]. let
    b:f32[1024,1024] = integer_pow[y=2] a
    c:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b
  in (c,) }",
            1024 * 1024,
        ),
    ];
    for (name, text, elements) in programs {
        let jaxpr = parse_jaxpr(text, name).expect("parses");
        let compiled = remat_jit::compile(&jaxpr).expect("compiles");
        let args = inputs(&jaxpr);
        g.throughput(Throughput::Elements(elements as u64));
        g.bench_function(name, |b| b.iter(|| compiled.run(&args).expect("runs")));
        let ms = median_ms(&mut || drop(compiled.run(&args).expect("runs")));
        println!("kernels/{name}: {:.2} ns per element", ms * 1e6 / elements as f64);
    }
    g.finish();
}

criterion_group!(benches, gemm, elementwise_and_reductions);
criterion_main!(benches);
