//! remat: JAX's tracing, autodiff and `jax.checkpoint` for Rust, compiled to native code.
//!
//! This crate is the thin public facade over the pipeline's crates: it re-exports the
//! tracer's API and adds the functions that act on a user's closure as a whole —
//! [`jit`], [`grad`], [`value_and_grad`], [`vjp`], [`saved_residuals`],
//! [`print_saved_residuals`] and [`print_fwd_bwd`]. Running a program, with its backend and
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

pub mod ledger;
pub mod pretty;
pub mod report;
pub mod run;

use std::panic::Location;
use std::sync::Arc;

pub use ndarray;
pub use pretty::{print_fwd_bwd_text, side_by_side};
/// The autodiff crate, for inspecting a jaxpr's vjp (`saved_residuals`, `fwd_bwd_strings`)
/// when the program is a jaxpr rather than a closure.
pub use remat_ad as ad;
pub use remat_ad::{register_policy, set_policy_names, AdError, PolicyNames, Residual, ResidualKind, Saveability};
pub use remat_interp::EvalError;
pub use remat_ir::{self as ir, bf16, f16, Array, Aval, ClosedJaxpr, DType, Jaxpr, Policy, PrngKey};
pub use remat_jit::{Compiled, CseScope, JitError, Options, Plan};
pub use remat_json as json;
pub use remat_trace::{
    self as trace, checkpoint, checkpoint_name, function_scope, lax, make_jaxpr, named, nn, numpy, random,
    recursive_checkpoint, scan, ArgTree, Tensor, TensorTree, TraceError, Traced,
};
pub use run::{Backend, Nans};

use run::{Cache, Program, RunOptions};

/// Anything that can go wrong between a user's closure and its results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("tracing failed: {0}")]
    Trace(#[from] TraceError),
    #[error("differentiation failed: {0}")]
    Ad(#[from] AdError),
    #[error("compilation or native run failed: {0}")]
    Jit(#[from] JitError),
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
        F: Fn(A::Traced) -> R,
    {
        self.prepared(args, Location::caller())?.run_with(&arg_values(args)?, self.run.nans)
    }

    /// Like [`Jit::call`], writing the results into `outs` (for example the arrays an
    /// earlier call returned): a repeated native call allocates nothing.
    #[track_caller]
    pub fn call_into<A: ArgTree, R: TensorTree>(&self, args: &A, outs: &mut [Array]) -> Result<(), Error>
    where
        F: Fn(A::Traced) -> R,
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
        F: Fn(A::Traced) -> R,
    {
        self.cache.get_or_build(leaf_avals(args), || {
            let traced = trace_closed(&self.f, args, loc)?;
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
pub fn grad<F>(f: F) -> Grad<F> {
    Grad::new(f, false)
}

/// `jax.value_and_grad(f)`: like [`grad`], returning the value first.
pub fn value_and_grad<F>(f: F) -> Grad<F> {
    Grad::new(f, true)
}

/// A gradient function; see [`grad`].
#[derive(Debug)]
pub struct Grad<F> {
    f: F,
    argnums: Option<Vec<usize>>,
    with_value: bool,
    run: RunOptions,
    cache: Cache,
}

impl<F> Grad<F> {
    fn new(f: F, with_value: bool) -> Grad<F> {
        Grad { f, argnums: None, with_value, run: RunOptions::default(), cache: Cache::default() }
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
        F: Fn(A::Traced) -> R,
    {
        self.jaxpr_at(args, Location::caller())
    }

    fn jaxpr_at<A: ArgTree, R: TensorTree>(
        &self,
        args: &A,
        loc: &'static Location<'static>,
    ) -> Result<ClosedJaxpr, Error>
    where
        F: Fn(A::Traced) -> R,
    {
        let traced = trace_closed(&self.f, args, loc)?;
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
        F: Fn(A::Traced) -> R,
    {
        self.prepared(args, Location::caller())?.run_with(&arg_values(args)?, self.run.nans)
    }

    /// Like [`Grad::call`], writing `[value,] grads...` into `outs` (for example the arrays
    /// an earlier call returned): a training step that reuses its gradient arrays allocates
    /// nothing natively.
    #[track_caller]
    pub fn call_into<A: ArgTree, R: TensorTree>(&self, args: &A, outs: &mut [Array]) -> Result<(), Error>
    where
        F: Fn(A::Traced) -> R,
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
        F: Fn(A::Traced) -> R,
    {
        self.cache.get_or_build(leaf_avals(args), || Program::new(self.jaxpr_at(args, loc)?, &self.run))
    }
}

/// The forward and backward halves of `f`'s reverse-mode derivative at arguments like
/// `args`, with what the forward half saves.
#[track_caller]
pub fn vjp<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<VjpProgram, Error> {
    let traced = trace_closed(f, args, Location::caller())?;
    let v = remat_ad::vjp(&traced.jaxpr.jaxpr, &traced.arg_names)?;
    Ok(VjpProgram { vjp: v, consts: traced.jaxpr.consts, arg_names: traced.arg_names })
}

/// See [`vjp`].
#[derive(Clone, Debug)]
pub struct VjpProgram {
    pub vjp: remat_ad::Vjp,
    /// Values of the forward half's constvars (the constants the function uses).
    pub consts: Vec<Array>,
    pub arg_names: Vec<String>,
}

impl VjpProgram {
    /// The forward jaxpr: `(primals) -> (outputs, residuals)`.
    pub fn fwd(&self) -> &Jaxpr {
        &self.vjp.fwd
    }

    /// The backward jaxpr: `(residuals, cotangents) -> (one gradient per input)`.
    pub fn bwd(&self) -> &Jaxpr {
        &self.vjp.bwd
    }

    /// What the forward half saves, in JAX's order.
    pub fn residuals(&self) -> &[Residual] {
        &self.vjp.residuals
    }

    /// Both halves compiled to native code (the forward half with its constants).
    pub fn compile(&self) -> Result<(Compiled, Compiled), Error> {
        Ok((remat_jit::compile_with_consts(&self.vjp.fwd, &self.consts)?, remat_jit::compile(&self.vjp.bwd)?))
    }
}

/// `jax.ad_checkpoint.saved_residuals`: what the forward half of `f`'s vjp saves.
#[track_caller]
pub fn saved_residuals<A: ArgTree, R: TensorTree>(
    f: impl FnOnce(A::Traced) -> R,
    args: &A,
) -> Result<Vec<Residual>, Error> {
    Ok(vjp(f, args)?.vjp.residuals)
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
