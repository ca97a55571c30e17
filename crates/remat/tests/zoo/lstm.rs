//! `lstm` (remat's own case, `tests/data/zoo/gen_more.py`): an LSTM over six time steps
//! with `lax.scan`: sigmoid gates, `split`, `tanh`, a carried `(h, c)` pair.
//!
//! ```python
//! def lstm(params, xs, ys):
//!     wx, wh, b, wo = params
//!     H = wh.shape[0]
//!     def cell(carry, x):
//!         h, c = carry
//!         g = x @ wx + h @ wh + b
//!         i, f, o, u = jnp.split(g, 4, axis=-1)
//!         c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(u)
//!         h = jax.nn.sigmoid(o) * jnp.tanh(c)
//!         return (h, c), h @ wo
//!     B = xs.shape[1]
//!     _, out = lax.scan(cell, (jnp.zeros((B, H)), jnp.zeros((B, H))), xs)
//!     return jnp.mean((out - ys) ** 2)
//! ```

use remat::numpy::{self, Sections};
use remat::{named, nn, scan, DType, Tensor};

use super::common::Case;

/// The loss of the LSTM's outputs over `xs: [T, B, X]` against `ys: [T, B, Y]`;
/// `params` is `[wx, wh, b, wo]`.
pub fn lstm(params: Vec<Tensor>, xs: Tensor, ys: Tensor) -> Tensor {
    let [wx, wh, b, wo]: [Tensor; 4] = params.try_into().expect("four parameters");
    let h_size = wh.shape()[0];
    let cell = |(h, c): (Tensor, Tensor), x: Tensor| {
        let g = x.matmul(&wx) + h.matmul(&wh) + &b;
        let [i, f, o, u]: [Tensor; 4] = g.split(Sections::Count(4), -1).try_into().expect("four gates");
        let c = nn::sigmoid(&f) * &c + nn::sigmoid(&i) * u.tanh();
        let h = nn::sigmoid(&o) * c.tanh();
        let y = h.matmul(&wo);
        ((h, c), y)
    };
    let batch = xs.shape()[1];
    let init = (numpy::zeros(&[batch, h_size], DType::F32), numpy::zeros(&[batch, h_size], DType::F32));
    let (_, out) = scan(cell, init, xs);
    (out - &ys).powi(2).mean()
}

#[test]
fn lstm_matches_jax() {
    let case = Case::load("lstm");
    let a = case.args();
    let args = (named("params", a[..4].to_vec()), named("xs", a[4].clone()), named("ys", a[5].clone()));
    case.assert_matches(|(params, xs, ys)| lstm(params, xs, ys), &args);
}
