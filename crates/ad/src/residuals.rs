//! What a forward jaxpr saves, described and worded exactly as JAX's
//! `jax.ad_checkpoint.saved_residuals` and `print_saved_residuals` do.
//!
//! This module only reads a forward jaxpr that is given to it; `vjp.rs` computes the split
//! and calls it (`vjp` -> `residuals`, never the reverse), and `saved_residuals`,
//! `print_saved_residuals` and `fwd_bwd_strings` live there. Laying the two programs out
//! on a terminal is the facade's (`remat::side_by_side`).
//!
//! JAX's order (`_saved_residuals`): literals, then constants, then arguments in argument
//! order, then equation outputs in forward-program order; a `reduce_precision` producer is
//! looked through. An equation output is `named '{name}'` for `name`, `output of jitted
//! function '{name}'` for `jit`, else `output of {primitive}`; its source is
//! `file:line:col (function)`, with `:col` left out when 0 and ` (function)` when unknown.

use std::collections::HashMap;
use std::fmt;

use remat_ir::layout::{Arguments, Layouts};
use remat_ir::{Atom, Aval, Jaxpr, Primitive, SourceInfo, Var};

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
    /// What one device holds of it, where the program says how it is split over a mesh
    /// ([`device_layouts`]); `bytes` where it does not (an argument as given, a value on one
    /// device).
    pub device_bytes: usize,
}

/// JAX's `source_info_util.summarize`: `file:line:col (function)`, empty where unknown.
pub fn summarize(s: &SourceInfo) -> String {
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
    // What one device keeps: the residuals of `jax.vjp` on the user's arrays.
    let layouts = Layouts::of(fwd, Arguments::Whole);
    origins(fwd, num_outs)
        .into_iter()
        .zip(&fwd.outvars[num_outs..])
        .map(|(o, a)| {
            let device_bytes = match a {
                Atom::Var(v) => layouts.device_bytes(fwd, *v),
                Atom::Lit(_) => fwd.atom_aval(a).size_in_bytes(),
            };
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
            Residual { bytes: aval.size_in_bytes(), device_bytes, aval, kind, source }
        })
        .collect()
}

/// `jax.ad_checkpoint.print_saved_residuals`'s text: one line per residual.
pub(crate) fn residuals_text(residuals: &[Residual]) -> String {
    let mut out = String::new();
    for r in residuals {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    out
}
