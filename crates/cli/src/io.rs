//! Reading jaxpr files and JSON arrays, writing results; every error names the file.

use std::fmt;
use std::io::Read;
use std::path::Path;

use remat_interp::NanOrigin;
use remat_ir::{Array, Jaxpr};
use remat_json::ArrayJson;
use serde_json::Value;

use crate::Nans;

/// A command's failure, already worded for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> CliError {
        CliError(e.to_string())
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
    let jaxpr = remat_ir::parse_jaxpr(&text, &name).map_err(|e| CliError(format!("{name}: {e}")))?;
    remat_ir::verify::verify(&jaxpr).map_err(|e| CliError(format!("{name}: the jaxpr is not well-typed:\n{e}")))?;
    Ok(jaxpr)
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
            println!("{text}");
            Ok(())
        }
    }
}

/// With `nans` other than `propagate`: the first of `arrays` (the `what`s of `path`) that
/// holds a NaN is an error naming it and the element.
pub fn reject_nans(path: &Path, what: &str, arrays: &[Array], nans: Nans) -> Result<()> {
    if nans == Nans::Propagate {
        return Ok(());
    }
    match Array::first_nan_among(arrays) {
        Some((i, position)) => Err(CliError(format!(
            "{}: {what} {i} holds NaN at {position:?} (`--nans propagate` computes with it, as JAX does)",
            display_name(path)
        ))),
        None => Ok(()),
    }
}

/// With `--nans debug`, when one of `outputs` of `jaxpr` at `args` holds a NaN: the
/// equation that made the first one, found by the interpreter (`part` says which program
/// it is, for example " in the backward half").
pub fn locate_nans(jaxpr: &Jaxpr, args: &[Array], outputs: &[Array], nans: Nans, part: &str) -> Result<()> {
    if nans != Nans::Debug {
        return Ok(());
    }
    match remat_interp::locate_nans(jaxpr, &[], args, outputs)? {
        None => Ok(()),
        Some(NanOrigin::Found(e)) => Err(CliError(format!("NaN check{part}: {e}"))),
        Some(NanOrigin::NotReproduced { output, position }) => Err(CliError(format!(
            "NaN check{part}: output {output} holds NaN at {position:?}, but the reference interpreter computes none there"
        ))),
    }
}
