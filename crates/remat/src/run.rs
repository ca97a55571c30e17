//! Running a program: the one place that turns a closed jaxpr, its arguments and the
//! caller's choices (backend, NaN policy, the JIT's options) into results.
//!
//! [`Program`] runs one jaxpr (compiled once for [`Backend::Jit`]); [`VjpRunner`] runs the
//! forward half of a jaxpr's vjp and then its backward half on the residuals and the
//! cotangents, as `remat grad` does. The facade's [`jit`](crate::jit) and
//! [`grad`](crate::grad) keep one [`Program`] per input signature in this module's cache.
//!
//! What NaNs do is decided here and nowhere else: an argument (or cotangent) holding one is
//! an error unless [`Nans::Propagate`]; with [`Nans::Debug`] the first equation whose
//! result holds a NaN is an error naming it, whether or not the NaN reaches a result
//! (JAX's `jax_debug_nans`; [`Nans::DebugInfs`] also infinities). The interpreter checks
//! each equation as it goes; the JIT runs a checked variant of the program that returns
//! every equation's results, checked in program order (docs/jit.md, "NaN debugging").
//! Errors are structured ([`Error::Nan`], [`Error::NanCotangent`], [`Error::InHalf`], ...) so
//! that a caller such as the CLI can word them with what it knows (a file's name).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use remat_interp::EvalError;
use remat_ir::{Array, Atom, Aval, ClosedJaxpr, Jaxpr};
use remat_jit::{Compiled, JitError, Options};

use crate::Error;

/// What a call does about NaNs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nans {
    /// An argument holding a NaN is an error naming the argument and the element
    /// (`NaN check: argument 1 holds NaN at [3, 0]`): one pass over the arguments per call.
    #[default]
    RejectArguments,
    /// JAX's behaviour: NaNs flow through the arithmetic, unchecked.
    Propagate,
    /// JAX's `jax_debug_nans`: arguments are checked, and the first equation whose result
    /// holds a NaN that no operand held is an error naming it (`NaN check: equation 4 (log
    /// at src/model.rs:12:9): result 0 holds the first NaN, at [3]: ...`), also when the NaN
    /// never reaches a result (masked by a `select_n`). The JIT runs a checked variant that
    /// keeps every equation's results; an equation that calls a body (`scan`, `cond`, a
    /// call) is then named inside its body by the reference interpreter.
    Debug,
    /// [`Nans::Debug`] and JAX's `jax_debug_infs` together: an equation whose result holds
    /// an infinity that no operand held (`result 0 holds the first inf, at []: ...`) is an
    /// error too. Arguments may hold infinities.
    DebugInfs,
}

impl Nans {
    /// Whether each equation's results are checked ([`Nans::Debug`], [`Nans::DebugInfs`]).
    pub fn checks_equations(self) -> bool {
        matches!(self, Nans::Debug | Nans::DebugInfs)
    }
}

/// How a program runs: natively (the default) or with the reference interpreter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    #[default]
    Jit,
    Interp,
}

/// Everything a caller chooses about running a program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    pub backend: Backend,
    pub nans: Nans,
    /// The code generator's options for [`Backend::Jit`] (for example the CSE scope).
    pub jit: Options,
}

/// Unless `nans` lets them through, the first argument holding a NaN is an error:
/// [`Error::Nan`] with [`EvalError::NanArgument`] (its index and the element).
pub fn check_arguments(args: &[&Array], nans: Nans) -> Result<(), Error> {
    match first_nan(args, nans) {
        Some((index, position)) => Err(Error::Nan(EvalError::NanArgument { index, position })),
        None => Ok(()),
    }
}

/// Unless `nans` lets them through, the first cotangent holding a NaN is an error:
/// [`Error::NanCotangent`].
pub fn check_cotangents(cotangents: &[&Array], nans: Nans) -> Result<(), Error> {
    match first_nan(cotangents, nans) {
        Some((index, position)) => Err(Error::NanCotangent { index, position }),
        None => Ok(()),
    }
}

fn first_nan(arrays: &[&Array], nans: Nans) -> Option<(usize, Vec<usize>)> {
    match nans {
        Nans::Propagate => None,
        Nans::RejectArguments | Nans::Debug | Nans::DebugInfs => Array::first_nan_among(arrays.iter().copied()),
    }
}

/// A closed jaxpr ready to run: compiled to native code for [`Backend::Jit`], kept for the
/// interpreter otherwise.
#[derive(Debug)]
pub struct Program {
    closed: ClosedJaxpr,
    /// The native code, for [`Backend::Jit`].
    native: Option<Box<Compiled>>,
    /// For [`Backend::Jit`] under [`Nans::Debug`]: the checked variant, compiled at its
    /// first use (`checked_variant`).
    checked: OnceLock<Compiled>,
    jit: Options,
    nans: Nans,
}

impl Program {
    /// Prepares `closed` for `options.backend` (compiling it, for the JIT). Its runs treat
    /// NaNs as `options.nans` says.
    pub fn new(closed: ClosedJaxpr, options: &RunOptions) -> Result<Program, Error> {
        let native = match options.backend {
            Backend::Jit => {
                Some(Box::new(remat_jit::compile_with_options(&closed.jaxpr, &closed.consts, &options.jit)?))
            }
            Backend::Interp => None,
        };
        Ok(Program { closed, native, checked: OnceLock::new(), jit: options.jit.clone(), nans: options.nans })
    }

    /// The program as given.
    pub fn jaxpr(&self) -> &ClosedJaxpr {
        &self.closed
    }

    /// The native code, for [`Backend::Jit`]: `Compiled::run` checks no values, so a timed
    /// loop can call it without this module's NaN checks.
    pub fn compiled(&self) -> Option<&Compiled> {
        self.native.as_deref()
    }

    /// Runs the program on `args` (checked against the NaN policy first) and returns fresh
    /// results.
    pub fn run(&self, args: &[&Array]) -> Result<Vec<Array>, Error> {
        self.run_with(args, self.nans)
    }

    /// Runs writing into `outs`, which must have the program's output types (natively
    /// nothing is allocated; the interpreter computes fresh arrays and moves them in).
    pub fn run_into(&self, args: &[&Array], outs: &mut [Array]) -> Result<(), Error> {
        self.run_into_with(args, outs, self.nans)
    }

    /// [`Program::run`] under `nans` rather than the policy it was prepared with (the
    /// facade's functions take theirs at each call).
    pub(crate) fn run_with(&self, args: &[&Array], nans: Nans) -> Result<Vec<Array>, Error> {
        check_arguments(args, nans)?;
        self.evaluate(args, nans)
    }

    /// [`Program::run_into`] under `nans`.
    pub(crate) fn run_into_with(&self, args: &[&Array], outs: &mut [Array], nans: Nans) -> Result<(), Error> {
        check_arguments(args, nans)?;
        if let (Some(c), false) = (&self.native, nans.checks_equations()) {
            return Ok(c.run_into(args, outs)?);
        }
        let results = self.evaluate(args, nans)?;
        let expected = self.closed.jaxpr.out_avals();
        if outs.len() != expected.len() {
            return Err(JitError::OutCount { expected: expected.len(), given: outs.len() }.into());
        }
        for (index, (o, a)) in outs.iter().zip(&expected).enumerate() {
            if o.dtype() != a.dtype || o.shape() != a.shape.as_slice() {
                let given = o.aval().to_string();
                return Err(JitError::OutType { index, expected: a.clone(), given }.into());
            }
        }
        outs.iter_mut().zip(results).for_each(|(o, r)| *o = r);
        Ok(())
    }

    /// Runs on arguments already checked; with [`Nans::Debug`], every equation's results
    /// are checked too.
    fn evaluate(&self, args: &[&Array], nans: Nans) -> Result<Vec<Array>, Error> {
        let infs = nans == Nans::DebugInfs;
        match (&self.native, nans.checks_equations()) {
            (Some(c), false) => Ok(c.run(args)?),
            (None, false) => Ok(remat_interp::eval_closed(&self.closed, &owned(args))?),
            (Some(_), true) => self.run_checked_variant(args, infs),
            (None, true) => {
                let (jaxpr, consts) = (&self.closed.jaxpr, &self.closed.consts);
                remat_interp::eval_jaxpr_checking(jaxpr, consts, &owned(args), infs).map_err(nan_or_eval)
            }
        }
    }

    /// The JIT under [`Nans::Debug`]: the checked variant returns the outputs and then
    /// every equation's results, and the first equation that made a NaN (or an infinity)
    /// is found among them by the interpreter's rule (`remat_interp::produced_nan`). An
    /// equation that calls a body is located inside it by the interpreter, when the
    /// interpreter makes the same NaN.
    fn run_checked_variant(&self, args: &[&Array], infs: bool) -> Result<Vec<Array>, Error> {
        let checked = match self.checked.get() {
            Some(c) => c,
            None => {
                let jaxpr = every_result_an_output(&self.closed.jaxpr);
                let compiled = remat_jit::compile_with_options(&jaxpr, &self.closed.consts, &self.jit)?;
                self.checked.get_or_init(|| compiled)
            }
        };
        let mut values = checked.run(args)?;
        let jaxpr = &self.closed.jaxpr;
        let extra = values.split_off(jaxpr.outvars.len().min(values.len()));
        // The value of each variable the checked run returned: arguments and results.
        let mut env: Vec<Option<&Array>> = vec![None; jaxpr.vars.len()];
        for (&v, &a) in jaxpr.invars.iter().zip(args) {
            env[v.index()] = Some(a);
        }
        let placeholder = Array::zeros(&Aval::new(remat_ir::DType::Bool, vec![]));
        let mut next = 0;
        for (index, eqn) in jaxpr.eqns.iter().enumerate() {
            let results = &extra[next..next + eqn.outvars.len()];
            next += eqn.outvars.len();
            let operands: Vec<&Array> = eqn
                .invars
                .iter()
                .map(|a| match a {
                    Atom::Var(v) => env[v.index()].unwrap_or(&placeholder),
                    Atom::Lit(_) => &placeholder,
                })
                .collect();
            if let Some(error) = remat_interp::produced_nan(jaxpr, eqn, &operands, results, infs) {
                if !eqn.primitive.subjaxprs().is_empty() {
                    // Inside the body, if the interpreter makes it too.
                    let consts = &self.closed.consts;
                    if let Err(e) = remat_interp::eval_jaxpr_checking(jaxpr, consts, &owned(args), infs) {
                        return Err(nan_or_eval(e));
                    }
                }
                let location = eqn.source.clone();
                let primitive = eqn.primitive.name();
                return Err(Error::Nan(EvalError::Equation { index, primitive, location, error: Box::new(error) }));
            }
            for (&v, r) in eqn.outvars.iter().zip(results) {
                env[v.index()] = Some(r);
            }
        }
        Ok(values)
    }
}

/// `jaxpr` with every equation's results appended to its outputs, equation by equation:
/// the program the JIT runs under [`Nans::Debug`], so that no value is fused away unseen.
fn every_result_an_output(jaxpr: &Jaxpr) -> Jaxpr {
    let mut out = jaxpr.clone();
    for eqn in &jaxpr.eqns {
        for &v in &eqn.outvars {
            out.vars[v.index()].dropped = false;
            out.outvars.push(Atom::Var(v));
        }
    }
    out
}

/// An error of a checked evaluation: a located NaN, or an evaluation error.
fn nan_or_eval(e: EvalError) -> Error {
    if remat_interp::is_nan_error(&e) {
        Error::Nan(e)
    } else {
        Error::Eval(e)
    }
}

fn owned(args: &[&Array]) -> Vec<Array> {
    args.iter().map(|a| (*a).clone()).collect()
}

/// One half of a vjp, as [`Error::InHalf`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    /// `(primals) -> (outputs, residuals)`.
    Forward,
    /// `(residuals, cotangents) -> (one gradient per input)`.
    Backward,
}

impl fmt::Display for Half {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Half::Forward => "forward",
            Half::Backward => "backward",
        })
    }
}

/// [`Error::InHalf`] in words: a NaN check reads `NaN check in the backward half: ...`.
pub(crate) fn in_half(half: &Half, error: &Error) -> String {
    match error {
        Error::Nan(e) => format!("NaN check in the {half} half: {e}"),
        Error::Trace(_)
        | Error::Ad(_)
        | Error::Jit(_)
        | Error::Plan(_)
        | Error::Eval(_)
        | Error::NanCotangent { .. }
        | Error::InHalf { .. } => format!("in the {half} half: {error}"),
    }
}

/// The results of a [`VjpRunner`] run.
#[derive(Clone, Debug, PartialEq)]
pub struct VjpResults {
    /// The program's outputs, from the forward half.
    pub outputs: Vec<Array>,
    /// One gradient per input, from the backward half.
    pub grads: Vec<Array>,
}

/// The vjp of a closed jaxpr, both halves ready to run: the forward half at the primals,
/// then the backward half on its residuals and the cotangents.
#[derive(Debug)]
pub struct VjpRunner {
    fwd: Program,
    bwd: Program,
    num_outs: usize,
    nans: Nans,
}

impl VjpRunner {
    /// Differentiates `closed` (`remat_ad::vjp`) and prepares both halves for
    /// `options.backend`; the forward half keeps `closed`'s constants.
    pub fn new(closed: &ClosedJaxpr, options: &RunOptions) -> Result<VjpRunner, Error> {
        let v = remat_ad::vjp(&closed.jaxpr, &[])?;
        let fwd = Program::new(ClosedJaxpr { jaxpr: Arc::new(v.fwd), consts: closed.consts.clone() }, options)?;
        let bwd = Program::new(ClosedJaxpr::new(Arc::new(v.bwd)), options)?;
        Ok(VjpRunner { fwd, bwd, num_outs: v.num_outs, nans: options.nans })
    }

    /// Runs both halves: the outputs at `args` and the gradients for `cotangents` (one per
    /// output). Arguments and cotangents are checked against the NaN policy first; an error
    /// of either half's run (a located NaN included) is [`Error::InHalf`].
    pub fn run(&self, args: &[&Array], cotangents: &[&Array]) -> Result<VjpResults, Error> {
        check_arguments(args, self.nans)?;
        check_cotangents(cotangents, self.nans)?;
        let in_half = |half| move |error| Error::InHalf { half, error: Box::new(error) };
        let mut outputs = self.fwd.evaluate(args, self.nans).map_err(in_half(Half::Forward))?;
        let residuals = outputs.split_off(self.num_outs.min(outputs.len()));
        let bwd_args: Vec<&Array> = residuals.iter().chain(cotangents.iter().copied()).collect();
        let grads = self.bwd.evaluate(&bwd_args, self.nans).map_err(in_half(Half::Backward))?;
        Ok(VjpResults { outputs, grads })
    }
}

/// A per-signature cache of prepared programs.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    programs: Mutex<HashMap<Vec<Aval>, Arc<Program>>>,
}

impl Cache {
    /// The program for `avals`, from the cache or built by `build` now.
    pub(crate) fn get_or_build(
        &self,
        avals: Vec<Aval>,
        build: impl FnOnce() -> Result<Program, Error>,
    ) -> Result<Arc<Program>, Error> {
        if let Some(p) = self.programs.lock().ok().and_then(|m| m.get(&avals).cloned()) {
            return Ok(p);
        }
        let p = Arc::new(build()?);
        if let Ok(mut m) = self.programs.lock() {
            m.insert(avals, p.clone());
        }
        Ok(p)
    }

    pub(crate) fn len(&self) -> usize {
        self.programs.lock().map(|m| m.len()).unwrap_or(0)
    }
}
