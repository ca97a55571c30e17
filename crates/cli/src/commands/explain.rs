//! `remat explain FILE [--policy P | --budget BYTES | --no-split] [--json]`: the residual
//! ledger of the vjp of the file's jaxpr, planned as one program (forward then backward) as
//! `remat bench` plans a value-and-grad program: one block per saved residual, the other
//! buffers at the peak, and the sum that reaches the planned peak. `--policy` explains the
//! vjp under a policy (as `remat report --policy`), `--budget` the memory planner's plan
//! for that many bytes (as `remat report --budget`). `--no-split` explains a program that
//! is already differentiated (a value-and-grad jaxpr) as it is. `--json` writes the same
//! numbers as one JSON object.

use std::path::Path;

use remat::ad::with_policy;
use remat::ledger::{explain_jaxpr, explain_plan, explain_program, Ledger};
use remat::plan::{Budget, PlanOptions, Planner};
use remat::report::Choice;
use remat::{Options, PolicyNames};

use crate::commands::residuals::binder_names;
use crate::io::{note_custom_rules, read_program_named, read_text, CliError, Result};

/// The ledger of the file's program: its vjp as written, under `policy` or planned for
/// `budget`, or (with `no_split`) the program itself.
pub fn ledger_of(
    file: &Path,
    policy_names: Option<&PolicyNames>,
    policy: Option<&str>,
    budget: Option<&str>,
    no_split: bool,
) -> Result<Ledger> {
    let closed = read_program_named(file, policy_names)?;
    let jaxpr = &closed.jaxpr;
    let options = Options::default();
    if no_split {
        return Ok(explain_program(jaxpr, &closed.consts, &options)?);
    }
    note_custom_rules(jaxpr);
    let names = binder_names(&read_text(file)?).unwrap_or_default();
    let choice = match (policy, budget) {
        (Some(_), Some(_)) => return Err(CliError("remat explain: give --policy or --budget, not both".into())),
        (Some(p), None) => {
            let c = Choice::parse_policy(p).map_err(|e| CliError(format!("--policy: {e}")))?;
            c.check_names(jaxpr).map_err(|e| CliError(format!("--policy: {e}")))?;
            c
        }
        (None, Some(b)) => Choice::parse_budget(b).map_err(|e| CliError(format!("--budget: {e}")))?,
        (None, None) => Choice::AsWritten,
    };
    Ok(match choice {
        Choice::AsWritten => explain_jaxpr(jaxpr, &closed.consts, &names, &options)?,
        Choice::Policy(p) => explain_jaxpr(&with_policy(jaxpr, &p)?, &closed.consts, &names, &options)?,
        Choice::Budget(bytes) => {
            let planner = Planner::new(&closed, &names, &PlanOptions::default())?;
            let plan = planner.plan(Budget::bytes(bytes))?;
            explain_plan(&plan, &closed.consts, &options)?
        }
    })
}

pub fn run(
    file: &Path,
    policy_names: Option<&PolicyNames>,
    policy: Option<&str>,
    budget: Option<&str>,
    no_split: bool,
    as_json: bool,
) -> Result<()> {
    let ledger = ledger_of(file, policy_names, policy, budget, no_split)?;
    let text = if as_json { format!("{:#}\n", ledger.to_json()) } else { ledger.text() };
    remat::pretty::write_stdout(&text);
    Ok(())
}
