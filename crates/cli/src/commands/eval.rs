//! `remat eval FILE --inputs IN.json`: evaluate a jaxpr and write `{"outputs": [...]}`.

use std::path::Path;
use std::sync::Arc;

use remat::json::ArrayJson;
use remat::run::{check_arguments, Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Nans};
use serde_json::json;

use crate::io::{read_arrays, read_jaxpr, reject_nans, write_json, CliError, Result};

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
    let args: Vec<&Array> = args.iter().collect();
    // Checked before compiling, to name the file.
    reject_nans(inputs, "input", check_arguments(&args, nans))?;
    let program =
        Program::new(ClosedJaxpr::new(Arc::new(jaxpr)), &RunOptions { backend, nans, ..RunOptions::default() })?;
    let outputs = program.run(&args)?;
    write_json(out, &json!({ "outputs": outputs.iter().map(Array::to_json).collect::<Vec<_>>() }))
}
