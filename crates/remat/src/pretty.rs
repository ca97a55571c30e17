//! Terminal layout of a vjp's two programs: the forward and backward jaxprs side by side
//! under "forward computation:" and "backward computation:", wrapped to the terminal's
//! width. `remat-ad` gives the two texts (`remat_ad::fwd_bwd_strings`); how they sit on a
//! screen is presentation, and lives here.

use std::io::IsTerminal;

/// The two texts laid out for standard output: fitted to the terminal's width (`COLUMNS`,
/// else 160), or plain (unwrapped) when standard output is not a terminal.
pub fn print_fwd_bwd_text(fwd: &str, bwd: &str) -> String {
    let width = if std::io::stdout().is_terminal() {
        Some(std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(160))
    } else {
        None
    };
    side_by_side(fwd, bwd, width)
}

/// Writes `text` to standard output; a closed pipe (`... | head`) is not an error (where
/// `print!` would panic).
pub fn write_stdout(text: &str) {
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
}

/// Lays two texts out side by side under the headers "forward computation:" and
/// "backward computation:". With a `width`, each column is at most half of it and longer
/// lines wrap; without one, the columns are as wide as their longest line.
pub fn side_by_side(left: &str, right: &str, width: Option<usize>) -> String {
    const PAD: usize = 2;
    const GAP: usize = 4;
    let wrap = |text: &str, w: Option<usize>| -> Vec<String> {
        let mut lines = Vec::new();
        for line in text.lines() {
            match w {
                Some(w) => wrap_line(line, w, &mut lines),
                None => lines.push(line.to_string()),
            }
        }
        lines
    };
    let col = width.map(|w| (w.saturating_sub(PAD + GAP) / 2).max(20));
    let mut l = vec!["forward computation:".to_string(), String::new()];
    l.extend(wrap(left, col));
    let mut r = vec!["backward computation:".to_string(), String::new()];
    r.extend(wrap(right, col));
    let lw = l.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let lw = col.map_or(lw, |c| lw.min(c));
    let mut out = String::new();
    for i in 0..l.len().max(r.len()) {
        let a = l.get(i).map_or("", String::as_str);
        let b = r.get(i).map_or("", String::as_str);
        let line = if b.is_empty() { format!("{:PAD$}{a}", "") } else { format!("{:PAD$}{a:<lw$}{:GAP$}{b}", "", "") };
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Wraps one line to `width` columns, breaking after a space where there is one;
/// continuation lines are indented two more than the line.
fn wrap_line(line: &str, width: usize, out: &mut Vec<String>) {
    let indent = line.chars().take_while(|c| *c == ' ').count();
    let mut rest: Vec<char> = line.chars().collect();
    let mut first = true;
    loop {
        let prefix = if first { 0 } else { (indent + 2).min(width / 2) };
        let room = width - prefix;
        if rest.len() <= room {
            out.push(format!("{:prefix$}{}", "", rest.iter().collect::<String>()));
            return;
        }
        let cut = rest[..room].iter().rposition(|c| *c == ' ').filter(|&p| p > indent).map_or(room, |p| p + 1);
        out.push(format!("{:prefix$}{}", "", rest[..cut].iter().collect::<String>().trim_end()));
        rest = rest[cut..].to_vec();
        first = false;
    }
}
