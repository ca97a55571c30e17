//! `remat explain FILE [--policy P | --budget BYTES | --no-split] [--json]`: the residual
//! ledger of the vjp of the file's jaxpr, planned as one program (forward then backward) as
//! `remat bench` plans a value-and-grad program: one block per saved residual, the other
//! buffers at the peak, and the sum that reaches the planned peak. `--policy` explains the
//! vjp under a policy (as `remat report --policy`), `--budget` the memory planner's plan
//! for that many bytes (as `remat report --budget`). `--no-split` explains a program that
//! is already differentiated (a value-and-grad jaxpr) as it is. `--json` writes the same
//! numbers as one JSON object.

use std::path::Path;

use remat::ledger::{explain_jaxpr, explain_plan, explain_program, Ledger, ResidualHome};
use remat::plan::{Budget, PlanOptions, Planner};
use remat::report::{with_policy, Choice};
use remat::{Options, PolicyNames};
use serde_json::{json, Value};

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
    let text = if as_json { format!("{:#}\n", to_json(&ledger)) } else { ledger.text() };
    remat::pretty::write_stdout(&text);
    Ok(())
}

/// The ledger as JSON: `residuals` (one object per row), `peak` (position, buffers,
/// the sum) and `plan` (the planner's numbers).
pub fn to_json(l: &Ledger) -> Value {
    let p = &l.profile;
    let rows: Vec<Value> = l
        .rows
        .iter()
        .map(|r| {
            let home = match &r.home {
                ResidualHome::Arena { offset } => json!({"arena": offset}),
                ResidualHome::InOutput(o) => json!({"inside_output": o}),
                ResidualHome::HostPool => json!("host_pool"),
                ResidualHome::Caller => json!("caller"),
                ResidualHome::NoBuffer => json!("no_buffer"),
            };
            json!({
                "aval": r.residual.aval.to_string(),
                "bytes": r.residual.bytes,
                "kind": r.residual.kind.kind_name(),
                "what": r.residual.kind.what(),
                "text": r.residual.to_string(),
                "source": remat::ledger::source_words(&r.residual.source),
                "made_by": r.made_by,
                "home": home,
                "first_step": r.first,
                "last_step": r.last,
                "peak_bytes": r.peak_bytes,
                "why": r.why,
                "recompute_eqns": r.recompute_eqns,
                "recompute_flops": r.recompute_flops,
                "extra_peak_bytes": r.extra_peak_bytes,
            })
        })
        .collect();
    let rest: Vec<Value> = l
        .rest
        .iter()
        .map(|b| json!({"bytes": b.bytes, "offset": b.offset, "kind": b.kind.name(), "what": b.what}))
        .collect();
    json!({
        "equations": l.program.eqns.len(),
        "forward_equations": l.split.as_ref().map(|s| s.num_fwd_eqns),
        "steps": p.positions,
        "residuals": rows,
        "peak": {
            "step": p.peak.position,
            "equation": p.step_eqns.get(p.peak.position).copied().flatten(),
            "residual_bytes": l.residual_peak_bytes(),
            "other_buffers": rest,
            "other_bytes": l.rest_bytes(),
            "unused_bytes": p.peak.unused_bytes,
            "peak_bytes": l.peak_bytes(),
        },
        "plan": {
            "peak_bytes": p.plan.peak_bytes,
            "host_bytes": p.plan.host_bytes,
            "io_bytes": p.plan.io_bytes,
            "merged_across_checkpoints": p.plan.cse == remat::CseScope::AcrossCheckpoints,
        },
    })
}
