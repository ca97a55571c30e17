//! `label_smoothing` (remat's own case, `tests/data/zoo/gen_more.py`): a classifier with
//! label-smoothed `one_hot` targets and a `log_softmax` cross-entropy.
//!
//! ```python
//! def label_smoothing(params, x, labels, eps=0.1):
//!     (w1, b1), (w2, b2) = params
//!     logits = jax.nn.gelu(x @ w1 + b1) @ w2 + b2
//!     n = logits.shape[-1]
//!     target = jax.nn.one_hot(labels, n) * (1 - eps) + eps / n
//!     return -jnp.mean(jnp.sum(target * jax.nn.log_softmax(logits), axis=-1))
//! ```

use remat::{named, nn, DType, Tensor};

use super::common::Case;

/// The smoothed cross-entropy of a two-layer gelu classifier.
pub fn label_smoothing(params: Vec<(Tensor, Tensor)>, x: Tensor, labels: Tensor) -> Tensor {
    let eps = 0.1;
    let [(w1, b1), (w2, b2)]: [(Tensor, Tensor); 2] = params.try_into().expect("two layers");
    let logits = nn::gelu(&(x.matmul(&w1) + &b1)).matmul(&w2) + &b2;
    let n = logits.shape()[logits.ndim() - 1];
    let target = nn::one_hot(&labels, n, DType::F32) * (1.0 - eps) + eps / n as f64;
    -(target * nn::log_softmax(&logits, -1)).sum_axes(&[-1], false).mean()
}

#[test]
fn label_smoothing_matches_jax() {
    let case = Case::load("label_smoothing");
    let a = case.args();
    let params = vec![(a[0].clone(), a[1].clone()), (a[2].clone(), a[3].clone())];
    let args = (named("params", params), named("x", a[4].clone()), named("labels", a[5].clone()));
    case.assert_matches(|(params, x, labels)| label_smoothing(params, x, labels), &args);
}
