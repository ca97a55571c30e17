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
