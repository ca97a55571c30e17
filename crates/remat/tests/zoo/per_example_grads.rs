//! `per_example_grads`: `vmap` of `grad`, one gradient per example, and their norms; the
//! zoo differentiates the whole program again (second order). The Python original
//! (`gen_zoo.py`):
//!
//! ```python
//! def ex_loss(params, xy):
//!     x, y = xy
//!     W1, b1, W2 = params
//!     return jnp.sum((jnp.tanh(x @ W1 + b1) @ W2 - y) ** 2)
//! def per_example_grads(params, xs, ys):
//!     gs = jax.vmap(jax.grad(ex_loss), in_axes=(None, 0))(params, (xs, ys))
//!     norms = sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in gs)
//!     return gs, jnp.sqrt(norms)
//! ```
//!
//! `in_axes` is given per flattened leaf: the three parameters unmapped, `xs` and `ys`
//! mapped over axis 0. The gradient's closure captures the example `(x, y)`, which is then
//! a constant of the differentiation, as `jax.grad`'s `argnums=0` makes it.

use remat::{grad, named, vmap, Array, Tensor};

use super::common::Case;

/// `(W1, b1, W2)`.
pub type Params = (Tensor, Tensor, Tensor);

/// One example's squared error.
pub fn ex_loss((w1, b1, w2): &Params, x: &Tensor, y: &Tensor) -> Tensor {
    ((x.matmul(w1) + b1).tanh().matmul(w2) - y).powi(2).sum()
}

/// The per-example gradients (each with a leading batch axis) and their norms.
pub fn per_example_grads((params, xs, ys): (Params, Tensor, Tensor)) -> (Params, Tensor) {
    let example_grad =
        |(params, (x, y)): (Params, (Tensor, Tensor))| grad(|p: Params| ex_loss(&p, &x, &y)).trace_tree(&params);
    let in_axes = [None, None, None, Some(0), Some(0)];
    let gs: Params = vmap(example_grad, &in_axes, &[Some(0)]).trace((params, (xs, ys)));
    let sq = [&gs.0, &gs.1, &gs.2].into_iter().fold(None, |acc: Option<Tensor>, g| {
        let s = g.reshape(&[g.shape()[0] as isize, -1]).powi(2).sum_axes(&[1], false);
        Some(match acc {
            None => 0.0 + s,
            Some(acc) => acc + s,
        })
    });
    let norms = sq.expect("three gradients").sqrt();
    (gs, norms)
}

#[test]
fn per_example_grads_matches_jax() {
    let case = Case::load("per_example_grads");
    let a: Vec<Array> = case.args();
    let params = (a[0].clone(), a[1].clone(), a[2].clone());
    case.assert_matches(
        per_example_grads,
        &(named("params", params), named("xs", a[3].clone()), named("ys", a[4].clone())),
    );
}
