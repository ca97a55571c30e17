//! Kernel benchmarks (`cargo bench -p remat-jit`): the GEMM shapes of the benchmark programs,
//! a fused elementwise chain and reductions, each compiled by the JIT from a one-equation
//! jaxpr and timed through `Compiled::run` (so call overhead and output allocation count;
//! the GEMMs through `Compiled::run_into`, so a fresh output's page faults do not).
//!
//! Criterion reports GEMM throughput in elements/s where one element is one flop (so
//! `Gelem/s` reads as GFLOP/s); after each GEMM a line gives GFLOP/s and the percent of the
//! machine's f32 peak: independent FMA chains on every core at once, with 256-bit vectors
//! and, where the CPU has AVX-512, 512-bit ones, the faster counted (`peak`). The peak is
//! measured at the start and again around each of seven timing rounds of each product,
//! since a shared host's speed drifts; each round warms up for 20 ms and times at least
//! 100 ms of calls (`median_ms`).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use remat_ir::{parse_jaxpr, Array};

/// The f32 FMA peak of all cores together, in GFLOP/s, measured; `None` off x86-64 or
/// without AVX2 + FMA. (The crate's only other `unsafe` is `native/`; calling functions
/// compiled for detected CPU features needs it here too.)
#[allow(unsafe_code)]
fn peak() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // Twelve independent chains hide the FMA latency (4-5 cycles) on two FMA pipes.
        #[target_feature(enable = "avx2,fma")]
        fn chains256(iters: u64) -> f32 {
            let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
            let mut acc = [_mm256_set1_ps(1.0); 12];
            for _ in 0..iters {
                for x in &mut acc {
                    *x = _mm256_fmadd_ps(*x, a, b);
                }
            }
            acc.iter().map(|&x| _mm256_cvtss_f32(x)).sum()
        }
        #[target_feature(enable = "avx512f")]
        fn chains512(iters: u64) -> f32 {
            let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
            let mut acc = [_mm512_set1_ps(1.0); 12];
            for _ in 0..iters {
                for x in &mut acc {
                    *x = _mm512_fmadd_ps(*x, a, b);
                }
            }
            acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
        }
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return None;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let iters = 20_000_000u64;
        let all_cores = |lanes: u64, run: fn(u64) -> f32| -> f64 {
            let start = Instant::now();
            let sum: f32 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(move || run(iters))).collect();
                handles.into_iter().map(|h| h.join().expect("FMA chains")).sum()
            });
            std::hint::black_box(sum);
            (threads as u64 * iters * 12 * lanes * 2) as f64 / start.elapsed().as_secs_f64() / 1e9
        };
        // SAFETY (both closures): called only after the features were detected.
        let ymm = all_cores(8, |n| unsafe { chains256(n) });
        let zmm = if is_x86_feature_detected!("avx512f") { all_cores(16, |n| unsafe { chains512(n) }) } else { 0.0 };
        Some(ymm.max(zmm))
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

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

/// The median time of `f` in ms: after 20 ms of warm-up calls (the pool's threads wake up,
/// and on a shared VM the second core comes back), at least 21 calls and 100 ms of them.
fn median_ms(f: &mut impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(20) {
        f();
    }
    let start = Instant::now();
    let mut t = Vec::new();
    while t.len() < 21 || start.elapsed() < Duration::from_millis(100) {
        let s = Instant::now();
        f();
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn gemm(c: &mut Criterion) {
    let first_peak =
        (0..3).filter_map(|_| peak()).fold(None, |best: Option<f64>, p| Some(best.map_or(p, |b| b.max(p))));
    match first_peak {
        Some(p) => println!("f32 FMA peak of all cores, measured: {p:.1} GFLOP/s"),
        None => println!("f32 FMA peak: not measured on this CPU"),
    }
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
        let mut outs = compiled.run(&args).expect("runs");
        g.bench_function(&name, |b| b.iter(|| compiled.run_into(&args, &mut outs).expect("runs")));
        // The host's speed drifts (a shared VM's peak moved between 125 and 200 GFLOP/s in
        // one hour), so each of seven rounds measures the peak just before and just after
        // the product and compares the product with their mean.
        let mut rounds = Vec::new();
        for _ in 0..7 {
            let before = peak();
            let ms = median_ms(&mut || compiled.run_into(&args, &mut outs).expect("runs"));
            let gflops = flops as f64 / (ms * 1e-3) / 1e9;
            let around = before.zip(peak()).map(|(b, a)| (b + a) / 2.0);
            rounds.push((gflops, around.map(|p| gflops / p)));
        }
        rounds.sort_by(|x, y| x.0.total_cmp(&y.0));
        let gflops = rounds[rounds.len() / 2].0;
        let mut shares: Vec<f64> = rounds.iter().filter_map(|r| r.1).collect();
        shares.sort_by(f64::total_cmp);
        match (first_peak, shares.get(shares.len() / 2)) {
            (Some(p), Some(share)) => println!(
                "gemm/{name}: {gflops:.1} GFLOP/s (median of 7 rounds), {:.0}% of the peak measured at the start; \
                 against the peak measured around each round: median {:.0}%, best {:.0}%",
                100.0 * gflops / p,
                100.0 * share,
                100.0 * shares[shares.len() - 1]
            ),
            _ => println!("gemm/{name}: {gflops:.1} GFLOP/s"),
        }
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
