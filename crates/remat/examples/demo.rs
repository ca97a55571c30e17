//! The demonstration: a small network traced from Rust, differentiated under several
//! remat policies, with what each forward pass saves printed in JAX's words, the
//! forward/backward split side by side, and the gradient compiled to native code.
//!
//! Run with `cargo run --release --example demo`.

use std::time::Instant;

use remat::{checkpoint, checkpoint_name, function_scope, named, Array, Aval, DType, Policy, Tensor};

/// One layer: `sin(W @ x)`.
fn layer(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

/// Three layers with named activations and a squared-sum loss.
fn loss((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let _scope = function_scope!();
    let h = checkpoint_name(&layer(&w1, &x), "a");
    let h = checkpoint_name(&layer(&w2, &h), "b");
    layer(&w3, &h).powi(2).sum()
}

fn main() -> Result<(), remat::Error> {
    let f32s = |shape: &[usize]| Aval::new(DType::F32, shape.to_vec());
    let avals = (
        named("W1", f32s(&[256, 128])),
        named("W2", f32s(&[256, 256])),
        named("W3", f32s(&[64, 256])),
        named("x", f32s(&[128])),
    );

    println!("== 1. The traced program (as jax.make_jaxpr would print it)\n");
    println!("{}\n", remat::make_jaxpr(loss, &avals)?);

    println!("== 2. What the forward pass saves, under each policy\n");
    let policies: [(&str, Option<Policy>); 4] = [
        ("no checkpoint", None),
        ("checkpoint, nothing_saveable", Some(Policy::NothingSaveable)),
        ("checkpoint, dots_with_no_batch_dims_saveable", Some(Policy::DotsSaveable { only_if_no_batch_dims: true })),
        ("checkpoint, save_only_these_names('a')", Some(Policy::SaveOnlyTheseNames { names: vec!["a".into()] })),
    ];
    for (title, policy) in &policies {
        let residuals = match policy {
            None => remat::saved_residuals(loss, &avals)?,
            Some(p) => {
                let ck = checkpoint(loss).policy(p.clone());
                remat::saved_residuals(|a| ck.call(a), &avals)?
            }
        };
        let bytes: usize = residuals.iter().map(|r| r.bytes).sum();
        println!("-- {title}: {} residuals, {bytes} bytes", residuals.len());
        for r in &residuals {
            println!("   {r}");
        }
        println!();
    }

    println!("== 3. The forward and backward programs under save_only_these_names('a')\n");
    let ck = checkpoint(loss).policy(Policy::SaveOnlyTheseNames { names: vec!["a".into()] });
    let small =
        (named("W1", f32s(&[3, 2])), named("W2", f32s(&[3, 3])), named("W3", f32s(&[2, 3])), named("x", f32s(&[2])));
    let (fwd, bwd) = remat::fwd_bwd_strings(|a| ck.call(a), &small)?;
    println!("{}", remat::side_by_side(&fwd, &bwd, None));

    println!("== 4. The gradient, compiled with Cranelift, against the reference interpreter\n");
    let args = (random(&[256, 128], 1), random(&[256, 256], 2), random(&[64, 256], 3), random(&[128], 4));
    let native = remat::value_and_grad(|a| ck.call(a));
    let reference = remat::value_and_grad(|a| ck.call(a)).backend(remat::Backend::Interp);
    let start = Instant::now();
    let first = native.call(&args)?;
    let compile = start.elapsed();
    let start = Instant::now();
    let runs = 100;
    for _ in 0..runs {
        native.call(&args)?;
    }
    let per_run = start.elapsed() / runs;
    let expected = reference.call(&args)?;
    let worst = first
        .iter()
        .zip(&expected)
        .flat_map(|(a, b)| {
            a.to_f64_vec().into_iter().zip(b.to_f64_vec()).map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        })
        .fold(0.0f64, f64::max);
    println!("loss = {:.6}", first[0].to_f64_vec()[0]);
    println!("gradient shapes: {:?}", first[1..].iter().map(|g| g.aval().to_string()).collect::<Vec<_>>());
    println!("trace + differentiate + compile + first run: {compile:.2?}; then {per_run:.2?} per call");
    println!("largest relative difference from the interpreter: {worst:.1e}");
    Ok(())
}

/// Deterministic values in [-1, 1).
fn random(shape: &[usize], seed: u64) -> Array {
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).expect("length matches shape") * 0.1)
}
