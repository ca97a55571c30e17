//! `vae_reparam` (remat's own case, `tests/data/zoo/gen_more.py`): a VAE: an encoder to
//! mean and log-variance, `jax.random.normal` noise from a raw key argument, the
//! reparameterised sample, a decoder and the KL term.
//!
//! ```python
//! def vae(params, x, rng):
//!     (we, be), (wmu, wlv), (wd, bd), wout = params
//!     h = jnp.tanh(x @ we + be)
//!     mu, logvar = h @ wmu, h @ wlv
//!     eps = jax.random.normal(rng, mu.shape)
//!     zz = mu + jnp.exp(0.5 * logvar) * eps
//!     rec = jnp.tanh(zz @ wd + bd) @ wout
//!     kl = -0.5 * jnp.mean(jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), axis=-1))
//!     return jnp.mean((rec - x) ** 2) + kl
//! ```

use remat::{named, random, DType, Tensor};

use super::common::Case;

/// `(we, be), (wmu, wlv), (wd, bd), wout`.
pub type Params = ((Tensor, Tensor), (Tensor, Tensor), (Tensor, Tensor), Tensor);

/// The negative evidence lower bound (reconstruction error plus KL); `rng` is a raw
/// `u32[2]` key.
pub fn vae(params: Params, x: Tensor, rng: Tensor) -> Tensor {
    let ((we, be), (wmu, wlv), (wd, bd), wout) = params;
    let h = (x.matmul(&we) + &be).tanh();
    let (mu, logvar) = (h.matmul(&wmu), h.matmul(&wlv));
    let eps = random::normal(&rng, mu.shape(), DType::F32);
    let half_logvar: Tensor = 0.5 * &logvar;
    let zz = &mu + half_logvar.exp() * eps;
    let rec = (zz.matmul(&wd) + &bd).tanh().matmul(&wout);
    let one_plus: Tensor = 1.0 + &logvar;
    let kl = -0.5 * (one_plus - mu.powi(2) - logvar.exp()).sum_axes(&[-1], false).mean();
    (rec - &x).powi(2).mean() + kl
}

#[test]
fn vae_reparam_matches_jax() {
    let case = Case::load("vae_reparam");
    let a = case.args();
    let pair = |i: usize| (a[i].clone(), a[i + 1].clone());
    let params = (pair(0), pair(2), pair(4), a[6].clone());
    let args = (named("params", params), named("x", a[7].clone()), named("rng", a[8].clone()));
    case.assert_matches(|(params, x, rng)| vae(params, x, rng), &args);
}
