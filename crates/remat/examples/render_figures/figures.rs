//! The report's figures shown in README.md and docs/report.md, as SVG text: shared by the
//! `render_figures` example, which writes them to `docs/images/`, and
//! `crates/remat/tests/report.rs`, which compares the committed files with them.

use std::path::Path;
use std::sync::Arc;

use remat::ir::ClosedJaxpr;
use remat::plan::{PlanOptions, Planner};
use remat::report::{Choice, Figure, Report};
use remat::Options;

/// `memory` and `split` of `program` as written, then `compare` (`compared`'s memory under
/// `nothing_saveable`, `dots_saveable`, `save_only_these_names('attn_out')` and the
/// planner's plan for the budget halfway between its smallest and largest peak, side by
/// side) and `frontier` (that comparison's frontier): (name, SVG text).
pub fn figures(
    program: &ClosedJaxpr,
    compared: &ClosedJaxpr,
) -> Result<Vec<(&'static str, String)>, Box<dyn std::error::Error>> {
    let options = Options::default();
    let written = Report::new("program", program, &[], &[Choice::AsWritten], &options)?;
    let planner = Planner::new(compared, &[], &PlanOptions::default())?;
    let budget = (planner.min_peak() + planner.no_remat_peak()) / 2;
    let choices = Choice::parse_list(&format!("nothing,dots,names:attn_out,budget:{budget}"))?;
    let side_by_side = Report::new("compared", compared, &[], &choices, &options)?;
    Ok(vec![
        ("memory", written.figure_svg(Figure::Memory)?),
        ("split", written.figure_svg(Figure::Split)?),
        ("compare", side_by_side.figure_svg(Figure::Memory)?),
        ("frontier", side_by_side.figure_svg(Figure::Frontier)?),
    ])
}

/// A scalar loss from a jaxpr file or a recorded case (`.json` with a `jaxpr` field):
/// `path` under `dir`, named `path` (source locations in the figures say it).
pub fn read(dir: &Path, path: &str) -> Result<ClosedJaxpr, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(dir.join(path))?;
    let text = if path.ends_with(".json") {
        let case: serde_json::Value = serde_json::from_str(&text)?;
        case["jaxpr"].as_str().ok_or("the case has no jaxpr")?.to_string()
    } else {
        text
    };
    Ok(ClosedJaxpr::new(Arc::new(remat::ir::parse_jaxpr(&text, path)?)))
}
