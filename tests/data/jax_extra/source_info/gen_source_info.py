"""Texts JAX 0.10.2 prints with `pretty_print(source_info=True, name_stack=False)`, beside
the plain text of the same jaxpr: the form the Python package hands to the parser, whose
`# file:line:col (function)` comments give each equation its source. Run here:
`python3 gen_source_info.py`."""
import jax, jax.numpy as jnp
from jax import lax


def one_line(x):
    return jnp.cos(jnp.sin(x))


def nested(x):
    return jax.jit(lambda y: jnp.cos(jnp.sin(y)))(x) * 2


g = jax.jit(lambda a: jnp.sin(a) * 2)


def loop(x):
    y = g(x) + g(x * 3)
    return lax.fori_loop(0, 2, lambda i, acc: acc + y[i], 0.0) + jnp.where(x > 0, 1., 0.).sum()


for name, f, arg in [('one_line', one_line, 1.0), ('nested', nested, 1.0), ('loop', loop, jnp.ones(3))]:
    j = jax.make_jaxpr(f)(arg)
    with open(f'{name}.src.txt', 'w') as fh:
        fh.write(j.pretty_print(source_info=True, name_stack=False))
    with open(f'{name}.txt', 'w') as fh:
        fh.write(str(j))
