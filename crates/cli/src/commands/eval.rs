//! `remat eval FILE --inputs IN.json`: evaluate a jaxpr and write `{"outputs": [...]}`.

use std::path::Path;

use remat_ir::Array;
use remat_json::ArrayJson;
use serde_json::json;

use crate::io::{locate_nans, read_arrays, read_jaxpr, reject_nans, write_json, CliError, Result};
use crate::{Backend, Nans};

pub fn run(file: &Path, inputs: &Path, out: Option<&Path>, backend: Backend, nans: Nans) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    if !jaxpr.constvars.is_empty() {
        return Err(CliError(format!(
            "{}: the jaxpr has {} constvars, whose values a text file cannot carry",
            file.display(),
            jaxpr.constvars.len()
        )));
    }
    let args = read_arrays(inputs)?;
    reject_nans(inputs, "input", &args, nans)?;
    let outputs = match backend {
        Backend::Interp => remat_interp::eval_jaxpr(&jaxpr, &[], &args)?,
        Backend::Jit => remat_jit::compile(&jaxpr)?.run(&args)?,
    };
    locate_nans(&jaxpr, &args, &outputs, nans, "")?;
    write_json(out, &json!({ "outputs": outputs.iter().map(Array::to_json).collect::<Vec<_>>() }))
}
