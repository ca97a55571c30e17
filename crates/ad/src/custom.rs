//! User derivative rules for `custom_jvp_call`, by name: the text form of a
//! `custom_jvp_call` holds its rule only as a name (`jvp=f_jvp`), so a rule written in
//! Rust is attached the way a user policy is (`register_policy`): a process-wide registry
//! maps `(name, jvp)` to a [`CustomJvpRule`], which gives the rule as a jaxpr for the
//! call's operand types. `jvp_jaxpr` inlines that jaxpr (JAX's `process_custom_jvp_call`)
//! rather than differentiating the primal body.
//!
//! Two different rules under one key would make the choice silent, so a second rule of
//! another Rust type under the same key makes the key ambiguous, and differentiating a
//! call of it is an error asking for distinct names.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use remat_ir::{Aval, ClosedJaxpr};

use crate::AdError;

/// A `custom_jvp` rule: for the call's operand types `(primals)`, the jaxpr
/// `(primals, tangents) -> (outs, tangent outs)`.
pub trait CustomJvpRule: Send + Sync {
    /// The rule traced at these primal types, or a message saying why it cannot be.
    fn jvp_jaxpr(&self, primal_avals: &[Aval]) -> Result<ClosedJaxpr, String>;
}

enum Entry {
    Rule { type_id: TypeId, rule: Arc<dyn CustomJvpRule> },
    Ambiguous,
}

type Registry = RwLock<HashMap<(String, String), Entry>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers the rule of the `custom_jvp_call[name=NAME ... jvp=JVP]` calls. A rule of the
/// same Rust type (`type_id`: the same code, perhaps other captured values) replaces the
/// earlier one; a rule of another type makes the key ambiguous.
pub fn register_custom_jvp(name: &str, jvp: &str, type_id: TypeId, rule: Arc<dyn CustomJvpRule>) {
    let mut map = registry().write().unwrap_or_else(|e| e.into_inner());
    let key = (name.to_string(), jvp.to_string());
    let entry = match map.get(&key) {
        Some(Entry::Rule { type_id: old, .. }) if *old != type_id => Entry::Ambiguous,
        Some(Entry::Ambiguous) => Entry::Ambiguous,
        Some(Entry::Rule { .. }) | None => Entry::Rule { type_id, rule },
    };
    map.insert(key, entry);
}

/// The registered rule of `custom_jvp_call[name=NAME ... jvp=JVP]`, if any.
pub(crate) fn custom_jvp_rule(name: &str, jvp: &str) -> Result<Option<Arc<dyn CustomJvpRule>>, AdError> {
    let map = registry().read().unwrap_or_else(|e| e.into_inner());
    match map.get(&(name.to_string(), jvp.to_string())) {
        None => Ok(None),
        Some(Entry::Rule { rule, .. }) => Ok(Some(rule.clone())),
        Some(Entry::Ambiguous) => Err(AdError::Invalid(format!(
            "custom_jvp_call `{name}`: two different rules are registered as `{jvp}`; give the functions or their rules \
             distinct names"
        ))),
    }
}

/// A `custom_vjp` function's rules as jaxprs, traced at one operand signature.
#[derive(Clone, Debug)]
pub struct CustomVjpJaxprs {
    /// `(primals) -> (outs, residuals)`.
    pub fwd: ClosedJaxpr,
    /// `(residuals, output cotangents) -> (one cotangent per primal)`.
    pub bwd: ClosedJaxpr,
    /// How many of `fwd`'s outputs are the function's outputs (the rest are residuals).
    pub num_outs: usize,
}

/// A `custom_vjp` function's `fwd` and `bwd` rules.
pub trait CustomVjpRule: Send + Sync {
    /// The rules traced at these primal types, or a message saying why they cannot be.
    fn vjp_jaxprs(&self, primal_avals: &[Aval]) -> Result<CustomVjpJaxprs, String>;
}

enum VjpEntry {
    Rule { type_id: TypeId, rule: Arc<dyn CustomVjpRule> },
    Ambiguous,
}

type VjpRegistry = RwLock<HashMap<(String, String), VjpEntry>>;

fn vjp_registry() -> &'static VjpRegistry {
    static REGISTRY: OnceLock<VjpRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Registers the rules of the `custom_vjp_call[... bwd=BWD ... fwd=FWD ...]` calls (the
/// key is the pair of rule names, which the linear `custom_lin` equation keeps too); a
/// rule pair of another Rust type under the same names makes the key ambiguous.
pub fn register_custom_vjp(fwd: &str, bwd: &str, type_id: TypeId, rule: Arc<dyn CustomVjpRule>) {
    let mut map = vjp_registry().write().unwrap_or_else(|e| e.into_inner());
    let key = (fwd.to_string(), bwd.to_string());
    let entry = match map.get(&key) {
        Some(VjpEntry::Rule { type_id: old, .. }) if *old != type_id => VjpEntry::Ambiguous,
        Some(VjpEntry::Ambiguous) => VjpEntry::Ambiguous,
        Some(VjpEntry::Rule { .. }) | None => VjpEntry::Rule { type_id, rule },
    };
    map.insert(key, entry);
}

/// The registered rules of a `custom_vjp_call` with these rule names, if any.
pub(crate) fn custom_vjp_rule(fwd: &str, bwd: &str) -> Result<Option<Arc<dyn CustomVjpRule>>, AdError> {
    let map = vjp_registry().read().unwrap_or_else(|e| e.into_inner());
    match map.get(&(fwd.to_string(), bwd.to_string())) {
        None => Ok(None),
        Some(VjpEntry::Rule { rule, .. }) => Ok(Some(rule.clone())),
        Some(VjpEntry::Ambiguous) => Err(AdError::Invalid(format!(
            "custom_vjp_call: two different rule pairs are registered as `{fwd}`/`{bwd}`; give the rules distinct \
             names"
        ))),
    }
}

/// The name of the linear equation a `custom_vjp_call` with registered rules leaves in the
/// tangent program (JAX's `custom_lin`): a `custom_vjp_call[name=custom_lin ...]` over
/// the residuals (its `num_consts`) and the input tangents, whose transpose runs `bwd`.
/// It has no forward-mode meaning (JAX: "can't apply forward-mode autodiff (jvp) to a
/// custom_vjp function"); its body returns NaNs.
pub const CUSTOM_LIN: &str = "custom_lin";
