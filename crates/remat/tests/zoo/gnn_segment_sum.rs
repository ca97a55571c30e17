//! `gnn_segment_sum` (remat's own case, `tests/data/zoo/gen_more.py`): graph message
//! passing: node features gathered by edge source, `jax.ops.segment_sum` to the edge
//! targets (a scatter-add), degree normalisation, node classification.
//!
//! ```python
//! def gnn(params, feats, src, dst, labels):
//!     w1, w2, wout = params
//!     n = feats.shape[0]
//!     msg = feats[src] @ w1                                              # gather by edge source
//!     agg = jax.ops.segment_sum(msg, dst, num_segments=n)                # scatter-add to targets
//!     deg = jax.ops.segment_sum(jnp.ones_like(dst, dtype=f32), dst, num_segments=n)
//!     h = jax.nn.relu(agg / jnp.maximum(deg, 1.0)[:, None] + feats @ w2)
//!     return xent_int(h @ wout, labels)
//! ```

use remat::numpy::{maximum, ones};
use remat::trace::{idx, NEW_AXIS};
use remat::{named, nn, ops, DType, Tensor};

use super::cnn::xent_int;
use super::common::Case;

/// The loss; `src`, `dst` are `i32` edge endpoints, `labels` `i32` node classes.
pub fn gnn(params: Vec<Tensor>, feats: Tensor, src: Tensor, dst: Tensor, labels: Tensor) -> Tensor {
    let [w1, w2, wout]: [Tensor; 3] = params.try_into().expect("three weights");
    let n = feats.shape()[0];
    let msg = feats.index_array(&src).matmul(&w1);
    let agg = ops::segment_sum(&msg, &dst, n);
    let deg = ops::segment_sum(&ones(dst.shape(), DType::F32), &dst, n);
    let h = nn::relu(&(agg / maximum(&deg, 1.0).index(idx![.., NEW_AXIS]) + feats.matmul(&w2)));
    xent_int(&h.matmul(&wout), &labels)
}

#[test]
fn gnn_segment_sum_matches_jax() {
    let case = Case::load("gnn_segment_sum");
    let a = case.args();
    let args = (
        named("params", a[..3].to_vec()),
        named("feats", a[3].clone()),
        named("src", a[4].clone()),
        named("dst", a[5].clone()),
        named("labels", a[6].clone()),
    );
    case.assert_matches(|(params, feats, src, dst, labels)| gnn(params, feats, src, dst, labels), &args);
}
