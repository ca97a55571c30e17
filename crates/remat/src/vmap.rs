//! `jax.vmap(f, in_axes, out_axes)` on closures.
//!
//! Inside a trace, [`Vmap::trace`] traces `f` on unbatched arguments in a frame of its own,
//! batches that jaxpr (`remat_ad::batch_jaxpr`, one batching rule per primitive) and
//! records the batched equations into the enclosing trace, so that the program prints as
//! `jax.make_jaxpr(jax.vmap(f))` does. At top level, [`Vmap::call`] traces, compiles
//! (once per input signature) and runs it. `Vmap` is a [`TraceFn`], so `jit(vmap(..))`,
//! `grad(vmap(..))` and `vmap(vmap(..))` compose.
//!
//! `in_axes` and `out_axes` are given per flattened leaf (`Some(axis)` or `None`, as in
//! JAX); a single entry applies to every leaf, as JAX's `in_axes=0`.

use std::panic::Location;
use std::sync::Arc;

use remat_ir::{Aval, ClosedJaxpr};
use remat_trace::{
    inline_jaxpr, numpy, rebuild_or_placeholders, record_trace_error, trace_subjaxpr, ArgTree, TensorTree, TraceFn,
};

use crate::run::{Cache, Program};
use crate::{arg_values, leaf_avals, trace_fn, Array, Backend, Error, RunOptions};

/// `jax.vmap(f, in_axes, out_axes)`: `f` mapped over a batch axis of its arguments, at
/// `in_axes[i]` of leaf `i` (`None`: not mapped), its results' batch axes at `out_axes`.
pub fn vmap<F>(f: F, in_axes: &[Option<usize>], out_axes: &[Option<usize>]) -> Vmap<F> {
    Vmap {
        f,
        in_axes: in_axes.to_vec(),
        out_axes: out_axes.to_vec(),
        run: RunOptions::default(),
        cache: Cache::default(),
    }
}

/// A batched function; see [`vmap`].
#[derive(Debug)]
pub struct Vmap<F> {
    f: F,
    in_axes: Vec<Option<usize>>,
    out_axes: Vec<Option<usize>>,
    run: RunOptions,
    cache: Cache,
}

/// `axes` for `n` leaves: one entry stands for all (`what` names them in the error).
fn per_leaf(axes: &[Option<usize>], n: usize, what: &str) -> Result<Vec<Option<usize>>, String> {
    match axes.len() {
        1 => Ok(vec![axes[0]; n]),
        k if k == n => Ok(axes.to_vec()),
        k => Err(format!("vmap: {what} has {k} entries for {n} leaves (give one per leaf, or one for all)")),
    }
}

/// The batch size and the unbatched avals of `avals` mapped at `axes`, or the error JAX
/// gives.
fn unbatched(avals: &[Aval], axes: &[Option<usize>]) -> Result<(usize, Vec<Aval>), String> {
    let mut size: Option<(usize, usize)> = None;
    let mut out = Vec::with_capacity(avals.len());
    for (i, (aval, ax)) in avals.iter().zip(axes).enumerate() {
        let Some(ax) = *ax else {
            out.push(aval.clone());
            continue;
        };
        if ax >= aval.rank() {
            return Err(format!("vmap: in_axes {ax} is out of range for argument leaf {i} of type {aval}"));
        }
        let n = aval.shape[ax];
        match size {
            Some((m, j)) if m != n => {
                return Err(format!(
                    "vmap got inconsistent sizes for the array axes to be mapped: leaf {j} has size {m} and leaf {i} \
                     has size {n} on its mapped axis"
                ))
            }
            _ => size = Some((n, i)),
        }
        let mut shape = aval.shape.clone();
        shape.remove(ax);
        out.push(Aval { shape, ..aval.clone() });
    }
    match size {
        Some((n, _)) => Ok((n, out)),
        None => Err("vmap must have at least one non-None value in in_axes".into()),
    }
}

impl<F> Vmap<F> {
    /// Runs with `backend` instead of native code (for [`Vmap::call`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.run.backend = backend;
        self
    }

    /// Inside a traced function: records the batched equations of `f` at `args` and
    /// returns its results (with their batch axes at `out_axes`). Errors (axes out of
    /// range, sizes that disagree, a primitive without a batching rule) are the trace's
    /// located errors.
    #[track_caller]
    pub fn trace<A: TensorTree, R: TensorTree>(&self, args: A) -> R
    where
        F: TraceFn<A, R>,
    {
        self.trace_at(args, Location::caller())
    }

    fn trace_at<A: TensorTree, R: TensorTree>(&self, args: A, loc: &'static Location<'static>) -> R
    where
        F: TraceFn<A, R>,
    {
        let leaves = args.leaves();
        let avals: Vec<Aval> = leaves.iter().map(|t| t.aval().clone()).collect();
        let prepared =
            per_leaf(&self.in_axes, leaves.len(), "in_axes").and_then(|axes| Ok((unbatched(&avals, &axes)?, axes)));
        let ((size, inner_avals), in_axes) = match prepared {
            Ok(p) => p,
            Err(message) => {
                record_trace_error(loc, message);
                // Trace on the given types only to have results of the right structure.
                let sub = trace_subjaxpr(&args, &avals, |a| self.f.call_traced(a, loc), "the vmapped closure", loc);
                return match sub {
                    Ok(sub) => rebuild_or_placeholders(&sub.out, None),
                    Err(out) => out,
                };
            }
        };
        let sub = match trace_subjaxpr(&args, &inner_avals, |a| self.f.call_traced(a, loc), "the vmapped closure", loc)
        {
            Ok(sub) => sub,
            Err(out) => return out,
        };
        let batched = per_leaf(&self.out_axes, sub.jaxpr.outvars.len(), "out_axes").and_then(|out_axes| {
            let in_dims: Vec<Option<usize>> =
                std::iter::repeat_n(None, sub.captured.len()).chain(in_axes.iter().copied()).collect();
            let closed = ClosedJaxpr::new(Arc::new(sub.jaxpr));
            remat_ad::batch_jaxpr(&closed, size, &in_dims, &out_axes).map_err(|e| e.to_string())
        });
        match batched {
            Ok(program) => {
                // Constants the batching rules made (JAX's `np.array([], 'int32')` start
                // indices) become the trace's constants, as JAX's do.
                let consts = program.consts.iter().map(|c| numpy::constant(c.clone()));
                let inputs: Vec<_> = consts.chain(sub.captured.iter().cloned()).chain(leaves).collect();
                rebuild_or_placeholders(&sub.out, inline_jaxpr(&program.jaxpr, &inputs, loc))
            }
            Err(message) => {
                record_trace_error(loc, message);
                rebuild_or_placeholders(&sub.out, None)
            }
        }
    }

    /// At top level: the batched function on concrete arguments, traced and compiled once
    /// per input signature; its results flattened.
    #[track_caller]
    pub fn call<A: ArgTree, R: TensorTree>(&self, args: &A) -> Result<Vec<Array>, Error>
    where
        F: TraceFn<A::Traced, R>,
    {
        let loc = Location::caller();
        let program: Arc<Program> = self.cache.get_or_build(leaf_avals(args), || {
            let traced = trace_fn(self, args, loc)?;
            Program::new(traced.jaxpr, &self.run)
        })?;
        program.run_with(&arg_values(args)?, self.run.nans)
    }
}

impl<A: TensorTree, R: TensorTree, F: TraceFn<A, R>> TraceFn<A, R> for Vmap<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.trace_at(args, loc)
    }
}

impl<A: TensorTree, R: TensorTree, F: TraceFn<A, R>> TraceFn<A, R> for &Vmap<F> {
    fn call_traced(&self, args: A, loc: &'static Location<'static>) -> R {
        self.trace_at(args, loc)
    }
}
