//! `remat grad FILE --inputs IN.json --cotangents CT.json`: the vjp of the file's jaxpr at
//! the inputs, applied to the cotangents; writes `{"outputs": [...], "grads": [...]}` (one
//! gradient per input). The forward and backward halves run on the chosen backend
//! (`remat::run::VjpRunner`).

use std::path::Path;

use remat::json::ArrayJson;
use remat::run::{check_arguments, check_cotangents, RunOptions, VjpRunner};
use remat::{Array, Backend, Nans, PolicyNames};
use serde_json::{json, Value};

use crate::io::{
    check_inputs, note_custom_rules, read_program_named, read_text, reject_nans, write_json, CliError, Result,
};

pub fn run(
    file: &Path,
    policy_names: Option<&PolicyNames>,
    inputs: &Path,
    cotangents: &Path,
    out: Option<&Path>,
    backend: Backend,
    nans: Nans,
) -> Result<()> {
    let closed = read_program_named(file, policy_names)?;
    let jaxpr = &closed.jaxpr;
    note_custom_rules(jaxpr);
    let args = read_field(inputs, "args")?;
    check_inputs(inputs, &args, file, jaxpr)?;
    let cts = read_field(cotangents, "cotangents")?;
    if cts.len() != jaxpr.outvars.len() {
        return Err(CliError(format!(
            "{}: {} cotangents for the {} outputs of {}",
            cotangents.display(),
            cts.len(),
            jaxpr.outvars.len(),
            file.display()
        )));
    }
    for (i, (ct, out)) in cts.iter().zip(&jaxpr.outvars).enumerate() {
        let want = jaxpr.atom_aval(out);
        if !ct.aval().same_type(&want) {
            return Err(CliError(format!(
                "{}: cotangent {i} is {} but output {i} is {want}",
                cotangents.display(),
                ct.aval()
            )));
        }
    }
    let (args, cts): (Vec<&Array>, Vec<&Array>) = (args.iter().collect(), cts.iter().collect());
    // Checked before differentiating, to name the files.
    reject_nans(inputs, "input", check_arguments(&args, nans))?;
    reject_nans(cotangents, "cotangent", check_cotangents(&cts, nans))?;
    let options = RunOptions { backend, nans, ..RunOptions::default() };
    let results = VjpRunner::new(&closed, &options)?.run(&args, &cts)?;
    let to_json = |xs: &[Array]| xs.iter().map(Array::to_json).collect::<Vec<_>>();
    write_json(out, &json!({ "outputs": to_json(&results.outputs), "grads": to_json(&results.grads) }))
}

/// A JSON array of arrays, or an object (a conformance case) with the array in `field`.
fn read_field(path: &Path, field: &str) -> Result<Vec<Array>> {
    let name = path.display().to_string();
    let value: Value =
        serde_json::from_str(&read_text(path)?).map_err(|e| CliError(format!("{name}: invalid JSON: {e}")))?;
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(obj) => match obj.get(field) {
            Some(Value::Array(items)) => items,
            _ => return Err(CliError(format!("{name}: expected a JSON array, or an object with a \"{field}\" array"))),
        },
        _ => return Err(CliError(format!("{name}: expected a JSON array of arrays"))),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| Array::from_json(v).map_err(|e| CliError(format!("{name}: {field} {i}: {e}"))))
        .collect()
}
