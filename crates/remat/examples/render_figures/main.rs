//! Renders the report's figures of one program to PNG (for docs/images; `make.sh` there
//! runs it): `render_figures PROGRAM COMPARED OUT_DIR`, where each is a jaxpr file or a
//! recorded case (`.json` with a `jaxpr` field) of a scalar loss. Writes `memory.png` and
//! `split.png` (PROGRAM as written), `compare.png` (COMPARED's memory under
//! `nothing_saveable`, `dots_saveable`, `save_only_these_names('attn_out')` and the
//! planner's plan for the budget halfway between its smallest and largest peak, side by
//! side) and `frontier.png` (that comparison's frontier), rendered by resvg with the
//! machine's fonts.

use std::path::Path;

use std::sync::Arc;

use remat::ir::ClosedJaxpr;
use remat::plan::{PlanOptions, Planner};
use remat::report::{Choice, Figure, Report};
use remat::Options;
use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, program, compared, out] = args.as_slice() else {
        return Err("usage: render_figures PROGRAM(.jaxpr|.json) COMPARED(.jaxpr|.json) OUT_DIR".into());
    };
    let options = Options::default();
    let f = read(program)?;
    let written = Report::new("program", &f, &[], &[Choice::AsWritten], &options)?;
    let g = read(compared)?;
    let planner = Planner::new(&g, &[], &PlanOptions::default())?;
    let budget = (planner.min_peak() + planner.no_remat_peak()) / 2;
    let choices = Choice::parse_list(&format!("nothing,dots,names:attn_out,budget:{budget}"))?;
    let compared = Report::new("compared", &g, &[], &choices, &options)?;
    let mut options = usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    for (name, svg) in [
        ("memory", written.figure_svg(Figure::Memory)?),
        ("split", written.figure_svg(Figure::Split)?),
        ("compare", compared.figure_svg(Figure::Memory)?),
        ("frontier", compared.figure_svg(Figure::Frontier)?),
    ] {
        let tree = usvg::Tree::from_str(&svg, &options)?;
        let size = tree.size().to_int_size();
        let mut pixmap = Pixmap::new(size.width(), size.height()).ok_or("an empty figure")?;
        resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
        let path = Path::new(out).join(format!("{name}.png"));
        pixmap.save_png(&path)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// A scalar loss from a jaxpr file or a recorded case.
fn read(path: &str) -> Result<ClosedJaxpr, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    let text = if path.ends_with(".json") {
        let case: serde_json::Value = serde_json::from_str(&text)?;
        case["jaxpr"].as_str().ok_or("the case has no jaxpr")?.to_string()
    } else {
        text
    };
    Ok(ClosedJaxpr::new(Arc::new(remat::ir::parse_jaxpr(&text, path)?)))
}
