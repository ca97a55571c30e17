//! `remat report FILE [--no-split] [-o OUT] [--format html|svg] [--figure memory|split|frontier]`:
//! the report of the file's program (docs/report.md): one self-contained HTML file with
//! the memory over program order, the split and the frontier of the built-in policies,
//! or one figure alone as SVG. Writes to standard output without `-o`.

use std::path::Path;

use remat::report::{frontier_svg, memory_svg, policy_points, report_html, split_svg, Figure, FrontierPoint};
use remat::Options;

use crate::commands::explain::ledger_of;
use crate::io::{read_program, CliError, Result};

pub fn run(file: &Path, no_split: bool, out: Option<&Path>, svg: Option<Figure>) -> Result<()> {
    let ledger = ledger_of(file, no_split)?;
    let points: Vec<FrontierPoint> = if no_split {
        vec![FrontierPoint { name: "as written".into(), peak_bytes: ledger.peak_bytes(), recompute_flops: 0 }]
    } else {
        policy_points(&read_program(file)?.jaxpr, &Options::default())?
    };
    let text = match svg {
        Some(Figure::Memory) => memory_svg(&ledger),
        Some(Figure::Split) => split_svg(&ledger),
        Some(Figure::Frontier) => frontier_svg(&points, Some(0)),
        None => {
            let title = file.file_name().map_or_else(|| "-".into(), |n| n.to_string_lossy().into_owned());
            report_html(&title, &ledger, &points, Some(0))
        }
    };
    match out {
        Some(path) => std::fs::write(path, text).map_err(|e| CliError(format!("cannot write {}: {e}", path.display()))),
        None => {
            remat::pretty::write_stdout(&text);
            Ok(())
        }
    }
}
