//! The split: the forward program on the left, the backward program on the right (as
//! `print_fwd_bwd` lays them out), one row per equation, and each residual an edge from the
//! forward equation that makes it to the backward equations that read it. Backward
//! checkpoint calls (where the recompute happens) are marked. Hovering an edge shows its
//! ledger row; in the HTML report, clicking it highlights it and shows the row.
//!
//! A half with more than [`MAX_ROWS`] equations is drawn in groups: consecutive equations
//! of the same source function (or primitive) share a row, and if that is still too many,
//! consecutive groups are merged evenly, so a 10,000-equation program draws at most
//! `MAX_ROWS` rows a side.

use std::fmt::Write;

use remat_ir::{Atom, Primitive};

use super::svg::{esc, fit, n, open, RECOMPUTE, RESIDUAL};
use crate::ledger::{source_words, Ledger, ResidualHome};

/// The most rows drawn per half.
pub const MAX_ROWS: usize = 120;
const WIDTH: usize = 960;
const ROW: f64 = 15.0;
const TOP: f64 = 52.0;
const COL_W: f64 = 400.0;
const LEFT_X: f64 = 10.0;
const RIGHT_X: f64 = 550.0;

/// A row: equations `lo..hi` of the program, and its label.
pub(crate) struct Row {
    lo: usize,
    hi: usize,
    label: String,
    recompute: bool,
}

pub(crate) fn rows(l: &Ledger, lo: usize, hi: usize, base: usize) -> Vec<Row> {
    let eqns = &l.program.eqns;
    let one = |e: usize| {
        let eqn = &eqns[e];
        let outs: Vec<String> = eqn.outvars.iter().map(|&v| l.program.aval(v).to_string()).collect();
        let line = if eqn.source.is_unknown() { String::new() } else { format!("  :{}", eqn.source.line) };
        Row {
            lo: e,
            hi: e + 1,
            label: format!("{:>3} {} {}{line}", e - base, eqn.primitive.name(), outs.join(" ")),
            recompute: is_recompute(&eqn.primitive),
        }
    };
    if hi - lo <= MAX_ROWS {
        return (lo..hi).map(one).collect();
    }
    // Runs of one source function (or primitive, where unknown).
    let key = |e: usize| {
        let s = &eqns[e].source;
        match &s.function {
            Some(f) => f.to_string(),
            None => eqns[e].primitive.name().to_string(),
        }
    };
    let mut groups: Vec<(usize, usize, String)> = Vec::new();
    for e in lo..hi {
        match groups.last_mut() {
            Some(g) if g.2 == key(e) => g.1 = e + 1,
            _ => groups.push((e, e + 1, key(e))),
        }
    }
    if groups.len() > MAX_ROWS {
        let per = groups.len().div_ceil(MAX_ROWS);
        groups = groups
            .chunks(per)
            .map(|c| {
                let names: Vec<&str> = c.iter().map(|g| g.2.as_str()).take(3).collect();
                (c[0].0, c[c.len() - 1].1, names.join(", "))
            })
            .collect();
    }
    groups
        .into_iter()
        .map(|(a, b, name)| Row {
            lo: a,
            hi: b,
            label: format!("{}-{} {name}: {} equations", a - base, b - 1 - base, b - a),
            recompute: (a..b).any(|e| is_recompute(&eqns[e].primitive)),
        })
        .collect()
}

/// A backward equation that recomputes forward values: a differentiated checkpoint.
fn is_recompute(p: &Primitive) -> bool {
    matches!(p, Primitive::Remat2 { differentiated: true, .. })
}

fn row_of(rows: &[Row], e: usize) -> Option<usize> {
    let k = rows.partition_point(|r| r.hi <= e);
    (k < rows.len() && rows[k].lo <= e).then_some(k)
}

/// The split of a ledger's vjp as a standalone SVG (a note for a program without one).
pub fn split_svg(l: &Ledger) -> String {
    split_svg_as(l, "split")
}

/// [`split_svg`] with the SVG element's id (a report with several sides has several).
pub(crate) fn split_svg_as(l: &Ledger, id: &str) -> String {
    let Some(split) = &l.split else {
        let mut s = open(WIDTH, 40, id);
        s.push_str("<text x=\"10\" y=\"24\">No split: the program was explained as it is (already differentiated).</text>\n</svg>\n");
        return s;
    };
    let nf = split.num_fwd_eqns;
    let n_all = l.program.eqns.len();
    let fwd = rows(l, 0, nf, 0);
    let bwd = rows(l, nf, n_all, nf);
    let height = (TOP + ROW * (fwd.len().max(bwd.len()) as f64 + 1.0) + 20.0) as usize;
    let mut s = open(WIDTH, height, id);
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">The split: {} residuals from {} forward to {} backward equations</text>",
        n(LEFT_X),
        l.rows.len(),
        nf,
        n_all - nf
    );
    for (x, title) in [(LEFT_X, "forward"), (RIGHT_X, "backward")] {
        let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{title}</text>", n(x), n(TOP - 14.0));
    }
    let row_y = |k: usize| TOP + ROW * k as f64;
    // Rows.
    for (rows, x) in [(&fwd, LEFT_X), (&bwd, RIGHT_X)] {
        for (k, r) in rows.iter().enumerate() {
            let y = row_y(k);
            if r.recompute {
                let _ = writeln!(
                    s,
                    "<rect class=\"recompute\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{RECOMPUTE}\" fill-opacity=\"0.25\"><title>recomputes forward values (a checkpoint's backward)</title></rect>",
                    n(x - 2.0),
                    n(y - 11.0),
                    n(COL_W),
                    n(ROW - 1.0)
                );
            }
            let _ = writeln!(
                s,
                "<text class=\"eqn\" x=\"{}\" y=\"{}\" font-family=\"DejaVu Sans Mono, monospace\" font-size=\"10\" xml:space=\"preserve\">{}</text>",
                n(x),
                n(y),
                esc(&fit(&r.label, 62))
            );
        }
    }
    // Edges: a residual from the row that makes it (or the inputs' header) to each reader.
    let _ = writeln!(s, "<g id=\"edges\" fill=\"none\">");
    for (k, (row, atom)) in l.rows.iter().zip(&split.residual_atoms).enumerate() {
        let from_y = match row.made_by.and_then(|e| row_of(&fwd, e)) {
            Some(r) => row_y(r) - 4.0,
            None => TOP - 18.0,
        };
        let Some(v) = atom.as_var() else { continue };
        let mut targets: Vec<usize> = (nf..n_all)
            .filter(|&e| l.program.eqns[e].invars.contains(&Atom::Var(v)))
            .filter_map(|e| row_of(&bwd, e))
            .collect();
        targets.dedup();
        let tip = format!(
            "residual {k}: {} | {} bytes{}, {} of the peak | steps {}..{} | why: {} | recompute: {} FLOPs{}",
            row.residual,
            row.residual.bytes,
            if l.sharded { format!(" ({} on each device)", row.residual.device_bytes) } else { String::new() },
            row.peak_bytes,
            row.first,
            row.last,
            row.why,
            row.recompute_flops,
            row.extra_peak_bytes.map_or(String::new(), |x| format!(", peak {x:+} bytes"))
        );
        let width = if row.home == ResidualHome::Caller { 0.8 } else { 1.4 };
        for t in targets {
            let (x1, x2) = (LEFT_X + COL_W, RIGHT_X - 6.0);
            let to_y = row_y(t) - 4.0;
            let xm = (x1 + x2) / 2.0;
            let _ = writeln!(
                s,
                "<path class=\"edge\" data-r=\"{k}\" d=\"M{} {} C{} {} {} {} {} {}\" stroke=\"{RESIDUAL}\" stroke-opacity=\"0.6\" stroke-width=\"{width}\"><title>{}</title></path>",
                n(x1),
                n(from_y),
                n(xm),
                n(from_y),
                n(xm),
                n(to_y),
                n(x2),
                n(to_y),
                esc(&tip)
            );
        }
    }
    let _ = writeln!(s, "</g>");
    s.push_str("</svg>\n");
    s
}

/// The split's groups as HTML: for each half drawn in groups or holding an equation with a
/// body, one `<details>` per row (collapsed; its summary the row's label) listing its
/// equations, one line each, as the rows of an ungrouped split read, with the source
/// function, and each body (a scan's, a call's, a checkpoint's) expandable inside. Nothing
/// for a half drawn one row per equation without bodies (or a program without a split).
pub(crate) fn groups_html(l: &Ledger) -> String {
    let Some(split) = &l.split else { return String::new() };
    let nf = split.num_fwd_eqns;
    let n_all = l.program.eqns.len();
    let mut out = String::new();
    for (half, lo, hi) in [("forward", 0, nf), ("backward", nf, n_all)] {
        let rows = rows(l, lo, hi, lo);
        let has_bodies = (lo..hi).any(|e| !l.program.eqns[e].primitive.subjaxprs().is_empty());
        if rows.iter().all(|r| r.hi - r.lo == 1) && !has_bodies {
            continue;
        }
        let _ = writeln!(
            out,
            "<details class=\"groups\"><summary>The {half} half's {} groups of {} equations (expand a group for its equations)</summary>",
            rows.len(),
            hi - lo
        );
        for r in &rows {
            let _ = write!(out, "<details><summary>{}</summary><pre>", esc(&r.label));
            for e in r.lo..r.hi {
                eqn_html(&mut out, &l.program, e, lo, 0);
            }
            out.push_str("</pre></details>\n");
        }
        out.push_str("</details>\n");
    }
    out
}

/// At most this many nested levels of bodies are listed (a scan of a checkpoint of a jit).
const MAX_BODY_DEPTH: usize = 4;

/// One equation's line inside a group's `<pre>`, and for an equation with bodies (a scan,
/// a call, a checkpoint, a cond's branches, a while) each body as a nested, collapsed
/// `<details>` listing its equations the same way.
fn eqn_html(out: &mut String, jaxpr: &remat_ir::Jaxpr, e: usize, base: usize, depth: usize) {
    let eqn = &jaxpr.eqns[e];
    let outs: Vec<String> = eqn.outvars.iter().map(|&v| jaxpr.aval(v).to_string()).collect();
    let src = if eqn.source.is_unknown() { String::new() } else { format!("  {}", source_words(&eqn.source)) };
    let line = format!("{:>5} {} {}{src}", e - base, eqn.primitive.name(), outs.join(" "));
    let _ = writeln!(out, "{}", esc(&line));
    if depth >= MAX_BODY_DEPTH {
        return;
    }
    let bodies = eqn.primitive.subjaxprs();
    for (i, body) in bodies.iter().enumerate() {
        let which = if bodies.len() > 1 { format!(" {i}") } else { String::new() };
        let _ = write!(
            out,
            "</pre><details class=\"body\"><summary>{} body{which}: {} equations</summary><pre>",
            esc(eqn.primitive.name()),
            body.eqns.len()
        );
        for b in 0..body.eqns.len() {
            eqn_html(out, body, b, 0, depth + 1);
        }
        out.push_str("</pre></details><pre>");
    }
}
