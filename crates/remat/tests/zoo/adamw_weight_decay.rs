//! `adamw_weight_decay`: an AdamW step (bias-corrected moments, decoupled weight decay, an
//! `i32` step counter) around a gradient taken inside the step. The Python original
//! (`tests/data/zoo/gen_more.py`, `mlp_loss` as in `grad_clip_global_norm`):
//!
//! ```python
//! def adamw_step(params, m, v, x, y, step, lr=1e-2, b1=0.9, b2=0.999, wd=1e-2):
//!     loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
//!     t = step + 1
//!     m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
//!     v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
//!     c1, c2 = 1 - b1 ** t.astype(f32), 1 - b2 ** t.astype(f32)
//!     new = jax.tree_util.tree_map(lambda p, m, v: p - lr * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + wd * p), params, m, v)
//!     return loss, new, m, v
//! ```

use remat::{named, numpy, value_and_grad, Array, DType, Tensor};

use super::common::Case;
use super::grad_clip_global_norm::{mlp_loss, Params};

/// `params` with `f` applied to each leaf and the matching leaf of `other`.
fn zip_with(params: &Params, other: &Params, f: impl Fn(&Tensor, &Tensor) -> Tensor) -> Params {
    params.iter().zip(other).map(|((a0, a1), (b0, b1))| (f(a0, b0), f(a1, b1))).collect()
}

/// One AdamW step: `(loss, params, m, v)` after it.
#[allow(clippy::type_complexity)]
pub fn adamw_step(
    (params, m, v, x, y, step): (Params, Params, Params, Tensor, Tensor, Tensor),
) -> (Tensor, Params, Params, Params) {
    let (lr, b1, b2, wd) = (1e-2, 0.9, 0.999, 1e-2);
    let (loss, g) = value_and_grad(|p: Params| mlp_loss(&p, &x, &y)).value_and_trace_tree(&params);
    let t = step + 1;
    let m = zip_with(&m, &g, |m, g| b1 * m + (1.0 - b1) * g);
    let v = zip_with(&v, &g, |v, g| b2 * v + (1.0 - b2) * g * g);
    let c1 = 1.0 - numpy::power(b1, t.astype(DType::F32));
    let c2 = 1.0 - numpy::power(b2, t.astype(DType::F32));
    let upd = |p: &Tensor, m: &Tensor, v: &Tensor| p - lr * ((m / &c1) / ((v / &c2).sqrt() + 1e-8) + wd * p);
    let new = params.iter().zip(&m).zip(&v).map(|(((p0, p1), (m0, m1)), (v0, v1))| (upd(p0, m0, v0), upd(p1, m1, v1)));
    (loss, new.collect(), m, v)
}

#[test]
fn adamw_weight_decay_matches_jax() {
    let case = Case::load("adamw_weight_decay");
    let a: Vec<Array> = case.args();
    let tree = |i: usize| vec![(a[i].clone(), a[i + 1].clone()), (a[i + 2].clone(), a[i + 3].clone())];
    let args = (
        named("params", tree(0)),
        named("m", tree(4)),
        named("v", tree(8)),
        named("x", a[12].clone()),
        named("y", a[13].clone()),
        named("step", a[14].clone()),
    );
    case.assert_matches(adamw_step, &args);
}
