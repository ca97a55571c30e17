//! What a forward jaxpr saves, described and worded exactly as JAX's
//! `jax.ad_checkpoint.saved_residuals` and `print_saved_residuals` do.
//!
//! This module only reads a forward jaxpr that is given to it; `vjp.rs` computes the split
//! and calls it (`vjp` -> `residuals`, never the reverse), and `saved_residuals`,
//! `print_saved_residuals` and `fwd_bwd_strings` live there. Laying the two programs out
//! on a terminal is the facade's (`remat::side_by_side`).
//!
//! JAX's order (`_saved_residuals`): literals, then constants, then arguments in argument
//! order, then equation outputs in forward-program order; a `reduce_precision` producer is
//! looked through. An equation output is `named '{name}'` for `name`, `output of jitted
//! function '{name}'` for `jit`, else `output of {primitive}`; its source is
//! `file:line:col (function)`, with `:col` left out when 0 and ` (function)` when unknown.

use std::collections::HashMap;
use std::fmt;

use remat_ir::{Atom, Aval, Jaxpr, PartitionSpec, Primitive, Sharding, SourceInfo, Var};

/// What a residual is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResidualKind {
    Literal,
    Constant,
    /// An input of the function, by its argument name.
    Argument(String),
    /// The output of an equation of this primitive.
    Output(String),
    /// The output of a `checkpoint_name`.
    Named(String),
    /// The output of a `jit` call of this name.
    Jit(String),
}

impl ResidualKind {
    /// The conformance data's `kind` field.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ResidualKind::Literal => "literal",
            ResidualKind::Constant => "constant",
            ResidualKind::Argument(_) => "argument",
            ResidualKind::Output(_) => "output",
            ResidualKind::Named(_) => "named",
            ResidualKind::Jit(_) => "jit",
        }
    }

    /// The conformance data's `what` field (empty for literals and constants).
    pub fn what(&self) -> &str {
        match self {
            ResidualKind::Literal | ResidualKind::Constant => "",
            ResidualKind::Argument(s) | ResidualKind::Output(s) | ResidualKind::Named(s) | ResidualKind::Jit(s) => s,
        }
    }
}

/// One saved residual.
#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    pub aval: Aval,
    pub kind: ResidualKind,
    /// Where the producing equation came from (unknown for arguments, constants and
    /// equations JAX's machinery adds, such as an offloading `device_put`).
    pub source: SourceInfo,
    pub bytes: usize,
    /// What one device holds of it, where the program says how it is split over a mesh
    /// ([`device_layouts`]); `bytes` where it does not (an argument as given, a value on one
    /// device).
    pub device_bytes: usize,
}

/// JAX's `source_info_util.summarize`: `file:line:col (function)`, empty where unknown.
pub fn summarize(s: &SourceInfo) -> String {
    if s.is_unknown() {
        return String::new();
    }
    let mut out = format!("{}:{}", s.file, s.line);
    if s.column != 0 {
        out.push_str(&format!(":{}", s.column));
    }
    if let Some(f) = &s.function {
        out.push_str(&format!(" ({f})"));
    }
    out
}

impl fmt::Display for Residual {
    /// One line of `print_saved_residuals`: `f32[5] output of cos from f.py:3:8 (g)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = summarize(&self.source);
        match &self.kind {
            ResidualKind::Literal => write!(f, "{} from a literal", self.aval),
            ResidualKind::Constant => write!(f, "{} from a constant", self.aval),
            ResidualKind::Argument(name) => write!(f, "{} from the argument {name}", self.aval),
            ResidualKind::Output(prim) => write!(f, "{} output of {prim} from {src}", self.aval),
            ResidualKind::Named(name) => write!(f, "{} named '{name}' from {src}", self.aval),
            ResidualKind::Jit(name) => write!(f, "{} output of jitted function '{name}' from {src}", self.aval),
        }
    }
}

/// Where a residual of the forward jaxpr comes from, with its sort key.
#[derive(Clone, Debug)]
enum Origin {
    Literal,
    Constant(usize),
    Argument(usize),
    Eqn(usize, usize),
}

impl Origin {
    fn key(&self) -> (u8, usize, usize) {
        match self {
            Origin::Literal => (0, 0, 0),
            Origin::Constant(i) => (1, *i, 0),
            Origin::Argument(i) => (2, *i, 0),
            Origin::Eqn(e, j) => (3, *e, *j),
        }
    }
}

fn origins(fwd: &Jaxpr, num_outs: usize) -> Vec<Origin> {
    let mut producer: HashMap<Var, (usize, usize)> = HashMap::new();
    for (e, eqn) in fwd.eqns.iter().enumerate() {
        for (j, &v) in eqn.outvars.iter().enumerate() {
            producer.insert(v, (e, j));
        }
    }
    fwd.outvars[num_outs..]
        .iter()
        .map(|a| {
            let Atom::Var(mut v) = *a else { return Origin::Literal };
            // Look through a `reduce_precision` producer.
            if let Some(&(e, _)) = producer.get(&v) {
                if let (Primitive::ReducePrecision { .. }, Some(Atom::Var(src))) =
                    (&fwd.eqns[e].primitive, fwd.eqns[e].invars.first())
                {
                    v = *src;
                }
            }
            if let Some(i) = fwd.constvars.iter().position(|&c| c == v) {
                Origin::Constant(i)
            } else if let Some(i) = fwd.invars.iter().position(|&x| x == v) {
                Origin::Argument(i)
            } else {
                let (e, j) = producer[&v];
                Origin::Eqn(e, j)
            }
        })
        .collect()
}

/// The permutation putting the forward jaxpr's residual outputs (after its `num_outs`
/// outputs) in JAX's printing order.
pub(crate) fn residual_order(fwd: &Jaxpr, num_outs: usize) -> Vec<usize> {
    let o = origins(fwd, num_outs);
    let mut idx: Vec<usize> = (0..o.len()).collect();
    idx.sort_by_key(|&i| o[i].key());
    idx
}

/// Describes the residual outputs of a forward jaxpr.
pub(crate) fn describe_residuals(fwd: &Jaxpr, num_outs: usize, arg_names: &[String]) -> Vec<Residual> {
    let layouts = device_layouts(fwd);
    origins(fwd, num_outs)
        .into_iter()
        .zip(&fwd.outvars[num_outs..])
        .map(|(o, a)| {
            let device_bytes = match a {
                Atom::Var(v) => layouts.device_bytes(fwd, *v),
                Atom::Lit(_) => fwd.atom_aval(a).size_in_bytes(),
            };
            let aval = fwd.atom_aval(a);
            let (kind, source) = match o {
                Origin::Literal => (ResidualKind::Literal, SourceInfo::unknown()),
                Origin::Constant(_) => (ResidualKind::Constant, SourceInfo::unknown()),
                Origin::Argument(i) => {
                    let name = match arg_names.get(i) {
                        Some(n) if !n.is_empty() => n.clone(),
                        // JAX's fallback, missing its f-string prefix.
                        _ => "at flattened index {i}".to_string(),
                    };
                    (ResidualKind::Argument(name), SourceInfo::unknown())
                }
                Origin::Eqn(e, _) => {
                    let eqn = &fwd.eqns[e];
                    let kind = if let Primitive::Name { name } = &eqn.primitive {
                        ResidualKind::Named(name.clone())
                    } else if let Primitive::Jit { name, .. } = &eqn.primitive {
                        ResidualKind::Jit(name.clone())
                    } else {
                        ResidualKind::Output(eqn.primitive.name().to_string())
                    };
                    (kind, eqn.source.clone())
                }
            };
            Residual { bytes: aval.size_in_bytes(), device_bytes, aval, kind, source }
        })
        .collect()
}

/// How a value is split over the devices of a mesh: for each dimension the mesh axes it is
/// split over (major to minor); `None` for a value the program does not split (every
/// device holds it whole, or it is on one device).
type Layout = Option<Vec<Vec<String>>>;

/// The layouts of a forward jaxpr's values, and the sizes of the mesh axes they name.
pub(crate) struct DeviceLayouts {
    layouts: Vec<Layout>,
    sizes: HashMap<String, usize>,
}

impl DeviceLayouts {
    /// What one device holds of `v`: its bytes divided by the sizes of the axes it is split
    /// over (each axis once).
    pub(crate) fn device_bytes(&self, j: &Jaxpr, v: Var) -> usize {
        let bytes = j.aval(v).size_in_bytes();
        let Some(Some(dims)) = self.layouts.get(v.index()) else { return bytes };
        let mut axes: Vec<&String> = dims.iter().flatten().collect();
        axes.sort();
        axes.dedup();
        let k: usize = axes.iter().map(|a| self.sizes.get(*a).copied().unwrap_or(1)).product();
        bytes / k.max(1)
    }
}

fn spec_layout(spec: &PartitionSpec, rank: usize) -> Layout {
    let dims: Vec<Vec<String>> = (0..rank).map(|d| spec.axes_of(d).to_vec()).collect();
    dims.iter().any(|d| !d.is_empty()).then_some(dims)
}

fn sharding_layout(s: &Sharding, rank: usize, sizes: &mut HashMap<String, usize>) -> Option<Layout> {
    match s {
        Sharding::Named { mesh, spec, .. } => {
            for a in &mesh.axes {
                sizes.insert(a.name.clone(), a.size);
            }
            Some(spec_layout(spec, rank))
        }
        Sharding::SingleDevice { .. } => Some(None),
        Sharding::Unspecified => None,
    }
}

/// The layouts the program states or implies, propagated forward as XLA's partitioner lays
/// out values it is not told about, in the simple cases: a `jit`'s `in_shardings` and
/// `out_shardings`, a `shard_map`'s `out_specs`, a `sharding_constraint`; elementwise
/// results take their operand's layout, a `dot_general`'s its operands' batch and free
/// dimensions', a reduction drops the reduced dimensions, `transpose` and
/// `broadcast_in_dim` move them. Arguments are whole (as a function is given them), and so
/// is anything else: an upper bound.
pub(crate) fn device_layouts(j: &Jaxpr) -> DeviceLayouts {
    let mut sizes = HashMap::new();
    let layouts = propagate(j, vec![None; j.invars.len()], &mut sizes);
    DeviceLayouts { layouts, sizes }
}

/// How an equation relates its operands' layouts to its results', read backwards: XLA's
/// partitioner also lays out an operand as the result it feeds (a `sharding_constraint`'s
/// operand, an elementwise operation's operands, a transpose's operand).
enum Back {
    Elementwise,
    Transpose(Vec<usize>),
    None,
}

fn propagate(j: &Jaxpr, ins: Vec<Layout>, sizes: &mut HashMap<String, usize>) -> Vec<Layout> {
    let mut l: Vec<Layout> = vec![None; j.vars.len()];
    for _ in 0..2 {
        forward(j, &mut l, &ins, sizes);
        backward(j, &mut l);
    }
    forward(j, &mut l, &ins, sizes);
    l
}

/// Fills in the operands' layouts from the results' where an operand has none; except a
/// scalar broadcast (`broadcast_in_dim 1.0:f32[]`), which XLA keeps whole on every device
/// (the cotangent seed of a loss, for one).
fn backward(j: &Jaxpr, l: &mut [Layout]) {
    let splat: std::collections::HashSet<Var> = j
        .eqns
        .iter()
        .filter(|e| {
            matches!(e.primitive, Primitive::BroadcastInDim { .. })
                && e.invars.first().is_some_and(|a| j.atom_aval(a).rank() == 0)
        })
        .flat_map(|e| e.outvars.iter().copied())
        .collect();
    for eqn in j.eqns.iter().rev() {
        let out = |l: &[Layout], k: usize| eqn.outvars.get(k).and_then(|v| l.get(v.index()).cloned().flatten());
        let set = |l: &mut [Layout], a: &Atom, x: Vec<Vec<String>>| {
            if let Atom::Var(v) = a {
                if splat.contains(v) {
                    return;
                }
                if let Some(slot @ None) = l.get_mut(v.index()) {
                    *slot = Some(x);
                }
            }
        };
        match back_of(&eqn.primitive) {
            Back::Elementwise => {
                for (k, &o) in eqn.outvars.iter().enumerate() {
                    let Some(x) = out(l, k) else { continue };
                    for a in eqn.invars.iter().filter(|a| j.atom_aval(a).shape == j.aval(o).shape) {
                        set(l, a, x.clone());
                    }
                }
            }
            Back::Transpose(perm) => {
                if let (Some(x), Some(a)) = (out(l, 0), eqn.invars.first()) {
                    let mut dims = vec![Vec::new(); perm.len()];
                    for (i, &p) in perm.iter().enumerate() {
                        if let (Some(slot), Some(d)) = (dims.get_mut(p), x.get(i)) {
                            *slot = d.clone();
                        }
                    }
                    set(l, a, dims);
                }
            }
            Back::None => {}
        }
    }
}

fn forward(j: &Jaxpr, l: &mut [Layout], ins: &[Layout], sizes: &mut HashMap<String, usize>) {
    for (v, x) in j.invars.iter().zip(ins) {
        if let (Some(slot), Some(_)) = (l.get_mut(v.index()), x) {
            *slot = x.clone();
        }
    }
    let of = |l: &[Layout], a: &Atom| -> Layout {
        match a {
            Atom::Var(v) => l.get(v.index()).cloned().flatten(),
            Atom::Lit(_) => None,
        }
    };
    for eqn in &j.eqns {
        let rank = |k: usize| eqn.outvars.get(k).map_or(0, |&v| j.aval(v).rank());
        let out_shape = |k: usize| eqn.outvars.get(k).map(|&v| j.aval(v).shape.clone()).unwrap_or_default();
        let outs: Vec<Layout> = match &eqn.primitive {
            Primitive::Jit { jaxpr, options, .. } => {
                let body = &jaxpr.jaxpr;
                let inner_ins: Vec<Layout> = eqn
                    .invars
                    .iter()
                    .enumerate()
                    .map(|(k, a)| {
                        let r = j.atom_aval(a).rank();
                        options
                            .in_shardings
                            .get(k)
                            .and_then(|s| sharding_layout(s, r, sizes))
                            .unwrap_or_else(|| of(l, a))
                    })
                    .collect();
                let inner = propagate(body, inner_ins, sizes);
                body.outvars
                    .iter()
                    .enumerate()
                    .map(|(k, o)| {
                        let from_body = match o {
                            Atom::Var(v) => inner.get(v.index()).cloned().flatten(),
                            Atom::Lit(_) => None,
                        };
                        options
                            .out_shardings
                            .get(k)
                            .and_then(|s| sharding_layout(s, rank(k), sizes))
                            .unwrap_or(from_body)
                    })
                    .collect()
            }
            Primitive::ShardMap(sm) => {
                for a in &sm.mesh.axes {
                    sizes.insert(a.name.clone(), a.size);
                }
                sm.out_specs.iter().enumerate().map(|(k, s)| spec_layout(s, rank(k))).collect()
            }
            Primitive::ShardingConstraint(c) => {
                vec![sharding_layout(&c.sharding, rank(0), sizes).unwrap_or_else(|| of(l, &eqn.invars[0]))]
            }
            Primitive::DotGeneral { dimension_numbers: dn, .. } => {
                let (x, y) = (of(l, &eqn.invars[0]), of(l, &eqn.invars[1]));
                let (xr, yr) = (j.atom_aval(&eqn.invars[0]).rank(), j.atom_aval(&eqn.invars[1]).rank());
                let axes = |lay: &Layout, d: usize| lay.as_ref().map(|v| v[d].clone()).unwrap_or_default();
                let mut dims: Vec<Vec<String>> = dn.lhs_batch.iter().map(|&d| axes(&x, d)).collect();
                let lhs_free = (0..xr).filter(|d| !dn.lhs_batch.contains(d) && !dn.lhs_contracting.contains(d));
                dims.extend(lhs_free.map(|d| axes(&x, d)));
                let rhs_free = (0..yr).filter(|d| !dn.rhs_batch.contains(d) && !dn.rhs_contracting.contains(d));
                dims.extend(rhs_free.map(|d| axes(&y, d)));
                vec![dims.iter().any(|d| !d.is_empty()).then_some(dims)]
            }
            Primitive::Reduce { axes, .. } | Primitive::Argmax { axes, .. } | Primitive::Argmin { axes, .. } => {
                let x = of(l, &eqn.invars[0]);
                vec![x.and_then(|v| {
                    let dims: Vec<Vec<String>> =
                        v.into_iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, a)| a).collect();
                    dims.iter().any(|d| !d.is_empty()).then_some(dims)
                })]
            }
            Primitive::Transpose { permutation } => {
                let x = of(l, &eqn.invars[0]);
                vec![x.map(|v| permutation.iter().map(|&p| v.get(p).cloned().unwrap_or_default()).collect())]
            }
            Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
                let x = of(l, &eqn.invars[0]);
                let xs = j.atom_aval(&eqn.invars[0]).shape;
                vec![x.map(|v| {
                    let mut dims = vec![Vec::new(); shape.len()];
                    for (i, &d) in broadcast_dimensions.iter().enumerate() {
                        if xs.get(i) == shape.get(d) {
                            dims[d] = v.get(i).cloned().unwrap_or_default();
                        }
                    }
                    dims
                })]
            }
            // Elementwise: an operand of the result's shape lends its layout.
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. }
            | Primitive::Reshard
            | Primitive::AllReduce { .. }
            | Primitive::Pvary { .. }
            | Primitive::Ppermute { .. }
            | Primitive::Pbroadcast { .. }
            | Primitive::OptimizationBarrier => (0..eqn.outvars.len())
                .map(|k| {
                    let shape = out_shape(k);
                    eqn.invars.iter().filter(|a| j.atom_aval(a).shape == shape).find_map(|a| of(l, a))
                })
                .collect(),
            // Calls without shardings of their own: their bodies.
            Primitive::ClosedCall { .. }
            | Primitive::Composite { .. }
            | Primitive::CustomJvpCall { .. }
            | Primitive::Remat2 { .. }
            | Primitive::CustomVjpCall { .. } => match eqn.primitive.subjaxprs().first() {
                Some(body) if body.invars.len() == eqn.invars.len() => {
                    let inner = propagate(body, eqn.invars.iter().map(|a| of(l, a)).collect(), sizes);
                    body.outvars
                        .iter()
                        .map(|o| match o {
                            Atom::Var(v) => inner.get(v.index()).cloned().flatten(),
                            Atom::Lit(_) => None,
                        })
                        .collect()
                }
                _ => vec![None; eqn.outvars.len()],
            },
            Primitive::Fft { .. }
            | Primitive::BitcastConvertType { .. }
            | Primitive::Reshape { .. }
            | Primitive::Rev { .. }
            | Primitive::Squeeze { .. }
            | Primitive::ExpandDims { .. }
            | Primitive::Slice { .. }
            | Primitive::Pad { .. }
            | Primitive::Concatenate { .. }
            | Primitive::DynamicSlice { .. }
            | Primitive::DynamicUpdateSlice
            | Primitive::Iota { .. }
            | Primitive::Empty2 { .. }
            | Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomClone
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::AllGather { .. }
            | Primitive::ReduceScatter { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::RandomBits { .. }
            | Primitive::Scan { .. }
            | Primitive::Split { .. }
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::SymmetricProduct { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::RngBitGenerator { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::Cumulative { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::SelectAndGatherAdd { .. }
            | Primitive::Cond { .. }
            | Primitive::While { .. } => vec![None; eqn.outvars.len()],
        };
        for (&v, x) in eqn.outvars.iter().zip(outs) {
            if let (Some(slot), Some(_)) = (l.get_mut(v.index()), &x) {
                *slot = x;
            }
        }
    }
}

fn back_of(prim: &Primitive) -> Back {
    match prim {
        Primitive::Transpose { permutation } => Back::Transpose(permutation.clone()),
        Primitive::Unary(_)
        | Primitive::Binary(_)
        | Primitive::Compare(_)
        | Primitive::IntegerPow { .. }
        | Primitive::SelectN
        | Primitive::Clamp
        | Primitive::RegularizedIncompleteBeta
        | Primitive::Complex
        | Primitive::Real
        | Primitive::Imag
        | Primitive::Conj { .. }
        | Primitive::ConvertElementType { .. }
        | Primitive::ReducePrecision { .. }
        | Primitive::Round { .. }
        | Primitive::Name { .. }
        | Primitive::DevicePut { .. }
        | Primitive::ShardingConstraint(_)
        | Primitive::Reshard
        | Primitive::AllReduce { .. }
        | Primitive::Pvary { .. }
        | Primitive::Ppermute { .. }
        | Primitive::Pbroadcast { .. }
        | Primitive::OptimizationBarrier => Back::Elementwise,
        Primitive::Fft { .. }
        | Primitive::BitcastConvertType { .. }
        | Primitive::BroadcastInDim { .. }
        | Primitive::Reshape { .. }
        | Primitive::Rev { .. }
        | Primitive::Squeeze { .. }
        | Primitive::ExpandDims { .. }
        | Primitive::Slice { .. }
        | Primitive::Pad { .. }
        | Primitive::Concatenate { .. }
        | Primitive::DynamicSlice { .. }
        | Primitive::DynamicUpdateSlice
        | Primitive::Iota { .. }
        | Primitive::Reduce { .. }
        | Primitive::Argmax { .. }
        | Primitive::DotGeneral { .. }
        | Primitive::Empty2 { .. }
        | Primitive::RandomSeed
        | Primitive::RandomWrap
        | Primitive::RandomUnwrap
        | Primitive::RandomSplit { .. }
        | Primitive::RandomFoldIn
        | Primitive::RandomClone
        | Primitive::Threefry2x32
        | Primitive::Iota2x32Shape { .. }
        | Primitive::ShardMap(_)
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::RandomBits { .. }
        | Primitive::Jit { .. }
        | Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::Remat2 { .. }
        | Primitive::Scan { .. }
        | Primitive::Split { .. }
        | Primitive::Stack { .. }
        | Primitive::Unstack { .. }
        | Primitive::Tile { .. }
        | Primitive::PlatformIndex { .. }
        | Primitive::Gather { .. }
        | Primitive::Scatter { .. }
        | Primitive::Sort { .. }
        | Primitive::TopK { .. }
        | Primitive::Cholesky
        | Primitive::TriangularSolve(_)
        | Primitive::Lu
        | Primitive::LuPivotsToPermutation { .. }
        | Primitive::Qr(_)
        | Primitive::Eigh(_)
        | Primitive::SymmetricProduct { .. }
        | Primitive::GenericReduce { .. }
        | Primitive::GenericReduceWindow { .. }
        | Primitive::RngBitGenerator { .. }
        | Primitive::ApproxTopK { .. }
        | Primitive::Svd(_)
        | Primitive::Geqrf
        | Primitive::HouseholderProduct
        | Primitive::Ormqr { .. }
        | Primitive::TridiagonalSolve { .. }
        | Primitive::Argmin { .. }
        | Primitive::Cumulative { .. }
        | Primitive::ConvGeneralDilated(_)
        | Primitive::ReduceWindow { .. }
        | Primitive::SelectAndScatterAdd { .. }
        | Primitive::SelectAndGatherAdd { .. }
        | Primitive::Cond { .. }
        | Primitive::While { .. }
        | Primitive::CustomVjpCall { .. } => Back::None,
    }
}

/// `jax.ad_checkpoint.print_saved_residuals`'s text: one line per residual.
pub(crate) fn residuals_text(residuals: &[Residual]) -> String {
    let mut out = String::new();
    for r in residuals {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    out
}
