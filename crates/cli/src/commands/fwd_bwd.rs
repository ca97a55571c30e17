//! `remat fwd-bwd FILE`: the forward and backward halves of the vjp of the file's jaxpr,
//! side by side, fitted to the terminal's width (plain when not writing to a terminal);
//! with `--dot`, as a Graphviz graph with the residuals as edges between the halves.

use std::path::Path;

use crate::io::{read_jaxpr, Result};

pub fn run(file: &Path, dot: bool) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    if dot {
        let v = remat::ad::vjp(&jaxpr, &[])?;
        remat::pretty::write_stdout(&remat::report::fwd_bwd_dot(&v));
        return Ok(());
    }
    let (fwd, bwd) = remat::ad::fwd_bwd_strings(&jaxpr)?;
    let text = remat::print_fwd_bwd_text(&fwd, &bwd);
    remat::pretty::write_stdout(&text);
    Ok(())
}
