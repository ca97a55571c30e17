//! `remat report FILE... [--policy P | --budget BYTES | --compare LIST] [--no-split] [-o OUT]
//! [--format html|svg] [--figure memory|split|frontier]`: the report of the files' programs
//! (docs/report.md): one self-contained HTML file with the memory over program order (one
//! panel per side, on one byte scale), the split, the frontier with every side marked and
//! the ledger; or one figure alone as SVG. Writes to standard output without `-o`.

use std::path::{Path, PathBuf};

use remat::report::{Choice, Figure, Report, MAX_SIDES};
use remat::{ClosedJaxpr, Options, PolicyNames};

use crate::commands::residuals::binder_names;
use crate::io::{note_custom_rules, read_jaxpr, read_program, read_text, CliError, Result};
use crate::{FigureArg, Format};

/// What `remat report` was asked.
#[derive(Debug)]
pub struct Request<'a> {
    pub files: &'a [PathBuf],
    pub policy_names: Option<&'a PolicyNames>,
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
    if req.no_split && req.policy_names.is_some() {
        return Err(CliError(
            "remat report --no-split reports an already-differentiated program as it is: --policy-names gives \
             policies their meaning for differentiating"
                .into(),
        ));
    }
    if req.no_split && choices != [Choice::AsWritten] {
        return Err(CliError(
            "remat report --no-split reports an already-differentiated program as it is: --policy, --budget and \
             --compare need the primal function"
                .into(),
        ));
    }
    Ok(choices)
}

/// What the report writes: the whole report (`None`) or one figure as SVG. The format
/// follows `--format`, else the `-o` file's extension, else HTML; a format that contradicts
/// the extension, an extension that is neither, or `--figure` without SVG output is an
/// error, never a file whose contents differ from its name.
pub fn output_form(out: Option<&Path>, format: Option<Format>, figure: Option<FigureArg>) -> Result<Option<Figure>> {
    let by_name = match out.and_then(|p| p.extension()).map(|e| e.to_string_lossy().to_ascii_lowercase()) {
        None => None,
        Some(e) if e == "svg" => Some(Format::Svg),
        Some(e) if e == "html" || e == "htm" => Some(Format::Html),
        Some(e) if format.is_none() => {
            return Err(CliError(format!(
                "-o {}: `.{e}` is neither `.html` nor `.svg`; say which with --format html or --format svg",
                out.map(|p| p.display().to_string()).unwrap_or_default()
            )))
        }
        Some(_) => None,
    };
    let format = match (format, by_name) {
        (Some(f), Some(n)) if f != n => {
            return Err(CliError(format!(
                "--format {} contradicts -o {}",
                if f == Format::Svg { "svg" } else { "html" },
                out.map(|p| p.display().to_string()).unwrap_or_default()
            )))
        }
        (Some(f), _) | (None, Some(f)) => f,
        (None, None) => Format::Html,
    };
    match (format, figure) {
        (Format::Svg, figure) => Ok(Some(figure.unwrap_or(FigureArg::Memory).into())),
        (Format::Html, None) => Ok(None),
        (Format::Html, Some(_)) => Err(CliError(
            "--figure chooses the figure of an SVG (--format svg, or -o FILE.svg); the HTML report holds every figure"
                .into(),
        )),
    }
}

/// Every file's program with the meaning `--policy-names` gives, checked over all of
/// them (a comparison may hold one program with such a policy and one without).
fn programs(req: &Request<'_>) -> Result<Vec<ClosedJaxpr>> {
    let read: Vec<ClosedJaxpr> = req.files.iter().map(|f| read_program(f)).collect::<Result<_>>()?;
    let Some(names) = req.policy_names else { return Ok(read) };
    let mut uses = Vec::new();
    let mut out = Vec::new();
    for (f, closed) in req.files.iter().zip(read) {
        let (given, used) =
            remat::ad::give_policy_names(&closed, names).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
        uses.push(used);
        out.push(given);
    }
    remat::ad::check_policy_names(names, &uses)?;
    Ok(out)
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
    let programs = if req.no_split { Vec::new() } else { programs(req)? };
    for (k, file) in req.files.iter().enumerate() {
        let title = title_of(file);
        let report = if req.no_split {
            Report::of_program(&title, &read_jaxpr(file)?, &options)?
        } else {
            let closed = &programs[k];
            note_custom_rules(&closed.jaxpr);
            let names = binder_names(&read_text(file)?).unwrap_or_default();
            Report::new(&title, closed, &names, &choices, &options).map_err(|e| {
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
