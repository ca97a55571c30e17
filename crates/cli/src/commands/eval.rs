//! `remat eval FILE --inputs IN.json`: evaluate a jaxpr and write `{"outputs": [...]}`.

use std::path::Path;

use remat_ir::Array;
use serde_json::json;

use crate::io::{read_arrays, read_jaxpr, write_json, CliError, Result};
use crate::Backend;

pub fn run(file: &Path, inputs: &Path, out: Option<&Path>, backend: Backend) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    if !jaxpr.constvars.is_empty() {
        return Err(CliError(format!(
            "{}: the jaxpr has {} constvars, whose values a text file cannot carry",
            file.display(),
            jaxpr.constvars.len()
        )));
    }
    let args = read_arrays(inputs)?;
    let outputs = match backend {
        Backend::Interp => remat_interp::eval_jaxpr(&jaxpr, &[], &args)?,
        Backend::Jit => remat_jit::compile(&jaxpr)?.run(&args)?,
    };
    write_json(out, &json!({ "outputs": outputs.iter().map(Array::to_json).collect::<Vec<_>>() }))
}
