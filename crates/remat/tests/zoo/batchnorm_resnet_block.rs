//! `batchnorm_resnet_block`: convolution, batch norm (mean and variance over `N, H, W`),
//! relu, convolution, batch norm, skip connection, relu; the first batch statistics are
//! outputs too. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def batchnorm(x, g, b, eps=1e-5):
//!     mu = jnp.mean(x, axis=(0, 1, 2))
//!     var = jnp.var(x, axis=(0, 1, 2))
//!     return (x - mu) * lax.rsqrt(var + eps) * g + b, mu, var
//! def bn_resnet_block(params, x):
//!     w1, (g1, b1), w2, (g2, b2) = params
//!     h, mu1, var1 = batchnorm(conv(x, w1), g1, b1)
//!     h = jax.nn.relu(h)
//!     h, mu2, var2 = batchnorm(conv(h, w2), g2, b2)
//!     y = jax.nn.relu(h + x)
//!     return jnp.mean(y ** 2), mu1, var1
//! ```

use remat::{named, nn, numpy, Tensor};

use super::cnn::conv;
use super::common::Case;

/// Batch norm over the `N, H, W` axes of an `NHWC` tensor: `(normalized, mean, var)`.
pub fn batchnorm(x: &Tensor, g: &Tensor, b: &Tensor) -> (Tensor, Tensor, Tensor) {
    let mu = x.mean_axes(&[0, 1, 2], false);
    let var = x.var_axes(&[0, 1, 2]);
    let y = (x - &mu) * numpy::rsqrt(&var + 1e-5) * g + b;
    (y, mu, var)
}

/// `(w1, (g1, b1), w2, (g2, b2))`.
pub type Params = (Tensor, (Tensor, Tensor), Tensor, (Tensor, Tensor));

/// `(loss, mu1, var1)`.
pub fn bn_resnet_block(params: Params, x: Tensor) -> (Tensor, Tensor, Tensor) {
    let (w1, (g1, b1), w2, (g2, b2)) = params;
    let (h, mu1, var1) = batchnorm(&conv(&x, &w1, 1), &g1, &b1);
    let h = nn::relu(&h);
    let (h, _mu2, _var2) = batchnorm(&conv(&h, &w2, 1), &g2, &b2);
    let y = nn::relu(&(h + &x));
    (y.powi(2).mean(), mu1, var1)
}

#[test]
fn batchnorm_resnet_block_matches_jax() {
    let case = Case::load("batchnorm_resnet_block");
    let a = case.args();
    let params = (a[0].clone(), (a[1].clone(), a[2].clone()), a[3].clone(), (a[4].clone(), a[5].clone()));
    let args = (named("params", params), named("x", a[6].clone()));
    case.assert_matches(|(params, x)| bn_resnet_block(params, x), &args);
}
