//! The frontier panel: points of (recompute FLOPs, peak bytes), one per policy or plan,
//! given as data. [`policy_points`] computes the built-in policies' points for a function:
//! every checkpoint of it (or, without one, the whole function) given the policy, its vjp
//! planned as one program; the recompute is the FLOPs that program runs beyond the
//! everything-saveable one's.

use std::fmt::Write;

use remat_ad::with_policy;
use remat_ir::{Jaxpr, Policy};
use remat_jit::Options;

use super::svg::{esc, fit, n, open, RESIDUAL};
use crate::ledger::cost::jaxpr_flops;
use crate::Error;

/// What a point of the frontier is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointKind {
    /// The program as written or under a policy: its vjp planned as one program, the
    /// recompute the FLOPs it runs beyond the everything-saveable program's.
    Policy,
    /// One of the memory planner's evaluated plans, in the planner's own measures (the
    /// value-and-grad program's planned peak, the FLOPs of the recomputed equations).
    Plan,
}

/// One point of the frontier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontierPoint {
    pub name: String,
    pub peak_bytes: usize,
    pub recompute_flops: u64,
    pub kind: PointKind,
}

impl FrontierPoint {
    pub fn policy(name: impl Into<String>, peak_bytes: usize, recompute_flops: u64) -> FrontierPoint {
        FrontierPoint { name: name.into(), peak_bytes, recompute_flops, kind: PointKind::Policy }
    }
}

/// The built-in policies whose points the report draws.
pub fn builtin_policies() -> Vec<Policy> {
    Policy::BUILTINS.iter().map(|b| b.policy.clone()).collect()
}

/// The FLOPs of `jaxpr`'s vjp with every checkpoint saving everything: the frontier's zero
/// of recompute.
pub fn base_flops(jaxpr: &Jaxpr) -> Result<u64, Error> {
    let whole = remat_ad::vjp_program(&with_policy(jaxpr, &Policy::EverythingSaveable)?, &[])?;
    Ok(jaxpr_flops(&whole.jaxpr))
}

/// The point of each built-in policy for `jaxpr`'s vjp, and of `jaxpr` as written (named
/// `as written`), planned under `options`.
pub fn policy_points(jaxpr: &Jaxpr, options: &Options) -> Result<Vec<FrontierPoint>, Error> {
    let plan = |j: &Jaxpr| -> Result<(usize, u64), Error> {
        let whole = remat_ad::vjp_program(j, &[])?;
        let planned = remat_jit::memory_plan(&whole.jaxpr, &[], options)?;
        Ok((planned.peak_bytes, jaxpr_flops(&whole.jaxpr)))
    };
    let base = base_flops(jaxpr)?;
    let mut points = Vec::new();
    let (peak, flops) = plan(jaxpr)?;
    points.push(FrontierPoint::policy("as written", peak, flops.saturating_sub(base)));
    for p in builtin_policies() {
        let (peak, flops) = plan(&with_policy(jaxpr, &p)?)?;
        points.push(FrontierPoint::policy(crate::ledger::policy_words(&p), peak, flops.saturating_sub(base)));
    }
    Ok(points)
}

const WIDTH: usize = 960;
const HEIGHT: usize = 340;
const LEFT: f64 = 90.0;
const TOP: f64 = 34.0;
const PLOT_W: f64 = 520.0;
const PLOT_H: f64 = 240.0;

/// FLOPs in a few characters: `950 FLOPs`, `3.1 MFLOPs`.
pub fn flops_words(f: u64) -> String {
    const UNITS: [&str; 5] = ["k", "M", "G", "T", "P"];
    if f < 1000 {
        return format!("{f} FLOPs");
    }
    let mut x = f as f64;
    let mut unit = "";
    for u in UNITS {
        if x < 1000.0 {
            break;
        }
        x /= 1000.0;
        unit = u;
    }
    format!("{x:.1} {unit}FLOPs")
}

/// The most points named in the list beside the plot (the rest have their names on hover).
const LISTED: usize = 13;

/// The frontier panel: each point at (recompute FLOPs, peak bytes), policies as circles
/// and the planner's plans as diamonds, the `marked` points (the reported sides) in red.
/// Policies and marked points are numbered and named in a list beside the plot (at most
/// [`LISTED`]); the planner's other plans are counted there and named on hover.
pub fn frontier_svg(points: &[FrontierPoint], marked: &[usize]) -> String {
    let mut s = open(WIDTH, HEIGHT, "frontier");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">Frontier: planned peak against recompute FLOPs</text>",
        n(LEFT)
    );
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f7f7f7\" stroke=\"#cccccc\"/>",
        n(LEFT),
        n(TOP),
        n(PLOT_W),
        n(PLOT_H)
    );
    let max_peak = points.iter().map(|p| p.peak_bytes).max().unwrap_or(0).max(1);
    let max_flops = points.iter().map(|p| p.recompute_flops).max().unwrap_or(0).max(1);
    let x = |f: u64| LEFT + 10.0 + f as f64 * (PLOT_W - 20.0) / max_flops as f64;
    let y = |b: usize| TOP + PLOT_H - 10.0 - b as f64 * (PLOT_H - 20.0) / max_peak as f64;
    for (v, label) in [(0, "0".to_string()), (max_peak, remat_ir::format_bytes(max_peak as u128))] {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            n(LEFT - 4.0),
            n(y(v) + 4.0),
            esc(&label)
        );
    }
    for (v, anchor) in [(0u64, "start"), (max_flops, "end")] {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            n(x(v)),
            n(TOP + PLOT_H + 14.0),
            flops_words(v)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">recompute FLOPs (beyond saving everything)</text>",
        n(LEFT + PLOT_W / 2.0),
        n(TOP + PLOT_H + 28.0)
    );
    // The listed points: policies and marked points, in order, at most LISTED.
    let listed: Vec<usize> = (0..points.len())
        .filter(|&k| points[k].kind == PointKind::Policy || marked.contains(&k))
        .take(LISTED)
        .collect();
    // The planner's plans first, then the policies, then the marked points on top.
    let unmarked = |kind: PointKind| (0..points.len()).filter(move |k| !marked.contains(k) && points[*k].kind == kind);
    let order = unmarked(PointKind::Plan)
        .chain(unmarked(PointKind::Policy))
        .chain(marked.iter().copied().filter(|&k| k < points.len()));
    for k in order {
        let p = &points[k];
        let (px, py) = (x(p.recompute_flops), y(p.peak_bytes));
        let on = marked.contains(&k);
        let fill = if on { RESIDUAL } else { "#1f77b4" };
        let r = if on { 6.0 } else { 4.0 };
        let title = format!(
            "{}{}: peak {} bytes, {} recompute FLOPs",
            if p.kind == PointKind::Plan { "planner: " } else { "" },
            p.name,
            p.peak_bytes,
            p.recompute_flops
        );
        match p.kind {
            PointKind::Policy => {
                let _ = writeln!(
                    s,
                    "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{fill}\" stroke=\"#000000\"><title>{}</title></circle>",
                    n(px),
                    n(py),
                    n(r),
                    esc(&title)
                );
            }
            PointKind::Plan => {
                let d = r + 1.0;
                let _ = writeln!(
                    s,
                    "<path class=\"plan\" d=\"M{} {} L{} {} L{} {} L{} {} Z\" fill=\"{}\" stroke=\"#000000\"><title>{}</title></path>",
                    n(px),
                    n(py - d),
                    n(px + d),
                    n(py),
                    n(px),
                    n(py + d),
                    n(px - d),
                    n(py),
                    if on { RESIDUAL } else { "#ffffff" },
                    esc(&title)
                );
            }
        }
        if let Some(j) = listed.iter().position(|&l| l == k) {
            let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>", n(px + 6.0), n(py - 5.0), j + 1);
        }
    }
    for (j, &k) in listed.iter().enumerate() {
        let p = &points[k];
        let ly = TOP + 12.0 + 16.0 * j as f64;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-size=\"10\"{}>{}. {}{}: {}, {}</text>",
            n(LEFT + LIST_GAP + PLOT_W),
            n(ly),
            if marked.contains(&k) { " font-weight=\"bold\"" } else { "" },
            j + 1,
            if p.kind == PointKind::Plan { "\u{25c6} " } else { "" },
            esc(&fit(&p.name, 24)),
            esc(&remat_ir::format_bytes(p.peak_bytes as u128)),
            flops_words(p.recompute_flops)
        );
    }
    let plans = points.iter().filter(|p| p.kind == PointKind::Plan).count();
    if plans > 0 {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-size=\"10\">\u{25c7} {plans} plans the memory planner evaluated</text>",
            n(LEFT + LIST_GAP + PLOT_W),
            n(TOP + 12.0 + 16.0 * listed.len() as f64)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The gap between the plot and the list of points.
const LIST_GAP: f64 = 14.0;
