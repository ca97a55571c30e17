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

/// `log(max(x, 1e-6))`, the primal function.
pub fn safe_log(x: Tensor) -> Tensor {
    numpy::maximum(&x, 1e-6).log()
}

/// Its tangent rule: `t / max(x, 1e-6)`. The primal output is the plain function: a rule
/// that calls the `custom_jvp` function itself (as the Python rule does) recurses without
/// end when remat traces the rule.
pub fn _safe_log_jvp(x: Tensor, t: Tensor) -> (Tensor, Tensor) {
    (safe_log(x.clone()), t / numpy::maximum(&x, 1e-6))
}

/// The loss: the softmax's entropy plus a safe log of a constant-like tensor.
pub fn custom_jvp_loss(w: Tensor, x: Tensor) -> Tensor {
    let safe = custom_jvp(safe_log).defjvp(_safe_log_jvp);
    let p = nn::softmax(&x.matmul(&w), -1);
    -(&p * safe.call(p.clone())).sum() + safe.call(x.abs() * 0.0 + w.index(idx![0, 0]).abs()).sum()
}

/// Text and values equal JAX's; the residuals differ in one entry, asserted here: JAX's
/// rule calls `safe_log` (the `custom_jvp` function) and saves that call's output,
/// `f32[4,5] output of custom_jvp_call`; the Rust rule calls the plain function and saves
/// its `log`. (A Rust rule that calls its own `custom_jvp` function does not terminate
/// when traced; see `_safe_log_jvp`.)
#[test]
fn custom_jvp_matches_jax_but_one_residual() {
    let case = Case::load("custom_jvp");
    let a = case.args();
    let args = (named("W", a[0].clone()), named("x", a[1].clone()));
    let failures = case.check(|(w, x)| custom_jvp_loss(w, x), &args);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let (got, want) = failures[0].split_once(" want ").expect("a residual difference");
    assert!(got.contains("\"f32[4,1] output integer_pow\", \"f32[4,5] output log\", \"f32[4,5] output max\""), "{got}");
    assert!(
        want.contains("\"f32[4,1] output integer_pow\", \"f32[4,5] output custom_jvp_call\", \"f32[4,5] output max\""),
        "{want}"
    );
    assert_eq!(got.matches("\", \"").count(), want.matches("\", \"").count(), "one entry differs, none is missing");
}
