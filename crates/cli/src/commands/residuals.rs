//! `remat residuals FILE [--arg-names W1,W2,...]`: what the vjp of the file's jaxpr saves,
//! one line per residual, exactly as `jax.ad_checkpoint.print_saved_residuals` prints it.
//! Source locations point into the file; arguments are named by `--arg-names`, else by
//! the file's own binder names. A custom-derivative call whose rule is known only by name
//! adds a `note:` line on stderr (its call_jaxpr is differentiated instead).
//!
//! `--per-device` adds to each line what one device holds of the residual (a sharded
//! program's residuals are split over a mesh: `remat_ad`'s `device_bytes`), and a total.

use std::path::Path;

use remat::ir::format_bytes;
use remat::PolicyNames;

use crate::io::{note_custom_rules, read_jaxpr_named, read_text, CliError, Result};

pub fn run(file: &Path, policy_names: Option<&PolicyNames>, arg_names: Option<&str>, per_device: bool) -> Result<()> {
    let jaxpr = read_jaxpr_named(file, policy_names)?;
    let names: Vec<String> = match arg_names {
        Some(list) => {
            let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
            if let Some(k) = names.iter().position(String::is_empty) {
                return Err(CliError(format!("--arg-names `{list}`: name {} is empty", k + 1)));
            }
            names
        }
        None => binder_names(&read_text(file)?).unwrap_or_default(),
    };
    if names.len() != jaxpr.invars.len() && arg_names.is_some() {
        return Err(CliError(format!(
            "--arg-names gives {} names for the {} arguments of {}",
            names.len(),
            jaxpr.invars.len(),
            file.display()
        )));
    }
    let text = match per_device {
        false => remat::ad::print_saved_residuals(&jaxpr, &names)?,
        true => {
            let residuals = remat::ad::saved_residuals(&jaxpr, &names)?;
            let mut text = String::new();
            for r in &residuals {
                let share = match r.device_bytes == r.bytes {
                    true => "whole".to_string(),
                    false => format!("1/{} of {}", r.bytes / r.device_bytes.max(1), format_bytes(r.bytes as u128)),
                };
                text.push_str(&format!("{r}  [{} per device: {share}]\n", format_bytes(r.device_bytes as u128)));
            }
            let (all, one): (usize, usize) =
                residuals.iter().fold((0, 0), |(a, o), r| (a + r.bytes, o + r.device_bytes));
            text.push_str(&format!(
                "total: {} saved, {} on each device\n",
                format_bytes(all as u128),
                format_bytes(one as u128)
            ));
            text
        }
    };
    // A closed pipe (`remat residuals f.jaxpr | head`) is not an error.
    remat::pretty::write_stdout(&text);
    // Where a custom rule is known only by name, the residuals are the primal function's,
    // not the rule's: one note per such call, on stderr so that stdout stays JAX's form.
    note_custom_rules(&jaxpr);
    Ok(())
}

/// The invar names of the top-level jaxpr as the text writes them (`a`, `b`, ...): the
/// binders between `;` and `. let` of the last `{ lambda` at nesting depth 0.
pub fn binder_names(text: &str) -> Option<Vec<String>> {
    let mut depth = 0i32;
    let mut start = None;
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'{' => {
                if depth == 0 && text[i..].starts_with("{ lambda") {
                    start = Some(i);
                }
                depth += 1;
            }
            b'}' => depth -= 1,
            _ => {}
        }
    }
    let header = &text[start?..];
    let binders = &header[header.find(';')? + 1..header.find(". let")?];
    Some(binders.split_whitespace().filter_map(|b| b.split(':').next().map(str::to_string)).collect())
}
