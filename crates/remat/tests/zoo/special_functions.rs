//! `special_functions`: logsumexp, softplus, erf_inv, lgamma, digamma, clip, rem, floor,
//! round, sign, expm1, log1p, pow (float exponent, scalar and array), atan2, and NaN-safe
//! double-`where` patterns. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def special_functions(x, y):
//!     pos = jnp.abs(x) + 0.5
//!     t = jnp.tanh(x) * 0.9
//!     r = jax.nn.logsumexp(x, axis=-1).sum() + jax.nn.softplus(y).sum()
//!     r += jnp.sum(jax.scipy.special.erfinv(t)) + jnp.sum(jax.scipy.special.gammaln(pos)) + jnp.sum(jax.scipy.special.digamma(pos))
//!     r += jnp.sum(jnp.clip(x, -0.5, 0.7) * y) + jnp.sum(lax.rem(x * 3.0, 1.3) * y) + jnp.sum(jnp.floor(x * 2) * y)
//!     r += jnp.sum(jnp.round(x * 3) * y) + jnp.sum(jnp.sign(x) * y) + jnp.sum(jnp.expm1(t)) + jnp.sum(jnp.log1p(pos))
//!     r += jnp.sum(pos ** 2.5) + jnp.sum(jnp.power(pos, y)) + jnp.sum(jnp.arctan2(x, y))
//!     safe = jnp.where(x > 0, x, 1.0)
//!     r += jnp.sum(jnp.where(x > 0, jnp.sqrt(safe) * jnp.log(safe), 0.0))          # NaN-safe where
//!     r += jnp.sum(jnp.where(jnp.abs(y) > 1e-3, jnp.sin(y) / jnp.where(jnp.abs(y) > 1e-3, y, 1.0), 1.0))
//!     return r
//! ```

use remat::numpy::{self, where_};
use remat::{lax, named, nn, Tensor};

use super::common::Case;

/// The sum of every special function's reduction.
pub fn special_functions(x: Tensor, y: Tensor) -> Tensor {
    let pos = x.abs() + 0.5;
    let t = x.tanh() * 0.9;
    let mut r = nn::logsumexp(&x, Some(&[-1]), false).sum() + nn::softplus(&y).sum();
    r = r + (t.erf_inv().sum() + pos.lgamma().sum() + pos.digamma().sum());
    r = r + ((x.clip(-0.5, 0.7) * &y).sum() + (lax::rem(&x * 3.0, 1.3) * &y).sum() + ((&x * 2.0).floor() * &y).sum());
    r = r + ((numpy::round(&(&x * 3.0)) * &y).sum() + (x.sign() * &y).sum() + t.expm1().sum() + pos.log1p().sum());
    r = r + (pos.pow(2.5).sum() + numpy::power(&pos, &y).sum() + numpy::arctan2(&x, &y).sum());
    let safe = where_(&x.gt(0.0), &x, 1.0);
    r = r + where_(&x.gt(0.0), safe.sqrt() * safe.log(), 0.0).sum();
    let small = |y: &Tensor| y.abs().gt(1e-3);
    r + where_(&small(&y), y.sin() / where_(&small(&y), &y, 1.0), 1.0).sum()
}

#[test]
fn special_functions_matches_jax() {
    let case = Case::load("special_functions");
    let a = case.args();
    let args = (named("x", a[0].clone()), named("y", a[1].clone()));
    case.assert_matches(|(x, y)| special_functions(x, y), &args);
}
