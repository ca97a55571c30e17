//! Autodiff and rematerialization on jaxprs, as JAX 0.10.2 does them.
//!
//! The layering follows autodidax and JAX's own vocabulary:
//! - [`jvp_jaxpr`] (forward mode, with symbolic zeros; one jvp rule per primitive),
//! - [`partial_eval_jaxpr_custom`] (split a jaxpr into known and staged halves, asking a
//!   remat [`policy`] which known values may be saved), [`dce_jaxpr`],
//! - [`transpose_jaxpr`] (reverse mode on linear jaxprs; one transpose rule per linear
//!   primitive),
//! - [`linearize`] = jvp + partial evaluation, [`vjp`] = linearize + transpose, [`grad`],
//! - [`saved_residuals`], [`print_saved_residuals`] and [`fwd_bwd_strings`] to inspect what
//!   the forward half saves (laying the two programs out on a terminal is the facade's).
//!
//! ```
//! use remat_ir::parse_jaxpr;
//!
//! // sin(sin(x)): the backward pass multiplies by cos(sin x) and cos x, so the forward
//! // half saves both cosines (and not the inner sin).
//! let f = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = sin b in (c,) }", "f.jaxpr").unwrap();
//! let v = remat_ad::vjp(&f, &["x".to_string()]).unwrap();
//! let lines: Vec<String> = v.residuals.iter().map(|r| r.to_string()).collect();
//! assert_eq!(
//!     lines,
//!     ["f32[3] output of cos from f.jaxpr:1:26", "f32[3] output of cos from f.jaxpr:1:44"]
//! );
//! ```
//!
//! Architecture invariants: this crate depends only on `remat-ir` (it builds jaxprs and
//! never evaluates them); its modules import only down the layers docs/architecture.md
//! lists (builder; the primitives' shared parameters and registries; dce; jvp;
//! partial_eval; transpose; batching; vjp; checkpointed), a rule that recurses into a
//! pass living with that pass (`crates/remat/tests/imports.rs` checks it); every pass's
//! output passes `remat_ir::verify` (checked after every pass in debug builds); every rule
//! table is one exhaustive `match` over [`remat_ir::Primitive`] with no `_ =>` arm.

mod batching;
pub mod builder;
mod call;
mod checkpointed;
mod cond;
mod custom;
mod dce;
mod jvp;
mod partial_eval;
pub mod policy;
mod residuals;
mod scan;
mod transpose;
mod vjp;

pub use batching::batch_jaxpr;
pub use builder::{Builder, VarMap};
pub use checkpointed::{flat_paths, flatten_calls, recompute_in_backward, with_policy, Checkpointed, PLAN_POLICY_NAME};
pub use custom::{register_custom_jvp, register_custom_vjp, CustomJvpRule, CustomVjpJaxprs, CustomVjpRule, CUSTOM_LIN};
pub use dce::dce_jaxpr;
pub use jvp::{custom_rule_notes, jvp_jaxpr, JvpJaxpr};
pub use partial_eval::{partial_eval_jaxpr_custom, PartialEval, PeMode};
pub use policy::{
    check_policy_names, give_policy_names, register_policy, registered_policy, resolve_policy, user_policy,
    with_policy_names, EqnDecisions, PolicyNames, PolicyNamesUse, PolicyRule, ResolvedPolicy, Saveability,
};
pub use residuals::{summarize, Residual, ResidualKind};
pub use transpose::{transpose_jaxpr, Transposed};
pub use vjp::{
    fwd_bwd_strings, grad, jvp, linearize, print_saved_residuals, saved_residuals, value_and_grad,
    value_and_grad_in_trace, value_and_grad_vjp, vjp, vjp_program, vjp_program_of, Linearized, Vjp, VjpProgram,
};

use remat_ir::{Jaxpr, VerifyError};

/// Why a transformation could not be done.
#[derive(Debug, thiserror::Error)]
pub enum AdError {
    /// The request does not fit the program (wrong argument count, a non-scalar output
    /// for `grad`, a policy that is not valid, ...).
    #[error("{0}")]
    Invalid(String),
    /// The program uses something this crate cannot differentiate or split.
    #[error("{primitive}: {message}")]
    Unsupported { primitive: &'static str, message: String },
    /// A user's policy rule panicked while deciding about an equation (`at` is the
    /// equation's source location, when known).
    #[error("the user policy `{policy}` panicked deciding about {primitive}{}: {message}", if at.is_empty() { String::new() } else { format!(" at {at}") })]
    PolicyPanic { policy: String, primitive: &'static str, at: String, message: String },
    /// A pass produced a malformed jaxpr: a bug in this crate.
    #[error("internal error: {0}")]
    Internal(String),
    /// A pass's output did not verify: a bug in this crate.
    #[error("internal error: the output of {pass} does not verify:\n{error}")]
    Verify { pass: &'static str, error: VerifyError },
}

/// Runs the verifier on a pass's output in debug builds (and so in every test).
pub(crate) fn check(pass: &'static str, jaxpr: &Jaxpr) -> Result<(), AdError> {
    if cfg!(debug_assertions) {
        remat_ir::verify(jaxpr).map_err(|error| AdError::Verify { pass, error })?;
    }
    Ok(())
}

/// Runs `remat_ir::check_split` on a split's two halves in debug builds (and so in every
/// test): the residuals `known` returns last are the ones `staged` takes first.
pub(crate) fn check_split(pass: &'static str, known: &Jaxpr, staged: &Jaxpr, num_res: usize) -> Result<(), AdError> {
    if cfg!(debug_assertions) {
        remat_ir::check_split(known, staged, num_res).map_err(|error| AdError::Verify { pass, error })?;
    }
    Ok(())
}
