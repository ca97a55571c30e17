//! Renders the report's figures of one program to PNG (for docs/images; `make.sh` there
//! runs it): `render_figures PROGRAM OUT_DIR`, where PROGRAM is a jaxpr file or a recorded
//! case (`.json` with a `jaxpr` field). Writes `memory.png`, `split.png` and
//! `frontier.png`, rendered by resvg with the machine's fonts.

use std::path::Path;

use remat::ledger::explain_jaxpr;
use remat::report::{frontier_svg, memory_svg, policy_points, split_svg};
use remat::Options;
use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, program, out] = args.as_slice() else {
        return Err("usage: render_figures PROGRAM(.jaxpr|.json) OUT_DIR".into());
    };
    let text = std::fs::read_to_string(program)?;
    let text = if program.ends_with(".json") {
        let case: serde_json::Value = serde_json::from_str(&text)?;
        case["jaxpr"].as_str().ok_or("the case has no jaxpr")?.to_string()
    } else {
        text
    };
    let jaxpr = remat::ir::parse_jaxpr(&text, program)?;
    let ledger = explain_jaxpr(&jaxpr, &[], &[], &Options::default())?;
    let points = policy_points(&jaxpr, &Options::default())?;
    let mut options = usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    for (name, svg) in
        [("memory", memory_svg(&ledger)), ("split", split_svg(&ledger)), ("frontier", frontier_svg(&points, Some(0)))]
    {
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
