//! A plan's report in JAX's words: the residual lines of what it saves, recomputes and
//! offloads, what holds the smallest peak (for the error of a budget no plan fits), and the
//! description of a function cut into checkpointed segments.

use remat_ad::{Residual, ResidualKind};
use remat_ir::{Jaxpr, Primitive};

use crate::model::{Evaluated, Model};
use crate::segment;

/// The residuals of `vjp`, each offloaded one (JAX's words name no source for a
/// `device_put`'s output: `output of device_put from `) with the source of the forward
/// equation whose value it moves to host memory.
pub(crate) fn with_sources(vjp: &remat_ad::Vjp) -> Vec<Residual> {
    let fwd = &vjp.fwd;
    let producer = |v: remat_ir::Var| fwd.eqns.iter().find(|e| e.outvars.contains(&v));
    vjp.residuals
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let mut r = r.clone();
            if !r.source.is_unknown() || !matches!(&r.kind, ResidualKind::Output(p) if p == "device_put") {
                return r;
            }
            let moved = match fwd.outvars.get(vjp.num_outs + k) {
                Some(remat_ir::Atom::Var(v)) => producer(*v).and_then(|put| {
                    let at = put.outvars.iter().position(|o| o == v)?;
                    match put.invars.get(at)? {
                        remat_ir::Atom::Var(u) => producer(*u),
                        remat_ir::Atom::Lit(_) => None,
                    }
                }),
                _ => None,
            };
            if let Some(eqn) = moved {
                r.source = eqn.source.clone();
            }
            r
        })
        .collect()
}

/// What holds the smallest plan's peak: the arguments and outputs, and its largest residuals.
pub(crate) fn held_by(e: &Evaluated) -> String {
    let mut res: Vec<&Residual> = e
        .vjp
        .residuals
        .iter()
        .filter(|r| matches!(r.kind, ResidualKind::Output(_) | ResidualKind::Named(_) | ResidualKind::Jit(_)))
        .collect();
    res.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    let saved: usize = res.iter().map(|r| r.bytes).sum();
    let largest: Vec<String> = res.iter().take(3).map(|r| r.to_string()).collect();
    let mut s = format!("that plan saves {saved} bytes beyond the arguments");
    if largest.is_empty() {
        s.push_str(" (every saved value is an argument)");
    } else {
        s.push_str(&format!(" (the largest: {})", largest.join("; ")));
    }
    s.push_str(&format!(
        "; the arguments and outputs ({} bytes) are outside the peak, which is the arena of the forward and backward halves' values (values may live in an output's memory before it is written)",
        e.io_bytes
    ));
    s
}

/// The outputs of the equations `eqns` of `model`'s body in JAX's residual words.
pub(crate) fn recomputed_lines(model: &Model, recompute: &[usize]) -> Vec<String> {
    let body = model.body();
    recompute
        .iter()
        .flat_map(|&i| {
            let e = &body.eqns[i];
            e.outvars.iter().map(move |&v| {
                let kind = match &e.primitive {
                    Primitive::Name { name } => ResidualKind::Named(name.clone()),
                    other => ResidualKind::Output(other.name().to_string()),
                };
                let aval = body.aval(v).clone();
                let bytes = aval.size_in_bytes();
                Residual { aval, kind, source: e.source.clone(), bytes, device_bytes: bytes }.to_string()
            })
        })
        .collect()
}

/// `N checkpointed segments, ... at f.jaxpr lines 7-9, 11-69 (dots), ...`: where each
/// segment's first and last equations come from (the file named once when they share it),
/// and what it saves.
pub(crate) fn segments_description(flat: &Jaxpr, spans: &[(usize, usize, segment::Keep)]) -> String {
    // Each segment's first and last source line (the equations of an inlined call come
    // from other lines than their neighbours': the lowest and highest, not the ends).
    let ends: Vec<(&remat_ir::SourceInfo, &remat_ir::SourceInfo, segment::Keep)> = spans
        .iter()
        .map(|&(a, e, keep)| {
            let known = || flat.eqns[a..e].iter().map(|q| &q.source).filter(|s| !s.is_unknown());
            let lo = known().min_by_key(|s| (s.line, s.column)).unwrap_or(&flat.eqns[a].source);
            let hi = known().max_by_key(|s| (s.line, s.column)).unwrap_or(&flat.eqns[e - 1].source);
            (lo, hi, keep)
        })
        .collect();
    let one_file = ends.iter().all(|(a, e, _)| a.file == ends[0].0.file && e.file == ends[0].0.file);
    let at: Vec<String> = ends
        .iter()
        .map(|(a, e, keep)| {
            let range = match (one_file, a.line == e.line) {
                (true, true) => a.line.to_string(),
                (true, false) => format!("{}-{}", a.line, e.line),
                (false, _) => format!("{a} to {e}"),
            };
            match keep {
                segment::Keep::Nothing => range,
                segment::Keep::Dots => format!("{range} (dots)"),
            }
        })
        .collect();
    let place = match (one_file, ends.first()) {
        (true, Some((a, _, _))) => format!("at {} lines {}", a.file, at.join(", ")),
        _ => format!("at {}", at.join(", ")),
    };
    let dots = spans.iter().filter(|s| s.2 == segment::Keep::Dots).count();
    let saves = match (spans.len(), dots) {
        (1, 0) => "1 checkpointed segment, saving nothing".to_string(),
        (1, _) => "1 checkpointed segment, saving its products (dots_saveable)".to_string(),
        (n, 0) => format!("{n} checkpointed segments, each saving nothing"),
        (n, _) => format!(
            "{n} checkpointed segments, those marked (dots) saving their products (dots_saveable), the others nothing"
        ),
    };
    format!(
        "{saves} (the forward half keeps their boundaries, the backward half recomputes one segment at a time), {place}"
    )
}
