//! `vit_patch_embed` (remat's own case, `tests/data/zoo/gen_more.py`): ViT patches by
//! reshape and transpose, a linear patch embedding, a class token, a positional
//! embedding, one attention layer, classification from the class token.
//!
//! ```python
//! def vit(params, img, labels, P=4):
//!     wpatch, cls, pos, (g, b), wqkv, wo, whead = params
//!     B, Hh, Ww, C = img.shape
//!     patches = img.reshape(B, Hh // P, P, Ww // P, P, C).transpose(0, 1, 3, 2, 4, 5).reshape(B, -1, P * P * C)
//!     tok = patches @ wpatch
//!     x = jnp.concatenate([jnp.broadcast_to(cls, (B, 1, tok.shape[-1])), tok], axis=1) + pos
//!     x = x + causal_attention(layernorm(x, g, b), wqkv, wo, n_heads=2)
//!     return xent_int(x[:, 0] @ whead, labels)
//! ```

use remat::numpy::concatenate;
use remat::trace::idx;
use remat::{named, Tensor};

use super::cnn::xent_int;
use super::common::Case;
use super::gpt_block::{causal_attention, layernorm};

/// `wpatch, cls, pos, (g, b), wqkv, wo, whead`.
pub type Params = (Tensor, Tensor, Tensor, (Tensor, Tensor), Tensor, Tensor, Tensor);

/// The classification loss of a one-layer ViT on `NHWC` images with 4x4 patches.
pub fn vit(params: Params, img: Tensor, labels: Tensor) -> Tensor {
    let p = 4;
    let (wpatch, cls, pos, (g, b), wqkv, wo, whead) = params;
    let [bs, hh, ww, c] = [img.shape()[0], img.shape()[1], img.shape()[2], img.shape()[3]].map(|d| d as isize);
    let patches =
        img.reshape(&[bs, hh / p, p, ww / p, p, c]).transpose(&[0, 1, 3, 2, 4, 5]).reshape(&[bs, -1, p * p * c]);
    let tok = patches.matmul(&wpatch);
    let d = tok.shape()[2];
    let x = concatenate(&[&cls.broadcast_to(&[bs as usize, 1, d]), &tok], 1) + &pos;
    let x = &x + causal_attention(&layernorm(&x, &g, &b), &wqkv, &wo, 2);
    xent_int(&x.index(idx![.., 0]).matmul(&whead), &labels)
}

#[test]
fn vit_patch_embed_matches_jax() {
    let case = Case::load("vit_patch_embed");
    let a = case.args();
    let params = (
        a[0].clone(),
        a[1].clone(),
        a[2].clone(),
        (a[3].clone(), a[4].clone()),
        a[5].clone(),
        a[6].clone(),
        a[7].clone(),
    );
    let args = (named("params", params), named("img", a[8].clone()), named("labels", a[9].clone()));
    case.assert_matches(|(params, img, labels)| vit(params, img, labels), &args);
}
