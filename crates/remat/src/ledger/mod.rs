//! The residual ledger: where every byte of a vjp's planned peak goes.
//!
//! The vjp of a function is planned as one program, forward half then backward half
//! (`remat_ad::vjp_program`), the way a value-and-grad program runs; the JIT's memory
//! profile (`remat_jit::memory_profile`) says which buffer holds what, where and when. One
//! row per saved residual: its aval and bytes, its name and source, the forward equation
//! that makes it, its lifetime in the planned schedule, why it is saved (the policy's rule)
//! and what recomputing it would cost. Then the other buffers holding bytes at the peak,
//! and a sum: residual bytes at the peak + other buffers + unused bytes (first-fit holes and
//! alignment) = the planned peak, which is `remat bench`'s peak for the same program.
//!
//! A program that is already differentiated (a value-and-grad jaxpr) has no residual
//! split: [`explain_program`] explains its buffers alone.
//!
//! What it keeps true: the ledger's sum is the profile's peak, byte for byte; every number
//! comes from the profile or the program, never from a second model of the planner.

pub use remat_plan::cost;
mod extra;
mod json;
mod text;
mod why;

pub use extra::EXACT_ROWS;
pub use why::policy_words;

use remat_ir::{Array, Atom, Jaxpr, SourceInfo, Var};
use remat_jit::{BufferHome, MemoryProfile, Options};

use crate::{Error, Residual, ResidualKind};

/// The residual split of a vjp program.
#[derive(Clone, Debug)]
pub struct Split {
    /// Equations `0..num_fwd_eqns` of the program are the forward half's.
    pub num_fwd_eqns: usize,
    /// Each residual as an atom of the program.
    pub residual_atoms: Vec<Atom>,
    /// The two halves on their own (as `remat fwd-bwd` prints them).
    pub vjp: remat_ad::Vjp,
}

/// Where a residual lives in the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResidualHome {
    /// An arena buffer of its own, at this byte offset.
    Arena { offset: usize },
    /// Inside output `k`'s memory, before that output is written (no arena bytes).
    InOutput(usize),
    /// The host pool (offloaded).
    HostPool,
    /// The caller's memory: an argument or a constant of the function.
    Caller,
    /// No buffer of its own: the JIT reads it as a view of another buffer or computes it
    /// inside the loops that read it.
    NoBuffer,
}

/// One saved residual.
#[derive(Clone, Debug)]
pub struct LedgerRow {
    /// JAX's description (aval, kind, source, bytes).
    pub residual: Residual,
    /// The forward equation of the program that makes it.
    pub made_by: Option<usize>,
    pub home: ResidualHome,
    /// The profile's buffer holding it, if it has one of its own.
    pub buffer: Option<usize>,
    /// Its lifetime in step positions (inclusive), from the forward step that makes it (or
    /// 0 for an argument) to the last backward step that reads it.
    pub first: usize,
    pub last: usize,
    /// The arena bytes it holds at the peak position.
    pub peak_bytes: usize,
    /// Why it is saved.
    pub why: String,
    /// The forward equations recomputing it would run (from the inputs and the other
    /// residuals), and their FLOPs ([`cost`]).
    pub recompute_eqns: usize,
    pub recompute_flops: u64,
    /// The planned peak if this residual alone were recomputed by the backward half instead
    /// of saved, minus the ledger's peak (negative: recomputing it lowers the peak). Exact
    /// (one buffer plan of that program, [`extra`]), for the [`EXACT_ROWS`] largest
    /// residuals made by an equation; `None` for the others.
    pub extra_peak_bytes: Option<i64>,
}

/// What a buffer is for, as the report colours it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferKind {
    /// Holds a saved residual.
    Residual,
    /// A forward-half value that is not a residual.
    Forward,
    /// A backward-half value: cotangents and gradients being accumulated.
    Backward,
    /// A value of a program without a residual split.
    Temporary,
    /// A copy into an output.
    OutputCopy,
}

impl BufferKind {
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Residual => "residual",
            BufferKind::Forward => "forward temporary",
            BufferKind::Backward => "gradient (backward)",
            BufferKind::Temporary => "temporary",
            BufferKind::OutputCopy => "output copy",
        }
    }
}

/// A buffer that holds bytes at the peak and is no residual's.
#[derive(Clone, Debug)]
pub struct PeakBuffer {
    /// Its index in the profile's buffers.
    pub buffer: usize,
    pub bytes: usize,
    pub offset: usize,
    pub kind: BufferKind,
    /// What it holds, in JAX's words (`f32[64,64] output of dot_general from f.py:3:4`).
    pub what: String,
}

/// The ledger of one program (see the module documentation).
#[derive(Clone, Debug)]
pub struct Ledger {
    /// The planned program: the vjp as one program, or the program given.
    pub program: Jaxpr,
    pub split: Option<Split>,
    pub profile: MemoryProfile,
    pub rows: Vec<LedgerRow>,
    /// The other buffers holding bytes at the peak, by offset.
    pub rest: Vec<PeakBuffer>,
    /// The FLOPs of each equation of the program.
    pub eqn_flops: Vec<u64>,
    /// Each buffer's kind (parallel to the profile's buffers).
    pub kinds: Vec<BufferKind>,
    /// The program is sharded (`remat_jit::is_sharded`): every byte of the profile is one
    /// device's (the program device 0 of the mesh runs, docs/sharding.md).
    pub sharded: bool,
}

impl Ledger {
    pub fn peak_bytes(&self) -> usize {
        self.profile.plan.peak_bytes
    }

    /// The arena bytes residuals hold at the peak.
    pub fn residual_peak_bytes(&self) -> usize {
        self.rows.iter().map(|r| r.peak_bytes).sum()
    }

    /// The bytes of the other buffers at the peak.
    pub fn rest_bytes(&self) -> usize {
        self.rest.iter().map(|b| b.bytes).sum()
    }

    /// The plain-text ledger (one block per residual, then the peak's sum).
    pub fn text(&self) -> String {
        text::ledger_text(self)
    }

    /// Whether equation `e` of the program is in the forward half (every equation is, for
    /// a program without a split).
    pub fn is_forward(&self, e: usize) -> bool {
        self.split.as_ref().is_none_or(|s| e < s.num_fwd_eqns)
    }

    /// The positions of each equation of the program: `(first, last)` inclusive, `None`
    /// for an equation with no step of its own.
    pub fn eqn_positions(&self) -> Vec<Option<(usize, usize)>> {
        let mut out: Vec<Option<(usize, usize)>> = vec![None; self.program.eqns.len()];
        for (p, e) in self.profile.step_eqns.iter().enumerate() {
            if let Some(e) = *e {
                let r = out[e].get_or_insert((p, p));
                r.1 = p;
            }
        }
        out
    }

    /// What buffer `i` of the profile holds, in JAX's words.
    pub fn buffer_what(&self, i: usize) -> String {
        let b = &self.profile.buffers[i];
        match (b.eqn, b.var) {
            (Some(e), Some(v)) => value_words(&self.program, e, v),
            (Some(e), None) => {
                let eqn = &self.program.eqns[e];
                format!("{} bytes inside {}{}", b.bytes, eqn.primitive.name(), from_source(&eqn.source))
            }
            (None, _) => format!("{} bytes copied into an output", b.bytes),
        }
    }
}

/// `f32[5] output of sin from f.py:3:4 (g)`, or `named 'a'` for a `name`.
pub(crate) fn value_words(jaxpr: &Jaxpr, e: usize, v: Var) -> String {
    let eqn = &jaxpr.eqns[e];
    let aval = jaxpr.aval(v);
    match &eqn.primitive {
        remat_ir::Primitive::Name { name } => format!("{aval} named '{name}'{}", from_source(&eqn.source)),
        p => format!("{aval} output of {}{}", p.name(), from_source(&eqn.source)),
    }
}

/// ` from file:line:col (function)`, or nothing for an unknown source.
pub(crate) fn from_source(s: &SourceInfo) -> String {
    if s.is_unknown() {
        return String::new();
    }
    format!(" from {}", source_words(s))
}

/// `file:line:col (function)` as JAX summarizes a source (`remat_ad::summarize`).
pub fn source_words(s: &SourceInfo) -> String {
    remat_ad::summarize(s)
}

/// The ledger of the vjp of `jaxpr` (arguments named `arg_names`), planned as one
/// program under `options`.
pub fn explain_jaxpr(
    jaxpr: &Jaxpr,
    consts: &[Array],
    arg_names: &[String],
    options: &Options,
) -> Result<Ledger, Error> {
    let vp = remat_ad::vjp_program(jaxpr, arg_names)?;
    let split = Split { num_fwd_eqns: vp.num_fwd_eqns, residual_atoms: vp.residuals.clone(), vjp: vp.vjp.clone() };
    build(vp.jaxpr, consts, Some(split), Some(Saver::Policies(jaxpr)), options)
}

/// The ledger of the memory planner's plan (`remat::plan`): its vjp planned as one program,
/// every residual the plan chose saved by a "planner decision".
pub fn explain_plan(plan: &remat_plan::Plan, consts: &[Array], options: &Options) -> Result<Ledger, Error> {
    let num_outs = plan.fwd.outvars.len().saturating_sub(plan.saved.len());
    let vjp = remat_ad::Vjp { fwd: plan.fwd.clone(), bwd: plan.bwd.clone(), num_outs, residuals: plan.saved.clone() };
    let vp = remat_ad::vjp_program_of(vjp)?;
    let split = Split { num_fwd_eqns: vp.num_fwd_eqns, residual_atoms: vp.residuals.clone(), vjp: vp.vjp.clone() };
    build(vp.jaxpr, consts, Some(split), Some(Saver::Planner { budget: plan.budget }), options)
}

/// Who decided what the forward half saves: the policies of the function's checkpoints
/// (looked up in the primal function), or the memory planner's plan for a budget.
enum Saver<'a> {
    Policies(&'a Jaxpr),
    Planner { budget: usize },
}

/// What [`Saver`] says about one residual: the checkpoints' policies by source location.
enum Reasons {
    Policies(why::Contexts),
    Planner { budget: usize },
}

/// The ledger of a program without a residual split (an already-differentiated program):
/// its buffers at the peak, and the sum.
pub fn explain_program(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<Ledger, Error> {
    build(jaxpr.clone(), consts, None, None, options)
}

fn build(
    program: Jaxpr,
    consts: &[Array],
    split: Option<Split>,
    saver: Option<Saver<'_>>,
    options: &Options,
) -> Result<Ledger, Error> {
    let profile = remat_jit::memory_profile(&program, consts, options)?;
    let eqn_flops: Vec<u64> = program.eqns.iter().map(|e| cost::eqn_flops(&program, e)).collect();
    let sharded = remat_jit::is_sharded(&program);
    let mut ledger =
        Ledger { program, split, profile, rows: Vec::new(), rest: Vec::new(), eqn_flops, kinds: Vec::new(), sharded };
    let residual_vars: Vec<Option<Var>> = match &ledger.split {
        Some(s) => s.residual_atoms.iter().map(Atom::as_var).collect(),
        None => Vec::new(),
    };
    ledger.kinds = (0..ledger.profile.buffers.len())
        .map(|i| {
            let b = &ledger.profile.buffers[i];
            match (&ledger.split, b.eqn) {
                _ if b.var.is_some() && residual_vars.contains(&b.var) => BufferKind::Residual,
                (_, None) => BufferKind::OutputCopy,
                (None, Some(_)) => BufferKind::Temporary,
                (Some(s), Some(e)) if e < s.num_fwd_eqns => BufferKind::Forward,
                (Some(_), Some(_)) => BufferKind::Backward,
            }
        })
        .collect();
    if let (Some(split), Some(saver)) = (&ledger.split, saver) {
        ledger.rows = rows(&ledger, split, &saver)?;
        extra_peaks(&mut ledger, consts, options)?;
    }
    let claimed: Vec<usize> = ledger.rows.iter().filter_map(|r| r.buffer).collect();
    ledger.rest = ledger
        .profile
        .peak
        .live
        .iter()
        .filter(|i| !claimed.contains(i))
        .map(|&i| {
            let b = &ledger.profile.buffers[i];
            PeakBuffer {
                buffer: i,
                bytes: b.bytes,
                offset: b.offset,
                kind: ledger.kinds[i],
                what: ledger.buffer_what(i),
            }
        })
        .collect();
    Ok(ledger)
}

fn rows(ledger: &Ledger, split: &Split, saver: &Saver<'_>) -> Result<Vec<LedgerRow>, Error> {
    let program = &ledger.program;
    let profile = &ledger.profile;
    let positions = ledger.eqn_positions();
    let mut producer: Vec<Option<usize>> = vec![None; program.vars.len()];
    for (e, eqn) in program.eqns.iter().enumerate() {
        for v in &eqn.outvars {
            producer[v.index()] = Some(e);
        }
    }
    let saved: Vec<Var> = split.residual_atoms.iter().filter_map(Atom::as_var).collect();
    let reasons = match saver {
        Saver::Policies(primal) => Reasons::Policies(why::Contexts::of(primal)),
        Saver::Planner { budget } => Reasons::Planner { budget: *budget },
    };
    let last_position = profile.positions.saturating_sub(1);
    let mut out = Vec::new();
    for (residual, atom) in split.vjp.residuals.iter().zip(&split.residual_atoms) {
        let var = atom.as_var();
        // JAX looks through a `reduce_precision` to the value it rounds.
        let made_by = var.and_then(|v| producer[v.index()]).map(|e| {
            let eqn = &program.eqns[e];
            if matches!(eqn.primitive, remat_ir::Primitive::ReducePrecision { .. }) {
                eqn.invars.first().and_then(Atom::as_var).and_then(|u| producer[u.index()]).unwrap_or(e)
            } else {
                e
            }
        });
        let buffer = var.and_then(|v| profile.buffers.iter().position(|b| b.var == Some(v)));
        let home = match (buffer.map(|i| &profile.buffers[i]), &residual.kind) {
            (Some(b), _) => match b.home {
                BufferHome::Arena => ResidualHome::Arena { offset: b.offset },
                BufferHome::Output(o) => ResidualHome::InOutput(o),
                BufferHome::HostPool => ResidualHome::HostPool,
            },
            (None, ResidualKind::Argument(_) | ResidualKind::Constant | ResidualKind::Literal) => ResidualHome::Caller,
            (None, _) => ResidualHome::NoBuffer,
        };
        // From the step that makes it to the last step that reads it.
        let readers = var.map(|v| {
            program
                .eqns
                .iter()
                .enumerate()
                .filter(|(_, e)| e.invars.iter().any(|a| a.as_var() == Some(v)))
                .filter_map(|(e, _)| positions[e].map(|p| p.1))
                .max()
        });
        let (first, last) = match buffer.map(|i| &profile.buffers[i]) {
            Some(b) => (b.first, b.last),
            None => {
                // An equation without steps of its own (fused into its readers) counts
                // from the next step after it.
                let first = made_by.and_then(|e| positions[e..].iter().flatten().next()).map_or(0, |p| p.0);
                (first, readers.flatten().unwrap_or(last_position).max(first))
            }
        };
        let peak_bytes = match buffer {
            Some(i) if profile.peak.live.contains(&i) => profile.buffers[i].bytes,
            _ => 0,
        };
        let cone = made_by.map(|e| recompute_cone(program, e, &saved, var, &producer)).unwrap_or_default();
        let (recompute_eqns, recompute_flops) = (cone.len(), cone.iter().map(|&i| ledger.eqn_flops[i]).sum());
        let why = match &reasons {
            Reasons::Policies(contexts) => why::why_saved(contexts, residual, made_by.map(|e| (program, e)))?,
            Reasons::Planner { budget } => why::planner_decision(residual, *budget),
        };
        out.push(LedgerRow {
            residual: residual.clone(),
            made_by,
            home,
            buffer,
            first,
            last,
            peak_bytes,
            why,
            recompute_eqns,
            recompute_flops,
            extra_peak_bytes: None,
        });
    }
    Ok(out)
}

/// The extra peak of the [`EXACT_ROWS`] largest residuals made by an equation.
fn extra_peaks(ledger: &mut Ledger, consts: &[Array], options: &Options) -> Result<(), Error> {
    let Some(split) = &ledger.split else { return Ok(()) };
    let program = &ledger.program;
    let mut producer: Vec<Option<usize>> = vec![None; program.vars.len()];
    for (e, eqn) in program.eqns.iter().enumerate() {
        for v in &eqn.outvars {
            producer[v.index()] = Some(e);
        }
    }
    let saved: Vec<Var> = split.residual_atoms.iter().filter_map(Atom::as_var).collect();
    let made = |k: usize| split.residual_atoms[k].as_var().and_then(|v| producer[v.index()].map(|e| (v, e)));
    let mut order: Vec<usize> = (0..ledger.rows.len()).filter(|&k| made(k).is_some()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(ledger.rows[k].residual.bytes), k));
    let peak = ledger.peak_bytes() as i64;
    let mut extras = Vec::new();
    for k in order.into_iter().take(EXACT_ROWS) {
        let Some((v, e)) = made(k) else { continue };
        let cone = recompute_cone(program, e, &saved, Some(v), &producer);
        let p = extra::peak_recomputing(program, consts, split.num_fwd_eqns, &cone, v, options)?;
        extras.push((k, p as i64 - peak));
    }
    for (k, x) in extras {
        ledger.rows[k].extra_peak_bytes = Some(x);
    }
    Ok(())
}

/// The forward equations that recomputing the value of equation `e` would run, in program
/// order: `e` and, transitively, the producers of its operands that are neither inputs nor
/// saved.
fn recompute_cone(
    program: &Jaxpr,
    e: usize,
    saved: &[Var],
    var: Option<Var>,
    producer: &[Option<usize>],
) -> Vec<usize> {
    let mut seen = vec![false; program.eqns.len()];
    let mut stack = vec![e];
    seen[e] = true;
    while let Some(x) = stack.pop() {
        for v in program.eqns[x].invars.iter().filter_map(Atom::as_var) {
            if saved.contains(&v) && Some(v) != var {
                continue;
            }
            if let Some(p) = producer[v.index()] {
                if !seen[p] {
                    seen[p] = true;
                    stack.push(p);
                }
            }
        }
    }
    (0..seen.len()).filter(|&i| seen[i]).collect()
}
