//! `dropout_mlp`: an MLP with bernoulli dropout driven by a legacy raw PRNG key argument
//! (`u32[2]`), split inside. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def dropout(k, h, rate):
//!     keep = jax.random.bernoulli(k, 1.0 - rate, h.shape)
//!     return jnp.where(keep, h / (1.0 - rate), 0.0)
//! def dropout_mlp(params, x, y, rng):
//!     (W1, b1), (W2, b2), (W3, b3) = params
//!     k1, k2 = jax.random.split(rng)
//!     h = dropout(k1, jnp.tanh(x @ W1 + b1), 0.25)
//!     h = dropout(k2, jax.nn.relu(h @ W2 + b2), 0.5)
//!     return jnp.mean((h @ W3 + b3 - y) ** 2)
//! ```

use remat::{named, nn, numpy, random, Tensor};

use super::common::Case;

/// `(W, b)` of each dense layer.
pub type Params = Vec<(Tensor, Tensor)>;

/// Inverted dropout as the model writes it: keep each element with probability
/// `1 - rate` (`nn::dropout` is the same but fills with an integer `0`, as `jnp.where(keep,
/// x, 0)` would; here the fill is `0.0`, which JAX records as an `f32` argument).
pub fn dropout(k: &Tensor, h: &Tensor, rate: f64) -> Tensor {
    let keep = random::bernoulli(k, 1.0 - rate, Some(h.shape()));
    numpy::where_(&keep, h / (1.0 - rate), 0.0)
}

/// The loss. `rng` is a raw `u32[2]` key.
pub fn dropout_mlp(params: Params, x: Tensor, y: Tensor, rng: Tensor) -> Tensor {
    let [(w1, b1), (w2, b2), (w3, b3)]: [(Tensor, Tensor); 3] = params.try_into().expect("three layers");
    let keys = random::split(&rng, 2);
    let [k1, k2]: [Tensor; 2] = keys.unstack().try_into().expect("two keys");
    let h = dropout(&k1, &(x.matmul(&w1) + &b1).tanh(), 0.25);
    let h = dropout(&k2, &nn::relu(&(h.matmul(&w2) + &b2)), 0.5);
    (h.matmul(&w3) + &b3 - &y).powi(2).mean()
}

#[test]
fn dropout_mlp_matches_jax() {
    let case = Case::load("dropout_mlp");
    let a = case.args();
    let params = vec![(a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone()), (a[4].clone(), a[5].clone())];
    let args =
        (named("params", params), named("x", a[6].clone()), named("y", a[7].clone()), named("rng", a[8].clone()));
    case.assert_matches(|(params, x, y, rng)| dropout_mlp(params, x, y, rng), &args);
}
