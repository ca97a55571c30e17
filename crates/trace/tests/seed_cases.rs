//! The seed programs of the conformance set, written with the Rust API: each traces to
//! exactly the text JAX printed.

use remat_ir::{Aval, DType, Policy};
use remat_trace::{checkpoint, checkpoint_name, make_jaxpr, named, scan, Tensor};

fn case_jaxpr(name: &str) -> String {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/data/conformance/{name}.json"));
    let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    case["jaxpr"].as_str().unwrap().to_string()
}

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

/// `g(W, x) = sin(W @ x)`.
fn g(w: &Tensor, x: &Tensor) -> Tensor {
    w.dot(x).sin()
}

fn seed_args(
) -> (remat_trace::Named<Aval>, remat_trace::Named<Aval>, remat_trace::Named<Aval>, remat_trace::Named<Aval>) {
    (named("W1", f32s(&[5, 4])), named("W2", f32s(&[6, 5])), named("W3", f32s(&[7, 6])), named("x", f32s(&[4])))
}

fn f_plain((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = g(&w1, &x);
    let x = g(&w2, &x);
    g(&w3, &x)
}

fn f_named((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = checkpoint_name(&g(&w1, &x), "a");
    let x = checkpoint_name(&g(&w2, &x), "b");
    checkpoint_name(&g(&w3, &x), "c")
}

#[test]
fn seed_no_checkpoint() {
    let traced = make_jaxpr(f_plain, &seed_args()).unwrap();
    assert_eq!(traced.to_string(), case_jaxpr("seed_no_checkpoint"));
    assert_eq!(traced.arg_names, ["W1", "W2", "W3", "x"]);
}

#[test]
fn seed_checkpoint_each_layer() {
    let layer = checkpoint(|(w, x): (Tensor, Tensor)| g(&w, &x));
    let f = |(w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)| {
        let x = layer.call((w1, x));
        let x = layer.call((w2, x));
        layer.call((w3, x))
    };
    assert_eq!(make_jaxpr(f, &seed_args()).unwrap().to_string(), case_jaxpr("seed_checkpoint_each_layer"));
}

#[test]
fn seed_policy_dots_no_batch() {
    let f = checkpoint(f_plain).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    let traced = make_jaxpr(|args| f.call(args), &seed_args()).unwrap();
    assert_eq!(traced.to_string(), case_jaxpr("seed_policy_dots_no_batch"));
}

#[test]
fn seed_names_save_only_a() {
    let f = checkpoint(f_named).policy(Policy::SaveOnlyTheseNames { names: vec!["a".into()] });
    let traced = make_jaxpr(|args| f.call(args), &seed_args()).unwrap();
    assert_eq!(traced.to_string(), case_jaxpr("seed_names_save_only_a"));
}

fn loss((params, x, y): (Vec<Tensor>, Tensor, Tensor)) -> Tensor {
    let (last, ws) = params.split_last().unwrap();
    let mut x = x;
    for w in ws {
        x = w.dot(&x).sin();
    }
    (last.dot(&x) - &y).powi(2).sum()
}

fn loss_args() -> (remat_trace::Named<Vec<Aval>>, remat_trace::Named<Aval>, remat_trace::Named<Aval>) {
    (named("params", vec![f32s(&[4, 4]); 3]), named("x", f32s(&[4])), named("y", f32s(&[4])))
}

#[test]
fn seed_loss_plain() {
    let traced = make_jaxpr(loss, &loss_args()).unwrap();
    assert_eq!(traced.to_string(), case_jaxpr("seed_loss_plain"));
    assert_eq!(traced.arg_names, ["params[0]", "params[1]", "params[2]", "x", "y"]);
}

#[test]
fn seed_chain_sin8() {
    let traced = make_jaxpr(|x: Tensor| (0..8).fold(x, |x, _| x.sin()), &named("x", Aval::scalar(DType::F32))).unwrap();
    assert_eq!(traced.to_string(), case_jaxpr("seed_chain_sin8"));
}

#[test]
fn seed_scan_plain() {
    let net = |(ws, bs, x): (Tensor, Tensor, Tensor)| {
        let (x, ()) = scan(|x: Tensor, (w, b): (Tensor, Tensor)| ((x.dot(&w) + &b).maximum(0.0), ()), x, (ws, bs));
        x
    };
    let args = (named("all_weights", f32s(&[2, 2, 2])), named("all_biases", f32s(&[2, 2])), named("x", f32s(&[2])));
    assert_eq!(make_jaxpr(net, &args).unwrap().to_string(), case_jaxpr("seed_scan_plain"));
}

#[test]
fn shape_mismatch_is_a_located_error() {
    let line = line!() + 1;
    let err = make_jaxpr(|(a, b): (Tensor, Tensor)| a + b, &(f32s(&[3]), f32s(&[4]))).unwrap_err();
    assert_eq!(err.location.line, line);
    assert!(err.location.file.ends_with("seed_cases.rs"), "{err}");
    assert!(err.to_string().contains("[3]") && err.to_string().contains("[4]"), "{err}");
}
