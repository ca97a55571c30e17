//! remat: JAX's tracing, autodiff and `jax.checkpoint` for Rust, compiled to native code.
//!
//! This crate is the thin public facade over the pipeline's crates: it re-exports the
//! tracer's API and adds the functions that act on a user's closure as a whole —
//! [`jit`], [`grad`], [`value_and_grad`] (also inside a trace), [`vmap`], [`vjp`], [`jvp`], [`linearize`],
//! [`custom_jvp`], [`custom_vjp`], [`saved_residuals`], [`print_saved_residuals`] and
//! [`print_fwd_bwd`] (each takes a closure, a `fn` or a `Checkpoint`; gradients come back
//! flattened or, with `call_tree`, in the arguments' structure). Running a program, with its backend and
//! NaN policy, has one home: [`run`] (which the `remat` command-line tool uses too).
//!
//! ```
//! use remat::{checkpoint, named, Array, Aval, DType, Policy, Tensor};
//!
//! // sin(W2 @ sin(W1 @ x)), checkpointed so that only dot products may be saved.
//! let f = |(w1, w2, x): (Tensor, Tensor, Tensor)| w2.dot(&w1.dot(&x).sin()).sin().sum();
//! let ck = checkpoint(f).policy(Policy::DotsSaveable { only_if_no_batch_dims: true });
//! let avals = (
//!     named("W1", Aval::new(DType::F32, vec![3, 2])),
//!     named("W2", Aval::new(DType::F32, vec![4, 3])),
//!     named("x", Aval::new(DType::F32, vec![2])),
//! );
//! let lines: Vec<String> =
//!     remat::saved_residuals(|a| ck.call(a), &avals).unwrap().iter().map(|r| r.to_string()).collect();
//! assert_eq!(lines[..3], ["f32[3,2] from the argument W1", "f32[4,3] from the argument W2", "f32[2] from the argument x"]);
//! assert!(lines[3].starts_with("f32[3] output of dot_general from"));
//!
//! // The gradient, compiled to native code on first use and cached per input types.
//! let grad = remat::grad(|a| ck.call(a));
//! let ones = |shape: &[usize]| Array::F32(ndarray::ArrayD::ones(shape));
//! let g = grad.call(&(ones(&[3, 2]), ones(&[4, 3]), ones(&[2]))).unwrap();
//! assert_eq!(g.len(), 3);
//! ```
//!
//! Architecture invariant: this crate holds no algorithm of its own; it composes
//! `remat-trace` (closures to jaxprs), `remat-ad` (differentiation and the
//! forward/backward split), `remat-jit` (native code) and `remat-interp` (the reference).

mod custom;
mod in_trace;
pub mod ledger;
mod linear;
pub mod pretty;
pub mod report;
pub mod run;
mod vmap;

/// The Rust samples of the README and `docs/*.md`: every ```` ```rust ```` block of these
/// files is a doctest (`cargo test --doc -p remat`), compiled and run as a reader would
/// paste it (a fragment's setup is in `# ` lines, which rustdoc hides). One item per file;
/// `tests/doc_samples.rs` checks that every documentation file with a Rust block is here.
#[cfg(doctest)]
mod doc_samples {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/autodiff.md")]
    struct Autodiff;
    #[doc = include_str!("../../../docs/jit.md")]
    struct Jit;
    #[doc = include_str!("../../../docs/trace.md")]
    struct Trace;
    #[doc = include_str!("../../../docs/training.md")]
    struct Training;
}

use std::panic::Location;
use std::sync::Arc;

pub use custom::{custom_jvp, custom_vjp, CustomJvp, CustomVjp};
pub use linear::{jvp, jvp_with, linearize, linearize_with, vjp, vjp_program, vjp_with, LinearFn, VjpFn, VjpProgram};
pub use ndarray;
pub use pretty::{print_fwd_bwd_text, side_by_side};
/// The autodiff crate, for inspecting a jaxpr's vjp (`saved_residuals`, `fwd_bwd_strings`)
/// when the program is a jaxpr rather than a closure.
pub use remat_ad as ad;
pub use remat_ad::{register_policy, with_policy_names, AdError, PolicyNames, Residual, ResidualKind, Saveability};
pub use remat_interp::EvalError;
pub use remat_ir::{self as ir, bf16, c128, c64, f16, Array, Aval, ClosedJaxpr, DType, Jaxpr, Policy, PrngKey};
pub use remat_jit::{device_program, is_sharded, Compiled, CseScope, DeviceProgram, JitError, Options, Plan};
pub use remat_json as json;
/// The memory planner: [`plan::Planner`], [`plan::frontier`], [`plan::Budget`]; the
/// function [`plan()`] plans a closure.
pub use remat_plan as plan;
pub use remat_plan::Budget;
pub use remat_trace::{
    self as trace, checkpoint, checkpoint_name, function_scope, lax, linalg, make_jaxpr, named, nn, numpy, ops, random,
    recursive_checkpoint, scan, scan_reverse, ArgTree, GradTree, Idx, Ix, Named, ScanBody, Tensor, TensorTree,
    TraceError, TraceFn, Traced, ELLIPSIS, NEW_AXIS,
};
pub use remat_trace::{idx, ix, pytree};
pub use run::{Backend, Nans, RunOptions};
pub use vmap::{vmap, Vmap};

use run::{Cache, Program};

/// Anything that can go wrong between a user's closure and its results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("tracing failed: {0}")]
    Trace(#[from] TraceError),
    #[error("differentiation failed: {0}")]
    Ad(#[from] AdError),
    #[error("compilation or native run failed: {0}")]
    Jit(#[from] JitError),
    #[error("planning failed: {0}")]
    Plan(#[from] remat_plan::PlanError),
    #[error("evaluation failed: {0}")]
    Eval(#[from] EvalError),
    /// A NaN that [`Nans`] asked to report: in an argument, or (with [`Nans::Debug`]) the
    /// equation that produced the first one (or, with [`Nans::DebugInfs`], the first
    /// infinity).
    #[error("NaN check: {0}")]
    Nan(EvalError),
    /// A cotangent given to [`run::VjpRunner::run`] holds a NaN (unless [`Nans::Propagate`]).
    #[error("NaN check: cotangent {index} holds NaN at {position:?}")]
    NanCotangent { index: usize, position: Vec<usize> },
    /// An error of running one half of a vjp ([`run::VjpRunner::run`]); a NaN check's
    /// reads `NaN check in the backward half: ...`.
    #[error("{}", run::in_half(.half, .error))]
    InHalf { half: run::Half, error: Box<Error> },
}

/// Traces `f`; `loc` is the user's call (which a panic inside `f` is reported at).
fn trace_closed<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<Traced, Error> {
    Ok(remat_trace::make_jaxpr_at(f, args, loc)?)
}

/// Traces anything the transformations accept (a closure, a `Checkpoint`, a `Jit`).
fn trace_fn<A: ArgTree, R: TensorTree, F: TraceFn<A::Traced, R>>(
    f: &F,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<Traced, Error> {
    Ok(remat_trace::trace_fn_at(f, args, loc)?)
}

fn leaf_avals<A: ArgTree>(args: &A) -> Vec<Aval> {
    let mut specs = Vec::new();
    args.specs("args", &mut specs);
    specs.into_iter().map(|(_, a)| a).collect()
}

/// Flattens concrete arguments (borrowed, not copied), checking every leaf is an array.
fn arg_values<A: ArgTree>(args: &A) -> Result<Vec<&Array>, Error> {
    let mut values = Vec::new();
    args.values(&mut values);
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.ok_or_else(|| {
                Error::Trace(TraceError {
                    location: ir::SourceInfo::unknown(),
                    message: format!("argument {i} is an abstract value; calling a function needs arrays"),
                })
            })
        })
        .collect()
}

/// `jax.jit(f)`: traced once per input signature, compiled to native code, cached.
pub fn jit<F>(f: F) -> Jit<F> {
    Jit { f, run: RunOptions::default(), cache: Cache::default() }
}

/// A function compiled per input signature; see [`jit`].
#[derive(Debug)]
pub struct Jit<F> {
    f: F,
    run: RunOptions,
    cache: Cache,
}

impl<F> Jit<F> {
    /// Runs with `backend` instead of native code.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.run.backend = backend;
        self
    }

    /// Compiles with these code-generator options (for example [`Options::cse`]: whether a
    /// checkpoint's recompute may merge with the forward pass).
    pub fn options(mut self, options: Options) -> Self {
        self.run.jit = options;
        self
    }

    /// What a call does about NaNs (by default, an argument holding one is an error).
    pub fn nans(mut self, nans: Nans) -> Self {
        self.run.nans = nans;
        self
    }

    /// Calls the function on concrete arguments and returns its flattened results. A
    /// panic inside the function while it is traced is an [`Error::Trace`] naming it.
    #[track_caller]
    pub fn call<A: ArgTree, R: TensorTree>(&self, args: &A) -> Result<Vec<Array>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.prepared(args, Location::caller())?.run_with(&arg_values(args)?, self.run.nans)
    }

    /// Like [`Jit::call`], writing the results into `outs` (for example the arrays an
    /// earlier call returned): a repeated native call allocates nothing.
    #[track_caller]
    pub fn call_into<A: ArgTree, R: TensorTree>(&self, args: &A, outs: &mut [Array]) -> Result<(), Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.prepared(args, Location::caller())?.run_into_with(&arg_values(args)?, outs, self.run.nans)
    }

    /// The program traced and compiled for `args`' signature, from the cache or built now.
    fn prepared<A: ArgTree, R: TensorTree>(
        &self,
        args: &A,
        loc: &'static Location<'static>,
    ) -> Result<Arc<Program>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.cache.get_or_build(leaf_avals(args), || {
            let traced = trace_fn(&self.f, args, loc)?;
            Program::new(traced.jaxpr, &self.run)
        })
    }

    /// How many input signatures have been traced and compiled.
    pub fn compiled_signatures(&self) -> usize {
        self.cache.len()
    }
}

/// `jax.grad(f)`: the gradient of a scalar function with respect to every flattened
/// argument (or those chosen with [`Grad::argnums`]), compiled per input signature.
/// [`Grad::call`] returns the gradients flattened; [`Grad::call_tree`] in the structure of
/// the arguments. `f` is a closure, a `fn`, or a [`Checkpoint`](trace::Checkpoint) itself.
pub fn grad<F>(f: F) -> Grad<F> {
    Grad::new(f, false)
}

/// `jax.value_and_grad(f)`: like [`grad`], returning the value first
/// ([`Grad::value_and_call_tree`] gives `(value, gradients in the arguments' structure)`).
pub fn value_and_grad<F>(f: F) -> Grad<F> {
    Grad::new(f, true)
}

/// A gradient function; see [`grad`] and [`value_and_grad`].
#[derive(Debug)]
pub struct Grad<F> {
    f: F,
    argnums: Option<Vec<usize>>,
    with_value: bool,
    run: RunOptions,
    cache: Cache,
}

impl<F> Grad<F> {
    /// Calls the gradient on concrete arguments and returns it in their structure: the
    /// gradient of a `(Array, Array)` is a `(Array, Array)`, of a `Vec<Array>` a
    /// `Vec<Array>`, of a `BTreeMap<String, Array>` the same map, of a
    /// [`pytree!`] struct the same struct (for a [`value_and_grad`], the value is left out:
    /// see [`Grad::value_and_call_tree`]). Not with [`Grad::argnums`] (the structure would
    /// have holes): use [`Grad::call`].
    #[track_caller]
    pub fn call_tree<A: GradTree, R: TensorTree>(&self, args: &A) -> Result<A::Grads, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        let mut flat = self.tree_call(args, Location::caller())?;
        if self.with_value && !flat.is_empty() {
            flat.remove(0);
        }
        unflatten(args, flat)
    }

    /// For a [`value_and_grad`]: the value, and the gradient in the arguments' structure
    /// (see [`Grad::call_tree`]). For a [`grad`], an error (there is no value).
    #[track_caller]
    pub fn value_and_call_tree<A: GradTree, R: TensorTree>(&self, args: &A) -> Result<(Array, A::Grads), Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        if !self.with_value {
            let message = "value_and_call_tree needs a value_and_grad (this is a grad); use call_tree";
            return Err(Error::Ad(AdError::Invalid(message.into())));
        }
        let mut flat = self.tree_call(args, Location::caller())?.into_iter();
        let value = flat.next().ok_or_else(|| internal("value_and_grad returned no value"))?;
        Ok((value, unflatten(args, flat.collect())?))
    }
}

/// An error of the facade's own bookkeeping (a result count that does not match).
fn internal(message: &str) -> Error {
    Error::Ad(AdError::Internal(message.into()))
}

/// `flat` (one array per leaf of `args`) in `args`' structure.
fn unflatten<A: GradTree>(args: &A, flat: Vec<Array>) -> Result<A::Grads, Error> {
    let n = flat.len();
    let mut it = flat.into_iter();
    match (args.unflatten(&mut it), it.next()) {
        (Some(tree), None) => Ok(tree),
        _ => Err(internal(&format!("{n} gradients do not fit the arguments' {} leaves", leaf_avals(args).len()))),
    }
}

impl<F> Grad<F> {
    fn new(f: F, with_value: bool) -> Grad<F> {
        Grad { f, argnums: None, with_value, run: RunOptions::default(), cache: Cache::default() }
    }

    /// [`Grad::call`] for `call_tree`, which needs every argument's gradient.
    fn tree_call<A: ArgTree, R: TensorTree>(
        &self,
        args: &A,
        loc: &'static Location<'static>,
    ) -> Result<Vec<Array>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        if self.argnums.is_some() {
            let message = "call_tree returns the gradient of every argument, in their structure; with argnums use call";
            return Err(Error::Ad(AdError::Invalid(message.into())));
        }
        self.prepared(args, loc)?.run_with(&arg_values(args)?, self.run.nans)
    }

    /// Differentiates with respect to these flattened arguments only.
    pub fn argnums(mut self, argnums: &[usize]) -> Self {
        self.argnums = Some(argnums.to_vec());
        self
    }

    /// Runs with `backend` instead of native code.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.run.backend = backend;
        self
    }

    /// Compiles with these code-generator options. The default CSE scope merges a
    /// checkpoint's recompute with the forward pass only when the planned peak does not
    /// grow; `Options { cse: CseScope::WithinCheckpoints, .. }` always recomputes what the
    /// policy says, `CseScope::AcrossCheckpoints` always merges it (XLA's behaviour on CPU).
    pub fn options(mut self, options: Options) -> Self {
        self.run.jit = options;
        self
    }

    /// What a call does about NaNs (by default, an argument holding one is an error; with
    /// [`Nans::Debug`], a NaN in the value or a gradient is traced to the equation of the
    /// gradient program that made it).
    pub fn nans(mut self, nans: Nans) -> Self {
        self.run.nans = nans;
        self
    }

    /// The gradient program (`(args) -> ([value,] grads)`) for arguments like `args`,
    /// closed over the constants the function uses.
    #[track_caller]
    pub fn jaxpr<A: ArgTree, R: TensorTree>(&self, args: &A) -> Result<ClosedJaxpr, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.jaxpr_at(args, Location::caller())
    }

    fn jaxpr_at<A: ArgTree, R: TensorTree>(
        &self,
        args: &A,
        loc: &'static Location<'static>,
    ) -> Result<ClosedJaxpr, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        let traced = trace_fn(&self.f, args, loc)?;
        let jaxpr = &traced.jaxpr.jaxpr;
        let argnums: Vec<usize> = match &self.argnums {
            Some(a) => a.clone(),
            None => (0..jaxpr.invars.len()).collect(),
        };
        let grad =
            if self.with_value { remat_ad::value_and_grad(jaxpr, &argnums)? } else { remat_ad::grad(jaxpr, &argnums)? };
        // The gradient program keeps the function's constvars, in order.
        Ok(ClosedJaxpr { jaxpr: Arc::new(grad), consts: traced.jaxpr.consts })
    }

    /// Calls the gradient on concrete arguments: `[value,] grads...`, flattened. A panic
    /// inside the function (while it is traced) or inside a user policy (while it is
    /// differentiated) is an error naming it.
    #[track_caller]
    pub fn call<A: ArgTree, R: TensorTree>(&self, args: &A) -> Result<Vec<Array>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.prepared(args, Location::caller())?.run_with(&arg_values(args)?, self.run.nans)
    }

    /// Like [`Grad::call`], writing `[value,] grads...` into `outs` (for example the arrays
    /// an earlier call returned): a training step that reuses its gradient arrays allocates
    /// nothing natively.
    #[track_caller]
    pub fn call_into<A: ArgTree, R: TensorTree>(&self, args: &A, outs: &mut [Array]) -> Result<(), Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.prepared(args, Location::caller())?.run_into_with(&arg_values(args)?, outs, self.run.nans)
    }

    /// The gradient program differentiated and compiled for `args`' signature, from the
    /// cache or built now.
    fn prepared<A: ArgTree, R: TensorTree>(
        &self,
        args: &A,
        loc: &'static Location<'static>,
    ) -> Result<Arc<Program>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        self.cache.get_or_build(leaf_avals(args), || Program::new(self.jaxpr_at(args, loc)?, &self.run))
    }
}

/// The memory plan of the scalar loss `f` for `budget`: what the forward half saves so
/// that the whole value-and-grad program's planned peak fits, recomputing the least
/// (`docs/planner.md`). Every float argument is differentiated.
///
/// ```
/// use remat::{named, Aval, Budget, DType, Tensor};
///
/// let f = |(w, x): (Tensor, Tensor)| (&x * &w).sin().sin().exp().sum();
/// let args = (named("w", Aval::new(DType::F32, vec![])), named("x", Aval::new(DType::F32, vec![1024])));
/// let no_remat = remat::plan(f, &args, Budget::bytes(usize::MAX)).unwrap();
/// assert_eq!(no_remat.recompute_flops, 0);
/// let tight = remat::plan(f, &args, Budget::bytes(no_remat.peak_bytes - 1)).unwrap();
/// assert!(tight.peak_bytes < no_remat.peak_bytes && tight.recompute_flops > 0);
/// ```
#[track_caller]
pub fn plan<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
    budget: Budget,
) -> Result<remat_plan::Plan, Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    Ok(remat_plan::plan(&traced.jaxpr, &traced.arg_names, budget, &remat_plan::PlanOptions::default())?)
}

/// `jax.ad_checkpoint.saved_residuals`: what the forward half of `f`'s vjp saves.
#[track_caller]
pub fn saved_residuals<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
) -> Result<Vec<Residual>, Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    Ok(remat_ad::saved_residuals(&traced.jaxpr.jaxpr, &traced.arg_names)?)
}

/// `jax.ad_checkpoint.print_saved_residuals`: the residual lines, in JAX's words.
#[track_caller]
pub fn saved_residuals_text<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
) -> Result<String, Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    Ok(remat_ad::print_saved_residuals(&traced.jaxpr.jaxpr, &traced.arg_names)?)
}

/// Prints [`saved_residuals_text`] to standard output, as JAX's function does.
#[track_caller]
pub fn print_saved_residuals<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<(), Error> {
    pretty::write_stdout(&saved_residuals_text(f, args)?);
    Ok(())
}

/// The forward and backward programs of `f`'s vjp as two strings.
#[track_caller]
pub fn fwd_bwd_strings<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
) -> Result<(String, String), Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    Ok(remat_ad::fwd_bwd_strings(&traced.jaxpr.jaxpr)?)
}

/// Prints the forward and backward programs side by side, fitted to the terminal.
#[track_caller]
pub fn print_fwd_bwd<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<(), Error> {
    let (fwd, bwd) = fwd_bwd_strings(f, args)?;
    pretty::write_stdout(&print_fwd_bwd_text(&fwd, &bwd));
    Ok(())
}

/// The residual ledger of `f`'s vjp at arguments like `args`: one row per saved residual
/// and where every byte of the planned peak goes ([`ledger`]), planned under the JIT's
/// default options.
#[track_caller]
pub fn explain<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<ledger::Ledger, Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    ledger::explain_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &traced.arg_names, &Options::default())
}

/// The README's Rust example, compiled and run as a doctest so it stays true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
