//! `grad_clip_global_norm`: an SGD step whose gradient (taken inside the step) is clipped
//! by its global norm; the zoo differentiates the whole step again. The Python original
//! (`tests/data/zoo/gen_more.py`):
//!
//! ```python
//! def mlp_loss(params, x, y):
//!     (w1, b1), (w2, b2) = params
//!     return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
//! def clip_step(params, x, y, max_norm=0.5, lr=0.1):
//!     loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
//!     leaves = jax.tree_util.tree_leaves(g)
//!     norm = jnp.sqrt(sum(jnp.sum(l ** 2) for l in leaves))
//!     scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))
//!     new = jax.tree_util.tree_map(lambda p, gg: p - lr * scale * gg, params, g)
//!     return loss, new
//! ```
//!
//! Python's `sum` starts from `0`, which JAX records as `add 0.0 ...`; the Rust fold
//! starts from `0.0` the same way.

use remat::{named, numpy, value_and_grad, Array, Tensor, TensorTree};

use super::common::Case;

/// `[(w1, b1), (w2, b2)]`.
pub type Params = Vec<(Tensor, Tensor)>;

/// A tanh MLP's mean squared error.
pub fn mlp_loss(params: &Params, x: &Tensor, y: &Tensor) -> Tensor {
    let ((w1, b1), (w2, b2)) = (&params[0], &params[1]);
    ((x.matmul(w1) + b1).tanh().matmul(w2) + b2 - y).powi(2).mean()
}

/// One clipped SGD step: `(loss, params after the step)`.
pub fn clip_step((params, x, y): (Params, Tensor, Tensor)) -> (Tensor, Params) {
    let (max_norm, lr) = (0.5, 0.1);
    let (loss, g) = value_and_grad(|p: Params| mlp_loss(&p, &x, &y)).value_and_trace_tree(&params);
    let sq = g.leaves().iter().fold(None, |acc: Option<Tensor>, l| {
        let s = l.powi(2).sum();
        Some(match acc {
            None => 0.0 + s,
            Some(acc) => acc + s,
        })
    });
    let norm = sq.expect("parameters").sqrt();
    let scale = numpy::minimum(1.0, max_norm / (norm + 1e-6));
    let step = |p: &Tensor, gg: &Tensor| p - lr * &scale * gg;
    let new = params.iter().zip(&g).map(|((p0, p1), (g0, g1))| (step(p0, g0), step(p1, g1))).collect();
    (loss, new)
}

#[test]
fn grad_clip_global_norm_matches_jax() {
    let case = Case::load("grad_clip_global_norm");
    let a: Vec<Array> = case.args();
    let params = vec![(a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone())];
    case.assert_matches(clip_step, &(named("params", params), named("x", a[4].clone()), named("y", a[5].clone())));
}
