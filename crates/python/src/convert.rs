//! Values across the edge: arrays as `(dtype, shape, buffer)` triples (a NumPy array's
//! bytes, C order; the Python layer makes them with `memoryview(...).cast('B')`), results
//! as dicts and lists of plain Python values.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use remat::{Array, DType, Residual};

use crate::err;

/// One array from Python: its NumPy dtype name (`float32`, `bfloat16`, `key<fry>`), its
/// shape, and a buffer of its bytes.
#[derive(FromPyObject)]
pub(crate) struct ArgIn(String, Vec<usize>, PyBuffer<u8>);

pub(crate) fn array_in(a: &ArgIn) -> PyResult<Array> {
    let ArgIn(dtype, shape, buffer) = a;
    let dtype =
        DType::from_numpy_name(dtype).ok_or_else(|| err(format!("dtype `{dtype}` is not one remat computes with")))?;
    if !buffer.is_c_contiguous() {
        return Err(err("an array's buffer is not C-contiguous (the Python layer passes np.ascontiguousarray)"));
    }
    let bytes = Python::attach(|py| buffer.to_vec(py))?;
    Array::from_le_bytes(dtype, shape, &bytes).map_err(err)
}

/// A residual as JAX's `saved_residuals` says it, with its bytes.
pub(crate) fn residual<'py>(py: Python<'py>, r: &Residual) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("line", r.to_string())?;
    d.set_item("aval", r.aval.to_string())?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("kind", r.kind.kind_name())?;
    d.set_item("what", r.kind.what())?;
    d.set_item("source", remat::ad::summarize(&r.source))?;
    Ok(d)
}

/// The ledger as the facade's JSON form says it (`remat explain --json`), as Python
/// values, with its text.
pub(crate) fn ledger<'py>(py: Python<'py>, l: &remat::ledger::Ledger) -> PyResult<Bound<'py, PyDict>> {
    let v = json_to_py(py, &l.to_json())?;
    let d = v.cast_into::<PyDict>().map_err(|_| err("the ledger's JSON form is an object"))?;
    d.set_item("text", l.text())?;
    Ok(d)
}

/// A JSON value as plain Python values (dicts, lists, str, int, float, bool, None).
pub(crate) fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, None, Some(f)) => f.into_pyobject(py)?.into_any(),
            _ => return Err(err("a JSON number out of range")),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(xs) => {
            let items: Vec<Bound<'py, PyAny>> = xs.iter().map(|x| json_to_py(py, x)).collect::<PyResult<_>>()?;
            PyList::new(py, items)?.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}
