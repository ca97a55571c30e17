//! `moe_top_k` (remat's own case, `tests/data/zoo/gen_more.py`): a mixture of experts:
//! router `top_k` (k = 2), softmax gates, `take_along_axis` over experts, a z-loss.
//!
//! ```python
//! def moe(params, x, y, k=2):
//!     wr, we, wo = params                                   # router, experts [E, D, H], out [H, 1]
//!     logits = x @ wr                                       # [N, E]
//!     vals, idx = lax.top_k(logits, k)                      # [N, k]
//!     gates = jax.nn.softmax(vals, axis=-1)
//!     h = jnp.einsum('nd,edh->neh', x, we)                  # every expert's output
//!     chosen = jnp.take_along_axis(h, idx[:, :, None], axis=1)   # [N, k, H]
//!     mixed = jnp.sum(gates[:, :, None] * jax.nn.relu(chosen), axis=1)
//!     return jnp.mean((mixed @ wo - y) ** 2) + 0.01 * jnp.mean(jax.nn.logsumexp(logits, axis=-1) ** 2)
//! ```

use remat::numpy::einsum;
use remat::trace::{idx, NEW_AXIS};
use remat::{named, nn, Tensor};

use super::common::Case;

/// The loss of a top-2 routed mixture of experts; `params` is `[wr, we, wo]`.
pub fn moe(params: Vec<Tensor>, x: Tensor, y: Tensor) -> Tensor {
    let [wr, we, wo]: [Tensor; 3] = params.try_into().expect("three parameters");
    let logits = x.matmul(&wr);
    let (vals, idx) = logits.top_k(2);
    let gates = nn::softmax(&vals, -1);
    let h = einsum("nd,edh->neh", &[&x, &we]);
    let chosen = h.take_along_axis(&idx.index(idx![.., .., NEW_AXIS]), 1);
    let mixed = (gates.index(idx![.., .., NEW_AXIS]) * nn::relu(&chosen)).sum_axes(&[1], false);
    (mixed.matmul(&wo) - &y).powi(2).mean() + 0.01 * nn::logsumexp(&logits, Some(&[-1]), false).powi(2).mean()
}

#[test]
fn moe_top_k_matches_jax() {
    let case = Case::load("moe_top_k");
    let a = case.args();
    let args = (named("params", a[..3].to_vec()), named("x", a[3].clone()), named("y", a[4].clone()));
    case.assert_matches(|(params, x, y)| moe(params, x, y), &args);
}
