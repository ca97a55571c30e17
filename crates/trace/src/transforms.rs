//! Tracing entry points and the call-like primitives: `make_jaxpr`, `jit`, `checkpoint`
//! (records `remat2`), `checkpoint_name` (records `name`), and the library's named calls
//! (`jit[name=_where]`, `custom_jvp_call[name=relu]`). `scan` is in `scan.rs`.
//!
//! Each call traces the user's function in a frame of its own and records one equation in
//! the enclosing frame. Tensors the function captures from outside become leading inputs
//! of the inner jaxpr, as in JAX. Calls of one function that trace to the same jaxpr share
//! it (JAX caches traces), so the printer hoists it as JAX's does.

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use remat_ir::{pp_jaxpr, Array, Aval, ClosedJaxpr, Jaxpr, Policy, Primitive};

use crate::elementwise::{python_floats, Arg};
use crate::tensor::Tensor;
use crate::trace::{
    bind, bind_n, current_frame, function_scope, pop_frame, push_frame, record_error, share_jaxpr, source_info,
    spell_last_literals, CallKey, Operand, TraceError,
};
use crate::traceable::{ScanBody, TraceFn};
use crate::tree::{ArgTree, TensorTree};

/// A traced function: its closed jaxpr and the names of its flattened arguments.
#[derive(Clone, Debug)]
pub struct Traced {
    /// The jaxpr, with the values of its constvars (arrays the function used as constants).
    pub jaxpr: ClosedJaxpr,
    /// One name per flattened argument, as JAX names them (`params[0][1]`, `x`).
    pub arg_names: Vec<String>,
}

impl fmt::Display for Traced {
    /// Prints the jaxpr exactly as `jax.make_jaxpr` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pp_jaxpr(&self.jaxpr.jaxpr))
    }
}

impl Traced {
    /// Flattens a tree of concrete arguments into the list the jaxpr takes, checking it
    /// against the traced signature: the same number of leaves, each of the traced dtype
    /// and shape. The error names the caller's line, the argument (by its traced name) and
    /// both types.
    #[track_caller]
    pub fn flatten_args<A: ArgTree>(&self, args: &A) -> Result<Vec<Array>, TraceError> {
        let loc = Location::caller();
        let err = |message: String| TraceError { location: source_info(loc), message };
        let mut specs = Vec::new();
        args.specs("args", &mut specs);
        let mut values = Vec::new();
        args.values(&mut values);
        let expected = self.jaxpr.jaxpr.in_avals();
        if specs.len() != expected.len() {
            let want: Vec<String> = self.arg_names.iter().zip(&expected).map(|(n, a)| format!("{n}: {a}")).collect();
            let got: Vec<String> = specs.iter().map(|(n, a)| format!("{n}: {a}")).collect();
            return Err(err(format!(
                "the traced function takes {} arguments ({}) but {} were given ({})",
                expected.len(),
                want.join(", "),
                specs.len(),
                got.join(", ")
            )));
        }
        let mut out = Vec::with_capacity(values.len());
        for (i, (((given_name, given), want), value)) in specs.iter().zip(&expected).zip(values).enumerate() {
            let name = &self.arg_names[i];
            if !given.same_type(want) {
                return Err(err(format!("argument {i} ({name}) was traced as {want} but is given as {given}")));
            }
            match value {
                Some(v) => out.push(v.clone()),
                None => return Err(err(format!("argument {i} ({given_name}) is an abstract {given}, not a value"))),
            }
        }
        Ok(out)
    }
}

/// Traces `f` on abstract values shaped like `args` and returns its jaxpr, as
/// `jax.make_jaxpr(f)(*args)` does. `args` is a tree (see [`ArgTree`]) of [`Aval`]s or
/// [`Array`]s; `f` receives the same tree with a [`Tensor`] at every leaf and returns a
/// tree of tensors. Shape and dtype errors inside `f` are returned as a [`TraceError`]
/// naming the line of `f` where they happened; nothing panics.
///
/// A panic inside `f` (or inside a closure it calls through [`Checkpoint::call`],
/// [`Jit::call`] or [`scan`](crate::scan)) is caught and returned as a [`TraceError`] that
/// names the innermost closure that panicked (its Rust type, which says where it is
/// written), where it was called, and the panic's message; the trace's state is reset.
#[track_caller]
pub fn make_jaxpr<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<Traced, TraceError> {
    make_jaxpr_at(f, args, Location::caller())
}

/// [`make_jaxpr`] with the caller's location given (for wrappers such as the facade's
/// `jit` and `grad`, whose caller is the user's line).
pub fn make_jaxpr_at<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<Traced, TraceError> {
    let name = std::any::type_name_of_val(&f);
    match panic::catch_unwind(AssertUnwindSafe(|| trace_root(f, name, args, loc))) {
        Ok(traced) => traced,
        Err(payload) => Err(closure_panic_error(payload, loc)),
    }
}

/// [`make_jaxpr_at`] for anything the transformations accept ([`TraceFn`]: a closure, a
/// [`Checkpoint`], a [`Jit`]); a panic inside it names `F`.
pub fn trace_fn_at<A: ArgTree, R: TensorTree, F: TraceFn<A::Traced, R>>(
    f: &F,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<Traced, TraceError> {
    let name = std::any::type_name::<F>();
    match panic::catch_unwind(AssertUnwindSafe(|| trace_root(|a| f.call_traced(a, loc), name, args, loc))) {
        Ok(traced) => traced,
        Err(payload) => Err(closure_panic_error(payload, loc)),
    }
}

fn trace_root<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    name: &str,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<Traced, TraceError> {
    if current_frame().is_some() {
        let message = "make_jaxpr cannot be called while another function is being traced (call the function \
                       directly, or use jit)";
        record_error(loc, message.into());
        return Err(TraceError { location: source_info(loc), message: message.into() });
    }
    let mut specs = Vec::new();
    args.specs("args", &mut specs);
    let types: Vec<(Aval, bool)> = specs.iter().map(|(_, a)| (a.clone(), false)).collect();
    let (guard, inputs) = push_frame(&types);
    let traced_args = args.build(&mut inputs.into_iter());
    let out = naming_panics("the traced closure", name, loc, || f(traced_args));
    let finished = pop_frame(guard, &out.leaves(), loc)?;
    Ok(Traced {
        jaxpr: ClosedJaxpr { jaxpr: Arc::new(finished.jaxpr), consts: finished.consts },
        arg_names: specs.into_iter().map(|(n, _)| n).collect(),
    })
}

/// A function body traced in its own frame.
pub(crate) struct Body<R> {
    pub jaxpr: Jaxpr,
    /// Tensors of the enclosing frame the body uses: the call's leading operands.
    pub captured: Vec<Tensor>,
    /// The body's results (inner tensors): the structure and weak flags of the call's.
    pub out: R,
}

/// Traces `f` on fresh inputs of `in_types`. On error (recorded), returns `f`'s result so
/// that the caller can return placeholders of the right structure.
///
/// `callee` names the closure for a panic inside it: `(kind, Rust type name)`.
pub(crate) fn trace_body<R: TensorTree>(
    in_types: &[(Aval, bool)],
    f: impl FnOnce(Vec<Tensor>) -> R,
    callee: (&'static str, &'static str),
    loc: &'static Location<'static>,
) -> Result<Body<R>, R> {
    let (guard, inner) = push_frame(in_types);
    let out = naming_panics(callee.0, callee.1, loc, || f(inner));
    match pop_frame(guard, &out.leaves(), loc) {
        Ok(finished) => Ok(Body { jaxpr: finished.jaxpr, captured: finished.captured, out }),
        Err(_) => Err(out),
    }
}

/// `template` with a placeholder at every leaf (the result of a failed call).
pub(crate) fn placeholders<R: TensorTree>(template: &R) -> R {
    template.rebuild(&mut template.leaves().into_iter().map(|t| Tensor::placeholder(t.aval().clone())))
}

/// Records `prim` over `operands` and returns `template` rebuilt with its results, which
/// keep the weak flags of the template's leaves.
pub(crate) fn bind_call<R: TensorTree>(
    prim: Primitive,
    operands: &[Operand],
    template: &R,
    loc: &'static Location<'static>,
) -> R {
    let leaves = template.leaves();
    let weak: Vec<bool> = leaves.iter().map(Tensor::is_weak).collect();
    match bind_n(prim, operands, &weak, loc) {
        Some(results) if results.len() == leaves.len() => template.rebuild(&mut results.into_iter()),
        _ => placeholders(template),
    }
}

/// A panic inside a user's closure, named, on its way up to [`make_jaxpr_at`] (which turns
/// it into a [`TraceError`]). The innermost closure names it; outer ones let it pass.
struct ClosurePanic {
    /// `the checkpointed closure `model::layer::{{closure}}``.
    closure: String,
    /// Where the closure was called (the `call`, or the `make_jaxpr`).
    called_at: &'static Location<'static>,
    message: String,
}

/// Runs `f`, the user's closure `name` (a `kind`, called at `loc`), naming a panic inside
/// it. The panic unwinds on (so that every frame guard between here and `make_jaxpr`
/// resets the trace's state) with a [`ClosurePanic`] payload.
pub(crate) fn naming_panics<T>(kind: &str, name: &str, loc: &'static Location<'static>, f: impl FnOnce() -> T) -> T {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(t) => t,
        Err(payload) if payload.is::<ClosurePanic>() => panic::resume_unwind(payload),
        Err(payload) => panic::resume_unwind(Box::new(ClosurePanic {
            closure: format!("{kind} `{name}`"),
            called_at: loc,
            message: panic_message(payload.as_ref()),
        })),
    }
}

/// The error [`make_jaxpr_at`] returns for a panic during the trace.
fn closure_panic_error(payload: Box<dyn Any + Send>, loc: &'static Location<'static>) -> TraceError {
    let message = match payload.downcast::<ClosurePanic>() {
        Ok(p) => format!(
            "{} panicked (called at {}:{}:{}): {}",
            p.closure,
            p.called_at.file(),
            p.called_at.line(),
            p.called_at.column(),
            p.message
        ),
        // Outside every user closure: a bug of this crate, reported rather than raised.
        Err(payload) => format!("internal error: tracing panicked: {}", panic_message(payload.as_ref())),
    };
    TraceError { location: source_info(loc), message }
}

/// A panic payload's message (`panic!` gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (None, Some(s)) => s.clone(),
        (None, None) => "a panic whose payload is not a string".into(),
    }
}

fn types_of(leaves: &[Tensor]) -> Vec<(Aval, bool)> {
    leaves.iter().map(|t| (t.aval().clone(), t.is_weak())).collect()
}

fn with_captured(captured: Vec<Tensor>, operands: impl IntoIterator<Item = Operand>) -> Vec<Operand> {
    captured.into_iter().map(Operand::Tensor).chain(operands).collect()
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

fn new_instance() -> u64 {
    NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
}

/// The name JAX would take from a Python function: a Rust function item's own name, or
/// `<lambda>` for a closure, as JAX names an anonymous function.
pub fn function_name<F>() -> String {
    let full = std::any::type_name::<F>();
    if full.contains(['{', '(']) {
        return "<lambda>".into();
    }
    let path = full.split('<').next().unwrap_or(full);
    path.rsplit("::").next().unwrap_or(path).to_string()
}

/// `jax.jit(f)`: inside a trace, [`Jit::call`] records a `jit[name=... jaxpr={...}]`
/// equation. The name is the function's (for a Rust `fn`), or the one given with
/// [`Jit::name`]; equations inside a named call carry that name as their function.
pub fn jit<F>(f: F) -> Jit<F> {
    Jit { name: function_name::<F>(), named: false, f, id: new_instance() }
}

/// A function to be called as a `jit` equation. See [`jit`].
#[derive(Clone, Debug)]
pub struct Jit<F> {
    f: F,
    name: String,
    named: bool,
    id: u64,
}

impl<F> Jit<F> {
    /// The name JAX takes from the Python function (`jit[name=relu ...]`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self.named = true;
        self
    }

    /// Calls the function on a tree of tensors, recording one `jit` equation.
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
    {
        self.call_at(args, Location::caller())
    }

    /// [`Jit::call`] recorded at `loc`.
    pub(crate) fn call_at<A: TensorTree, R: TensorTree>(&self, args: A, loc: &'static Location<'static>) -> R
    where
        F: Fn(A) -> R,
    {
        let leaves = args.leaves();
        let body = trace_body(
            &types_of(&leaves),
            |inner| {
                let _scope = self.named.then(|| function_scope(&self.name));
                (self.f)(args.rebuild(&mut inner.into_iter()))
            },
            ("the jit closure", std::any::type_name::<F>()),
            loc,
        );
        match body {
            Err(out) => placeholders(&out),
            Ok(body) => {
                let jaxpr = share_jaxpr(CallKey::Instance(self.id), body.jaxpr);
                let operands = with_captured(body.captured, leaves.into_iter().map(Operand::Tensor));
                let prim = Primitive::Jit {
                    name: self.name.clone(),
                    jaxpr: ClosedJaxpr::new(jaxpr),
                    options: Default::default(),
                };
                bind_call(prim, &operands, &body.out, loc)
            }
        }
    }
}

// A `jit` is a function the transformations accept (`traceable.rs`), called as its
// own `jit` equation, as is a reference to one.

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for Jit<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for &Jit<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for Jit<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for &Jit<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

/// A library function recorded as `jit[name=...]` over tensors and Rust scalars (which
/// are passed as literal operands, as JAX passes Python scalars): `jnp.where` is
/// `jit[name=_where]`, `jax.nn.log_softmax` is `jit[name=log_softmax]`.
pub(crate) fn library_jit<R: TensorTree>(
    name: &'static str,
    args: &[Arg],
    f: impl FnOnce(Vec<Tensor>) -> R,
    loc: &'static Location<'static>,
) -> R {
    let operands: Vec<Operand> = args.iter().map(Arg::operand).collect();
    let types: Vec<(Aval, bool)> = operands.iter().map(Operand::typ).collect();
    match trace_body(&types, f, ("the library function", name), loc) {
        Err(out) => placeholders(&out),
        Ok(body) => {
            let jaxpr = share_jaxpr(CallKey::Library(name), body.jaxpr);
            let prim =
                Primitive::Jit { name: name.to_string(), jaxpr: ClosedJaxpr::new(jaxpr), options: Default::default() };
            let n_captured = body.captured.len();
            let out = bind_call(prim, &with_captured(body.captured, operands), &body.out, loc);
            spell_last_literals(&python_floats(args, n_captured));
            out
        }
    }
}

/// A library function with a custom derivative, recorded as JAX records a
/// `jax.custom_jvp` function: `custom_jvp_call[name=... call_jaxpr={...} jvp=...
/// symbolic_zeros=False]` over `args`, each an operand and its weak flag. `jvp` names
/// the derivative rule.
pub(crate) fn library_custom_jvp(
    name: &'static str,
    jvp: &str,
    args: &[(Operand, bool)],
    f: impl FnOnce(Vec<Tensor>) -> Tensor,
    loc: &'static Location<'static>,
) -> Tensor {
    let operands: Vec<Operand> = args.iter().map(|(o, _)| o.clone()).collect();
    let types: Vec<(Aval, bool)> = args.iter().map(|(o, weak)| (o.typ().0, *weak)).collect();
    match trace_body(&types, f, ("the library function", name), loc) {
        Err(out) => placeholders(&out),
        Ok(body) => bind_custom_jvp(name, jvp, body, operands, loc),
    }
}

/// Records the `custom_jvp_call` of a traced `body` (its captured tensors first, as
/// `num_consts`) over `operands`: what a library function and a user's `custom_jvp` both
/// bind.
pub(crate) fn bind_custom_jvp<R: TensorTree>(
    name: &str,
    jvp: &str,
    body: Body<R>,
    operands: impl IntoIterator<Item = Operand>,
    loc: &'static Location<'static>,
) -> R {
    let prim = Primitive::CustomJvpCall {
        name: name.to_string(),
        call_jaxpr: ClosedJaxpr::new(Arc::new(body.jaxpr)),
        jvp: jvp.to_string(),
        num_consts: body.captured.len(),
        symbolic_zeros: false,
    };
    bind_call(prim, &with_captured(body.captured, operands), &body.out, loc)
}

/// `jax.checkpoint(f)`: inside a trace, [`Checkpoint::call`] records a `remat2` equation
/// whose policy decides what its linearization may save. The default policy (`None`)
/// saves nothing.
pub fn checkpoint<F>(f: F) -> Checkpoint<F> {
    Checkpoint { f, policy: None, prevent_cse: true, id: new_instance() }
}

/// A function to be called as a `remat2` equation. See [`checkpoint`].
#[derive(Clone, Debug)]
pub struct Checkpoint<F> {
    f: F,
    policy: Option<Policy>,
    prevent_cse: bool,
    id: u64,
}

impl<F> Checkpoint<F> {
    /// The rematerialization policy (`jax.checkpoint(f, policy=...)`).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// JAX's `prevent_cse` (default `true`).
    pub fn prevent_cse(mut self, prevent_cse: bool) -> Self {
        self.prevent_cse = prevent_cse;
        self
    }

    /// Calls the function on a tree of tensors, recording one `remat2` equation.
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
    {
        self.call_at(args, Location::caller())
    }

    /// [`Checkpoint::call`] recorded at `loc`.
    pub(crate) fn call_at<A: TensorTree, R: TensorTree>(&self, args: A, loc: &'static Location<'static>) -> R
    where
        F: Fn(A) -> R,
    {
        let leaves = args.leaves();
        let callee = ("the checkpointed closure", std::any::type_name::<F>());
        match trace_body(&types_of(&leaves), |inner| (self.f)(args.rebuild(&mut inner.into_iter())), callee, loc) {
            Err(out) => placeholders(&out),
            Ok(body) => {
                let prim = Primitive::Remat2 {
                    jaxpr: share_jaxpr(CallKey::Instance(self.id), body.jaxpr),
                    prevent_cse: self.prevent_cse,
                    differentiated: false,
                    policy: self.policy.clone(),
                };
                let operands = with_captured(body.captured, leaves.into_iter().map(Operand::Tensor));
                bind_call(prim, &operands, &body.out, loc)
            }
        }
    }
}

// A checkpoint is a function the transformations accept (`traceable.rs`), called as its
// own `remat2` equation, as is a reference to one.

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for Checkpoint<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: Fn(A) -> R> TraceFn<A, R> for &Checkpoint<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.call_at(args, loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for Checkpoint<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

impl<C: TensorTree, X: TensorTree, Y: TensorTree, F: Fn((C, X)) -> (C, Y)> ScanBody<C, X, Y> for &Checkpoint<F> {
    fn call_body(&self, carry: C, x: X, loc: &'static Location<'static>) -> (C, Y) {
        self.call_at((carry, x), loc)
    }
}

/// `checkpoint_name(x, name)`: names a value for remat policies (records `name[name=...]`).
#[track_caller]
pub fn checkpoint_name(x: &Tensor, name: &str) -> Tensor {
    bind(Primitive::Name { name: name.to_string() }, &[x.into()], x.is_weak(), Location::caller()).remove(0)
}

/// Composes `funs` with recursive (binomial) checkpointing, as the `recursive_checkpoint`
/// of JAX's remat tutorial: the result computes `funs[0](funs[1](...funs[n-1](x)))`
/// (the last function is applied first), splitting the chain in halves and checkpointing
/// the half applied first, recursively, so that a chain of `n` functions keeps
/// `O(log n)` residuals live under differentiation.
///
/// ```
/// use remat_ir::{Aval, DType};
/// use remat_trace::{make_jaxpr, recursive_checkpoint, Tensor};
///
/// let sins = vec![|x: Tensor| x.sin(); 8];
/// let f = recursive_checkpoint(&sins);
/// let traced = make_jaxpr(|x| f(x), &Aval::scalar(DType::F32)).unwrap();
/// assert_eq!(traced.to_string().matches("remat2").count(), 3);
/// ```
pub fn recursive_checkpoint<T, F>(funs: &[F]) -> impl Fn(T) -> T + '_
where
    T: TensorTree,
    F: Fn(T) -> T,
{
    move |x| apply_recursive(funs, x)
}

fn apply_recursive<T: TensorTree, F: Fn(T) -> T>(funs: &[F], x: T) -> T {
    match funs {
        [] => x,
        [f] => f(x),
        [f1, f2] => f1(f2(x)),
        _ => {
            let (first, second) = funs.split_at(funs.len() / 2);
            let y = checkpoint(|x: T| apply_recursive(second, x)).call(x);
            apply_recursive(first, y)
        }
    }
}
