//! The split as Graphviz DOT (`remat fwd-bwd --dot`): one node per equation in two
//! clusters, forward and backward, data edges within each half, and each residual a red
//! edge from the forward equation that makes it (or an input node) to the backward
//! equations that read it. Equations are numbered within their half, as the report does.

use std::fmt::Write;

use remat_ir::{Atom, Jaxpr};

use crate::ledger::source_words;

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn nodes(out: &mut String, half: &str, j: &Jaxpr) {
    let _ = writeln!(out, "  subgraph cluster_{half} {{\n    label={};", quote(half));
    for (i, v) in j.invars.iter().enumerate() {
        let _ = writeln!(
            out,
            "    {half}_in{i} [shape=box, style=dashed, label={}];",
            quote(&format!("in {i}: {}", j.aval(*v)))
        );
    }
    for (e, eqn) in j.eqns.iter().enumerate() {
        let outs: Vec<String> = eqn.outvars.iter().map(|&v| j.aval(v).to_string()).collect();
        let mut label = format!("{e}: {} {}", eqn.primitive.name(), outs.join(" "));
        if !eqn.source.is_unknown() {
            label.push_str(&format!("\\n{}", source_words(&eqn.source).replace('"', "'")));
        }
        let _ = writeln!(out, "    {half}_{e} [shape=box, label=\"{}\"];", label.replace('"', "\\\""));
    }
    let _ = writeln!(out, "  }}");
    // Data edges within the half.
    let mut producer = vec![None; j.vars.len()];
    for (i, v) in j.invars.iter().enumerate() {
        producer[v.index()] = Some(format!("{half}_in{i}"));
    }
    for (e, eqn) in j.eqns.iter().enumerate() {
        for a in &eqn.invars {
            if let Some(Some(p)) = a.as_var().map(|v| producer[v.index()].clone()) {
                if !p.starts_with(&format!("{half}_in")) {
                    let _ = writeln!(out, "  {p} -> {half}_{e};");
                }
            }
        }
        for v in &eqn.outvars {
            producer[v.index()] = Some(format!("{half}_{e}"));
        }
    }
}

/// The vjp's two halves and their residuals as a DOT graph.
pub fn fwd_bwd_dot(v: &remat_ad::Vjp) -> String {
    let mut out = String::from("digraph vjp {\n  rankdir=LR;\n  node [fontname=\"DejaVu Sans Mono\", fontsize=10];\n");
    nodes(&mut out, "forward", &v.fwd);
    nodes(&mut out, "backward", &v.bwd);
    let mut producer = vec![None; v.fwd.vars.len()];
    for (i, x) in v.fwd.invars.iter().enumerate() {
        producer[x.index()] = Some(format!("forward_in{i}"));
    }
    for (e, eqn) in v.fwd.eqns.iter().enumerate() {
        for x in &eqn.outvars {
            producer[x.index()] = Some(format!("forward_{e}"));
        }
    }
    for (k, (res, atom)) in v.residuals.iter().zip(&v.fwd.outvars[v.num_outs..]).enumerate() {
        let from = match atom.as_var().and_then(|x| producer[x.index()].clone()) {
            Some(p) => p,
            None => continue,
        };
        let inner = v.bwd.invars[k];
        for (e, eqn) in v.bwd.eqns.iter().enumerate() {
            if eqn.invars.contains(&Atom::Var(inner)) {
                let _ =
                    writeln!(out, "  {from} -> backward_{e} [color=\"#d62728\", label={}];", quote(&res.to_string()));
            }
        }
    }
    out.push_str("}\n");
    out
}
