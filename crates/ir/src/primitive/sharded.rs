//! Sharding annotations and collectives: `sharding_constraint`, `reshard`, `shard_map`,
//! `psum`/`psum_invariant`/`pmax`/`pmin`, `pvary`, `all_gather`, `reduce_scatter`,
//! `ppermute`, `axis_index`, `pbroadcast`; and the text form of meshes, partition specs and
//! shardings inside parameters (their types are `crate::sharding`).
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, `parse_*`) and
//! its shape rule (`*_shape`, from JAX 0.10.2's `jax/_src/pjit.py`, `shard_map.py` and
//! `lax/parallel.py`). Inside a `shard_map` body avals are per-device blocks and carry the
//! mesh axes they vary over (`f32[16,8]{V:data}`); a collective's rule says how its result
//! varies: `psum_invariant`/`pmax`/`pmin` over `axes` drop those axes, `pvary` adds them,
//! the others keep the operand's.

use std::sync::Arc;

use super::params::{ParamReader, Params};
use super::Primitive;
use crate::jaxpr::{Jaxpr, ShardMap};
use crate::param::Param;
use crate::param_types::AllReduceOp;
use crate::shape::{arity, bail, ensure, ShapeError};
use crate::sharding::{
    AbstractDevices, AxisType, Mesh, MeshAxis, PartitionSpec, Sharding, ShardingConstraint, SpecEntry,
};
use crate::types::{Aval, DType, Vma};

// ---- meshes, specs and shardings as parameter values --------------------------------

/// A mesh, a spec or a sharding as a parameter value: its JAX text, which the printer writes
/// as it is.
fn text(x: impl std::fmt::Display) -> Param {
    Param::Opaque(x.to_string())
}

fn string_of(p: &Param) -> Option<&str> {
    match p {
        Param::Str(s) | Param::Word(s) => Some(s),
        _ => None,
    }
}

/// `Mesh('data': 4, 'model': 2, axis_types=(Auto, Auto))` or `Mesh()`.
pub(super) fn mesh_of(p: &Param) -> Result<Mesh, String> {
    let Param::Call { func, args, kwargs } = p else {
        return Err(format!("expected a mesh `Mesh('data': 4, ...)`, found {}", p.kind()));
    };
    if func != "Mesh" && func != "AbstractMesh" {
        return Err(format!("expected a mesh `Mesh(...)` or `AbstractMesh(...)`, found `{func}(...)`"));
    }
    let mut axes = Vec::new();
    for a in args {
        let Param::Entry(k, v) = a else {
            return Err(format!("a mesh lists its axes as 'name': size, found {}", a.repr()));
        };
        let (Param::Str(name), Some(size)) = (&**k, v.as_int()) else {
            return Err(format!("a mesh lists its axes as 'name': size, found {}", a.repr()));
        };
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| format!("mesh axis '{name}' has size {size}"))?;
        if axes.iter().any(|x: &MeshAxis| &x.name == name) {
            return Err(format!("mesh axis '{name}' is listed twice"));
        }
        axes.push(MeshAxis { name: name.clone(), size, axis_type: AxisType::Auto });
    }
    let (kwargs, abstract_devices) = if func == "AbstractMesh" {
        let n = kwargs.len();
        let keys: Vec<&str> = kwargs.iter().map(|(k, _)| k.as_str()).collect();
        if n < 3 || keys[n - 3..] != ["device_kind", "num_cores", "platform"] {
            return Err(format!("an AbstractMesh ends with device_kind=, num_cores=, platform=, found {}", p.repr()));
        }
        let word = |v: &Param| match v {
            Param::Word(w) => Ok(w.clone()),
            other => Err(format!("AbstractMesh: expected a name, found {}", other.repr())),
        };
        let num_cores = match &kwargs[n - 2].1 {
            Param::None => None,
            v => Some(v.as_int().ok_or_else(|| format!("AbstractMesh: num_cores={}", v.repr()))?),
        };
        let devices =
            AbstractDevices { device_kind: word(&kwargs[n - 3].1)?, num_cores, platform: word(&kwargs[n - 1].1)? };
        (&kwargs[..n - 3], Some(devices))
    } else {
        (kwargs.as_slice(), None)
    };
    match kwargs {
        [] if axes.is_empty() => {}
        [(k, Param::Tuple(types))] if k == "axis_types" => {
            if types.len() != axes.len() {
                return Err(format!("a mesh of {} axes has {} axis_types", axes.len(), types.len()));
            }
            for (a, t) in axes.iter_mut().zip(types) {
                let name = match t {
                    Param::Word(w) => w.as_str(),
                    other => return Err(format!("axis_types holds {}, not an axis type", other.repr())),
                };
                a.axis_type = AxisType::from_name(name)
                    .ok_or_else(|| format!("unknown axis type `{name}` (Auto, Explicit, Manual)"))?;
                if a.axis_type == AxisType::Explicit {
                    return Err(format!(
                        "mesh axis '{}' is Explicit: remat reads meshes with Auto axes (explicit sharding in types \
                         is not read yet)",
                        a.name
                    ));
                }
            }
        }
        _ => return Err(format!("a mesh takes its axes and axis_types=(...), found {}", p.repr())),
    }
    Ok(Mesh { axes, abstract_devices })
}

/// `P(None, 'model')`, `P(('data', 'model'),)`, `P(UNCONSTRAINED)`, `P()`.
pub(super) fn spec_of(p: &Param) -> Result<PartitionSpec, String> {
    let Param::Call { func, args, kwargs } = p else {
        return Err(format!("expected a partition spec `P(...)`, found {}", p.kind()));
    };
    if func != "P" || !kwargs.is_empty() {
        return Err(format!(
            "expected a partition spec `P(...)` without keywords, found {} (unreduced and reduced specs are not \
             read yet)",
            p.repr()
        ));
    }
    let names = |items: &[Param]| -> Result<Vec<String>, String> {
        items
            .iter()
            .map(|x| string_of(x).map(str::to_string).ok_or_else(|| format!("a spec names axes, found {}", x.repr())))
            .collect()
    };
    let entries = args
        .iter()
        .map(|a| match a {
            Param::None => Ok(SpecEntry::Replicated),
            Param::Word(w) if w == "UNCONSTRAINED" => Ok(SpecEntry::Unconstrained),
            Param::Str(s) => Ok(SpecEntry::Axes(vec![s.clone()])),
            Param::Tuple(items) if !items.is_empty() => Ok(SpecEntry::Axes(names(items)?)),
            other => {
                Err(format!("a partition spec entry is None, an axis name or a tuple of them, found {}", other.repr()))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PartitionSpec(entries))
}

fn kwarg<'a>(kwargs: &'a [(String, Param)], key: &str, what: &str) -> Result<&'a Param, String> {
    kwargs.iter().find(|(k, _)| k == key).map(|(_, v)| v).ok_or_else(|| format!("{what} is missing {key}="))
}

/// Whether a parameter named `key` is a result's sharding (`reshape[... sharding=...]`,
/// `reduce_sum[... out_sharding=...]`): `None` unless JAX's rules give one, which inside
/// `shard_map` they do (a replicated spec on the abstract mesh of the manual axes).
/// (`sharding_constraint`'s `sharding` is its parameter, not this.)
pub fn is_result_sharding(prim: &str, key: &str) -> bool {
    prim != "sharding_constraint" && matches!(key, "sharding" | "out_sharding")
}

/// `NamedSharding(...)`, `SingleDeviceSharding(...)` or `UnspecifiedValue`.
pub fn sharding_of(p: &Param) -> Result<Sharding, String> {
    match p {
        Param::Word(w) if w == "UnspecifiedValue" => Ok(Sharding::Unspecified),
        Param::Call { func, args, kwargs } if args.is_empty() && func == "NamedSharding" => {
            let keys: Vec<&str> = kwargs.iter().map(|(k, _)| k.as_str()).collect();
            if keys != ["mesh", "spec", "memory_kind"] && keys != ["mesh", "spec"] {
                return Err(format!("NamedSharding takes mesh=, spec= and memory_kind=, found {}", p.repr()));
            }
            let mesh = mesh_of(kwarg(kwargs, "mesh", "NamedSharding")?)?;
            let spec = spec_of(kwarg(kwargs, "spec", "NamedSharding")?)?;
            let memory_kind = match keys.len() {
                3 => Some(memory_kind_of(kwarg(kwargs, "memory_kind", "NamedSharding")?)?),
                _ => None,
            };
            for name in spec.all_axes() {
                if mesh.axis(&name).is_none() {
                    return Err(format!("NamedSharding: spec {spec} names axis '{name}', which {mesh} does not have"));
                }
            }
            Ok(Sharding::Named { mesh, spec, memory_kind })
        }
        Param::Call { func, args, kwargs } if args.is_empty() && func == "SingleDeviceSharding" => {
            let device = match kwarg(kwargs, "device", "SingleDeviceSharding")? {
                Param::Call { func, args, kwargs } if func == "CpuDevice" && args.is_empty() && kwargs.len() == 1 => {
                    let id = kwarg(kwargs, "id", "CpuDevice")?;
                    id.as_int()
                        .and_then(|i| usize::try_from(i).ok())
                        .ok_or_else(|| format!("CpuDevice id {}", id.repr()))?
                }
                other => {
                    return Err(format!("SingleDeviceSharding: device must be CpuDevice(id=N), found {}", other.repr()))
                }
            };
            let memory_kind = memory_kind_of(kwarg(kwargs, "memory_kind", "SingleDeviceSharding")?)?;
            if kwargs.len() != 2 {
                return Err(format!("SingleDeviceSharding takes device= and memory_kind=, found {}", p.repr()));
            }
            Ok(Sharding::SingleDevice { device, memory_kind })
        }
        other => Err(format!(
            "expected a sharding (NamedSharding, SingleDeviceSharding or UnspecifiedValue), found {}",
            other.repr()
        )),
    }
}

fn memory_kind_of(p: &Param) -> Result<String, String> {
    match p {
        Param::Word(w) if w == "device" || w == "pinned_host" || w == "unpinned_host" => Ok(w.clone()),
        other => Err(format!("memory_kind must be device, pinned_host or unpinned_host, found {}", other.repr())),
    }
}

/// `in_shardings=(...)` / `out_shardings=(...)` of `jit`, one per operand or result.
pub(super) fn shardings_of(p: &Param) -> Result<Vec<Sharding>, String> {
    p.as_seq()
        .ok_or_else(|| format!("expected a tuple of shardings, found {}", p.kind()))?
        .iter()
        .map(sharding_of)
        .collect()
}

pub(super) fn shardings_param(shardings: &[Sharding]) -> Param {
    Param::Tuple(shardings.iter().map(text).collect())
}

fn axis_names_of(prim: &str, key: &str, p: &Param) -> Result<Vec<String>, String> {
    let items = match p {
        Param::Tuple(items) => items.as_slice(),
        single @ (Param::Str(_) | Param::Word(_)) => std::slice::from_ref(single),
        other => return Err(format!("{prim}: `{key}` must name mesh axes, found {}", other.repr())),
    };
    let names: Vec<String> = items
        .iter()
        .map(|x| match x {
            Param::Str(s) | Param::Word(s) => Ok(s.clone()),
            Param::Int(_) => Err(format!(
                "{prim}: `{key}` holds a positional axis {} (a collective over vmapped axes is not read)",
                x.repr()
            )),
            other => Err(format!("{prim}: `{key}` must name mesh axes, found {}", other.repr())),
        })
        .collect::<Result<_, _>>()?;
    if names.is_empty() {
        return Err(format!("{prim}: `{key}` names no axis"));
    }
    Ok(names)
}

fn names_param(names: &[String]) -> Param {
    Param::Tuple(names.iter().map(|n| Param::Str(n.clone())).collect())
}

fn specs_of(p: &mut ParamReader, key: &str) -> Result<Vec<PartitionSpec>, String> {
    let prim = p.prim().to_string();
    p.seq(key)?.iter().map(|s| spec_of(s).map_err(|e| format!("{prim}: {key}: {e}"))).collect()
}

// ---- sharding_constraint, reshard -------------------------------------------------------

// `sharding_constraint[context_mesh=Mesh() layout=None sharding=NamedSharding(...)
// unconstrained_dims=frozenset({})]`: sorted, all printed.

pub(super) fn sharding_constraint_params(c: &ShardingConstraint) -> Params {
    vec![
        ("context_mesh", text(&c.context_mesh)),
        ("layout", Param::None),
        ("sharding", text(&c.sharding)),
        ("unconstrained_dims", Param::FrozenSet(c.unconstrained_dims.iter().map(|&d| Param::Int(d as i64)).collect())),
    ]
}

pub(super) fn parse_sharding_constraint(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "sharding_constraint";
    let context_mesh = mesh_of(&p.take("context_mesh")?).map_err(|e| format!("{name}: context_mesh: {e}"))?;
    if !p.is_none("layout") {
        let layout = p.take("layout")?;
        return Err(format!("{name}: only layout=None is read, found {}", layout.repr()));
    }
    p.take("layout")?;
    let sharding = sharding_of(&p.take("sharding")?).map_err(|e| format!("{name}: sharding: {e}"))?;
    let unconstrained_dims = match p.take("unconstrained_dims")? {
        Param::FrozenSet(xs) => {
            let mut dims = xs
                .iter()
                .map(|x| x.as_int().and_then(|d| usize::try_from(d).ok()))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| format!("{name}: unconstrained_dims must hold dimensions"))?;
            dims.sort_unstable();
            dims
        }
        other => return Err(format!("{name}: unconstrained_dims must be a frozenset, found {}", other.repr())),
    };
    Ok(Primitive::ShardingConstraint(Box::new(ShardingConstraint { sharding, context_mesh, unconstrained_dims })))
}

impl Primitive {
    /// The `sharding_constraint` that says what a `jit`'s sharding of an operand or result
    /// says, for a pass that inlines the call (`None` for a sharding that names no mesh:
    /// nothing to say).
    pub fn constraint_for(s: &Sharding) -> Option<Primitive> {
        matches!(s, Sharding::Named { .. }).then(|| {
            Primitive::ShardingConstraint(Box::new(ShardingConstraint {
                sharding: s.clone(),
                context_mesh: Mesh::default(),
                unconstrained_dims: Vec::new(),
            }))
        })
    }
}

pub(crate) fn sharding_constraint_shape(c: &ShardingConstraint, ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "sharding_constraint";
    let [x] = arity(name, ins)?;
    if let Sharding::Named { spec, .. } = &c.sharding {
        ensure!(spec.0.len() <= x.rank(), name, "spec {spec} has more entries than {x} has dimensions");
    }
    for &d in &c.unconstrained_dims {
        ensure!(d < x.rank(), name, "unconstrained dimension {d} is out of range for {x}");
    }
    Ok(vec![x.clone()])
}

pub(crate) fn reshard_shape(ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("reshard", ins)?;
    Ok(vec![x.clone()])
}

// ---- shard_map ---------------------------------------------------------------------------

// `shard_map[check_vma=True in_specs=(...) jaxpr={...} mesh=Mesh(...)
// newly_manual_axes=frozenset({'data', 'model'}) out_specs=(...)]`: sorted, all printed.

pub(super) fn shard_map_params(sm: &ShardMap) -> Params {
    vec![
        ("check_vma", Param::Bool(sm.check_vma)),
        ("in_specs", Param::Tuple(sm.in_specs.iter().map(text).collect())),
        ("jaxpr", Param::Jaxpr(sm.jaxpr.clone())),
        ("mesh", text(&sm.mesh)),
        ("newly_manual_axes", Param::FrozenSet(sm.manual_axes.iter().map(|n| Param::Str(n.clone())).collect())),
        ("out_specs", Param::Tuple(sm.out_specs.iter().map(text).collect())),
    ]
}

pub(super) fn parse_shard_map(p: &mut ParamReader) -> Result<Primitive, String> {
    let name = "shard_map";
    let check_vma = p.bool("check_vma")?;
    let in_specs = specs_of(p, "in_specs")?;
    let jaxpr: Arc<Jaxpr> = p.jaxpr("jaxpr")?;
    let mesh = mesh_of(&p.take("mesh")?).map_err(|e| format!("{name}: mesh: {e}"))?;
    let mut manual_axes = match p.take("newly_manual_axes")? {
        Param::FrozenSet(xs) => xs
            .iter()
            .map(|x| match x {
                Param::Str(s) => Ok(s.clone()),
                other => Err(format!("{name}: newly_manual_axes must hold axis names, found {}", other.repr())),
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => return Err(format!("{name}: newly_manual_axes must be a frozenset, found {}", other.repr())),
    };
    manual_axes.sort();
    let out_specs = specs_of(p, "out_specs")?;
    for a in &manual_axes {
        if mesh.axis(a).is_none() {
            return Err(format!("{name}: newly_manual_axes names '{a}', which {} does not have", mesh));
        }
    }
    for spec in in_specs.iter().chain(&out_specs) {
        for a in spec.all_axes() {
            if !manual_axes.contains(&a) {
                return Err(format!("{name}: spec {spec} names '{a}', which is not a manual axis of this shard_map"));
            }
        }
        if spec.0.contains(&SpecEntry::Unconstrained) {
            return Err(format!("{name}: spec {spec} is UNCONSTRAINED; shard_map's specs are not"));
        }
    }
    // JAX prints no axis size on `all_to_all`: the mesh says it.
    let jaxpr = with_all_to_all_sizes(&jaxpr, &mesh);
    Ok(Primitive::ShardMap(Box::new(ShardMap { jaxpr, mesh, in_specs, out_specs, check_vma, manual_axes })))
}

/// `j` with each `all_to_all` inside it (at any depth) given the size of its axes in `mesh`.
fn with_all_to_all_sizes(j: &Arc<Jaxpr>, mesh: &Mesh) -> Arc<Jaxpr> {
    let holds = |j: &Jaxpr| -> bool {
        fn any(j: &Jaxpr) -> bool {
            j.eqns.iter().any(|e| {
                matches!(e.primitive, Primitive::AllToAll { .. }) || e.primitive.subjaxprs().into_iter().any(|b| any(b))
            })
        }
        any(j)
    };
    if !holds(j) {
        return Arc::clone(j);
    }
    let mut out = (**j).clone();
    for e in &mut out.eqns {
        if let Primitive::AllToAll { axis_name, axis_size, .. } = &mut e.primitive {
            *axis_size = mesh.size_of(axis_name).unwrap_or(0);
        } else if !e.primitive.subjaxprs().is_empty() {
            e.primitive = e.primitive.map_subjaxprs(|b| with_all_to_all_sizes(b, mesh));
        }
    }
    Arc::new(out)
}

/// A global aval's block on one device under `spec`: each split dimension divided by the
/// product of its axes' sizes (which must divide it).
pub fn block_aval(name: &str, mesh: &Mesh, spec: &PartitionSpec, x: &Aval) -> Result<Aval, ShapeError> {
    ensure!(spec.0.len() <= x.rank(), name, "spec {spec} has more entries than {x} has dimensions");
    let mut shape = x.shape.clone();
    for (d, extent) in shape.iter_mut().enumerate() {
        let axes = spec.axes_of(d);
        let Some(k) = mesh.size_of(axes) else { bail!(name, "spec {spec} names an axis {mesh} does not have") };
        ensure!(*extent % k == 0, name, "dimension {d} of {x} is not divisible by {k}, the size of {axes:?}");
        *extent /= k;
    }
    Ok(Aval { shape, vma: Vma::default(), ..x.clone() })
}

/// What a block `b` of a result becomes outside under `spec`: each split dimension
/// multiplied by its axes' sizes.
pub fn global_aval(mesh: &Mesh, spec: &PartitionSpec, b: &Aval) -> Aval {
    let mut shape = b.shape.clone();
    for (d, extent) in shape.iter_mut().enumerate() {
        *extent *= mesh.size_of(spec.axes_of(d)).unwrap_or(1);
    }
    Aval { shape, vma: Vma::default(), ..b.clone() }
}

pub(crate) fn shard_map_shape(sm: &ShardMap, ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "shard_map";
    let body = &sm.jaxpr;
    ensure!(body.constvars.is_empty(), name, "the body has {} constvars; JAX's has none", body.constvars.len());
    ensure!(
        ins.len() == body.invars.len() && ins.len() == sm.in_specs.len(),
        name,
        "{} operands, {} in_specs and {} body inputs differ",
        ins.len(),
        sm.in_specs.len(),
        body.invars.len()
    );
    ensure!(
        body.outvars.len() == sm.out_specs.len(),
        name,
        "{} body outputs but {} out_specs",
        body.outvars.len(),
        sm.out_specs.len()
    );
    let order = sm.mesh.axis_names();
    for (i, ((x, spec), v)) in ins.iter().zip(&sm.in_specs).zip(&body.invars).enumerate() {
        let block = block_aval(name, &sm.mesh, spec, x)?;
        let Some(inner) = body.vars.get(v.index()) else { bail!(name, "body input {i} is out of range") };
        let inner = &inner.aval;
        ensure!(
            inner.same_type(&block) && inner.memory_space == block.memory_space,
            name,
            "operand {i} is {x}; its block under {spec} is {block}, but the body takes {inner}"
        );
        if sm.check_vma {
            let want = Vma::new(spec.all_axes()).ordered(&order);
            ensure!(
                inner.vma == want,
                name,
                "operand {i}'s block under {spec} varies over {want:?} but the body's input {inner} says otherwise"
            );
        }
    }
    let mut out = Vec::new();
    for (i, (a, spec)) in body.outvars.iter().zip(&sm.out_specs).enumerate() {
        let b = match a {
            crate::jaxpr::Atom::Var(v) => match body.vars.get(v.index()) {
                Some(d) => d.aval.clone(),
                None => bail!(name, "body output {i} is out of range"),
            },
            crate::jaxpr::Atom::Lit(l) => l.aval(),
        };
        ensure!(spec.0.len() <= b.rank(), name, "out spec {spec} has more entries than body output {i} ({b})");
        if sm.check_vma {
            let mapped = spec.all_axes();
            for axis in b.vma.names() {
                ensure!(
                    mapped.contains(axis),
                    name,
                    "body output {i} ({b}) varies over '{axis}' but out spec {spec} does not split over it"
                );
            }
        }
        out.push(global_aval(&sm.mesh, spec, &b));
    }
    Ok(out)
}

// ---- collectives ---------------------------------------------------------------------------

// `psum[axes=('model',) axis_index_groups=None]`, `pmax[...]`, `pmin[...]`;
// `psum_invariant[axes=('model',)]`.

pub(super) fn all_reduce_params(op: AllReduceOp, axes: &[String]) -> Params {
    let mut ps = vec![("axes", names_param(axes))];
    match op {
        AllReduceOp::Psum | AllReduceOp::Pmax | AllReduceOp::Pmin => ps.push(("axis_index_groups", Param::None)),
        AllReduceOp::PsumInvariant => {}
    }
    ps
}

pub(super) fn parse_all_reduce(op: AllReduceOp, p: &mut ParamReader) -> Result<Primitive, String> {
    let axes = axis_names_of(op.name(), "axes", &p.take("axes")?)?;
    match op {
        AllReduceOp::Psum | AllReduceOp::Pmax | AllReduceOp::Pmin => axis_index_groups_none(p)?,
        AllReduceOp::PsumInvariant => {}
    }
    Ok(Primitive::AllReduce { op, axes })
}

fn axis_index_groups_none(p: &mut ParamReader) -> Result<(), String> {
    match p.take("axis_index_groups")? {
        Param::None => Ok(()),
        other => Err(format!("{}: only axis_index_groups=None is read, found {}", p.prim(), other.repr())),
    }
}

pub(crate) fn all_reduce_shape(op: AllReduceOp, axes: &[String], ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    let [x] = arity(name, ins)?;
    ensure!(x.dtype.is_numeric() || x.dtype == DType::Bool, name, "operand must be numbers, found {x}");
    // With check_vma the result no longer varies over `axes` (JAX's psum_invariant rule;
    // pmax and pmin follow it too); without it no aval varies.
    Ok(vec![Aval { vma: x.vma.without(axes), ..x.clone() }])
}

// `pvary[axes=('data',)]`.

pub(super) fn pvary_params(axes: &[String]) -> Params {
    vec![("axes", names_param(axes))]
}

pub(super) fn parse_pvary(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::Pvary { axes: axis_names_of("pvary", "axes", &p.take("axes")?)? })
}

pub(crate) fn pvary_shape(axes: &[String], ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "pvary";
    let [x] = arity(name, ins)?;
    for a in axes {
        ensure!(!x.vma.contains(a), name, "{x} already varies over '{a}'");
    }
    let mut names = x.vma.names().to_vec();
    names.extend(axes.iter().cloned());
    Ok(vec![Aval { vma: Vma::new(names), ..x.clone() }])
}

// `all_gather[all_gather_dimension=0 axis_index_groups=None axis_name=('model',)
// axis_size=2 tiled=True]`.

// `all_gather_invariant[all_gather_dimension=0 axis_name=('model',) axis_size=2 tiled=True]`
// (no `axis_index_groups`).

pub(super) fn all_gather_params(
    axis_name: &[String],
    dimension: usize,
    axis_size: usize,
    tiled: bool,
    invariant: bool,
) -> Params {
    let mut out = vec![("all_gather_dimension", Param::Int(dimension as i64))];
    if !invariant {
        out.push(("axis_index_groups", Param::None));
    }
    out.extend([
        ("axis_name", names_param(axis_name)),
        ("axis_size", Param::Int(axis_size as i64)),
        ("tiled", Param::Bool(tiled)),
    ]);
    out
}

pub(super) fn parse_all_gather(p: &mut ParamReader, invariant: bool) -> Result<Primitive, String> {
    let name = if invariant { "all_gather_invariant" } else { "all_gather" };
    let all_gather_dimension = p.usize("all_gather_dimension")?;
    if !invariant {
        axis_index_groups_none(p)?;
    }
    let axis_name = axis_names_of(name, "axis_name", &p.take("axis_name")?)?;
    let axis_size = p.usize("axis_size")?;
    let tiled = p.bool("tiled")?;
    Ok(Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, invariant })
}

pub(crate) fn all_gather_shape(
    axis_name: &[String],
    dimension: usize,
    axis_size: usize,
    tiled: bool,
    invariant: bool,
    ins: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = if invariant { "all_gather_invariant" } else { "all_gather" };
    let [x] = arity(name, ins)?;
    ensure!(axis_size > 0, name, "axis_size is 0");
    let mut shape = x.shape.clone();
    if tiled {
        ensure!(dimension < x.rank(), name, "all_gather_dimension {dimension} is out of range for {x}");
        shape[dimension] *= axis_size;
    } else {
        ensure!(dimension <= x.rank(), name, "all_gather_dimension {dimension} is out of range for {x}");
        shape.insert(dimension, axis_size);
    }
    // The invariant gather's result is the same on every device of its axes.
    let vma = match invariant {
        true => Vma::new(x.vma.names().iter().filter(|n| !axis_name.contains(n)).cloned().collect::<Vec<_>>()),
        false => x.vma.clone(),
    };
    Ok(vec![Aval { shape, vma, ..x.clone() }])
}

// `all_to_all[axis_index_groups=None axis_name=model concat_axis=0 split_axis=1 tiled=True]`.

pub(super) fn all_to_all_params(
    axis_name: &[String],
    bare_name: bool,
    split_axis: usize,
    concat_axis: usize,
    tiled: bool,
) -> Params {
    let name = match (bare_name, axis_name) {
        (true, [one]) => Param::Word(one.clone()),
        _ => names_param(axis_name),
    };
    vec![
        ("axis_index_groups", Param::None),
        ("axis_name", name),
        ("concat_axis", Param::Int(concat_axis as i64)),
        ("split_axis", Param::Int(split_axis as i64)),
        ("tiled", Param::Bool(tiled)),
    ]
}

pub(super) fn parse_all_to_all(p: &mut ParamReader) -> Result<Primitive, String> {
    axis_index_groups_none(p)?;
    let raw = p.take("axis_name")?;
    let bare_name = matches!(raw, Param::Word(_) | Param::Str(_));
    let axis_name = axis_names_of("all_to_all", "axis_name", &raw)?;
    let concat_axis = p.usize("concat_axis")?;
    let split_axis = p.usize("split_axis")?;
    let tiled = p.bool("tiled")?;
    Ok(Primitive::AllToAll { axis_name, bare_name, split_axis, concat_axis, tiled, axis_size: 0 })
}

/// JAX's `_all_to_all_abstract_eval`: `split_axis` divided by the axis size, `concat_axis`
/// multiplied by it (the same shape when they are one dimension).
pub(crate) fn all_to_all_shape(
    split_axis: usize,
    concat_axis: usize,
    axis_size: usize,
    ins: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "all_to_all";
    let [x] = arity(name, ins)?;
    ensure!(axis_size > 0, name, "no enclosing shard_map's mesh gives the size of its axes");
    ensure!(
        split_axis < x.rank() && concat_axis < x.rank(),
        name,
        "split_axis {split_axis} or concat_axis {concat_axis} is out of range for {x}"
    );
    ensure!(
        x.shape[split_axis] % axis_size == 0,
        name,
        "dimension {split_axis} of {x} is not divisible by the axis size {axis_size}"
    );
    let mut shape = x.shape.clone();
    shape[split_axis] /= axis_size;
    shape[concat_axis] *= axis_size;
    Ok(vec![Aval { shape, ..x.clone() }])
}

/// `shard_alike x y`: both unchanged (of the same shape, as JAX requires).
pub(crate) fn shard_alike_shape(ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x, y] = arity("shard_alike", ins)?;
    ensure!(x.shape == y.shape, "shard_alike", "operands {x} and {y} differ in shape");
    Ok(vec![x.clone(), y.clone()])
}

// `reduce_scatter[axis_index_groups=None axis_name=('model',) axis_size=2
// scatter_dimension=0 tiled=True]`.

pub(super) fn reduce_scatter_params(axis_name: &[String], dimension: usize, axis_size: usize, tiled: bool) -> Params {
    vec![
        ("axis_index_groups", Param::None),
        ("axis_name", names_param(axis_name)),
        ("axis_size", Param::Int(axis_size as i64)),
        ("scatter_dimension", Param::Int(dimension as i64)),
        ("tiled", Param::Bool(tiled)),
    ]
}

pub(super) fn parse_reduce_scatter(p: &mut ParamReader) -> Result<Primitive, String> {
    axis_index_groups_none(p)?;
    let axis_name = axis_names_of("reduce_scatter", "axis_name", &p.take("axis_name")?)?;
    let axis_size = p.usize("axis_size")?;
    let scatter_dimension = p.usize("scatter_dimension")?;
    let tiled = p.bool("tiled")?;
    Ok(Primitive::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled })
}

pub(crate) fn reduce_scatter_shape(
    dimension: usize,
    axis_size: usize,
    tiled: bool,
    ins: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "reduce_scatter";
    let [x] = arity(name, ins)?;
    ensure!(dimension < x.rank(), name, "scatter_dimension {dimension} is out of range for {x}");
    ensure!(axis_size > 0, name, "axis_size is 0");
    let mut shape = x.shape.clone();
    if tiled {
        ensure!(
            shape[dimension] % axis_size == 0,
            name,
            "dimension {dimension} of {x} is not divisible by {axis_size}"
        );
        shape[dimension] /= axis_size;
    } else {
        ensure!(shape[dimension] == axis_size, name, "dimension {dimension} of {x} must equal axis_size={axis_size}");
        shape.remove(dimension);
    }
    Ok(vec![Aval { shape, ..x.clone() }])
}

// `ppermute[axis_name=('stage',) perm=((0, 1), (1, 2))]`.

pub(super) fn ppermute_params(axis_name: &[String], perm: &[(usize, usize)]) -> Params {
    let pairs = perm.iter().map(|&(s, d)| Param::Tuple(vec![Param::Int(s as i64), Param::Int(d as i64)])).collect();
    vec![("axis_name", names_param(axis_name)), ("perm", Param::Tuple(pairs))]
}

pub(super) fn parse_ppermute(p: &mut ParamReader) -> Result<Primitive, String> {
    let axis_name = axis_names_of("ppermute", "axis_name", &p.take("axis_name")?)?;
    let perm = p
        .seq("perm")?
        .iter()
        .map(|pair| match super::params::usizes_of(pair).as_deref() {
            Some(&[s, d]) => Ok((s, d)),
            _ => Err(format!("ppermute: perm holds {}, not a (source, destination) pair", pair.repr())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (i, &(s, d)) in perm.iter().enumerate() {
        if perm[..i].iter().any(|&(s2, d2)| s2 == s || d2 == d) {
            return Err(format!("ppermute: perm sends from {s} or to {d} twice"));
        }
    }
    Ok(Primitive::Ppermute { axis_name, perm })
}

pub(crate) fn ppermute_shape(ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("ppermute", ins)?;
    Ok(vec![x.clone()])
}

// `axis_index[axis_name=model]`.

pub(super) fn axis_index_params(axis_name: &str) -> Params {
    vec![("axis_name", Param::Word(axis_name.to_string()))]
}

pub(super) fn parse_axis_index(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::AxisIndex { axis_name: p.word("axis_name")? })
}

pub(crate) fn axis_index_shape(axis_name: &str, ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [] = arity("axis_index", ins)?;
    // With check_vma the index varies over its axis; the verifier accepts a body that
    // tracks no varying axes (check_vma=False) too.
    Ok(vec![Aval::scalar(DType::I32).with_vma(Vma::new([axis_name]))])
}

// `pbroadcast[axis_name=('model',) source=1]`.

pub(super) fn pbroadcast_params(axis_name: &[String], source: usize) -> Params {
    vec![("axis_name", names_param(axis_name)), ("source", Param::Int(source as i64))]
}

pub(super) fn parse_pbroadcast(p: &mut ParamReader) -> Result<Primitive, String> {
    let axis_name = axis_names_of("pbroadcast", "axis_name", &p.take("axis_name")?)?;
    Ok(Primitive::Pbroadcast { axis_name, source: p.usize("source")? })
}

pub(crate) fn pbroadcast_shape(ins: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("pbroadcast", ins)?;
    Ok(vec![x.clone()])
}

/// JAX's `standard_vma_rule` for the primitives that are not collectives or calls: the
/// result varies over what the operands vary over. Operands that vary over nothing (a
/// literal, a value the same on every device) take any; two that vary over different
/// axes are an error, as in JAX (which inserts `pvary` so that they agree).
pub(crate) fn standard_vma(name: &str, ins: &[Aval]) -> Result<Vma, ShapeError> {
    let mut vma: Option<&Vma> = None;
    for x in ins.iter().filter(|x| !x.vma.is_empty()) {
        match vma {
            None => vma = Some(&x.vma),
            Some(v) => ensure!(
                *v == x.vma,
                name,
                "operands vary over different mesh axes ({} and {}); JAX inserts pvary so that they agree",
                v,
                x.vma
            ),
        }
    }
    Ok(vma.cloned().unwrap_or_default())
}

/// A collective, borrowed from its primitive ([`Primitive::as_collective`]): what a
/// backend that runs a `shard_map` body device by device must exchange between the devices.
#[derive(Clone, Copy, Debug)]
pub enum Collective<'a> {
    AllReduce { op: AllReduceOp, axes: &'a [String] },
    AllGather { axis_name: &'a [String], all_gather_dimension: usize, axis_size: usize, tiled: bool },
    AllToAll { axis_name: &'a [String], split_axis: usize, concat_axis: usize, axis_size: usize },
    ReduceScatter { axis_name: &'a [String], scatter_dimension: usize, axis_size: usize, tiled: bool },
    Ppermute { axis_name: &'a [String], perm: &'a [(usize, usize)] },
    AxisIndex { axis_name: &'a str },
    Pbroadcast { axis_name: &'a [String], source: usize },
}
