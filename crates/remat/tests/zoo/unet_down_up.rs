//! `unet_down_up` (remat's own case, `tests/data/zoo/gen_more.py`): a U-Net style
//! down/up path: a stride-2 convolution down, nearest-neighbour upsampling with
//! `jnp.repeat`, a skip connection by concatenation, a 1x1 output convolution.
//!
//! ```python
//! def unet(params, x):
//!     (wd, bd), (wm, bm), (wu, bu), wo = params
//!     d = jax.nn.relu(conv(x, wd, 2) + bd)                                # 8x8 -> 4x4
//!     m = jax.nn.relu(conv(d, wm, 1) + bm)
//!     up = jnp.repeat(jnp.repeat(m, 2, axis=1), 2, axis=2)               # nearest upsampling to 8x8
//!     u = jax.nn.relu(conv(jnp.concatenate([up, x], axis=-1), wu, 1) + bu)  # skip connection
//!     y = conv(u, wo, 1)
//!     return jnp.mean((y - x) ** 2)
//! ```

use remat::numpy::concatenate;
use remat::{named, nn, Tensor};

use super::cnn::conv;
use super::common::Case;

/// `((wd, bd), (wm, bm), (wu, bu), wo)`: down, middle and up convolutions, the output one.
pub type Params = ((Tensor, Tensor), (Tensor, Tensor), (Tensor, Tensor), Tensor);

/// The reconstruction loss.
pub fn unet(params: Params, x: Tensor) -> Tensor {
    let ((wd, bd), (wm, bm), (wu, bu), wo) = params;
    let d = nn::relu(&(conv(&x, &wd, 2) + &bd));
    let m = nn::relu(&(conv(&d, &wm, 1) + &bm));
    let up = m.repeat(2, Some(1)).repeat(2, Some(2));
    let u = nn::relu(&(conv(&concatenate(&[&up, &x], -1), &wu, 1) + &bu));
    let y = conv(&u, &wo, 1);
    (y - &x).powi(2).mean()
}

#[test]
fn unet_down_up_matches_jax() {
    let case = Case::load("unet_down_up");
    let a = case.args();
    let params =
        ((a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone()), (a[4].clone(), a[5].clone()), a[6].clone());
    let args = (named("params", params), named("x", a[7].clone()));
    case.assert_matches(|(params, x)| unet(params, x), &args);
}
