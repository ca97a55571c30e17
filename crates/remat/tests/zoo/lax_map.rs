//! `lax_map` (remat's own case, `tests/data/zoo/gen_more.py`): `lax.map` of a small
//! network over the leading axis (a `scan` without a carry).
//!
//! ```python
//! def lax_map(params, xs):
//!     w1, w2 = params
//!     def per_item(x):
//!         return jnp.sum(jnp.sin(x @ w1) @ w2)
//!     return jnp.sum(lax.map(per_item, xs) ** 2)
//! ```

use remat::{lax, named, Tensor};

use super::common::Case;

/// The loss: the squared per-item outputs, summed.
pub fn lax_map(params: Vec<Tensor>, xs: Tensor) -> Tensor {
    let [w1, w2]: [Tensor; 2] = params.try_into().expect("two weights");
    let per_item = |x: Tensor| x.matmul(&w1).sin().matmul(&w2).sum();
    lax::map(per_item, xs).powi(2).sum()
}

#[test]
fn lax_map_matches_jax() {
    let case = Case::load("lax_map");
    let a = case.args();
    let args = (named("params", a[..2].to_vec()), named("xs", a[2].clone()));
    case.assert_matches(|(params, xs)| lax_map(params, xs), &args);
}
