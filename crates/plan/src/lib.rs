//! The memory planner: given a byte budget, choose what the forward half of a vjp saves so
//! that the whole program's planned peak fits and the backward half recomputes the least.
//!
//! ```text
//! f (a scalar loss, primal)  --Model::new-->  checkpoint(f) linearized (remat_ad::Checkpointed)
//! plan = recompute set       --Model::evaluate-->  whole value_and_grad program, its exact peak
//! search (search.rs)         --> evaluated plans --> frontier, and the plan for a budget
//! ```
//!
//! The function is planned as if it were `checkpoint(f)` (its own checkpoints and `jit`s
//! at the top are inlined: the plan replaces their policies). The objective is the peak of
//! the whole vjp as the JIT's buffer planner allocates it (`remat_jit::memory_plan`, what
//! `remat bench` reports), not the sum of residual bytes; among the plans that fit, the
//! fewest recompute FLOPs, then the lower peak, then the earlier evaluated plan. The plan
//! for a budget is chosen among one fixed set of evaluated plans, so it is deterministic
//! and its peak is monotone (non-increasing as the budget shrinks). `docs/planner.md`
//! states the model, the algorithms and their guarantees.
//!
//! Architecture invariant: the planner builds programs only through `remat-ad`
//! (`Checkpointed`) and measures them only through `remat-jit`'s `memory_plan`; it runs
//! nothing.

pub mod applicable;
pub mod budget;
pub mod cost;
pub mod exact;
pub mod model;
pub mod names;
pub mod nest;
pub mod search;
pub mod segment;

use remat_ad::{AdError, Residual, ResidualKind, ResolvedPolicy};
use remat_ir::{ClosedJaxpr, Jaxpr, Policy, Primitive};
use remat_jit::JitError;

pub use budget::Budget;
use model::{Evaluated, Model};
pub use names::NamesPolicy;
use search::{Evaluations, Point};

use rayon::prelude::*;
use std::sync::Arc;

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Ad(#[from] AdError),
    #[error("{0}")]
    Jit(#[from] JitError),
    #[error("{0}")]
    Invalid(String),
    /// The budget is below every plan's peak.
    #[error(
        "no plan fits the budget of {budget} bytes: the smallest peak reachable is {min_peak} bytes ({}); {held}",
        budget::human(*min_peak)
    )]
    Infeasible { budget: usize, min_peak: usize, held: String },
    /// A built-in policy that offloads cannot be placed on the planner's axes (the planner
    /// chooses offloads itself, with `host_budget`).
    #[error("an offloading policy cannot be placed on the planner's axes: give the planner a host budget instead (docs/planner.md)")]
    Offload,
    /// A host budget was given but no plan can offload within it: an error rather than a
    /// plan that silently offloads nothing.
    #[error("no plan offloads within the host budget of {host_budget} bytes: {why}; drop the host budget to plan without offloading")]
    NoOffload { host_budget: usize, why: String },
}

/// How the planner proposes plans (see `search.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every distinct plan was evaluated exactly: the choice is optimal.
    Exhaustive,
    /// The greedy path (and the built-in policies) were evaluated: a heuristic.
    Greedy,
    /// `--names-only`: every subset of the program's names (with a host budget, every
    /// split into saved, offloaded and recomputed names) was evaluated.
    Names,
    /// Plans that are names policies, more names than the exhaustive search takes: the
    /// greedy path over the names and its neighbours (a heuristic).
    NamesGreedy,
}

/// What the planner may choose among, and how hard it searches.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// The inputs differentiated (`jax.value_and_grad`'s `argnums`); all float inputs when
    /// `None`.
    pub argnums: Option<Vec<usize>>,
    /// Choose only among values named with `checkpoint_name` (the plan is then a
    /// `save_only_these_names` policy, or with a host budget a
    /// `save_and_offload_only_these_names` one: [`NamesPolicy`]).
    pub names_only: bool,
    /// Choose only among plans JAX runs as they are (`applicable.rs`): the built-in
    /// policies, and names policies over the program's names and the names the planner
    /// gives every value of the function ([`applicable::auto_name`]). What the Python
    /// package plans, so that `plan.apply(f)` is the plan.
    pub applicable: bool,
    /// Host memory for offloaded residuals: saved values may wait there between the
    /// halves. A budget under which nothing can be offloaded is [`PlanError::NoOffload`].
    pub host_budget: Option<usize>,
    /// The exhaustive search runs when there are at most this many relevant candidates...
    pub exhaustive_candidates: usize,
    /// ...and they give at most this many distinct plans (each evaluated exactly)...
    pub exhaustive_plans: usize,
    /// ...on checkpointed bodies of up to this many equations; beyond, the plan limit falls
    /// in proportion to the body's size (`search::exhaustive_plans`), since each exact
    /// evaluation takes time about linear in the program.
    pub exhaustive_full_size: usize,
    /// Beyond, at most this many plans of the greedy path are evaluated exactly...
    pub heuristic_evals: usize,
    /// ...and at most this many plans one decision away from the frontier...
    pub refine_evals: usize,
    /// ...on checkpointed bodies (primal and tangent equations) of up to this many
    /// equations; beyond, the two counts fall with the square of the body's size (at least
    /// [`search::MIN_HEURISTIC_EVALS`] plans in all), because each exact evaluation costs
    /// time about linear in the program (see `search::heuristic_evals`).
    pub heuristic_full_size: usize,
    /// At most this many segmentations of the chain DP (`segment.rs`) are measured, on
    /// checkpointed bodies of up to `heuristic_full_size` equations; beyond, their number
    /// falls with the square of the body's size, to at least two (none if this is 0).
    pub segment_evals: usize,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            argnums: None,
            names_only: false,
            applicable: false,
            host_budget: None,
            exhaustive_candidates: 32,
            exhaustive_plans: 2048,
            exhaustive_full_size: 64,
            heuristic_evals: 40,
            refine_evals: 64,
            heuristic_full_size: 600,
            segment_evals: 24,
        }
    }
}

/// A built-in policy placed on the planner's axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyPoint {
    /// As JAX spells it (`jax.checkpoint_policies.dots_saveable`).
    pub policy: String,
    pub peak_bytes: usize,
    pub recompute_flops: u64,
}

/// One point of the frontier: a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontierPoint {
    pub peak_bytes: usize,
    pub recompute_flops: u64,
    /// The bytes the forward half saves (beyond the arguments).
    pub residual_bytes: u64,
    /// How many equations the backward half recomputes.
    pub recomputed: usize,
    /// With `names_only`: the policy the plan is.
    pub names: Option<NamesPolicy>,
    /// A plan that rewrites the function, described: a scan run as nested checkpointed
    /// scans (`nest.rs`) or the function cut into checkpointed segments (`segment.rs`).
    pub rewrite: Option<String>,
    /// How many saved equations keep their outputs in host memory.
    pub offloaded: usize,
    /// The host memory the plan uses (offloaded residuals).
    pub host_bytes: usize,
}

/// The plan for a budget.
#[derive(Clone, Debug)]
pub struct Plan {
    pub budget: usize,
    /// The whole program's planned peak: what `remat bench` reports for `program`, byte
    /// for byte (`model::measure_options`).
    pub peak_bytes: usize,
    pub recompute_flops: u64,
    pub residual_bytes: u64,
    /// What the forward half saves (printed, JAX's `print_saved_residuals` lines).
    pub saved: Vec<Residual>,
    /// What the backward half recomputes, in the same words.
    pub recomputed: Vec<String>,
    /// What lives in host memory between the halves (moved there after the forward
    /// equation that makes it, back to the device before the backward half reads it), in
    /// the same words.
    pub offloaded: Vec<String>,
    /// The host memory the plan uses.
    pub host_bytes: usize,
    /// With `names_only`: the policy the plan is (which names are saved, which offloaded).
    pub names: Option<NamesPolicy>,
    /// Where the plan is a JAX policy applied to the whole function (a built-in one, or a
    /// names-only plan's), the Python call that makes it.
    pub policy: Option<String>,
    /// Where the plan cuts the function into checkpointed segments: each as a range of
    /// the flat function's top-level equations (its top-level `jit`s and checkpoints
    /// inlined, [`remat_ad::flat_paths`] locating them) and the policy it runs under.
    pub segments: Option<Vec<(usize, usize, segment::Keep)>>,
    pub method: Method,
    /// `(primals) -> (value, grads)`, forward then backward: what `remat bench` runs.
    pub program: Jaxpr,
    /// The forward half `(primals) -> (outs, residuals)` and the backward half
    /// `(residuals, cotangents) -> (grads)`.
    pub fwd: Jaxpr,
    pub bwd: Jaxpr,
}

impl Plan {
    /// Where the plan is a JAX policy (a names-only plan, or a built-in policy chosen as
    /// the plan): the Python call that reproduces it, as `jax.checkpoint(f, policy=...)`.
    pub fn jax_policy(&self) -> Option<String> {
        self.policy.clone()
    }
}

/// `jax.checkpoint_policies.save_only_these_names('a', 'b')`.
pub fn jax_names_policy(names: &[String]) -> String {
    NamesPolicy::SaveOnly { saved: names.to_vec() }.jax_call()
}

/// A function the planner rewrote and measured as a plan: its description, the rewritten
/// function, and for checkpointed segments the segments (ranges of the flat function's
/// top-level equations, with what each saves).
#[derive(Debug)]
struct Variant {
    description: String,
    rewritten: segment::Rewritten,
    segments: Option<Vec<(usize, usize, segment::Keep)>>,
}

/// A policy the planner evaluated as a plan: JAX's policy, how JAX spells the call that
/// makes it, and for a names-only plan its names.
#[derive(Clone, Debug)]
struct PlannedPolicy {
    policy: Policy,
    jax_call: String,
    names: Option<NamesPolicy>,
    /// A plan of the function as written (`Planner::plain`), not of the named one.
    plain: bool,
}

/// A function's plans: the evaluated candidates, ready to answer budgets.
#[derive(Debug)]
pub struct Planner {
    model: Model,
    /// With `applicable`: the model of the function as written, whose plans the built-in
    /// policies are (`model` is of the function with the planner's names).
    plain: Option<Model>,
    /// The function rewritten (a scan nested, or cut into checkpointed segments), described.
    variants: Vec<Variant>,
    evals: Evaluations,
    method: Method,
    /// The policies evaluated as plans (`Point::policy` indexes them): the built-in ones,
    /// then with `names_only` every distinct names policy.
    policies: Vec<PlannedPolicy>,
    /// The program's `checkpoint_name`s, in program order.
    names: Vec<String>,
    /// With `applicable`: the names the planner gave the function's values.
    auto_names: Vec<applicable::AutoName>,
    builtins: Vec<PolicyPoint>,
}

impl Planner {
    /// Plans `f` (a scalar loss); `arg_names` name its inputs in the residual lines.
    pub fn new(f: &ClosedJaxpr, arg_names: &[String], options: &PlanOptions) -> Result<Planner, PlanError> {
        if options.applicable && options.names_only {
            return Err(PlanError::Invalid(
                "plans over the program's own names only, or over every value's: not both".into(),
            ));
        }
        let (named, auto_names) = match options.applicable {
            true => applicable::auto_name(f)?,
            false => (f.clone(), Vec::new()),
        };
        // With `applicable`, the built-in policies are plans of the function as written (its
        // names policies are of the named function): JAX runs them on the function itself,
        // where the planner's names would be saved beside the values they name.
        let plain = match options.applicable {
            true => Some(Model::new(f, options.argnums.as_deref(), arg_names)?),
            false => None,
        };
        let f = &named;
        let model = Model::new(f, options.argnums.as_deref(), arg_names)?;
        let builtin_model = plain.as_ref().unwrap_or(&model);
        let mut evals = Evaluations::default();
        let names = program_names(model.body(), &model);
        let own_names = program_names(builtin_model.body(), builtin_model);
        // The built-in policies, on the same axes, each with JAX's meaning (it decides the
        // equations inside the body's scans and conds too): plans like any other, which a
        // budget may choose (not with `names_only`, whose plans are names policies).
        // (Evaluated in this order, which breaks the last ties between equal plans.)
        let mut builtin: Vec<(String, Policy)> =
            ["nothing_saveable", "everything_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable"]
                .into_iter()
                .map(|name| (name.to_string(), Policy::builtin_named(name).expect("a builtin policy")))
                .collect();
        if !own_names.is_empty() {
            let call = jax_names_policy(&own_names);
            let short = call.trim_start_matches("jax.checkpoint_policies.").to_string();
            builtin.push((short, Policy::SaveOnlyTheseNames { names: own_names.clone() }));
        }
        let mut policies: Vec<PlannedPolicy> = builtin
            .into_iter()
            .map(|(label, policy)| PlannedPolicy {
                jax_call: format!("jax.checkpoint_policies.{label}"),
                policy,
                names: None,
                plain: plain.is_some(),
            })
            .collect();
        let measured: Vec<Result<Point, PlanError>> = policies
            .par_iter()
            .enumerate()
            .map(|(k, p)| Point::of_policy(builtin_model, k, &ResolvedPolicy::Builtin(p.policy.clone())))
            .collect();
        let mut builtins = Vec::new();
        for (p, m) in policies.iter().zip(measured) {
            let m = m?;
            builtins.push(PolicyPoint {
                policy: p.jax_call.clone(),
                peak_bytes: m.peak_bytes,
                recompute_flops: m.recompute_flops,
            });
            if !options.names_only {
                evals.insert(m);
            }
        }
        let method = if options.names_only {
            // (With a host budget, the offload search says the same in its own error.)
            if names.is_empty() && options.host_budget.is_none() {
                // Names inside the bodies of scans and conds are not the plan's to decide.
                let mut nested: Vec<String> = Vec::new();
                for e in &model.flat().eqns {
                    for sub in e.primitive.subjaxprs() {
                        for n in sub.checkpoint_names() {
                            if !nested.contains(&n) {
                                nested.push(n);
                            }
                        }
                    }
                }
                let why = match nested.is_empty() {
                    true => "the program names none (name values with jax.ad_checkpoint.checkpoint_name, or plan without --names-only)".to_string(),
                    false => format!(
                        "the program names none at its top level: its names ({}) are inside scan, cond or loop bodies, which the planner does not plan (plan without --names-only)",
                        nested.join(", ")
                    ),
                };
                return Err(PlanError::Invalid(format!(
                    "--names-only chooses which `checkpoint_name`d values to save, and {why}"
                )));
            }
            names_plans(&model, &names, &mut evals, &mut policies, options.host_budget)?;
            Method::Names
        } else if options.applicable {
            applicable_plans(&model, &names, &mut evals, &mut policies, options)?
        } else if let Some(all) = search::exhaustive(
            &model,
            options.exhaustive_candidates,
            search::exhaustive_plans(model.body().eqns.len(), options),
        ) {
            evals.add_all(&model, &all)?;
            Method::Exhaustive
        } else {
            let order = search::greedy(&model);
            let (on_path, refined) = search::heuristic_evals(model.body().eqns.len(), options);
            evals.add_all(&model, &search::path_plans(&model, &order, on_path))?;
            // The names policies' plans are plans of this search too (per equation, where
            // no name sits inside a scan or cond): the greedy path, ranking by residual
            // bytes, can miss them, and the general planner must never do worse than
            // `--names-only`.
            let size = model.body().eqns.len();
            let named = names_plain_plans(&model, &names, size <= options.heuristic_full_size, on_path)?;
            evals.add_all(&model, &named)?;
            search::refine(&model, &mut evals, refined)?;
            Method::Greedy
        };
        // Binomial checkpointing of each top-level scan, and the chain DP's checkpointed
        // segments, measured like any plan (saving everything else): what a budget below
        // one checkpoint's reach can choose.
        let mut variants = Vec::new();
        if !options.names_only {
            // Checkpointed segments are plans JAX runs as they are (one `jax.checkpoint`
            // per segment); the nested scans, not yet for `applicable` (the Python side
            // does not rebuild a scan as nested scans).
            let base = plain.as_ref().unwrap_or(&model);
            if !options.applicable {
                variants = scan_variants(base, arg_names)?;
            }
            let first = variants.len();
            let mut segments = segment_variants(base, options);
            variants.extend(segments.rewrite(base, arg_names, &segments.plans)?);
            measure_variants(&variants, 0, &mut evals)?;
            segments.refine(base, arg_names, first, &mut variants, &mut evals)?;
        }
        if let (Some(host_budget), false, false) = (options.host_budget, options.names_only, options.applicable) {
            offload_plans(&model, &mut evals, host_budget)?;
        }
        Ok(Planner { model, plain, variants, evals, method, policies, names, builtins, auto_names })
    }

    /// The program's `checkpoint_name`s (the candidates'), in program order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// With [`PlanOptions::applicable`]: the names the planner gave the function's values
    /// (among [`Planner::names`]), each with the equation that makes its value.
    pub fn auto_names(&self) -> &[applicable::AutoName] {
        &self.auto_names
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// How many candidate equations the plans choose among.
    pub fn candidates(&self) -> usize {
        self.model.relevant().len()
    }

    /// How many plans were evaluated exactly.
    pub fn evaluated(&self) -> usize {
        self.evals.points.len()
    }

    /// The built-in policies on the planner's axes (each applied to the whole function).
    pub fn builtins(&self) -> &[PolicyPoint] {
        &self.builtins
    }

    /// The Pareto frontier of (peak, recompute FLOPs), by increasing peak.
    pub fn frontier(&self) -> Vec<FrontierPoint> {
        self.evals.frontier().into_iter().map(|i| self.point(i)).collect()
    }

    /// `policy` applied to the whole function, on the planner's axes (as [`Planner::builtins`]
    /// places the built-in ones), labelled `label`.
    pub fn policy_point(&self, label: &str, policy: &Policy) -> Result<PolicyPoint, PlanError> {
        let e = self.model.evaluate_policy(&ResolvedPolicy::Builtin(policy.clone()))?;
        Ok(PolicyPoint { policy: label.to_string(), peak_bytes: e.peak_bytes, recompute_flops: e.recompute_flops })
    }

    /// Every plan evaluated exactly, in the order evaluated (the frontier's and the rest).
    pub fn points(&self) -> Vec<FrontierPoint> {
        (0..self.evals.points.len()).map(|i| self.point(i)).collect()
    }

    fn point(&self, i: usize) -> FrontierPoint {
        let p: &Point = &self.evals.points[i];
        FrontierPoint {
            peak_bytes: p.peak_bytes,
            recompute_flops: p.recompute_flops,
            residual_bytes: p.residual_bytes,
            recomputed: p.recompute.len(),
            names: p.policy.and_then(|k| self.policies[k].names.clone()),
            rewrite: p.variant.map(|k| self.variants[k].description.clone()),
            offloaded: p.offload.len(),
            host_bytes: p.host_bytes,
        }
    }

    /// A point evaluated again (its program, split and peak).
    fn evaluate_point(&self, p: &Point) -> Result<Evaluated, PlanError> {
        match (p.variant, p.policy) {
            (Some(k), _) => self.variants[k].rewritten.evaluate(),
            (None, Some(k)) => {
                self.model_of(p).evaluate_policy(&ResolvedPolicy::Builtin(self.policies[k].policy.clone()))
            }
            (None, None) => self.model.evaluate_with(&self.model.saved_for(&p.recompute), &p.offload),
        }
    }

    /// The model a point is a plan of.
    fn model_of(&self, p: &Point) -> &Model {
        match (p.policy.map(|k| self.policies[k].plain), &self.plain) {
            (Some(true), Some(plain)) => plain,
            _ => &self.model,
        }
    }

    /// The smallest peak any evaluated plan reaches.
    pub fn min_peak(&self) -> usize {
        self.evals.smallest().map_or(0, |i| self.evals.points[i].peak_bytes)
    }

    /// The peak of saving everything (no rematerialization).
    pub fn no_remat_peak(&self) -> usize {
        self.builtins.iter().find(|b| b.policy.ends_with("everything_saveable")).map_or(0, |b| b.peak_bytes)
    }

    /// The plan for `budget` (see the crate docs for the order of preference).
    pub fn plan(&self, budget: Budget) -> Result<Plan, PlanError> {
        let b = budget.bytes_value();
        let Some(i) = self.evals.select(b) else {
            return Err(self.infeasible(b));
        };
        self.plan_of_point(i, b)
    }

    /// The plan of the `i`th evaluated point ([`Planner::points`]), as if chosen for
    /// `budget` (a caller choosing by another measure, such as XLA's memory analysis).
    pub fn plan_of_point(&self, i: usize, budget: usize) -> Result<Plan, PlanError> {
        let b = budget;
        let p = self.evals.points.get(i).ok_or_else(|| {
            PlanError::Invalid(format!("no evaluated plan {i}: the planner evaluated {}", self.evals.points.len()))
        })?;
        let e = self.evaluate_point(p)?;
        // A rewritten function's point recomputes and offloads nothing of the function's
        // own plans: its lines are empty.
        let mut recomputed = self.recomputed_lines(self.model_of(p), &p.recompute);
        let offloaded = self.recomputed_lines(self.model_of(p), &p.offload);
        if let Some(k) = p.variant {
            recomputed.insert(0, self.variants[k].description.clone());
        }
        let planned = p.policy.map(|k| &self.policies[k]);
        Ok(Plan {
            budget: b,
            peak_bytes: e.peak_bytes,
            recompute_flops: p.recompute_flops,
            residual_bytes: e.residual_bytes,
            saved: with_sources(&e.vjp),
            recomputed,
            offloaded,
            host_bytes: e.host_bytes,
            names: planned.and_then(|q| q.names.clone()),
            policy: planned.map(|q| q.jax_call.clone()),
            segments: p.variant.and_then(|k| self.variants[k].segments.clone()),
            method: self.method,
            program: e.program,
            fwd: e.vjp.fwd,
            bwd: e.vjp.bwd,
        })
    }

    fn infeasible(&self, budget: usize) -> PlanError {
        let Some(i) = self.evals.smallest() else {
            return PlanError::Invalid("no plan was evaluated".into());
        };
        let p = &self.evals.points[i];
        let held = match self.evaluate_point(p) {
            Ok(e) => held_by(&e),
            Err(err) => format!("(evaluating that plan again failed: {err})"),
        };
        PlanError::Infeasible { budget, min_peak: p.peak_bytes, held }
    }

    /// The outputs of the equations `eqns` of `model`'s body in JAX's residual words.
    fn recomputed_lines(&self, model: &Model, recompute: &[usize]) -> Vec<String> {
        let body = model.body();
        recompute
            .iter()
            .flat_map(|&i| {
                let e = &body.eqns[i];
                e.outvars.iter().map(move |&v| {
                    let kind = match &e.primitive {
                        Primitive::Name { name } => ResidualKind::Named(name.clone()),
                        other => ResidualKind::Output(other.name().to_string()),
                    };
                    let aval = body.aval(v).clone();
                    let bytes = aval.size_in_bytes();
                    Residual { aval, kind, source: e.source.clone(), bytes }.to_string()
                })
            })
            .collect()
    }
}

/// The residuals of `vjp`, each offloaded one (JAX's words name no source for a
/// `device_put`'s output: `output of device_put from `) with the source of the forward
/// equation whose value it moves to host memory.
fn with_sources(vjp: &remat_ad::Vjp) -> Vec<Residual> {
    let fwd = &vjp.fwd;
    let producer = |v: remat_ir::Var| fwd.eqns.iter().find(|e| e.outvars.contains(&v));
    vjp.residuals
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let mut r = r.clone();
            if !r.source.is_unknown() || !matches!(&r.kind, ResidualKind::Output(p) if p == "device_put") {
                return r;
            }
            let moved = match fwd.outvars.get(vjp.num_outs + k) {
                Some(remat_ir::Atom::Var(v)) => producer(*v).and_then(|put| {
                    let at = put.outvars.iter().position(|o| o == v)?;
                    match put.invars.get(at)? {
                        remat_ir::Atom::Var(u) => producer(*u),
                        remat_ir::Atom::Lit(_) => None,
                    }
                }),
                _ => None,
            };
            if let Some(eqn) = moved {
                r.source = eqn.source.clone();
            }
            r
        })
        .collect()
}

/// What holds the smallest plan's peak: the arguments and outputs, and its largest residuals.
fn held_by(e: &Evaluated) -> String {
    let mut res: Vec<&Residual> = e
        .vjp
        .residuals
        .iter()
        .filter(|r| matches!(r.kind, ResidualKind::Output(_) | ResidualKind::Named(_) | ResidualKind::Jit(_)))
        .collect();
    res.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    let saved: usize = res.iter().map(|r| r.bytes).sum();
    let largest: Vec<String> = res.iter().take(3).map(|r| r.to_string()).collect();
    let mut s = format!("that plan saves {saved} bytes beyond the arguments");
    if largest.is_empty() {
        s.push_str(" (every saved value is an argument)");
    } else {
        s.push_str(&format!(" (the largest: {})", largest.join("; ")));
    }
    s.push_str(&format!(
        "; the arguments and outputs ({} bytes) are outside the peak, which is the arena of the forward and backward halves' values (values may live in an output's memory before it is written)",
        e.io_bytes
    ));
    s
}

/// The names policies over `names` as plans of the function itself (their decisions about
/// the body's equations, analysed): every subset while there are at most
/// [`NAMES_IN_GENERAL_SEARCH`] names on a small body (`small`), else the greedy path over the
/// names (at most 16 of its plans on a small body, `on_path` on a large one).
fn names_plain_plans(
    model: &Model,
    names: &[String],
    small: bool,
    on_path: usize,
) -> Result<Vec<model::Analysis>, PlanError> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let policies = match (small, names.len() <= NAMES_IN_GENERAL_SEARCH) {
        (true, true) => names::splits(names, false),
        (true, false) => names::greedy_path(model, names, 16),
        (false, _) => names::greedy_path(model, names, on_path.max(2)),
    };
    let mut out: Vec<model::Analysis> = Vec::new();
    for p in policies {
        let saved = model.saved_by_policy(&ResolvedPolicy::Builtin(p.policy()))?;
        let a = model.analyze(&saved);
        if !out.iter().any(|o| o.recompute == a.recompute) {
            out.push(a);
        }
    }
    Ok(out)
}

/// The general search evaluates every names policy's plan while the program has at most
/// this many names (2^8 subsets, each distinct plan once).
pub const NAMES_IN_GENERAL_SEARCH: usize = 8;

/// `--names-only`: every subset of `names` (with a host budget, every split into saved,
/// offloaded and recomputed names) as its JAX policy, evaluated into `evals` (empty); the
/// policy of each point. With a host budget, a clear error if no split can offload within
/// it (no names, no named residual, or too little host memory).
fn names_plans(
    model: &Model,
    names: &[String],
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    host_budget: Option<usize>,
) -> Result<(), PlanError> {
    let (limit, tried) = match host_budget {
        None => (names::MAX_NAMES, "subset"),
        Some(_) => (names::MAX_NAMES_OFFLOAD, "split into saved, offloaded and recomputed names"),
    };
    if names.len() > limit {
        return Err(PlanError::Invalid(format!(
            "--names-only: the program has {} names; the planner tries every {tried} of at most {limit}",
            names.len()
        )));
    }
    let found = names::evaluate_splits(model, &names::splits(names, host_budget.is_some()), host_budget)?;
    if let Some(host_budget) = host_budget {
        let why = match &found.least_offload {
            _ if names.is_empty() => {
                Some("--names-only offloads only values named with checkpoint_name, and the program names none".into())
            }
            None => Some(format!(
                "no split of the program's names ({}) offloads a value the backward half reads",
                names.join(", ")
            )),
            Some((bytes, call)) if *bytes > host_budget => Some(format!(
                "the least host memory a names-only plan offloads is {bytes} bytes ({}), under {call}",
                budget::human(*bytes)
            )),
            Some(_) => None,
        };
        if let Some(why) = why {
            return Err(PlanError::NoOffload { host_budget, why });
        }
    }
    add_names_points(evals, policies, found.plans);
    Ok(())
}

/// [`PlanOptions::applicable`]: names policies over `names` (the program's and the
/// planner's), every subset when they are few enough, else the greedy path over them and
/// the neighbours of the frontier's names plans; with a host budget, the frontier's names
/// plans with their largest saved names offloaded, one more at a time.
fn applicable_plans(
    model: &Model,
    names: &[String],
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    options: &PlanOptions,
) -> Result<Method, PlanError> {
    let method = if names.len() <= names::MAX_NAMES {
        let found = names::evaluate_splits(model, &names::splits(names, false), None)?;
        add_names_points(evals, policies, found.plans);
        Method::Names
    } else {
        let (on_path, refined) = search::heuristic_evals(model.body().eqns.len(), options);
        let mut seen = std::collections::BTreeSet::new();
        let found = names::evaluate_policies(model, names::greedy_path(model, names, on_path.max(2)), &mut seen)?;
        add_names_points(evals, policies, found);
        // The neighbours of the frontier's names plans, a batch at a time while they move
        // the frontier.
        let mut left = refined;
        while left > 0 {
            let before = evals.frontier();
            let mut proposals = Vec::new();
            for &i in &before {
                let Some(names_policy) = evals.points[i].policy.and_then(|k| policies[k].names.clone()) else {
                    continue;
                };
                proposals.extend(names::neighbours(&names_policy, names));
            }
            proposals.truncate(left.saturating_mul(4));
            let found = names::evaluate_policies(model, proposals, &mut seen)?;
            let found: Vec<(NamesPolicy, Point)> = found.into_iter().take(left).collect();
            left -= found.len();
            let empty = found.is_empty();
            add_names_points(evals, policies, found);
            if empty || evals.frontier() == before {
                break;
            }
        }
        Method::NamesGreedy
    };
    if let Some(host_budget) = options.host_budget {
        applicable_offloads(model, evals, policies, host_budget)?;
    }
    Ok(method)
}

/// With a host budget, for [`PlanOptions::applicable`]: each frontier names plan with its
/// largest saved names offloaded to host memory, one more at a time, while their bytes fit
/// `host_budget` (`save_and_offload_only_these_names`).
fn applicable_offloads(
    model: &Model,
    evals: &mut Evaluations,
    policies: &mut Vec<PlannedPolicy>,
    host_budget: usize,
) -> Result<(), PlanError> {
    let body = model.body();
    let bytes_of = |n: &str| -> u64 {
        body.eqns
            .iter()
            .filter(|e| matches!(&e.primitive, Primitive::Name { name } if name == n))
            .flat_map(|e| e.outvars.iter().map(|&v| model.bytes(v)))
            .sum()
    };
    let mut proposals = Vec::new();
    for i in evals.frontier() {
        let Some(NamesPolicy::SaveOnly { saved }) = evals.points[i].policy.and_then(|k| policies[k].names.clone())
        else {
            continue;
        };
        let mut by_size: Vec<(u64, String)> = saved.iter().map(|n| (bytes_of(n), n.clone())).collect();
        by_size.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut offloaded: Vec<String> = Vec::new();
        let mut used = 0u64;
        for (b, n) in by_size.into_iter().take(16) {
            if used + b > host_budget as u64 {
                continue;
            }
            used += b;
            offloaded.push(n);
            let kept: Vec<String> = saved.iter().filter(|m| !offloaded.contains(m)).cloned().collect();
            proposals.push(NamesPolicy::SaveAndOffload { saved: kept, offloaded: offloaded.clone() });
        }
    }
    let found = names::evaluate_splits(model, &proposals, Some(host_budget))?;
    add_names_points(evals, policies, found.plans);
    Ok(())
}

/// Adds names plans' points, each with its policy.
fn add_names_points(evals: &mut Evaluations, policies: &mut Vec<PlannedPolicy>, found: Vec<(NamesPolicy, Point)>) {
    for (names, mut point) in found {
        point.policy = Some(policies.len());
        policies.push(PlannedPolicy {
            policy: names.policy(),
            jax_call: names.jax_call(),
            names: Some(names),
            plain: false,
        });
        evals.insert(point);
    }
}

/// With a host budget: for every plan on the frontier (of the function itself), the plans
/// that also offload its largest saved values to host memory, one more at a time (largest
/// first, passing over a value that would not fit, at most 16), while the host memory they
/// use fits `host_budget`. Offloading costs
/// no FLOPs, so a budget the device cannot meet by saving is met by moving before
/// recomputing. [`PlanError::NoOffload`] if no such plan fits the host budget.
fn offload_plans(model: &Model, evals: &mut Evaluations, host_budget: usize) -> Result<(), PlanError> {
    const MAX_OFFLOADS: usize = 16;
    let mut proposals: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    let mut smallest: Option<u64> = None;
    for i in evals.frontier() {
        let p = &evals.points[i];
        if p.variant.is_some() {
            continue;
        }
        let a = model.analyze(&model.saved_for(&p.recompute));
        // The saved candidate equations making residuals, largest residual first.
        let mut producers: Vec<(u64, usize)> = Vec::new();
        for &v in &a.residuals {
            if let Some(e) = model.producer(v).filter(|&e| model.is_candidate(e)) {
                match producers.iter_mut().find(|(_, q)| *q == e) {
                    Some(entry) => entry.0 += model.bytes(v),
                    None => producers.push((model.bytes(v), e)),
                }
            }
        }
        producers.sort_by_key(|&(bytes, e)| (std::cmp::Reverse(bytes), e));
        if let Some(&(b, _)) = producers.last() {
            smallest = Some(smallest.map_or(b, |s: u64| s.min(b)));
        }
        let mut offload: Vec<usize> = Vec::new();
        let mut bytes = 0u64;
        for &(b, e) in producers.iter() {
            if offload.len() == MAX_OFFLOADS {
                break;
            }
            // A value that no longer fits is passed over for the smaller ones after it.
            if bytes + b > host_budget as u64 {
                continue;
            }
            bytes += b;
            offload.push(e);
            let mut sorted = offload.clone();
            sorted.sort_unstable();
            proposals.push((p.recompute.clone(), sorted));
        }
    }
    let measured: Vec<Result<Point, PlanError>> =
        proposals.into_par_iter().map(|(recompute, offload)| Point::measured(model, recompute, offload)).collect();
    let mut fitted = 0;
    for p in measured {
        let p = p?;
        if p.host_bytes <= host_budget {
            evals.insert(p);
            fitted += 1;
        }
    }
    if fitted == 0 {
        let why = match smallest {
            Some(b) => format!(
                "the smallest value a plan of the frontier could offload has {b} bytes ({})",
                budget::human(b as usize)
            ),
            None => "no plan of the frontier saves a value that could be offloaded".into(),
        };
        return Err(PlanError::NoOffload { host_budget, why });
    }
    Ok(())
}

/// The function (its top-level calls inlined) with each of its top-level scans (of length
/// 4 or more) nested every way [`nest::nestings`] proposes, each described and measured as
/// `jax.value_and_grad` of it runs (no enclosing checkpoint, whose policy would override
/// the nested checkpoints'), against `model`'s zero of recompute.
fn scan_variants(model: &Model, arg_names: &[String]) -> Result<Vec<Variant>, PlanError> {
    let f = model.flat();
    let mut out = Vec::new();
    for (at, e) in f.eqns.iter().enumerate() {
        let Primitive::Scan { length, .. } = &e.primitive else { continue };
        if *length < 4 {
            continue;
        }
        for factors in nest::nestings(*length) {
            let nested = nest::nest_scan(f, at, &factors)?;
            let closed = ClosedJaxpr { jaxpr: Arc::new(nested), consts: model.consts().to_vec() };
            let m = segment::Rewritten::new(closed, model.argnums(), arg_names, model.base_flops());
            let shape: Vec<String> = factors.iter().map(|k| k.to_string()).collect();
            out.push(Variant {
                description: format!(
                    "the scan of {length} iterations at {}, run as {} nested scans of {} iterations (binomial checkpointing: each level keeps its segments' first carries, the backward pass recomputes every segment once per level above it)",
                    e.source,
                    factors.len(),
                    shape.join(" x ")
                ),
                rewritten: m,
                segments: None,
            });
        }
    }
    Ok(out)
}

/// Measures the rewritten functions `variants[from..]` (in parallel) and adds their points.
fn measure_variants(variants: &[Variant], from: usize, evals: &mut Evaluations) -> Result<(), PlanError> {
    let measured: Vec<Result<(usize, u64, u64, usize), PlanError>> = variants[from..]
        .par_iter()
        .map(|v| {
            let e = v.rewritten.evaluate()?;
            Ok((e.peak_bytes, e.recompute_flops, e.residual_bytes, e.host_bytes))
        })
        .collect();
    for (k, m) in measured.into_iter().enumerate() {
        let (peak_bytes, recompute_flops, residual_bytes, host_bytes) = m?;
        evals.insert(Point {
            recompute: Vec::new(),
            peak_bytes,
            recompute_flops,
            residual_bytes,
            variant: Some(from + k),
            policy: None,
            offload: Vec::new(),
            host_bytes,
        });
    }
    Ok(())
}

/// The checkpointed segments' search: the chain, the segmentations measured (in the order
/// of their variants) and how many more the local refinement may measure.
struct SegmentSearch {
    chain: segment::Chain,
    plans: Vec<segment::Segmentation>,
    refine: usize,
}

/// The chain DP's segmentations of the function (`segment.rs`): solved with segments saving
/// nothing only and with both kinds, each at model budgets from saving everything down to
/// the smallest it fits, the distinct ones spread to half of
/// [`PlanOptions::segment_evals`] each (fewer on large bodies, at least two in all: the
/// ends); the refinement may measure half as many again on bodies of up to
/// `heuristic_full_size` equations.
fn segment_variants(model: &Model, options: &PlanOptions) -> SegmentSearch {
    let chain = segment::Chain::new(model.flat(), segment::MAX_UNITS);
    let size = model.body().eqns.len();
    if options.segment_evals == 0 {
        return SegmentSearch { chain, plans: Vec::new(), refine: 0 };
    }
    let (count, refine) = match size <= options.heuristic_full_size {
        true => (options.segment_evals, options.segment_evals / 2),
        false => {
            let scaled =
                options.segment_evals as u128 * (options.heuristic_full_size as u128).pow(2) / (size as u128).pow(2);
            ((scaled as usize).clamp(2.min(options.segment_evals), options.segment_evals), 0)
        }
    };
    let all_kept = chain.cost(&[]).0;
    // Segments saving nothing reach the least memory; letting them save their products
    // too gives cheaper plans between. Half the measurements for each.
    let mut plans: Vec<segment::Segmentation> = Vec::new();
    for (keeps, share) in [(&[segment::Keep::Nothing][..], count.div_ceil(2)), (&segment::Keep::ALL[..], count / 2)] {
        if share == 0 {
            continue;
        }
        let mut found: Vec<segment::Segmentation> = Vec::new();
        let mut add = |s: segment::Solution| {
            if !s.segments.is_empty() && !found.contains(&s.segments) {
                found.push(s.segments);
            }
        };
        // Modelled budgets evenly spaced below saving everything, four per segmentation
        // measured (at most 32).
        let budgets = (4 * share as u64).clamp(4, 32);
        let mut fits = all_kept;
        for k in (1..budgets).rev() {
            let Some(s) = chain.solve(all_kept * k / budgets, keeps) else { break };
            fits = all_kept * k / budgets;
            add(s);
        }
        // The smallest modelled budget any segmentation fits, by bisection (what fits is
        // monotone in the budget): the segmentation of the least memory.
        let (mut lo, mut hi) = (0, fits);
        while hi - lo > (all_kept / 256).max(1) {
            let mid = lo + (hi - lo) / 2;
            match chain.solve(mid, keeps) {
                Some(_) => hi = mid,
                None => lo = mid,
            }
        }
        if let Some(s) = chain.solve(hi, keeps) {
            add(s);
        }
        for s in search::spread(&found, share) {
            if !plans.contains(&s) {
                plans.push(s);
            }
        }
    }
    SegmentSearch { chain, plans, refine }
}

impl SegmentSearch {
    /// The function rewritten with each of `plans`, described.
    fn rewrite(
        &self,
        model: &Model,
        arg_names: &[String],
        plans: &[segment::Segmentation],
    ) -> Result<Vec<Variant>, PlanError> {
        let flat = model.flat();
        plans
            .par_iter()
            .map(|s| {
                let spans = self.chain.spans(s);
                let g = segment::checkpoint_segments(flat, &spans)?;
                let closed = ClosedJaxpr { jaxpr: Arc::new(g), consts: model.consts().to_vec() };
                let m = segment::Rewritten::new(closed, model.argnums(), arg_names, model.base_flops());
                Ok(Variant { description: segments_description(flat, &spans), rewritten: m, segments: Some(spans) })
            })
            .collect()
    }

    /// Local refinement where the model and the JIT disagree: the segmentations one change
    /// away ([`segment::Chain::neighbours`]) from those on the frontier, taken in turn from
    /// each (lowest peak first, each one's by modelled peak then FLOPs), measured four at a
    /// time until `refine` were spent or a round leaves the frontier as it was. The
    /// segmentations measured are `variants[first..]`.
    fn refine(
        &mut self,
        model: &Model,
        arg_names: &[String],
        first: usize,
        variants: &mut Vec<Variant>,
        evals: &mut Evaluations,
    ) -> Result<(), PlanError> {
        const ROUND: usize = 4;
        while self.refine > 0 {
            let before = evals.frontier();
            let parents: Vec<&segment::Segmentation> = before
                .iter()
                .filter_map(|&i| evals.points[i].variant)
                .filter(|&k| k >= first)
                .map(|k| &self.plans[k - first])
                .collect();
            let mut lists: Vec<Vec<segment::Segmentation>> = parents
                .iter()
                .map(|p| {
                    let mut n: Vec<segment::Segmentation> = self
                        .chain
                        .neighbours(p)
                        .into_iter()
                        .filter(|n| !n.is_empty() && !self.plans.contains(n))
                        .collect();
                    n.sort_by_key(|n| self.chain.cost(n));
                    n.reverse();
                    n
                })
                .collect();
            let mut batch: Vec<segment::Segmentation> = Vec::new();
            while batch.len() < ROUND.min(self.refine) && lists.iter().any(|l| !l.is_empty()) {
                for l in &mut lists {
                    if let Some(n) = l.pop() {
                        if batch.len() < ROUND.min(self.refine) && !batch.contains(&n) {
                            batch.push(n);
                        }
                    }
                }
            }
            if batch.is_empty() {
                break;
            }
            let from = variants.len();
            variants.extend(self.rewrite(model, arg_names, &batch)?);
            self.refine -= batch.len();
            self.plans.extend(batch);
            measure_variants(variants, from, evals)?;
            if evals.frontier() == before {
                break;
            }
        }
        Ok(())
    }
}

/// `N checkpointed segments, ... at f.jaxpr lines 7-9, 11-69 (dots), ...`: where each
/// segment's first and last equations come from (the file named once when they share it),
/// and what it saves.
fn segments_description(flat: &Jaxpr, spans: &[(usize, usize, segment::Keep)]) -> String {
    // Each segment's first and last source line (the equations of an inlined call come
    // from other lines than their neighbours': the lowest and highest, not the ends).
    let ends: Vec<(&remat_ir::SourceInfo, &remat_ir::SourceInfo, segment::Keep)> = spans
        .iter()
        .map(|&(a, e, keep)| {
            let known = || flat.eqns[a..e].iter().map(|q| &q.source).filter(|s| !s.is_unknown());
            let lo = known().min_by_key(|s| (s.line, s.column)).unwrap_or(&flat.eqns[a].source);
            let hi = known().max_by_key(|s| (s.line, s.column)).unwrap_or(&flat.eqns[e - 1].source);
            (lo, hi, keep)
        })
        .collect();
    let one_file = ends.iter().all(|(a, e, _)| a.file == ends[0].0.file && e.file == ends[0].0.file);
    let at: Vec<String> = ends
        .iter()
        .map(|(a, e, keep)| {
            let range = match (one_file, a.line == e.line) {
                (true, true) => a.line.to_string(),
                (true, false) => format!("{}-{}", a.line, e.line),
                (false, _) => format!("{a} to {e}"),
            };
            match keep {
                segment::Keep::Nothing => range,
                segment::Keep::Dots => format!("{range} (dots)"),
            }
        })
        .collect();
    let place = match (one_file, ends.first()) {
        (true, Some((a, _, _))) => format!("at {} lines {}", a.file, at.join(", ")),
        _ => format!("at {}", at.join(", ")),
    };
    let dots = spans.iter().filter(|s| s.2 == segment::Keep::Dots).count();
    let saves = match (spans.len(), dots) {
        (1, 0) => "1 checkpointed segment, saving nothing".to_string(),
        (1, _) => "1 checkpointed segment, saving its products (dots_saveable)".to_string(),
        (n, 0) => format!("{n} checkpointed segments, each saving nothing"),
        (n, _) => format!(
            "{n} checkpointed segments, those marked (dots) saving their products (dots_saveable), the others nothing"
        ),
    };
    format!(
        "{saves} (the forward half keeps their boundaries, the backward half recomputes one segment at a time), {place}"
    )
}

/// The distinct `checkpoint_name` names of the candidates, in program order.
fn program_names(body: &Jaxpr, model: &Model) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (i, e) in body.eqns.iter().enumerate() {
        if let Primitive::Name { name } = &e.primitive {
            if model.is_candidate(i) && !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// The plan for `budget` of the scalar loss `f`.
pub fn plan(f: &ClosedJaxpr, arg_names: &[String], budget: Budget, options: &PlanOptions) -> Result<Plan, PlanError> {
    Planner::new(f, arg_names, options)?.plan(budget)
}

/// The Pareto frontier of `f`'s plans and the built-in policies on the same axes.
pub fn frontier(
    f: &ClosedJaxpr,
    arg_names: &[String],
    options: &PlanOptions,
) -> Result<(Vec<FrontierPoint>, Vec<PolicyPoint>), PlanError> {
    let planner = Planner::new(f, arg_names, options)?;
    Ok((planner.frontier(), planner.builtins().to_vec()))
}
