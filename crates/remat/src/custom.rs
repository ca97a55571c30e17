//! `jax.custom_jvp` and `jax.custom_vjp` with Rust closures as rules:
//! `custom_jvp(f).defjvp(rule)`, `custom_vjp(f).defvjp(fwd, bwd)`.
//!
//! A call records `custom_jvp_call[name=f call_jaxpr={...} jvp=f_jvp ...]`, as JAX prints
//! it (the names are the Rust functions', `<lambda>` for closures, or given with
//! [`CustomJvp::name`] and [`CustomJvp::jvp_name`]). The first call at each operand
//! signature also traces the rule, in a frame of its own, and registers it with
//! `remat_ad::register_custom_jvp` under `(name, jvp)`: autodiff (jvp, linearize, vjp,
//! grad, what is saved) then runs the rule instead of differentiating the primal body.
//! A `custom_vjp` call likewise records `custom_vjp_call[name=f bwd=f_bwd ... fwd=f_fwd
//! ...]` and registers both rules (traced per signature) with
//! `remat_ad::register_custom_vjp`: reverse mode runs `fwd` forward (its residuals are what
//! is saved) and `bwd` backward.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex};

use remat_ad::{CustomJvpRule, CustomVjpJaxprs, CustomVjpRule};
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
        let traced = shared_cache(&JVP_CACHES, TypeId::of::<J>(), size_of::<J>(), [&self.name, &jvp]);
        CustomJvp { f: self.f, name: self.name, jvp, rule, traced }
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
        if !InRule::tracing(TypeId::of::<J>()) && !self.traced.has(&avals) {
            let traced = {
                let _guard = InRule::enter(TypeId::of::<J>());
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

/// The traced rules of each rule (its Rust type and the names the call prints), shared by
/// every wrapper of that rule: a function written `fn f(x) { custom_jvp(..).defjvp(rule)
/// .call(x) }` builds a new wrapper at each call, and each call's signature must stay
/// known to autodiff. Only rules that capture nothing (fn items, closures of size zero)
/// are shared: two closures of one type that capture different values are different
/// rules, so each wrapper of a capturing rule keeps its own cache.
type Caches<T> = Mutex<HashMap<(TypeId, Vec<String>), Arc<T>>>;

static JVP_CACHES: std::sync::LazyLock<Caches<TracedRules>> = std::sync::LazyLock::new(Default::default);
static VJP_CACHES: std::sync::LazyLock<Caches<TracedVjpRules>> = std::sync::LazyLock::new(Default::default);

fn shared_cache<T: Default, const N: usize>(
    caches: &Caches<T>,
    rule: TypeId,
    rule_size: usize,
    names: [&String; N],
) -> Arc<T> {
    if rule_size != 0 {
        return Arc::new(T::default());
    }
    let key = (rule, names.iter().map(|n| n.to_string()).collect());
    match caches.lock() {
        Ok(mut map) => map.entry(key).or_default().clone(),
        // A poisoned map (a panic while it was held) still gives a working, unshared cache.
        Err(_) => Arc::new(T::default()),
    }
}

thread_local! {
    /// The rules (by their Rust type) this thread is tracing now.
    static RULES_IN_TRACE: RefCell<Vec<TypeId>> = const { RefCell::new(Vec::new()) };
}

/// Marks a rule as being traced while alive (unmarked on a panic too), so that a rule may
/// call its own `custom_jvp`/`custom_vjp` function (as JAX's rules do, `safe_log` calling
/// `safe_log`) without tracing the rule again: the inner call records the call equation
/// only. Keyed by the rule's type, not by the wrapper, since a wrapper built afresh at each
/// call (`fn safe_log(x) { custom_jvp(..).defjvp(rule).call(x) }`) is a new value each time.
struct InRule(TypeId);

impl InRule {
    fn enter(rule: TypeId) -> InRule {
        RULES_IN_TRACE.with(|r| r.borrow_mut().push(rule));
        InRule(rule)
    }

    fn tracing(rule: TypeId) -> bool {
        RULES_IN_TRACE.with(|r| r.borrow().contains(&rule))
    }
}

impl Drop for InRule {
    fn drop(&mut self) {
        RULES_IN_TRACE.with(|r| {
            let mut r = r.borrow_mut();
            if let Some(i) = r.iter().rposition(|t| *t == self.0) {
                r.remove(i);
            }
        });
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
            None => Err(not_traced_at(primal_avals)),
        }
    }
}

/// `jax.custom_vjp(f)`: a function whose reverse-mode derivative is given by rules; see
/// [`CustomVjp::defvjp`].
pub fn custom_vjp<F>(f: F) -> CustomVjp<F, (), ()> {
    CustomVjp {
        name: remat_trace::function_name::<F>(),
        f,
        fwd_name: String::new(),
        bwd_name: String::new(),
        fwd: (),
        bwd: (),
        traced: Arc::new(TracedVjpRules::default()),
    }
}

/// A function with custom `fwd` and `bwd` rules (`()` before
/// [`defvjp`](CustomVjp::defvjp)).
#[derive(Debug)]
pub struct CustomVjp<F, Fwd, Bwd> {
    f: F,
    name: String,
    fwd_name: String,
    bwd_name: String,
    fwd: Fwd,
    bwd: Bwd,
    traced: Arc<TracedVjpRules>,
}

impl<F, Fwd, Bwd> CustomVjp<F, Fwd, Bwd> {
    /// The name `custom_vjp_call` prints (`name=...`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// The rules' names `custom_vjp_call` prints (`fwd=...`, `bwd=...`), which also key
    /// the rules for autodiff.
    pub fn rule_names(mut self, fwd: &str, bwd: &str) -> Self {
        self.fwd_name = fwd.to_string();
        self.bwd_name = bwd.to_string();
        self
    }
}

impl<F> CustomVjp<F, (), ()> {
    /// `f.defvjp(fwd, bwd)`: `fwd(args)` returns `(f(args), residuals)` (any tree of
    /// tensors), and `bwd(residuals, output cotangent)` returns one cotangent per argument,
    /// in the arguments' tree type. `bwd` need not be linear (gradient clipping is the
    /// classic use). The rules see only their arguments, as in [`CustomJvp::defjvp`].
    pub fn defvjp<Fwd: Send + Sync + 'static, Bwd: Send + Sync + 'static>(
        self,
        fwd: Fwd,
        bwd: Bwd,
    ) -> CustomVjp<F, Fwd, Bwd> {
        let fwd_name = if self.fwd_name.is_empty() { remat_trace::function_name::<Fwd>() } else { self.fwd_name };
        let bwd_name = if self.bwd_name.is_empty() { remat_trace::function_name::<Bwd>() } else { self.bwd_name };
        let traced = shared_cache(
            &VJP_CACHES,
            TypeId::of::<(Fwd, Bwd)>(),
            size_of::<(Fwd, Bwd)>(),
            [&self.name, &fwd_name, &bwd_name],
        );
        CustomVjp { f: self.f, name: self.name, fwd_name, bwd_name, fwd, bwd, traced }
    }
}

impl<F, Fwd: 'static, Bwd: 'static> CustomVjp<F, Fwd, Bwd> {
    /// Calls the function on a tree of tensors inside a trace, recording one
    /// `custom_vjp_call` equation (and, at the first call of these operand types, tracing
    /// both rules for autodiff).
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree, Res: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
        Fwd: Fn(A) -> (R, Res),
        Bwd: Fn(Res, R) -> A,
    {
        let loc = Location::caller();
        let avals: Vec<Aval> = args.leaves().iter().map(|t| t.aval().clone()).collect();
        if !InRule::tracing(TypeId::of::<(Fwd, Bwd)>()) && !self.traced.has(&avals) {
            let _guard = InRule::enter(TypeId::of::<(Fwd, Bwd)>());
            let fwd = remat_trace::trace_rule("the custom_vjp fwd rule", |a| (self.fwd)(a), &args, loc);
            if let Some((fwd_jaxpr, (out, res))) = fwd {
                let num_outs = out.leaves().len();
                let template = (res, out);
                let bwd = remat_trace::trace_rule("the custom_vjp bwd rule", |(r, g)| (self.bwd)(r, g), &template, loc);
                if let Some((bwd_jaxpr, _)) = bwd {
                    let jaxprs = CustomVjpJaxprs { fwd: fwd_jaxpr, bwd: bwd_jaxpr, num_outs };
                    self.traced.insert(avals, jaxprs);
                    let rules: Arc<dyn CustomVjpRule> = self.traced.clone();
                    remat_ad::register_custom_vjp(&self.fwd_name, &self.bwd_name, TypeId::of::<(Fwd, Bwd)>(), rules);
                }
            }
        }
        remat_trace::custom_vjp_call(&self.name, &self.fwd_name, &self.bwd_name, |a| (self.f)(a), args, loc)
    }
}

/// Both rules' jaxprs, one pair per operand signature they were traced at.
#[derive(Debug, Default)]
struct TracedVjpRules {
    by_avals: Mutex<HashMap<Vec<Aval>, CustomVjpJaxprs>>,
}

impl TracedVjpRules {
    fn has(&self, avals: &[Aval]) -> bool {
        self.by_avals.lock().map(|m| m.contains_key(avals)).unwrap_or(false)
    }

    fn insert(&self, avals: Vec<Aval>, jaxprs: CustomVjpJaxprs) {
        if let Ok(mut m) = self.by_avals.lock() {
            m.insert(avals, jaxprs);
        }
    }
}

impl CustomVjpRule for TracedVjpRules {
    fn vjp_jaxprs(&self, primal_avals: &[Aval]) -> Result<CustomVjpJaxprs, String> {
        let map = self.by_avals.lock().map_err(|_| "its rules' cache is poisoned".to_string())?;
        map.get(primal_avals).cloned().ok_or_else(|| not_traced_at(primal_avals))
    }
}

fn not_traced_at(avals: &[Aval]) -> String {
    let types: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!(
        "its rule was traced at other operand types, not ({}); the rule is traced when the function is called at them",
        types.join(", ")
    )
}
