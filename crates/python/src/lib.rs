//! `remat._remat`, the native module of the `remat` Python package: a program JAX traced
//! in Python (its jaxpr text, printed with each equation's source, and its constants'
//! bytes), read into remat's IR and handed to the facade: saved residuals, the ledger, the
//! memory planner, the report, and native code to run.
//!
//! The Python layer (`python/remat/`) traces, flattens pytrees and presents; this module
//! converts at the edge and holds no algorithm (the facade's architecture invariant, one
//! crate further out). Errors are `remat.RematError`, a `ValueError`, with the facade's
//! words; long work runs with the GIL released, on a thread of its own, so that Ctrl-C in
//! Python interrupts the wait (`interruptible`). A panic of remat's (a bug) is a
//! `RematError` too, with its message (`guarded`), never an exception outside Python's
//! `Exception`.

mod convert;
mod plan;
mod rules;

use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList};

use remat::ledger::Ledger;
use remat::report::{Choice, Figure, Report};
use remat::run::{Program as Runnable, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Jaxpr, Nans, Options};

use convert::{array_in, ArgIn};

create_exception!(_remat, RematError, PyValueError, "An error of remat: bad input, or what remat cannot do, in words.");

/// A facade error (or any error with a `Display`) as a `RematError`.
pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    RematError::new_err(e.to_string())
}

/// A panic's payload as a `RematError`: remat panicked, with the panic's message.
fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    err(format!("remat panicked: {msg} (a bug: please report it with the program)"))
}

/// Runs `work`, a panic in it becoming a `RematError` (PyO3 would raise a
/// `PanicException`, which is no `Exception`).
pub(crate) fn guarded<T>(work: impl FnOnce() -> T) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(panic_error)
}

/// Runs `work` on a thread of its own with the GIL released, checking for Ctrl-C (and other
/// signals Python handles) every 50 ms: an interrupt raises `KeyboardInterrupt` at once
/// and leaves the thread to finish on its own (its result is dropped). A panic in `work`
/// is a `RematError`.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    // The receiver is read with the GIL released, from this thread only.
    let rx = std::sync::Mutex::new(rx);
    std::thread::Builder::new()
        .name("remat".into())
        .spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
        })
        .map_err(|e| err(format!("cannot start a thread: {e}")))?;
    loop {
        let wait = || rx.lock().map_err(|_| ()).map(|r| r.recv_timeout(std::time::Duration::from_millis(50)));
        match py.detach(wait).unwrap_or(Err(std::sync::mpsc::RecvTimeoutError::Disconnected)) {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(payload)) => return Err(panic_error(payload)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(err(
                    "remat's worker thread stopped without a result (a bug: please report it with the program)",
                ))
            }
        }
    }
}

/// A program JAX traced: the jaxpr read from JAX's text, its constants, and the names of
/// its arguments (their pytree paths).
#[pyclass(frozen, module = "remat._remat")]
struct Program {
    closed: ClosedJaxpr,
    arg_names: Vec<String>,
}

/// Reads a jaxpr text (`ClosedJaxpr.pretty_print(source_info=True)`), verifies it and
/// closes it over `consts` (one `(dtype, shape, buffer)` per constvar).
#[pyfunction]
fn parse(text: &str, file: &str, consts: Vec<ArgIn>, arg_names: Vec<String>) -> PyResult<Program> {
    let jaxpr = guarded(|| remat::ir::parse_jaxpr(text, file))?.map_err(|e| err(format!("{file}: {e}")))?;
    guarded(|| remat::ir::verify::verify(&jaxpr))?
        .map_err(|e| err(format!("{file}: the jaxpr is not well-typed:\n{e}")))?;
    if consts.len() != jaxpr.constvars.len() {
        return Err(err(format!("{} constants for the {} constvars of {file}", consts.len(), jaxpr.constvars.len())));
    }
    let consts: Vec<Array> = consts.iter().map(array_in).collect::<PyResult<_>>()?;
    for (i, (c, &v)) in consts.iter().zip(&jaxpr.constvars).enumerate() {
        if !c.aval().same_type(jaxpr.aval(v)) {
            return Err(err(format!("constant {i} is {} but constvar {i} is {}", c.aval(), jaxpr.aval(v))));
        }
    }
    Ok(Program { closed: ClosedJaxpr { jaxpr: Arc::new(jaxpr), consts }, arg_names })
}

#[pymethods]
impl Program {
    /// The program as JAX prints it.
    fn text(&self) -> String {
        remat::ir::pp_jaxpr(&self.closed.jaxpr)
    }

    /// `(dtype, shape)` of each argument.
    fn in_avals(&self) -> Vec<(String, Vec<usize>)> {
        self.closed.jaxpr.in_avals().iter().map(|a| (a.dtype.numpy_name().to_string(), a.shape.clone())).collect()
    }

    /// `(dtype, shape)` of each output.
    fn out_avals(&self) -> Vec<(String, Vec<usize>)> {
        self.closed.jaxpr.out_avals().iter().map(|a| (a.dtype.numpy_name().to_string(), a.shape.clone())).collect()
    }

    /// The notes of the custom rules known only by name (their call_jaxpr is differentiated).
    fn notes(&self) -> Vec<String> {
        remat::ad::custom_rule_notes(&self.closed.jaxpr)
    }

    /// What the vjp saves, in JAX's order: one dict per residual (`line` in JAX's words,
    /// `aval`, `bytes`, `kind`, `what`, `source`).
    fn saved_residuals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let (jaxpr, names) = (self.closed.jaxpr.clone(), self.arg_names.clone());
        let residuals = interruptible(py, move || remat::ad::saved_residuals(&jaxpr, &names))?.map_err(err)?;
        let rows: Vec<Bound<'py, PyDict>> =
            residuals.iter().map(|r| convert::residual(py, r)).collect::<PyResult<_>>()?;
        PyList::new(py, rows)
    }

    /// The residual ledger of the vjp as written, under a policy word (`dots`, `names:a+b`,
    /// as `remat explain --policy`), or of the planner's plan for `budget` bytes.
    #[pyo3(signature = (policy=None, budget=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        policy: Option<String>,
        budget: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let choice = choice_of(policy.as_deref(), budget, &self.closed.jaxpr)?;
        let (closed, names) = (self.closed.clone(), self.arg_names.clone());
        let ledger = interruptible(py, move || ledger_of(&closed, &names, &choice))?.map_err(err)?;
        convert::ledger(py, &ledger)
    }

    /// The HTML report of the vjp, one side per choice (policy words and budgets, as
    /// `remat report --compare` takes them), or one figure as SVG.
    #[pyo3(signature = (title, sides, figure=None))]
    fn report(&self, py: Python<'_>, title: String, sides: Vec<String>, figure: Option<String>) -> PyResult<String> {
        let mut choices = Vec::new();
        for s in &sides {
            let c = Choice::parse(s).map_err(err)?;
            c.check_names(&self.closed.jaxpr).map_err(err)?;
            choices.push(c);
        }
        if choices.is_empty() {
            choices.push(Choice::AsWritten);
        }
        let figure = match figure.as_deref() {
            None => None,
            Some("memory") => Some(Figure::Memory),
            Some("split") => Some(Figure::Split),
            Some("frontier") => Some(Figure::Frontier),
            Some(other) => return Err(err(format!("unknown figure `{other}`: memory, split or frontier"))),
        };
        let (closed, names) = (self.closed.clone(), self.arg_names.clone());
        interruptible(py, move || -> Result<String, String> {
            let report =
                Report::new(&title, &closed, &names, &choices, &Options::default()).map_err(|e| e.to_string())?;
            match figure {
                Some(f) => report.figure_svg(f).map_err(|e| e.to_string()),
                None => Ok(report.html()),
            }
        })?
        .map_err(err)
    }

    /// The program `jax.value_and_grad(f, argnums)` runs, differentiated by remat:
    /// `(primals) -> (value, grads of argnums)`.
    fn value_and_grad(&self, argnums: Vec<usize>) -> PyResult<Program> {
        let (_, program) =
            guarded(|| remat::ad::value_and_grad_vjp(&self.closed.jaxpr, &argnums, &self.arg_names))?.map_err(err)?;
        Ok(Program {
            closed: ClosedJaxpr { jaxpr: Arc::new(program), consts: self.closed.consts.clone() },
            arg_names: self.arg_names.clone(),
        })
    }

    /// The program compiled to native code by remat's JIT (or kept for the reference
    /// interpreter, `backend="interp"`).
    #[pyo3(signature = (backend="jit"))]
    fn compile(&self, py: Python<'_>, backend: &str) -> PyResult<Executable> {
        let backend = match backend {
            "jit" => Backend::Jit,
            "interp" => Backend::Interp,
            other => return Err(err(format!("unknown backend `{other}`: jit or interp"))),
        };
        let closed = self.closed.clone();
        let options = RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
        let program = interruptible(py, move || Runnable::new(closed, &options))?.map_err(err)?;
        Ok(Executable {
            program: Arc::new(program),
            in_avals: self.closed.jaxpr.in_avals(),
            out_avals: self.closed.jaxpr.out_avals(),
            inputs: Kept::default(),
            outputs: Kept::default(),
        })
    }

    /// The memory planner's plans of the program (a scalar loss): see `plan.rs`.
    #[pyo3(signature = (argnums=None, names_only=false, host_budget=None, applicable=true))]
    fn planner(
        &self,
        py: Python<'_>,
        argnums: Option<Vec<usize>>,
        names_only: bool,
        host_budget: Option<usize>,
        applicable: bool,
    ) -> PyResult<plan::Planner> {
        plan::Planner::new(py, &self.closed, &self.arg_names, argnums, names_only, host_budget, applicable)
    }
}

/// What `explain` explains.
fn choice_of(policy: Option<&str>, budget: Option<usize>, jaxpr: &Jaxpr) -> PyResult<Choice> {
    match (policy, budget) {
        (Some(_), Some(_)) => Err(err("give a policy or a budget, not both")),
        (Some(p), None) => {
            let c = Choice::parse_policy(p).map_err(err)?;
            c.check_names(jaxpr).map_err(err)?;
            Ok(c)
        }
        (None, Some(b)) => Ok(Choice::Budget(b)),
        (None, None) => Ok(Choice::AsWritten),
    }
}

fn ledger_of(closed: &ClosedJaxpr, names: &[String], choice: &Choice) -> Result<Ledger, remat::Error> {
    let options = Options::default();
    let consts = &closed.consts;
    match choice {
        Choice::AsWritten => remat::ledger::explain_jaxpr(&closed.jaxpr, consts, names, &options),
        Choice::Policy(p) => {
            remat::ledger::explain_jaxpr(&remat::ad::with_policy(&closed.jaxpr, p)?, consts, names, &options)
        }
        Choice::Budget(bytes) => {
            let planner = remat::plan::Planner::new(closed, names, &remat::plan::PlanOptions::default())
                .map_err(remat::Error::from)?;
            let plan = planner.plan(remat::plan::Budget::bytes(*bytes)).map_err(remat::Error::from)?;
            remat::ledger::explain_plan(&plan, consts, &options)
        }
    }
}

/// A program ready to run: native code (or the interpreter).
#[pyclass(frozen, module = "remat._remat")]
struct Executable {
    program: Arc<Runnable>,
    in_avals: Vec<remat::Aval>,
    out_avals: Vec<remat::Aval>,
    /// The arguments' arrays of the last call, written over by the next.
    inputs: Kept,
    /// The arrays the last call's results were written into (`Program::run_into`), copied
    /// out into Python's own bytearrays.
    outputs: Kept,
}

/// Arrays a call leaves for the next call of its signature to write over: fresh 8 MB
/// arrays cost a page fault per 4 KiB on every call, most of a call's time. Empty while a
/// call holds them; a concurrent call makes its own.
#[derive(Default)]
struct Kept(std::sync::Mutex<Vec<Array>>);

impl Kept {
    /// The kept arrays, or new ones of `avals`.
    fn take(&self, avals: &[remat::Aval]) -> Vec<Array> {
        let kept = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        if kept.len() == avals.len() {
            kept
        } else {
            avals.iter().map(Array::zeros).collect()
        }
    }

    fn put(&self, arrays: Vec<Array>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = arrays;
    }
}

/// `buffer`'s bytes into `a`, which has the argument's type: one copy into the array's
/// memory for the plain number types, read through bytes for the others (bool, bf16, f16,
/// keys).
fn fill(py: Python<'_>, a: &mut Array, buffer: &PyBuffer<u8>, i: usize, want: &remat::Aval) -> PyResult<()> {
    let bytes = a.len() * want.dtype.size_in_bytes();
    if buffer.len_bytes() != bytes {
        return Err(err(format!("argument {i} ({want}): {} bytes, which needs {bytes}", buffer.len_bytes())));
    }
    fn pod<T: bytemuck::Pod>(
        py: Python<'_>,
        a: &mut remat::ndarray::ArrayD<T>,
        buffer: &PyBuffer<u8>,
    ) -> PyResult<bool> {
        match a.as_slice_mut() {
            Some(slice) => buffer.copy_to_slice(py, bytemuck::cast_slice_mut(slice)).map(|()| true),
            None => Ok(false),
        }
    }
    let copied = match a {
        Array::F32(x) => pod(py, x, buffer)?,
        Array::F64(x) => pod(py, x, buffer)?,
        Array::I8(x) => pod(py, x, buffer)?,
        Array::I16(x) => pod(py, x, buffer)?,
        Array::I32(x) => pod(py, x, buffer)?,
        Array::I64(x) => pod(py, x, buffer)?,
        Array::U8(x) => pod(py, x, buffer)?,
        Array::U32(x) => pod(py, x, buffer)?,
        Array::BF16(_) | Array::F16(_) | Array::Bool(_) | Array::Key(_) | Array::C64(_) | Array::C128(_) => false,
    };
    if !copied {
        *a = Array::from_le_bytes(want.dtype, &want.shape, &buffer.to_vec(py)?)
            .map_err(|e| err(format!("argument {i} ({want}): {e}")))?;
    }
    Ok(())
}

#[pymethods]
impl Executable {
    /// Runs on one C-contiguous byte buffer per argument,
    /// read as the argument the program takes (the caller's signature cache has matched
    /// dtypes and shapes; the byte counts are checked here), and returns each output's
    /// bytes (`out_avals` says their dtypes and shapes). The GIL is released while the
    /// program runs.
    fn run_raw<'py>(&self, py: Python<'py>, args: Vec<PyBuffer<u8>>) -> PyResult<Vec<Bound<'py, PyByteArray>>> {
        if args.len() != self.in_avals.len() {
            return Err(err(format!("{} arguments for a program of {}", args.len(), self.in_avals.len())));
        }
        let mut arrays = self.inputs.take(&self.in_avals);
        for (i, ((buffer, want), a)) in args.iter().zip(&self.in_avals).zip(arrays.iter_mut()).enumerate() {
            if !buffer.is_c_contiguous() {
                return Err(err(format!("argument {i}'s buffer is not C-contiguous")));
            }
            fill(py, a, buffer, i, want)?;
        }
        let mut outs = self.outputs.take(&self.out_avals);
        let program = Arc::clone(&self.program);
        let (ran, arrays, outs) = py.detach(move || {
            let ran = guarded(|| program.run_into(&arrays.iter().collect::<Vec<_>>(), &mut outs));
            (ran, arrays, outs)
        });
        self.inputs.put(arrays);
        ran?.map_err(err)?;
        let results = outs
            .iter()
            .map(|o| {
                let len = o.len() * o.dtype().size_in_bytes();
                PyByteArray::new_with(py, len, |buf| o.write_le_bytes(buf).map_err(err))
            })
            .collect();
        self.outputs.put(outs);
        results
    }

    /// Each output's NumPy dtype name (`key<fry>` for a key) and shape.
    #[getter]
    fn out_avals(&self) -> Vec<(String, Vec<usize>)> {
        self.out_avals.iter().map(|a| (a.dtype.numpy_name().to_string(), a.shape.clone())).collect()
    }
}

/// Bytes from `12GiB`, `1.5GB`, `64MiB` or `1000000` (as `remat plan --budget` reads them).
#[pyfunction]
fn parse_budget(text: &str) -> PyResult<usize> {
    guarded(|| text.parse::<remat::Budget>().map(remat::Budget::bytes_value))?.map_err(err)
}

#[pymodule]
fn _remat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RematError", m.py().get_type::<RematError>())?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(parse_budget, m)?)?;
    m.add_function(wrap_pyfunction!(rules::register_jvp_rule, m)?)?;
    m.add_function(wrap_pyfunction!(rules::register_vjp_rule, m)?)?;
    m.add_class::<Program>()?;
    m.add_class::<Executable>()?;
    m.add_class::<plan::Planner>()?;
    Ok(())
}
