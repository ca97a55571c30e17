//! Layouts: how a program's values are split over the devices of a mesh.
//!
//! A program states some layouts (a `jit`'s `in_shardings` and `out_shardings`, a
//! `shard_map`'s specs, a `sharding_constraint`) and XLA's partitioner extends them to the
//! values it is not told about. [`Layouts::of`] does that in the simple cases: elementwise
//! results take their operand's layout, a `dot_general`'s its operands' batch and free
//! dimensions', a reduction drops the reduced dimensions, `transpose` and
//! `broadcast_in_dim` move them (forward); an operand takes the layout of the elementwise
//! result or transpose it feeds (backward). Anything else is whole: an upper bound.
//!
//! Two readers: the residual ledger (what one device keeps of each residual: `remat-ad`)
//! and the JIT's device program (the program one device runs, whose memory the planner
//! plans: `remat-jit`'s `device.rs`). [`rule`] is the one place that says how each
//! primitive relates its operands' layouts to its results'.

use std::collections::HashMap;

use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, JitOptions, ShardMap, Var};
use crate::param_types::DotDimensionNumbers;
use crate::primitive::Primitive;
use crate::sharding::{PartitionSpec, Sharding};

/// For each dimension of a value, the mesh axes it is split over (major to minor).
pub type Dims = Vec<Vec<String>>;

/// How a value is split: `None` for a value every device holds whole (or one device holds).
pub type Layout = Option<Dims>;

/// Where a program's arguments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arguments {
    /// Whole on every device, as a function called eagerly is given them: what the
    /// residuals of `jax.vjp` on the user's arrays hold.
    Whole,
    /// Where the program's uses put them: the program compiled as one (`jax.jit` of the
    /// whole step, as XLA's memory analysis sees it) lays out an argument as the
    /// `shard_map` or `sharding_constraint` it feeds asks.
    AsUsed,
}

/// How a primitive relates its operands' layouts to its results'.
#[derive(Debug)]
pub enum Rule<'a> {
    /// Results take the layout of an operand of their shape; operands of the result's shape
    /// take the result's.
    Elementwise,
    Transpose(&'a [usize]),
    DotGeneral(&'a DotDimensionNumbers),
    /// A reduction over these dimensions (or an index of its extreme).
    Reduce(&'a [usize]),
    BroadcastInDim {
        shape: &'a [usize],
        broadcast_dimensions: &'a [usize],
    },
    /// The result is laid out as said; backward, as elementwise.
    Constraint(&'a Sharding),
    Jit(&'a ClosedJaxpr, &'a JitOptions),
    ShardMap(&'a ShardMap),
    /// A call whose body has no shardings of its own: its body says.
    Call,
    /// Every result whole.
    Opaque,
}

/// How `p` relates layouts.
pub fn rule(p: &Primitive) -> Rule<'_> {
    match p {
        Primitive::Transpose { permutation } => Rule::Transpose(permutation),
        Primitive::DotGeneral { dimension_numbers, .. } => Rule::DotGeneral(dimension_numbers),
        Primitive::Reduce { axes, .. } | Primitive::Argmax { axes, .. } | Primitive::Argmin { axes, .. } => {
            Rule::Reduce(axes)
        }
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            Rule::BroadcastInDim { shape, broadcast_dimensions }
        }
        Primitive::ShardingConstraint(c) => Rule::Constraint(&c.sharding),
        Primitive::Jit { jaxpr, options, .. } => Rule::Jit(jaxpr, options),
        Primitive::ShardMap(sm) => Rule::ShardMap(sm),
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
        | Primitive::ShardAlike
        | Primitive::OptimizationBarrier => Rule::Elementwise,
        Primitive::ClosedCall { .. }
        | Primitive::Composite { .. }
        | Primitive::CustomJvpCall { .. }
        | Primitive::Remat2 { .. }
        | Primitive::CustomVjpCall { .. } => Rule::Call,
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
        | Primitive::AllToAll { .. }
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
        | Primitive::While { .. } => Rule::Opaque,
    }
}

/// The layout `spec` states for a value of rank `rank`.
pub fn spec_layout(spec: &PartitionSpec, rank: usize) -> Layout {
    let dims: Dims = (0..rank).map(|d| spec.axes_of(d).to_vec()).collect();
    dims.iter().any(|d| !d.is_empty()).then_some(dims)
}

/// The layouts of a jaxpr's values (top level), and the sizes of the mesh axes they name.
#[derive(Clone, Debug)]
pub struct Layouts {
    layouts: Vec<Layout>,
    sizes: HashMap<String, usize>,
    args: Arguments,
}

impl Layouts {
    /// The layouts `j` states or implies (module docs), its arguments placed as `args` says.
    pub fn of(j: &Jaxpr, args: Arguments) -> Layouts {
        let mut p = Propagation { sizes: HashMap::new(), args };
        let layouts = p.propagate(j, vec![None; j.invars.len()], false);
        Layouts { layouts, sizes: p.sizes, args }
    }

    /// The layouts of `body`, a call's jaxpr (of a program whose layouts are `self`), its
    /// arguments laid out as `ins`.
    pub fn of_call(&self, body: &Jaxpr, ins: Vec<Layout>) -> Layouts {
        let mut p = Propagation { sizes: self.sizes.clone(), args: self.args };
        let layouts = p.propagate(body, ins, true);
        Layouts { layouts, sizes: p.sizes, args: self.args }
    }

    /// The layouts `eqn` (of `j`, a jaxpr these layouts are of) gives its results when its
    /// operands are laid out as `ins`: where a program computes them if nothing reshards
    /// them (the device program computes there, then reshards to [`Self::get`]'s).
    pub fn eqn_results(&self, j: &Jaxpr, eqn: &Eqn, ins: &[Layout]) -> Vec<Layout> {
        let mut p = Propagation { sizes: self.sizes.clone(), args: self.args };
        p.eqn_forward(j, eqn, ins)
            .into_iter()
            .map(|o| match o {
                Out::Stated(x) | Out::Derived(x) => x,
            })
            .collect()
    }

    /// The layout of `v` (`None`: whole).
    pub fn get(&self, v: Var) -> Option<&Dims> {
        self.layouts.get(v.index()).and_then(Option::as_ref)
    }

    pub fn of_atom(&self, a: &Atom) -> Layout {
        match a {
            Atom::Var(v) => self.get(*v).cloned(),
            Atom::Lit(_) => None,
        }
    }

    /// The size of a mesh axis the program names (1 for one it does not).
    pub fn axis_size(&self, axis: &str) -> usize {
        self.sizes.get(axis).copied().unwrap_or(1)
    }

    /// The shape one device holds of a value of `shape` laid out as `l`.
    pub fn local_shape(&self, shape: &[usize], l: &Layout) -> Vec<usize> {
        let Some(dims) = l else { return shape.to_vec() };
        shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                let k: usize = dims.get(d).map_or(1, |axes| axes.iter().map(|a| self.axis_size(a)).product());
                n / k.max(1)
            })
            .collect()
    }

    /// What one device holds of `v`: its bytes divided by the sizes of the axes it is split
    /// over.
    pub fn device_bytes(&self, j: &Jaxpr, v: Var) -> usize {
        let aval = j.aval(v);
        let Some(dims) = self.get(v) else { return aval.size_in_bytes() };
        let k: usize = dims.iter().flatten().map(|a| self.axis_size(a)).product();
        aval.size_in_bytes() / k.max(1)
    }
}

struct Propagation {
    sizes: HashMap<String, usize>,
    args: Arguments,
}

impl Propagation {
    fn sharding_layout(&mut self, s: &Sharding, rank: usize) -> Option<Layout> {
        match s {
            Sharding::Named { mesh, spec, .. } => {
                for a in &mesh.axes {
                    self.sizes.insert(a.name.clone(), a.size);
                }
                Some(spec_layout(spec, rank))
            }
            Sharding::SingleDevice { .. } => Some(None),
            Sharding::Unspecified => None,
        }
    }

    /// `l` made valid for `shape`: each axis once, of a known size, dividing its dimension.
    fn sanitize(&self, shape: &[usize], l: Layout) -> Layout {
        let dims = l?;
        let mut used: Vec<&String> = Vec::new();
        let mut out: Dims = vec![Vec::new(); shape.len()];
        for (d, axes) in dims.iter().enumerate().take(shape.len()) {
            let mut k = 1usize;
            for a in axes {
                let Some(&size) = self.sizes.get(a) else { continue };
                if used.contains(&a) || size == 0 || !shape[d].is_multiple_of(k * size) {
                    continue;
                }
                used.push(a);
                k *= size;
                out[d].push(a.clone());
            }
        }
        out.iter().any(|d| !d.is_empty()).then_some(out)
    }

    /// `j`'s layouts, its arguments laid out as `ins`; a call's body (`call`) cannot lay
    /// its arguments out otherwise, the program's own arguments may be (backward).
    fn propagate(&mut self, j: &Jaxpr, ins: Vec<Layout>, call: bool) -> Vec<Layout> {
        let mut l: Vec<Layout> = vec![None; j.vars.len()];
        // The values whose layout the program states: backward propagation leaves them.
        let mut stated = vec![false; j.vars.len()];
        if call {
            j.invars.iter().for_each(|v| stated[v.index()] = true);
        }
        for _ in 0..2 {
            self.forward(j, &mut l, &mut stated, &ins);
            self.backward(j, &mut l, &stated);
        }
        self.forward(j, &mut l, &mut stated, &ins);
        l
    }

    /// Fills in the operands' layouts from the results' where an operand has none; except a
    /// scalar broadcast (`broadcast_in_dim 1.0:f32[]`), which XLA keeps whole on every
    /// device (the cotangent seed of a loss, for one).
    fn backward(&mut self, j: &Jaxpr, l: &mut [Layout], stated: &[bool]) {
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
            let out = |k: usize| eqn.outvars.get(k).and_then(|v| l.get(v.index()).cloned().flatten());
            // What the equation asks of its operands.
            let mut asks: Vec<(&Atom, Dims)> = Vec::new();
            match rule(&eqn.primitive) {
                Rule::Elementwise | Rule::Constraint(_) => {
                    for (k, &o) in eqn.outvars.iter().enumerate() {
                        let Some(x) = out(k) else { continue };
                        for a in eqn.invars.iter().filter(|a| j.atom_aval(a).shape == j.aval(o).shape) {
                            asks.push((a, x.clone()));
                        }
                    }
                }
                Rule::Transpose(perm) => {
                    if let (Some(x), Some(a)) = (out(0), eqn.invars.first()) {
                        let mut dims = vec![Vec::new(); perm.len()];
                        for (i, &p) in perm.iter().enumerate() {
                            if let (Some(slot), Some(d)) = (dims.get_mut(p), x.get(i)) {
                                *slot = d.clone();
                            }
                        }
                        asks.push((a, dims));
                    }
                }
                // A program compiled as one lays out an operand as the shard_map it feeds
                // asks.
                Rule::ShardMap(sm) if self.args == Arguments::AsUsed => {
                    for a in &sm.mesh.axes {
                        self.sizes.insert(a.name.clone(), a.size);
                    }
                    for (a, spec) in eqn.invars.iter().zip(&sm.in_specs) {
                        if let Some(x) = spec_layout(spec, j.atom_aval(a).rank()) {
                            asks.push((a, x));
                        }
                    }
                }
                Rule::DotGeneral(_)
                | Rule::Reduce(_)
                | Rule::BroadcastInDim { .. }
                | Rule::Jit(..)
                | Rule::ShardMap(_)
                | Rule::Call
                | Rule::Opaque => {}
            }
            for (a, x) in asks {
                let Atom::Var(v) = a else { continue };
                if splat.contains(v)
                    || stated.get(v.index()).is_none_or(|&s| s)
                    || l.get(v.index()).is_none_or(Option::is_some)
                {
                    continue;
                }
                l[v.index()] = self.sanitize(&j.aval(*v).shape, Some(x));
            }
        }
    }

    fn forward(&mut self, j: &Jaxpr, l: &mut [Layout], stated: &mut [bool], ins: &[Layout]) {
        for (v, x) in j.invars.iter().zip(ins) {
            if let (Some(slot), Some(_)) = (l.get_mut(v.index()), x) {
                *slot = x.clone();
            }
        }
        for eqn in &j.eqns {
            let ins: Vec<Layout> = eqn
                .invars
                .iter()
                .map(|a| match a {
                    Atom::Var(v) => l.get(v.index()).cloned().flatten(),
                    Atom::Lit(_) => None,
                })
                .collect();
            for (&v, out) in eqn.outvars.iter().zip(self.eqn_forward(j, eqn, &ins)) {
                let (Some(slot), Some(st)) = (l.get_mut(v.index()), stated.get_mut(v.index())) else { continue };
                match out {
                    Out::Stated(x) => {
                        *slot = x;
                        *st = true;
                    }
                    Out::Derived(x @ Some(_)) if !*st => *slot = x,
                    Out::Derived(_) => {}
                }
            }
        }
    }

    /// The layouts of `eqn`'s results (of `j`) when its operands are laid out as `ins`.
    fn eqn_forward(&mut self, j: &Jaxpr, eqn: &Eqn, ins: &[Layout]) -> Vec<Out> {
        let op = |k: usize| -> Layout { ins.get(k).cloned().flatten() };
        let rank = |k: usize| eqn.outvars.get(k).map_or(0, |&v| j.aval(v).rank());
        let out_shape = |k: usize| eqn.outvars.get(k).map(|&v| j.aval(v).shape.clone()).unwrap_or_default();
        let body_outs = |body: &Jaxpr, inner: &[Layout]| -> Vec<Layout> {
            body.outvars
                .iter()
                .map(|o| match o {
                    Atom::Var(v) => inner.get(v.index()).cloned().flatten(),
                    Atom::Lit(_) => None,
                })
                .collect()
        };
        let outs: Vec<Layout> = match rule(&eqn.primitive) {
            Rule::Jit(jaxpr, options) => {
                let body = &jaxpr.jaxpr;
                let inner_ins: Vec<Layout> = (0..eqn.invars.len())
                    .map(|k| {
                        let r = j.atom_aval(&eqn.invars[k]).rank();
                        options.in_shardings.get(k).and_then(|s| self.sharding_layout(s, r)).unwrap_or_else(|| op(k))
                    })
                    .collect();
                let inner = self.propagate(body, inner_ins, true);
                return body_outs(body, &inner)
                    .into_iter()
                    .enumerate()
                    .map(|(k, b)| match options.out_shardings.get(k).and_then(|s| self.sharding_layout(s, rank(k))) {
                        Some(x) => Out::Stated(self.sanitize(&out_shape(k), x)),
                        None => Out::Derived(self.sanitize(&out_shape(k), b)),
                    })
                    .collect();
            }
            Rule::ShardMap(sm) => {
                for a in &sm.mesh.axes {
                    self.sizes.insert(a.name.clone(), a.size);
                }
                return sm.out_specs.iter().enumerate().map(|(k, s)| Out::Stated(spec_layout(s, rank(k)))).collect();
            }
            Rule::Constraint(s) => match self.sharding_layout(s, rank(0)) {
                Some(x) => return vec![Out::Stated(self.sanitize(&out_shape(0), x))],
                None => vec![op(0)],
            },
            Rule::DotGeneral(dn) => {
                let (x, y) = (op(0), op(1));
                let (xr, yr) = (j.atom_aval(&eqn.invars[0]).rank(), j.atom_aval(&eqn.invars[1]).rank());
                let axes = |lay: &Layout, d: usize| lay.as_ref().and_then(|v| v.get(d).cloned()).unwrap_or_default();
                let mut dims: Dims = dn.lhs_batch.iter().map(|&d| axes(&x, d)).collect();
                let lhs_free = (0..xr).filter(|d| !dn.lhs_batch.contains(d) && !dn.lhs_contracting.contains(d));
                dims.extend(lhs_free.map(|d| axes(&x, d)));
                let rhs_free = (0..yr).filter(|d| !dn.rhs_batch.contains(d) && !dn.rhs_contracting.contains(d));
                dims.extend(rhs_free.map(|d| axes(&y, d)));
                vec![dims.iter().any(|d| !d.is_empty()).then_some(dims)]
            }
            Rule::Reduce(axes) => vec![op(0).and_then(|v| {
                let dims: Dims = v.into_iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, a)| a).collect();
                dims.iter().any(|d| !d.is_empty()).then_some(dims)
            })],
            Rule::Transpose(permutation) => {
                vec![op(0).map(|v| permutation.iter().map(|&p| v.get(p).cloned().unwrap_or_default()).collect())]
            }
            Rule::BroadcastInDim { shape, broadcast_dimensions } => {
                let xs = j.atom_aval(&eqn.invars[0]).shape;
                vec![op(0).map(|v| {
                    let mut dims = vec![Vec::new(); shape.len()];
                    for (i, &d) in broadcast_dimensions.iter().enumerate() {
                        if xs.get(i) == shape.get(d) {
                            dims[d] = v.get(i).cloned().unwrap_or_default();
                        }
                    }
                    dims
                })]
            }
            // An operand of the result's shape lends its layout.
            Rule::Elementwise => (0..eqn.outvars.len())
                .map(|k| {
                    let shape = out_shape(k);
                    (0..eqn.invars.len()).filter(|&i| j.atom_aval(&eqn.invars[i]).shape == shape).find_map(op)
                })
                .collect(),
            Rule::Call => match eqn.primitive.subjaxprs().first() {
                Some(body) if body.invars.len() == eqn.invars.len() => {
                    let inner = self.propagate(body, (0..eqn.invars.len()).map(op).collect(), true);
                    body_outs(body, &inner)
                }
                _ => vec![None; eqn.outvars.len()],
            },
            Rule::Opaque => vec![None; eqn.outvars.len()],
        };
        outs.into_iter().enumerate().map(|(k, x)| Out::Derived(self.sanitize(&out_shape(k), x))).collect()
    }
}

/// A result's layout: stated by the program (a sharding, a spec), or derived by the rules.
enum Out {
    Stated(Layout),
    Derived(Layout),
}
