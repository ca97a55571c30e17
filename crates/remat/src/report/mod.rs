//! The report: one self-contained HTML file (inline SVG, CSS and a little JavaScript, no
//! network) with the memory over program order, the split with its residual edges, the
//! frontier of policies, and the ledger as text; or any one figure alone as SVG.
//!
//! What it keeps true: the output is a function of its input (the same program gives the
//! same bytes), and every number drawn is the ledger's ([`crate::ledger`]).

mod dot;
mod frontier;
mod memory;
mod split;
pub mod svg;

pub use dot::fwd_bwd_dot;
pub use frontier::{builtin_policies, frontier_svg, policy_points, with_policy, FrontierPoint};
pub use memory::memory_svg;
pub use split::{split_svg, MAX_ROWS};

use crate::ledger::Ledger;
use svg::esc;

/// The figures a report can hold, each available alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    Memory,
    Split,
    Frontier,
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:16px;color:#222}\
h1{font-size:18px}h2{font-size:15px;margin-top:22px}\
pre{font-family:'DejaVu Sans Mono',monospace;font-size:11px;background:#f7f7f7;padding:8px;overflow-x:auto}\
.edge{cursor:pointer}.edge.on{stroke-opacity:1;stroke-width:3}svg{max-width:100%;height:auto}";

const SCRIPT: &str = "document.querySelectorAll('#split .edge').forEach(function(e){\
e.addEventListener('click',function(){var k=e.getAttribute('data-r');\
document.querySelectorAll('#split .edge').forEach(function(o){o.classList.toggle('on',o.getAttribute('data-r')===k);});\
var t=e.querySelector('title');document.getElementById('detail').textContent=t?t.textContent:'';});});";

/// The whole report as one HTML document titled `title`.
pub fn report_html(title: &str, l: &Ledger, frontier: &[FrontierPoint], chosen: Option<usize>) -> String {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str(&format!("<title>remat report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n", esc(title)));
    s.push_str(&format!("<h1>remat report: {}</h1>\n", esc(title)));
    s.push_str(&format!(
        "<p>Planned peak {} bytes ({} equations, {} steps); {} residuals hold {} bytes of it.</p>\n",
        l.peak_bytes(),
        l.program.eqns.len(),
        l.profile.positions,
        l.rows.len(),
        l.residual_peak_bytes()
    ));
    s.push_str("<h2>Memory over program order</h2>\n");
    s.push_str(&memory_svg(l));
    s.push_str("<h2>The split</h2>\n<p>Click a residual edge to highlight it and show its ledger row.</p>\n");
    s.push_str(&split_svg(l));
    s.push_str("<pre id=\"detail\">(no residual selected)</pre>\n");
    s.push_str("<h2>Frontier</h2>\n");
    s.push_str(&frontier_svg(frontier, chosen));
    s.push_str("<h2>Ledger</h2>\n<pre>");
    s.push_str(&esc(&l.text()));
    s.push_str("</pre>\n<script>");
    s.push_str(SCRIPT);
    s.push_str("</script>\n</body>\n</html>\n");
    s
}
