//! `custom_jvp`: a `jax.custom_jvp` safe log (a custom tangent rule) in an entropy loss.
//! The Python original (`gen_zoo.py`):
//!
//! ```python
//! @jax.custom_jvp
//! def safe_log(x):
//!     return jnp.log(jnp.maximum(x, 1e-6))
//! @safe_log.defjvp
//! def _safe_log_jvp(primals, tangents):
//!     (x,), (t,) = primals, tangents
//!     return safe_log(x), t / jnp.maximum(x, 1e-6)
//! def custom_jvp_loss(W, x):
//!     p = jax.nn.softmax(x @ W, axis=-1)
//!     return -jnp.sum(p * safe_log(p)) + jnp.sum(safe_log(jnp.abs(x) * 0.0 + jnp.abs(W[0, 0])))
//! ```
//!
//! The rule's Rust name is JAX's (`custom_jvp_call` prints it: `jvp=_safe_log_jvp`).

use remat::trace::idx;
use remat::{custom_jvp, named, nn, numpy, Tensor};

use super::common::Case;

/// `log(max(x, 1e-6))`, the primal function's body.
fn safe_log_body(x: Tensor) -> Tensor {
    numpy::maximum(&x, 1e-6).log()
}

/// `safe_log`, the `custom_jvp` function (JAX's decorated `safe_log`).
pub fn safe_log(x: Tensor) -> Tensor {
    custom_jvp(safe_log_body).name("safe_log").defjvp(_safe_log_jvp).call(x)
}

/// Its tangent rule: `t / max(x, 1e-6)`; the primal output calls `safe_log` itself, as the
/// Python rule does (the inner call records the call equation without tracing the rule
/// again).
pub fn _safe_log_jvp(x: Tensor, t: Tensor) -> (Tensor, Tensor) {
    (safe_log(x.clone()), t / numpy::maximum(&x, 1e-6))
}

/// The loss: the softmax's entropy plus a safe log of a constant-like tensor.
pub fn custom_jvp_loss(w: Tensor, x: Tensor) -> Tensor {
    let p = nn::softmax(&x.matmul(&w), -1);
    -(&p * safe_log(p.clone())).sum() + safe_log(x.abs() * 0.0 + w.index(idx![0, 0]).abs()).sum()
}

/// Text, residuals and values equal JAX's.
#[test]
fn custom_jvp_matches_jax() {
    let case = Case::load("custom_jvp");
    let a = case.args();
    let args = (named("W", a[0].clone()), named("x", a[1].clone()));
    let failures = case.check(|(w, x)| custom_jvp_loss(w, x), &args);
    assert!(failures.is_empty(), "{failures:#?}");
}
