//! The benchmark models of `../shared/bench/gen_bench.py`, written in Rust with remat's
//! tracer: an MLP of `tanh` layers (small, medium, large; no checkpoint, `nothing_saveable`,
//! `dots_with_no_batch_dims_saveable` per layer) and a two-block transformer (no
//! checkpoint, `save_only_these_names('attn_out', 'mlp_hidden')`, `dots_saveable`), each as
//! `value_and_grad` of its loss.
//!
//! `cargo run --release -p remat --example bench_models -- NAME [RUNS]` prints one JSON
//! line: compile time (trace + value_and_grad + JIT compile), median run time into the
//! previous outputs and with fresh outputs, the planned peak bytes and the GFLOP/s of the
//! products. `NAME` is a program name of `tests/data/bench` (`mlp_medium_dots`, ...);
//! `crates/jit/bench/table.sh` times these beside JAX.

use std::collections::BTreeMap;
use std::time::Instant;

use remat::numpy::{einsum, maximum, rsqrt};
use remat::{checkpoint, checkpoint_name, Array, Policy, Tensor};

/// `jnp.tanh(x @ W + b)`.
fn mlp_layer((w, b, x): (Tensor, Tensor, Tensor)) -> Tensor {
    (x.matmul(&w) + b).tanh()
}

/// `(x - mu) * rsqrt(var + 1e-5) * g` over the last axis.
fn layer_norm(x: &Tensor, g: &Tensor) -> Tensor {
    let mu = x.mean_axes(&[-1], true);
    let var = (x - &mu).powi(2).mean_axes(&[-1], true);
    (x - &mu) * rsqrt(var + 1e-5) * g
}

/// One pre-norm transformer block with 4 heads, as in gen_bench.py.
fn block((p, x): (BTreeMap<String, Tensor>, Tensor)) -> Tensor {
    let w = |k: &str| &p[k];
    let h = layer_norm(&x, w("g1"));
    let q = checkpoint_name(&h.matmul(w("wq")), "q");
    let k = checkpoint_name(&h.matmul(w("wk")), "k");
    let v = checkpoint_name(&h.matmul(w("wv")), "v");
    let (b, t, d) = (q.shape()[0] as isize, q.shape()[1] as isize, q.shape()[2] as isize);
    let heads = 4;
    let split = |x: &Tensor| x.reshape(&[b, t, heads, d / heads]);
    let (q, k, v) = (split(&q), split(&k), split(&v));
    let s = einsum("bthd,bshd->bhts", &[&q, &k]) / ((d / heads) as f64).sqrt();
    let a = remat::nn::softmax(&s, -1);
    let o = einsum("bhts,bshd->bthd", &[&a, &v]).reshape(&[b, t, d]);
    let x = &x + checkpoint_name(&o.matmul(w("wo")), "attn_out");
    let h = layer_norm(&x, w("g2"));
    let h = checkpoint_name(&maximum(h.matmul(w("w1")), 0.0), "mlp_hidden");
    &x + h.matmul(w("w2"))
}

/// Deterministic values in [-scale, scale].
fn random(shape: &[usize], seed: u64, scale: f32) -> Array {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32 * scale
        })
        .collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).expect("shape"))
}

/// Compiles `vg` for `args`, times it and prints the JSON line.
fn measure<A: remat::ArgTree, R: remat::TensorTree, F: Fn(A::Traced) -> R>(
    name: &str,
    vg: &remat::Grad<F>,
    args: &A,
    runs: usize,
) -> Result<(), remat::Error> {
    let start = Instant::now();
    let closed = vg.jaxpr(args)?;
    if std::env::var_os("BENCH_MODELS_PRINT").is_some() {
        eprintln!("{}", closed.jaxpr);
    }
    let compiled = remat_jit::compile_closed(&closed)?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut leaves = Vec::new();
    args.values(&mut leaves);
    let leaves: Vec<&Array> = leaves.into_iter().map(|a| a.expect("concrete arguments")).collect();
    let mut outs = compiled.run(&leaves)?;
    // Warm-up as `remat bench` does: up to 8 calls or 100 ms, so pairs of products that may
    // run on two cores have timed both ways and chosen.
    let warm = Instant::now();
    for _ in 0..8 {
        if warm.elapsed().as_millis() >= 100 {
            break;
        }
        compiled.run_into(&leaves, &mut outs)?;
    }
    let median = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    // Alternating call by call, as `remat bench` does: the host's drift falls on both alike.
    let (mut reused, mut fresh) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let t = Instant::now();
        compiled.run_into(&leaves, &mut outs)?;
        reused.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        drop(compiled.run(&leaves)?);
        fresh.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (run, fresh) = (median(&mut reused), median(&mut fresh));
    let gflop = compiled.dot_flops() as f64 / 1e9;
    println!(
        "{{\"name\": \"{name}\", \"compile_ms\": {compile_ms:.3}, \"run_median_ms\": {run:.4}, \
         \"run_fresh_outputs_median_ms\": {fresh:.4}, \"peak_bytes\": {}, \"dot_gflop\": {gflop:.4}, \
         \"gflops\": {:.1}, \"merged_across_checkpoints\": {}}}",
        compiled.plan().peak_bytes,
        gflop / (run * 1e-3),
        compiled.plan().cse == remat_jit::CseScope::AcrossCheckpoints
    );
    Ok(())
}

fn mlp(name: &str, size: &str, policy: &str, runs: usize) -> Result<(), remat::Error> {
    let (layers, d, n) = match size {
        "small" => (8, 64, 32),
        "medium" => (8, 512, 256),
        _ => (4, 1024, 1024),
    };
    let policy = match policy {
        "nothing" => Some(Policy::NothingSaveable),
        "dots" => Some(Policy::DotsSaveable { only_if_no_batch_dims: true }),
        _ => None,
    };
    let scale = 1.0 / (d as f32).sqrt();
    let params: Vec<(Array, Array)> =
        (0..layers).map(|i| (random(&[d, d], i as u64, scale), random(&[d], 100 + i as u64, 0.0))).collect();
    let args = (params, random(&[n, d], 7, 1.0), random(&[n, d], 8, 0.0));
    let layer = checkpoint(mlp_layer).policy(policy.clone().unwrap_or(Policy::EverythingSaveable));
    let loss = |(params, x, y): (Vec<(Tensor, Tensor)>, Tensor, Tensor)| {
        let mut x = x;
        for (w, b) in params {
            x = match &policy {
                Some(_) => layer.call((w, b, x)),
                None => mlp_layer((w, b, x)),
            };
        }
        (x - y).powi(2).mean()
    };
    // jax.value_and_grad(loss) differentiates the first argument: the parameters.
    let params: Vec<usize> = (0..2 * layers).collect();
    measure(name, &remat::value_and_grad(loss).argnums(&params), &args, runs)
}

fn transformer(name: &str, policy: &str, runs: usize) -> Result<(), remat::Error> {
    let (d, t, b) = (256, 128, 4);
    let policy = match policy {
        "names" => Some(Policy::SaveOnlyTheseNames { names: vec!["attn_out".into(), "mlp_hidden".into()] }),
        "dots" => Some(Policy::DotsSaveable { only_if_no_batch_dims: false }),
        _ => None,
    };
    let params: Vec<BTreeMap<String, Array>> = (0..2u64)
        .map(|i| {
            let r = |j: u64, s: [usize; 2]| random(&s, 10 * i + j, 1.0 / (s[0] as f32).sqrt());
            let ones = Array::F32(ndarray::ArrayD::ones(vec![d]));
            BTreeMap::from([
                ("g1".to_string(), ones.clone()),
                ("g2".to_string(), ones),
                ("wq".to_string(), r(0, [d, d])),
                ("wk".to_string(), r(1, [d, d])),
                ("wv".to_string(), r(2, [d, d])),
                ("wo".to_string(), r(3, [d, d])),
                ("w1".to_string(), r(4, [d, 4 * d])),
                ("w2".to_string(), r(5, [4 * d, d])),
            ])
        })
        .collect();
    let args = (params, random(&[b, t, d], 9, 1.0));
    let ck = checkpoint(block).policy(policy.clone().unwrap_or(Policy::EverythingSaveable));
    let loss = |(params, x): (Vec<BTreeMap<String, Tensor>>, Tensor)| {
        let mut x = x;
        for p in params {
            x = match &policy {
                Some(_) => ck.call((p, x)),
                None => block((p, x)),
            };
        }
        x.powi(2).mean()
    };
    let params: Vec<usize> = (0..16).collect();
    measure(name, &remat::value_and_grad(loss).argnums(&params), &args, runs)
}

fn main() -> Result<(), remat::Error> {
    let mut argv = std::env::args().skip(1);
    let name = argv.next().unwrap_or_else(|| "mlp_small_plain".into());
    let runs: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let parts: Vec<&str> = name.split('_').collect();
    match parts.as_slice() {
        ["mlp", size @ ("small" | "medium" | "large"), policy @ ("plain" | "nothing" | "dots")] => {
            mlp(&name, size, policy, runs)
        }
        ["transformer", policy @ ("plain" | "names" | "dots")] => transformer(&name, policy, runs),
        _ => {
            eprintln!("unknown model {name}: mlp_{{small,medium,large}}_{{plain,nothing,dots}} or transformer_{{plain,names,dots}}");
            std::process::exit(2)
        }
    }
}
