//! `custom_vjp`: a `jax.custom_vjp` gradient clipper (identity forward, clipped
//! cotangent) inside an MLP loss. The Python original (`gen_zoo.py`):
//!
//! ```python
//! @jax.custom_vjp
//! def clip_gradient(x):
//!     return x
//! def _clip_fwd(x): return x, None
//! def _clip_bwd(_, g): return (jnp.clip(g, -0.1, 0.1),)
//! clip_gradient.defvjp(_clip_fwd, _clip_bwd)
//! def custom_vjp_loss(W1, W2, x):
//!     h = clip_gradient(jnp.tanh(x @ W1))
//!     return jnp.sum((h @ W2) ** 2)
//! ```
//!
//! The rules' Rust names are JAX's (`custom_vjp_call` prints them: `fwd=_clip_fwd`).

use remat::{custom_vjp, named, Tensor};

use super::common::Case;

/// The identity; its gradient is clipped by [`_clip_bwd`].
pub fn clip_gradient(x: Tensor) -> Tensor {
    x
}

/// The forward rule: the value, nothing saved.
pub fn _clip_fwd(x: Tensor) -> (Tensor, ()) {
    (x, ())
}

/// The backward rule: the cotangent clipped to `[-0.1, 0.1]`.
pub fn _clip_bwd(_: (), g: Tensor) -> Tensor {
    g.clip(-0.1, 0.1)
}

/// The loss.
pub fn custom_vjp_loss(w1: Tensor, w2: Tensor, x: Tensor) -> Tensor {
    let clip = custom_vjp(clip_gradient).defvjp(_clip_fwd, _clip_bwd);
    let h = clip.call(x.matmul(&w1).tanh());
    h.matmul(&w2).powi(2).sum()
}

#[test]
fn custom_vjp_matches_jax() {
    let case = Case::load("custom_vjp");
    let a = case.args();
    let args = (named("W1", a[0].clone()), named("W2", a[1].clone()), named("x", a[2].clone()));
    case.assert_matches(|(w1, w2, x)| custom_vjp_loss(w1, w2, x), &args);
}
