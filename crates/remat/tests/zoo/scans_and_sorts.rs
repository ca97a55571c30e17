//! `scans_and_sorts`: `cumsum`, `cumprod`, `cummax`, `sort`, `argsort`, `argmax`,
//! `one_hot` and `top_k` in one loss, which also returns two integer arrays (their
//! cotangents are null). The Python original (`gen_zoo.py`):
//!
//! ```python
//! def scans_and_sorts(x, w):
//!     a = jnp.cumsum(x, axis=1)
//!     b = jnp.cumprod(1.0 + 0.1 * x, axis=1)
//!     c = lax.cummax(x, axis=1)
//!     s = jnp.sort(x, axis=1)
//!     idx = jnp.argsort(x, axis=1)
//!     logits = x @ w
//!     am = jnp.argmax(logits, axis=1)
//!     oh = jax.nn.one_hot(am, w.shape[1])
//!     tv, ti = lax.top_k(x, 3)
//!     ramp = jnp.arange(x.shape[1], dtype=f32)
//!     loss = (jnp.sum(a * b) + jnp.sum(c ** 2) + jnp.sum(s * ramp) + jnp.sum(jnp.take_along_axis(x, idx, 1) * ramp[::-1])
//!             + jnp.sum(oh * logits) + jnp.sum(tv ** 2))
//!     return loss, am, ti
//! ```

use remat::numpy::arange;
use remat::trace::Idx;
use remat::{lax, named, nn, DType, Tensor};

use super::common::Case;

/// `(loss, argmax of the logits, top-3 indices)`.
pub fn scans_and_sorts(x: Tensor, w: Tensor) -> (Tensor, Tensor, Tensor) {
    let a = x.cumsum(Some(1), false);
    let b = (1.0_f64 + 0.1_f64 * &x).cumprod(Some(1), false);
    let c = lax::cummax(&x, 1, false);
    let s = x.sort(1);
    let idx = x.argsort(1);
    let logits = x.matmul(&w);
    let am = logits.argmax(1);
    let oh = nn::one_hot(&am, w.shape()[1], DType::F32);
    let (tv, ti) = x.top_k(3);
    let ramp = arange(x.shape()[1], DType::F32);
    let loss = (a * b).sum()
        + c.powi(2).sum()
        + (s * &ramp).sum()
        + (x.take_along_axis(&idx, 1) * ramp.index(&[Idx::slice(None, None, -1)])).sum()
        + (oh * &logits).sum()
        + tv.powi(2).sum();
    (loss, am, ti)
}

/// The text, the values (interpreter and JIT) and the residuals equal JAX's, including
/// the six `f32[]` ones of the `cumprod` call: its jvp is an associative scan whose `pad`s
/// instantiate their padding value's zero tangent on the primal side, and the known
/// `jit[name=cumprod]` returns those zeros (`0.0:f32[]`) as JAX's does.
#[test]
fn scans_and_sorts_matches_jax() {
    let case = Case::load("scans_and_sorts");
    let a = case.args();
    let args = (named("x", a[0].clone()), named("w", a[1].clone()));
    case.assert_matches(|(x, w)| scans_and_sorts(x, w), &args);
}
