"""The sharded programs of issue 46 as JAX functions, for the Python package on JAX's
simulated 8-device CPU mesh (`XLA_FLAGS=--xla_force_host_platform_device_count=8`, set by
whoever imports this before JAX starts): the same eight programs as
tests/data/sharded/gen_sharded.py records (data-parallel `jit` with shardings,
tensor-parallel MLP and attention in `shard_map`, sequence parallelism with
`all_gather`/`psum_scatter`, a pipeline step with `ppermute`, a ZeRO-style step with
`with_sharding_constraint`, the other collectives without `check_vma`, `all_to_all`,
`all_gather_invariant` and `shard_alike`), at the same
sizes, with arguments drawn here (the memory does not depend on the values)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.shard_alike import shard_alike
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def meshes():
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
    pipe = jax.make_mesh((4,), ("stage",), axis_types=(AxisType.Auto,))
    return mesh, pipe


def _mlp_loss(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return jnp.sum((h @ w2) ** 2)


def programs():
    """name -> (loss function, arguments)."""
    mesh, pipe = meshes()
    rng = np.random.default_rng(46)

    def rnd(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ns(*spec):
        return NamedSharding(mesh, P(*spec))

    out = {}
    rep = ns()
    out["dp_mlp_jit"] = (
        jax.jit(_mlp_loss, in_shardings=(rep, rep, ns("data", None)), out_shardings=rep),
        (rnd(16, 32, scale=0.3), rnd(32, 8, scale=0.3), rnd(64, 16)),
    )

    def tp_body(w1, w2, x):
        return lax.psum(jnp.tanh(x @ w1) @ w2, "model")

    tp = jax.shard_map(tp_body, mesh=mesh, in_specs=(P(None, "model"), P("model", None), P("data", None)),
                       out_specs=P("data", None))
    out["tp_mlp_shard_map"] = (
        lambda w1, w2, x: jnp.sum(tp(w1, w2, x) ** 2),
        (rnd(16, 32, scale=0.3), rnd(32, 8, scale=0.3), rnd(64, 16)),
    )

    def attn_body(wq, wk, wv, wo, x):
        b, s, d = x.shape
        hd = wq.shape[1]
        heads = hd // 4
        q = (x @ wq).reshape(b, s, heads, 4)
        k = (x @ wk).reshape(b, s, heads, 4)
        v = (x @ wv).reshape(b, s, heads, 4)
        p = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) * np.float32(0.5), axis=-1)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, s, hd)
        return lax.psum(o @ wo, "model")

    attn = jax.shard_map(attn_body, mesh=mesh,
                         in_specs=(P(None, "model"), P(None, "model"), P(None, "model"), P("model", None),
                                   P("data", None, None)),
                         out_specs=P("data", None, None))
    out["tp_attention_shard_map"] = (
        lambda wq, wk, wv, wo, x: jnp.sum(jnp.tanh(attn(wq, wk, wv, wo, x))),
        (rnd(8, 16, scale=0.3), rnd(8, 16, scale=0.3), rnd(8, 16, scale=0.3), rnd(16, 8, scale=0.3), rnd(8, 6, 8)),
    )

    def sp_body(w1, w2, x):
        xs = lax.all_gather(x, "model", axis=0, tiled=True)
        return lax.psum_scatter(jnp.tanh(xs @ w1) @ w2, "model", scatter_dimension=0, tiled=True)

    sp = jax.shard_map(sp_body, mesh=mesh, in_specs=(P(None, "model"), P("model", None), P(("data", "model"), None)),
                       out_specs=P(("data", "model"), None))
    out["sp_gather_scatter"] = (
        lambda w1, w2, x: jnp.sum(sp(w1, w2, x) ** 2),
        (rnd(8, 16, scale=0.3), rnd(16, 8, scale=0.3), rnd(32, 8)),
    )

    def pipe_body(w, x):
        y = jnp.tanh(x @ w[0])
        return lax.ppermute(y, "stage", perm=[(i, (i + 1) % 4) for i in range(4)])

    stage = jax.shard_map(pipe_body, mesh=pipe, in_specs=(P("stage"), P("stage")), out_specs=P("stage"))
    out["pipeline_ppermute"] = (
        lambda w, x: jnp.sum(stage(w, stage(w, x)) ** 2),
        (rnd(4, 8, 8, scale=0.4), rnd(16, 8)),
    )

    def zero_step(w, m, x):
        gr = jax.grad(_mlp_loss, argnums=(0, 1))(w[0], w[1], x)
        new = []
        for wi, mi, gi in zip(w, m, gr):
            spec = ns(*(("data",) + (None,) * (wi.ndim - 1)))
            mi = jax.lax.with_sharding_constraint(np.float32(0.9) * mi + gi, spec)
            new.append(jax.lax.with_sharding_constraint(wi - np.float32(0.05) * mi, spec))
        return _mlp_loss(new[0], new[1], x)

    out["zero_optimizer_step"] = (
        jax.jit(zero_step, in_shardings=((ns(), ns()), (ns("data", None), ns("data", None)), ns("data", None))),
        ((rnd(16, 32, scale=0.3), rnd(32, 8, scale=0.3)), (rnd(16, 32, scale=0.1), rnd(32, 8, scale=0.1)), rnd(64, 16)),
    )

    def coll_body(a):
        s = jax.lax.stop_gradient(a)
        b = lax.psum(a * a, ("data", "model"))
        c = lax.pmax(s, "model") + lax.pmin(s, "data")
        i = lax.axis_index("model").astype(jnp.float32)
        return jnp.sin(b) + c * i * a

    coll = jax.shard_map(coll_body, mesh=mesh, in_specs=P("data", "model"), out_specs=P("data", "model"),
                         check_vma=False)
    out["collectives_unchecked"] = (lambda a: jnp.sum(coll(a) ** 2), (rnd(16, 8),))

    def more_body(a, w):
        y = lax.all_to_all(a, "model", split_axis=1, concat_axis=0, tiled=True)
        g = lax.all_gather(w, "model", axis=0, tiled=True, to="invarying")
        return jnp.tanh(y) @ g[:2, :2]

    more = jax.shard_map(more_body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)),
                         out_specs=P("data", "model"))

    def collectives_more(a, w):
        a2, a3 = shard_alike(a, a * np.float32(2.0))
        return jnp.sum(more(a2 + a3, w) ** 2)

    out["collectives_more"] = (collectives_more, (rnd(16, 8), rnd(8, 4, scale=0.5)))
    return out
