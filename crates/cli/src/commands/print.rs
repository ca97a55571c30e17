//! `remat print FILE`: parse, verify, print back in JAX's text form.

use std::path::Path;

use crate::io::{read_jaxpr, Result};

pub fn run(file: &Path) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    remat::pretty::write_stdout(&format!("{}\n", remat::ir::pp_jaxpr(&jaxpr)));
    Ok(())
}
