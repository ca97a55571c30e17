//! Memory over program order: every arena buffer as a rectangle from its first to its last
//! step (x) at its planned byte range (y), coloured by kind, the live bytes at each step
//! as a line, the peak marked, and the buffers at the peak listed by name and source.
//!
//! The rectangles are the layout itself: the arena's height is the highest end of a
//! buffer, so the picture shows the holes first fit leaves, and the peak line touches the
//! top. Labels are drawn only where they fit: steps are labelled by top-level equation
//! groups (a scan, a call, a checkpoint is one group, named by its source function), and
//! a group too narrow for its label gets none.

use std::fmt::Write;

use remat_jit::BufferHome;

use super::svg::{colour, esc, fit, n, open, open_at, PARAMETERS, RESIDUAL};
use crate::ledger::{BufferKind, Ledger};

const WIDTH: usize = 960;
/// The narrowest panel of a comparison.
const MIN_PANEL: usize = 480;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const PLOT_H: f64 = 250.0;
/// The most buffers listed at the peak.
const LISTED: usize = 12;
/// The legend's height under the panels.
const LEGEND_H: f64 = 28.0;

/// How one memory panel is drawn: its width, the bytes at the top of its y axis (the
/// same for every panel of a comparison), its title, and where it sits.
struct Frame {
    width: usize,
    y_max: usize,
    title: String,
    legend: bool,
    x: usize,
}

/// The memory chart of a ledger, as a standalone SVG.
pub fn memory_svg(l: &Ledger) -> String {
    let title = format!(
        "Memory over program order: the planned arena, {} at the peak",
        remat_ir::format_bytes(l.peak_bytes() as u128)
    );
    let (mut s, _) = panel(l, &Frame { width: WIDTH, y_max: l.peak_bytes(), title, legend: true, x: 0 });
    s.push_str("</svg>\n");
    s
}

/// The memory charts of several ledgers side by side on the same byte scale (a report's
/// `--compare`), each titled by its label, with one legend under them all.
pub fn compare_svg(sides: &[(&str, &Ledger)]) -> String {
    let k = sides.len().max(1);
    let width = (WIDTH / k).max(MIN_PANEL);
    let y_max = sides.iter().map(|(_, l)| l.peak_bytes()).max().unwrap_or(0);
    let panels: Vec<(String, usize)> = sides
        .iter()
        .enumerate()
        .map(|(i, (label, l))| {
            let title = format!("{}: {} at the peak", label, remat_ir::format_bytes(l.peak_bytes() as u128));
            let chars = ((width as f64 - LEFT) / 7.5) as usize;
            let frame = Frame { width, y_max, title: fit(&title, chars), legend: false, x: i * width };
            let (mut s, h) = panel(l, &frame);
            s.push_str("</svg>\n");
            (s, h)
        })
        .collect();
    let height = panels.iter().map(|p| p.1).max().unwrap_or(0) + LEGEND_H as usize;
    let total = width * k;
    let mut s = open(total, height, "memory");
    for (p, _) in &panels {
        s.push_str(p);
    }
    legend(&mut s, height as f64 - 14.0);
    s.push_str("</svg>\n");
    s
}

/// One panel (an open `<svg>`, to be closed by the caller) and its height.
fn panel(l: &Ledger, frame: &Frame) -> (String, usize) {
    let p = &l.profile;
    let peak = l.peak_bytes();
    let live_list: Vec<usize> = {
        let mut v = p.peak.live.clone();
        v.sort_by_key(|&i| (std::cmp::Reverse(p.buffers[i].bytes), i));
        v
    };
    let listed = live_list.len().min(LISTED);
    let list_top = TOP + PLOT_H + 58.0;
    let height = if frame.legend {
        (list_top + 18.0 * (listed as f64 + 3.0) + 34.0) as usize
    } else {
        (list_top + 18.0 * (listed as f64 + 2.0) + 6.0) as usize
    };
    let width = frame.width;
    let plot_w = width as f64 - LEFT - RIGHT;
    // Characters that fit in a line of the plot's width.
    let chars = (plot_w / 6.6) as usize;
    let positions = p.positions.max(1) as f64;
    let x = |pos: usize| LEFT + pos as f64 * plot_w / positions;
    let y_max = frame.y_max.max(peak);
    let scale = if y_max == 0 { 0.0 } else { PLOT_H / y_max as f64 };
    let y = |bytes: usize| TOP + PLOT_H - bytes as f64 * scale;
    let mut s =
        if frame.x == 0 && frame.legend { open(width, height, "memory") } else { open_at(frame.x, width, height) };
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>",
        n(LEFT),
        esc(&frame.title)
    );
    // Axes and the byte scale.
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f7f7f7\" stroke=\"#cccccc\"/>",
        n(LEFT),
        n(TOP),
        n(plot_w),
        n(PLOT_H)
    );
    for frac in [0usize, 1, 2] {
        let bytes = y_max * frac / 2;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            n(LEFT - 4.0),
            n(y(bytes) + 4.0),
            esc(&remat_ir::format_bytes(bytes as u128))
        );
    }
    // The buffers, as laid out.
    let _ = writeln!(s, "<g id=\"buffers\">");
    for (i, b) in p.buffers.iter().enumerate() {
        if b.home != BufferHome::Arena || peak == 0 {
            continue;
        }
        let kind = l.kinds[i];
        let (x0, x1) = (x(b.first), x(b.last + 1));
        let _ = writeln!(
            s,
            "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
            kind_class(kind),
            n(x0),
            n(y(b.offset + b.extent())),
            n((x1 - x0).max(0.5)),
            n((b.extent() as f64 * scale).max(0.5)),
            colour(kind),
            esc(&format!(
                "{} bytes at offset {}, steps {}..{}: {}",
                b.bytes,
                b.offset,
                b.first,
                b.last,
                l.buffer_what(i)
            ))
        );
    }
    let _ = writeln!(s, "</g>");
    // Live bytes at each step (the maximum over the steps a pixel covers).
    if peak > 0 {
        let live = l.profile.live_bytes();
        let columns = (plot_w as usize).max(1);
        let mut points = String::new();
        let count = live.len();
        let col_max: Vec<usize> = (0..columns)
            .map(|c| {
                let lo = (c * count / columns).min(count.saturating_sub(1));
                let hi = ((c + 1) * count / columns).max(lo + 1).min(count);
                live[lo..hi].iter().copied().max().unwrap_or(0)
            })
            .collect();
        // A step line: a point only where the value changes.
        let step = plot_w / columns as f64;
        let mut prev = col_max[0];
        let _ = write!(points, "{},{} ", n(LEFT), n(y(prev)));
        for (c, &b) in col_max.iter().enumerate().skip(1) {
            if b != prev {
                let xc = n(LEFT + c as f64 * step);
                let _ = write!(points, "{xc},{} {xc},{} ", n(y(prev)), n(y(b)));
                prev = b;
            }
        }
        let _ = write!(points, "{},{}", n(LEFT + plot_w), n(y(prev)));
        let _ = writeln!(
            s,
            "<polyline id=\"live\" points=\"{}\" fill=\"none\" stroke=\"#000000\" stroke-width=\"1\"/>",
            points.trim_end()
        );
    }
    // Forward | backward.
    let first_bwd = p.step_eqns.iter().position(|e| e.is_some_and(|e| !l.is_forward(e)));
    let axis_y = TOP + PLOT_H;
    if let Some(b) = first_bwd {
        let xb = x(b);
        let _ = writeln!(
            s,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#555555\" stroke-dasharray=\"4 3\"/>",
            n(xb),
            n(TOP),
            n(axis_y)
        );
        for (label, lo, hi) in [("forward", LEFT, xb), ("backward", xb, LEFT + plot_w)] {
            if hi - lo > 70.0 {
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555555\">{label}</text>",
                    n((lo + hi) / 2.0),
                    n(TOP - 4.0)
                );
            }
        }
    }
    // Groups of steps: one label per top-level equation that fits its own.
    let mut last_end = f64::MIN;
    for (e, span) in l.eqn_positions().iter().enumerate() {
        let Some((lo, hi)) = *span else { continue };
        let (x0, x1) = (x(lo), x(hi + 1));
        let label = group_label(l, e);
        let room = ((x1 - x0) / 6.5) as usize;
        if room < 6 || x0 < last_end {
            continue;
        }
        let _ = writeln!(
            s,
            "<text class=\"group\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
            n((x0 + x1) / 2.0),
            n(axis_y + 14.0),
            esc(&fit(&label, room))
        );
        last_end = x1;
    }
    // The parameters: caller memory, there from the first step to the last.
    let params: usize = l.program.in_avals().iter().map(|a| a.size_in_bytes()).sum();
    let _ = writeln!(
        s,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"8\" fill=\"{PARAMETERS}\"><title>parameters and other inputs: {} bytes of caller memory (outside the arena)</title></rect>",
        n(LEFT),
        n(axis_y + 22.0),
        n(plot_w),
        params
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\">inputs</text>",
        n(LEFT - 4.0),
        n(axis_y + 30.0)
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" font-size=\"10\">step 0 .. {} ({} steps, {} equations)</text>",
        n(LEFT),
        n(axis_y + 46.0),
        p.positions.saturating_sub(1),
        p.positions,
        l.program.eqns.len()
    );
    // The peak, marked and explained.
    if peak > 0 {
        let xp = x(p.peak.position) + (x(p.peak.position + 1) - x(p.peak.position)) / 2.0;
        let _ = writeln!(
            s,
            "<line id=\"peak\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#000000\" stroke-width=\"1.5\" stroke-dasharray=\"2 2\"/>",
            n(xp),
            n(TOP),
            n(axis_y)
        );
        let anchor = if xp > LEFT + plot_w / 2.0 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" font-weight=\"bold\">peak {} at step {}</text>",
            n(xp + dx),
            n(TOP + 12.0),
            esc(&remat_ir::format_bytes(peak as u128)),
            p.peak.position
        );
        let head = format!(
            "At the peak (step {}): {} buffers, {} bytes; {} bytes unused (holes and alignment)",
            p.peak.position,
            p.peak.live.len(),
            p.peak.live_bytes,
            p.peak.unused_bytes
        );
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>",
            n(LEFT),
            n(list_top),
            esc(&fit(&head, chars))
        );
        for (k, &i) in live_list.iter().take(listed).enumerate() {
            let b = &p.buffers[i];
            let yy = list_top + 18.0 * (k as f64 + 1.0);
            let what = match l.rows.iter().find(|r| r.buffer == Some(i)) {
                Some(r) => format!("residual {}", r.residual),
                None => l.buffer_what(i),
            };
            let _ = writeln!(
                s,
                "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{}\">{}</text>",
                n(LEFT),
                n(yy - 9.0),
                colour(l.kinds[i]),
                n(LEFT + 100.0),
                n(yy),
                b.bytes,
                n(LEFT + 108.0),
                n(yy),
                esc(&fit(&what, chars.saturating_sub(18)))
            );
        }
        if live_list.len() > listed {
            let rest: usize = live_list[listed..].iter().map(|&i| p.buffers[i].bytes).sum();
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\">and {} more buffers, {} bytes</text>",
                n(LEFT + 108.0),
                n(list_top + 18.0 * (listed as f64 + 1.0)),
                live_list.len() - listed,
                rest
            );
        }
    } else {
        let _ = writeln!(s, "<text x=\"{}\" y=\"{}\">The program needs no arena.</text>", n(LEFT + 8.0), n(TOP + 20.0));
    }
    if frame.legend {
        legend(&mut s, height as f64 - 14.0);
    }
    (s, height)
}

/// The colours' legend, one line at `legend_y`.
fn legend(s: &mut String, legend_y: f64) {
    let mut lx = LEFT;
    let kinds = [
        (RESIDUAL, "residuals"),
        (colour(BufferKind::Forward), "forward temporaries"),
        (colour(BufferKind::Backward), "gradients (backward)"),
        (colour(BufferKind::Temporary), "temporaries"),
        (colour(BufferKind::OutputCopy), "output copies"),
        (PARAMETERS, "parameters (caller memory)"),
    ];
    for (c, label) in kinds {
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{c}\"/><text x=\"{}\" y=\"{}\">{label}</text>",
            n(lx),
            n(legend_y - 9.0),
            n(lx + 14.0),
            n(legend_y)
        );
        lx += 14.0 + label.len() as f64 * 6.2 + 16.0;
    }
}

/// A top-level equation's label: its primitive, and the function (or line) it comes from.
fn group_label(l: &Ledger, e: usize) -> String {
    let eqn = &l.program.eqns[e];
    let src = &eqn.source;
    match (&src.function, src.is_unknown()) {
        (Some(f), _) => format!("{} ({f})", eqn.primitive.name()),
        (None, false) => format!("{} :{}", eqn.primitive.name(), src.line),
        (None, true) => eqn.primitive.name().to_string(),
    }
}

pub(crate) fn kind_class(k: BufferKind) -> &'static str {
    match k {
        BufferKind::Residual => "residual",
        BufferKind::Forward => "forward",
        BufferKind::Backward => "backward",
        BufferKind::Temporary => "temporary",
        BufferKind::OutputCopy => "copy",
    }
}
