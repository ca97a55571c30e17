//! `cnn`: convolutions (`NHWC`/`HWIO`, `SAME`, stride 1 and 2), relu, max pool, average
//! pool, a dense layer and an integer-label cross-entropy (`take_along_axis`); `u8`
//! images, `i32` labels. The Python original (`gen_zoo.py`):
//!
//! ```python
//! DN = ('NHWC', 'HWIO', 'NHWC')
//! def conv(x, w, stride=1, padding='SAME', **kw):
//!     return lax.conv_general_dilated(x, w, (stride, stride), padding, dimension_numbers=DN, **kw)
//! def max_pool(x, k=2, s=2):
//!     return lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, s, s, 1), 'VALID')
//! def avg_pool(x, k=2, s=2):
//!     return lax.reduce_window(x, 0., lax.add, (1, k, k, 1), (1, s, s, 1), 'VALID') / (k * k)
//! def xent_int(logits, labels):
//!     logp = jax.nn.log_softmax(logits, axis=-1)
//!     return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))
//! def cnn_loss(params, images, labels):
//!     (w1, b1), (w2, b2), (wd, bd) = params
//!     x = images.astype(f32) / 255.0
//!     h = jax.nn.relu(conv(x, w1, 1) + b1)          # 8x8, stride 1
//!     h = max_pool(h)                                # 4x4
//!     h = jax.nn.relu(conv(h, w2, 2) + b2)          # 2x2, stride 2
//!     h = avg_pool(h)                                # 1x1
//!     logits = h.reshape(h.shape[0], -1) @ wd + bd
//!     return xent_int(logits, labels)
//! ```

use remat::lax::{self, ConvOptions, Padding};
use remat::{named, nn, Array, DType, Tensor};

use super::common::Case;

/// `(W, b)` of each layer: two convolutions and the dense head.
pub type Params = Vec<(Tensor, Tensor)>;

/// A `SAME`-padded `NHWC`/`HWIO` convolution with a square stride.
pub fn conv(x: &Tensor, w: &Tensor, stride: usize) -> Tensor {
    let options = ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC");
    lax::conv_general_dilated(x, w, &[stride, stride], Padding::Same, options)
}

/// 2x2 max pooling with stride 2.
pub fn max_pool(x: &Tensor) -> Tensor {
    lax::reduce_window_max(x, &[1, 2, 2, 1], &[1, 2, 2, 1], Padding::Valid)
}

/// 2x2 average pooling with stride 2.
pub fn avg_pool(x: &Tensor) -> Tensor {
    lax::reduce_window_sum(x, &[1, 2, 2, 1], &[1, 2, 2, 1], Padding::Valid) / 4.0
}

/// Mean cross-entropy of `logits` against integer `labels`.
pub fn xent_int(logits: &Tensor, labels: &Tensor) -> Tensor {
    let logp = nn::log_softmax(logits, -1);
    -logp.take_along_axis(&labels.expand_dims(&[-1]), -1).mean()
}

/// The loss.
pub fn cnn_loss(params: Params, images: Tensor, labels: Tensor) -> Tensor {
    let [(w1, b1), (w2, b2), (wd, bd)]: [(Tensor, Tensor); 3] = params.try_into().expect("three layers");
    let x = images.astype(DType::F32) / 255.0;
    let h = nn::relu(&(conv(&x, &w1, 1) + &b1));
    let h = max_pool(&h);
    let h = nn::relu(&(conv(&h, &w2, 2) + &b2));
    let h = avg_pool(&h);
    let logits = h.reshape(&[h.shape()[0] as isize, -1]).matmul(&wd) + &bd;
    xent_int(&logits, &labels)
}

/// The recorded arguments as the loss takes them: `(params, images, labels)`.
pub fn cnn_args(case: &Case) -> impl remat::ArgTree<Traced = (Params, Tensor, Tensor)> {
    let a: Vec<Array> = case.args();
    let params = vec![(a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone()), (a[4].clone(), a[5].clone())];
    (named("params", params), named("images", a[6].clone()), named("labels", a[7].clone()))
}

#[test]
fn cnn_matches_jax() {
    let case = Case::load("cnn");
    case.assert_matches(|(params, images, labels)| cnn_loss(params, images, labels), &cnn_args(&case));
}
