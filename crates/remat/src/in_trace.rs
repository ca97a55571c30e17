//! `grad` and `value_and_grad` called inside a traced function: JAX's
//! `jax.value_and_grad(loss)(params, x, y)` in a training step, `jax.vmap(jax.grad(f))`.
//!
//! The closure is traced into a jaxpr of its own inside the enclosing trace
//! (`remat_trace::trace_subjaxpr`), differentiated by `remat_ad::value_and_grad_in_trace`
//! (only `argnums`; what the closure captures is constant, as for JAX), and the
//! value-and-grad program is recorded into the enclosing trace equation by equation
//! (`remat_trace::inline_jaxpr`), so the step prints as JAX's `make_jaxpr` prints it: the
//! forward equations, then the backward ones, inline. Errors are the enclosing trace's
//! located errors; the results are then placeholders.

use std::panic::Location;

use remat_trace::{inline_jaxpr, placeholder, record_trace_error, trace_subjaxpr, Tensor, TensorTree, TraceFn};

use crate::{Aval, DType, Grad};

impl<F> Grad<F> {
    /// Inside a traced function: records the gradient of `f` at `args` (a tree of
    /// tensors) into the trace and returns it in `args`' structure (for a
    /// [`value_and_grad`](crate::value_and_grad), the value is left out: see
    /// [`Grad::value_and_trace_tree`]). Not with [`Grad::argnums`]: use [`Grad::trace`].
    #[track_caller]
    pub fn trace_tree<A: TensorTree, R: TensorTree>(&self, args: &A) -> A
    where
        F: TraceFn<A, R>,
    {
        let loc = Location::caller();
        let grads = self.tree_grads(args, loc);
        args.rebuild(&mut grads.into_iter())
    }

    /// Inside a traced function, for a [`value_and_grad`](crate::value_and_grad): the value
    /// and the gradient in `args`' structure (see [`Grad::trace_tree`]).
    #[track_caller]
    pub fn value_and_trace_tree<A: TensorTree, R: TensorTree>(&self, args: &A) -> (Tensor, A)
    where
        F: TraceFn<A, R>,
    {
        let loc = Location::caller();
        let (value, grads) = self.recorded(args, loc);
        if !self.with_value {
            record_trace_error(
                loc,
                "value_and_trace_tree needs a value_and_grad (this is a grad); use trace_tree".into(),
            );
        }
        (value, args.rebuild(&mut grads.into_iter()))
    }

    /// Inside a traced function: records the gradient of `f` at `args` and returns it
    /// flattened, `[value,] grads...`, one gradient per leaf in [`Grad::argnums`] (every
    /// leaf by default).
    #[track_caller]
    pub fn trace<A: TensorTree, R: TensorTree>(&self, args: &A) -> Vec<Tensor>
    where
        F: TraceFn<A, R>,
    {
        let (value, grads) = self.recorded(args, Location::caller());
        if self.with_value {
            std::iter::once(value).chain(grads).collect()
        } else {
            grads
        }
    }

    fn tree_grads<A: TensorTree, R: TensorTree>(&self, args: &A, loc: &'static Location<'static>) -> Vec<Tensor>
    where
        F: TraceFn<A, R>,
    {
        if self.argnums.is_some() {
            let message =
                "trace_tree returns the gradient of every argument, in their structure; with argnums use trace";
            record_trace_error(loc, message.into());
        }
        self.recorded(args, loc).1
    }

    /// The value and the gradients of the leaves in `argnums`, recorded into the enclosing
    /// trace (placeholders after an error, which is recorded).
    fn recorded<A: TensorTree, R: TensorTree>(&self, args: &A, loc: &'static Location<'static>) -> (Tensor, Vec<Tensor>)
    where
        F: TraceFn<A, R>,
    {
        let leaves = args.leaves();
        let argnums: Vec<usize> = self.argnums.clone().unwrap_or_else(|| (0..leaves.len()).collect());
        let fallback = |out: Option<&Tensor>| {
            let v = out.map_or_else(|| Aval::scalar(DType::F32), |t| t.aval().clone());
            let grads =
                argnums.iter().map(|&i| leaves.get(i).map_or_else(|| placeholder(&v), |t| placeholder(t.aval())));
            (placeholder(&v), grads.collect())
        };
        let avals: Vec<_> = leaves.iter().map(|t| t.aval().clone()).collect();
        let sub = match trace_subjaxpr(args, &avals, |a| self.f.call_traced(a, loc), "the differentiated closure", loc)
        {
            Ok(sub) => sub,
            Err(out) => return fallback(out.leaves().first()),
        };
        let nc = sub.captured.len();
        let shifted: Vec<usize> = argnums.iter().map(|&i| i + nc).collect();
        let program = match remat_ad::value_and_grad_in_trace(&sub.jaxpr, &shifted) {
            Ok(p) => p,
            Err(e) => {
                let e = match e {
                    // Argument numbers as the user counts them (captures are not arguments).
                    remat_ad::AdError::Invalid(m) if m.starts_with("argnum") => {
                        format!("argnum out of range for {} arguments", leaves.len())
                    }
                    e => e.to_string(),
                };
                record_trace_error(loc, format!("grad: {e}"));
                return fallback(sub.out.leaves().first());
            }
        };
        let inputs: Vec<Tensor> = sub.captured.into_iter().chain(leaves.iter().cloned()).collect();
        match inline_jaxpr(&program, &inputs, loc) {
            Some(mut results) if results.len() == argnums.len() + 1 => {
                let grads = results.split_off(1);
                (results.remove(0), grads)
            }
            _ => fallback(sub.out.leaves().first()),
        }
    }
}
