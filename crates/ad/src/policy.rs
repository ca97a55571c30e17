//! Remat policies: what `partial_eval_jaxpr_custom` asks about each known equation.
//!
//! A policy sees one equation's primitive (with its parameters) and input avals, never
//! values, and answers [`Saveability`]: `Saveable` (the output may be a residual),
//! `Recompute` (the backward half recomputes it), or `Offloadable { src, dst }` (saved in
//! another memory space). A policy only *permits* saving: a value is saved only if the
//! backward pass needs it.
//!
//! [`resolve_policy`] gives every [`remat_ir::Policy`] JAX 0.10.2's meaning
//! (`jax.checkpoint_policies`), with `save_anything_except_these_names` given its
//! documented meaning (everything except those names; JAX ships a stub that saves
//! everything). User policies are Rust closures ([`PolicyRule`]); since a `remat2`'s
//! policy is data, a user rule is attached to a checkpoint by name through a process-wide
//! registry: [`register_policy`] returns the `Policy::Function { name, .. }` to put in the
//! checkpoint, and [`resolve_policy`] finds the rule again by that name.
//!
//! A policy JAX made with a closure prints without its arguments
//! (`<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>`), so a
//! parsed program holds it as `Policy::Opaque`; [`set_policy_names`] (the command line's
//! `--policy-names save=a,b offload=c`) gives such policies their meaning, and
//! differentiating through one without a meaning is an error.

use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, RwLock};

use remat_ir::{Aval, Jaxpr, MemorySpace, Policy, Primitive};

use crate::AdError;

/// A policy's answer for one equation (JAX's `Saveable`, `Recompute`, `Offloadable`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Saveability {
    Saveable,
    Recompute,
    /// Save the value in `dst` memory (`'pinned_host'`), moved back to `src` (`'device'`)
    /// when the backward half needs it.
    Offloadable {
        src: String,
        dst: String,
    },
}

impl Saveability {
    /// JAX's `ensure_enum` for a boolean policy result.
    pub fn from_bool(save: bool) -> Saveability {
        if save {
            Saveability::Saveable
        } else {
            Saveability::Recompute
        }
    }
}

/// A user-written policy: a rule from an equation's primitive (with its parameters) and
/// input avals to a [`Saveability`].
pub trait PolicyRule: Send + Sync {
    fn decide(&self, prim: &Primitive, in_avals: &[Aval]) -> Saveability;
}

impl<F> PolicyRule for F
where
    F: Fn(&Primitive, &[Aval]) -> Saveability + Send + Sync,
{
    fn decide(&self, prim: &Primitive, in_avals: &[Aval]) -> Saveability {
        self(prim, in_avals)
    }
}

/// A policy ready to be asked: a built-in policy with its meaning, a user rule, or a
/// planner's decisions per equation.
#[derive(Clone)]
pub enum ResolvedPolicy {
    Builtin(Policy),
    User {
        name: String,
        rule: Arc<dyn PolicyRule>,
    },
    /// One decision per equation of one checkpoint body, by position (the memory
    /// planner's plans, `remat-plan`): not a rule over primitives.
    PerEquation(Arc<EqnDecisions>),
}

/// A decision for each equation of one jaxpr, `body` (identified by its `Arc`): the
/// equation at position `i` of `body` gets `decisions[i]`. Equations of any other jaxpr
/// (the bodies of a `scan` or `cond` inside the checkpoint) are `Saveable`, as they are
/// without a checkpoint: a plan chooses among the body's own equations only.
#[derive(Clone, Debug)]
pub struct EqnDecisions {
    body: Arc<Jaxpr>,
    decisions: Vec<Saveability>,
}

impl EqnDecisions {
    /// Decisions for `body`'s equations, one each.
    pub fn new(body: Arc<Jaxpr>, decisions: Vec<Saveability>) -> Result<EqnDecisions, AdError> {
        if decisions.len() != body.eqns.len() {
            return Err(AdError::Invalid(format!(
                "a per-equation policy needs one decision per equation: {} decisions for {} equations",
                decisions.len(),
                body.eqns.len()
            )));
        }
        Ok(EqnDecisions { body, decisions })
    }

    /// The jaxpr the decisions are for.
    pub fn body(&self) -> &Arc<Jaxpr> {
        &self.body
    }

    /// The decision for the equation at `index` of `jaxpr`.
    pub fn decide_at(&self, jaxpr: &Jaxpr, index: usize) -> Saveability {
        if std::ptr::eq(jaxpr, Arc::as_ptr(&self.body)) {
            self.decisions.get(index).cloned().unwrap_or(Saveability::Saveable)
        } else {
            Saveability::Saveable
        }
    }
}

impl fmt::Debug for ResolvedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolvedPolicy::Builtin(p) => write!(f, "Builtin({p:?})"),
            ResolvedPolicy::User { name, .. } => write!(f, "User({name})"),
            ResolvedPolicy::PerEquation(d) => write!(f, "PerEquation({} equations)", d.decisions.len()),
        }
    }
}

impl ResolvedPolicy {
    /// JAX's `nothing_saveable`, what a checkpoint without a policy does.
    pub fn nothing_saveable() -> ResolvedPolicy {
        ResolvedPolicy::Builtin(Policy::NothingSaveable)
    }

    pub fn everything_saveable() -> ResolvedPolicy {
        ResolvedPolicy::Builtin(Policy::EverythingSaveable)
    }

    /// The decision for one known equation. A user rule that panics is
    /// [`AdError::PolicyPanic`] (naming the policy and the primitive; the caller adds the
    /// equation's place), not a panic of the caller.
    /// A [`ResolvedPolicy::PerEquation`] decides by an equation's place, which this call
    /// does not give: use [`ResolvedPolicy::decide_eqn`].
    pub fn decide(&self, prim: &Primitive, in_avals: &[Aval]) -> Result<Saveability, AdError> {
        match self {
            ResolvedPolicy::Builtin(p) => builtin(p, prim, in_avals),
            ResolvedPolicy::User { name, rule } => ask_user(name, rule.as_ref(), prim, in_avals),
            ResolvedPolicy::PerEquation(_) => Err(AdError::Invalid(
                "a per-equation policy decides by an equation's place in its jaxpr, not by its primitive".into(),
            )),
        }
    }

    /// The decision for equation `index` of `jaxpr` (what partial evaluation asks).
    pub fn decide_eqn(
        &self,
        jaxpr: &Jaxpr,
        index: usize,
        prim: &Primitive,
        in_avals: &[Aval],
    ) -> Result<Saveability, AdError> {
        match self {
            ResolvedPolicy::PerEquation(d) => Ok(d.decide_at(jaxpr, index)),
            ResolvedPolicy::Builtin(_) | ResolvedPolicy::User { .. } => self.decide(prim, in_avals),
        }
    }
}

/// Asks a user's rule, catching a panic inside it.
fn ask_user(name: &str, rule: &dyn PolicyRule, prim: &Primitive, in_avals: &[Aval]) -> Result<Saveability, AdError> {
    panic::catch_unwind(AssertUnwindSafe(|| rule.decide(prim, in_avals))).map_err(|payload| {
        let message = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
            (Some(s), _) => s.to_string(),
            (None, Some(s)) => s.clone(),
            (None, None) => "a panic whose payload is not a string".into(),
        };
        AdError::PolicyPanic { policy: name.to_string(), primitive: prim.name(), at: String::new(), message }
    })
}

fn registry() -> &'static RwLock<HashMap<String, Arc<dyn PolicyRule>>> {
    static REGISTRY: OnceLock<RwLock<HashMap<String, Arc<dyn PolicyRule>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers a user policy under `name` (replacing any earlier one) and returns the
/// policy value to give a checkpoint: `Policy::Function`, printed `<function NAME>`.
pub fn register_policy(name: &str, rule: impl PolicyRule + 'static) -> Policy {
    registry().write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), Arc::new(rule));
    Policy::Function { name: name.to_string(), repr: format!("<function {name}>") }
}

/// The names `save_and_offload_only_these_names` was called with: the meaning of the
/// opaque policies it made, which JAX's text does not carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyNames {
    /// `names_which_can_be_saved`.
    pub saved: Vec<String>,
    /// `names_which_can_be_offloaded` (from `"device"` to `"pinned_host"`).
    pub offloaded: Vec<String>,
}

impl PolicyNames {
    /// Reads the command line's form: words `save=a,b` and `offload=c` (either may be
    /// absent or empty; repeated words add names).
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<PolicyNames, AdError> {
        let mut names = PolicyNames::default();
        for word in words {
            let word = word.as_ref();
            let (key, list) = word.split_once('=').ok_or_else(|| {
                AdError::Invalid(format!("policy names: expected `save=NAMES` or `offload=NAMES`, found `{word}`"))
            })?;
            let target = match key {
                "save" => &mut names.saved,
                "offload" => &mut names.offloaded,
                other => {
                    return Err(AdError::Invalid(format!(
                        "policy names: expected `save=` or `offload=`, found `{other}=`"
                    )))
                }
            };
            target.extend(list.split(',').filter(|n| !n.is_empty()).map(str::to_string));
        }
        Ok(names)
    }

    /// `save_and_offload_only_these_names(saved, offloaded, offload_src="device",
    /// offload_dst="pinned_host")`.
    pub fn policy(&self) -> Policy {
        Policy::SaveAndOffloadOnlyTheseNames {
            saved: self.saved.clone(),
            offloaded: self.offloaded.clone(),
            offload_src: "device".into(),
            offload_dst: "pinned_host".into(),
        }
    }
}

/// The factory of the opaque policies [`PolicyNames`] gives a meaning to.
const SAVE_AND_OFFLOAD: &str = "save_and_offload_only_these_names";

fn opaque_meanings() -> &'static RwLock<HashMap<String, Policy>> {
    static MEANINGS: OnceLock<RwLock<HashMap<String, Policy>>> = OnceLock::new();
    MEANINGS.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Gives every opaque `save_and_offload_only_these_names` policy (in any program
/// differentiated afterwards, process-wide) the meaning of `names`; checks that no name is
/// both saved and offloaded, as JAX does.
pub fn set_policy_names(names: &PolicyNames) -> Result<(), AdError> {
    let policy = names.policy();
    validate(&policy)?;
    opaque_meanings().write().unwrap_or_else(|e| e.into_inner()).insert(SAVE_AND_OFFLOAD.to_string(), policy);
    Ok(())
}

/// The meaning given to the opaque policy printed `repr`, if any.
fn opaque_meaning(repr: &str) -> Option<Policy> {
    let factory = Policy::opaque_factory(repr)?;
    opaque_meanings().read().unwrap_or_else(|e| e.into_inner()).get(factory).cloned()
}

fn no_meaning(repr: &str) -> AdError {
    let how = match Policy::opaque_factory(repr) {
        Some(SAVE_AND_OFFLOAD) => {
            "give it one with `--policy-names save=NAMES offload=NAMES` (remat_ad::set_policy_names)"
        }
        _ => "remat knows no way to give this one a meaning",
    };
    AdError::Invalid(format!(
        "policy {repr} does not say what it saves (JAX prints a closure without its arguments): {how}"
    ))
}

/// A registered user policy.
pub fn registered_policy(name: &str) -> Option<Arc<dyn PolicyRule>> {
    registry().read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
}

/// A user policy from a closure, resolved directly (for `partial_eval_jaxpr_custom` or
/// `linearize` callers that do not go through a checkpoint).
pub fn user_policy(name: &str, rule: impl PolicyRule + 'static) -> ResolvedPolicy {
    ResolvedPolicy::User { name: name.to_string(), rule: Arc::new(rule) }
}

/// A checkpoint's policy with its meaning: `None` is `nothing_saveable`; JAX's
/// function-valued policies are known by name; any other function name must be a
/// registered user policy. Invalid combinations are JAX's `ValueError`s.
pub fn resolve_policy(policy: Option<&Policy>) -> Result<ResolvedPolicy, AdError> {
    let Some(p) = policy else { return Ok(ResolvedPolicy::nothing_saveable()) };
    validate(p)?;
    match p {
        Policy::Function { name, .. } => match builtin_function(name) {
            Some(b) => Ok(ResolvedPolicy::Builtin(b)),
            None => match registered_policy(name) {
                Some(rule) => Ok(ResolvedPolicy::User { name: name.clone(), rule }),
                None => Err(unknown_function(name)),
            },
        },
        Policy::Opaque { repr } => opaque_meaning(repr).map(ResolvedPolicy::Builtin).ok_or_else(|| no_meaning(repr)),
        other => Ok(ResolvedPolicy::Builtin(other.clone())),
    }
}

/// JAX's module-level policy functions (`jax.checkpoint_policies.*`), by name.
fn builtin_function(name: &str) -> Option<Policy> {
    match name {
        "everything_saveable" => Some(Policy::EverythingSaveable),
        "nothing_saveable" => Some(Policy::NothingSaveable),
        "dots_saveable" | "checkpoint_dots" => Some(Policy::DotsSaveable { only_if_no_batch_dims: false }),
        "dots_with_no_batch_dims_saveable" | "checkpoint_dots_with_no_batch_dims" => {
            Some(Policy::DotsSaveable { only_if_no_batch_dims: true })
        }
        _ => None,
    }
}

/// JAX's construction-time errors: overlapping save/offload names, and
/// `save_from_both_policies` of a policy that can offload (it only combines booleans).
fn validate(p: &Policy) -> Result<(), AdError> {
    match p {
        Policy::SaveAndOffloadOnlyTheseNames { saved, offloaded, .. } => {
            let both: Vec<&String> = saved.iter().filter(|n| offloaded.contains(n)).collect();
            if !both.is_empty() {
                return Err(AdError::Invalid(format!(
                    "save_and_offload_only_these_names: names {both:?} are both saveable and offloadable"
                )));
            }
            Ok(())
        }
        Policy::SaveFromBothPolicies { policy_1, policy_2 } => {
            for q in [policy_1, policy_2] {
                if can_offload(q) {
                    return Err(AdError::Invalid(
                        "save_from_both_policies: both policies must return booleans, not Offloadable".into(),
                    ));
                }
                validate(q)?;
            }
            Ok(())
        }
        Policy::EverythingSaveable
        | Policy::NothingSaveable
        | Policy::DotsSaveable { .. }
        | Policy::SaveOnlyTheseNames { .. }
        | Policy::SaveAnyNamesButThese { .. }
        | Policy::SaveAnythingExceptTheseNames { .. }
        | Policy::OffloadDotWithNoBatchDims { .. } => Ok(()),
        // Nested or not, a function policy must be JAX's or registered: an unknown one is
        // an error, never silently "recompute".
        Policy::Function { name, .. } => match builtin_function(name).is_some() || registered_policy(name).is_some() {
            true => Ok(()),
            false => Err(unknown_function(name)),
        },
        Policy::Opaque { repr } => opaque_meaning(repr).map(|_| ()).ok_or_else(|| no_meaning(repr)),
    }
}

fn unknown_function(name: &str) -> AdError {
    AdError::Invalid(format!("unknown policy function `{name}`: register it with remat_ad::register_policy"))
}

fn can_offload(p: &Policy) -> bool {
    matches!(p, Policy::SaveAndOffloadOnlyTheseNames { .. } | Policy::OffloadDotWithNoBatchDims { .. })
}

/// The meaning of a built-in policy (which may hold a user's, by name).
fn builtin(p: &Policy, prim: &Primitive, in_avals: &[Aval]) -> Result<Saveability, AdError> {
    let name = || if let Primitive::Name { name } = prim { Some(name.as_str()) } else { None };
    let is_named = |names: &[String]| name().is_some_and(|n| names.iter().any(|m| m == n));
    Ok(match p {
        Policy::EverythingSaveable => Saveability::Saveable,
        Policy::NothingSaveable => Saveability::Recompute,
        Policy::DotsSaveable { only_if_no_batch_dims } => Saveability::from_bool(is_dot(prim, *only_if_no_batch_dims)),
        Policy::SaveOnlyTheseNames { names } => Saveability::from_bool(is_named(names)),
        Policy::SaveAnyNamesButThese { names } => Saveability::from_bool(name().is_some() && !is_named(names)),
        Policy::SaveAnythingExceptTheseNames { names } => Saveability::from_bool(!is_named(names)),
        Policy::SaveFromBothPolicies { policy_1, policy_2 } => {
            let save = |q: &Policy| builtin(q, prim, in_avals).map(|s| s == Saveability::Saveable);
            Saveability::from_bool(save(policy_1)? || save(policy_2)?)
        }
        Policy::SaveAndOffloadOnlyTheseNames { saved, offloaded, offload_src, offload_dst } => {
            if is_named(saved) {
                Saveability::Saveable
            } else if is_named(offloaded) {
                Saveability::Offloadable { src: offload_src.clone(), dst: offload_dst.clone() }
            } else {
                Saveability::Recompute
            }
        }
        Policy::OffloadDotWithNoBatchDims { offload_src, offload_dst } => {
            if is_dot(prim, true) {
                Saveability::Offloadable { src: offload_src.clone(), dst: offload_dst.clone() }
            } else {
                Saveability::Recompute
            }
        }
        Policy::Function { name, .. } => match (builtin_function(name), registered_policy(name)) {
            (Some(q), _) => builtin(&q, prim, in_avals)?,
            (None, Some(rule)) => ask_user(name, rule.as_ref(), prim, in_avals)?,
            // `validate` rejected an unknown function policy.
            (None, None) => return Err(unknown_function(name)),
        },
        // `validate` rejected an opaque policy without a meaning.
        Policy::Opaque { repr } => match opaque_meaning(repr) {
            Some(q) => builtin(&q, prim, in_avals)?,
            None => return Err(no_meaning(repr)),
        },
    })
}

/// `DotsSaveable`: a `dot_general` or a `conv_general_dilated`; with
/// `only_if_no_batch_dims`, only a `dot_general` without batch dimensions in its dimension
/// numbers (JAX's `DotsSaveable.__call__`).
fn is_dot(prim: &Primitive, only_if_no_batch_dims: bool) -> bool {
    if let Primitive::DotGeneral { dimension_numbers: dn, .. } = prim {
        !only_if_no_batch_dims || (dn.lhs_batch.is_empty() && dn.rhs_batch.is_empty())
    } else {
        matches!(prim, Primitive::ConvGeneralDilated(_)) && !only_if_no_batch_dims
    }
}

/// The memory space a JAX memory kind names (`'device'`, `'pinned_host'`).
pub(crate) fn memory_space(kind: &str) -> Result<MemorySpace, AdError> {
    match kind {
        "device" => Ok(MemorySpace::Device),
        "pinned_host" | "unpinned_host" | "host" => Ok(MemorySpace::Host),
        other => Err(AdError::Invalid(format!("unknown memory kind '{other}' (device, pinned_host)"))),
    }
}
