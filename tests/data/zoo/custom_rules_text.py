"""Why a custom rule cannot be matched from the jaxpr text: two functions whose
`custom_jvp` (or `custom_vjp`) rules differ print the same text under JAX 0.10.2 (the text
names a rule, `jvp=_safe_log_jvp`, `bwd=_bwd`, and nothing more) but have different
gradients and save different residuals. Run: python3 tests/data/zoo/custom_rules_text.py
(docs/real_models.md quotes its output)."""
import jax, jax.numpy as jnp
from jax.ad_checkpoint import print_saved_residuals

def make_jvp(scale):
    @jax.custom_jvp
    def safe_log(x):
        return jnp.log(jnp.maximum(x, 1e-6))
    def _safe_log_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return safe_log(x), t / jnp.maximum(x, 1e-6) * scale
    safe_log.defjvp(_safe_log_jvp)
    return safe_log

def make_vjp(clip):
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)
    def _fwd(x):
        return jnp.sin(x), jnp.cos(x)
    def _bwd(c, g):
        return (jnp.clip(g * c, -clip, clip),)
    f.defvjp(_fwd, _bwd)
    return f

x = jnp.linspace(0.5, 2.0, 6).astype(jnp.float32)
a, b = make_jvp(1.0), make_jvp(2.0)
la = lambda x: jnp.sum(a(x) ** 2)
lb = lambda x: jnp.sum(b(x) ** 2)
ta, tb = str(jax.make_jaxpr(la)(x)), str(jax.make_jaxpr(lb)(x))
print("custom_jvp texts equal:", ta == tb)
print(ta)
print("grad a:", jax.grad(la)(x)[:3])
print("grad b:", jax.grad(lb)(x)[:3])

c, d = make_vjp(0.1), make_vjp(10.0)
lc = lambda x: jnp.sum(c(x) * 3.0)
ld = lambda x: jnp.sum(d(x) * 3.0)
tc, td = str(jax.make_jaxpr(lc)(x)), str(jax.make_jaxpr(ld)(x))
print("custom_vjp texts equal:", tc == td)
print(tc)
print("grad c:", jax.grad(lc)(x)[:3])
print("grad d:", jax.grad(ld)(x)[:3])

# Residuals: two rules with the same text, different residuals.
def make_jvp2(save_div):
    @jax.custom_jvp
    def safe_log(x):
        return jnp.log(jnp.maximum(x, 1e-6))
    def _safe_log_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        if save_div:
            return safe_log(x), t / jnp.maximum(x, 1e-6)
        return safe_log(x), t * 0.0 + t
    safe_log.defjvp(_safe_log_jvp)
    return safe_log
e, g = make_jvp2(True), make_jvp2(False)
le = lambda x: jnp.sum(jnp.sin(e(x)))
lg = lambda x: jnp.sum(jnp.sin(g(x)))
print("texts equal:", str(jax.make_jaxpr(le)(x)) == str(jax.make_jaxpr(lg)(x)))
print("residuals e:"); print_saved_residuals(le, x)
print("residuals g:"); print_saved_residuals(lg, x)
