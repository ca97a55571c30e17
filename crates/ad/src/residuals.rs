//! What the forward half saves: `saved_residuals` and `print_saved_residuals` exactly as
//! JAX's `jax.ad_checkpoint` prints them, and `print_fwd_bwd`, the forward and backward
//! jaxprs side by side.
//!
//! JAX's order (`_saved_residuals`): literals, then constants, then arguments in argument
//! order, then equation outputs in forward-program order; a `reduce_precision` producer is
//! looked through. An equation output is `named '{name}'` for `name`, `output of jitted
//! function '{name}'` for `jit`, else `output of {primitive}`; its source is
//! `file:line:col (function)`, with `:col` left out when 0 and ` (function)` when unknown.

use std::collections::HashMap;
use std::fmt;
use std::io::IsTerminal;

use remat_ir::{pp_jaxpr, Atom, Aval, Jaxpr, Primitive, SourceInfo, Var};

use crate::vjp::vjp;
use crate::AdError;

/// What a residual is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResidualKind {
    Literal,
    Constant,
    /// An input of the function, by its argument name.
    Argument(String),
    /// The output of an equation of this primitive.
    Output(String),
    /// The output of a `checkpoint_name`.
    Named(String),
    /// The output of a `jit` call of this name.
    Jit(String),
}

impl ResidualKind {
    /// The conformance data's `kind` field.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ResidualKind::Literal => "literal",
            ResidualKind::Constant => "constant",
            ResidualKind::Argument(_) => "argument",
            ResidualKind::Output(_) => "output",
            ResidualKind::Named(_) => "named",
            ResidualKind::Jit(_) => "jit",
        }
    }

    /// The conformance data's `what` field (empty for literals and constants).
    pub fn what(&self) -> &str {
        match self {
            ResidualKind::Literal | ResidualKind::Constant => "",
            ResidualKind::Argument(s) | ResidualKind::Output(s) | ResidualKind::Named(s) | ResidualKind::Jit(s) => s,
        }
    }
}

/// One saved residual.
#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    pub aval: Aval,
    pub kind: ResidualKind,
    /// Where the producing equation came from (unknown for arguments, constants and
    /// equations JAX's machinery adds, such as an offloading `device_put`).
    pub source: SourceInfo,
    pub bytes: usize,
}

/// JAX's `source_info_util.summarize`.
fn summarize(s: &SourceInfo) -> String {
    if s.is_unknown() {
        return String::new();
    }
    let mut out = format!("{}:{}", s.file, s.line);
    if s.column != 0 {
        out.push_str(&format!(":{}", s.column));
    }
    if let Some(f) = &s.function {
        out.push_str(&format!(" ({f})"));
    }
    out
}

impl fmt::Display for Residual {
    /// One line of `print_saved_residuals`: `f32[5] output of cos from f.py:3:8 (g)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = summarize(&self.source);
        match &self.kind {
            ResidualKind::Literal => write!(f, "{} from a literal", self.aval),
            ResidualKind::Constant => write!(f, "{} from a constant", self.aval),
            ResidualKind::Argument(name) => write!(f, "{} from the argument {name}", self.aval),
            ResidualKind::Output(prim) => write!(f, "{} output of {prim} from {src}", self.aval),
            ResidualKind::Named(name) => write!(f, "{} named '{name}' from {src}", self.aval),
            ResidualKind::Jit(name) => write!(f, "{} output of jitted function '{name}' from {src}", self.aval),
        }
    }
}

/// Where a residual of the forward jaxpr comes from, with its sort key.
#[derive(Clone, Debug)]
enum Origin {
    Literal,
    Constant(usize),
    Argument(usize),
    Eqn(usize, usize),
}

impl Origin {
    fn key(&self) -> (u8, usize, usize) {
        match self {
            Origin::Literal => (0, 0, 0),
            Origin::Constant(i) => (1, *i, 0),
            Origin::Argument(i) => (2, *i, 0),
            Origin::Eqn(e, j) => (3, *e, *j),
        }
    }
}

fn origins(fwd: &Jaxpr, num_outs: usize) -> Vec<Origin> {
    let mut producer: HashMap<Var, (usize, usize)> = HashMap::new();
    for (e, eqn) in fwd.eqns.iter().enumerate() {
        for (j, &v) in eqn.outvars.iter().enumerate() {
            producer.insert(v, (e, j));
        }
    }
    fwd.outvars[num_outs..]
        .iter()
        .map(|a| {
            let Atom::Var(mut v) = *a else { return Origin::Literal };
            // Look through a `reduce_precision` producer.
            if let Some(&(e, _)) = producer.get(&v) {
                if let (Primitive::ReducePrecision { .. }, Some(Atom::Var(src))) =
                    (&fwd.eqns[e].primitive, fwd.eqns[e].invars.first())
                {
                    v = *src;
                }
            }
            if let Some(i) = fwd.constvars.iter().position(|&c| c == v) {
                Origin::Constant(i)
            } else if let Some(i) = fwd.invars.iter().position(|&x| x == v) {
                Origin::Argument(i)
            } else {
                let (e, j) = producer[&v];
                Origin::Eqn(e, j)
            }
        })
        .collect()
}

/// The permutation putting the forward jaxpr's residual outputs (after its `num_outs`
/// outputs) in JAX's printing order.
pub(crate) fn residual_order(fwd: &Jaxpr, num_outs: usize) -> Vec<usize> {
    let o = origins(fwd, num_outs);
    let mut idx: Vec<usize> = (0..o.len()).collect();
    idx.sort_by_key(|&i| o[i].key());
    idx
}

/// Describes the residual outputs of a forward jaxpr.
pub(crate) fn describe_residuals(fwd: &Jaxpr, num_outs: usize, arg_names: &[String]) -> Vec<Residual> {
    origins(fwd, num_outs)
        .into_iter()
        .zip(&fwd.outvars[num_outs..])
        .map(|(o, a)| {
            let aval = fwd.atom_aval(a);
            let (kind, source) = match o {
                Origin::Literal => (ResidualKind::Literal, SourceInfo::unknown()),
                Origin::Constant(_) => (ResidualKind::Constant, SourceInfo::unknown()),
                Origin::Argument(i) => {
                    let name = match arg_names.get(i) {
                        Some(n) if !n.is_empty() => n.clone(),
                        // JAX's fallback, missing its f-string prefix.
                        _ => "at flattened index {i}".to_string(),
                    };
                    (ResidualKind::Argument(name), SourceInfo::unknown())
                }
                Origin::Eqn(e, _) => {
                    let eqn = &fwd.eqns[e];
                    let kind = if let Primitive::Name { name } = &eqn.primitive {
                        ResidualKind::Named(name.clone())
                    } else if let Primitive::Jit { name, .. } = &eqn.primitive {
                        ResidualKind::Jit(name.clone())
                    } else {
                        ResidualKind::Output(eqn.primitive.name().to_string())
                    };
                    (kind, eqn.source.clone())
                }
            };
            Residual { bytes: aval.size_in_bytes(), aval, kind, source }
        })
        .collect()
}

/// `jax.ad_checkpoint.saved_residuals`: what the vjp of `jaxpr` saves, in JAX's order.
pub fn saved_residuals(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<Vec<Residual>, AdError> {
    Ok(vjp(jaxpr, arg_names)?.residuals)
}

/// `jax.ad_checkpoint.print_saved_residuals`, as a string (one line per residual).
pub fn print_saved_residuals(jaxpr: &Jaxpr, arg_names: &[String]) -> Result<String, AdError> {
    let mut out = String::new();
    for r in saved_residuals(jaxpr, arg_names)? {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// The forward and backward jaxprs of the vjp of `jaxpr`, printed.
pub fn fwd_bwd_strings(jaxpr: &Jaxpr) -> Result<(String, String), AdError> {
    let v = vjp(jaxpr, &[])?;
    Ok((pp_jaxpr(&v.fwd), pp_jaxpr(&v.bwd)))
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

/// Prints the forward and backward halves of the vjp of `jaxpr` side by side on standard
/// output, fitted to the terminal's width (`COLUMNS`, else 160), or plain (unwrapped) when
/// standard output is not a terminal.
pub fn print_fwd_bwd(jaxpr: &Jaxpr) -> Result<(), AdError> {
    let (fwd, bwd) = fwd_bwd_strings(jaxpr)?;
    let width = if std::io::stdout().is_terminal() {
        Some(std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(160))
    } else {
        None
    };
    let text = side_by_side(&fwd, &bwd, width);
    // A closed pipe (`remat fwd-bwd f.jaxpr | head`) is not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(())
}
