//! `embedding_grad`: an embedding gather with repeated indices (its gradient is a
//! scatter-add) and a forward `.at[].add`. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def embedding_model(emb, W, tokens):
//!     h = emb[tokens]                                    # gather with repeated indices
//!     bumped = emb.at[tokens[:, 0]].add(1.0)            # forward scatter-add
//!     return jnp.sum(jnp.tanh(h @ W) ** 2) + jnp.sum(bumped[:3] ** 2)
//! ```

use remat::trace::idx;
use remat::{named, Tensor};

use super::common::Case;

/// The loss; `tokens` are `i32` rows of `emb`.
pub fn embedding_model(emb: Tensor, w: Tensor, tokens: Tensor) -> Tensor {
    let h = emb.index_array(&tokens);
    let bumped = emb.at(&tokens.index(idx![.., 0])).add(1.0);
    h.matmul(&w).tanh().powi(2).sum() + bumped.index(idx![..3]).powi(2).sum()
}

#[test]
fn embedding_grad_matches_jax() {
    let case = Case::load("embedding_grad");
    let a = case.args();
    let args = (named("emb", a[0].clone()), named("W", a[1].clone()), named("tokens", a[2].clone()));
    case.assert_matches(|(emb, w, tokens)| embedding_model(emb, w, tokens), &args);
}
