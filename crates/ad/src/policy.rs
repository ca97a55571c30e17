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
//! parsed program holds it as `Policy::Opaque`. Where the factory's arguments cannot change
//! what it means here (`offload_dot_with_no_batch_dims`: remat has exactly JAX's device and
//! host memory), the factory's name gives the meaning; where they can (the names of
//! `save_and_offload_only_these_names`), [`with_policy_names`] (the command line's
//! `--policy-names save=a,b offload=c`) returns the program with the meaning inside its
//! policies, a value carried with the program, not a setting of the process.
//! Differentiating through an opaque policy without a meaning is an error that says which
//! kind it is.

use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, RwLock};

use remat_ir::{Aval, ClosedJaxpr, Jaxpr, MemorySpace, Policy, Primitive};

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
    /// absent or empty; repeated words add names). Words may also arrive as one quoted
    /// argument (`"save=a offload=b"`): they are split at whitespace. Anything else is an
    /// error that quotes it: a word without `save=`/`offload=`, an empty name (`a,,b`), a
    /// name holding `=` or quotes, a name given twice.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<PolicyNames, AdError> {
        let bad = |msg: String| AdError::Invalid(format!("--policy-names: {msg}"));
        let mut names = PolicyNames::default();
        for word in words.iter().flat_map(|w| w.as_ref().split_whitespace()) {
            let (key, list) = word
                .split_once('=')
                .ok_or_else(|| bad(format!("expected `save=NAMES` or `offload=NAMES`, found `{word}`")))?;
            let target = match key {
                "save" => &mut names.saved,
                "offload" => &mut names.offloaded,
                other => return Err(bad(format!("expected `save=` or `offload=`, found `{other}=` in `{word}`"))),
            };
            if list.is_empty() {
                continue;
            }
            for name in list.split(',') {
                if name.is_empty() {
                    return Err(bad(format!("an empty name in `{word}` (names are separated by single commas)")));
                }
                if let Some(c) = name.chars().find(|c| matches!(c, '=' | '\'' | '"')) {
                    return Err(bad(format!("name `{name}` in `{word}` holds `{c}`: write names bare, `save=a,b`")));
                }
                if target.iter().any(|n| n == name) {
                    return Err(bad(format!("name `{name}` is given twice in `{key}=`")));
                }
                target.push(name.to_string());
            }
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

/// The meaning of the opaque policy `repr` made by a factory whose arguments cannot change
/// what it decides here: `offload_dot_with_no_batch_dims(src, dst)` offloads from device
/// memory to host memory, and those are the only two memory spaces remat has (JAX's
/// `pinned_host` and `unpinned_host` are both its host memory);
/// `save_anything_except_these_names(*names)` is, in JAX 0.10.2, `lambda *_, **__: True`
/// whatever the names (`<function save_anything_except_these_names.<locals>.<lambda> ...>`),
/// so a program JAX printed with it saves everything, and so does remat.
fn meaning_by_factory(repr: &str) -> Option<Policy> {
    match Policy::opaque_factory(repr)? {
        "offload_dot_with_no_batch_dims" => {
            Some(Policy::OffloadDotWithNoBatchDims { offload_src: "device".into(), offload_dst: "pinned_host".into() })
        }
        "save_anything_except_these_names" => Some(Policy::EverythingSaveable),
        _ => None,
    }
}

/// The meaning an opaque policy has: the one given with the program, or its factory's.
fn opaque_meaning(repr: &str, meaning: Option<&Policy>) -> Option<Policy> {
    meaning.cloned().or_else(|| meaning_by_factory(repr))
}

fn no_meaning(repr: &str) -> AdError {
    let how = match Policy::opaque_factory(repr) {
        Some(SAVE_AND_OFFLOAD) => {
            "its names are arguments the text does not carry: give them with `--policy-names save=NAMES offload=NAMES` \
             (remat_ad::with_policy_names)"
        }
        Some("save_from_both_policies") => {
            "its two policies are arguments the text does not carry, and they can change what it saves: \
             write the checkpoint with a policy JAX prints in full, or plan the function in process with the \
             Python package, which sees the policies"
        }
        Some(f) if f.contains('<') => "a lambda's code is not in the text, so remat cannot know what it saves",
        _ => "remat knows no meaning for this factory's policies",
    };
    AdError::Invalid(format!(
        "policy {repr} does not say what it saves (JAX prints a closure without its arguments): {how}"
    ))
}

/// The program `jaxpr` with every opaque `save_and_offload_only_these_names` policy (in any
/// checkpoint, at any depth) meaning `names`. Strict, as a command line should be: an error
/// if the program has no such policy, or if a name is not a `checkpoint_name` inside a
/// checkpoint under one (a typo would otherwise silently save or offload nothing).
/// Nested jaxprs that hold no such policy keep their identity (their `Arc`).
pub fn with_policy_names(jaxpr: &ClosedJaxpr, names: &PolicyNames) -> Result<ClosedJaxpr, AdError> {
    let (closed, used) = give_policy_names(jaxpr, names)?;
    check_policy_names(names, &[used])?;
    Ok(closed)
}

/// What [`give_policy_names`] met in one program: how many opaque
/// `save_and_offload_only_these_names` policies it gave the meaning, and the
/// `checkpoint_name`s inside the checkpoints under them.
#[derive(Clone, Debug, Default)]
pub struct PolicyNamesUse {
    pub policies: usize,
    pub names: std::collections::BTreeSet<String>,
}

/// [`with_policy_names`] without its checks, for a caller that gives one meaning to
/// several programs (`remat report a.jaxpr b.jaxpr`) and checks them together with
/// [`check_policy_names`]. Only JAX's own construction-time check is made here (no name
/// both saved and offloaded).
pub fn give_policy_names(jaxpr: &ClosedJaxpr, names: &PolicyNames) -> Result<(ClosedJaxpr, PolicyNamesUse), AdError> {
    let policy = names.policy();
    validate(&policy)?;
    let mut used = PolicyNamesUse::default();
    let mut memo = HashMap::new();
    let body = give_meaning(&jaxpr.jaxpr, &policy, false, &mut memo, &mut used);
    Ok((ClosedJaxpr { jaxpr: body, consts: jaxpr.consts.clone() }, used))
}

/// The checks of [`with_policy_names`] over what it met in one or several programs: some
/// opaque policy took the meaning, and every name is a `checkpoint_name` under one.
pub fn check_policy_names(names: &PolicyNames, uses: &[PolicyNamesUse]) -> Result<(), AdError> {
    if uses.iter().all(|u| u.policies == 0) {
        return Err(AdError::Invalid(format!(
            "--policy-names gives the meaning of `{SAVE_AND_OFFLOAD}` policies, and the program has none \
             (its checkpoints' policies are printed with their arguments, or it has no checkpoint)"
        )));
    }
    let known: std::collections::BTreeSet<&str> =
        uses.iter().flat_map(|u| u.names.iter().map(String::as_str)).collect();
    let unknown: Vec<&str> =
        names.saved.iter().chain(&names.offloaded).map(String::as_str).filter(|n| !known.contains(n)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let list = |xs: &mut dyn Iterator<Item = &str>| xs.map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    Err(AdError::Invalid(format!(
        "--policy-names: {} {} no `checkpoint_name` inside a checkpoint under `{SAVE_AND_OFFLOAD}` (the names there: {})",
        list(&mut unknown.iter().copied()),
        if unknown.len() == 1 { "names" } else { "name" },
        if known.is_empty() { "none".to_string() } else { list(&mut known.iter().copied()) }
    )))
}

/// `j` with `meaning` given to its opaque save-and-offload policies (`under`: `j` is inside
/// a checkpoint under one, so its `checkpoint_name`s are collected).
fn give_meaning(
    j: &Arc<Jaxpr>,
    meaning: &Policy,
    under: bool,
    memo: &mut HashMap<(*const Jaxpr, bool), Arc<Jaxpr>>,
    found: &mut PolicyNamesUse,
) -> Arc<Jaxpr> {
    if let Some(done) = memo.get(&(Arc::as_ptr(j), under)) {
        return done.clone();
    }
    let mut out: Option<Jaxpr> = None;
    for (i, e) in j.eqns.iter().enumerate() {
        if let (true, Primitive::Name { name }) = (under, &e.primitive) {
            found.names.insert(name.clone());
        }
        let mut prim = e.primitive.clone();
        let mut inside = under;
        let mut changed = false;
        if let Primitive::Remat2 { policy: Some(Policy::Opaque { repr, meaning: m }), .. } = &mut prim {
            if Policy::opaque_factory(repr) == Some(SAVE_AND_OFFLOAD) {
                *m = Some(Box::new(meaning.clone()));
                found.policies += 1;
                (inside, changed) = (true, true);
            }
        }
        let prim = prim.map_subjaxprs(|sub| {
            let new = give_meaning(sub, meaning, inside, memo, found);
            changed |= !Arc::ptr_eq(&new, sub);
            new
        });
        if changed {
            out.get_or_insert_with(|| (**j).clone()).eqns[i].primitive = prim;
        }
    }
    let result = out.map_or_else(|| j.clone(), Arc::new);
    memo.insert((Arc::as_ptr(j), under), result.clone());
    result
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
        Policy::Opaque { repr, meaning } => {
            opaque_meaning(repr, meaning.as_deref()).map(ResolvedPolicy::Builtin).ok_or_else(|| no_meaning(repr))
        }
        other => Ok(ResolvedPolicy::Builtin(other.clone())),
    }
}

/// JAX's module-level policy functions (`jax.checkpoint_policies.*`), by name.
fn builtin_function(name: &str) -> Option<Policy> {
    Policy::builtin_named(name)
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
        Policy::Opaque { repr, meaning } => match opaque_meaning(repr, meaning.as_deref()) {
            Some(q) => validate(&q),
            None => Err(no_meaning(repr)),
        },
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
        Policy::Opaque { repr, meaning } => match opaque_meaning(repr, meaning.as_deref()) {
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
