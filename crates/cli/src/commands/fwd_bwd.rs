//! `remat fwd-bwd FILE`: the forward and backward halves of the vjp of the file's jaxpr,
//! side by side, fitted to the terminal's width (plain when not writing to a terminal);
//! with `--dot`, as a Graphviz graph with the residuals as edges between the halves.

use std::path::Path;

use remat::PolicyNames;

use crate::io::{note_custom_rules, read_jaxpr_named, Result};

pub fn run(file: &Path, policy_names: Option<&PolicyNames>, dot: bool) -> Result<()> {
    let jaxpr = read_jaxpr_named(file, policy_names)?;
    note_custom_rules(&jaxpr);
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
