//! Reading jaxpr files and JSON arrays, writing results; every error names the file.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use remat::json::ArrayJson;
use remat::{AdError, Array, ClosedJaxpr, Error, EvalError, Jaxpr, JitError};
use serde_json::Value;

/// A command's failure, already worded for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError(words(e))
    }
}

impl From<AdError> for CliError {
    fn from(e: AdError) -> CliError {
        CliError(e.to_string())
    }
}

impl From<remat::plan::PlanError> for CliError {
    fn from(e: remat::plan::PlanError) -> CliError {
        CliError(e.to_string())
    }
}

impl From<JitError> for CliError {
    fn from(e: JitError) -> CliError {
        CliError(e.to_string())
    }
}

/// The facade's error as the tool words it: a stage's failure in that stage's own words
/// (without the facade's `compilation or native run failed: `), a NaN check as the facade
/// words it (`NaN check in the backward half: equation 3 ...`).
fn words(e: Error) -> String {
    match e {
        Error::Trace(e) => e.to_string(),
        Error::Ad(e) => e.to_string(),
        Error::Jit(e) => e.to_string(),
        Error::Eval(e) => e.to_string(),
        Error::Plan(e) => e.to_string(),
        // Only a NaN check says which half of a vjp it is in.
        Error::InHalf { error, .. } if !matches!(*error, Error::Nan(_)) => words(*error),
        Error::Nan(_) | Error::NanCotangent { .. } | Error::InHalf { .. } => e.to_string(),
    }
}

pub type Result<T> = std::result::Result<T, CliError>;

pub fn read_text(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| CliError(format!("standard input: {e}")))?;
        return Ok(s);
    }
    std::fs::read_to_string(path).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

fn display_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// Parses and verifies a jaxpr file. A trailing newline is allowed.
pub fn read_jaxpr(path: &Path) -> Result<Jaxpr> {
    let text = read_text(path)?;
    let name = display_name(path);
    let jaxpr = remat::ir::parse_jaxpr(&text, &name).map_err(|e| CliError(format!("{name}: {e}")))?;
    remat::ir::verify::verify(&jaxpr).map_err(|e| CliError(format!("{name}: the jaxpr is not well-typed:\n{e}")))?;
    Ok(jaxpr)
}

/// [`read_jaxpr`] for a program to run: a text file cannot carry constants' values, so a
/// jaxpr with constvars is an error.
pub fn read_program(path: &Path) -> Result<ClosedJaxpr> {
    let jaxpr = read_jaxpr(path)?;
    if !jaxpr.constvars.is_empty() {
        return Err(CliError(format!(
            "{}: the jaxpr has {} constvars, whose values a text file cannot carry",
            path.display(),
            jaxpr.constvars.len()
        )));
    }
    Ok(ClosedJaxpr::new(Arc::new(jaxpr)))
}

/// Reads input arrays: a JSON array of arrays, or an object with an `args` field (a
/// conformance case).
pub fn read_arrays(path: &Path) -> Result<Vec<Array>> {
    let text = read_text(path)?;
    let name = display_name(path);
    let value: Value = serde_json::from_str(&text).map_err(|e| CliError(format!("{name}: invalid JSON: {e}")))?;
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(obj) => match obj.get("args") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(CliError(format!(
                    "{name}: expected a JSON array of arrays, or an object with an \"args\" array"
                )))
            }
        },
        _ => return Err(CliError(format!("{name}: expected a JSON array of arrays"))),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| Array::from_json(v).map_err(|e| CliError(format!("{name}: input {i}: {e}"))))
        .collect()
}

/// Writes JSON to `out`, or to standard output.
pub fn write_json(out: Option<&Path>, value: &Value) -> Result<()> {
    let text = serde_json::to_string(value).expect("JSON values always serialize");
    match out {
        Some(path) => std::fs::write(path, text + "\n").map_err(|e| CliError(format!("{}: {e}", path.display()))),
        None => {
            remat::pretty::write_stdout(&(text + "\n"));
            Ok(())
        }
    }
}

/// `checked` is the facade's NaN check of the arrays read from `path` (its `what`s): a NaN
/// it found is an error naming the file, the array and the element.
pub fn reject_nans(path: &Path, what: &str, checked: std::result::Result<(), Error>) -> Result<()> {
    match checked {
        Err(Error::Nan(EvalError::NanArgument { index, position }) | Error::NanCotangent { index, position }) => {
            Err(CliError(format!(
                "{}: {what} {index} holds NaN at {position:?} (`--nans propagate` computes with it, as JAX does)",
                display_name(path)
            )))
        }
        other => Ok(other?),
    }
}
