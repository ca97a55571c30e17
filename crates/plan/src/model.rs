//! The cost model: what a plan saves, what it recomputes and what that costs.
//!
//! A plan is a set of *saved* candidate equations of the checkpointed body (the jvp of the
//! flattened function, `remat_ad::Checkpointed::body`); every other candidate is
//! recomputed by the backward half when it needs it. Two measures:
//!
//! - **Recompute FLOPs** (analytic, exact for the split partial evaluation makes): the
//!   backward half reads some primal values (`needed`); a needed value made by a saved
//!   equation is a residual, one made by a recomputed equation is recomputed, and so are,
//!   transitively, the recomputed values its inputs need. The FLOPs of the recomputed
//!   equations are [`eqn_flops`]: `dot_general` and `conv_general_dilated` count 2 per
//!   multiply-add; every other primitive one per element of its largest operand or
//!   result; a `scan` its body's FLOPs times its length; other calls their bodies'.
//! - **Peak bytes** (exact): the whole program `jax.value_and_grad` runs under the plan
//!   (forward, then backward on the cotangent `1.0`), planned by the JIT's buffer planner
//!   without code generation (`remat_jit::memory_plan`) with exactly the options `remat
//!   bench` and `remat::run::Program` compile with ([`measure_options`]): the figure `remat
//!   bench` reports for the planned program, byte for byte.
//!
//! The program a plan gives depends only on its recompute set (a saved equation whose
//! value nobody reads, and an unsaved one nobody recomputes, both vanish in dead-code
//! elimination), so plans are compared and deduplicated by that set.

use std::collections::BTreeSet;
use std::sync::Arc;

use remat_ad::{Checkpointed, Saveability, Vjp};
use remat_ir::layout::{Arguments, Layouts};
use remat_ir::{Array, Atom, ClosedJaxpr, Eqn, HigherOrder, Jaxpr, Var};

use crate::cost::{eqn_flops, jaxpr_flops};
use remat_jit::{memory_plan, memory_plan_cached, MemoryPlanCache, Options};

use crate::PlanError;

/// The JIT options the planner measures plans with: the ones `remat bench` and
/// `remat::run::Program` compile with (the defaults), so that a plan's peak is the compiled
/// program's.
pub fn measure_options() -> Options {
    Options::default()
}

/// The cost model of one function: its checkpointed body and what each equation costs.
#[derive(Debug)]
pub struct Model {
    cp: Checkpointed,
    consts: Vec<Array>,
    argnums: Vec<usize>,
    arg_names: Vec<String>,
    /// Per variable of the body: a primal (known) value.
    known: Vec<bool>,
    /// Per variable of the body: the equation that makes it.
    producer: Vec<Option<usize>>,
    /// Per equation: a candidate (a known first-order equation a plan may recompute).
    candidate: Vec<bool>,
    /// The candidates that can matter (reachable backwards from `needed`), in order.
    relevant: Vec<usize>,
    /// The primal values the backward half reads.
    needed: Vec<Var>,
    flops: Vec<u64>,
    /// Per variable of the body: its bytes on one device.
    bytes: Vec<u64>,
    /// The FLOPs of the whole program when nothing is recomputed.
    base_flops: u64,
    /// The memory plans of the programs measured (two plans may give one program: a
    /// built-in policy's and a search's, or one plan measured again for its report).
    cache: MemoryPlanCache,
}

/// What the search keeps of a plan evaluated exactly ([`Evaluated`]'s numbers).
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub peak_bytes: usize,
    pub recompute_flops: u64,
    pub residual_bytes: u64,
    pub host_bytes: usize,
}

/// What a plan does, analytically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    /// The recomputed equations (indices into the body), ascending.
    pub recompute: Vec<usize>,
    /// The body's variables the forward half saves (excluding the arguments).
    pub residuals: Vec<Var>,
    pub residual_bytes: u64,
    pub recompute_flops: u64,
}

/// A plan evaluated exactly: its vjp, the whole program and its planned peak.
#[derive(Clone, Debug)]
pub struct Evaluated {
    pub analysis: Analysis,
    /// One decision per equation of the body.
    pub decisions: Vec<Saveability>,
    pub vjp: Vjp,
    /// `(primals) -> (value, grads)`: what `remat bench` runs.
    pub program: Jaxpr,
    pub peak_bytes: usize,
    /// The bytes of what the forward half saves beyond the arguments (the residuals made
    /// by equations, offloaded ones included): the sum of the plan's listed residuals.
    pub residual_bytes: u64,
    /// The host memory the program uses: offloaded residuals (and host arguments).
    pub host_bytes: usize,
    /// The arguments' and outputs' bytes in the peak.
    pub io_bytes: usize,
    /// The FLOPs `program` runs beyond the program that recomputes nothing
    /// ([`crate::cost::jaxpr_flops`]): what the plan's recomputation costs, measured.
    pub recompute_flops: u64,
}

impl Evaluated {
    /// The whole program `program` (split as `vjp`) planned by the JIT, with its FLOPs
    /// beyond `base_flops`: a plan's measurements.
    pub(crate) fn measure(
        analysis: Analysis,
        decisions: Vec<Saveability>,
        vjp: Vjp,
        program: Jaxpr,
        consts: &[Array],
        base_flops: u64,
        cache: Option<&MemoryPlanCache>,
    ) -> Result<Evaluated, PlanError> {
        let plan = plan_memory(&program, consts, cache)?;
        let recompute_flops = jaxpr_flops(&program).saturating_sub(base_flops);
        let residual_bytes = saved_bytes(&vjp.residuals);
        Ok(Evaluated {
            analysis,
            decisions,
            vjp,
            program,
            peak_bytes: plan.peak_bytes,
            residual_bytes,
            host_bytes: plan.host_bytes,
            io_bytes: plan.io_bytes,
            recompute_flops,
        })
    }
}

/// The JIT's memory plan of `program` with the planner's options, through `cache` if given.
fn plan_memory(
    program: &Jaxpr,
    consts: &[Array],
    cache: Option<&MemoryPlanCache>,
) -> Result<remat_jit::MemoryPlan, PlanError> {
    Ok(match cache {
        Some(cache) => memory_plan_cached(program, consts, &measure_options(), cache)?,
        None => memory_plan(program, consts, &measure_options())?,
    })
}

/// The bytes of the residuals equations make (not the arguments, constants or literals):
/// what a plan saves beyond the arguments, on one device (all of them, for a program on
/// one device).
pub fn saved_bytes(residuals: &[remat_ad::Residual]) -> u64 {
    residuals
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                remat_ad::ResidualKind::Output(_) | remat_ad::ResidualKind::Named(_) | remat_ad::ResidualKind::Jit(_)
            )
        })
        .map(|r| r.device_bytes as u64)
        .sum()
}

impl Model {
    /// The model of `f` (a scalar loss) differentiated with respect to `argnums` (all
    /// float inputs when `None`).
    pub fn new(f: &ClosedJaxpr, argnums: Option<&[usize]>, arg_names: &[String]) -> Result<Model, PlanError> {
        let jaxpr = &f.jaxpr;
        let argnums: Vec<usize> = match argnums {
            Some(a) => a.to_vec(),
            None => (0..jaxpr.invars.len()).filter(|&i| jaxpr.aval(jaxpr.invars[i]).dtype.is_float()).collect(),
        };
        let cp = Checkpointed::new(jaxpr, Some(&argnums))?;
        let body = Arc::clone(cp.body());
        let n_tangents = cp.in_nonzeros().iter().filter(|&&t| t).count();
        let n_known_ins = body.invars.len() - n_tangents;
        let mut known = vec![false; body.vars.len()];
        for &c in &body.constvars {
            known[c.index()] = true;
        }
        for &v in &body.invars[..n_known_ins] {
            known[v.index()] = true;
        }
        let mut producer = vec![None; body.vars.len()];
        let mut candidate = vec![false; body.eqns.len()];
        let mut needed = BTreeSet::new();
        let vars = |e: &Eqn| -> Vec<Var> {
            e.invars
                .iter()
                .filter_map(|a| match a {
                    Atom::Var(v) => Some(*v),
                    Atom::Lit(_) => None,
                })
                .collect()
        };
        for (i, e) in body.eqns.iter().enumerate() {
            let ins = vars(e);
            let is_known = ins.iter().all(|v| known[v.index()]);
            for &o in &e.outvars {
                producer[o.index()] = Some(i);
                known[o.index()] = is_known;
            }
            if is_known {
                // Partial evaluation splits a known scan, cond or call by its own rule
                // (its outputs stay saved); other known equations ask the plan.
                candidate[i] = !matches!(
                    e.primitive.higher_order(),
                    Some(
                        HigherOrder::Scan
                            | HigherOrder::Cond
                            | HigherOrder::Jit
                            | HigherOrder::ClosedCall
                            | HigherOrder::Remat2
                    )
                );
            } else {
                needed.extend(ins.into_iter().filter(|v| known[v.index()]));
            }
        }
        let flops: Vec<u64> = body.eqns.iter().map(|e| eqn_flops(&body, e)).collect();
        // What one device holds of each value (all of it, for a program on one device): the
        // peak the planner measures is one device's (`remat_jit::memory_plan`).
        let layouts = Layouts::of(&body, Arguments::AsUsed);
        let bytes: Vec<u64> = (0..body.vars.len()).map(|v| layouts.device_bytes(&body, Var(v as u32)) as u64).collect();
        let mut model = Model {
            cp,
            consts: f.consts.clone(),
            argnums,
            arg_names: arg_names.to_vec(),
            known,
            producer,
            candidate,
            relevant: Vec::new(),
            needed: needed.into_iter().collect(),
            flops,
            bytes,
            base_flops: 0,
            cache: MemoryPlanCache::default(),
        };
        // Everything recomputed reaches every candidate that can matter.
        let all = model.analyze(&vec![false; model.body().eqns.len()]);
        model.relevant = all.recompute;
        let saved_all = vec![true; model.body().eqns.len()];
        model.base_flops = jaxpr_flops(&model.program(model.decisions(&saved_all, &[]))?.1);
        Ok(model)
    }

    pub fn body(&self) -> &Jaxpr {
        self.cp.body()
    }

    /// The function planned, its top-level calls inlined (`Checkpointed::flat`).
    pub fn flat(&self) -> &Jaxpr {
        self.cp.flat()
    }

    /// The candidates a plan chooses among (equations of the body), in program order.
    pub fn relevant(&self) -> &[usize] {
        &self.relevant
    }

    pub fn argnums(&self) -> &[usize] {
        &self.argnums
    }

    pub fn flops(&self, eqn: usize) -> u64 {
        self.flops[eqn]
    }

    /// The bytes of the body's variable `v`.
    pub fn bytes(&self, v: Var) -> u64 {
        self.bytes[v.index()]
    }

    /// Whether the body's variable `v` is a primal (known) value.
    pub fn is_known(&self, v: Var) -> bool {
        self.known[v.index()]
    }

    /// The equation of the body that makes `v` (none for an input).
    pub fn producer(&self, v: Var) -> Option<usize> {
        self.producer[v.index()]
    }

    pub fn is_candidate(&self, eqn: usize) -> bool {
        self.candidate[eqn]
    }

    /// The candidates making a primal value the backward half reads, ascending: where
    /// every recompute set starts (`exact.rs`).
    pub fn roots(&self) -> Vec<usize> {
        let mut roots: Vec<usize> =
            self.needed.iter().filter_map(|v| self.producer[v.index()]).filter(|&p| self.candidate[p]).collect();
        roots.sort_unstable();
        roots.dedup();
        roots
    }

    /// The recompute set, residuals and FLOPs of the plan saving the equations `saved`
    /// (one flag per equation of the body; non-candidates are always saved).
    pub fn analyze(&self, saved: &[bool]) -> Analysis {
        let body = self.body();
        let mut recompute = vec![false; body.eqns.len()];
        let mut seen = vec![false; body.vars.len()];
        let mut residuals = Vec::new();
        let mut bytes = 0u64;
        let mut stack: Vec<Var> = self.needed.iter().rev().copied().collect();
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v.index()], true) {
                continue;
            }
            let Some(p) = self.producer[v.index()] else { continue };
            if saved[p] || !self.candidate[p] {
                residuals.push(v);
                bytes += self.bytes[v.index()];
            } else if !recompute[p] {
                recompute[p] = true;
                for a in body.eqns[p].invars.iter().rev() {
                    if let Atom::Var(u) = a {
                        if self.known[u.index()] {
                            stack.push(*u);
                        }
                    }
                }
            }
        }
        residuals.sort();
        // A recomputed equation costs FLOPs only if the forward half runs it too: the
        // forward half computes what the primal outputs and the residuals need, and an
        // equation outside that (a derivative's factor, `cos x` of `sin x`) is moved to the
        // backward half, not run twice.
        let forward = self.forward_cone(&residuals);
        let flops = (0..body.eqns.len()).filter(|&i| recompute[i] && forward[i]).map(|i| self.flops[i]).sum();
        let recompute: Vec<usize> = (0..body.eqns.len()).filter(|&i| recompute[i]).collect();
        Analysis { recompute, residuals, residual_bytes: bytes, recompute_flops: flops }
    }

    /// The equations the forward half runs when it saves `residuals`: those the primal
    /// outputs and the residuals need.
    fn forward_cone(&self, residuals: &[Var]) -> Vec<bool> {
        let body = self.body();
        let mut runs = vec![false; body.eqns.len()];
        let mut seen = vec![false; body.vars.len()];
        let mut stack: Vec<Var> = residuals.to_vec();
        stack.extend(body.outvars.iter().filter_map(|a| match a {
            Atom::Var(v) if self.known[v.index()] => Some(*v),
            _ => None,
        }));
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v.index()], true) {
                continue;
            }
            let Some(p) = self.producer[v.index()] else { continue };
            if !std::mem::replace(&mut runs[p], true) {
                stack.extend(body.eqns[p].invars.iter().filter_map(|a| match a {
                    Atom::Var(u) => Some(*u),
                    Atom::Lit(_) => None,
                }));
            }
        }
        runs
    }

    /// The canonical plan with recompute set `recompute`: every other equation saved.
    pub fn saved_for(&self, recompute: &[usize]) -> Vec<bool> {
        let mut saved = vec![true; self.body().eqns.len()];
        for &i in recompute {
            saved[i] = false;
        }
        saved
    }

    /// The decisions of a built-in policy for every equation of the body, as flags; an
    /// offloading decision is [`PlanError::Offload`] (see [`Model::decisions_by_policy`]).
    pub fn saved_by_policy(&self, policy: &remat_ad::ResolvedPolicy) -> Result<Vec<bool>, PlanError> {
        self.decisions_by_policy(policy)?
            .into_iter()
            .map(|d| match d {
                Saveability::Saveable => Ok(true),
                Saveability::Recompute => Ok(false),
                Saveability::Offloadable { .. } => Err(PlanError::Offload),
            })
            .collect()
    }

    /// What `policy` (with `remat-ad`'s meaning) answers for every equation of the body.
    pub fn decisions_by_policy(&self, policy: &remat_ad::ResolvedPolicy) -> Result<Vec<Saveability>, PlanError> {
        let body = self.body();
        body.eqns
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let avals: Vec<_> = e.invars.iter().map(|a| body.atom_aval(a)).collect();
                Ok(policy.decide_eqn(body, i, &e.primitive, &avals)?)
            })
            .collect()
    }

    /// The plan saving `saved`, split, assembled into the whole program, and planned.
    pub fn evaluate(&self, saved: &[bool]) -> Result<Evaluated, PlanError> {
        self.evaluate_with(saved, &[])
    }

    /// [`Model::evaluate`] with the saved equations `offload` (indices into the body)
    /// keeping their outputs in host memory (`Offloadable`, device to `pinned_host`), moved
    /// there after the forward half makes them and back before the backward half reads them.
    pub fn evaluate_with(&self, saved: &[bool], offload: &[usize]) -> Result<Evaluated, PlanError> {
        let analysis = self.analyze(saved);
        let decisions = self.decisions(saved, offload);
        let (vjp, program) = self.program(decisions.clone())?;
        Evaluated::measure(analysis, decisions, vjp, program, &self.consts, self.base_flops, Some(&self.cache))
    }

    /// [`Model::evaluate_with`]'s numbers only: the split is dropped once the whole program
    /// is assembled, and the program once it is planned (what the search keeps).
    pub fn measure_with(&self, saved: &[bool], offload: &[usize]) -> Result<Measured, PlanError> {
        let vjp = self.cp.vjp(self.decisions(saved, offload), &self.arg_names)?;
        self.measure_vjp(vjp)
    }

    /// The numbers of the plan split as `vjp`: its whole program assembled (then `vjp`
    /// dropped), measured and dropped.
    fn measure_vjp(&self, vjp: Vjp) -> Result<Measured, PlanError> {
        let residual_bytes = saved_bytes(&vjp.residuals);
        let program = self.cp.value_and_grad(&vjp, &self.argnums)?;
        drop(vjp);
        let plan = plan_memory(&program, &self.consts, Some(&self.cache))?;
        let recompute_flops = jaxpr_flops(&program).saturating_sub(self.base_flops);
        Ok(Measured { peak_bytes: plan.peak_bytes, recompute_flops, residual_bytes, host_bytes: plan.host_bytes })
    }

    /// [`Model::evaluate_policy`]'s decisions, analysis and numbers (its split and program
    /// dropped as in [`Model::measure_with`]).
    pub fn measure_policy(
        &self,
        policy: &remat_ad::ResolvedPolicy,
    ) -> Result<(Vec<Saveability>, Analysis, Measured), PlanError> {
        let decisions = self.decisions_by_policy(policy)?;
        let saved: Vec<bool> = decisions.iter().map(|d| *d != Saveability::Recompute).collect();
        let analysis = self.analyze(&saved);
        let vjp = self.cp.vjp_with(policy, &self.arg_names)?;
        Ok((decisions, analysis, self.measure_vjp(vjp)?))
    }

    fn decisions(&self, saved: &[bool], offload: &[usize]) -> Vec<Saveability> {
        (0..self.body().eqns.len())
            .map(|i| match saved[i] || !self.candidate[i] {
                true if offload.contains(&i) => {
                    Saveability::Offloadable { src: "device".into(), dst: "pinned_host".into() }
                }
                save => Saveability::from_bool(save),
            })
            .collect()
    }

    /// `checkpoint(f, policy)` split and assembled into the whole program and measured: the
    /// policy decides every equation, those inside the body's scans and conds too (JAX's
    /// meaning of the policy, what `jax.checkpoint(f, policy=...)` saves). The analysis is
    /// of its decisions about the body's own equations.
    pub fn evaluate_policy(&self, policy: &remat_ad::ResolvedPolicy) -> Result<Evaluated, PlanError> {
        let decisions = self.decisions_by_policy(policy)?;
        let saved: Vec<bool> = decisions.iter().map(|d| *d != Saveability::Recompute).collect();
        let analysis = self.analyze(&saved);
        let vjp = self.cp.vjp_with(policy, &self.arg_names)?;
        let program = self.cp.value_and_grad(&vjp, &self.argnums)?;
        Evaluated::measure(analysis, decisions, vjp, program, &self.consts, self.base_flops, Some(&self.cache))
    }

    /// The plan deciding `decisions`, split and assembled into the whole program.
    fn program(&self, decisions: Vec<Saveability>) -> Result<(Vjp, Jaxpr), PlanError> {
        let vjp = self.cp.vjp(decisions, &self.arg_names)?;
        let program = self.cp.value_and_grad(&vjp, &self.argnums)?;
        Ok((vjp, program))
    }

    /// The FLOPs of the whole program when nothing is recomputed: the zero of recompute.
    pub fn base_flops(&self) -> u64 {
        self.base_flops
    }

    /// The planned function's constants (the whole program's).
    pub fn consts(&self) -> &[Array] {
        &self.consts
    }
}
