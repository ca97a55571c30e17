//! `control_flow_while` (forward only): `lax.while_loop` with a data-dependent trip count
//! (Newton's method for `sqrt`), an `i32` counter carried from the literal `jnp.int32(0)`
//! and returned. The Python original (`gen_zoo.py`):
//!
//! ```python
//! def while_newton(a, x0):
//!     # sqrt(a) by Newton's method until converged: data-dependent trip count
//!     def cond(s): x, i = s; return (jnp.max(jnp.abs(x * x - a)) > 1e-5) & (i < 50)
//!     def body(s): x, i = s; return 0.5 * (x + a / x), i + 1
//!     x, n = lax.while_loop(cond, body, (x0, jnp.int32(0)))
//!     return x, n
//! ```

use remat::numpy::int32;
use remat::{lax, named, Tensor};

use super::common::Case;

/// `(sqrt(a), the number of Newton steps)`.
pub fn while_newton(a: Tensor, x0: Tensor) -> (Tensor, Tensor) {
    let cond = |(x, i): (Tensor, Tensor)| (&x * &x - &a).abs().max().gt(1e-5) & i.lt(50);
    let body = |(x, i): (Tensor, Tensor)| (0.5 * (&x + &a / &x), i + 1);
    lax::while_loop(cond, body, (x0, int32(0)))
}

#[test]
fn control_flow_while_matches_jax() {
    let case = Case::load("control_flow_while");
    let a = case.args();
    let args = (named("a", a[0].clone()), named("x0", a[1].clone()));
    case.assert_matches(|(a, x0)| while_newton(a, x0), &args);
}
