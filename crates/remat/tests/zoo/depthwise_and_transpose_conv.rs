//! `depthwise_and_transpose_conv`: a depthwise convolution (`feature_group_count`), a
//! stride-2 pointwise convolution, a transposed convolution (`lhs_dilation`) and an atrous
//! depthwise convolution (`rhs_dilation`). The Python original (`gen_zoo.py`):
//!
//! ```python
//! def depthwise_transpose(wd, wp, wt, x):
//!     C = x.shape[-1]
//!     h = conv(x, wd, 1, feature_group_count=C)                        # depthwise 3x3
//!     h = jax.nn.relu(conv(h, wp, 2))                                    # pointwise, stride 2
//!     up = lax.conv_general_dilated(h, wt, (1, 1), ((1, 2), (1, 2)), lhs_dilation=(2, 2), dimension_numbers=DN)  # transposed conv
//!     at = conv(x, wd, 1, rhs_dilation=(2, 2), feature_group_count=C)  # atrous depthwise
//!     return jnp.mean((up - x) ** 2) + jnp.mean(at ** 2)
//! ```

use remat::lax::{self, ConvOptions, Padding};
use remat::{named, nn, Tensor};

use super::cnn::conv;
use super::common::Case;

fn nhwc() -> ConvOptions {
    ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC")
}

/// The loss: the transposed convolution's reconstruction error plus the atrous branch's
/// energy.
pub fn depthwise_transpose(wd: Tensor, wp: Tensor, wt: Tensor, x: Tensor) -> Tensor {
    let c = x.shape()[3];
    let depthwise = ConvOptions { feature_group_count: c, ..nhwc() };
    let h = lax::conv_general_dilated(&x, &wd, &[1, 1], Padding::Same, depthwise.clone());
    let h = nn::relu(&conv(&h, &wp, 2));
    let transposed = ConvOptions { lhs_dilation: Some(vec![2, 2]), ..nhwc() };
    let up = lax::conv_general_dilated(&h, &wt, &[1, 1], Padding::Explicit(vec![(1, 2), (1, 2)]), transposed);
    let atrous = ConvOptions { rhs_dilation: Some(vec![2, 2]), ..depthwise };
    let at = lax::conv_general_dilated(&x, &wd, &[1, 1], Padding::Same, atrous);
    (up - &x).powi(2).mean() + at.powi(2).mean()
}

#[test]
fn depthwise_and_transpose_conv_matches_jax() {
    let case = Case::load("depthwise_and_transpose_conv");
    let a = case.args();
    let args =
        (named("wd", a[0].clone()), named("wp", a[1].clone()), named("wt", a[2].clone()), named("x", a[3].clone()));
    case.assert_matches(|(wd, wp, wt, x)| depthwise_transpose(wd, wp, wt, x), &args);
}
