//! `jit(f)`: compile once per input avals, cache, and call with concrete arrays.
//!
//! The machinery is independent of how a jaxpr is obtained: `trace` maps input avals to a
//! closed jaxpr (the tracer's `make_jaxpr`, a parsed file, a transformation's output). A
//! call with arguments of new avals traces and compiles; later calls with the same avals
//! reuse the compiled program. A wrong number of arguments, or a trace that does not take
//! the given avals, is an error, never undefined behaviour.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use remat_ir::{Array, Aval, ClosedJaxpr};

use crate::{compile_closed, Compiled, JitError};

/// A function compiled per input avals; see [`jit`].
pub struct JitFn<F> {
    trace: F,
    cache: Mutex<HashMap<Vec<Aval>, Arc<Compiled>>>,
}

impl<F> fmt::Debug for JitFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.cache.lock().map(|c| c.len()).unwrap_or(0);
        write!(f, "JitFn({n} compiled signatures)")
    }
}

/// Wraps `trace` (input avals to a closed jaxpr) into a function that compiles on first use
/// of each input signature and runs natively afterwards.
pub fn jit<F, E>(trace: F) -> JitFn<F>
where
    F: Fn(&[Aval]) -> Result<ClosedJaxpr, E>,
    E: fmt::Display,
{
    JitFn { trace, cache: Mutex::new(HashMap::new()) }
}

impl<F, E> JitFn<F>
where
    F: Fn(&[Aval]) -> Result<ClosedJaxpr, E>,
    E: fmt::Display,
{
    /// The compiled program for `avals`, tracing and compiling it the first time.
    pub fn compiled(&self, avals: &[Aval]) -> Result<Arc<Compiled>, JitError> {
        if let Some(c) = self.cache.lock().ok().and_then(|c| c.get(avals).cloned()) {
            return Ok(c);
        }
        let closed = (self.trace)(avals).map_err(|e| JitError::Trace(e.to_string()))?;
        let compiled = Arc::new(compile_closed(&closed)?);
        if compiled.in_avals().iter().zip(avals).any(|(a, b)| !a.same_type(b))
            || compiled.in_avals().len() != avals.len()
        {
            return Err(JitError::Trace(format!(
                "the traced jaxpr takes {} arguments of other types than the {} given",
                compiled.in_avals().len(),
                avals.len()
            )));
        }
        if let Ok(mut c) = self.cache.lock() {
            c.insert(avals.to_vec(), compiled.clone());
        }
        Ok(compiled)
    }

    /// Calls the function on concrete arrays.
    pub fn call(&self, args: &[Array]) -> Result<Vec<Array>, JitError> {
        let avals: Vec<Aval> = args.iter().map(Array::aval).collect();
        self.compiled(&avals)?.run(args)
    }

    /// How many input signatures have been compiled.
    pub fn compiled_signatures(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}
