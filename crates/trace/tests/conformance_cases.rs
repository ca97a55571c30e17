//! The non-seed programs of the conformance set, written with the Rust API: policies over
//! the three-layer network, an MLP with softmax cross-entropy, attention, layer norm, and
//! zoos of elementwise and shape operations. Each is the Rust twin of a function in the
//! shared `gen_cases.py` (quoted above it); each evaluates to JAX's outputs and prints
//! exactly JAX's text.

mod common;

use common::Case;
use remat_ir::{Array, Policy};
use remat_trace::numpy::{self as jnp, einsum};
use remat_trace::{checkpoint, checkpoint_name, function_scope, idx, make_jaxpr, named, nn, Named, Tensor, NEW_AXIS};

/// `def g(W, x): return jnp.sin(jnp.dot(W, x))`
fn g(w: &Tensor, x: &Tensor) -> Tensor {
    let _scope = function_scope!();
    w.dot(x).sin()
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

type Four = (Named<Array>, Named<Array>, Named<Array>, Named<Array>);

fn rw_args(case: &Case) -> Four {
    (named("W1", case.arg(0)), named("W2", case.arg(1)), named("W3", case.arg(2)), named("x", case.arg(3)))
}

/// Traces `f` on `args(case)` and checks it against the recorded case.
fn check<A: remat_trace::ArgTree, R: remat_trace::TensorTree>(
    name: &str,
    f: impl FnOnce(A::Traced) -> R,
    args: impl FnOnce(&Case) -> A,
) {
    let case = Case::load(name);
    let args = args(&case);
    let traced = make_jaxpr(f, &args).unwrap();
    case.assert_evaluates(&traced, &args);
    case.assert_text(&traced);
    case.assert_residuals(&traced);
}

/// `jax.checkpoint(f_plain or f_named, policy=policy)` on the random three-layer weights.
fn check_policy(name: &str, named_layers: bool, policy: Policy) {
    let f = checkpoint(if named_layers { f_named } else { f_plain }).policy(policy);
    check(name, |args| f.call(args), rw_args);
}

#[test]
fn everything_saveable() {
    check_policy("everything_saveable", false, Policy::EverythingSaveable);
}

#[test]
fn nothing_saveable() {
    check_policy("nothing_saveable", false, Policy::NothingSaveable);
}

#[test]
fn dots_saveable_plain() {
    check_policy("dots_saveable_plain", false, Policy::DotsSaveable { only_if_no_batch_dims: false });
}

#[test]
fn save_anything_except_b() {
    check_policy("save_anything_except_b", true, Policy::SaveAnythingExceptTheseNames { names: vec!["b".into()] });
}

#[test]
fn save_only_a_c() {
    // Python printed the frozenset as {'c', 'a'}; the policy keeps the order it is given.
    check_policy("save_only_a_c", true, Policy::SaveOnlyTheseNames { names: vec!["c".into(), "a".into()] });
}

#[test]
fn save_from_both_names_dots() {
    let policy = Policy::SaveFromBothPolicies {
        policy_1: Box::new(Policy::SaveOnlyTheseNames { names: vec!["b".into()] }),
        policy_2: Box::new(Policy::DotsSaveable { only_if_no_batch_dims: true }),
    };
    check_policy("save_from_both_names_dots", true, policy);
}

#[test]
fn offload_dots_no_batch() {
    let policy = Policy::OffloadDotWithNoBatchDims { offload_src: "device".into(), offload_dst: "pinned_host".into() };
    check_policy("offload_dots_no_batch", false, policy);
}

/// ```python
/// def offload_names(W1, W2, W3, x):
///     h = checkpoint_name(g(W1, x), 'a')
///     h = checkpoint_name(g(W2, h), 'b')
///     return jnp.sum(jnp.sin(W3 @ h)) + jnp.sum(h * h)
/// ```
fn offload_names((w1, w2, w3, x): (Tensor, Tensor, Tensor, Tensor)) -> Tensor {
    let h = checkpoint_name(&g(&w1, &x), "a");
    let h = checkpoint_name(&g(&w2, &h), "b");
    w3.matmul(&h).sin().sum() + (&h * &h).sum()
}

#[test]
fn save_and_offload_names() {
    let f = checkpoint(offload_names).policy(Policy::SaveAndOffloadOnlyTheseNames {
        saved: vec!["a".into()],
        offloaded: vec!["b".into()],
        offload_src: "device".into(),
        offload_dst: "pinned_host".into(),
    });
    check("save_and_offload_names", |args| f.call(args), rw_args);
}

/// ```python
/// def mlp(params, x, y):
///     for W, b in params[:-1]:
///         x = jnp.tanh(x @ W + b)
///     W, b = params[-1]
///     logits = x @ W + b
///     return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))
/// ```
fn mlp((params, x, y): (Vec<(Tensor, Tensor)>, Tensor, Tensor)) -> Tensor {
    let ((w_last, b_last), hidden) = params.split_last().expect("at least one layer");
    let mut x = x;
    for (w, b) in hidden {
        x = (x.matmul(w) + b).tanh();
    }
    let logits = x.matmul(w_last) + b_last;
    -(nn::log_softmax(&logits, -1) * &y).sum_axes(&[-1], false).mean()
}

type MlpArgs = (Named<Vec<(Array, Array)>>, Named<Array>, Named<Array>);

/// `params` (three `(W, b)` pairs), `x`, and the one-hot labels `y`.
fn mlp_args(case: &Case) -> MlpArgs {
    let params = (0..3).map(|i| (case.arg(2 * i), case.arg(2 * i + 1))).collect();
    (named("params", params), named("x", case.arg(6)), named("y", case.arg(7)))
}

#[test]
fn mlp_tanh_logsoftmax_plain() {
    check("mlp_tanh_logsoftmax_plain", mlp, mlp_args);
}

#[test]
fn mlp_tanh_logsoftmax_dots() {
    let f = checkpoint(mlp).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    check("mlp_tanh_logsoftmax_dots", |args| f.call(args), mlp_args);
}

/// ```python
/// def attn(q, k, v):
///     s = jnp.einsum('bqd,bkd->bqk', q, k) / jnp.sqrt(q.shape[-1]).astype(jnp.float32)
///     p = jax.nn.softmax(s, axis=-1)
///     return jnp.sum(jnp.einsum('bqk,bkd->bqd', p, v) ** 2)
/// ```
fn attention((q, k, v): (Tensor, Tensor, Tensor)) -> Tensor {
    let d = *q.shape().last().expect("q has a feature axis") as f64;
    let s = einsum("bqd,bkd->bqk", &[&q, &k]) / jnp::sqrt(d).astype(remat_ir::DType::F32);
    let p = nn::softmax(&s, -1);
    einsum("bqk,bkd->bqd", &[&p, &v]).powi(2).sum()
}

fn qkv_args(case: &Case) -> (Named<Array>, Named<Array>, Named<Array>) {
    (named("q", case.arg(0)), named("k", case.arg(1)), named("v", case.arg(2)))
}

#[test]
fn attention_dots_saveable() {
    let f = checkpoint(attention).policy(Policy::DotsSaveable { only_if_no_batch_dims: false });
    check("attention_dots_saveable", |args| f.call(args), qkv_args);
}

#[test]
fn attention_dots_no_batch() {
    let f = checkpoint(attention).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
    check("attention_dots_no_batch", |args| f.call(args), qkv_args);
}

/// ```python
/// def layernorm(x, gamma, beta):
///     mu = jnp.mean(x, axis=-1, keepdims=True)
///     var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
///     return jnp.sum(((x - mu) * jax.lax.rsqrt(var + 1e-5) * gamma + beta) ** 2)
/// ```
fn layernorm((x, gamma, beta): (Tensor, Tensor, Tensor)) -> Tensor {
    let mu = x.mean_axes(&[-1], true);
    let var = (&x - &mu).powi(2).mean_axes(&[-1], true);
    ((&x - &mu) * (var + 1e-5).rsqrt() * &gamma + &beta).powi(2).sum()
}

fn layernorm_args(case: &Case) -> (Named<Array>, Named<Array>, Named<Array>) {
    (named("x", case.arg(0)), named("gamma", case.arg(1)), named("beta", case.arg(2)))
}

#[test]
fn layernorm_plain() {
    check("layernorm_plain", layernorm, layernorm_args);
}

#[test]
fn layernorm_checkpointed() {
    let f = checkpoint(layernorm);
    check("layernorm_checkpointed", |args| f.call(args), layernorm_args);
}

/// ```python
/// def elementwise_zoo(x, y):
///     a = jnp.exp(x) * jnp.log(jnp.abs(y) + 1.0)
///     b = jax.nn.sigmoid(a) - jnp.cos(y) / (1.0 + x ** 2)
///     c = jnp.maximum(b, -0.5) + jnp.minimum(a, 2.0) + jnp.sqrt(jnp.abs(x) + 0.1)
///     return jnp.sum(jnp.where(x > 0, c, -c) * jnp.tanh(y))
/// ```
fn elementwise_zoo((x, y): (Tensor, Tensor)) -> Tensor {
    let a = x.exp() * (y.abs() + 1.0).log();
    let b = nn::sigmoid(&a) - y.cos() / (1.0 + x.powi(2));
    let c = b.maximum(-0.5) + a.minimum(2.0) + (x.abs() + 0.1).sqrt();
    (jnp::where_(&x.gt(0.0), &c, -&c) * y.tanh()).sum()
}

#[test]
fn elementwise_zoo_case() {
    check("elementwise_zoo", elementwise_zoo, |case| (named("x", case.arg(0)), named("y", case.arg(1))));
}

/// ```python
/// def shapes_zoo(x, w):
///     t = jnp.transpose(x) @ w                     # (3,4)@(4,2) -> (3,2)
///     r = jnp.reshape(t, (6,))
///     b = jnp.broadcast_to(r, (2, 6)) * jnp.arange(2.0)[:, None]
///     return jnp.sum(jnp.max(b, axis=0)) + jnp.sum(r[1:4])
/// ```
fn shapes_zoo((x, w): (Tensor, Tensor)) -> Tensor {
    let t = x.t().matmul(&w);
    let r = t.reshape(&[6]);
    let b = r.broadcast_to(&[2, 6]) * jnp::arange(2, remat_ir::DType::F32).index(idx![.., NEW_AXIS]);
    b.max_axes(&[0], false).sum() + r.index(idx![1..4]).sum()
}

#[test]
fn shapes_zoo_case() {
    check("shapes_zoo", shapes_zoo, |case| (named("x", case.arg(0)), named("w", case.arg(1))));
}
