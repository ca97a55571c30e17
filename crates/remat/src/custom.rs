//! `jax.custom_jvp` with a Rust closure as the rule: `custom_jvp(f).defjvp(rule)`.
//!
//! A call records `custom_jvp_call[name=f call_jaxpr={...} jvp=f_jvp ...]`, as JAX prints
//! it (the names are the Rust functions', `<lambda>` for closures, or given with
//! [`CustomJvp::name`] and [`CustomJvp::jvp_name`]). The first call at each operand
//! signature also traces the rule, in a frame of its own, and registers it with
//! `remat_ad::register_custom_jvp` under `(name, jvp)`: autodiff (jvp, linearize, vjp,
//! grad, what is saved) then runs the rule instead of differentiating the primal body.

use std::any::TypeId;
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex};

use remat_ad::CustomJvpRule;
use remat_ir::{Aval, ClosedJaxpr};

use crate::TensorTree;

/// `jax.custom_jvp(f)`: a function whose derivative is given by a rule; see
/// [`CustomJvp::defjvp`].
pub fn custom_jvp<F>(f: F) -> CustomJvp<F, ()> {
    CustomJvp {
        name: remat_trace::function_name::<F>(),
        f,
        jvp: String::new(),
        rule: (),
        traced: Arc::new(TracedRules::default()),
        in_rule: Cell::new(false),
    }
}

/// A function with a custom jvp rule. `J` is the rule (`()` before
/// [`defjvp`](CustomJvp::defjvp)).
#[derive(Debug)]
pub struct CustomJvp<F, J> {
    f: F,
    name: String,
    jvp: String,
    rule: J,
    traced: Arc<TracedRules>,
    /// Set while the rule is traced, so that the rule may call the function itself (as
    /// JAX's rules do) without tracing the rule again.
    in_rule: Cell<bool>,
}

impl<F, J> CustomJvp<F, J> {
    /// The name `custom_jvp_call` prints (`name=...`; JAX takes the function's `__name__`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// The rule's name `custom_jvp_call` prints (`jvp=...`).
    pub fn jvp_name(mut self, name: &str) -> Self {
        self.jvp = name.to_string();
        self
    }
}

impl<F> CustomJvp<F, ()> {
    /// `f.defjvp(rule)`: `rule((x, y), (tx, ty))` returns `(f(x, y), tangent of the output)`
    /// for primals and tangents of the same tree type as `f`'s argument. The tangent must be
    /// linear in the tangents (JAX's requirement too). The rule sees only its arguments: a
    /// tensor of an enclosing function it captured is an error; constant arrays likewise.
    pub fn defjvp<J: Send + Sync + 'static>(self, rule: J) -> CustomJvp<F, J> {
        let jvp = if self.jvp.is_empty() { remat_trace::function_name::<J>() } else { self.jvp };
        CustomJvp { f: self.f, name: self.name, jvp, rule, traced: self.traced, in_rule: self.in_rule }
    }
}

impl<F, J: 'static> CustomJvp<F, J> {
    /// Calls the function on a tree of tensors inside a trace, recording one
    /// `custom_jvp_call` equation (and, at the first call of these operand types, tracing
    /// the rule for autodiff).
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
        J: Fn(A, A) -> (R, R),
    {
        let loc = Location::caller();
        let avals: Vec<Aval> = args.leaves().iter().map(|t| t.aval().clone()).collect();
        if !self.in_rule.get() && !self.traced.has(&avals) {
            let traced = {
                let _guard = InRule::enter(&self.in_rule);
                remat_trace::trace_jvp_rule(|p, t| (self.rule)(p, t), &args, loc)
            };
            if let Some(jaxpr) = traced {
                self.traced.insert(avals, jaxpr);
                remat_ad::register_custom_jvp(&self.name, &self.jvp, TypeId::of::<J>(), self.traced.clone());
            }
        }
        remat_trace::custom_jvp_call(&self.name, &self.jvp, |a| (self.f)(a), args, loc)
    }
}

/// Sets a flag while alive (reset on a panic too).
struct InRule<'a>(&'a Cell<bool>);

impl<'a> InRule<'a> {
    fn enter(flag: &'a Cell<bool>) -> InRule<'a> {
        flag.set(true);
        InRule(flag)
    }
}

impl Drop for InRule<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A rule's jaxprs, one per operand signature it was traced at.
#[derive(Debug, Default)]
struct TracedRules {
    by_avals: Mutex<HashMap<Vec<Aval>, ClosedJaxpr>>,
}

impl TracedRules {
    fn has(&self, avals: &[Aval]) -> bool {
        self.by_avals.lock().map(|m| m.contains_key(avals)).unwrap_or(false)
    }

    fn insert(&self, avals: Vec<Aval>, jaxpr: ClosedJaxpr) {
        if let Ok(mut m) = self.by_avals.lock() {
            m.insert(avals, jaxpr);
        }
    }
}

impl CustomJvpRule for TracedRules {
    fn jvp_jaxpr(&self, primal_avals: &[Aval]) -> Result<ClosedJaxpr, String> {
        let map = self.by_avals.lock().map_err(|_| "its rule's cache is poisoned".to_string())?;
        match map.get(primal_avals) {
            Some(j) => Ok(j.clone()),
            None => {
                let types: Vec<String> = primal_avals.iter().map(|a| a.to_string()).collect();
                Err(format!(
                    "its rule was traced at other operand types, not ({}); the rule is traced when the function \
                     is called at them",
                    types.join(", ")
                ))
            }
        }
    }
}
