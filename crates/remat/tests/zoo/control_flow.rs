//! `control_flow`: a `fori_loop` with static bounds (a `scan`), `lax.cond` on data and
//! `lax.switch` on an integer argument, under grad. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def control_flow(W, x, branch):
//!     h = lax.fori_loop(0, 3, lambda i, h: jnp.tanh(W @ h + 0.1 * i), x)      # static bounds: a scan
//!     h = lax.cond(jnp.sum(h) > 0, lambda h: jnp.sin(h) * 2.0, lambda h: jnp.cos(h) - h, h)
//!     h = lax.switch(branch, [lambda h: h ** 2, lambda h: jnp.exp(-h), lambda h: h * W[0]], h)
//!     return jnp.sum(h * x)
//! ```

use remat::trace::idx;
use remat::{lax, named, Tensor};

use super::common::Case;

/// The loss; `branch` is an `i32` scalar choosing the `switch` branch.
pub fn control_flow(w: Tensor, x: Tensor, branch: Tensor) -> Tensor {
    let h = lax::fori_loop(0, 3, |i, h: Tensor| (w.matmul(&h) + 0.1 * i).tanh(), x.clone());
    let h = lax::cond(&h.sum().gt(0.0), |h: Tensor| h.sin() * 2.0, |h: Tensor| h.cos() - &h, h);
    let square = |h: Tensor| h.powi(2);
    let decay = |h: Tensor| (-h).exp();
    let scale = |h: Tensor| h * w.index(idx![0]);
    let h = lax::switch(&branch, [&square, &decay, &scale], h);
    (h * &x).sum()
}

#[test]
fn control_flow_matches_jax() {
    let case = Case::load("control_flow");
    let a = case.args();
    let args = (named("W", a[0].clone()), named("x", a[1].clone()), named("branch", a[2].clone()));
    case.assert_matches(|(w, x, branch)| control_flow(w, x, branch), &args);
}
