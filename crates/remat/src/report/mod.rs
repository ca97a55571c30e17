//! The report: one self-contained HTML file (inline SVG, CSS and a little JavaScript, no
//! network) with the memory over program order, the split with its residual edges, the
//! frontier of policies, and the ledger as text; or any one figure alone as SVG.
//!
//! What it keeps true: the output is a function of its input (the same program gives the
//! same bytes), and every number drawn is the ledger's ([`crate::ledger`]).

mod build;
mod choice;
mod dot;
mod frontier;
mod memory;
mod split;
pub mod svg;

pub use build::{Report, Side};
pub use choice::{Choice, ChoiceError, MAX_SIDES};
pub use dot::fwd_bwd_dot;
pub use frontier::{base_flops, builtin_policies, frontier_svg, policy_points, FrontierPoint, PointKind};
pub use memory::{compare_svg, memory_svg};
pub use split::{split_svg, MAX_ROWS};

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

const SCRIPT: &str = "document.querySelectorAll('svg[id^=split] .edge').forEach(function(e){\
e.addEventListener('click',function(){var k=e.getAttribute('data-r');var g=e.closest('svg');\
g.querySelectorAll('.edge').forEach(function(o){o.classList.toggle('on',o.getAttribute('data-r')===k);});\
var t=e.querySelector('title');document.getElementById('detail-'+g.id).textContent=t?t.textContent:'';});});";

impl Report {
    /// One figure alone, as SVG: the memory panel (side by side for several sides), the
    /// split (of a report with one side), or the frontier.
    pub fn figure_svg(&self, figure: Figure) -> Result<String, ChoiceError> {
        match (figure, self.sides.as_slice()) {
            (Figure::Memory, [one]) => Ok(memory_svg(&one.ledger)),
            (Figure::Memory, sides) => {
                Ok(compare_svg(&sides.iter().map(|s| (s.label.as_str(), &s.ledger)).collect::<Vec<_>>()))
            }
            (Figure::Split, [one]) => Ok(split_svg(&one.ledger)),
            (Figure::Split, sides) => Err(ChoiceError(format!(
                "the split figure draws one side, and this report has {}: give one --policy or --budget",
                sides.len()
            ))),
            (Figure::Frontier, _) => Ok(frontier_svg(&self.frontier, &self.marked())),
        }
    }

    /// The whole report as one HTML document.
    pub fn html(&self) -> String {
        let mut s = String::new();
        let title = &self.title;
        s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        s.push_str(&format!("<title>remat report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n", esc(title)));
        s.push_str(&format!("<h1>remat report: {}</h1>\n", esc(title)));
        for side in &self.sides {
            let l = &side.ledger;
            let who = if self.sides.len() > 1 { format!("{}: planned", side.label) } else { "Planned".to_string() };
            s.push_str(&format!(
                "<p>{} peak {} bytes{} ({} equations, {} steps); {} residuals hold {} bytes of it.</p>\n",
                esc(&who),
                l.peak_bytes(),
                if l.sharded { " per device" } else { "" },
                l.program.eqns.len(),
                l.profile.positions,
                l.rows.len(),
                l.residual_peak_bytes()
            ));
        }
        if self.sides.len() > 1 {
            s.push_str("<h2>Memory over program order (same byte scale)</h2>\n");
        } else {
            s.push_str("<h2>Memory over program order</h2>\n");
        }
        // Memory always has an SVG (a split error cannot happen here).
        s.push_str(&self.figure_svg(Figure::Memory).unwrap_or_default());
        s.push_str("<h2>The split</h2>\n<p>Click a residual edge to highlight it and show its ledger row.</p>\n");
        for (k, side) in self.sides.iter().enumerate() {
            let id = if k == 0 { "split".to_string() } else { format!("split-{k}") };
            if self.sides.len() > 1 {
                s.push_str(&format!("<h3>{}</h3>\n", esc(&side.label)));
            }
            s.push_str(&split::split_svg_as(&side.ledger, &id));
            s.push_str(&split::groups_html(&side.ledger));
            s.push_str(&format!("<pre id=\"detail-{id}\">(no residual selected)</pre>\n"));
        }
        s.push_str("<h2>Frontier</h2>\n");
        s.push_str(&frontier_svg(&self.frontier, &self.marked()));
        for note in &self.notes {
            s.push_str(&format!("<p>{}</p>\n", esc(note)));
        }
        s.push_str("<h2>Ledger</h2>\n");
        for side in &self.sides {
            if self.sides.len() > 1 {
                s.push_str(&format!("<h3>{}</h3>\n", esc(&side.label)));
            }
            s.push_str("<pre>");
            s.push_str(&esc(&side.ledger.text()));
            s.push_str("</pre>\n");
        }
        s.push_str("<script>");
        s.push_str(SCRIPT);
        s.push_str("</script>\n</body>\n</html>\n");
        s
    }
}
