//! Tracing a small model: `cargo run -p remat-trace --example trace`.
//!
//! A two-layer MLP with a softmax cross-entropy loss is written as an ordinary Rust
//! function over `Tensor`s. `make_jaxpr` traces it into a jaxpr, printed exactly as
//! `jax.make_jaxpr` would print the same Python program; the checkpointed layer shows up
//! as a `remat2` equation and the named activation as `name[name=hidden]`. The reference
//! interpreter then runs the jaxpr on concrete arrays, and a shape error shows how a bad
//! program is reported.

use std::collections::BTreeMap;

use remat_ir::{Array, Aval, DType, Policy};
use remat_trace::numpy as jnp;
use remat_trace::{checkpoint, checkpoint_name, function_scope, make_jaxpr, named, nn, Tensor};

/// One dense layer with a tanh: `tanh(x @ w + b)`.
fn dense(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let _scope = function_scope!(); // equations below are reported as `(dense)`
    (x.matmul(w) + b).tanh()
}

/// The loss of a two-layer MLP on a batch `x` with one-hot labels `y`. `params` is a map
/// from names to arrays, as a Python dict of parameters would be.
fn loss((params, x, y): (BTreeMap<String, Tensor>, Tensor, Tensor)) -> Tensor {
    let _scope = function_scope!();
    // Recompute the first layer in the backward pass instead of storing its internals,
    // but let a remat policy save its (named) output.
    let layer1 = checkpoint(|(x, w, b): (Tensor, Tensor, Tensor)| checkpoint_name(&dense(&x, &w, &b), "hidden"))
        .policy(Policy::SaveOnlyTheseNames { names: vec!["hidden".into()] });
    let h = layer1.call((x, params["w1"].clone(), params["b1"].clone()));
    let logits = h.matmul(&params["w2"]) + &params["b2"];
    -(nn::log_softmax(&logits, -1) * &y).sum_axes(&[-1], false).mean()
}

fn main() {
    let f32s = |shape: &[usize]| Aval::new(DType::F32, shape.to_vec());
    let params: BTreeMap<String, Aval> =
        [("w1", f32s(&[4, 8])), ("b1", f32s(&[8])), ("w2", f32s(&[8, 3])), ("b2", f32s(&[3]))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let args = (named("params", params), named("x", f32s(&[5, 4])), named("y", f32s(&[5, 3])));

    let traced = make_jaxpr(loss, &args).expect("the model traces");
    println!("Arguments, named as JAX names them: {:?}\n", traced.arg_names);
    println!("{traced}\n");

    // Every equation knows where it came from.
    let eqn = &traced.jaxpr.jaxpr.eqns[0];
    println!("The first equation, `{}`, comes from {}\n", eqn.primitive.name(), eqn.source);

    // Run it on concrete values with the reference interpreter.
    let value = |shape: &[usize], scale: f32| {
        let n: usize = shape.iter().product();
        let data = (0..n).map(|i| ((i as f32) * 0.37).sin() * scale).collect::<Vec<_>>();
        Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
    };
    let concrete_params: BTreeMap<String, Array> =
        [("w1", value(&[4, 8], 0.5)), ("b1", value(&[8], 0.1)), ("w2", value(&[8, 3], 0.5)), ("b2", value(&[3], 0.1))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let labels = make_jaxpr(|l: Tensor| nn::one_hot(&l, 3, DType::F32), &Aval::new(DType::I32, vec![5])).unwrap();
    let y =
        remat_interp::eval_jaxpr(&labels.jaxpr.jaxpr, &[], &[Array::I32(ndarray::arr1(&[0, 2, 1, 2, 0]).into_dyn())])
            .unwrap()
            .remove(0);
    let concrete = (named("params", concrete_params), named("x", value(&[5, 4], 1.0)), named("y", y));
    let flat = traced.flatten_args(&concrete).expect("the arguments fit the traced signature");
    let out = remat_interp::eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &flat).unwrap();
    println!("loss = {:?}\n", out[0].to_f64_vec()[0]);

    // A shape error is reported at the user's line, with both shapes.
    let err = make_jaxpr(
        |(a, b): (Tensor, Tensor)| a.matmul(&b) + jnp::ones(&[3], DType::F32),
        &(f32s(&[2, 4]), f32s(&[4, 5])),
    )
    .unwrap_err();
    println!("A bad program: {err}");
}
