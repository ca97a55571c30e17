//! Reading jaxpr files and JSON arrays, writing results; every error names the file.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use remat::json::ArrayJson;
use remat::{AdError, Array, ClosedJaxpr, Error, EvalError, Jaxpr, JitError, PolicyNames};
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

/// `jaxpr` (read from `path`) with the meaning `--policy-names` gives its opaque
/// `save_and_offload_only_these_names` policies, if names were given.
pub fn with_policy_names(path: &Path, jaxpr: ClosedJaxpr, names: Option<&PolicyNames>) -> Result<ClosedJaxpr> {
    match names {
        None => Ok(jaxpr),
        Some(names) => {
            remat::with_policy_names(&jaxpr, names).map_err(|e| CliError(format!("{}: {e}", display_name(path))))
        }
    }
}

/// [`read_jaxpr`] with the meaning `--policy-names` gives (constvars allowed: the
/// program is only differentiated and printed).
pub fn read_jaxpr_named(path: &Path, names: Option<&PolicyNames>) -> Result<Jaxpr> {
    let jaxpr = ClosedJaxpr::new(Arc::new(read_jaxpr(path)?));
    Ok(Arc::unwrap_or_clone(with_policy_names(path, jaxpr, names)?.jaxpr))
}

/// [`read_program`] with the meaning `--policy-names` gives.
pub fn read_program_named(path: &Path, names: Option<&PolicyNames>) -> Result<ClosedJaxpr> {
    with_policy_names(path, read_program(path)?, names)
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

/// One `note:` line on stderr per custom-derivative call whose rule is known only by
/// name: the command differentiates its call_jaxpr instead (JAX would use the rule), and
/// says so, whatever it writes on stdout.
pub fn note_custom_rules(jaxpr: &Jaxpr) {
    for note in remat::ad::custom_rule_notes(jaxpr) {
        eprintln!("note: {note}");
    }
}

/// Whether `args` (read from `inputs`) fit the arguments of `jaxpr` (read from `file`):
/// their count, then each one's type, in words that name both files.
pub fn check_inputs(inputs: &Path, args: &[Array], file: &Path, jaxpr: &Jaxpr) -> Result<()> {
    let want = jaxpr.in_avals();
    if args.len() != want.len() {
        return Err(CliError(format!(
            "{}: {} input{} for the {} argument{} of {}",
            display_name(inputs),
            args.len(),
            if args.len() == 1 { "" } else { "s" },
            want.len(),
            if want.len() == 1 { "" } else { "s" },
            display_name(file)
        )));
    }
    for (i, (a, w)) in args.iter().zip(&want).enumerate() {
        if !a.aval().same_type(w) {
            return Err(CliError(format!(
                "{}: input {i} is {} but argument {i} of {} is {w}",
                display_name(inputs),
                a.aval(),
                display_name(file)
            )));
        }
    }
    Ok(())
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
