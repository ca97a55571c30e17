//! A report's data: one ledger per side (the program as written, under a policy, or under
//! the planner's plan for a budget) and one frontier on which every side is marked.
//!
//! The frontier's points are measured one way per report. Without a budget, by the report:
//! each point's vjp planned as one program, and the FLOPs it runs beyond the
//! everything-saveable program's ([`policy_points`]: the program as written and the
//! built-in policies, plus each side's own policy). With a budget, by the memory planner:
//! every plan it evaluated (diamonds) and every policy applied to the whole function
//! (circles: the built-in ones, each side's own), the FLOPs of the equations the backward
//! half recomputes; only an `as written` side is then measured by the report's way (the
//! planner cannot represent the program's own nested checkpoints). Both measure the same
//! peak: the whole vjp's, as the JIT's buffer planner lays it out with the options it
//! compiles with, the same options the planner measures with.
//!
//! Several programs merge into one report ([`Report::merge`]): their sides side by side,
//! their frontiers on one set of axes.

use remat_ir::{ClosedJaxpr, Jaxpr};
use remat_jit::Options;
use remat_plan::{Budget, PlanOptions, Planner};

use super::choice::Choice;
use super::frontier::{base_flops, policy_points, FrontierPoint, PointKind};
use crate::ledger::cost::jaxpr_flops;
use crate::ledger::{explain_jaxpr, explain_plan, explain_program, Ledger};
use crate::Error;

/// One side of a report: what it shows, and its ledger.
#[derive(Clone, Debug)]
pub struct Side {
    /// `as written`, the policy as JAX spells it, `plan for 64.00 MiB`; with several
    /// programs, the program's title first.
    pub label: String,
    pub ledger: Ledger,
    /// Its point on the report's frontier.
    pub point: usize,
}

/// A whole report: its sides and the frontier they are marked on.
#[derive(Clone, Debug)]
pub struct Report {
    pub title: String,
    pub sides: Vec<Side>,
    pub frontier: Vec<FrontierPoint>,
    /// What the frontier lacks and why (a function the planner cannot plan).
    pub notes: Vec<String>,
}

impl Report {
    /// The frontier's points of the sides, in the sides' order.
    pub fn marked(&self) -> Vec<usize> {
        self.sides.iter().map(|s| s.point).collect()
    }

    /// A program that is already differentiated (a benchmark's value-and-grad program),
    /// reported as it is: one side, one point.
    pub fn of_program(title: &str, jaxpr: &Jaxpr, options: &Options) -> Result<Report, Error> {
        let ledger = explain_program(jaxpr, &[], options)?;
        let point = FrontierPoint::policy("as written", ledger.peak_bytes(), 0);
        Ok(Report {
            title: title.to_string(),
            sides: vec![Side { label: "as written".into(), ledger, point: 0 }],
            frontier: vec![point],
            notes: vec!["An already-differentiated program has no other policies or plans to compare.".into()],
        })
    }

    /// The report of `f`'s vjp (arguments named `arg_names`) for each of `choices`, planned
    /// under `options`.
    pub fn new(
        title: &str,
        f: &ClosedJaxpr,
        arg_names: &[String],
        choices: &[Choice],
        options: &Options,
    ) -> Result<Report, Error> {
        let jaxpr = &f.jaxpr;
        for c in choices {
            c.check_names(jaxpr).map_err(|e| Error::Ad(remat_ad::AdError::Invalid(e.0)))?;
        }
        // Every policy is placed by the planner, on the plans' axes, with the plans it
        // evaluated; a function the planner cannot plan (not a scalar loss, say) gets the
        // report's own points, unless a budget asks for a plan.
        // A custom rule known only by name: the report differentiates its call_jaxpr.
        let mut notes: Vec<String> = remat_ad::custom_rule_notes(jaxpr).into_iter().map(|n| format!("{n}.")).collect();
        let planner = match Planner::new(f, arg_names, &PlanOptions::default()) {
            Ok(p) => Some(p),
            Err(e) if choices.iter().any(|c| matches!(c, Choice::Budget(_))) => return Err(e.into()),
            Err(e) => {
                notes.push(format!("No planner plans: {e}."));
                None
            }
        };
        let mut frontier = match &planner {
            None => policy_points(jaxpr, options)?,
            Some(p) => {
                let mut v: Vec<FrontierPoint> = p
                    .builtins()
                    .iter()
                    .map(|b| {
                        let name = b.policy.trim_start_matches("jax.checkpoint_policies.");
                        FrontierPoint::policy(name, b.peak_bytes, b.recompute_flops)
                    })
                    .collect();
                v.extend(p.points().into_iter().map(|q| FrontierPoint {
                    name: match &q.rewrite {
                        Some(rewrite) => format!("{rewrite}, {} bytes saved", q.residual_bytes),
                        None => format!("{} equations recomputed, {} bytes saved", q.recomputed, q.residual_bytes),
                    },
                    peak_bytes: q.peak_bytes,
                    recompute_flops: q.recompute_flops,
                    kind: PointKind::Plan,
                }));
                v
            }
        };
        let mut base: Option<u64> = None;
        let mut sides = Vec::new();
        for choice in choices {
            let label = choice.to_string();
            let (ledger, point) = match choice {
                Choice::AsWritten => {
                    let ledger = explain_jaxpr(jaxpr, &f.consts, arg_names, options)?;
                    let point = match &planner {
                        None => 0,
                        Some(_) => {
                            let b = cached_base(&mut base, jaxpr)?;
                            let flops = jaxpr_flops(&ledger.program).saturating_sub(b);
                            find_or_push(
                                &mut frontier,
                                FrontierPoint::policy(label.clone(), ledger.peak_bytes(), flops),
                            )
                        }
                    };
                    (ledger, point)
                }
                Choice::Policy(p) => {
                    let ledger = explain_jaxpr(&remat_ad::with_policy(jaxpr, p)?, &f.consts, arg_names, options)?;
                    let point = match &planner {
                        None => {
                            let flops = jaxpr_flops(&ledger.program).saturating_sub(cached_base(&mut base, jaxpr)?);
                            FrontierPoint::policy(label.clone(), ledger.peak_bytes(), flops)
                        }
                        Some(planner) => match frontier.iter().find(|q| q.kind == PointKind::Policy && q.name == label)
                        {
                            Some(q) => q.clone(),
                            None => {
                                let q = planner.policy_point(&label, p)?;
                                FrontierPoint::policy(label.clone(), q.peak_bytes, q.recompute_flops)
                            }
                        },
                    };
                    (ledger, find_or_push(&mut frontier, point))
                }
                Choice::Budget(bytes) => {
                    let Some(p) = &planner else {
                        return Err(Error::Plan(remat_plan::PlanError::Invalid("no planner for a budget".into())));
                    };
                    let plan = p.plan(Budget::bytes(*bytes))?;
                    let ledger = explain_plan(&plan, &f.consts, options)?;
                    let chosen = FrontierPoint {
                        name: label.clone(),
                        peak_bytes: plan.peak_bytes,
                        recompute_flops: plan.recompute_flops,
                        kind: PointKind::Plan,
                    };
                    (ledger, find_or_push(&mut frontier, chosen))
                }
            };
            sides.push(Side { label, ledger, point });
        }
        Ok(Report { title: title.to_string(), sides, frontier, notes })
    }

    /// Several programs' reports as one: every side labelled with its program's title, and
    /// every frontier point too.
    pub fn merge(title: &str, reports: Vec<Report>) -> Report {
        let mut out = Report { title: title.to_string(), sides: Vec::new(), frontier: Vec::new(), notes: Vec::new() };
        for r in reports {
            out.notes.extend(r.notes.iter().map(|n| format!("{}: {n}", r.title)));
            let shift = out.frontier.len();
            out.frontier.extend(
                r.frontier.into_iter().map(|p| FrontierPoint { name: format!("{}: {}", r.title, p.name), ..p }),
            );
            out.sides.extend(r.sides.into_iter().map(|s| Side {
                label: format!("{}: {}", r.title, s.label),
                point: s.point + shift,
                ledger: s.ledger,
            }));
        }
        out
    }
}

/// The FLOPs of the everything-saveable vjp, computed once.
fn cached_base(base: &mut Option<u64>, jaxpr: &Jaxpr) -> Result<u64, Error> {
    match base {
        Some(b) => Ok(*b),
        None => Ok(*base.insert(base_flops(jaxpr)?)),
    }
}

/// The index of the point with `p`'s name and kind (a policy side that is a built-in
/// policy, a plan the planner evaluated), renamed to `p`'s name; else `p` appended.
fn find_or_push(points: &mut Vec<FrontierPoint>, p: FrontierPoint) -> usize {
    let same = |q: &FrontierPoint| match p.kind {
        PointKind::Policy => q.kind == PointKind::Policy && q.name == p.name,
        PointKind::Plan => {
            q.kind == PointKind::Plan && q.peak_bytes == p.peak_bytes && q.recompute_flops == p.recompute_flops
        }
    };
    match points.iter().position(same) {
        Some(k) => {
            // Two budgets may choose the same plan: the point is named by both.
            let q = &mut points[k];
            q.name = if q.kind == PointKind::Plan && q.name.starts_with("plan for ") && q.name != p.name {
                format!("{} = {}", q.name, p.name)
            } else {
                p.name
            };
            k
        }
        None => {
            points.push(p);
            points.len() - 1
        }
    }
}
