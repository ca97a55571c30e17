//! The memory planner for Python: a program's plans, evaluated once (with the GIL
//! released), then asked for budgets and for the frontier.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use remat::plan::{Budget, Method, NamesPolicy, PlanOptions};
use remat::ClosedJaxpr;

use crate::{convert, err, interruptible};

/// A program's evaluated plans (`remat::plan::Planner`).
#[pyclass(frozen, module = "remat._remat")]
pub(crate) struct Planner {
    inner: Arc<remat::plan::Planner>,
}

impl Planner {
    pub(crate) fn new(
        py: Python<'_>,
        closed: &ClosedJaxpr,
        arg_names: &[String],
        argnums: Option<Vec<usize>>,
        names_only: bool,
        host_budget: Option<usize>,
        applicable: bool,
    ) -> PyResult<Planner> {
        let options = PlanOptions { argnums, names_only, host_budget, applicable, ..PlanOptions::default() };
        let (closed, names) = (closed.clone(), arg_names.to_vec());
        let inner = interruptible(py, move || remat::plan::Planner::new(&closed, &names, &options))?.map_err(err)?;
        Ok(Planner { inner: Arc::new(inner) })
    }
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::Exhaustive => "exhaustive",
        Method::Greedy => "greedy",
        Method::Names => "names",
        Method::NamesGreedy => "names_greedy",
    }
}

fn names_dict<'py>(py: Python<'py>, n: &NamesPolicy) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("saved", n.saved().to_vec())?;
    d.set_item("offloaded", n.offloaded().to_vec())?;
    d.set_item("jax_policy", n.jax_call())?;
    Ok(d)
}

#[pymethods]
impl Planner {
    /// How the plans were searched: `exhaustive` (optimal), `greedy` (a heuristic) or
    /// `names` (every policy over the program's names).
    fn method(&self) -> &'static str {
        method_name(self.inner.method())
    }

    /// How many plans were evaluated exactly.
    fn evaluated(&self) -> usize {
        self.inner.evaluated()
    }

    /// The program's `checkpoint_name`s, and with `applicable` the planner's names.
    fn names(&self) -> Vec<String> {
        self.inner.names().to_vec()
    }

    /// The names the planner gave the function's values: `(name, path, output)`, the path
    /// locating the equation that makes the value through the inlined `jit`s and
    /// checkpoints of the function as traced.
    fn auto_names(&self) -> Vec<(String, Vec<usize>, usize)> {
        self.inner.auto_names().iter().map(|n| (n.name.clone(), n.path.clone(), n.output)).collect()
    }

    /// The Pareto frontier of peak bytes against recompute FLOPs, one dict per plan.
    fn frontier<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let points: Vec<Bound<'py, PyDict>> = self
            .inner
            .frontier()
            .iter()
            .map(|p| {
                let d = PyDict::new(py);
                d.set_item("peak_bytes", p.peak_bytes)?;
                d.set_item("recompute_flops", p.recompute_flops)?;
                d.set_item("residual_bytes", p.residual_bytes)?;
                d.set_item("recomputed", p.recomputed)?;
                d.set_item("rewrite", p.rewrite.clone())?;
                d.set_item("offloaded", p.offloaded)?;
                d.set_item("host_bytes", p.host_bytes)?;
                d.set_item("names", p.names.as_ref().map(|n| names_dict(py, n)).transpose()?)?;
                Ok(d)
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, points)
    }

    /// Every plan evaluated, in the order evaluated (the frontier's and the rest), one
    /// dict per plan (as `frontier`), with its index for `plan_at`.
    fn points<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let points: Vec<Bound<'py, PyDict>> = self
            .inner
            .points()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let d = PyDict::new(py);
                d.set_item("index", i)?;
                d.set_item("peak_bytes", p.peak_bytes)?;
                d.set_item("recompute_flops", p.recompute_flops)?;
                d.set_item("residual_bytes", p.residual_bytes)?;
                d.set_item("rewrite", p.rewrite.clone())?;
                Ok(d)
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, points)
    }

    /// The plan of the `index`th evaluated point, as `plan` gives a chosen one.
    fn plan_at<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.plan_of_point(index, 0).map_err(err)?;
        plan_dict(py, &p)
    }

    /// JAX's built-in policies on the same axes.
    fn builtins<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let points: Vec<Bound<'py, PyDict>> = self
            .inner
            .builtins()
            .iter()
            .map(|b| {
                let d = PyDict::new(py);
                d.set_item("policy", b.policy.clone())?;
                d.set_item("peak_bytes", b.peak_bytes)?;
                d.set_item("recompute_flops", b.recompute_flops)?;
                Ok(d)
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, points)
    }

    /// The plan for `budget` bytes: its numbers, what it saves (JAX's residual lines),
    /// recomputes and offloads, and (a names-only plan) the JAX policy it is.
    fn plan<'py>(&self, py: Python<'py>, budget: usize) -> PyResult<Bound<'py, PyDict>> {
        let p = self.inner.plan(Budget::bytes(budget)).map_err(err)?;
        plan_dict(py, &p)
    }
}

/// A plan as a dict of plain values.
fn plan_dict<'py>(py: Python<'py>, p: &remat::plan::Plan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("budget", p.budget)?;
    d.set_item("peak_bytes", p.peak_bytes)?;
    d.set_item("recompute_flops", p.recompute_flops)?;
    d.set_item("residual_bytes", p.residual_bytes)?;
    let saved: Vec<Bound<'py, PyDict>> = p.saved.iter().map(|r| convert::residual(py, r)).collect::<PyResult<_>>()?;
    d.set_item("saved", saved)?;
    d.set_item("recomputed", p.recomputed.clone())?;
    d.set_item("offloaded", p.offloaded.clone())?;
    d.set_item("host_bytes", p.host_bytes)?;
    d.set_item("names", p.names.as_ref().map(|n| names_dict(py, n)).transpose()?)?;
    d.set_item("jax_policy", p.jax_policy())?;
    let segments: Option<Vec<(usize, usize, &str)>> =
        p.segments.as_ref().map(|s| s.iter().map(|&(a, e, keep)| (a, e, keep.words())).collect());
    d.set_item("segments", segments)?;
    d.set_item("rewrite", p.recomputed.first().filter(|_| p.segments.is_some()).cloned())?;
    d.set_item("method", method_name(p.method))?;
    d.set_item("program", remat::ir::pp_jaxpr(&p.program))?;
    // A sharded program's bytes are one device's (docs/sharding.md).
    d.set_item("per_device", remat::is_sharded(&p.program))?;
    Ok(d)
}
