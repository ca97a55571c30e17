//! What a sharded program means, on one machine: sharding annotations change no value, and a
//! `shard_map` runs its body once per device of its mesh on that device's block of each
//! operand, with collectives exchanging blocks between those runs (a simulation for checking
//! and measuring, not a distributed runtime).
//!
//! The body runs in lockstep: equation by equation, each device's values side by side, so
//! that a collective sees every device's operand at once. Calls inside the body whose bodies
//! hold collectives (`jit`, `remat2`, ...) run in lockstep too; every other equation runs
//! once per device with the interpreter's own rules. A device is a position in the mesh's
//! manual axes, numbered row-major (the last axis fastest), as `jax.make_mesh` numbers them.

use remat_ir::{AllReduceOp, Array, Atom, Aval, BinaryOp, Collective, Jaxpr, Mesh, PartitionSpec, Primitive, ShardMap};

use crate::{declared, eval_primitive_refs, read_literal, EvalError};

fn invalid(primitive: &'static str) -> impl Fn(String) -> EvalError {
    move |message| EvalError::Invalid { primitive, message }
}

/// `prim` on `args`, its result typed by the shape rule.
fn apply(prim: &Primitive, args: &[&Array]) -> Result<Array, EvalError> {
    let avals: Vec<Aval> = args.iter().map(|a| a.aval()).collect();
    let out = remat_ir::shape_rule(prim, &avals).map_err(|e| invalid(prim.name())(e.message))?;
    let mut results = eval_primitive_refs(prim, args, &out)?;
    match results.len() {
        1 => Ok(results.remove(0)),
        n => Err(EvalError::Malformed(format!("{} gave {n} results where one was expected", prim.name()))),
    }
}

/// Device `d`'s block of the global value `x` under `spec`.
fn block(mesh: &Mesh, spec: &PartitionSpec, d: usize, x: &Array) -> Result<Array, EvalError> {
    let shape = x.shape();
    let mut start = vec![0; shape.len()];
    let mut limit = shape.to_vec();
    for (dim, extent) in shape.iter().enumerate() {
        let axes = spec.axes_of(dim);
        let k = mesh.size_of(axes).ok_or_else(|| invalid("shard_map")(format!("spec {spec} names an unknown axis")))?;
        if k == 0 || extent % k != 0 {
            return Err(invalid("shard_map")(format!("dimension {dim} of {} is not divisible by {k}", x.aval())));
        }
        let b = extent / k;
        start[dim] = mesh.index_along(d, axes) * b;
        limit[dim] = start[dim] + b;
    }
    apply(&Primitive::Slice { start_indices: start, limit_indices: limit, strides: None }, &[x])
}

/// The global value whose blocks under `spec` are `blocks` (one per device; devices that hold
/// the same block, replicated over the axes `spec` does not name, agree under `check_vma`,
/// and the first of them is taken).
fn assemble(mesh: &Mesh, spec: &PartitionSpec, blocks: &[Array]) -> Result<Array, EvalError> {
    let Some(first) = blocks.first() else {
        return Err(EvalError::Malformed("a shard_map mesh without devices".into()));
    };
    let b_shape = first.shape().to_vec();
    let mut global = first.aval();
    for (dim, extent) in global.shape.iter_mut().enumerate() {
        *extent *= mesh.size_of(spec.axes_of(dim)).unwrap_or(1);
    }
    let mut out = Array::zeros(&global.with_vma(Default::default()));
    let mut placed = std::collections::HashSet::new();
    for (d, blk) in blocks.iter().enumerate() {
        let starts: Vec<usize> =
            (0..b_shape.len()).map(|dim| mesh.index_along(d, spec.axes_of(dim)) * b_shape[dim]).collect();
        if !placed.insert(starts.clone()) {
            continue;
        }
        let idx: Vec<Array> = starts.iter().map(|&s| Array::I32(ndarray::arr0(s as i32).into_dyn())).collect();
        let mut args: Vec<&Array> = vec![&out, blk];
        args.extend(idx.iter());
        out = apply(&Primitive::DynamicUpdateSlice, &args)?;
    }
    Ok(out)
}

/// `shard_map`: the operands' blocks, the body in lockstep, the results assembled.
pub(crate) fn shard_map(sm: &ShardMap, args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    let mesh = sm.manual_mesh();
    if args.len() != sm.in_specs.len() {
        return Err(invalid("shard_map")(format!("{} operands for {} in_specs", args.len(), sm.in_specs.len())));
    }
    let n = mesh.devices();
    let mut blocks: Vec<Vec<Array>> = Vec::with_capacity(args.len());
    for (x, spec) in args.iter().zip(&sm.in_specs) {
        blocks.push((0..n).map(|d| block(&mesh, spec, d, x)).collect::<Result<_, _>>()?);
    }
    let outs = lockstep(&sm.jaxpr, &mesh, &[], blocks).map_err(|error| EvalError::Nested {
        primitive: "shard_map",
        context: format!("shard_map body over {}", sm.mesh),
        error: Box::new(error),
    })?;
    outs.iter().zip(&sm.out_specs).map(|(per_device, spec)| assemble(&mesh, spec, per_device)).collect()
}

/// Evaluates `jaxpr` on every device of `mesh` at once: `args[i][d]` is invar `i` on device
/// `d`; `consts` are the same on every device. Gives each outvar's value per device.
fn lockstep(
    jaxpr: &Jaxpr,
    mesh: &Mesh,
    consts: &[&Array],
    args: Vec<Vec<Array>>,
) -> Result<Vec<Vec<Array>>, EvalError> {
    let n = mesh.devices();
    if args.len() != jaxpr.invars.len() || consts.len() != jaxpr.constvars.len() {
        return Err(EvalError::ArgCount { expected: jaxpr.invars.len(), given: args.len() });
    }
    let mut env: Vec<Option<Vec<Array>>> = vec![None; jaxpr.vars.len()];
    for (v, c) in jaxpr.constvars.iter().zip(consts) {
        env[v.index()] = Some(vec![(*c).clone(); n]);
    }
    for (v, a) in jaxpr.invars.iter().zip(args) {
        env[v.index()] = Some(a);
    }
    let value = |env: &[Option<Vec<Array>>], atom: &Atom, d: usize| -> Result<Array, EvalError> {
        match atom {
            Atom::Lit(l) => Ok(read_literal(l)),
            Atom::Var(v) => env
                .get(v.index())
                .and_then(|x| x.as_ref())
                .map(|x| x[d].clone())
                .ok_or_else(|| EvalError::Malformed(format!("variable {v:?} is read before it has a value"))),
        }
    };
    for (index, eqn) in jaxpr.eqns.iter().enumerate() {
        let in_equation = |error: EvalError| EvalError::Equation {
            index,
            primitive: eqn.primitive.name(),
            location: eqn.source.clone(),
            error: Box::new(error),
        };
        // operands[i][d]
        let operands: Vec<Vec<Array>> = eqn
            .invars
            .iter()
            .map(|a| (0..n).map(|d| value(&env, a, d)).collect::<Result<Vec<_>, _>>())
            .collect::<Result<_, _>>()
            .map_err(in_equation)?;
        let out_avals = eqn
            .outvars
            .iter()
            .map(|&v| declared(jaxpr, v).cloned())
            .collect::<Result<Vec<Aval>, _>>()
            .map_err(in_equation)?;
        let results: Vec<Vec<Array>> = match eqn.primitive.as_collective() {
            Some(c) => vec![collective(c, eqn.primitive.name(), mesh, &operands).map_err(in_equation)?],
            None if has_collective_call(&eqn.primitive) => {
                call_lockstep(&eqn.primitive, mesh, operands).map_err(in_equation)?
            }
            None => {
                // Once per device; results[k][d].
                let mut results: Vec<Vec<Array>> = vec![Vec::with_capacity(n); eqn.outvars.len()];
                for d in 0..n {
                    let refs: Vec<&Array> = operands.iter().map(|x| &x[d]).collect();
                    let r = eval_primitive_refs(&eqn.primitive, &refs, &out_avals).map_err(in_equation)?;
                    for (k, a) in r.into_iter().enumerate() {
                        results[k].push(a);
                    }
                }
                results
            }
        };
        for (&v, r) in eqn.outvars.iter().zip(results) {
            env[v.index()] = Some(r);
        }
    }
    jaxpr.outvars.iter().map(|a| (0..n).map(|d| value(&env, a, d)).collect()).collect()
}

/// Whether `prim` is a call whose body holds a collective.
fn has_collective_call(prim: &Primitive) -> bool {
    prim.higher_order().is_some() && prim.subjaxprs().into_iter().any(|j| j.has_collective())
}

/// A call whose body holds collectives, in lockstep.
fn call_lockstep(prim: &Primitive, mesh: &Mesh, operands: Vec<Vec<Array>>) -> Result<Vec<Vec<Array>>, EvalError> {
    match prim {
        Primitive::Jit { jaxpr, .. }
        | Primitive::ClosedCall { call_jaxpr: jaxpr }
        | Primitive::CustomJvpCall { call_jaxpr: jaxpr, .. }
        | Primitive::CustomVjpCall { call_jaxpr: jaxpr, .. } => {
            let consts: Vec<&Array> = jaxpr.consts.iter().collect();
            lockstep(&jaxpr.jaxpr, mesh, &consts, operands)
        }
        Primitive::Remat2 { jaxpr, .. } => lockstep(jaxpr, mesh, &[], operands),
        other => Err(EvalError::Invalid {
            primitive: other.name(),
            message: "remat does not run collectives inside this kind of call in a shard_map body yet".to_string(),
        }),
    }
}

/// A collective's result on every device.
fn collective(
    c: Collective,
    name: &'static str,
    mesh: &Mesh,
    operands: &[Vec<Array>],
) -> Result<Vec<Array>, EvalError> {
    let n = mesh.devices();
    let x = operands.first();
    let per_device = |f: &dyn Fn(usize) -> Result<Array, EvalError>| (0..n).map(f).collect::<Result<Vec<_>, _>>();
    let known = |axes: &[String]| -> Result<(), EvalError> {
        match axes.iter().find(|a| mesh.axis(a).is_none()) {
            Some(a) => Err(invalid(name)(format!("axis '{a}' is not a manual axis of the enclosing shard_map"))),
            None => Ok(()),
        }
    };
    // Device `d`'s group along `axes`, which must have the `axis_size` the collective says.
    let sized_group = |d: usize, axes: &[String], axis_size: usize| -> Result<Vec<usize>, EvalError> {
        let members = mesh.group(d, axes);
        match members.len() == axis_size {
            true => Ok(members),
            false => Err(invalid(name)(format!("axis_size={axis_size} but {axes:?} has {}", members.len()))),
        }
    };
    let reduce = |op: BinaryOp, axes: &[String], d: usize, x: &[Array]| -> Result<Array, EvalError> {
        let members = mesh.group(d, axes);
        let mut acc = x[members[0]].clone();
        for &e in &members[1..] {
            acc = apply(&Primitive::Binary(op), &[&acc, &x[e]])?;
        }
        Ok(acc)
    };
    match c {
        Collective::AllReduce { op, axes } => (|| {
            known(axes)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            let bop = match op {
                AllReduceOp::Psum | AllReduceOp::PsumInvariant => BinaryOp::Add,
                AllReduceOp::Pmax => BinaryOp::Max,
                AllReduceOp::Pmin => BinaryOp::Min,
            };
            per_device(&|d| reduce(bop, axes, d, x))
        })(),
        Collective::AllGather { axis_name, all_gather_dimension, axis_size, tiled } => (|| {
            known(axis_name)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            per_device(&|d| {
                let members = sized_group(d, axis_name, axis_size)?;
                let parts: Vec<&Array> = members.iter().map(|&e| &x[e]).collect();
                let prim = match tiled {
                    true => Primitive::Concatenate { dimension: all_gather_dimension },
                    false => Primitive::Stack { axis: all_gather_dimension },
                };
                apply(&prim, &parts)
            })
        })(),
        Collective::AllToAll { axis_name, split_axis, concat_axis, axis_size } => (|| {
            known(axis_name)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            per_device(&|d| {
                let members = sized_group(d, axis_name, axis_size)?;
                // Chunk `me` of every member's block, concatenated in member order.
                let me = mesh.index_along(d, axis_name);
                let parts: Vec<Array> = members
                    .iter()
                    .map(|&e| {
                        let shape = x[e].shape().to_vec();
                        let chunk = shape[split_axis] / axis_size.max(1);
                        let mut start = vec![0; shape.len()];
                        let mut limit = shape.clone();
                        start[split_axis] = me * chunk;
                        limit[split_axis] = start[split_axis] + chunk;
                        apply(&Primitive::Slice { start_indices: start, limit_indices: limit, strides: None }, &[&x[e]])
                    })
                    .collect::<Result<_, _>>()?;
                apply(&Primitive::Concatenate { dimension: concat_axis }, &parts.iter().collect::<Vec<_>>())
            })
        })(),
        Collective::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled } => (|| {
            known(axis_name)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            per_device(&|d| {
                sized_group(d, axis_name, axis_size)?;
                let sum = reduce(BinaryOp::Add, axis_name, d, x)?;
                let shape = sum.shape().to_vec();
                let dim = scatter_dimension;
                let k = mesh.index_along(d, axis_name);
                let chunk = if tiled { shape[dim] / axis_size } else { 1 };
                let mut start = vec![0; shape.len()];
                let mut limit = shape.clone();
                start[dim] = k * chunk;
                limit[dim] = start[dim] + chunk;
                let part =
                    apply(&Primitive::Slice { start_indices: start, limit_indices: limit, strides: None }, &[&sum])?;
                match tiled {
                    true => Ok(part),
                    false => apply(&Primitive::Squeeze { dimensions: vec![dim] }, &[&part]),
                }
            })
        })(),
        Collective::Ppermute { axis_name, perm } => (|| {
            known(axis_name)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            per_device(&|d| {
                let members = mesh.group(d, axis_name);
                let me = mesh.index_along(d, axis_name);
                match perm.iter().find(|&&(_, dst)| dst == me) {
                    Some(&(src, _)) => {
                        let from = members.get(src).ok_or_else(|| {
                            invalid(name)(format!(
                                "perm sends from {src}, beyond the {} devices of {axis_name:?}",
                                members.len()
                            ))
                        })?;
                        Ok(x[*from].clone())
                    }
                    None => Ok(Array::zeros(&x[d].aval())),
                }
            })
        })(),
        Collective::Pbroadcast { axis_name, source } => (|| {
            known(axis_name)?;
            let x = x.ok_or_else(|| invalid(name)("expected one operand".into()))?;
            per_device(&|d| {
                let members = mesh.group(d, axis_name);
                let from = members.get(source).ok_or_else(|| {
                    invalid(name)(format!("source {source} is beyond the {} devices of {axis_name:?}", members.len()))
                })?;
                Ok(x[*from].clone())
            })
        })(),
        Collective::AxisIndex { axis_name } => (|| {
            let axes = [axis_name.to_string()];
            known(&axes)?;
            per_device(&|d| Ok(Array::I32(ndarray::arr0(mesh.index_along(d, &axes) as i32).into_dyn())))
        })(),
    }
}
