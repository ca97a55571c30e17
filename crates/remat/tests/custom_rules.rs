//! `custom_jvp(f).defjvp(rule)` and `custom_vjp(f).defvjp(fwd, bwd)` with Rust functions
//! and closures: the traced text equals JAX 0.10.2's
//! (`crates/trace/tests/data/custom_oracle.json`, written by `gen_custom.py` there) byte
//! for byte, and autodiff runs the user's rule: the saved residuals are the rule's (JAX's
//! list, compared without source locations) and the gradients are JAX's, natively and
//! with the interpreter. Also `jvp` and `linearize` through a rule, rules that differ from
//! the body's true derivative (a halved tangent, clipped gradients: so the body cannot have
//! been differentiated), and JAX's error for forward mode through a `custom_vjp`.

use remat::{custom_jvp, named, Array, Aval, Backend, DType, Tensor};
use serde_json::Value;

fn oracle(case: &str) -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../trace/tests/data/custom_oracle.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    all[case].clone()
}

fn f32s(n: usize) -> Aval {
    Aval::new(DType::F32, vec![n])
}

fn values(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn array(v: &Value) -> Array {
    let data: Vec<f32> = values(v).into_iter().map(|x| x as f32).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(vec![data.len()], data).unwrap())
}

/// A residual line without its source location (`... from file:line:col (fn)`).
fn without_location(line: &str) -> String {
    match line.split_once(" from ") {
        Some((head, tail)) if tail.contains(':') => head.to_string(),
        _ => line.to_string(),
    }
}

/// Checks `fun`'s text, residuals and gradients against the oracle's `case`.
fn check(case: &str, fun: impl Fn(Vec<Tensor>) -> Tensor + Copy, avals: &Vec<remat::Named<Aval>>, args: &[Array]) {
    let want = oracle(case);
    let traced = remat::make_jaxpr(fun, avals).unwrap();
    assert_eq!(traced.to_string(), want["jaxpr"].as_str().unwrap(), "{case}: the traced text");
    let got: Vec<String> =
        remat::saved_residuals(fun, avals).unwrap().iter().map(|r| without_location(&r.to_string())).collect();
    let mut expected: Vec<String> =
        want["residuals"].as_array().unwrap().iter().map(|l| without_location(l.as_str().unwrap())).collect();
    if case == "halved" {
        // A known difference: JAX 0.10.2 also saves the rule's Python scalars (`t * 0.5`
        // and the jvp of `x * 3.0`) as scalar residuals; remat keeps them literals in the
        // backward program. Nothing else differs.
        assert_eq!(expected[..2], ["f32[] from a literal", "f32[] from a literal"]);
        expected.drain(..2);
    }
    assert_eq!(got, expected, "{case}: the saved residuals");
    for backend in [Backend::Jit, Backend::Interp] {
        let grads = remat::grad(fun).backend(backend).call(&args.to_vec()).unwrap();
        for (g, w) in grads.iter().zip(want["grads"].as_array().unwrap()) {
            for (x, y) in g.to_f64_vec().iter().zip(values(w)) {
                assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{case} {backend:?}: {x} vs JAX's {y}");
            }
        }
    }
}

fn f((x, y): (Tensor, Tensor)) -> Tensor {
    x.sin() * y
}

fn f_jvp((x, y): (Tensor, Tensor), (tx, ty): (Tensor, Tensor)) -> (Tensor, Tensor) {
    let c = x.cos();
    (x.sin() * &y, c * &y * tx + x.sin() * ty)
}

fn sin_mul(xs: Vec<Tensor>) -> Tensor {
    // The names printed (`name=f`, `jvp=f_jvp`) are the Rust functions'.
    custom_jvp(f).defjvp(f_jvp).call((xs[0].clone(), xs[1].clone())).sum()
}

#[test]
fn a_two_argument_rule_is_jaxs_text_residuals_and_gradients() {
    let want = oracle("sin_mul");
    let args: Vec<Array> = want["args"].as_array().unwrap().iter().map(array).collect();
    check("sin_mul", sin_mul, &vec![named("x", f32s(3)), named("y", f32s(3))], &args);
}

fn softplus(x: Tensor) -> Tensor {
    x.exp().log1p()
}

fn softplus_jvp(x: Tensor, t: Tensor) -> (Tensor, Tensor) {
    (x.exp().log1p(), t / ((-&x).exp() + 1.0))
}

fn softplus_times_x(x: Tensor) -> Tensor {
    let sp = custom_jvp(softplus).defjvp(softplus_jvp);
    (sp.call(x.clone()) * &x).sum()
}

#[test]
fn a_one_argument_rule_saves_what_jax_saves() {
    let want = oracle("softplus_times_x");
    let args: Vec<Array> = want["args"].as_array().unwrap().iter().map(array).collect();
    check("softplus_times_x", |x: Vec<Tensor>| softplus_times_x(x[0].clone()), &vec![named("x", f32s(3))], &args);
}

fn half_gradient(x: Tensor) -> Tensor {
    x
}

fn half_gradient_jvp(x: Tensor, t: Tensor) -> (Tensor, Tensor) {
    (x, t * 0.5)
}

fn halved(x: Tensor) -> Tensor {
    let h = custom_jvp(half_gradient).defjvp(half_gradient_jvp);
    ((h.call(&x * 3.0)).sin() * &x).sum()
}

#[test]
fn a_rule_that_is_not_the_bodys_derivative_is_the_one_used() {
    let want = oracle("halved");
    let args: Vec<Array> = want["args"].as_array().unwrap().iter().map(array).collect();
    check("halved", |x: Vec<Tensor>| halved(x[0].clone()), &vec![named("x", f32s(3))], &args);
    // jvp and linearize through the rule: d/dx sin(3x) with the tangent halved is
    // 1.5 cos(3x).
    let x = array(&want["args"][0]);
    let inner = |x: Tensor| custom_jvp(half_gradient).defjvp(half_gradient_jvp).call(&x * 3.0).sin();
    let ones = Array::F32(ndarray::ArrayD::ones(vec![3]));
    let (_, t) = remat::jvp(inner, &x, &ones).unwrap();
    let (_, f_jvp) = remat::linearize(inner, &x).unwrap();
    let lin = f_jvp.call(&ones).unwrap();
    for ((a, b), xi) in t[0].to_f64_vec().iter().zip(lin[0].to_f64_vec()).zip(x.to_f64_vec()) {
        let want = 1.5 * (3.0 * xi).cos();
        assert!((a - want).abs() < 1e-5 && (b - want).abs() < 1e-5, "{a}, {b} vs {want}");
    }
}

#[test]
fn a_rule_that_uses_the_enclosing_functions_tensors_is_an_error() {
    let f = |(x, y): (Tensor, Tensor)| {
        let g = custom_jvp(|x: Tensor| x.sin()).defjvp(move |x: Tensor, t: Tensor| (x.sin(), t * x.cos()));
        let scaled = custom_jvp(|x: Tensor| x.sin()).defjvp({
            let y = y.clone();
            move |x: Tensor, t: Tensor| (x.sin(), t * &y)
        });
        g.call(x.clone()).sum() + scaled.call(x).sum()
    };
    let err = remat::make_jaxpr(f, &(f32s(2), f32s(2))).unwrap_err().to_string();
    assert!(err.contains("the custom_jvp rule uses 1 tensors of the enclosing function"), "{err}");
}

fn clip_mul((x, y): (Tensor, Tensor)) -> Tensor {
    x.sin() * y
}

fn clip_mul_fwd((x, y): (Tensor, Tensor)) -> (Tensor, (Tensor, Tensor, Tensor)) {
    (x.sin() * &y, (x.cos(), y, x.sin()))
}

fn clip_mul_bwd((c, y, s): (Tensor, Tensor, Tensor), g: Tensor) -> (Tensor, Tensor) {
    ((c * y * &g).clip(-0.5, 0.5), s * g)
}

fn clipped_sin_mul(xs: Vec<Tensor>) -> Tensor {
    let f = remat::custom_vjp(clip_mul).defvjp(clip_mul_fwd, clip_mul_bwd);
    f.call((xs[0].clone(), xs[1].clone())).sum()
}

#[test]
fn a_custom_vjp_runs_its_fwd_and_a_nonlinear_bwd_as_jax_does() {
    let want = oracle("clipped_sin_mul");
    let args: Vec<Array> = want["args"].as_array().unwrap().iter().map(array).collect();
    check("clipped_sin_mul", clipped_sin_mul, &vec![named("x", f32s(3)), named("y", f32s(3))], &args);
    // The first gradient is clipped at 0.5, which the body's derivative is not.
    let g = remat::grad(clipped_sin_mul).call(&args).unwrap();
    assert_eq!(g[0].to_f64_vec()[0], 0.5);
}

fn clip_gradient(x: Tensor) -> Tensor {
    x
}

fn clip_gradient_fwd(x: Tensor) -> (Tensor, ()) {
    (x, ())
}

fn clip_gradient_bwd(_: (), g: Tensor) -> Tensor {
    g.clip(-0.5, 0.5)
}

fn clipped(xs: Vec<Tensor>) -> Tensor {
    let x = &xs[0];
    let c = remat::custom_vjp(clip_gradient).defvjp(clip_gradient_fwd, clip_gradient_bwd);
    c.call(x.sin() * x).sin().sum()
}

#[test]
fn clip_gradient_saves_and_differentiates_as_jax() {
    let want = oracle("clipped");
    let args: Vec<Array> = want["args"].as_array().unwrap().iter().map(array).collect();
    check("clipped", clipped, &vec![named("x", f32s(3))], &args);
}

#[test]
fn forward_mode_through_a_custom_vjp_is_jaxs_error() {
    let x = Array::F32(ndarray::arr1(&[0.5f32, 1.0]).into_dyn());
    let f = |x: Tensor| clipped(vec![x]);
    let want = "can't apply forward-mode autodiff (jvp) to a custom_vjp function.";
    let err = remat::jvp(f, &x, &x).unwrap_err().to_string();
    assert!(err.ends_with(want), "{err}");
    let err = remat::linearize(f, &x).map(|_| ()).unwrap_err().to_string();
    assert!(err.ends_with(want), "{err}");
    // Reverse mode through the same function works, and vjp's callable uses bwd.
    let (_, f_vjp) = remat::vjp(f, &x).unwrap();
    assert_eq!(f_vjp.call(&Array::F32(ndarray::arr0(1.0f32).into_dyn())).unwrap().aval(), x.aval());
}
