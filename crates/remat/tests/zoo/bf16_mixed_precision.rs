//! `bf16_mixed_precision`: `f32` master weights cast to `bf16` for matrix products that
//! accumulate in `f32` (`preferred_element_type`), a `bf16` input, an `int8`-quantized
//! weight with an `f32` scale, an `f16` side path and an `f32` loss. The Python original
//! (`gen_zoo.py`):
//!
//! ```python
//! def mixed_precision(params, x, wq, qscale, y):
//!     (W1, b1), (W2, b2) = params
//!     h = jnp.dot(x.astype(bf16), W1.astype(bf16), preferred_element_type=f32) + b1
//!     h = jax.nn.relu(h).astype(bf16)
//!     wdq = (wq.astype(f32) * qscale).astype(bf16)                        # int8-quantized layer
//!     h = jax.nn.gelu(jnp.dot(h, wdq, preferred_element_type=f32)).astype(bf16)
//!     out = jnp.dot(h, W2.astype(bf16), preferred_element_type=f32) + b2
//!     side = jnp.sum(jnp.tanh((x[:, :4] * 0.5).astype(f16)).astype(f32))  # an f16 path
//!     return jnp.mean((out - y) ** 2) + 1e-2 * side
//! ```

use remat::trace::idx;
use remat::{named, nn, DType, Tensor};

use super::common::Case;

/// `(W, b)` of each dense layer, in `f32`.
pub type Params = Vec<(Tensor, Tensor)>;

/// The loss; `x` is `bf16`, `wq` `i8`, `qscale` an `f32` scalar.
pub fn mixed_precision(params: Params, x: Tensor, wq: Tensor, qscale: Tensor, y: Tensor) -> Tensor {
    let [(w1, b1), (w2, b2)]: [(Tensor, Tensor); 2] = params.try_into().expect("two layers");
    let (bf16, f32) = (DType::BF16, DType::F32);
    let h = x.astype(bf16).dot_preferred(&w1.astype(bf16), f32) + &b1;
    let h = nn::relu(&h).astype(bf16);
    let wdq = (wq.astype(f32) * &qscale).astype(bf16);
    let h = nn::gelu(&h.dot_preferred(&wdq, f32)).astype(bf16);
    let out = h.dot_preferred(&w2.astype(bf16), f32) + &b2;
    let side = (x.index(idx![.., ..4]) * 0.5).astype(DType::F16).tanh().astype(f32).sum();
    (out - &y).powi(2).mean() + 1e-2 * side
}

#[test]
fn bf16_mixed_precision_matches_jax() {
    let case = Case::load("bf16_mixed_precision");
    let a = case.args();
    let params = vec![(a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone())];
    let args = (
        named("params", params),
        named("x", a[4].clone()),
        named("wq", a[5].clone()),
        named("qscale", a[6].clone()),
        named("y", a[7].clone()),
    );
    case.assert_matches(|(params, x, wq, qscale, y)| mixed_precision(params, x, wq, qscale, y), &args);
}
