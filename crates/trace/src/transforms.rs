//! Tracing entry points and the higher-order primitives: `make_jaxpr`, `jit`,
//! `checkpoint` (records `remat2`), `checkpoint_name` (records `name`) and `scan`.
//!
//! Each traces the user's function in a frame of its own and records one equation in the
//! enclosing frame. Tensors the function captures from outside become leading inputs of
//! the inner jaxpr (`scan`'s `num_consts`), as in JAX.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use remat_ir::{pp_jaxpr, Aval, ClosedJaxpr, Policy, Primitive};

use crate::tensor::Tensor;
use crate::trace::{bind, current_frame, pop_frame, push_frame, record_error, source_info, Operand, TraceError};
use crate::tree::{ArgTree, TensorTree};

/// A traced function: its closed jaxpr and the names of its flattened arguments.
#[derive(Clone, Debug)]
pub struct Traced {
    pub jaxpr: ClosedJaxpr,
    /// One name per flattened argument, as JAX names them (`params[0][1]`, `x`).
    pub arg_names: Vec<String>,
}

impl fmt::Display for Traced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pp_jaxpr(&self.jaxpr.jaxpr))
    }
}

/// Traces `f` on abstract values shaped like `args` and returns its jaxpr, as
/// `jax.make_jaxpr(f)(*args)` does. Shape and dtype errors inside `f` are returned as a
/// [`TraceError`] naming the line of `f` where they happened.
#[track_caller]
pub fn make_jaxpr<A: ArgTree, R: TensorTree>(f: impl FnOnce(A::Traced) -> R, args: &A) -> Result<Traced, TraceError> {
    let loc = Location::caller();
    if current_frame().is_some() {
        return Err(TraceError {
            location: source_info(loc),
            message: "make_jaxpr cannot be called while another function is being traced".into(),
        });
    }
    let mut specs = Vec::new();
    args.specs("args", &mut specs);
    let avals: Vec<Aval> = specs.iter().map(|(_, a)| a.clone()).collect();
    let (guard, inputs) = push_frame(&avals);
    let traced_args = args.build(&mut inputs.into_iter());
    let out = f(traced_args);
    let finished = pop_frame(guard, &out.leaves(), loc)?;
    Ok(Traced {
        jaxpr: ClosedJaxpr { jaxpr: Arc::new(finished.jaxpr), consts: finished.consts },
        arg_names: specs.into_iter().map(|(n, _)| n).collect(),
    })
}

/// The body of a call traced in its own frame: the inner jaxpr, and the operands to pass
/// (captured tensors first, then the arguments).
struct Body<R> {
    jaxpr: remat_ir::Jaxpr,
    operands: Vec<Operand>,
    out: R,
}

fn trace_body<A: TensorTree, R: TensorTree>(
    f: impl FnOnce(A) -> R,
    args: &A,
    in_avals: &[Aval],
    loc: &'static Location<'static>,
) -> Option<Body<R>> {
    let (guard, inner) = push_frame(in_avals);
    let inner_args = args.rebuild(&mut inner.into_iter());
    let out = f(inner_args);
    let finished = pop_frame(guard, &out.leaves(), loc).ok()?;
    let operands = finished.captured.into_iter().map(Operand::Tensor).collect();
    Some(Body { jaxpr: finished.jaxpr, operands, out })
}

fn placeholders<R: TensorTree>(template: &R) -> R {
    template.rebuild(&mut template.leaves().into_iter().map(|t| Tensor::placeholder(t.aval().clone())))
}

/// Records `prim` over `operands` and returns `template` rebuilt with its results.
fn bind_call<R: TensorTree>(prim: Primitive, operands: &[Operand], template: &R, loc: &'static Location<'static>) -> R {
    let results = bind(prim, operands, false, loc);
    if results.len() != template.leaves().len() {
        return placeholders(template);
    }
    template.rebuild(&mut results.into_iter())
}

/// `jax.jit(f)`: inside a trace, records a `jit[name=... jaxpr=...]` call.
pub fn jit<F>(f: F) -> Jit<F> {
    Jit { f, name: None }
}

/// A function to be called as a named `jit` equation. See [`jit`].
#[derive(Clone, Debug)]
pub struct Jit<F> {
    f: F,
    name: Option<String>,
}

impl<F> Jit<F> {
    /// The name JAX takes from the Python function (`jit[name=relu ...]`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Calls the function, recording one `jit` equation.
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
    {
        self.call_at(args, Location::caller())
    }

    pub(crate) fn call_at<A: TensorTree, R: TensorTree>(&self, args: A, loc: &'static Location<'static>) -> R
    where
        F: Fn(A) -> R,
    {
        let leaves = args.leaves();
        let avals: Vec<Aval> = leaves.iter().map(|t| t.aval().clone()).collect();
        let Some(mut body) = trace_body(&self.f, &args, &avals, loc) else {
            return placeholders(&(self.f)(args));
        };
        body.operands.extend(leaves.into_iter().map(Operand::Tensor));
        let name = self.name.clone().unwrap_or_else(|| "jit".into());
        let prim = Primitive::Jit { name, jaxpr: ClosedJaxpr::new(Arc::new(body.jaxpr)) };
        bind_call(prim, &body.operands, &body.out, loc)
    }
}

/// `jax.checkpoint(f)`: inside a trace, records a `remat2` call whose policy decides what
/// its linearization may save. The default policy (`None`) saves nothing.
pub fn checkpoint<F>(f: F) -> Checkpoint<F> {
    Checkpoint { f, policy: None, prevent_cse: true }
}

/// A function to be called as a `remat2` equation. See [`checkpoint`].
#[derive(Clone, Debug)]
pub struct Checkpoint<F> {
    f: F,
    policy: Option<Policy>,
    prevent_cse: bool,
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

    /// Calls the function, recording one `remat2` equation.
    #[track_caller]
    pub fn call<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: Fn(A) -> R,
    {
        let loc = Location::caller();
        let leaves = args.leaves();
        let avals: Vec<Aval> = leaves.iter().map(|t| t.aval().clone()).collect();
        let Some(mut body) = trace_body(&self.f, &args, &avals, loc) else {
            return placeholders(&(self.f)(args));
        };
        body.operands.extend(leaves.into_iter().map(Operand::Tensor));
        let prim = Primitive::Remat2 {
            jaxpr: Arc::new(body.jaxpr),
            prevent_cse: self.prevent_cse,
            differentiated: false,
            policy: self.policy.clone(),
        };
        bind_call(prim, &body.operands, &body.out, loc)
    }
}

/// `checkpoint_name(x, name)`: names a value for remat policies (records `name[name=...]`).
#[track_caller]
pub fn checkpoint_name(x: &Tensor, name: &str) -> Tensor {
    bind(Primitive::Name { name: name.to_string() }, &[x.into()], x.is_weak(), Location::caller()).remove(0)
}

/// `jax.lax.scan(body, init, xs)`: runs `body(carry, x) -> (carry, y)` over the leading
/// axis of every leaf of `xs`, returning the final carry and the stacked `y`s. Records one
/// `scan` equation; tensors `body` captures become the scan's consts.
#[track_caller]
pub fn scan<C, X, Y>(body: impl Fn(C, X) -> (C, Y), init: C, xs: X) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    scan_impl(body, init, xs, false, Location::caller())
}

/// [`scan`] from the last element of `xs` to the first (`reverse=True`).
#[track_caller]
pub fn scan_reverse<C, X, Y>(body: impl Fn(C, X) -> (C, Y), init: C, xs: X) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    scan_impl(body, init, xs, true, Location::caller())
}

fn scan_impl<C, X, Y>(
    body: impl Fn(C, X) -> (C, Y),
    init: C,
    xs: X,
    reverse: bool,
    loc: &'static Location<'static>,
) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    let carry_leaves = init.leaves();
    let x_leaves = xs.leaves();
    let Some(length) = x_leaves.first().and_then(|x| x.shape().first().copied()) else {
        record_error(loc, "scan needs at least one scanned-over array with a leading axis".into());
        return failed(&body, init, &xs);
    };
    if let Some(bad) = x_leaves.iter().find(|x| x.shape().first() != Some(&length)) {
        record_error(loc, format!("scan: every scanned-over array needs leading axis {length}, found {}", bad.aval()));
        return failed(&body, init, &xs);
    }
    let mut in_avals: Vec<Aval> = carry_leaves.iter().map(|t| t.aval().clone()).collect();
    in_avals.extend(x_leaves.iter().map(|x| Aval::new(x.dtype(), x.shape()[1..].to_vec())));
    let args = (init, xs);
    let f = |(c, x): (C, X)| {
        let (c2, y) = body(c, x);
        (c2, y)
    };
    let Some(traced) = trace_body(f, &args, &in_avals, loc) else {
        let (init, xs) = args;
        return failed(&body, init, &xs);
    };
    let (carry_out, _) = &traced.out;
    for (i, (cin, cout)) in carry_leaves.iter().zip(carry_out.leaves()).enumerate() {
        if cin.aval() != cout.aval() {
            record_error(
                loc,
                format!("scan: carry {i} enters the body as {} but leaves it as {}", cin.aval(), cout.aval()),
            );
            let (init, _) = args;
            let y = placeholders(&traced.out.1);
            return (init, y);
        }
    }
    let num_consts = traced.operands.len();
    let mut operands = traced.operands;
    operands.extend(carry_leaves.iter().cloned().map(Operand::Tensor));
    operands.extend(x_leaves.into_iter().map(Operand::Tensor));
    let prim = Primitive::Scan {
        jaxpr: ClosedJaxpr::new(Arc::new(traced.jaxpr)),
        length,
        reverse,
        num_consts,
        num_carry: carry_leaves.len(),
        unroll: 1,
    };
    // The body's results are (carry, y); the scan returns (carry, stacked y).
    let stacked_template = {
        let (c, y) = &traced.out;
        let ys: Vec<Tensor> = y
            .leaves()
            .iter()
            .map(|t| {
                let mut shape = vec![length];
                shape.extend_from_slice(t.shape());
                Tensor::placeholder(Aval::new(t.dtype(), shape))
            })
            .collect();
        (c.rebuild(&mut c.leaves().into_iter()), y.rebuild(&mut ys.into_iter()))
    };
    bind_call(prim, &operands, &stacked_template, loc)
}

/// After a recorded error, a `(carry, y)` of the right types: the body runs on placeholder
/// slices (operations are no-ops once an error is recorded) only to build `y`'s structure.
fn failed<C: TensorTree, X: TensorTree, Y: TensorTree>(body: &impl Fn(C, X) -> (C, Y), init: C, xs: &X) -> (C, Y) {
    let sliced = xs.leaves().into_iter().map(|x| {
        let shape = x.shape().get(1..).map(<[usize]>::to_vec).unwrap_or_default();
        Tensor::placeholder(Aval::new(x.dtype(), shape))
    });
    let x = xs.rebuild(&mut sliced.collect::<Vec<_>>().into_iter());
    let (_, y) = body(placeholders(&init), x);
    (init, y)
}
