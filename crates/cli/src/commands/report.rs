//! `remat report FILE... [--policy P | --budget BYTES | --compare LIST] [--no-split] [-o OUT]
//! [--format html|svg] [--figure memory|split|frontier]`: the report of the files' programs
//! (docs/report.md): one self-contained HTML file with the memory over program order (one
//! panel per side, on one byte scale), the split, the frontier with every side marked and
//! the ledger; or one figure alone as SVG. Writes to standard output without `-o`.

use std::path::{Path, PathBuf};

use remat::report::{Choice, Figure, Report, MAX_SIDES};
use remat::Options;

use crate::commands::residuals::binder_names;
use crate::io::{read_jaxpr, read_program, read_text, CliError, Result};

/// What `remat report` was asked.
#[derive(Debug)]
pub struct Request<'a> {
    pub files: &'a [PathBuf],
    pub no_split: bool,
    pub out: Option<&'a Path>,
    pub svg: Option<Figure>,
    pub policy: Option<&'a str>,
    pub budget: Option<&'a str>,
    pub compare: Option<&'a str>,
}

fn choice_error(e: remat::report::ChoiceError) -> CliError {
    CliError(e.to_string())
}

/// The sides asked for: `--policy`, `--budget`, `--compare`, or the program as written.
fn choices(req: &Request<'_>) -> Result<Vec<Choice>> {
    let choices = match (req.policy, req.budget, req.compare) {
        (Some(p), None, None) => vec![Choice::parse_policy(p).map_err(choice_error)?],
        (None, Some(b), None) => vec![Choice::parse_budget(b).map_err(choice_error)?],
        (None, None, Some(c)) => Choice::parse_list(c).map_err(choice_error)?,
        (None, None, None) => vec![Choice::AsWritten],
        _ => return Err(CliError("remat report: give at most one of --policy, --budget and --compare".into())),
    };
    if req.no_split && choices != [Choice::AsWritten] {
        return Err(CliError(
            "remat report --no-split reports an already-differentiated program as it is: --policy, --budget and \
             --compare need the primal function"
                .into(),
        ));
    }
    Ok(choices)
}

fn title_of(file: &Path) -> String {
    file.file_name().map_or_else(|| "-".into(), |n| n.to_string_lossy().into_owned())
}

pub fn run(req: &Request<'_>) -> Result<()> {
    let choices = choices(req)?;
    let sides = choices.len() * req.files.len();
    if sides > MAX_SIDES {
        return Err(CliError(format!(
            "remat report: {} files times {} sides is {sides} sides; a report compares at most {MAX_SIDES}",
            req.files.len(),
            choices.len()
        )));
    }
    let options = Options::default();
    let mut reports = Vec::new();
    for file in req.files {
        let title = title_of(file);
        let report = if req.no_split {
            Report::of_program(&title, &read_jaxpr(file)?, &options)?
        } else {
            let closed = read_program(file)?;
            let names = binder_names(&read_text(file)?).unwrap_or_default();
            Report::new(&title, &closed, &names, &choices, &options).map_err(|e| {
                // A program with no vjp (a `while_loop`, as in JAX) still has a forward
                // program to see.
                let no_vjp = matches!(e, remat::Error::Ad(_)) && choices == [Choice::AsWritten];
                let CliError(words) = in_file(file, e);
                match no_vjp {
                    true => CliError(format!(
                        "{words}\n(`remat report --no-split` reports the program as it is, without a vjp)"
                    )),
                    false => CliError(words),
                }
            })?
        };
        reports.push(report);
    }
    let report = match reports.len() {
        1 => reports.remove(0),
        _ => {
            let titles: Vec<String> = reports.iter().map(|r| r.title.clone()).collect();
            Report::merge(&titles.join(", "), reports)
        }
    };
    let text = match req.svg {
        Some(figure) => report.figure_svg(figure).map_err(choice_error)?,
        None => report.html(),
    };
    match req.out {
        Some(path) => std::fs::write(path, text).map_err(|e| CliError(format!("cannot write {}: {e}", path.display()))),
        None => {
            remat::pretty::write_stdout(&text);
            Ok(())
        }
    }
}

/// A failure to report one of several files names the file.
fn in_file(file: &Path, e: remat::Error) -> CliError {
    let CliError(words) = e.into();
    CliError(format!("{}: {words}", file.display()))
}
