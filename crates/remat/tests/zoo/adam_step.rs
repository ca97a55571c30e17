//! `adam_step`: a full training step: `value_and_grad` of a gelu MLP, then a hand-written
//! Adam update of the parameter tree (bias-corrected, `i32` step counter). The Python
//! original (`gen_zoo.py`):
//!
//! ```python
//! def mlp_loss(params, x, y):
//!     for W, b in params[:-1]:
//!         x = jax.nn.gelu(x @ W + b)
//!     W, b = params[-1]
//!     return jnp.mean((x @ W + b - y) ** 2)
//! def adam_step(params, m, v, step, x, y, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
//!     loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
//!     step = step + 1
//!     t = step.astype(f32)
//!     m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
//!     v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
//!     upd = lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps)
//!     return jax.tree_util.tree_map(upd, params, m, v), m, v, step, loss
//! ```
//!
//! JAX traces `value_and_grad` *inside* the step, so the whole step is one jaxpr (the
//! derivative's equations inline); `value_and_grad(f).value_and_trace_tree(&params)` does
//! the same inside a Rust trace. The loss closes over `x` and `y`, which are then
//! constants of the differentiation, as `argnums=0` makes them in JAX.

use remat::{named, nn, numpy, value_and_grad, Array, DType, Tensor};

use super::common::Case;

/// `(W, b)` of each dense layer.
pub type Params = Vec<(Tensor, Tensor)>;

/// The MLP's mean squared error: gelu hidden layers, a linear output.
pub fn mlp_loss(params: Params, x: Tensor, y: Tensor) -> Tensor {
    let (last, hidden) = params.split_last().expect("at least one layer");
    let x = hidden.iter().fold(x, |x, (w, b)| nn::gelu(&(x.matmul(w) + b)));
    (x.matmul(&last.0) + &last.1 - &y).powi(2).mean()
}

/// One Adam step: `(params, m, v, step, loss)` after it, as `adam_step` returns them.
pub fn adam_step(
    (params, m, v, step, x, y): (Params, Params, Params, Tensor, Tensor, Tensor),
) -> (Params, Params, Params, Tensor, Tensor) {
    let (loss, g) = value_and_grad(|p: Params| mlp_loss(p, x.clone(), y.clone())).value_and_trace_tree(&params);
    let (lr, b1, b2, eps) = (1e-2, 0.9, 0.999, 1e-8);
    let step = step + 1;
    let t = step.astype(DType::F32);
    let zip = |a: &Params, b: &Params, f: &dyn Fn(&Tensor, &Tensor) -> Tensor| -> Params {
        a.iter().zip(b).map(|((a0, a1), (b0, b1))| (f(a0, b0), f(a1, b1))).collect()
    };
    let m = zip(&m, &g, &|m, g| b1 * m + (1.0 - b1) * g);
    let v = zip(&v, &g, &|v, g| b2 * v + (1.0 - b2) * g * g);
    let upd = |p: &Tensor, m: &Tensor, v: &Tensor| {
        p - lr * (m / (1.0 - numpy::power(b1, &t))) / ((v / (1.0 - numpy::power(b2, &t))).sqrt() + eps)
    };
    let new = params.iter().zip(&m).zip(&v).map(|(((p0, p1), (m0, m1)), (v0, v1))| (upd(p0, m0, v0), upd(p1, m1, v1)));
    (new.collect(), m, v, step, loss)
}

#[test]
fn adam_step_matches_jax() {
    let case = Case::load("adam_step");
    let a: Vec<Array> = case.args();
    let tree = |i: usize| vec![(a[i].clone(), a[i + 1].clone()), (a[i + 2].clone(), a[i + 3].clone())];
    let args = (
        named("params", tree(0)),
        named("m", tree(4)),
        named("v", tree(8)),
        named("step", a[12].clone()),
        named("x", a[13].clone()),
        named("y", a[14].clone()),
    );
    case.assert_matches(adam_step, &args);
}
