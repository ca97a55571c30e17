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
//! states the model, the algorithms and their guarantees; `docs/architecture.md` lists the
//! crate's files, each one idea (`planner.rs` is the [`Planner`], `plan.rs` what it answers).
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

mod offload;
mod options;
mod plan;
mod planner;
mod policies;
mod report;
mod rewrites;

use remat_ad::AdError;
use remat_ir::ClosedJaxpr;
use remat_jit::JitError;

pub use budget::Budget;
pub use names::NamesPolicy;
pub use options::PlanOptions;
pub use plan::{jax_names_policy, FrontierPoint, Method, Plan, PolicyPoint};
pub use planner::Planner;
pub use policies::NAMES_IN_GENERAL_SEARCH;

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
