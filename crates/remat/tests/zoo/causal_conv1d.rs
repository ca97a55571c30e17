//! `causal_conv1d` (remat's own case, `tests/data/zoo/gen_more.py`): a temporal conv net:
//! causal 1-D convolutions (left padding, `rhs_dilation` 2) and a residual connection.
//!
//! ```python
//! def tcn(params, x, y):
//!     w1, w2, wo = params
//!     def causal(h, w, dil):
//!         k = w.shape[0]
//!         return lax.conv_general_dilated(h, w, (1,), [((k - 1) * dil, 0)], rhs_dilation=(dil,),
//!                                         dimension_numbers=('NWC', 'WIO', 'NWC'))
//!     h = jax.nn.relu(causal(x, w1, 1))
//!     h = jax.nn.relu(causal(h, w2, 2)) + h
//!     return jnp.mean((h @ wo - y) ** 2)
//! ```

use remat::lax::{self, ConvOptions, Padding};
use remat::{named, nn, Tensor};

use super::common::Case;

/// A causal `NWC`/`WIO` convolution: each output sees only the present and the past.
pub fn causal(h: &Tensor, w: &Tensor, dilation: usize) -> Tensor {
    let k = w.shape()[0] as i64;
    let options = ConvOptions { rhs_dilation: Some(vec![dilation]), ..ConvOptions::default() }
        .dimension_numbers("NWC", "WIO", "NWC");
    lax::conv_general_dilated(h, w, &[1], Padding::Explicit(vec![((k - 1) * dilation as i64, 0)]), options)
}

/// The regression loss of a two-layer temporal conv net; `params` is `[w1, w2, wo]`.
pub fn tcn(params: Vec<Tensor>, x: Tensor, y: Tensor) -> Tensor {
    let [w1, w2, wo]: [Tensor; 3] = params.try_into().expect("three parameters");
    let h = nn::relu(&causal(&x, &w1, 1));
    let h = nn::relu(&causal(&h, &w2, 2)) + &h;
    (h.matmul(&wo) - &y).powi(2).mean()
}

#[test]
fn causal_conv1d_matches_jax() {
    let case = Case::load("causal_conv1d");
    let a = case.args();
    let args = (named("params", a[..3].to_vec()), named("x", a[3].clone()), named("y", a[4].clone()));
    case.assert_matches(|(params, x, y)| tcn(params, x, y), &args);
}
