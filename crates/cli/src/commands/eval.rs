//! `remat eval FILE --inputs IN.json`: evaluate a jaxpr and write `{"outputs": [...]}`.

use std::path::Path;

use remat::json::ArrayJson;
use remat::run::{check_arguments, Program, RunOptions};
use remat::{Array, Backend, Nans};
use serde_json::json;

use crate::io::{check_inputs, read_arrays, read_program, reject_nans, write_json, Result};

pub fn run(file: &Path, inputs: &Path, out: Option<&Path>, backend: Backend, nans: Nans) -> Result<()> {
    let program = read_program(file)?;
    let args = read_arrays(inputs)?;
    check_inputs(inputs, &args, file, &program.jaxpr)?;
    let args: Vec<&Array> = args.iter().collect();
    // Checked before compiling, to name the file.
    reject_nans(inputs, "input", check_arguments(&args, nans))?;
    let program = Program::new(program, &RunOptions { backend, nans, ..RunOptions::default() })?;
    let outputs = program.run(&args)?;
    write_json(out, &json!({ "outputs": outputs.iter().map(Array::to_json).collect::<Vec<_>>() }))
}
