//! Writes the report's figures of one program (for docs/images; `make.sh` there runs it):
//! `render_figures PROGRAM COMPARED OUT_DIR`, where each is a jaxpr file or a recorded case
//! (`.json` with a `jaxpr` field) of a scalar loss. Writes `memory.svg` and `split.svg`
//! (PROGRAM as written), `compare.svg` (COMPARED's memory under `nothing_saveable`,
//! `dots_saveable`, `save_only_these_names('attn_out')` and the planner's plan for the
//! budget halfway between its smallest and largest peak, side by side) and `frontier.svg`
//! (that comparison's frontier): the report's own SVG text, the same bytes on every run
//! (`crates/remat/tests/report.rs` compares the committed files with it).

mod figures;

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, program, compared, out] = args.as_slice() else {
        return Err("usage: render_figures PROGRAM(.jaxpr|.json) COMPARED(.jaxpr|.json) OUT_DIR".into());
    };
    let here = Path::new(".");
    for (name, svg) in figures::figures(&figures::read(here, program)?, &figures::read(here, compared)?)? {
        let path = Path::new(out).join(format!("{name}.svg"));
        std::fs::write(&path, svg)?;
        println!("{}", path.display());
    }
    Ok(())
}
