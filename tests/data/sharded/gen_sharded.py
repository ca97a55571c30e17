"""Records the sharded conformance cases of issue 46 from real JAX 0.10.2 on 8 simulated CPU
devices (XLA_FLAGS=--xla_force_host_platform_device_count=8, set here before JAX loads), in the
format of ../conformance (gen_cases.py's `run`: the printed jaxpr, outputs, a cotangent and its
vjp, JAX's saved residuals and forward/backward jaxprs), plus, per case, the program under two
checkpoint policies with JAX's saved residuals and XLA's per-device memory analysis of the
compiled value-and-grad (`jax.jit(...).lower(...).compile().memory_analysis()`), the bytes one
device holds of each saved residual (`residual_device_bytes`, from the vjp's residual arrays:
arguments as given, whole; values computed inside `jit` as XLA's partitioner laid them out;
`shard_map` residuals one block per device), and JAX's own
f32 error against the same program in f64 (`f32_error`: the largest absolute difference of the
outputs and of the gradients), which bounds how far another exact evaluation order may land.

    pip install jax==0.10.2
    python3 tests/data/sharded/gen_sharded.py tests/data/sharded
"""
import os, sys, json, zlib
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/conformance"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../primitives"))
import gen_cases as g
import gen_primitives as gp
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
from jax._src.ad_checkpoint import saved_residuals

g.CASES.clear()
g.fwd_bwd = gp.fwd_bwd_traced
assert jax.device_count() == 8, jax.devices()

MESH = jax.make_mesh((4, 2), ('data', 'model'), axis_types=(AxisType.Auto, AxisType.Auto))
PIPE = jax.make_mesh((4,), ('stage',), axis_types=(AxisType.Auto,))
def ns(*spec, mesh=MESH): return NamedSharding(mesh, P(*spec))

POLICIES = {
    "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "everything_saveable": jax.checkpoint_policies.everything_saveable,
}
# name -> (function of arrays, policies recorded with XLA's memory analysis)
SHARDED = {}
def case(name, args, desc, policies=("nothing_saveable", "dots_saveable")):
    def deco(make):
        fn = make(None)
        g.case(name, "sharded", args, desc)(fn)
        SHARDED[name] = (make, policies)
        return fn
    return deco

def ck(f, policy):
    return f if policy is None else jax.checkpoint(f, policy=POLICIES[policy])


# ---- 1. data parallel: jit with in_shardings --------------------------------------------
def mlp_loss(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return jnp.sum((h @ w2) ** 2)

@case("dp_mlp_jit", lambda: (g.rnd(16, 32, scale=.3), g.rnd(32, 8, scale=.3), g.rnd(64, 16)),
      "data-parallel MLP: jax.jit with in_shardings (weights replicated, the batch split over "
      "'data' of a 4x2 ('data', 'model') mesh) and out_shardings; shardings do not change values")
def dp_mlp_jit(policy):
    rep = ns()
    return jax.jit(ck(mlp_loss, policy), in_shardings=(rep, rep, ns('data', None)), out_shardings=rep)


# ---- 2. tensor parallel MLP in shard_map with psum ---------------------------------------
def tp_body(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return lax.psum(h @ w2, 'model')

@case("tp_mlp_shard_map", lambda: (g.rnd(16, 32, scale=.3), g.rnd(32, 8, scale=.3), g.rnd(64, 16)),
      "tensor-parallel MLP (Megatron style) in shard_map over a 4x2 mesh: w1 split by columns and "
      "w2 by rows over 'model', the batch over 'data', psum over 'model' (psum_invariant with "
      "check_vma), pvary where invariant values meet varying ones")
def tp_mlp_shard_map(policy):
    sm = jax.shard_map(ck(tp_body, policy), mesh=MESH,
                       in_specs=(P(None, 'model'), P('model', None), P('data', None)), out_specs=P('data', None))
    return lambda w1, w2, x: jnp.sum(sm(w1, w2, x) ** 2)


# ---- 3. attention block, heads split over 'model' ----------------------------------------
def attn_body(wq, wk, wv, wo, x):
    # x: [b, s, d] block; wq/wk/wv: [d, h*dh] split over heads; wo: [h*dh, d] split by rows
    b, s, d = x.shape
    hd = wq.shape[1]
    heads = hd // 4
    q = (x @ wq).reshape(b, s, heads, 4)
    k = (x @ wk).reshape(b, s, heads, 4)
    v = (x @ wv).reshape(b, s, heads, 4)
    logits = jnp.einsum('bqhd,bkhd->bhqk', q, k) * np.float32(0.5)
    p = jax.nn.softmax(logits, axis=-1)
    o = jnp.einsum('bhqk,bkhd->bqhd', p, v).reshape(b, s, hd)
    return lax.psum(o @ wo, 'model')

@case("tp_attention_shard_map",
      lambda: (g.rnd(8, 16, scale=.3), g.rnd(8, 16, scale=.3), g.rnd(8, 16, scale=.3), g.rnd(16, 8, scale=.3),
               g.rnd(8, 6, 8)),
      "attention block in shard_map: 4 heads of width 4, two per 'model' device (q/k/v projections "
      "split by columns, the output projection by rows, psum over 'model'), batch over 'data'")
def tp_attention_shard_map(policy):
    sm = jax.shard_map(ck(attn_body, policy), mesh=MESH,
                       in_specs=(P(None, 'model'), P(None, 'model'), P(None, 'model'), P('model', None),
                                 P('data', None, None)),
                       out_specs=P('data', None, None))
    return lambda wq, wk, wv, wo, x: jnp.sum(jnp.tanh(sm(wq, wk, wv, wo, x)))


# ---- 4. sequence parallel: all_gather then reduce_scatter ---------------------------------
def sp_body(w1, w2, x):
    # x: [s/8, d] block of the sequence; gather the sequence over 'model', compute, scatter back
    xs = lax.all_gather(x, 'model', axis=0, tiled=True)
    h = jnp.tanh(xs @ w1)
    y = h @ w2
    return lax.psum_scatter(y, 'model', scatter_dimension=0, tiled=True)

@case("sp_gather_scatter", lambda: (g.rnd(8, 16, scale=.3), g.rnd(16, 8, scale=.3), g.rnd(32, 8)),
      "sequence-parallel layer: the sequence split over ('data', 'model'); all_gather over 'model' "
      "(tiled), a column/row split MLP, psum_scatter back (reduce_scatter)")
def sp_gather_scatter(policy):
    sm = jax.shard_map(ck(sp_body, policy), mesh=MESH,
                       in_specs=(P(None, 'model'), P('model', None), P(('data', 'model'), None)),
                       out_specs=P(('data', 'model'), None))
    return lambda w1, w2, x: jnp.sum(sm(w1, w2, x) ** 2)


# ---- 5. pipeline step with ppermute --------------------------------------------------------
def pipe_body(w, x):
    # w: [1, d, d] this stage's weight; x: [mb, d] this stage's microbatch
    y = jnp.tanh(x @ w[0])
    return lax.ppermute(y, 'stage', perm=[(i, (i + 1) % 4) for i in range(4)])

@case("pipeline_ppermute", lambda: (g.rnd(4, 8, 8, scale=.4), g.rnd(16, 8)),
      "one pipeline step over a 4-stage mesh: each stage applies its layer to its microbatch and "
      "ppermute passes the result to the next stage (a ring)")
def pipeline_ppermute(policy):
    sm = jax.shard_map(ck(pipe_body, policy), mesh=PIPE, in_specs=(P('stage'), P('stage')), out_specs=P('stage'))
    def f(w, x):
        y = sm(w, x)
        y = sm(w, y)
        return jnp.sum(y ** 2)
    return f


# ---- 6. ZeRO-style sharded optimizer step --------------------------------------------------
def zero_step(w, m, x):
    gr = jax.grad(mlp_loss, argnums=(0, 1))(w[0], w[1], x)
    new = []
    for wi, mi, gi in zip(w, m, gr):
        spec = ns(*(('data',) + (None,) * (wi.ndim - 1)))
        mi = jax.lax.with_sharding_constraint(np.float32(0.9) * mi + gi, spec)
        wi = jax.lax.with_sharding_constraint(wi - np.float32(0.05) * mi, spec)
        new.append(wi)
    return mlp_loss(new[0], new[1], x)

@case("zero_optimizer_step",
      lambda: ((g.rnd(16, 32, scale=.3), g.rnd(32, 8, scale=.3)), (g.rnd(16, 32, scale=.1), g.rnd(32, 8, scale=.1)),
               g.rnd(64, 16)),
      "ZeRO-style step: momentum and the updated weights constrained to shards over 'data' "
      "(with_sharding_constraint), the batch split over 'data'; the loss after one step, "
      "differentiated (a gradient through a gradient step)")
def zero_optimizer_step(policy):
    return jax.jit(ck(zero_step, policy), in_shardings=((ns(), ns()), (ns('data', None), ns('data', None)), ns('data', None)))


# ---- 7. the other collectives, without check_vma --------------------------------------------
def coll_body(a):
    s = jax.lax.stop_gradient(a)
    b = lax.psum(a * a, ('data', 'model'))
    c = lax.pmax(s, 'model') + lax.pmin(s, 'data')
    i = lax.axis_index('model').astype(jnp.float32)
    return jnp.sin(b) + c * i * a

@case("collectives_unchecked", lambda: (g.rnd(16, 8),),
      "psum, pmax, pmin and axis_index in a shard_map with check_vma=False (psum binds psum, not "
      "psum_invariant; no aval carries varying axes); pmax and pmin act on a stop_gradient value "
      "(JAX 0.10.2 has no jvp for them). (pbroadcast is not here: JAX 0.10.2 has no CPU lowering "
      "for it, 'MLIR translation rule for primitive pbroadcast not found for platform cpu'.)")
def collectives_unchecked(policy):
    sm = jax.shard_map(ck(coll_body, policy), mesh=MESH, in_specs=P('data', 'model'), out_specs=P('data', 'model'),
                       check_vma=False)
    return lambda a: jnp.sum(sm(a) ** 2)


# ---- 8. all_to_all, all_gather_invariant and shard_alike -----------------------------------
def more_body(a, w):
    # a: [4, 4] block over ('data', 'model'); all_to_all over 'model' moves columns to rows
    y = lax.all_to_all(a, 'model', split_axis=1, concat_axis=0, tiled=True)
    g = lax.all_gather(w, 'model', axis=0, tiled=True, to='invarying')
    return jnp.tanh(y) @ g[:2, :2]

@case("collectives_more", lambda: (g.rnd(16, 8), g.rnd(8, 4, scale=.5)),
      "all_to_all (tiled, over 'model': a block's columns become rows), all_gather_invariant "
      "(lax.all_gather(..., to='invarying')) of a weight split over 'model', and shard_alike of "
      "the two arguments outside the shard_map")
def collectives_more(policy):
    from jax.experimental.shard_alike import shard_alike
    sm = jax.shard_map(ck(more_body, policy), mesh=MESH, in_specs=(P('data', 'model'), P('model', None)),
                       out_specs=P('data', 'model'))
    def f(a, w):
        a2, a3 = shard_alike(a, a * np.float32(2.0))
        return jnp.sum(sm(a2 + a3, w) ** 2)
    return f


def device_bytes(f, args):
    """The bytes one device holds of each residual `saved_residuals` lists for `f`, from the
    residual arrays themselves (the leaves of the vjp function): the largest addressable
    shard of each. The leaves hold the same residuals in an order of their own (a shard_map's
    forwarded output may come later), so each listed residual takes the first unused leaf of
    its shape."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    _, f_vjp = jax.vjp(lambda *l: f(*jax.tree_util.tree_unflatten(tree, l)), *leaves)
    res = [(tuple(r.shape), max(s.data.nbytes for s in r.addressable_shards)) for r in jax.tree_util.tree_leaves(f_vjp)]
    out = []
    for aval, _ in saved_residuals(f, *args):
        i = next(i for i, (shape, _) in enumerate(res) if shape == tuple(aval.shape))
        out.append(res.pop(i)[1])
    assert not res, res
    return out


def memory(f, args):
    leaves, tree = jax.tree_util.tree_flatten(args)
    def vg(*l):
        return jax.value_and_grad(lambda *l: f(*jax.tree_util.tree_unflatten(tree, l)), argnums=tuple(range(len(l))))(*l)
    m = jax.jit(vg).lower(*leaves).compile().memory_analysis()
    return dict(argument_size_in_bytes=m.argument_size_in_bytes, output_size_in_bytes=m.output_size_in_bytes,
                temp_size_in_bytes=m.temp_size_in_bytes, alias_size_in_bytes=m.alias_size_in_bytes,
                generated_code_size_in_bytes=m.generated_code_size_in_bytes)

def main(outdir):
    g.run("sharded", outdir)
    for c in g.CASES:
        name = c["name"]
        make, policies = SHARDED[name]
        g._key[0] = zlib.crc32(name.encode()) % 100000
        args = c["args"]()
        path = f"{outdir}/{name}.json"
        rec = json.load(open(path))
        rec["devices"] = jax.device_count()
        rec["xla_memory"] = memory(make(None), args)
        rec["residual_device_bytes"] = device_bytes(make(None), args)
        assert len(rec["residual_device_bytes"]) == len(rec["saved_residuals"]), name
        rec["policies"] = []
        for pol in policies:
            f = make(pol)
            res = saved_residuals(f, *args)
            rec["policies"].append(dict(
                policy=pol, jaxpr=str(jax.make_jaxpr(f)(*args)),
                saved_residuals=[dict(aval=str(a.str_short(short_dtypes=True)), kind=g.parse_res(d)[0],
                                      what=g.parse_res(d)[1]) for a, d in res],
                jax_saved_residuals_text=[f"{a.str_short(short_dtypes=True)} {g.strip_path(d)}" for a, d in res],
                residual_device_bytes=device_bytes(f, args),
                xla_memory=memory(f, args)))
            assert len(rec["policies"][-1]["residual_device_bytes"]) == len(res), (name, pol)
        with open(path, "w") as fh:
            json.dump(rec, fh, indent=1)
    # JAX's own f32 error, against the same program in f64: how far two exact-in-f32
    # evaluation orders (one device's sums and eight devices' partial sums) may differ.
    jax.config.update("jax_enable_x64", True)
    for c in g.CASES:
        name = c["name"]
        path = f"{outdir}/{name}.json"
        rec = json.load(open(path))
        args = [np.asarray(a["data"], np.float64).reshape(a["shape"]) for a in rec["args"]]
        cts = [np.asarray(a["data"], np.float64).reshape(a["shape"]) for a in rec["cotangents"]]
        leaves, tree = jax.tree_util.tree_flatten(c["args"]())
        f = SHARDED[name][0](None)
        flat = lambda *l: jax.tree_util.tree_leaves(f(*jax.tree_util.tree_unflatten(tree, l)))
        outs, vjp = jax.vjp(flat, *args)
        grads = vjp(cts)
        err = lambda got, want: max(float(np.max(np.abs(np.asarray(a["data"]).reshape(a["shape"]) - np.asarray(b))))
                                    for a, b in zip(got, want))
        rec["f32_error"] = dict(outputs=err(rec["outputs"], outs), grads=err(rec["grads"], grads))
        with open(path, "w") as fh:
            json.dump(rec, fh, indent=1)
    jax.config.update("jax_enable_x64", False)

if __name__ == "__main__":
    main(sys.argv[1])
