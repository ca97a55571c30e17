//! `einsum_zoo`: einsums with several batch and contracting dimensions, a three-operand
//! einsum (JAX's contraction order) and a batched outer product. The Python original
//! (`gen_zoo.py`):
//!
//! ```python
//! def einsum_zoo(a, b, c, d, e):
//!     r1 = jnp.einsum('bhqd,bhkd->bhqk', a, b)               # batch dims b,h; contract d
//!     r2 = jnp.einsum('abcd,cdef->abef', a, c)               # two contracting dims
//!     r3 = jnp.einsum('ij,jk,kl->il', d, e, d.T)             # three operands
//!     r4 = jnp.einsum('bhqk,bhkd->bqd', r1, b)               # contract k and h, batch b
//!     r5 = jnp.einsum('bi,bj->bij', d[:2], e[:2])            # outer product per batch
//!     return jnp.sum(r1 ** 2) + jnp.sum(jnp.sin(r2)) + jnp.sum(r3) + jnp.sum(r4 * r4) + jnp.sum(r5)
//! ```

use remat::numpy::einsum;
use remat::trace::idx;
use remat::{named, Tensor};

use super::common::Case;

/// The sum of the five einsums' reductions.
pub fn einsum_zoo(a: Tensor, b: Tensor, c: Tensor, d: Tensor, e: Tensor) -> Tensor {
    let r1 = einsum("bhqd,bhkd->bhqk", &[&a, &b]);
    let r2 = einsum("abcd,cdef->abef", &[&a, &c]);
    // Three operands: contracted in opt_einsum's order (`e` with `d` first, then `d.T`).
    let r3 = einsum("ij,jk,kl->il", &[&d, &e, &d.t()]);
    let r4 = einsum("bhqk,bhkd->bqd", &[&r1, &b]);
    let r5 = einsum("bi,bj->bij", &[&d.index(idx![..2]), &e.index(idx![..2])]);
    r1.powi(2).sum() + r2.sin().sum() + r3.sum() + (&r4 * &r4).sum() + r5.sum()
}

#[test]
fn einsum_zoo_matches_jax() {
    let case = Case::load("einsum_zoo");
    let a = case.args();
    let args = (
        named("a", a[0].clone()),
        named("b", a[1].clone()),
        named("c", a[2].clone()),
        named("d", a[3].clone()),
        named("e", a[4].clone()),
    );
    case.assert_matches(|(a, b, c, d, e)| einsum_zoo(a, b, c, d, e), &args);
}
