//! `shard_map`, lowered for the JIT: the body unrolled once per device of the mesh's manual
//! axes on that device's block, the collectives as the equations that exchange the blocks
//! (a sum over a group of devices is a chain of `add`s in the group's order, the
//! interpreter's order; a gather a `concatenate` or `stack`; a permutation a choice of
//! block), and the results assembled by `dynamic_update_slice` from their blocks. The
//! program that comes out has no `shard_map` and computes the interpreter's values; it is a
//! simulation of the devices on one machine, as the interpreter's (`remat_interp`'s
//! `sharded.rs`) is, and its memory is every device's together.
//!
//! Inside a body, the calls whose bodies hold collectives are unrolled with it; a loop or a
//! conditional holding collectives is not lowered (an error says so).

use std::sync::Arc;

use remat_ir::{
    AllReduceOp, Atom, Aval, BinaryOp, Collective, Eqn, Jaxpr, LitValue, Literal, Mesh, PartitionSpec, Primitive,
    ShardMap, SourceInfo, Var, Vma,
};

use crate::JitError;

fn unsupported(reason: impl Into<String>) -> JitError {
    JitError::Unsupported { primitive: "shard_map", reason: reason.into() }
}

/// Whether `j` (or a jaxpr it calls) holds a `shard_map`.
pub(crate) fn has_shard_map(j: &Jaxpr) -> bool {
    j.eqns.iter().any(|e| {
        matches!(e.primitive, Primitive::ShardMap(_)) || e.primitive.subjaxprs().into_iter().any(|b| has_shard_map(b))
    })
}

/// `j` with every `shard_map` lowered (the same jaxpr when it has none).
pub(crate) fn lower(j: &Jaxpr) -> Result<Jaxpr, JitError> {
    if !has_shard_map(j) {
        return Ok(j.clone());
    }
    let mut out = j.clone();
    out.eqns = Vec::with_capacity(j.eqns.len());
    for eqn in &j.eqns {
        if let Primitive::ShardMap(sm) = &eqn.primitive {
            lower_shard_map(&mut out, eqn, sm)?;
        } else if eqn.primitive.subjaxprs().into_iter().any(|b| has_shard_map(b)) {
            let mut e = eqn.clone();
            e.primitive = eqn.primitive.try_map_subjaxprs(|b| lower(b).map(Arc::new))?;
            out.eqns.push(e);
        } else {
            out.eqns.push(eqn.clone());
        }
    }
    Ok(out)
}

/// Appends equations to a jaxpr, typing their binders by the shape rule.
pub(crate) struct Emit<'a> {
    pub(crate) out: &'a mut Jaxpr,
    pub(crate) source: SourceInfo,
}

impl Emit<'_> {
    pub(crate) fn aval(&self, a: &Atom) -> Aval {
        self.out.atom_aval(a)
    }

    pub(crate) fn bind(&mut self, prim: Primitive, ins: Vec<Atom>) -> Result<Vec<Atom>, JitError> {
        let avals: Vec<Aval> = ins.iter().map(|a| self.aval(a)).collect();
        let outs = remat_ir::shape_rule(&prim, &avals).map_err(|e| JitError::Invalid(e.message))?;
        let vars: Vec<Var> = outs.into_iter().map(|a| self.out.new_var(a)).collect();
        self.out.eqns.push(Eqn::new(prim, ins, vars.clone(), self.source.clone()));
        Ok(vars.into_iter().map(Atom::Var).collect())
    }

    pub(crate) fn bind1(&mut self, prim: Primitive, ins: Vec<Atom>) -> Result<Atom, JitError> {
        Ok(self.bind(prim, ins)?.remove(0))
    }

    /// `prim` of `ins` bound to `v`, an existing variable of its type.
    fn bind_to(&mut self, prim: Primitive, ins: Vec<Atom>, v: Var) {
        self.out.eqns.push(Eqn::new(prim, ins, vec![v], self.source.clone()));
    }

    fn zeros(&mut self, aval: &Aval) -> Result<Atom, JitError> {
        let zero = LitValue::try_from_f64(aval.dtype, 0.0)
            .ok_or_else(|| unsupported(format!("a block of {} (no zero literal of that dtype)", aval.dtype)))?;
        let prim = Primitive::BroadcastInDim { shape: aval.shape.clone(), broadcast_dimensions: Vec::new() };
        self.bind1(prim, vec![Atom::Lit(Literal::new(zero))])
    }
}

fn index(i: usize) -> Atom {
    Atom::Lit(Literal::new(LitValue::I32(i as i32)))
}

/// `j` with no varying manual axes in any aval (inside and below): its equations run on one
/// device's block as ordinary equations.
pub(crate) fn strip_vma(j: &Jaxpr) -> Result<Jaxpr, JitError> {
    let mut out = j.clone();
    for d in &mut out.vars {
        d.aval.vma = Vma::default();
    }
    for e in &mut out.eqns {
        if !e.primitive.subjaxprs().is_empty() {
            e.primitive = e.primitive.try_map_subjaxprs(|b| strip_vma(b).map(Arc::new))?;
        }
    }
    Ok(out)
}

fn lower_shard_map(out: &mut Jaxpr, eqn: &Eqn, sm: &ShardMap) -> Result<(), JitError> {
    let mesh = sm.manual_mesh();
    let n = mesh.devices();
    let body = strip_vma(&sm.jaxpr)?;
    let mut em = Emit { out, source: eqn.source.clone() };
    // Each operand's block on each device.
    let mut args: Vec<Vec<Atom>> = Vec::with_capacity(eqn.invars.len());
    for (x, spec) in eqn.invars.iter().zip(&sm.in_specs) {
        let shape = em.aval(x).shape;
        let mut blocks = Vec::with_capacity(n);
        for d in 0..n {
            blocks.push(block(&mut em, &mesh, spec, d, x, &shape)?);
        }
        args.push(blocks);
    }
    let results = lockstep(&mut em, &body, &mesh, args)?;
    for ((per_device, spec), &v) in results.iter().zip(&sm.out_specs).zip(&eqn.outvars) {
        let global = em.out.aval(v).clone();
        let mut acc = em.zeros(&global)?;
        let mut placed = std::collections::HashSet::new();
        let mut writes = Vec::new();
        for (d, blk) in per_device.iter().enumerate() {
            let b_shape = em.aval(blk).shape;
            let starts: Vec<usize> =
                (0..b_shape.len()).map(|dim| mesh.index_along(d, spec.axes_of(dim)) * b_shape[dim]).collect();
            if placed.insert(starts.clone()) {
                writes.push((*blk, starts));
            }
        }
        let last = writes.len().saturating_sub(1);
        for (k, (blk, starts)) in writes.into_iter().enumerate() {
            let mut ins = vec![acc, blk];
            ins.extend(starts.into_iter().map(index));
            if k == last {
                em.bind_to(Primitive::DynamicUpdateSlice, ins, v);
            } else {
                acc = em.bind1(Primitive::DynamicUpdateSlice, ins)?;
            }
        }
    }
    Ok(())
}

/// Device `d`'s block of `x` (of `shape`) under `spec`.
fn block(
    em: &mut Emit,
    mesh: &Mesh,
    spec: &PartitionSpec,
    d: usize,
    x: &Atom,
    shape: &[usize],
) -> Result<Atom, JitError> {
    let mut start = vec![0; shape.len()];
    let mut limit = shape.to_vec();
    let mut split = false;
    for (dim, extent) in shape.iter().enumerate() {
        let axes = spec.axes_of(dim);
        let k =
            mesh.size_of(axes).ok_or_else(|| unsupported(format!("spec {spec} names an axis of no manual mesh")))?;
        if k > 1 {
            split = true;
            let b = extent / k;
            start[dim] = mesh.index_along(d, axes) * b;
            limit[dim] = start[dim] + b;
        }
    }
    match split {
        false => Ok(*x),
        true => em.bind1(Primitive::Slice { start_indices: start, limit_indices: limit, strides: None }, vec![*x]),
    }
}

/// The body on every device: `args[i][d]` is invar `i`'s block on device `d`; gives each
/// outvar's per device.
fn lockstep(em: &mut Emit, body: &Jaxpr, mesh: &Mesh, args: Vec<Vec<Atom>>) -> Result<Vec<Vec<Atom>>, JitError> {
    let n = mesh.devices();
    if !body.constvars.is_empty() {
        return Err(unsupported("a body with constants"));
    }
    let mut env: Vec<Option<Vec<Atom>>> = vec![None; body.vars.len()];
    for (v, a) in body.invars.iter().zip(args) {
        env[v.index()] = Some(a);
    }
    let read = |env: &[Option<Vec<Atom>>], a: &Atom| -> Result<Vec<Atom>, JitError> {
        match a {
            Atom::Lit(_) => Ok(vec![*a; n]),
            Atom::Var(v) => env
                .get(v.index())
                .cloned()
                .flatten()
                .ok_or_else(|| JitError::Invalid(format!("shard_map body: {v:?} is read before it has a value"))),
        }
    };
    for eqn in &body.eqns {
        let ins: Vec<Vec<Atom>> = eqn.invars.iter().map(|a| read(&env, a)).collect::<Result<_, _>>()?;
        let outs: Vec<Vec<Atom>> = if let Some(c) = eqn.primitive.as_collective() {
            vec![collective(em, mesh, c, &ins)?]
        } else if matches!(
            eqn.primitive,
            Primitive::Pvary { .. } | Primitive::Reshard | Primitive::ShardingConstraint(_)
        ) {
            // The identity on values.
            vec![ins[0].clone()]
        } else if matches!(eqn.primitive, Primitive::ShardMap(_)) {
            return Err(unsupported("a shard_map inside a shard_map body"));
        } else if eqn.primitive.subjaxprs().into_iter().any(|b| b.has_collective()) {
            let inner = match &eqn.primitive {
                Primitive::Jit { jaxpr, .. }
                | Primitive::ClosedCall { call_jaxpr: jaxpr }
                | Primitive::CustomJvpCall { call_jaxpr: jaxpr, .. }
                | Primitive::CustomVjpCall { call_jaxpr: jaxpr, .. }
                    if jaxpr.consts.is_empty() =>
                {
                    jaxpr.jaxpr.clone()
                }
                Primitive::Remat2 { jaxpr, .. } => jaxpr.clone(),
                other => {
                    return Err(unsupported(format!("collectives inside `{}` in a shard_map body", other.name())));
                }
            };
            lockstep(em, &inner, mesh, ins)?
        } else {
            let mut outs: Vec<Vec<Atom>> = vec![Vec::with_capacity(n); eqn.outvars.len()];
            for d in 0..n {
                let operands: Vec<Atom> = ins.iter().map(|x| x[d]).collect();
                for (k, a) in em.bind(eqn.primitive.clone(), operands)?.into_iter().enumerate() {
                    outs[k].push(a);
                }
            }
            outs
        };
        for (&v, x) in eqn.outvars.iter().zip(outs) {
            env[v.index()] = Some(x);
        }
    }
    body.outvars.iter().map(|a| read(&env, a)).collect()
}

fn collective(em: &mut Emit, mesh: &Mesh, c: Collective, ins: &[Vec<Atom>]) -> Result<Vec<Atom>, JitError> {
    let n = mesh.devices();
    let none = Vec::new();
    let x = match (&c, ins.first()) {
        (Collective::AxisIndex { .. }, _) => &none,
        (_, Some(x)) => x,
        (_, None) => return Err(JitError::Invalid("a collective without an operand".into())),
    };
    let known = |axes: &[String]| match axes.iter().find(|a| mesh.axis(a).is_none()) {
        Some(a) => Err(unsupported(format!("axis '{a}' is not a manual axis of the enclosing shard_map"))),
        None => Ok(()),
    };
    let mut out = Vec::with_capacity(n);
    match c {
        Collective::AllReduce { op, axes } => {
            known(axes)?;
            let bop = match op {
                AllReduceOp::Psum | AllReduceOp::PsumInvariant => BinaryOp::Add,
                AllReduceOp::Pmax => BinaryOp::Max,
                AllReduceOp::Pmin => BinaryOp::Min,
            };
            for d in 0..n {
                let members = mesh.group(d, axes);
                let mut acc = x[members[0]];
                for &e in &members[1..] {
                    acc = em.bind1(Primitive::Binary(bop), vec![acc, x[e]])?;
                }
                out.push(acc);
            }
        }
        Collective::AllGather { axis_name, all_gather_dimension, tiled, .. } => {
            known(axis_name)?;
            for d in 0..n {
                let parts: Vec<Atom> = mesh.group(d, axis_name).into_iter().map(|e| x[e]).collect();
                let prim = match tiled {
                    true => Primitive::Concatenate { dimension: all_gather_dimension },
                    false => Primitive::Stack { axis: all_gather_dimension },
                };
                out.push(em.bind1(prim, parts)?);
            }
        }
        Collective::AllToAll { axis_name, split_axis, concat_axis, axis_size } => {
            known(axis_name)?;
            for d in 0..n {
                // Chunk `me` of every member's block, concatenated in member order.
                let me = mesh.index_along(d, axis_name);
                let mut parts = Vec::new();
                for e in mesh.group(d, axis_name) {
                    let shape = em.aval(&x[e]).shape;
                    let chunk = shape[split_axis] / axis_size.max(1);
                    let mut start = vec![0; shape.len()];
                    let mut limit = shape.clone();
                    start[split_axis] = me * chunk;
                    limit[split_axis] = start[split_axis] + chunk;
                    let prim = Primitive::Slice { start_indices: start, limit_indices: limit, strides: None };
                    parts.push(em.bind1(prim, vec![x[e]])?);
                }
                out.push(em.bind1(Primitive::Concatenate { dimension: concat_axis }, parts)?);
            }
        }
        Collective::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled } => {
            known(axis_name)?;
            for d in 0..n {
                let members = mesh.group(d, axis_name);
                let mut acc = x[members[0]];
                for &e in &members[1..] {
                    acc = em.bind1(Primitive::Binary(BinaryOp::Add), vec![acc, x[e]])?;
                }
                let shape = em.aval(&acc).shape;
                let dim = scatter_dimension;
                let chunk = if tiled { shape[dim] / axis_size.max(1) } else { 1 };
                let mut start = vec![0; shape.len()];
                let mut limit = shape.clone();
                start[dim] = mesh.index_along(d, axis_name) * chunk;
                limit[dim] = start[dim] + chunk;
                let part = em
                    .bind1(Primitive::Slice { start_indices: start, limit_indices: limit, strides: None }, vec![acc])?;
                out.push(match tiled {
                    true => part,
                    false => em.bind1(Primitive::Squeeze { dimensions: vec![dim] }, vec![part])?,
                });
            }
        }
        Collective::Ppermute { axis_name, perm } => {
            known(axis_name)?;
            for d in 0..n {
                let members = mesh.group(d, axis_name);
                let me = mesh.index_along(d, axis_name);
                out.push(match perm.iter().find(|&&(_, dst)| dst == me) {
                    Some(&(src, _)) => {
                        x[*members.get(src).ok_or_else(|| unsupported(format!("ppermute from {src}")))?]
                    }
                    None => {
                        let aval = em.aval(&x[d]);
                        em.zeros(&aval)?
                    }
                });
            }
        }
        Collective::AxisIndex { axis_name } => {
            let axes = [axis_name.to_string()];
            known(&axes)?;
            out.extend((0..n).map(|d| Atom::Lit(Literal::new(LitValue::I32(mesh.index_along(d, &axes) as i32)))));
        }
        Collective::Pbroadcast { axis_name, source } => {
            known(axis_name)?;
            for d in 0..n {
                let members = mesh.group(d, axis_name);
                out.push(x[*members.get(source).ok_or_else(|| unsupported(format!("pbroadcast from {source}")))?]);
            }
        }
    }
    Ok(out)
}
