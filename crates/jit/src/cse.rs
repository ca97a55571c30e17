//! Common-subexpression elimination on jaxprs, the JIT's first pass.
//!
//! Two equations with the same primitive, parameters, result types and operands compute
//! the same values (every primitive is pure), so the second is dropped and its binders
//! read the first's. Calls that impose no barrier (`jit` without constants, `remat2` with
//! `prevent_cse=False`) are inlined first, so equal work in different calls meets.
//!
//! A `remat2` with `prevent_cse=True` is a barrier: its body is optimized on its own and
//! never merged with work outside it. That is what the flag means in JAX — the recompute a
//! policy asks for really happens, and the memory the policy saves stays saved. Under
//! [`CseScope::AcrossCheckpoints`] those bodies are inlined too. That is what XLA does on
//! CPU with JAX's programs: its `OptimizationBarrierExpander` drops the barriers JAX lowers
//! `prevent_cse` to, and its CSE then merges a checkpoint's recompute with the forward
//! pass (the compiled `mlp_medium_nothing` has the 23 products of `mlp_medium_plain`, not
//! 31). Faster, and the activations stay alive until the backward pass, as without a
//! checkpoint.
//!
//! Bodies that stay calls (`scan`, `custom_jvp_call`, barriers, `jit` with constants) are
//! optimized on their own; a body shared by several equations stays shared.

use std::collections::HashMap;
use std::sync::Arc;

use remat_ir::{Atom, DType, Eqn, HigherOrder, Jaxpr, LitValue, Primitive, Var, VarDecl};

use crate::JitError;

/// Where common subexpressions may be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CseScope {
    /// Nowhere: the program is compiled as written.
    Off,
    /// Everywhere except across a `remat2` with `prevent_cse=True` (JAX's meaning).
    WithinCheckpoints,
    /// Across checkpoints when that costs no memory: the compiler plans the program both
    /// ways and keeps the merged one if its planned peak (device and host) is no larger.
    /// In a whole value-and-grad program the fused forward often keeps no more than the
    /// policy would, and then the recompute buys nothing.
    #[default]
    Auto,
    /// Everywhere, checkpoints included (XLA's behaviour on CPU): a checkpoint's recompute
    /// merges with the forward pass, trading the memory the policy saved for the time.
    AcrossCheckpoints,
}

/// `jaxpr` with common subexpressions merged within `scope`. The result verifies whenever
/// `jaxpr` does and computes the same values.
/// (`Auto` is a choice the compiler makes by planning; here it merges within checkpoints.)
pub fn cse(jaxpr: &Jaxpr, scope: CseScope) -> Result<Jaxpr, JitError> {
    Ok(cse_traced(jaxpr, scope)?.jaxpr)
}

/// The result of [`cse`] with where each of its top-level pieces came from.
#[derive(Clone, Debug)]
pub(crate) struct Traced {
    pub jaxpr: Jaxpr,
    /// For each top-level equation of `jaxpr`, the input's top-level equation it comes
    /// from (the call equation, for the body of an inlined call).
    pub eqn_origin: Vec<usize>,
    /// For each variable of the input's top level, what it became in `jaxpr`.
    pub var_map: Vec<Option<Atom>>,
}

/// [`cse`], keeping the provenance of the top level (the memory profile names buffers by
/// the input's equations and variables).
pub(crate) fn cse_traced(jaxpr: &Jaxpr, scope: CseScope) -> Result<Traced, JitError> {
    let across = match scope {
        CseScope::Off => {
            let var_map = (0..jaxpr.vars.len()).map(|i| Some(Atom::Var(Var(i as u32)))).collect();
            return Ok(Traced { jaxpr: jaxpr.clone(), eqn_origin: (0..jaxpr.eqns.len()).collect(), var_map });
        }
        CseScope::WithinCheckpoints | CseScope::Auto => false,
        CseScope::AcrossCheckpoints => true,
    };
    let mut pass = Pass { across, bodies: HashMap::new() };
    let mut b = Builder { out: Jaxpr::default(), seen: HashMap::new(), origin: Vec::new(), current: None };
    let mut env: Vec<Option<Atom>> = vec![None; jaxpr.vars.len()];
    b.out.constvars = jaxpr.constvars.iter().map(|&v| b.bind(jaxpr, v, &mut env)).collect();
    b.out.invars = jaxpr.invars.iter().map(|&v| b.bind(jaxpr, v, &mut env)).collect();
    b.out.outvars = pass.eqns(&mut b, jaxpr, &mut env, true)?;
    Ok(Traced { jaxpr: b.out, eqn_origin: b.origin, var_map: env })
}

/// Whether `jaxpr` (or a body it calls) has a `remat2` with `prevent_cse=True`: the only
/// place where the two scopes differ.
pub(crate) fn has_barrier(jaxpr: &Jaxpr) -> bool {
    jaxpr.eqns.iter().any(|e| {
        matches!(e.primitive, Primitive::Remat2 { prevent_cse: true, .. })
            || e.primitive.subjaxprs().into_iter().any(|b| has_barrier(b))
    })
}

/// An operand as a hash key (literals by their bits, so `0.0` and `-0.0` differ).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum AtomKey {
    Var(u32),
    F32(u32),
    F64(u64),
    BF16(u16),
    F16(u16),
    Int(DType, i64),
    Bool(bool),
    Complex(u64, u64),
}

impl AtomKey {
    fn of(a: &Atom) -> AtomKey {
        match a {
            Atom::Var(v) => AtomKey::Var(v.0),
            Atom::Lit(l) => match l.value {
                LitValue::F32(x) => AtomKey::F32(x.to_bits()),
                LitValue::F64(x) => AtomKey::F64(x.to_bits()),
                LitValue::BF16(x) => AtomKey::BF16(x.to_bits()),
                LitValue::F16(x) => AtomKey::F16(x.to_bits()),
                LitValue::I8(x) => AtomKey::Int(DType::I8, x.into()),
                LitValue::I16(x) => AtomKey::Int(DType::I16, x.into()),
                LitValue::I32(x) => AtomKey::Int(DType::I32, x.into()),
                LitValue::I64(x) => AtomKey::Int(DType::I64, x),
                LitValue::U8(x) => AtomKey::Int(DType::U8, x.into()),
                LitValue::U32(x) => AtomKey::Int(DType::U32, x.into()),
                LitValue::Bool(x) => AtomKey::Bool(x),
                LitValue::C64(z) => AtomKey::Complex(z.re.to_bits().into(), z.im.to_bits().into()),
                LitValue::C128(z) => AtomKey::Complex(z.re.to_bits(), z.im.to_bits()),
            },
        }
    }
}

/// An equation's identity: primitive with parameters and result types (as text), operands.
type Key = (String, Vec<AtomKey>);

struct Pass {
    /// Whether `prevent_cse` checkpoints are inlined too.
    across: bool,
    /// Bodies already rewritten, by the address of the original, so sharing survives.
    bodies: HashMap<*const Jaxpr, Arc<Jaxpr>>,
}

/// One jaxpr being rebuilt: the new jaxpr and the equations seen so far.
struct Builder {
    out: Jaxpr,
    seen: HashMap<Key, Vec<Var>>,
    /// The input's top-level equation each equation of `out` comes from.
    origin: Vec<usize>,
    /// The top-level equation being rewritten.
    current: Option<usize>,
}

impl Pass {
    fn jaxpr(&mut self, jaxpr: &Jaxpr) -> Result<Jaxpr, JitError> {
        let mut b = Builder { out: Jaxpr::default(), seen: HashMap::new(), origin: Vec::new(), current: None };
        let mut env: Vec<Option<Atom>> = vec![None; jaxpr.vars.len()];
        b.out.constvars = jaxpr.constvars.iter().map(|&v| b.bind(jaxpr, v, &mut env)).collect();
        b.out.invars = jaxpr.invars.iter().map(|&v| b.bind(jaxpr, v, &mut env)).collect();
        let outs = self.eqns(&mut b, jaxpr, &mut env, true)?;
        b.out.outvars = outs;
        Ok(b.out)
    }

    /// Rewrites `jaxpr`'s equations into `b` (its inputs already bound in `env`) and
    /// returns what its outputs became. `top`: `jaxpr` is `b`'s own (not an inlined body),
    /// whose equations are the origins `b` records.
    fn eqns(
        &mut self,
        b: &mut Builder,
        jaxpr: &Jaxpr,
        env: &mut [Option<Atom>],
        top: bool,
    ) -> Result<Vec<Atom>, JitError> {
        for (e, eqn) in jaxpr.eqns.iter().enumerate() {
            if top {
                b.current = Some(e);
            }
            let ins = eqn.invars.iter().map(|a| read(env, a)).collect::<Result<Vec<_>, _>>()?;
            if let Some(body) = self.inlined(&eqn.primitive) {
                let mut inner: Vec<Option<Atom>> = vec![None; body.vars.len()];
                for (&v, &a) in body.invars.iter().zip(&ins) {
                    inner[v.index()] = Some(a);
                }
                let outs = self.eqns(b, body, &mut inner, false)?;
                for (&v, a) in eqn.outvars.iter().zip(outs) {
                    env[v.index()] = Some(a);
                }
                continue;
            }
            let key = cse_key(jaxpr, eqn, &ins);
            if let Some(prev) = key.as_ref().and_then(|k| b.seen.get(k)) {
                for (&v, &p) in eqn.outvars.iter().zip(prev) {
                    // The first binder may be a dropped one (`_`, as JAX prints the unused
                    // zeros of a `relu`'s jvp); it is read now.
                    b.out.vars[p.index()].dropped = false;
                    env[v.index()] = Some(Atom::Var(p));
                }
                continue;
            }
            let primitive = self.primitive(&eqn.primitive)?;
            let outvars: Vec<Var> = eqn.outvars.iter().map(|&v| b.bind(jaxpr, v, env)).collect();
            if let Some(k) = key {
                b.seen.insert(k, outvars.clone());
            }
            let mut new = Eqn::new(primitive, ins, outvars, eqn.source.clone());
            new.spelling = eqn.spelling.clone();
            b.out.eqns.push(new);
            b.origin.push(b.current.unwrap_or(0));
        }
        jaxpr.outvars.iter().map(|a| read(env, a)).collect()
    }

    /// The body to inline in place of a call equation, if the scope lets it be inlined.
    fn inlined<'p>(&self, prim: &'p Primitive) -> Option<&'p Jaxpr> {
        let inline = match prim.higher_order()? {
            HigherOrder::Jit | HigherOrder::ClosedCall => prim.subjaxprs()[0].constvars.is_empty(),
            HigherOrder::Remat2 => matches!(prim, Primitive::Remat2 { prevent_cse: false, .. }) || self.across,
            HigherOrder::CustomJvpCall
            | HigherOrder::Scan
            | HigherOrder::Cond
            | HigherOrder::While
            | HigherOrder::CustomVjpCall
            | HigherOrder::Composite
            | HigherOrder::ShardMap => false,
        };
        inline.then(|| &**prim.subjaxprs()[0])
    }

    /// `prim` with each body it calls rewritten on its own.
    fn primitive(&mut self, prim: &Primitive) -> Result<Primitive, JitError> {
        prim.try_map_subjaxprs(|body| self.body(body))
    }

    fn body(&mut self, body: &Arc<Jaxpr>) -> Result<Arc<Jaxpr>, JitError> {
        let addr = Arc::as_ptr(body);
        if let Some(done) = self.bodies.get(&addr) {
            return Ok(done.clone());
        }
        let done = Arc::new(self.jaxpr(body)?);
        self.bodies.insert(addr, done.clone());
        Ok(done)
    }
}

impl Builder {
    /// A new variable of the output standing for `v` of `jaxpr`.
    fn bind(&mut self, jaxpr: &Jaxpr, v: Var, env: &mut [Option<Atom>]) -> Var {
        let decl: &VarDecl = &jaxpr.vars[v.index()];
        let new = self.out.new_var(decl.aval.clone());
        self.out.vars[new.index()].dropped = decl.dropped;
        env[v.index()] = Some(Atom::Var(new));
        new
    }
}

/// The key under which `eqn` (with operands `ins` of the output) can be merged, or `None`
/// for equations that are never merged: calls, whose bodies would make long keys and which
/// JAX's programs do not repeat.
fn cse_key(jaxpr: &Jaxpr, eqn: &Eqn, ins: &[Atom]) -> Option<Key> {
    if !eqn.primitive.subjaxprs().is_empty() {
        return None;
    }
    let outs: Vec<String> = eqn.outvars.iter().map(|&v| jaxpr.aval(v).to_string()).collect();
    let text = format!("{} {:?} -> {}", eqn.primitive.name(), eqn.primitive.params(), outs.join(","));
    Some((text, ins.iter().map(AtomKey::of).collect()))
}

fn read(env: &[Option<Atom>], a: &Atom) -> Result<Atom, JitError> {
    match a {
        Atom::Lit(_) => Ok(*a),
        Atom::Var(v) => env
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| JitError::Invalid(format!("cse: variable {v:?} is read before it is bound"))),
    }
}
