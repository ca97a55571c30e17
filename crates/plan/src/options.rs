//! What the planner may choose among, and how hard it searches: [`PlanOptions`].

/// What the planner may choose among, and how hard it searches.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// The inputs differentiated (`jax.value_and_grad`'s `argnums`); all float inputs when
    /// `None`.
    pub argnums: Option<Vec<usize>>,
    /// Choose only among values named with `checkpoint_name` (the plan is then a
    /// `save_only_these_names` policy, or with a host budget a
    /// `save_and_offload_only_these_names` one: [`NamesPolicy`]).
    ///
    /// [`NamesPolicy`]: crate::NamesPolicy
    pub names_only: bool,
    /// Choose only among plans JAX runs as they are (`applicable.rs`): the built-in
    /// policies, and names policies over the program's names and the names the planner
    /// gives every value of the function ([`applicable::auto_name`]). What the Python
    /// package plans, so that `plan.apply(f)` is the plan.
    ///
    /// [`applicable::auto_name`]: crate::applicable::auto_name
    pub applicable: bool,
    /// Host memory for offloaded residuals: saved values may wait there between the
    /// halves. A budget under which nothing can be offloaded is [`PlanError::NoOffload`].
    ///
    /// [`PlanError::NoOffload`]: crate::PlanError::NoOffload
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
    ///
    /// [`search::MIN_HEURISTIC_EVALS`]: crate::search::MIN_HEURISTIC_EVALS
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
