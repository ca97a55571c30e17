//! `remat fwd-bwd FILE`: the forward and backward halves of the vjp of the file's jaxpr,
//! side by side, fitted to the terminal's width (plain when not writing to a terminal).

use std::path::Path;

use crate::io::{read_jaxpr, Result};

pub fn run(file: &Path) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    remat::ad::print_fwd_bwd(&jaxpr)?;
    Ok(())
}
