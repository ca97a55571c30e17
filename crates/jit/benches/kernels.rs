//! Kernel benchmarks (`cargo bench -p remat-jit`): the GEMM shapes of the benchmark programs,
//! a fused elementwise chain and reductions, each compiled by the JIT from a one-equation
//! jaxpr and timed through `Compiled::run` (so call overhead and output allocation count;
//! the GEMMs through `Compiled::run_into`, so a fresh output's page faults do not).
//!
//! Criterion reports GEMM throughput in elements/s where one element is one flop (so
//! `Gelem/s` reads as GFLOP/s); after each GEMM a line gives GFLOP/s and the percent of the
//! machine's f32 peak: independent FMA chains on every core at once, with 256-bit vectors
//! and, where the CPU has AVX-512, 512-bit ones, the faster counted (`peak_over`). The peak
//! is measured at the start, and each product is then timed in 40 slices of at least 10 ms
//! interleaved with 10 ms measurements of the peak (`interleaved`), since a shared host's
//! speed drifts: each slice is compared with the higher of the peaks measured just before
//! and just after it.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use remat_ir::{parse_jaxpr, Array};

/// The f32 FMA peak of all cores together, in GFLOP/s, measured over `iters` steps of
/// twelve FMA chains per core (20 million steps are ~40 ms on a 3 GHz core); `None` off
/// x86-64 or without AVX2 + FMA. The threads, one pinned to each CPU, start together (a
/// barrier); the time runs from the first one's start to the last one's end. (The crate's
/// only other `unsafe` is `native/`; calling functions compiled for detected CPU features
/// needs it here too.)
#[allow(unsafe_code)]
fn peak_over(iters: u64) -> Option<f64> {
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
        let all_cores = |lanes: u64, run: fn(u64) -> f32| -> f64 {
            let start = std::sync::Barrier::new(threads);
            let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|cpu| {
                        let start = &start;
                        s.spawn(move || {
                            pin_to(cpu);
                            start.wait();
                            let t = Instant::now();
                            std::hint::black_box(run(iters));
                            (t, Instant::now())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("FMA chains")).collect()
            });
            let first = spans.iter().map(|s| s.0).min().expect("a thread");
            let last = spans.iter().map(|s| s.1).max().expect("a thread");
            (threads as u64 * iters * 12 * lanes * 2) as f64 / (last - first).as_secs_f64() / 1e9
        };
        // SAFETY (both closures): called only after the features were detected.
        let ymm = all_cores(8, |n| unsafe { chains256(n) });
        let zmm = if is_x86_feature_detected!("avx512f") { all_cores(16, |n| unsafe { chains512(n) }) } else { 0.0 };
        Some(ymm.max(zmm))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = iters;
        None
    }
}

/// Runs the calling thread on CPU `cpu` only. The peak's threads are pinned one per CPU, so
/// that the peak is that of every core: left to the scheduler, a thread can land on the CPU
/// of another (the benchmark host's kernel packs runnable threads onto fewer virtual CPUs,
/// `sched_vcpu_pack` on its command line; remat's GEMM helper thread was seen on its
/// caller's CPU in 7-88 of the ~2800 products of a 120-run `remat bench` of mlp_medium).
#[allow(unsafe_code)]
fn pin_to(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `set` is a plain bit mask, initialized by CPU_ZERO before use, and outlives the
    // call, which only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        // A failure (a CPU outside the process's mask) leaves the thread unpinned.
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
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
    warm_up(f);
    median_of_calls(f, 21, Duration::from_millis(100))
}

fn warm_up(f: &mut impl FnMut()) {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(20) {
        f();
    }
}

/// The median time in ms of at least `calls` calls of `f` and `at_least` of calling.
fn median_of_calls(f: &mut impl FnMut(), calls: usize, at_least: Duration) -> f64 {
    let start = Instant::now();
    let mut t = Vec::new();
    while t.len() < calls || start.elapsed() < at_least {
        let s = Instant::now();
        f();
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// `slices` slices of calling `f` (at least 3 calls and 10 ms each), with a ~10 ms
/// measurement of the peak before the first and after each: for each slice, the median
/// call in ms and the higher of the peaks either side (GFLOP/s, `None` where not measured;
/// the higher, so that a dip of the peak alone does not flatter the product).
fn interleaved(f: &mut impl FnMut(), slices: usize) -> Vec<(f64, Option<f64>)> {
    const PEAK_STEPS: u64 = 5_000_000;
    warm_up(f);
    let mut before = peak_over(PEAK_STEPS);
    (0..slices)
        .map(|_| {
            let ms = median_of_calls(f, 3, Duration::from_millis(10));
            let after = peak_over(PEAK_STEPS);
            let around = before.zip(after).map(|(b, a)| b.max(a));
            before = after;
            (ms, around)
        })
        .collect()
}

fn gemm(c: &mut Criterion) {
    let first_peak = (0..3)
        .filter_map(|_| peak_over(20_000_000))
        .fold(None, |best: Option<f64>, p| Some(best.map_or(p, |b| b.max(p))));
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
        // The host's speed drifts (a shared VM's peak moved between 99 and 200 GFLOP/s in
        // one hour, and by 10-20% within seconds), so the product is timed in slices of at
        // least 10 ms interleaved with 10 ms measurements of the peak, each slice compared
        // with the higher of the peaks on either side of it.
        // Each slice's GFLOP/s, and the peak beside it.
        let rates: Vec<(f64, Option<f64>)> =
            interleaved(&mut || compiled.run_into(&args, &mut outs).expect("runs"), 40)
                .into_iter()
                .map(|(ms, around)| (flops as f64 / (ms * 1e-3) / 1e9, around))
                .collect();
        if std::env::var_os("REMAT_BENCH_SLICES").is_some() {
            for (rate, around) in &rates {
                let peak = around.map_or("not measured".to_string(), |p| format!("{p:.1} GFLOP/s"));
                eprintln!("slice {name}: {rate:.1} GFLOP/s, peak around it {peak}");
            }
        }
        let mut gflops: Vec<f64> = rates.iter().map(|r| r.0).collect();
        gflops.sort_by(f64::total_cmp);
        let mut shares: Vec<f64> = rates.iter().filter_map(|&(rate, around)| around.map(|p| rate / p)).collect();
        shares.sort_by(f64::total_cmp);
        let median = gflops[gflops.len() / 2];
        match (first_peak, shares.len()) {
            (Some(p), n) if n > 0 => println!(
                "gemm/{name}: {median:.1} GFLOP/s (median of {} slices), {:.0}% of the peak measured at the start; \
                 against the peak measured on either side of each slice: median {:.0}%, quartiles {:.0}-{:.0}%",
                gflops.len(),
                100.0 * median / p,
                100.0 * shares[n / 2],
                100.0 * shares[n / 4],
                100.0 * shares[3 * n / 4],
            ),
            _ => println!("gemm/{name}: {median:.1} GFLOP/s"),
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
