//! The program one device runs, for planning its memory.
//!
//! A sharded program (`jit` with shardings, `sharding_constraint`, `shard_map`) runs on
//! every device of a mesh, each device holding its block of each value. What one device
//! needs is the program XLA's SPMD partitioner gives it: every value at the shape one
//! device holds of it. [`device_program`] writes that program for device 0, so that the
//! buffer planner plans one device's memory with the rules it plans any program's:
//!
//! - values are laid out as [`remat_ir::layout`] says (the program's shardings and specs,
//!   propagated as XLA's partitioner does in the simple cases), the program compiled as one
//!   ([`Arguments::AsUsed`]: an argument is placed as the `shard_map` it feeds asks, as
//!   XLA's memory analysis of `jax.jit` of the step counts it);
//! - an equation that follows layouts (elementwise, `transpose`, `dot_general`, reductions,
//!   `broadcast_in_dim`) runs on the blocks; any other runs on whole values;
//! - where an operand is laid out otherwise than its use asks, a block is cut from it or
//!   grown to the size the use needs (XLA's all-gather or dynamic-slice): a `slice` or a
//!   `pad`, which hold what the resharded value holds;
//! - a `shard_map` body runs once, on device 0's blocks; each collective becomes an
//!   equation with its result's shape on that device (a sum over devices an `add`, a
//!   gather a `pad` or `broadcast_in_dim`, a scatter a `slice`, a permutation an `add`),
//!   `axis_index` device 0's index, 0.
//!
//! The program that comes out has the memory of one device and not its values: collectives
//! do not exchange anything, and a dot over a split contracting dimension leaves a partial
//! sum. It is planned, never run (`remat bench` runs the unrolled simulation, `spmd.rs`).
//! Not modelled: the buffers XLA's collectives use for communication, and what XLA's
//! partitioner decides where these rules say "whole" (docs/sharding.md measures the
//! distance against XLA's memory analysis).

use remat_ir::layout::{rule, spec_layout, Arguments, Dims, Layout, Layouts, Rule};
use remat_ir::{
    AllReduceOp, Atom, Aval, BinaryOp, Collective, Eqn, Jaxpr, LitValue, Literal, Primitive, Sharding, Var,
};

use crate::spmd::{strip_vma, Emit};
use crate::JitError;

fn unsupported(reason: impl Into<String>) -> JitError {
    JitError::Unsupported { primitive: "shard_map", reason: reason.into() }
}

/// One device's program and where its parts come from.
#[derive(Clone, Debug)]
pub struct DeviceProgram {
    pub jaxpr: Jaxpr,
    /// For each equation of `jaxpr`, the top-level equation of the given program it comes
    /// from.
    pub eqn_origin: Vec<usize>,
    /// For each variable of `jaxpr`, the top-level variable of the given program whose
    /// block (or whole value) it holds, if any.
    pub var_origin: Vec<Option<Var>>,
}

/// Whether `j` (or a jaxpr it calls) says where values live on a mesh: a `shard_map`, a
/// `sharding_constraint`, a `reshard`, or a `jit` with a named sharding.
pub fn is_sharded(j: &Jaxpr) -> bool {
    j.eqns.iter().any(|e| {
        let named = |s: &[Sharding]| s.iter().any(|s| matches!(s, Sharding::Named { .. }));
        matches!(e.primitive, Primitive::ShardMap(_) | Primitive::ShardingConstraint(_) | Primitive::Reshard)
            || matches!(&e.primitive, Primitive::Jit { options, .. }
                if named(&options.in_shardings) || named(&options.out_shardings))
            || e.primitive.subjaxprs().into_iter().any(|b| is_sharded(b))
    })
}

/// The program device 0 runs (module docs): `j` with its `jit`s inlined (their shardings
/// as constraints) and every value at the shape one device holds of it.
pub fn device_program(j: &Jaxpr) -> Result<DeviceProgram, JitError> {
    let flat = flatten(j)?;
    let mut dp = localize(&flat.jaxpr, &flat.eqn_origin, &flat.var_origin)?;
    // The passes keep a verified program verified; debug builds (every test) check it.
    if cfg!(debug_assertions) {
        remat_ir::verify(&dp.jaxpr)
            .map_err(|e| JitError::Invalid(format!("the device program (a bug in the JIT): {e}")))?;
    }
    dp.var_origin.resize(dp.jaxpr.vars.len(), None);
    Ok(dp)
}

fn read(env: &[Option<Atom>], a: &Atom) -> Result<Atom, JitError> {
    match a {
        Atom::Lit(_) => Ok(*a),
        Atom::Var(v) => env
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| JitError::Invalid(format!("{v:?} is read before it has a value"))),
    }
}

/// `j` with every `jit` inlined, recursively (a `jit`'s shardings become
/// `sharding_constraint`s on its operands and results), with where its parts come from in
/// `j` (a [`DeviceProgram`] of whole values).
fn flatten(j: &Jaxpr) -> Result<DeviceProgram, JitError> {
    let mut out = Jaxpr::default();
    let mut env: Vec<Option<Atom>> = vec![None; j.vars.len()];
    let mut origin = Vec::new();
    let mut var_origin = Vec::new();
    for &v in &j.constvars {
        let nv = out.new_var(j.aval(v).clone());
        out.constvars.push(nv);
        env[v.index()] = Some(Atom::Var(nv));
    }
    for &v in &j.invars {
        let nv = out.new_var(j.aval(v).clone());
        out.invars.push(nv);
        env[v.index()] = Some(Atom::Var(nv));
    }
    for (i, eqn) in j.eqns.iter().enumerate() {
        let outs = inline_eqn(&mut out, j, &env, eqn)?;
        origin.resize(out.eqns.len(), i);
        for (&v, a) in eqn.outvars.iter().zip(outs) {
            env[v.index()] = Some(a);
        }
    }
    out.outvars = j.outvars.iter().map(|a| read(&env, a)).collect::<Result<_, _>>()?;
    // Which top-level variable each variable of `out` stands for.
    for (v, a) in env.iter().enumerate() {
        if let Some(Atom::Var(nv)) = a {
            if var_origin.len() <= nv.index() {
                var_origin.resize(nv.index() + 1, None);
            }
            var_origin[nv.index()].get_or_insert(Var(v as u32));
        }
    }
    var_origin.resize(out.vars.len(), None);
    Ok(DeviceProgram { jaxpr: out, eqn_origin: origin, var_origin })
}

/// Appends `eqn` (of `src`, whose variables `env` maps into `out`) to `out`, a `jit`
/// inlined; gives its results.
fn inline_eqn(out: &mut Jaxpr, src: &Jaxpr, env: &[Option<Atom>], eqn: &Eqn) -> Result<Vec<Atom>, JitError> {
    let ins: Vec<Atom> = eqn.invars.iter().map(|a| read(env, a)).collect::<Result<_, _>>()?;
    let constrain = |out: &mut Jaxpr, x: Atom, s: Option<&Sharding>| -> Atom {
        match (s.and_then(Primitive::constraint_for), x) {
            (Some(prim), Atom::Var(_)) => {
                let v = out.new_var(out.atom_aval(&x));
                out.eqns.push(Eqn::new(prim, vec![x], vec![v], eqn.source.clone()));
                Atom::Var(v)
            }
            _ => x,
        }
    };
    if let Primitive::Jit { jaxpr, options, .. } = &eqn.primitive {
        if jaxpr.consts.is_empty() {
            let body = &jaxpr.jaxpr;
            let mut benv: Vec<Option<Atom>> = vec![None; body.vars.len()];
            for (k, (&v, x)) in body.invars.iter().zip(ins).enumerate() {
                benv[v.index()] = Some(constrain(out, x, options.in_shardings.get(k)));
            }
            for e in &body.eqns {
                let outs = inline_eqn(out, body, &benv, e)?;
                for (&v, a) in e.outvars.iter().zip(outs) {
                    benv[v.index()] = Some(a);
                }
            }
            let mut results = Vec::with_capacity(body.outvars.len());
            for (k, a) in body.outvars.iter().enumerate() {
                let x = read(&benv, a)?;
                results.push(constrain(out, x, options.out_shardings.get(k)));
            }
            return Ok(results);
        }
    }
    let vars: Vec<Var> = eqn.outvars.iter().map(|&v| out.new_var(src.aval(v).clone())).collect();
    out.eqns.push(Eqn::new(eqn.primitive.clone(), ins, vars.clone(), eqn.source.clone()));
    Ok(vars.into_iter().map(Atom::Var).collect())
}

/// Per-device shapes for the flat program `flat`.
fn localize(flat: &Jaxpr, origin: &[usize], flat_var: &[Option<Var>]) -> Result<DeviceProgram, JitError> {
    let lay = Layouts::of(flat, Arguments::AsUsed);
    let mut out = Jaxpr::default();
    let mut env: Vec<Option<Atom>> = vec![None; flat.vars.len()];
    let mut eqn_origin = Vec::new();
    let mut var_origin: Vec<Option<Var>> = Vec::new();
    let note = |var_origin: &mut Vec<Option<Var>>, a: &Atom, v: Var| {
        if let Atom::Var(nv) = a {
            if var_origin.len() <= nv.index() {
                var_origin.resize(nv.index() + 1, None);
            }
            if var_origin[nv.index()].is_none() {
                var_origin[nv.index()] = flat_var.get(v.index()).copied().flatten();
            }
        }
    };
    for &v in &flat.constvars {
        let nv = out.new_var(flat.aval(v).clone());
        out.constvars.push(nv);
        env[v.index()] = Some(Atom::Var(nv));
        note(&mut var_origin, &Atom::Var(nv), v);
    }
    for &v in &flat.invars {
        let nv = out.new_var(local_aval(flat, &lay, v));
        out.invars.push(nv);
        env[v.index()] = Some(Atom::Var(nv));
        note(&mut var_origin, &Atom::Var(nv), v);
    }
    local_eqns(&mut out, flat, &lay, &mut env, |out, i, results| {
        for (v, a) in results {
            note(&mut var_origin, a, *v);
        }
        eqn_origin.resize(out.eqns.len(), origin[i]);
    })?;
    out.outvars = flat.outvars.iter().map(|a| read(&env, a)).collect::<Result<_, _>>()?;
    Ok(DeviceProgram { jaxpr: out, eqn_origin, var_origin })
}

/// `v`'s aval with the shape one device holds.
fn local_aval(j: &Jaxpr, lay: &Layouts, v: Var) -> Aval {
    let mut aval = j.aval(v).clone();
    aval.shape = lay.local_shape(&aval.shape, &lay.get(v).cloned());
    aval
}

/// Emits `j`'s equations on one device's blocks into `out` (`env` maps `j`'s variables to
/// their blocks in `out`, each laid out as `lay` says); after each, `done` gets its index
/// and each result with its block.
fn local_eqns(
    out: &mut Jaxpr,
    j: &Jaxpr,
    lay: &Layouts,
    env: &mut [Option<Atom>],
    mut done: impl FnMut(&Jaxpr, usize, &[(Var, Atom)]),
) -> Result<(), JitError> {
    for (i, eqn) in j.eqns.iter().enumerate() {
        let mut em = Emit { out: &mut *out, source: eqn.source.clone() };
        let results = local_eqn(&mut em, j, lay, env, eqn)?;
        let mut bound = Vec::with_capacity(results.len());
        for (&v, (a, natural)) in eqn.outvars.iter().zip(results) {
            let want = lay.get(v).cloned();
            let a = convert(&mut em, a, &j.aval(v).shape, lay, &natural, &want)?;
            env[v.index()] = Some(a);
            bound.push((v, a));
        }
        done(out, i, &bound);
    }
    Ok(())
}

/// Each axis once: later occurrences dropped.
fn dedupe(dims: Dims) -> Layout {
    let mut used: Vec<String> = Vec::new();
    let dims: Dims = dims
        .into_iter()
        .map(|axes| {
            axes.into_iter()
                .filter(|a| {
                    let fresh = !used.contains(a);
                    if fresh {
                        used.push(a.clone());
                    }
                    fresh
                })
                .collect()
        })
        .collect();
    dims.iter().any(|d| !d.is_empty()).then_some(dims)
}

/// `x` (one device's block of a value of `global` shape laid out `from`) as laid out `to`:
/// a `slice` where a dimension is split further, a `pad` where it is gathered.
fn convert(
    em: &mut Emit,
    x: Atom,
    global: &[usize],
    lay: &Layouts,
    from: &Layout,
    to: &Layout,
) -> Result<Atom, JitError> {
    if from == to || matches!(x, Atom::Lit(_)) {
        return Ok(x);
    }
    let (a, b) = (lay.local_shape(global, from), lay.local_shape(global, to));
    if a == b {
        // The same shape under another split (XLA's all-to-all): the same bytes.
        return Ok(x);
    }
    let mut x = x;
    if a.iter().zip(&b).any(|(p, q)| q < p) {
        let limit: Vec<usize> = a.iter().zip(&b).map(|(&p, &q)| p.min(q)).collect();
        let prim = Primitive::Slice { start_indices: vec![0; a.len()], limit_indices: limit, strides: None };
        x = em.bind1(prim, vec![x])?;
    }
    if a.iter().zip(&b).any(|(p, q)| q > p) {
        let now = em.aval(&x).shape;
        let config: Vec<(i64, i64, i64)> = now.iter().zip(&b).map(|(&p, &q)| (0, q as i64 - p as i64, 0)).collect();
        let zero = zero(&em.aval(&x))?;
        x = em.bind1(Primitive::Pad { padding_config: config }, vec![x, zero])?;
    }
    Ok(x)
}

fn zero(aval: &Aval) -> Result<Atom, JitError> {
    let z = LitValue::try_from_f64(aval.dtype, 0.0)
        .ok_or_else(|| unsupported(format!("resharding a value of {} (no zero literal of that dtype)", aval.dtype)))?;
    Ok(Atom::Lit(Literal::new(z)))
}

/// The layout of dimension `d` of `l`.
fn dim(l: &Layout, d: usize) -> Vec<String> {
    l.as_ref().and_then(|v| v.get(d).cloned()).unwrap_or_default()
}

/// Emits `eqn` of `flat` on one device's blocks; gives each result with the layout it has.
fn local_eqn(
    em: &mut Emit,
    flat: &Jaxpr,
    lay: &Layouts,
    env: &[Option<Atom>],
    eqn: &Eqn,
) -> Result<Vec<(Atom, Layout)>, JitError> {
    let out_layout = |k: usize| eqn.outvars.get(k).and_then(|&v| lay.get(v).cloned());
    // Where the equation computes its results from its operands as they are laid out (the
    // results are resharded to `out_layout` after, `local_eqns`): XLA computes where the
    // data is (a dot over a split contracting dimension as partial sums) and reshards the
    // result.
    let here: Vec<Layout> = eqn.invars.iter().map(|a| lay.of_atom(a)).collect();
    let natural = lay.eqn_results(flat, eqn, &here);
    let natural_of = |k: usize| natural.get(k).cloned().flatten();
    // Operand `k` as laid out `want`.
    let operand = |em: &mut Emit, k: usize, want: &Layout| -> Result<Atom, JitError> {
        let a = &eqn.invars[k];
        let x = read(env, a)?;
        convert(em, x, &flat.atom_aval(a).shape, lay, &lay.of_atom(a), want)
    };
    let whole = |em: &mut Emit| -> Result<Vec<Atom>, JitError> {
        (0..eqn.invars.len()).map(|k| operand(em, k, &None)).collect()
    };
    let with =
        |outs: Vec<Atom>, l: &dyn Fn(usize) -> Layout| outs.into_iter().enumerate().map(|(k, a)| (a, l(k))).collect();
    Ok(match rule(&eqn.primitive) {
        Rule::Elementwise if matches!(eqn.primitive, Primitive::Reshard) => {
            let x = operand(em, 0, &out_layout(0))?;
            vec![(x, out_layout(0))]
        }
        Rule::Elementwise => {
            let per_result = eqn.outvars.len() > 1 && eqn.outvars.len() == eqn.invars.len();
            let mut ins = Vec::with_capacity(eqn.invars.len());
            for (k, a) in eqn.invars.iter().enumerate() {
                let o = if per_result { k } else { 0 };
                let same = eqn.outvars.get(o).is_some_and(|&v| flat.aval(v).shape == flat.atom_aval(a).shape);
                ins.push(operand(em, k, &if same { natural_of(o) } else { None })?);
            }
            with(em.bind(eqn.primitive.clone(), ins)?, &natural_of)
        }
        Rule::Transpose(perm) => {
            let r = natural_of(0);
            let mut dims = vec![Vec::new(); perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                dims[p] = dim(&r, i);
            }
            let x = operand(em, 0, &dedupe(dims))?;
            with(em.bind(eqn.primitive.clone(), vec![x])?, &natural_of)
        }
        Rule::DotGeneral(dn) => {
            let r = natural_of(0);
            let (xr, yr) = (flat.atom_aval(&eqn.invars[0]).rank(), flat.atom_aval(&eqn.invars[1]).rank());
            let nb = dn.lhs_batch.len();
            let lhs_free: Vec<usize> =
                (0..xr).filter(|d| !dn.lhs_batch.contains(d) && !dn.lhs_contracting.contains(d)).collect();
            let rhs_free: Vec<usize> =
                (0..yr).filter(|d| !dn.rhs_batch.contains(d) && !dn.rhs_contracting.contains(d)).collect();
            let mut lhs = vec![Vec::new(); xr];
            let mut rhs = vec![Vec::new(); yr];
            for (b, (&l, &r_)) in dn.lhs_batch.iter().zip(&dn.rhs_batch).enumerate() {
                lhs[l] = dim(&r, b);
                rhs[r_] = dim(&r, b);
            }
            for (k, &d) in lhs_free.iter().enumerate() {
                lhs[d] = dim(&r, nb + k);
            }
            for (k, &d) in rhs_free.iter().enumerate() {
                rhs[d] = dim(&r, nb + lhs_free.len() + k);
            }
            // A contracting dimension stays split where both operands split it alike (a
            // partial sum on each device), over axes the result does not use.
            let (xl, yl) = (lay.of_atom(&eqn.invars[0]), lay.of_atom(&eqn.invars[1]));
            let used: Vec<String> = r.iter().flatten().flatten().cloned().collect();
            for (&lc, &rc) in dn.lhs_contracting.iter().zip(&dn.rhs_contracting) {
                let (a, b) = (dim(&xl, lc), dim(&yl, rc));
                if a == b && a.iter().all(|x| !used.contains(x)) {
                    lhs[lc] = a.clone();
                    rhs[rc] = a;
                }
            }
            let x = operand(em, 0, &dedupe(lhs))?;
            let y = operand(em, 1, &dedupe(rhs))?;
            with(em.bind(eqn.primitive.clone(), vec![x, y])?, &natural_of)
        }
        Rule::Reduce(axes) => {
            let r = natural_of(0);
            let xl = lay.of_atom(&eqn.invars[0]);
            let rank = flat.atom_aval(&eqn.invars[0]).rank();
            let used: Vec<String> = r.iter().flatten().flatten().cloned().collect();
            let mut kept = 0;
            let dims: Dims = (0..rank)
                .map(|d| match axes.contains(&d) {
                    // A reduced dimension stays split: each device reduces its part.
                    true => dim(&xl, d).into_iter().filter(|a| !used.contains(a)).collect(),
                    false => {
                        kept += 1;
                        dim(&r, kept - 1)
                    }
                })
                .collect();
            let x = operand(em, 0, &dedupe(dims))?;
            let mut ins = vec![x];
            for k in 1..eqn.invars.len() {
                ins.push(operand(em, k, &None)?);
            }
            with(em.bind(eqn.primitive.clone(), ins)?, &natural_of)
        }
        Rule::BroadcastInDim { shape, broadcast_dimensions } => {
            let r = natural_of(0);
            let xs = flat.atom_aval(&eqn.invars[0]).shape;
            let dims: Dims = broadcast_dimensions
                .iter()
                .enumerate()
                .map(|(i, &d)| if xs.get(i) == shape.get(d) { dim(&r, d) } else { Vec::new() })
                .collect();
            let x = operand(em, 0, &dedupe(dims))?;
            let prim = Primitive::BroadcastInDim {
                shape: lay.local_shape(shape, &r),
                broadcast_dimensions: broadcast_dimensions.to_vec(),
            };
            let mut ins = vec![x];
            for k in 1..eqn.invars.len() {
                ins.push(operand(em, k, &None)?);
            }
            with(em.bind(prim, ins)?, &natural_of)
        }
        Rule::Constraint(_) => {
            let x = operand(em, 0, &out_layout(0))?;
            vec![(x, out_layout(0))]
        }
        Rule::ShardMap(sm) => {
            let mut ins = Vec::with_capacity(eqn.invars.len());
            for (k, spec) in sm.in_specs.iter().enumerate() {
                let rank = flat.atom_aval(&eqn.invars[k]).rank();
                ins.push(operand(em, k, &spec_layout(spec, rank))?);
            }
            let body = strip_vma(&sm.jaxpr)?;
            let outs = device_zero(em, &body, ins)?;
            outs.into_iter()
                .zip(&sm.out_specs)
                .zip(&eqn.outvars)
                .map(|((a, spec), &v)| (a, spec_layout(spec, flat.aval(v).rank())))
                .collect()
        }
        Rule::Jit(..) | Rule::Call | Rule::Opaque => {
            if let Primitive::Remat2 { jaxpr: body, prevent_cse, differentiated, policy } = &eqn.primitive {
                // A checkpoint's body runs on the blocks too (the ledger's recompute
                // programs hold one).
                let ins: Vec<Layout> = eqn.invars.iter().map(|a| lay.of_atom(a)).collect();
                let inner_lay = lay.of_call(body, ins);
                let mut inner = Jaxpr::default();
                let mut ienv: Vec<Option<Atom>> = vec![None; body.vars.len()];
                for &v in &body.invars {
                    let nv = inner.new_var(local_aval(body, &inner_lay, v));
                    inner.invars.push(nv);
                    ienv[v.index()] = Some(Atom::Var(nv));
                }
                local_eqns(&mut inner, body, &inner_lay, &mut ienv, |_, _, _| {})?;
                inner.outvars = body.outvars.iter().map(|a| read(&ienv, a)).collect::<Result<_, _>>()?;
                let outs: Vec<Layout> = body.outvars.iter().map(|a| inner_lay.of_atom(a)).collect();
                let ins: Vec<Atom> = eqn.invars.iter().map(|a| read(env, a)).collect::<Result<_, _>>()?;
                let prim = Primitive::Remat2 {
                    jaxpr: std::sync::Arc::new(inner),
                    prevent_cse: *prevent_cse,
                    differentiated: *differentiated,
                    policy: policy.clone(),
                };
                return Ok(with(em.bind(prim, ins)?, &|k| outs.get(k).cloned().flatten()));
            }
            if eqn.primitive.subjaxprs().into_iter().any(|b| crate::spmd::has_shard_map(b)) {
                return Err(unsupported(format!(
                    "per-device memory of a shard_map inside `{}` is not written yet",
                    eqn.primitive.name()
                )));
            }
            let ins = whole(em)?;
            let prim = match &eqn.primitive {
                // A jit with constants stays a call; its shardings are constraints the
                // device program has applied.
                Primitive::Jit { name, jaxpr, options } => {
                    let mut options = options.clone();
                    options.in_shardings.clear();
                    options.out_shardings.clear();
                    Primitive::Jit { name: name.clone(), jaxpr: jaxpr.clone(), options }
                }
                p => p.clone(),
            };
            with(em.bind(prim, ins)?, &|_| None)
        }
    })
}

/// `body` (without varying axes) on device 0's blocks `ins`; its collectives as equations
/// with device 0's shapes (module docs).
fn device_zero(em: &mut Emit, body: &Jaxpr, ins: Vec<Atom>) -> Result<Vec<Atom>, JitError> {
    if !body.constvars.is_empty() {
        return Err(unsupported("a body with constants"));
    }
    let mut env: Vec<Option<Atom>> = vec![None; body.vars.len()];
    for (v, a) in body.invars.iter().zip(ins) {
        env[v.index()] = Some(a);
    }
    for eqn in &body.eqns {
        let ins: Vec<Atom> = eqn.invars.iter().map(|a| read(&env, a)).collect::<Result<_, _>>()?;
        let outs: Vec<Atom> = if let Some(c) = eqn.primitive.as_collective() {
            vec![collective(em, c, &ins)?]
        } else if matches!(
            eqn.primitive,
            Primitive::Pvary { .. } | Primitive::Reshard | Primitive::ShardingConstraint(_)
        ) {
            vec![ins[0]]
        } else if let Primitive::Jit { jaxpr, .. } = &eqn.primitive {
            if !jaxpr.consts.is_empty() && jaxpr.jaxpr.has_collective() {
                return Err(unsupported("collectives inside a jit with constants in a shard_map body"));
            }
            match jaxpr.consts.is_empty() {
                true => device_zero(em, &jaxpr.jaxpr, ins)?,
                false => em.bind(eqn.primitive.clone(), ins)?,
            }
        } else if let Primitive::Remat2 { jaxpr: inner, prevent_cse, differentiated, policy } = &eqn.primitive {
            // A checkpoint in a body (a recompute JAX's partial evaluation placed) runs on
            // device 0 too, its collectives with device 0's shapes; it stays a checkpoint.
            let mut body0 = Jaxpr::default();
            let args: Vec<Atom> = ins.iter().map(|a| Atom::Var(body0.new_var(em.aval(a)))).collect();
            body0.invars = args.iter().filter_map(Atom::as_var).collect();
            let mut inner_em = Emit { out: &mut body0, source: eqn.source.clone() };
            let outs = device_zero(&mut inner_em, inner, args)?;
            body0.outvars = outs;
            let prim = Primitive::Remat2 {
                jaxpr: std::sync::Arc::new(body0),
                prevent_cse: *prevent_cse,
                differentiated: *differentiated,
                policy: policy.clone(),
            };
            em.bind(prim, ins)?
        } else if matches!(eqn.primitive, Primitive::ShardMap(_)) {
            return Err(unsupported("a shard_map inside a shard_map body"));
        } else if eqn.primitive.subjaxprs().into_iter().any(|b| b.has_collective()) {
            return Err(unsupported(format!(
                "per-device memory of collectives inside `{}` in a shard_map body is not written yet",
                eqn.primitive.name()
            )));
        } else {
            em.bind(eqn.primitive.clone(), ins)?
        };
        for (&v, a) in eqn.outvars.iter().zip(outs) {
            env[v.index()] = Some(a);
        }
    }
    body.outvars.iter().map(|a| read(&env, a)).collect()
}

/// A collective's result on device 0, with device 0's shape (module docs).
fn collective(em: &mut Emit, c: Collective, ins: &[Atom]) -> Result<Atom, JitError> {
    let x = match (&c, ins.first()) {
        (Collective::AxisIndex { .. }, _) => return Ok(Atom::Lit(Literal::new(LitValue::I32(0)))),
        (_, Some(x)) => *x,
        (_, None) => return Err(JitError::Invalid("a collective without an operand".into())),
    };
    let shape = em.aval(&x).shape;
    let again = |em: &mut Emit, op: BinaryOp| em.bind1(Primitive::Binary(op), vec![x, x]);
    match c {
        Collective::AllReduce { op, .. } => again(
            em,
            match op {
                AllReduceOp::Psum | AllReduceOp::PsumInvariant => BinaryOp::Add,
                AllReduceOp::Pmax => BinaryOp::Max,
                AllReduceOp::Pmin => BinaryOp::Min,
            },
        ),
        Collective::Ppermute { .. } | Collective::Pbroadcast { .. } => again(em, BinaryOp::Max),
        Collective::AllGather { all_gather_dimension: d, axis_size: n, tiled: true, .. } => {
            let config: Vec<(i64, i64, i64)> =
                (0..shape.len()).map(|k| (0, if k == d { ((n.max(1) - 1) * shape[k]) as i64 } else { 0 }, 0)).collect();
            let z = zero(&em.aval(&x))?;
            em.bind1(Primitive::Pad { padding_config: config }, vec![x, z])
        }
        Collective::AllGather { all_gather_dimension: d, axis_size: n, tiled: false, .. } => {
            let mut out_shape = shape.clone();
            out_shape.insert(d.min(shape.len()), n);
            let dims: Vec<usize> = (0..shape.len()).map(|k| if k < d { k } else { k + 1 }).collect();
            em.bind1(Primitive::BroadcastInDim { shape: out_shape, broadcast_dimensions: dims }, vec![x])
        }
        // Device 0's chunk of each block, concatenated: a block of the result's shape.
        Collective::AllToAll { split_axis, concat_axis, axis_size: n, .. } => {
            let mut limit = shape.clone();
            limit[split_axis] = shape[split_axis] / n.max(1);
            let part = em.bind1(
                Primitive::Slice { start_indices: vec![0; shape.len()], limit_indices: limit, strides: None },
                vec![x],
            )?;
            let parts = vec![part; n.max(1)];
            em.bind1(Primitive::Concatenate { dimension: concat_axis }, parts)
        }
        Collective::ReduceScatter { scatter_dimension: d, axis_size: n, tiled, .. } => {
            let mut limit = shape.clone();
            limit[d] = if tiled { shape[d] / n.max(1) } else { 1 };
            let part = em.bind1(
                Primitive::Slice { start_indices: vec![0; shape.len()], limit_indices: limit, strides: None },
                vec![x],
            )?;
            match tiled {
                true => Ok(part),
                false => em.bind1(Primitive::Squeeze { dimensions: vec![d] }, vec![part]),
            }
        }
        Collective::AxisIndex { .. } => Ok(Atom::Lit(Literal::new(LitValue::I32(0)))),
    }
}
