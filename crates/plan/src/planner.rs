//! The planner: a function's plans proposed and evaluated once ([`Planner::new`]: the
//! built-in policies, the search, the names policies, the rewritten functions and the
//! offloads), then a budget's plan selected among them ([`Planner::plan`]).

use remat_ad::ResolvedPolicy;
use remat_ir::{ClosedJaxpr, Jaxpr, Policy, Primitive};

use rayon::prelude::*;

use crate::applicable;
use crate::budget::Budget;
use crate::model::{Evaluated, Model};
use crate::offload::offload_plans;
use crate::options::PlanOptions;
use crate::plan::{jax_names_policy, FrontierPoint, Method, Plan, PolicyPoint};
use crate::policies::{applicable_plans, names_plain_plans, names_plans, PlannedPolicy};
use crate::report::{held_by, recomputed_lines, with_sources};
use crate::rewrites::{measure_variants, scan_variants, segment_variants, Variant};
use crate::search::{self, Evaluations, Point};
use crate::PlanError;

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
        let mut recomputed = recomputed_lines(self.model_of(p), &p.recompute);
        let offloaded = recomputed_lines(self.model_of(p), &p.offload);
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
