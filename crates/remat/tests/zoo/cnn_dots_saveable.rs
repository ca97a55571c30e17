//! `cnn_dots_saveable`: the `cnn` model under `jax.checkpoint(cnn_loss,
//! policy=jax.checkpoint_policies.dots_saveable)`: its backward pass recomputes everything
//! but the convolutions and matrix products.

use remat::{checkpoint, Policy};

use super::cnn::{cnn_args, cnn_loss, Params};
use super::common::Case;

#[test]
fn cnn_dots_saveable_matches_jax() {
    let case = Case::load("cnn_dots_saveable");
    let loss =
        checkpoint(|(params, images, labels): (Params, remat::Tensor, remat::Tensor)| cnn_loss(params, images, labels))
            .policy(Policy::DotsSaveable { only_if_no_batch_dims: false });
    case.assert_matches(|args| loss.call(args), &cnn_args(&case));
}
