//! `jax.vjp`, `jax.jvp` and `jax.linearize` on a user's function: the outputs at concrete
//! arguments, and (for `vjp` and `linearize`) a callable that maps cotangents to gradients
//! (tangents to output tangents). The forward half runs when the function is called; the
//! callable's half is prepared (compiled, for the JIT) at its first call and kept.
//!
//! [`vjp_program`] keeps the older, inspect-only form: the two halves of the vjp at
//! abstract arguments, with what the forward half saves.

use std::panic::Location;
use std::sync::{Arc, OnceLock};

use remat_ir::{Array, Aval, ClosedJaxpr, Jaxpr};
use remat_jit::{Compiled, Options};

use crate::run::{Backend, Nans, Program, RunOptions};
use crate::{
    arg_values, leaf_avals, trace_fn, unflatten, AdError, ArgTree, Error, GradTree, Residual, TensorTree, TraceFn,
};

/// The forward and backward halves of `f`'s reverse-mode derivative at arguments like
/// `args` (abstract [`Aval`]s will do), with what the forward half saves. See [`vjp`] for
/// the callable form.
#[track_caller]
pub fn vjp_program<A: ArgTree, R: TensorTree>(f: impl TraceFn<A::Traced, R>, args: &A) -> Result<VjpProgram, Error> {
    vjp_program_at(&f, args, Location::caller())
}

fn vjp_program_at<A: ArgTree, R: TensorTree>(
    f: &impl TraceFn<A::Traced, R>,
    args: &A,
    loc: &'static Location<'static>,
) -> Result<VjpProgram, Error> {
    let traced = trace_fn(f, args, loc)?;
    let v = remat_ad::vjp(&traced.jaxpr.jaxpr, &traced.arg_names)?;
    Ok(VjpProgram { vjp: v, consts: traced.jaxpr.consts, arg_names: traced.arg_names })
}

/// See [`vjp_program`]; a [`VjpFn`] keeps one ([`VjpFn::program`]).
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

/// `jax.vjp(f, *args)`: `f`'s outputs at `args` (flattened), and the function that maps
/// cotangents of those outputs to the gradients, in `args`' structure. Both halves run
/// natively; [`vjp_with`] chooses the backend and NaN policy of both, [`VjpFn::backend`]
/// that of the backward half. `f` is a closure, a `fn`, or a
/// [`Checkpoint`](crate::trace::Checkpoint) itself.
///
/// ```
/// use remat::{Array, Tensor};
///
/// let x = Array::F32(ndarray::arr1(&[0.5f32, 1.0]).into_dyn());
/// let (outs, f_vjp) = remat::vjp(|x: Tensor| x.sin(), &x).unwrap();
/// let grad = f_vjp.call(&Array::F32(ndarray::arr1(&[1.0f32, 2.0]).into_dyn())).unwrap();
/// assert_eq!(outs[0].to_f64_vec(), [0.5f32.sin() as f64, 1.0f32.sin() as f64]);
/// assert!((grad.to_f64_vec()[1] - 2.0 * 1.0f64.cos()).abs() < 1e-6);
/// assert_eq!(f_vjp.residuals()[0].to_string().split(" from ").next(), Some("f32[2] output of cos"));
/// ```
#[track_caller]
pub fn vjp<'a, A: GradTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    args: &'a A,
) -> Result<(Vec<Array>, VjpFn<'a, A>), Error> {
    vjp_at(&f, args, &RunOptions::default(), Location::caller())
}

/// [`vjp`] with both halves run as `options` say.
#[track_caller]
pub fn vjp_with<'a, A: GradTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    args: &'a A,
    options: &RunOptions,
) -> Result<(Vec<Array>, VjpFn<'a, A>), Error> {
    vjp_at(&f, args, options, Location::caller())
}

fn vjp_at<'a, A: GradTree, R: TensorTree>(
    f: &impl TraceFn<A::Traced, R>,
    args: &'a A,
    options: &RunOptions,
    loc: &'static Location<'static>,
) -> Result<(Vec<Array>, VjpFn<'a, A>), Error> {
    let values = arg_values(args)?;
    let program = vjp_program_at(f, args, loc)?;
    let fwd = ClosedJaxpr { jaxpr: Arc::new(program.vjp.fwd.clone()), consts: program.consts.clone() };
    let mut outs = Program::new(fwd, options)?.run(&values)?;
    let residual_values = outs.split_off(program.vjp.num_outs.min(outs.len()));
    let f_vjp = VjpFn { program, residual_values, args, run: options.clone(), bwd: OnceLock::new() };
    Ok((outs, f_vjp))
}

/// The backward half of a [`vjp`], holding the residuals its forward half saved.
#[derive(Debug)]
pub struct VjpFn<'a, A> {
    program: VjpProgram,
    residual_values: Vec<Array>,
    /// The arguments, for the structure of the gradients.
    args: &'a A,
    run: RunOptions,
    /// The backward program, prepared at the first call.
    bwd: OnceLock<Program>,
}

impl<A: GradTree> VjpFn<'_, A> {
    /// Runs the backward half with `backend` (prepared again at the next call).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.run.backend = backend;
        self.bwd = OnceLock::new();
        self
    }

    /// Compiles the backward half with these code-generator options.
    pub fn options(mut self, options: Options) -> Self {
        self.run.jit = options;
        self.bwd = OnceLock::new();
        self
    }

    /// What a call does about NaNs in the cotangents and the backward half.
    pub fn nans(mut self, nans: Nans) -> Self {
        self.run.nans = nans;
        self
    }

    /// The vjp's two jaxprs and what the forward half saves.
    pub fn program(&self) -> &VjpProgram {
        &self.program
    }

    /// What the forward half saved, in JAX's words and order.
    pub fn residuals(&self) -> &[Residual] {
        self.program.residuals()
    }

    /// The values the forward half saved, in [`VjpFn::residuals`]' order.
    pub fn residual_values(&self) -> &[Array] {
        &self.residual_values
    }

    /// The gradients for `cotangents` (a tree with one array per output of the function,
    /// each of that output's type), in the structure of the arguments.
    pub fn call<C: ArgTree>(&self, cotangents: &C) -> Result<A::Grads, Error> {
        unflatten(self.args, self.call_flat(cotangents)?)
    }

    /// [`VjpFn::call`] with the gradients flattened, one per leaf of the arguments.
    pub fn call_flat<C: ArgTree>(&self, cotangents: &C) -> Result<Vec<Array>, Error> {
        let cts = arg_values(cotangents)?;
        let num_res = self.residual_values.len();
        check_types("cotangent", "output", &leaf_avals(cotangents), &self.program.bwd().in_avals()[num_res..])?;
        let bwd = match self.bwd.get() {
            Some(p) => p,
            None => {
                let p = Program::new(ClosedJaxpr::new(Arc::new(self.program.bwd().clone())), &self.run)?;
                self.bwd.get_or_init(|| p)
            }
        };
        let args: Vec<&Array> = self.residual_values.iter().chain(cts).collect();
        bwd.run_with(&args, self.run.nans)
    }
}

/// Checks `given` (the `what`s) against `want` (one per `of`), as JAX checks cotangents
/// and tangents: the same number, each of the same type.
fn check_types(what: &str, of: &str, given: &[Aval], want: &[Aval]) -> Result<(), Error> {
    let invalid = |m: String| Err(Error::Ad(AdError::Invalid(m)));
    if given.len() != want.len() {
        return invalid(format!("{} {what}s given for {} {of}s", given.len(), want.len()));
    }
    for (i, (g, w)) in given.iter().zip(want).enumerate() {
        if !g.same_type(w) {
            return invalid(format!("{what} {i} is {g} but {of} {i} is {w}"));
        }
    }
    Ok(())
}

/// `jax.jvp(f, primals, tangents)`: `f`'s outputs at `primals` and their tangents along
/// `tangents` (a tree like `primals`, each leaf of its primal's type), both flattened, run
/// natively ([`jvp_with`] chooses).
#[track_caller]
pub fn jvp<A: ArgTree, T: ArgTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    primals: &A,
    tangents: &T,
) -> Result<(Vec<Array>, Vec<Array>), Error> {
    jvp_at(&f, primals, tangents, &RunOptions::default(), Location::caller())
}

/// [`jvp`] run as `options` say.
#[track_caller]
pub fn jvp_with<A: ArgTree, T: ArgTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    primals: &A,
    tangents: &T,
    options: &RunOptions,
) -> Result<(Vec<Array>, Vec<Array>), Error> {
    jvp_at(&f, primals, tangents, options, Location::caller())
}

fn jvp_at<A: ArgTree, T: ArgTree, R: TensorTree>(
    f: &impl TraceFn<A::Traced, R>,
    primals: &A,
    tangents: &T,
    options: &RunOptions,
    loc: &'static Location<'static>,
) -> Result<(Vec<Array>, Vec<Array>), Error> {
    let primal_avals = leaf_avals(primals);
    check_types("tangent", "primal", &leaf_avals(tangents), &primal_avals)?;
    if let Some((i, a)) = primal_avals.iter().enumerate().find(|(_, a)| !a.dtype.is_float()) {
        return Err(Error::Ad(AdError::Invalid(format!(
            "jvp: primal {i} is {a}; tangents are only of real floating-point arguments"
        ))));
    }
    let mut values = arg_values(primals)?;
    values.extend(arg_values(tangents)?);
    let traced = trace_fn(f, primals, loc)?;
    let jvp = remat_ad::jvp(&traced.jaxpr.jaxpr)?;
    no_custom_lin(&jvp.jaxpr)?;
    let closed = ClosedJaxpr { jaxpr: Arc::new(jvp.jaxpr), consts: traced.jaxpr.consts };
    let mut outs = Program::new(closed, options)?.run(&values)?;
    let tangent_outs = outs.split_off(outs.len() / 2);
    Ok((outs, tangent_outs))
}

/// `jax.linearize(f, *primals)`: `f`'s outputs at `primals` (flattened), and the linear
/// function from tangents of the primals to tangents of the outputs, which runs only
/// the tangent half on the residuals the primal half saved. Run natively ([`linearize_with`]
/// chooses).
#[track_caller]
pub fn linearize<A: ArgTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    primals: &A,
) -> Result<(Vec<Array>, LinearFn), Error> {
    linearize_at(&f, primals, &RunOptions::default(), Location::caller())
}

/// [`linearize`] with both halves run as `options` say.
#[track_caller]
pub fn linearize_with<A: ArgTree, R: TensorTree>(
    f: impl TraceFn<A::Traced, R>,
    primals: &A,
    options: &RunOptions,
) -> Result<(Vec<Array>, LinearFn), Error> {
    linearize_at(&f, primals, options, Location::caller())
}

fn linearize_at<A: ArgTree, R: TensorTree>(
    f: &impl TraceFn<A::Traced, R>,
    primals: &A,
    options: &RunOptions,
    loc: &'static Location<'static>,
) -> Result<(Vec<Array>, LinearFn), Error> {
    let values = arg_values(primals)?;
    let traced = trace_fn(f, primals, loc)?;
    let lin = remat_ad::linearize(&traced.jaxpr.jaxpr)?;
    no_custom_lin(&lin.tangent)?;
    let num_outs = traced.jaxpr.jaxpr.outvars.len();
    let primal = ClosedJaxpr { jaxpr: Arc::new(lin.primal.clone()), consts: traced.jaxpr.consts };
    let mut outs = Program::new(primal, options)?.run(&values)?;
    let residual_values = outs.split_off(num_outs.min(outs.len()));
    let tangent = Program::new(ClosedJaxpr::new(Arc::new(lin.tangent.clone())), options)?;
    let in_avals = traced.jaxpr.jaxpr.in_avals();
    let out_avals = traced.jaxpr.jaxpr.out_avals();
    let f_jvp = LinearFn { lin, residual_values, tangent, in_avals, out_avals, nans: options.nans };
    Ok((outs, f_jvp))
}

/// The linear function of a [`linearize`]: tangents of the primals to tangents of the
/// outputs, on the residuals its primal half saved.
#[derive(Debug)]
pub struct LinearFn {
    lin: remat_ad::Linearized,
    residual_values: Vec<Array>,
    tangent: Program,
    in_avals: Vec<Aval>,
    out_avals: Vec<Aval>,
    nans: Nans,
}

impl LinearFn {
    /// The primal half (`(primals) -> (outputs, residuals)`) and the tangent half
    /// (`(residuals, tangents) -> (output tangents)`), over the float arguments and outputs.
    pub fn jaxprs(&self) -> (&Jaxpr, &Jaxpr) {
        (&self.lin.primal, &self.lin.tangent)
    }

    /// The values the primal half saved.
    pub fn residual_values(&self) -> &[Array] {
        &self.residual_values
    }

    /// The output tangents (flattened) for `tangents`, a tree like the primals.
    pub fn call<T: ArgTree>(&self, tangents: &T) -> Result<Vec<Array>, Error> {
        check_types("tangent", "primal", &leaf_avals(tangents), &self.in_avals)?;
        let given = arg_values(tangents)?;
        let mut args: Vec<&Array> = self.residual_values.iter().collect();
        args.extend(given.into_iter().zip(&self.lin.in_nonzeros).filter(|(_, &nz)| nz).map(|(t, _)| t));
        let mut nonzero = self.tangent.run_with(&args, self.nans)?.into_iter();
        self.out_avals
            .iter()
            .zip(&self.lin.out_nonzeros)
            .map(|(aval, &nz)| match nz {
                true => nonzero.next().ok_or_else(|| crate::internal("linearize: an output tangent is missing")),
                false => Ok(Array::zeros(aval)),
            })
            .collect()
    }
}

/// JAX's error for forward mode through a `custom_vjp` function: its tangent is a
/// `custom_lin` equation, which only reverse mode (its transpose, `bwd`) gives a meaning.
fn no_custom_lin(jaxpr: &Jaxpr) -> Result<(), Error> {
    let is_lin = |p: &remat_ir::Primitive| matches!(p, remat_ir::Primitive::CustomVjpCall { name, .. } if name == remat_ad::CUSTOM_LIN);
    for eqn in &jaxpr.eqns {
        if is_lin(&eqn.primitive) {
            let message = "can't apply forward-mode autodiff (jvp) to a custom_vjp function.";
            return Err(Error::Ad(AdError::Invalid(message.into())));
        }
        for sub in eqn.primitive.subjaxprs() {
            no_custom_lin(sub)?;
        }
    }
    Ok(())
}
