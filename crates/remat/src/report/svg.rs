//! The little SVG the report needs: escaping, numbers with one decimal, colours per kind.

use crate::ledger::BufferKind;

/// Text for an SVG or HTML text node or attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate, to a tenth of a pixel (deterministic and short).
pub fn n(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// `s` cut to at most `max` characters, with an ellipsis where cut.
pub fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The colour of each kind of buffer (also the report's legend).
pub fn colour(kind: BufferKind) -> &'static str {
    match kind {
        BufferKind::Residual => RESIDUAL,
        BufferKind::Forward => "#1f77b4",
        BufferKind::Backward => "#2ca02c",
        BufferKind::Temporary => "#7f7f7f",
        BufferKind::OutputCopy => "#9467bd",
    }
}

pub const RESIDUAL: &str = "#d62728";
pub const PARAMETERS: &str = "#8c564b";
pub const RECOMPUTE: &str = "#ff7f0e";

/// The opening of a standalone SVG of the given size, with the report's font.
pub fn open(width: usize, height: usize, id: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"11\">\n\
         <rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n"
    )
}

/// The opening of an SVG nested at `x` in a larger one (a panel of a comparison).
pub fn open_at(x: usize, width: usize, height: usize) -> String {
    format!(
        "<svg x=\"{x}\" y=\"0\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\">\n\
         <rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n"
    )
}
