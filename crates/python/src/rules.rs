//! The custom derivative rules of a JAX function, traced in Python and given to remat-ad.
//!
//! JAX's text names a `custom_jvp` or `custom_vjp` function's rules only by the Python
//! functions' names (`jvp=_safe_log_jvp`, `fwd=_clip_fwd bwd=_clip_bwd`); in process the
//! Python layer traces them, at the operand types each call has, and registers the jaxprs
//! here under those names (remat-ad's `register_custom_jvp` / `register_custom_vjp`),
//! before the program is differentiated. A rule is looked up by its names and its
//! operands' types; a rule the Python layer could not give remat (an integer operand, a
//! captured constant array, two different rules under one name in one program) is
//! registered as its reason, which differentiating the call raises.
//!
//! Registering again under the same names and types replaces the rule: the one traced
//! last is the one of the function being differentiated, since every entry point of the
//! package traces its function and differentiates it in the same call.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;

use remat::ad::{register_custom_jvp, register_custom_vjp, CustomJvpRule, CustomVjpJaxprs, CustomVjpRule};
use remat::{Aval, ClosedJaxpr};

use crate::err;

/// A rule's jaxprs (or why there are none) by the operand types they were traced at, as
/// JAX prints them (`f32[4,5]`).
struct Traced<T> {
    /// What the rule is, for messages: "custom_jvp rule `_safe_log_jvp`".
    what: String,
    by_types: Mutex<HashMap<Vec<String>, Result<T, String>>>,
}

impl<T: Clone> Traced<T> {
    fn new(what: String) -> Self {
        Traced { what, by_types: Mutex::new(HashMap::new()) }
    }

    fn insert(&self, types: Vec<String>, rule: Result<T, String>) {
        self.by_types.lock().unwrap_or_else(|e| e.into_inner()).insert(types, rule);
    }

    fn get(&self, avals: &[Aval]) -> Result<T, String> {
        let key: Vec<String> = avals.iter().map(Aval::to_string).collect();
        let map = self.by_types.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&key) {
            Some(rule) => rule.clone(),
            None => {
                let mut traced: Vec<String> = map.keys().map(|k| format!("({})", k.join(", "))).collect();
                traced.sort();
                Err(format!(
                    "its {} was traced in Python at {}, not at ({}) (remat traces a rule at the operand types of each \
                     call in the program it was given)",
                    self.what,
                    traced.join(", "),
                    key.join(", ")
                ))
            }
        }
    }
}

impl CustomJvpRule for Traced<ClosedJaxpr> {
    fn jvp_jaxpr(&self, primal_avals: &[Aval]) -> Result<ClosedJaxpr, String> {
        self.get(primal_avals)
    }
}

impl CustomVjpRule for Traced<CustomVjpJaxprs> {
    fn vjp_jaxprs(&self, primal_avals: &[Aval]) -> Result<CustomVjpJaxprs, String> {
        self.get(primal_avals)
    }
}

type Table<T> = Mutex<HashMap<(String, String), Arc<Traced<T>>>>;

/// The rules registered from Python under one pair of names, made and registered with
/// remat-ad on first use.
fn entry<T: Clone + Send + 'static>(
    table: &'static OnceLock<Table<T>>,
    names: (&str, &str),
    what: impl FnOnce() -> String,
    register: impl FnOnce(Arc<Traced<T>>),
) -> Arc<Traced<T>>
where
    Traced<T>: Send + Sync,
{
    let table = table.get_or_init(|| Mutex::new(HashMap::new()));
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    let key = (names.0.to_string(), names.1.to_string());
    if let Some(traced) = table.get(&key) {
        return traced.clone();
    }
    let traced = Arc::new(Traced::new(what()));
    register(traced.clone());
    table.insert(key, traced.clone());
    traced
}

/// Reads a rule's jaxpr text (JAX's printer's, as `parse` reads a program); it must have
/// no constvars (the Python layer sends a rule with captured constants as its reason).
fn rule_jaxpr(text: &str, file: &str) -> Result<ClosedJaxpr, String> {
    let jaxpr = remat::ir::parse_jaxpr(text, file).map_err(|e| format!("{file}: {e}"))?;
    remat::ir::verify::verify(&jaxpr).map_err(|e| format!("{file}: the jaxpr is not well-typed:\n{e}"))?;
    if !jaxpr.constvars.is_empty() {
        return Err(format!("{file}: the rule computes with {} constant arrays", jaxpr.constvars.len()));
    }
    Ok(ClosedJaxpr { jaxpr: Arc::new(jaxpr), consts: Vec::new() })
}

static JVP: OnceLock<Table<ClosedJaxpr>> = OnceLock::new();
static VJP: OnceLock<Table<CustomVjpJaxprs>> = OnceLock::new();

/// Registers the jvp rule of `custom_jvp_call[name=NAME ... jvp=JVP]` at the primal types
/// `types` (JAX's short forms): `rule` is the jaxpr text `(primals, tangents) -> (outs,
/// tangent outs)`, or `None` with `reason` saying why there is none.
#[pyfunction]
#[pyo3(signature = (name, jvp, types, rule=None, reason=None))]
pub(crate) fn register_jvp_rule(
    name: &str,
    jvp: &str,
    types: Vec<String>,
    rule: Option<&str>,
    reason: Option<String>,
) -> PyResult<()> {
    let traced = entry(
        &JVP,
        (name, jvp),
        || format!("custom_jvp rule `{jvp}`"),
        |t| register_custom_jvp(name, jvp, TypeId::of::<Traced<ClosedJaxpr>>(), t),
    );
    let file = format!("the custom_jvp rule `{jvp}` of `{name}`");
    let n = types.len();
    let parsed = match (rule, reason) {
        (Some(text), None) => crate::guarded(|| {
            let closed = rule_jaxpr(text, &file)?;
            let (ins, outs) = (closed.jaxpr.invars.len(), closed.jaxpr.outvars.len());
            if ins != 2 * n || outs % 2 != 0 {
                return Err(format!(
                    "{file}: {ins} inputs and {outs} outputs for {n} primals (the rule takes primals and tangents and \
                     returns outputs and their tangents)"
                ));
            }
            Ok(closed)
        })?,
        (None, Some(reason)) => Err(reason),
        _ => return Err(err("register_jvp_rule takes a rule's text or a reason, exactly one")),
    };
    traced.insert(types, parsed);
    Ok(())
}

/// Registers the rules of `custom_vjp_call[... bwd=BWD ... fwd=FWD ...]` at the primal
/// types `types`: `fwd` is the jaxpr text `(primals) -> (outs, residuals)` with `num_outs`
/// outputs, `bwd` `(residuals, output cotangents) -> (one cotangent per primal)`; or
/// `reason` says why there are none.
#[pyfunction]
#[pyo3(signature = (fwd_name, bwd_name, types, fwd=None, bwd=None, num_outs=0, reason=None))]
pub(crate) fn register_vjp_rule(
    fwd_name: &str,
    bwd_name: &str,
    types: Vec<String>,
    fwd: Option<&str>,
    bwd: Option<&str>,
    num_outs: usize,
    reason: Option<String>,
) -> PyResult<()> {
    let traced = entry(
        &VJP,
        (fwd_name, bwd_name),
        || format!("custom_vjp rules `{fwd_name}`/`{bwd_name}`"),
        |t| register_custom_vjp(fwd_name, bwd_name, TypeId::of::<Traced<CustomVjpJaxprs>>(), t),
    );
    let parsed = match (fwd, bwd, reason) {
        (Some(fwd), Some(bwd), None) => crate::guarded(|| -> Result<CustomVjpJaxprs, String> {
            let fwd = rule_jaxpr(fwd, &format!("the custom_vjp rule `{fwd_name}`"))?;
            let bwd = rule_jaxpr(bwd, &format!("the custom_vjp rule `{bwd_name}`"))?;
            let (n, outs, res) = (types.len(), fwd.jaxpr.outvars.len(), bwd.jaxpr.invars.len());
            if fwd.jaxpr.invars.len() != n || num_outs > outs || res != outs {
                return Err(format!(
                    "the custom_vjp rules `{fwd_name}`/`{bwd_name}` do not fit together: {n} primals, fwd takes {} and \
                     returns {outs} values ({num_outs} outputs and the residuals), bwd takes {res} (the \
                     residuals and a cotangent per output)",
                    fwd.jaxpr.invars.len()
                ));
            }
            if bwd.jaxpr.outvars.len() != n {
                return Err(format!(
                    "the custom_vjp rule `{bwd_name}` returns {} cotangents for {n} primals",
                    bwd.jaxpr.outvars.len()
                ));
            }
            Ok(CustomVjpJaxprs { fwd, bwd, num_outs })
        })?,
        (None, None, Some(reason)) => Err(reason),
        _ => return Err(err("register_vjp_rule takes both rules' texts or a reason, exactly one")),
    };
    traced.insert(types, parsed);
    Ok(())
}
