"""The oracle for crates/trace/tests/einsum.rs: what JAX 0.10.2 records and computes for
`jnp.einsum` of one to eight operands, and the contraction paths opt_einsum (the version
JAX imports) chooses.

- "cases": each a small program over fixed pseudo-random arguments; the printed jaxpr, the
  outputs and, where marked, the gradient of the output's sum. The Rust test traces its
  twin (same name) and compares the text character for character, the values within 1e-4.
- "random_cases": random einsums of up to six operands (repeated letters, size-1 axes,
  implicit outputs, every `optimize`): the subscripts, arguments, text and outputs.
- "paths": random contractions (3 to 16 operands, sizes drawn from a few values so that
  costs tie often) with the path and the steps' equations `opt_einsum.contract_path`
  returns for each `optimize` JAX accepts (`False` is JAX's `Unoptimized`): the path and
  each step's equation.
- "pysets": Python's iteration order of `set(range(n))` after random `(s - {i, j}) | {k}`
  steps: the order opt_einsum's `optimal` and branch-and-bound searches walk pairs in.

    python3 crates/trace/tests/data/gen_einsum.py > crates/trace/tests/data/einsum_oracle.json
"""
import json
import random
import numpy as np
import jax, jax.numpy as jnp
import opt_einsum
from jax._src.numpy.einsum import Unoptimized
jax.config.update('jax_platform_name', 'cpu')

rng = np.random.RandomState(0)
def f32(*s): return rng.standard_normal(s).astype(np.float32)
def i32(*s): return rng.randint(-3, 4, size=s).astype(np.int32)

CASES = {}
def c(name, spec, *args, grad=False, **kw):
    CASES[name] = (spec, args, grad, kw)

# Chains: the cheap end first (opt_einsum's docstring), ties between equal orders.
c("chain3_cheap_end_first", "ij,jk,kl->il", f32(2, 3), f32(3, 10), f32(10, 5), grad=True)
c("chain3_cheap_start_first", "ij,jk,kl->il", f32(10, 3), f32(3, 2), f32(2, 5))
c("chain3_square_tie", "ij,jk,kl->il", f32(3, 3), f32(3, 3), f32(3, 3))
c("chain4_docstring", "ij,jk,kl,lm->im", f32(2, 2), f32(2, 3), f32(3, 2), f32(2, 3), grad=True)
c("chain4_square_tie", "ij,jk,kl,lm->im", f32(3, 3), f32(3, 3), f32(3, 3), f32(3, 3))
c("chain5_branch_all", "ab,bc,cd,de,ef->af", f32(2, 6), f32(6, 3), f32(3, 5), f32(5, 2), f32(2, 4))
c("chain6_branch_all", "ab,bc,cd,de,ef,fg->ag", f32(4, 2), f32(2, 5), f32(5, 3), f32(3, 3), f32(3, 6), f32(6, 2))
c("chain7_branch_2", "ab,bc,cd,de,ef,fg,gh->ah", f32(3, 2), f32(2, 4), f32(4, 2), f32(2, 5), f32(5, 3), f32(3, 2), f32(2, 3))
c("chain8_branch_2", "ab,bc,cd,de,ef,fg,gh,hi->ai", *[f32(3, 3) for _ in range(8)])
# The zoo's three-operand einsum (einsum_zoo: d, e, d.T).
_d, _e = f32(4, 4), f32(4, 4)
c("zoo_three_operands", "ij,jk,kl->il", _d, _e, np.ascontiguousarray(_d.T))
# Attention: two operands, and three (scores times values, no softmax).
c("attention_scores", "bhqd,bhkd->bhqk", f32(2, 2, 3, 4), f32(2, 2, 5, 4), grad=True)
c("attention_three", "bhqd,bhkd,bhkv->bhqv", f32(2, 2, 3, 4), f32(2, 2, 5, 4), f32(2, 2, 5, 3), grad=True)
c("batched_chain", "bij,bjk,bkl->bil", f32(2, 3, 4), f32(2, 4, 5), f32(2, 5, 2))
c("batched_chain4", "bij,bjk,bkl,blm->bmi", f32(2, 3, 4), f32(2, 4, 2), f32(2, 2, 5), f32(2, 5, 3))
# Ellipses, implicit outputs, output orders.
c("ellipsis_chain", "...ij,...jk,...kl->...il", f32(2, 3, 4), f32(2, 4, 5), f32(2, 5, 2))
c("ellipsis_broadcast", "...ij,jk,...kl", f32(2, 3, 4), f32(4, 5), f32(1, 5, 2))
c("implicit_output", "ij,jk,kl", f32(2, 3), f32(3, 4), f32(4, 5))
c("implicit_output_sorted", "zb,ba,ac", f32(2, 3), f32(3, 4), f32(4, 5))
c("output_permuted", "ij,jk,kl->li", f32(2, 3), f32(3, 4), f32(4, 5))
# Letters summed where one operand has them, repeated letters (diagonals and traces).
c("summed_in_one_operand", "ijx,jk,kly->il", f32(2, 3, 2), f32(3, 4), f32(4, 5, 3), grad=True)
c("diagonal_in_chain", "ii,ij,jk->k", f32(3, 3), f32(3, 4), f32(4, 2), grad=True)
c("trace_of_product", "ij,jk,ki->", f32(3, 4), f32(4, 2), f32(2, 3))
c("repeated_kept", "iij,jk,kl->il", f32(3, 3, 2), f32(2, 4), f32(4, 3))
c("triple_diagonal", "iii->i", f32(3, 3, 3))
c("repeated_across_operands", "iji,jk,k->i", f32(3, 2, 3), f32(2, 4), f32(4))
# A repeated letter with a size-1 axis: JAX's diagonal of a (1, 3) matrix, and its squeeze
# of a size-1 axis whose letter the other operand repeats (or has at full size).
c("repeated_size_one_diagonal", "ii->i", f32(1, 3))
c("repeated_size_one_squeezed", "ij,jj->i", f32(2, 3), f32(1, 3))
c("repeated_against_size_one", "ij,jj->i", f32(2, 1), f32(3, 3))
c("repeated_size_one_hadamard", "ii,i->i", f32(1, 3), f32(3))
# Outer products, Hadamard products, scalars, broadcasting size-1 axes.
c("outer3", "i,j,k->ijk", f32(2), f32(3), f32(4), grad=True)
c("hadamard_then_contract", "ij,ij,jk->ik", f32(2, 3), f32(2, 3), f32(3, 4))
c("scalar_operand", ",ij,j->i", np.float32(1.5), f32(2, 3), f32(3))
c("size_one_broadcast", "ij,jk,kl->il", f32(2, 1), f32(3, 4), f32(4, 5))
c("many_contracted", "ijk,jkl,klm->im", f32(2, 3, 4), f32(3, 4, 2), f32(4, 2, 3))
c("docstring_five", "ea,fb,abcd,gc,hd->efgh", f32(2, 3), f32(2, 2), f32(3, 2, 4, 2), f32(3, 4), f32(2, 2))
# dtypes: integers, mixed, preferred_element_type.
c("int_chain", "ij,jk,kl->il", i32(2, 3), i32(3, 4), i32(4, 2))
c("int_preferred_f32", "ij,jk,kl->il", i32(2, 3), i32(3, 4), i32(4, 2), preferred_element_type=jnp.float32)
c("int_sum_preferred_f32", "ij,ik,kl->l", i32(2, 3), i32(2, 4), i32(4, 2), preferred_element_type=jnp.float32)
c("mixed_int_float", "ij,jk,kl->il", i32(2, 3), f32(3, 4), f32(4, 2))
def bf16(*s): return f32(*s).astype(jnp.bfloat16)
c("bf16_preferred_f32", "ij,jk,kl->il", bf16(2, 3), bf16(3, 4), bf16(4, 2), preferred_element_type=jnp.float32)
c("bf16_sum_preferred_f32", "ij,ik,kl->l", bf16(2, 3), bf16(2, 4), bf16(4, 2), preferred_element_type=jnp.float32)
c("mixed_bf16_f32", "ij,jk,kl->il", bf16(2, 3), f32(3, 4), bf16(4, 2))
# optimize= other than 'auto'.
c("greedy_four", "ab,cd,bc,de->ae", f32(2, 5), f32(3, 4), f32(5, 3), f32(4, 2), optimize="greedy")
c("greedy_six", "ab,bc,cd,de,ef,fg->ag", f32(4, 2), f32(2, 5), f32(5, 3), f32(3, 3), f32(3, 6), f32(6, 2), optimize="greedy")
c("optimal_five", "ab,bc,cd,de,ef->af", f32(2, 6), f32(6, 3), f32(3, 5), f32(5, 2), f32(2, 4), optimize="optimal")
c("unoptimized_four", "ij,jk,kl,lm->im", f32(2, 2), f32(2, 3), f32(3, 2), f32(2, 3), optimize=False)
c("unoptimized_three", "ij,jk,kl->il", f32(2, 3), f32(3, 10), f32(10, 5), optimize=False)


def dtype_name(a):
    if a.dtype == jnp.bfloat16:
        return 'bf16'
    return {np.float32: 'f32', np.int32: 'i32'}[np.dtype(a.dtype).type]

def arr(a):
    a = np.asarray(a)
    data = a.astype(np.float32) if a.dtype == jnp.bfloat16 else a
    return {"dtype": dtype_name(a), "shape": list(a.shape), "data": data.reshape(-1).tolist()}

cases = {}
for name, (spec, args, grad, kw) in CASES.items():
    fn = lambda *a, spec=spec, kw=kw: jnp.einsum(spec, *a, **kw)
    out = fn(*map(jnp.asarray, args))
    case = {"spec": spec, "jaxpr": str(jax.make_jaxpr(fn)(*args)), "args": [arr(a) for a in args],
            "outputs": [arr(out)]}
    if grad:
        argnums = tuple(range(len(args)))
        gs = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=argnums)(*args)
        case["grads"] = [arr(g) for g in gs]
    cases[name] = case

# Random contraction paths.
prng = random.Random(0)
OPTIMIZERS = ["auto", "greedy", "optimal", "branch-all", "branch-2", "branch-1", False]
paths = []
for trial in range(160):
    n = prng.randint(3, 16 if trial % 4 == 0 else 8)
    letters = "abcdefghijklmnopqrstuvwxyz"[:prng.randint(3, 12)]
    sizes = {l: prng.choice([1, 2, 2, 3, 3, 4, 5]) for l in letters}
    terms = ["".join(prng.sample(letters, prng.randint(0 if prng.random() < 0.05 else 1, min(4, len(letters))))) for _ in range(n)]
    used = sorted(set("".join(terms)))
    if not used:
        continue
    out = "".join(prng.sample(used, prng.randint(0, min(3, len(used)))))
    spec = ",".join(terms) + "->" + out
    shapes = [tuple(sizes[l] for l in t) for t in terms]
    for opt in OPTIMIZERS:
        if opt == "optimal" and n > 6:
            continue
        if opt == "branch-all" and n > 8:
            continue
        optimize = Unoptimized() if opt is False else opt
        path, info = opt_einsum.contract_path(spec, *shapes, shapes=True, optimize=optimize)
        steps = [con[2] for con in info.contraction_list]
        paths.append({"spec": spec, "shapes": [list(s) for s in shapes], "optimize": opt,
                      "path": [list(p) for p in path], "steps": steps})

# Random einsums (repeated letters, size-1 axes, implicit outputs, every optimize): JAX's
# text and values. Each draws from its own seed, so the list is stable.
random_cases = []
for trial in range(60):
    r = random.Random(1000 + trial)
    sizes = {l: r.randint(1, 3) for l in "abcdef"}
    terms, shapes = [], []
    for _ in range(r.randint(1, 6)):
        t = "".join(r.choice("abcdef") for _ in range(r.randint(0, 3)))
        terms.append(t)
        shapes.append(tuple(1 if t.count(l) == 1 and r.random() < 0.15 else sizes[l] for l in t))
    used = sorted(set("".join(terms)))
    spec = ",".join(terms)
    if r.random() < 0.75:
        spec += "->" + "".join(r.sample(used, r.randint(0, min(3, len(used)))))
    opt = r.choice(OPTIMIZERS)
    args = [f32(*s) for s in shapes]
    fn = lambda *a, spec=spec, opt=opt: jnp.einsum(spec, *a, optimize=opt)
    try:
        text = str(jax.make_jaxpr(fn)(*args))
    except Exception as e:  # JAX rejects some (a size-1 axis against a repeated letter)
        continue
    random_cases.append({"spec": spec, "optimize": opt, "jaxpr": text, "args": [arr(a) for a in args],
                         "outputs": [arr(fn(*map(jnp.asarray, args)))]})

# Python's set iteration order along random contraction sequences.
pysets = []
for trial in range(300):
    n = prng.randint(2, 15)
    s, nxt, picks, orders = set(range(n)), n, [], [list(range(n))]
    orders = [list(s)]
    while len(s) > 1:
        i, j = prng.sample(list(s), 2)
        s = s - {i, j} | {nxt}
        nxt += 1
        picks.append([i, j])
        orders.append(list(s))
    pysets.append({"n": n, "picks": picks, "orders": orders})

print(json.dumps({"cases": cases, "random_cases": random_cases, "paths": paths, "pysets": pysets}, indent=None, separators=(",", ":")))
