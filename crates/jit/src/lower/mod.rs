//! The front end: a jaxpr becomes a [`Program`] of kernels over buffers.
//!
//! Calls (`jit`, `remat2`, `custom_jvp_call`, `custom_vjp_call`) are inlined; `scan` becomes a
//! [`Step::Loop`], `cond` a [`Step::Switch`] and `while` a [`Step::While`].
//! Elementwise equations and layout equations that only move elements stay lazy: their
//! value is an [`Expr`] over the buffers they read, and a consumer folds it into its own
//! loop. A value is materialized (written to a buffer by a kernel) only where it must be:
//! it is read more than once and costs arithmetic, a non-elementwise consumer needs it in
//! memory, it is an output, or its expression grew too large for one loop body.
//!
//! What it keeps true: every buffer a lazy expression reads holds its final value for as
//! long as the expression can be evaluated (buffers are written once, and a scan's carry
//! buffers are rewritten only after every value of the iteration has been computed).

mod control;
mod conv_gemm;
mod dtypes;
mod native;
mod ops;
mod pool;
mod scan;
mod scan_hoist;
mod share;
mod window;

pub(crate) use ops::SMALL_DOT_MACS;

pub(crate) use dtypes::{reduce_binary, reduce_identity};

use std::collections::HashSet;

use remat_ir::{Array, Atom, Aval, Jaxpr, LitValue, MemorySpace, Primitive, Var};

use crate::expr::{Expr, IndexMap, View};
use crate::program::{BufId, Program, Step, Storage};
use crate::JitError;

/// Expressions larger than this are materialized, to keep loop bodies (and compile times)
/// bounded.
const MAX_FUSED_NODES: usize = 48;

/// A value during lowering: its expression and its type.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub expr: Expr,
    pub aval: Aval,
}

impl Val {
    fn shape(&self) -> &[usize] {
        &self.aval.shape
    }
}

/// The lowering state: the program being built and the step list being appended to.
pub(crate) struct Lowering {
    pub prog: Program,
    pub consts: Vec<Array>,
    /// A stack of step lists; the top one is the current scope (a scan body pushes one).
    scopes: Vec<Vec<Step>>,
    /// Where the next `dot_general` writes when its only reader is a `transpose`: the
    /// transpose's buffer and permutation, so the GEMM stores the transposed layout directly
    /// (through its output strides) and the transpose costs nothing.
    pub(crate) dot_dst: Option<(BufId, Vec<usize>)>,
    /// Products up to this many multiply-adds are loops (`Options::small_dot_macs`).
    pub(crate) small_dot_macs: usize,
    /// How many `lower_jaxpr` calls are under way (1: the top level).
    depth: usize,
    /// The top-level equation being lowered.
    current: Option<usize>,
    /// The equation of each step of the top-level scope, as pushed.
    step_eqn: Vec<Option<usize>>,
}

/// Lowers a whole jaxpr with `consts` bound to its constvars.
pub(crate) fn lower_program(
    jaxpr: &Jaxpr,
    consts: &[Array],
    options: &crate::Options,
) -> Result<(Program, Vec<Array>), JitError> {
    let mut lw = Lowering {
        prog: Program::default(),
        consts: Vec::new(),
        scopes: vec![Vec::new()],
        dot_dst: None,
        small_dot_macs: options.small_dot_macs,
        depth: 0,
        current: None,
        step_eqn: Vec::new(),
    };
    let args: Vec<Val> = jaxpr
        .invars
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let aval = jaxpr.aval(v).clone();
            let buf = lw.prog.new_buffer(Storage::Arg(i), aval.size_in_bytes(), aval.dtype.size_in_bytes());
            Val { expr: Expr::Load(View::contiguous(buf, aval.dtype, &aval.shape)), aval }
        })
        .collect();
    lw.prog.num_args = args.len();
    let const_vals = lw.add_consts(consts);
    let out_avals = jaxpr.out_avals();
    lw.prog.num_outs = out_avals.len();
    let targets: Vec<Option<BufId>> = out_avals
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let storage = Storage::Out { index, host: a.memory_space == MemorySpace::Host };
            Some(lw.prog.new_buffer(storage, a.size_in_bytes(), a.dtype.size_in_bytes()))
        })
        .collect();
    let outs = lw.lower_jaxpr(jaxpr, const_vals, args, &targets)?;
    for (val, target) in outs.into_iter().zip(targets) {
        let target = target.expect("every output has a buffer");
        if !lw.is_whole(&val, target) {
            lw.write(&val, target);
        }
    }
    let mut prog = lw.prog;
    prog.steps = lw.scopes.pop().unwrap_or_default();
    prog.num_consts = lw.consts.len();
    let written = |s: &Step| {
        let mut w = Vec::new();
        s.writes(&mut w);
        w
    };
    let before: Vec<Vec<BufId>> = prog.steps.iter().map(written).collect();
    let unfolded = options.fold_at_peak.then(|| prog.clone());
    let refused = share::fold_single_consumer_kernels(&mut prog, MAX_FUSED_NODES, &HashSet::new());
    // Folds past the node limit that free a buffer live at the peak, kept where they lower it.
    // Where no fold was refused for a buffer live at the peak, folding again with those
    // buffers named gives the program just folded, whose peak is no lower: skipped.
    if let Some(mut freeing) = unfolded {
        let (at_peak, peak) = crate::profile::buffers_at_peak(&prog);
        let at_peak: HashSet<BufId> = at_peak.into_iter().collect();
        if at_peak.iter().any(|b| refused.contains(b)) {
            share::fold_single_consumer_kernels(&mut freeing, MAX_FUSED_NODES, &at_peak);
            if crate::plan::plan(&freeing).device_bytes < peak {
                prog = freeing;
            }
        } else if cfg!(debug_assertions) {
            // Debug builds (every test) check the skip: the folding skipped gives the
            // program just folded.
            share::fold_single_consumer_kernels(&mut freeing, MAX_FUSED_NODES, &at_peak);
            assert_eq!(
                format!("{:?}", freeing.steps),
                format!("{:?}", prog.steps),
                "folding again with no refused buffer named changed the program"
            );
        }
    }
    // Folding only removes kernels (whose buffers no surviving step writes) and keeps the
    // order, so each surviving step is the next one before folding that writes the same.
    let mut k = 0;
    let mut step_eqn = Vec::with_capacity(prog.steps.len());
    for s in &prog.steps {
        let w = written(s);
        while k < before.len() && before[k] != w {
            k += 1;
        }
        step_eqn.push(lw.step_eqn.get(k).copied().flatten());
        k += 1;
    }
    prog.provenance.step_eqn = step_eqn;
    prog.provenance.buffer_eqn.resize(prog.buffers.len(), None);
    prog.provenance.buffer_var.resize(prog.buffers.len(), None);
    Ok((prog, lw.consts))
}

impl Lowering {
    fn push(&mut self, step: Step) {
        if self.scopes.len() == 1 {
            self.step_eqn.push(self.current);
        }
        self.scopes.last_mut().expect("a scope is open").push(step);
    }

    /// Registers the constants of a closed jaxpr; their values are loads of constant buffers.
    pub(crate) fn add_consts(&mut self, consts: &[Array]) -> Vec<Val> {
        consts
            .iter()
            .map(|c| {
                let i = self.consts.len();
                self.consts.push(c.clone());
                let aval = c.aval();
                let buf = self.prog.new_buffer(Storage::Const(i), aval.size_in_bytes(), aval.dtype.size_in_bytes());
                Val { expr: Expr::Load(View::contiguous(buf, aval.dtype, &aval.shape)), aval }
            })
            .collect()
    }

    /// A fresh arena buffer for a value of `aval`.
    pub(crate) fn new_buf(&mut self, aval: &Aval) -> BufId {
        let host = aval.memory_space == MemorySpace::Host;
        self.prog.new_buffer(Storage::Arena { host }, aval.size_in_bytes(), aval.dtype.size_in_bytes())
    }

    /// Whether `val` is exactly the whole of `buf`, row-major.
    pub(crate) fn is_whole(&self, val: &Val, buf: BufId) -> bool {
        match &val.expr {
            Expr::Load(v) => v.buf == buf && v.offset == 0 && v.dynamic.is_empty() && v.is_row_major(val.shape()),
            _ => false,
        }
    }

    /// Emits a kernel writing `val` into the whole of `buf`.
    pub(crate) fn write(&mut self, val: &Val, buf: BufId) {
        if val.aval.size() == 0 {
            return;
        }
        let dst = View::contiguous(buf, val.aval.dtype, val.shape());
        self.push(Step::Kernel { space: val.aval.shape.clone(), dst, src: val.expr.clone() });
    }

    /// The value in a buffer of its own (`target` if given), as a row-major load.
    pub(crate) fn materialize(&mut self, val: Val, target: Option<BufId>) -> Val {
        if let Some(t) = target {
            if self.is_whole(&val, t) {
                return val;
            }
        }
        if target.is_none() {
            if let Expr::Load(v) = &val.expr {
                if v.offset == 0 && v.dynamic.is_empty() && v.is_row_major(val.shape()) {
                    return val;
                }
            }
        }
        let buf = target.unwrap_or_else(|| self.new_buf(&val.aval));
        self.write(&val, buf);
        Val { expr: Expr::Load(View::contiguous(buf, val.aval.dtype, val.shape())), aval: val.aval }
    }

    /// The value as some load of memory (any strides), materializing it if it computes.
    pub(crate) fn as_view(&mut self, val: Val) -> (View, Val) {
        let val = match &val.expr {
            Expr::Load(_) => val,
            _ => self.materialize(val, None),
        };
        match &val.expr {
            Expr::Load(v) => (v.clone(), val.clone()),
            _ => unreachable!("materialize gives a load"),
        }
    }

    /// A scalar `i32` value as a buffer whose element 0 holds it (for dynamic offsets).
    pub(crate) fn scalar_buf(&mut self, val: Val) -> BufId {
        if let Expr::Load(v) = &val.expr {
            if v.offset == 0 && v.dynamic.is_empty() {
                return v.buf;
            }
        }
        let buf = self.new_buf(&val.aval);
        self.write(&val, buf);
        buf
    }

    /// `val` read through `map` into an index space of `new_shape`. An expression that
    /// computes is materialized first when the map would evaluate it more often.
    pub(crate) fn remap(&mut self, val: Val, map: &IndexMap, new_shape: Vec<usize>) -> Val {
        let grows = new_shape.iter().product::<usize>() > val.aval.size();
        let val = if grows && !val.expr.is_trivial() { self.materialize(val, None) } else { val };
        let aval = Aval::new(val.aval.dtype, new_shape).with_memory_space(val.aval.memory_space);
        Val { expr: val.expr.remap(map), aval }
    }

    /// Lowers `jaxpr` in the current scope; `targets[j]` is a buffer that output `j` should
    /// be computed into, where that saves a copy.
    pub(crate) fn lower_jaxpr(
        &mut self,
        jaxpr: &Jaxpr,
        consts: Vec<Val>,
        args: Vec<Val>,
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        self.depth += 1;
        let outs = self.lower_jaxpr_body(jaxpr, consts, args, targets);
        self.depth -= 1;
        if self.depth == 0 {
            self.current = None;
        }
        outs
    }

    fn lower_jaxpr_body(
        &mut self,
        jaxpr: &Jaxpr,
        consts: Vec<Val>,
        args: Vec<Val>,
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let top = self.depth == 1;
        let uses = use_counts(jaxpr);
        let mut env: Vec<Option<Val>> = vec![None; jaxpr.vars.len()];
        let mut target: Vec<Option<BufId>> = vec![None; jaxpr.vars.len()];
        let bound: Vec<Var> = jaxpr.constvars.iter().chain(&jaxpr.invars).copied().collect();
        for (&v, val) in bound.iter().zip(consts.into_iter().chain(args)) {
            let val = if uses[v.index()] > 1 && !val.expr.is_trivial() { self.materialize(val, None) } else { val };
            env[v.index()] = Some(val);
        }
        // Each target goes to the first output variable that is computed here (not an
        // input) and has no target yet; sets keep this linear in the number of outputs.
        let bound: HashSet<Var> = bound.into_iter().collect();
        let mut taken: HashSet<BufId> = HashSet::new();
        for (atom, t) in jaxpr.outvars.iter().zip(targets) {
            if let (Atom::Var(v), Some(t)) = (atom, t) {
                if !bound.contains(v) && target[v.index()].is_none() && taken.insert(*t) {
                    target[v.index()] = Some(*t);
                }
            }
        }
        let transposed = transposed_dots(jaxpr, &uses);
        let identities = remat_ir::identities(jaxpr);
        for (e, eqn) in jaxpr.eqns.iter().enumerate() {
            let ins: Vec<Val> = eqn.invars.iter().map(|a| read(jaxpr, &env, a)).collect::<Result<_, _>>()?;
            let out_avals: Vec<Aval> = eqn.outvars.iter().map(|&v| jaxpr.aval(v).clone()).collect();
            let out_targets: Vec<Option<BufId>> = eqn.outvars.iter().map(|&v| target[v.index()]).collect();
            if eqn.outvars.iter().all(|v| uses[v.index()] == 0) && !out_targets.iter().any(Option::is_some) {
                continue; // dead: nothing reads any result
            }
            let first_buf = self.prog.buffers.len();
            if top {
                self.current = Some(e);
            }
            if let Some((perm, reader)) = &transposed[e] {
                let u = jaxpr.eqns[*reader].outvars[0];
                let buf = target[u.index()].unwrap_or_else(|| self.new_buf(jaxpr.aval(u)));
                target[u.index()] = Some(buf);
                self.dot_dst = Some((buf, perm.clone()));
            }
            let outs = match identities[e] {
                // XLA deletes the equation: the operand's bits, never computed.
                Some(identity) => Ok(vec![self.identity(identity, &ins, &out_avals[0])]),
                None => self.lower_eqn(&eqn.primitive, ins, &out_avals, &out_targets),
            };
            self.dot_dst = None;
            let outs = outs?;
            for ((&v, val), t) in eqn.outvars.iter().zip(outs).zip(out_targets) {
                let val = if t.is_some() {
                    self.materialize(val, t)
                } else if (uses[v.index()] > 1 && !val.expr.is_trivial() && !val.expr.is_cheap_derivation())
                    || val.expr.size() > MAX_FUSED_NODES
                {
                    self.materialize(val, None)
                } else {
                    val
                };
                if top {
                    self.record_value(v, &val);
                }
                env[v.index()] = Some(val);
            }
            if top {
                let p = &mut self.prog.provenance;
                p.buffer_eqn.resize(self.prog.buffers.len(), None);
                p.buffer_eqn[first_buf..].iter_mut().for_each(|o| *o = Some(e));
            }
        }
        jaxpr.outvars.iter().map(|a| read(jaxpr, &env, a)).collect()
    }

    /// Records that the top-level variable `v` is held whole by the arena buffer its value
    /// loads, if it does and that buffer holds no other variable yet.
    fn record_value(&mut self, v: Var, val: &Val) {
        let Expr::Load(view) = &val.expr else { return };
        let b = view.buf.0 as usize;
        let whole =
            view.offset == 0 && view.dynamic.is_empty() && self.prog.buffers[b].bytes == val.aval.size_in_bytes();
        if !whole || !matches!(self.prog.buffers[b].storage, Storage::Arena { .. }) {
            return;
        }
        let vars = &mut self.prog.provenance.buffer_var;
        vars.resize(self.prog.buffers.len(), None);
        vars[b].get_or_insert(v);
    }

    /// Inlines a called jaxpr.
    pub(crate) fn call(
        &mut self,
        jaxpr: &Jaxpr,
        consts: &[Array],
        ins: Vec<Val>,
        targets: &[Option<BufId>],
    ) -> Result<Vec<Val>, JitError> {
        let consts = self.add_consts(consts);
        self.lower_jaxpr(jaxpr, consts, ins, targets)
    }

    /// Runs `f` in a fresh scope and returns its steps.
    pub(crate) fn scoped<T>(
        &mut self,
        f: impl FnOnce(&mut Lowering) -> Result<T, JitError>,
    ) -> Result<(T, Vec<Step>), JitError> {
        self.scopes.push(Vec::new());
        let r = f(self);
        let steps = self.scopes.pop().unwrap_or_default();
        Ok((r?, steps))
    }

    pub(crate) fn push_step(&mut self, step: Step) {
        self.push(step);
    }
}

fn read(jaxpr: &Jaxpr, env: &[Option<Val>], atom: &Atom) -> Result<Val, JitError> {
    match atom {
        Atom::Lit(l) => Ok(Val { expr: Expr::Lit(l.value), aval: l.aval() }),
        Atom::Var(v) => env.get(v.index()).cloned().flatten().ok_or_else(|| {
            JitError::Invalid(format!("variable {v:?} is read before it has a value ({} vars)", jaxpr.vars.len()))
        }),
    }
}

/// How many times each variable is read (by equations and as an output).
fn use_counts(jaxpr: &Jaxpr) -> Vec<usize> {
    let mut uses = vec![0usize; jaxpr.vars.len()];
    for eqn in &jaxpr.eqns {
        for v in eqn.invars.iter().filter_map(Atom::as_var) {
            uses[v.index()] += 1;
        }
    }
    for v in jaxpr.outvars.iter().filter_map(Atom::as_var) {
        uses[v.index()] += 1;
    }
    uses
}

/// For each equation: if it is a `dot_general` whose result is read only by one `transpose`,
/// that transpose's permutation and equation index.
fn transposed_dots(jaxpr: &Jaxpr, uses: &[usize]) -> Vec<Option<(Vec<usize>, usize)>> {
    let mut producer = vec![None; jaxpr.vars.len()];
    for (e, eqn) in jaxpr.eqns.iter().enumerate() {
        // A complex product is a native step, which writes its own buffer row-major.
        if matches!(eqn.primitive, Primitive::DotGeneral { .. }) && !jaxpr.aval(eqn.outvars[0]).dtype.is_complex() {
            producer[eqn.outvars[0].index()] = Some(e);
        }
    }
    let mut out = vec![None; jaxpr.eqns.len()];
    for (r, eqn) in jaxpr.eqns.iter().enumerate() {
        if let (Primitive::Transpose { permutation }, Some(Atom::Var(v))) = (&eqn.primitive, eqn.invars.first()) {
            if let (Some(e), 1) = (producer[v.index()], uses[v.index()]) {
                let aval = jaxpr.aval(eqn.outvars[0]);
                if aval.memory_space == jaxpr.aval(*v).memory_space {
                    out[e] = Some((permutation.clone(), r));
                }
            }
        }
    }
    out
}

/// A literal scalar's value as an `i64`, if `val` is one.
pub(crate) fn literal_int(val: &Val) -> Option<i64> {
    match val.expr {
        Expr::Lit(LitValue::I8(i)) => Some(i as i64),
        Expr::Lit(LitValue::I16(i)) => Some(i as i64),
        Expr::Lit(LitValue::I32(i)) => Some(i as i64),
        Expr::Lit(LitValue::I64(i)) => Some(i),
        Expr::Lit(LitValue::U8(i)) => Some(i as i64),
        Expr::Lit(LitValue::U32(i)) => Some(i as i64),
        _ => None,
    }
}

/// The unsupported-primitive error.
pub(crate) fn unsupported(prim: &Primitive, reason: impl Into<String>) -> JitError {
    JitError::Unsupported { primitive: prim.name(), reason: reason.into() }
}
