//! What the planner answers: the plan for a budget ([`Plan`]), the frontier's points and
//! the built-in policies placed on the same axes, and how the plans were proposed
//! ([`Method`]).

use remat_ad::Residual;
use remat_ir::Jaxpr;

use crate::names::NamesPolicy;
use crate::segment;

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
