//! The frontier panel: points of (recompute FLOPs, peak bytes), one per policy or plan,
//! given as data. [`policy_points`] computes the built-in policies' points for a function:
//! every checkpoint of it (or, without one, the whole function) given the policy, its vjp
//! planned as one program; the recompute is the FLOPs that program runs beyond the
//! everything-saveable one's.

use std::fmt::Write;
use std::sync::Arc;

use remat_ir::{Jaxpr, Policy, Primitive};
use remat_jit::Options;

use super::svg::{esc, fit, n, open, RESIDUAL};
use crate::ledger::cost::jaxpr_flops;
use crate::Error;

/// One point of the frontier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontierPoint {
    pub name: String,
    pub peak_bytes: usize,
    pub recompute_flops: u64,
}

/// `jaxpr` with every checkpoint's policy replaced by `policy`; without a checkpoint, the
/// whole function inside one.
pub fn with_policy(jaxpr: &Jaxpr, policy: &Policy) -> Result<Jaxpr, Error> {
    fn replace(j: &Jaxpr, policy: &Policy, found: &mut bool) -> Jaxpr {
        let mut out = j.clone();
        for eqn in &mut out.eqns {
            if let Primitive::Remat2 { policy: p, .. } = &mut eqn.primitive {
                *p = Some(policy.clone());
                *found = true;
            }
            eqn.primitive = eqn.primitive.map_subjaxprs(|b| Arc::new(replace(b, policy, found)));
        }
        out
    }
    let mut found = false;
    let replaced = replace(jaxpr, policy, &mut found);
    if found || !jaxpr.constvars.is_empty() {
        return Ok(replaced);
    }
    let mut b = remat_ad::Builder::new();
    let ins: Vec<remat_ir::Atom> =
        jaxpr.invars.iter().map(|&v| remat_ir::Atom::Var(b.invar(jaxpr.aval(v).clone()))).collect();
    let prim = Primitive::Remat2 {
        jaxpr: Arc::new(jaxpr.clone()),
        prevent_cse: true,
        differentiated: false,
        policy: Some(policy.clone()),
    };
    let outs = b.bind(prim, ins)?;
    Ok(b.finish(outs.into_iter().map(remat_ir::Atom::Var).collect()))
}

/// The built-in policies whose points the report draws.
pub fn builtin_policies() -> Vec<Policy> {
    vec![
        Policy::EverythingSaveable,
        Policy::DotsSaveable { only_if_no_batch_dims: false },
        Policy::DotsSaveable { only_if_no_batch_dims: true },
        Policy::NothingSaveable,
    ]
}

/// The point of each built-in policy for `jaxpr`'s vjp, and of `jaxpr` as written (named
/// `as written`), planned under `options`.
pub fn policy_points(jaxpr: &Jaxpr, options: &Options) -> Result<Vec<FrontierPoint>, Error> {
    let plan = |j: &Jaxpr| -> Result<(usize, u64), Error> {
        let whole = remat_ad::vjp_program(j, &[])?;
        let planned = remat_jit::memory_plan(&whole.jaxpr, &[], options)?;
        Ok((planned.peak_bytes, jaxpr_flops(&whole.jaxpr)))
    };
    let (_, base) = plan(&with_policy(jaxpr, &Policy::EverythingSaveable)?)?;
    let mut points = Vec::new();
    let (peak, flops) = plan(jaxpr)?;
    points.push(FrontierPoint {
        name: "as written".into(),
        peak_bytes: peak,
        recompute_flops: flops.saturating_sub(base),
    });
    for p in builtin_policies() {
        let (peak, flops) = plan(&with_policy(jaxpr, &p)?)?;
        let name = crate::ledger::policy_words(&p);
        points.push(FrontierPoint { name, peak_bytes: peak, recompute_flops: flops.saturating_sub(base) });
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

/// The frontier panel: each point at (recompute FLOPs, peak bytes), `chosen` highlighted.
pub fn frontier_svg(points: &[FrontierPoint], chosen: Option<usize>) -> String {
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
    // Points, and their names in a list beside the plot (never overlapping).
    for (k, p) in points.iter().enumerate() {
        let (px, py) = (x(p.recompute_flops), y(p.peak_bytes));
        let chosen = chosen == Some(k);
        let _ = writeln!(
            s,
            "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#000000\"><title>{}: peak {} bytes, {} recompute FLOPs</title></circle>",
            n(px),
            n(py),
            if chosen { 6 } else { 4 },
            if chosen { RESIDUAL } else { "#1f77b4" },
            esc(&p.name),
            p.peak_bytes,
            p.recompute_flops
        );
        let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>", n(px + 6.0), n(py - 5.0), k + 1);
        let ly = TOP + 12.0 + 16.0 * k as f64;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-size=\"10\"{}>{}. {}: {}, {}</text>",
            n(LEFT + PLOT_W + 14.0),
            n(ly),
            if chosen { " font-weight=\"bold\"" } else { "" },
            k + 1,
            esc(&fit(&p.name, 24)),
            esc(&remat_ir::format_bytes(p.peak_bytes as u128)),
            flops_words(p.recompute_flops)
        );
    }
    s.push_str("</svg>\n");
    s
}
