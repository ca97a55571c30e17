//! The seed programs of the conformance set (`seed_*`), written with the Rust API. Each is
//! the Rust twin of a function in the shared `gen_cases.py` (quoted above it); each traces
//! to exactly the text JAX printed, and evaluates to JAX's outputs.

mod common;

use common::Case;
use remat_ir::{Array, Policy};
use remat_trace::{
    checkpoint, checkpoint_name, function_scope, make_jaxpr, named, nn, recursive_checkpoint, scan, Named, Tensor,
};

/// `def g(W, x): return jnp.sin(jnp.dot(W, x))`
fn g(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

/// `def f_plain(W1, W2, W3, x): x = g(W1, x); x = g(W2, x); x = g(W3, x); return x`
fn f_plain((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = g(&w1, &x);
    let x = g(&w2, &x);
    g(&w3, &x)
}

/// `f_plain` with every layer's output named for the policies: `checkpoint_name(g(W1, x), name='a')`...
fn f_named((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let x = checkpoint_name(&g(&w1, &x), "a");
    let x = checkpoint_name(&g(&w2, &x), "b");
    checkpoint_name(&g(&w3, &x), "c")
}

type Four<T> = (Named<T>, Named<T>, Named<T>, Named<T>);

/// The arguments `W1, W2, W3, x` of the `f_plain` family, with the case's values.
fn seed_args(case: &Case) -> Four<Array> {
    (named("W1", case.arg(0)), named("W2", case.arg(1)), named("W3", case.arg(2)), named("x", case.arg(3)))
}

/// Runs the four checks on `f`, traced on `args`.
fn check<A: remat_trace::ArgTree, R: remat_trace::TensorTree>(
    name: &str,
    f: impl FnOnce(A::Traced) -> R,
    args: impl FnOnce(&Case) -> A,
) {
    let case = Case::load(name);
    let args = args(&case);
    let traced = make_jaxpr(f, &args).unwrap();
    case.assert_text(&traced);
    case.assert_evaluates(&traced, &args);
    case.assert_residuals(&traced);
}

#[test]
fn seed_no_checkpoint() {
    check("seed_no_checkpoint", f_plain, seed_args);
}

#[test]
fn seed_checkpoint_each_layer() {
    // def f_each(W1, W2, W3, x): x = jax.checkpoint(g)(W1, x); ...
    let layer = checkpoint(|(w, x): (Tensor, Tensor)| g(&w, &x));
    let f = |(w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)| {
        let x = layer.call((w1, x));
        let x = layer.call((w2, x));
        layer.call((w3, x))
    };
    check("seed_checkpoint_each_layer", f, seed_args);
}

#[test]
fn seed_policy_dots_no_batch() {
    // jax.checkpoint(f_plain, policy=dots_with_no_batch_dims_saveable)
    let f = checkpoint(f_plain).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    check("seed_policy_dots_no_batch", |args| f.call(args), seed_args);
}

#[test]
fn seed_names_save_only_a() {
    // jax.checkpoint(f_named, policy=save_only_these_names('a'))
    let f = checkpoint(f_named).policy(Policy::SaveOnlyTheseNames { names: vec!["a".into()] });
    check("seed_names_save_only_a", |args| f.call(args), seed_args);
}

/// `def layer(W, x): return jnp.sin(jnp.dot(W, x))`
fn layer(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
}

/// ```python
/// def predict(params, x):
///     *Ws, Wlast = params
///     for W in Ws: x = layer(W, x)
///     return jnp.dot(Wlast, x)
/// def loss(params, x, y): return jnp.sum((predict(params, x) - y) ** 2)
/// ```
/// With `names`, each hidden layer's output is named `layer{i}_output` (`loss_named`).
fn loss(params: &[Tensor], x: &Tensor, y: &Tensor, names: bool) -> Tensor {
    let _scope = function_scope!();
    let (w_last, ws) = params.split_last().expect("at least one layer");
    let mut x = x.clone();
    for (i, w) in ws.iter().enumerate() {
        x = layer(w, &x);
        if names {
            x = checkpoint_name(&x, &format!("layer{i}_output"));
        }
    }
    (w_last.dot(&x) - y).powi(2).sum()
}

type LossArgs = (Named<Vec<Array>>, Named<Array>, Named<Array>);

/// `params` (a list of three matrices), `x`, `y`.
fn loss_args(case: &Case) -> LossArgs {
    (named("params", case.args[..3].to_vec()), named("x", case.arg(3)), named("y", case.arg(4)))
}

#[test]
fn seed_loss_plain() {
    check("seed_loss_plain", |(params, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&params, &x, &y, false), loss_args);
}

#[test]
fn seed_loss_dots_policy() {
    let f = checkpoint(|(params, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&params, &x, &y, false))
        .policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    check("seed_loss_dots_policy", |args| f.call(args), loss_args);
}

#[test]
fn seed_loss_named_nopolicy() {
    // checkpoint_name without any checkpoint: the names are recorded, and inert.
    check(
        "seed_loss_named_nopolicy",
        |(params, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&params, &x, &y, true),
        loss_args,
    );
}

#[test]
fn seed_loss_save_any_names_but_layer1() {
    let f = checkpoint(|(params, x, y): (Vec<Tensor>, Tensor, Tensor)| loss(&params, &x, &y, true))
        .policy(Policy::SaveAnyNamesButThese { names: vec!["layer1_output".into()] });
    check("seed_loss_save_any_names_but_layer1", |args| f.call(args), loss_args);
}

/// `chain_compose([jnp.sin] * n)`: `x = sin(x)`, `n` times.
fn chain(n: usize) -> impl Fn(Tensor) -> Tensor {
    move |x| (0..n).fold(x, |x, _| x.sin())
}

#[test]
fn seed_chain_sin8() {
    check("seed_chain_sin8", chain(8), |case| named("x", case.arg(0)));
}

#[test]
fn seed_chain_sin16() {
    check("seed_chain_sin16", chain(16), |case| named("x", case.arg(0)));
}

#[test]
fn seed_recursive_sin8() {
    // recursive_checkpoint([jnp.sin] * 8)
    let sins = vec![|x: Tensor| x.sin(); 8];
    check("seed_recursive_sin8", recursive_checkpoint(&sins), |case| named("x", case.arg(0)));
}

#[test]
fn seed_recursive_sin16() {
    let sins = vec![|x: Tensor| x.sin(); 16];
    check("seed_recursive_sin16", recursive_checkpoint(&sins), |case| named("x", case.arg(0)));
}

/// ```python
/// def scan_layer(x, Wb):
///     W, b = Wb
///     return jnp.maximum(jnp.dot(x, W) + b, 0.), None
/// ```
fn scan_layer(x: Tensor, (w, b): (Tensor, Tensor)) -> (Tensor, ()) {
    ((x.dot(&w) + &b).maximum(0.0), ())
}

fn scan_args(case: &Case) -> (Named<Array>, Named<Array>, Named<Array>) {
    (named("all_weights", case.arg(0)), named("all_biases", case.arg(1)), named("x", case.arg(2)))
}

#[test]
fn seed_scan_plain() {
    // def scan_net(all_weights, all_biases, x): x, _ = jax.lax.scan(scan_layer, x, (all_weights, all_biases))
    let net = |(ws, bs, x): (Tensor, Tensor, Tensor)| scan(scan_layer, x, (ws, bs)).0;
    check("seed_scan_plain", net, scan_args);
}

#[test]
fn seed_scan_checkpoint_dots() {
    // scan_layer_ck = jax.checkpoint(scan_layer, policy=dots_with_no_batch_dims_saveable)
    let layer_ck = checkpoint(|(x, wb): (Tensor, (Tensor, Tensor))| scan_layer(x, wb))
        .policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    let net = |(ws, bs, x): (Tensor, Tensor, Tensor)| scan(|x, wb| layer_ck.call((x, wb)), x, (ws, bs)).0;
    check("seed_scan_checkpoint_dots", net, scan_args);
}

/// ```python
/// def pipeline(w1, w2, x):
///     y = x @ w1; y = jax.nn.relu(y); y = y @ w2; return jnp.sum(y ** 2)
/// ```
fn pipeline((w1, w2, x): (Tensor, Tensor, Tensor)) -> Tensor {
    let y = x.matmul(&w1);
    let y = nn::relu(&y);
    let y = y.matmul(&w2);
    y.powi(2).sum()
}

fn pipeline_args(case: &Case) -> (Named<Array>, Named<Array>, Named<Array>) {
    (named("w1", case.arg(0)), named("w2", case.arg(1)), named("x", case.arg(2)))
}

#[test]
fn seed_pipeline_default() {
    // jax.checkpoint(pipeline): the default policy saves nothing.
    let f = checkpoint(pipeline);
    check("seed_pipeline_default", |args| f.call(args), pipeline_args);
}

#[test]
fn seed_pipeline_dots_no_batch() {
    let f = checkpoint(pipeline).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    check("seed_pipeline_dots_no_batch", |args| f.call(args), pipeline_args);
}
