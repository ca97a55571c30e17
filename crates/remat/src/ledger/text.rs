//! The ledger as plain text for a terminal: one block per residual, the other buffers at
//! the peak, and the sum that reaches the planned peak.

use std::fmt::Write;

use super::{Ledger, ResidualHome};

fn place(ledger: &Ledger, position: usize) -> String {
    match ledger.profile.step_eqns.get(position).copied().flatten() {
        Some(e) => {
            let half = match &ledger.split {
                Some(_) if ledger.is_forward(e) => "forward ",
                Some(s) => return format!("backward equation {} ({})", e - s.num_fwd_eqns, eqn_words(ledger, e)),
                None => "",
            };
            format!("{half}equation {e} ({})", eqn_words(ledger, e))
        }
        None => "the copies into the outputs".into(),
    }
}

fn eqn_words(ledger: &Ledger, e: usize) -> String {
    let eqn = &ledger.program.eqns[e];
    format!("{}{}", eqn.primitive.name(), super::from_source(&eqn.source).replacen(" from ", " at ", 1))
}

pub(super) fn ledger_text(l: &Ledger) -> String {
    let mut out = String::new();
    let p = &l.profile;
    let peak = l.peak_bytes();
    match &l.split {
        Some(s) => {
            let _ = writeln!(
                out,
                "residual ledger: the vjp as one program, {} forward then {} backward equations, {} steps planned",
                s.num_fwd_eqns,
                l.program.eqns.len() - s.num_fwd_eqns,
                p.positions
            );
        }
        None => {
            let _ = writeln!(
                out,
                "memory ledger: {} equations, {} steps planned (no residual split: the program is explained as it is)",
                l.program.eqns.len(),
                p.positions
            );
        }
    }
    if l.sharded {
        let _ = writeln!(
            out,
            "per device: every byte below is one device's, planned on the program device 0 of the mesh runs \
             (docs/sharding.md)"
        );
    }
    let _ = writeln!(out);
    for (k, r) in l.rows.iter().enumerate() {
        let _ = writeln!(out, "residual {k}: {}", r.residual);
        let home = match &r.home {
            ResidualHome::Arena { offset } => format!("its own arena buffer at offset {offset}"),
            ResidualHome::InOutput(o) => format!("inside output {o} before it is written (no arena bytes)"),
            ResidualHome::HostPool => "the host pool".into(),
            ResidualHome::Caller => "the caller's memory (no arena bytes)".into(),
            ResidualHome::NoBuffer => "no buffer of its own (a view, or computed where it is read)".into(),
        };
        match l.sharded {
            true => {
                let (b, d) = (r.residual.bytes, r.residual.device_bytes);
                let _ = writeln!(out, "    {b} bytes, {d} on each device, {home}; {} bytes of the peak", r.peak_bytes);
            }
            false => {
                let _ = writeln!(out, "    {} bytes, {home}; {} bytes of the peak", r.residual.bytes, r.peak_bytes);
            }
        }
        if let Some(e) = r.made_by {
            let _ = writeln!(out, "    made by forward equation {e} ({})", eqn_words(l, e));
        }
        let _ = writeln!(out, "    lives from step {} ({})", r.first, place(l, r.first));
        let _ = writeln!(out, "            to step {} ({})", r.last, place(l, r.last));
        let _ = writeln!(out, "    why saved: {}", r.why);
        if r.made_by.is_some() {
            let _ = writeln!(
                out,
                "    recompute instead: {} equation{}, {} FLOPs{}",
                r.recompute_eqns,
                if r.recompute_eqns == 1 { "" } else { "s" },
                r.recompute_flops,
                r.extra_peak_bytes.map_or(String::new(), |x| format!(", peak {x:+} bytes"))
            );
        }
    }
    if l.split.is_some() && l.rows.is_empty() {
        let _ = writeln!(out, "no residuals: the backward half needs nothing from the forward half");
    }
    let _ = writeln!(out);
    if peak == 0 {
        let _ = writeln!(out, "peak: 0 bytes (the program needs no arena)");
        return out;
    }
    let _ = writeln!(out, "at the peak, step {} ({}):", p.peak.position, place(l, p.peak.position));
    for r in l.rows.iter().filter(|r| r.peak_bytes > 0) {
        let _ = writeln!(out, "    {:>12}  residual  {}", r.peak_bytes, r.residual);
    }
    for b in &l.rest {
        let _ = writeln!(out, "    {:>12}  {:<9} {}", b.bytes, short_kind(b.kind), b.what);
    }
    if p.peak.unused_bytes > 0 {
        let _ = writeln!(
            out,
            "    {:>12}  unused    holes between live buffers (first fit) and alignment",
            p.peak.unused_bytes
        );
    }
    let _ = writeln!(
        out,
        "peak: {} (residuals) + {} (other buffers) + {} (unused) = {} bytes, the planned peak ({})",
        l.residual_peak_bytes(),
        l.rest_bytes(),
        p.peak.unused_bytes,
        l.residual_peak_bytes() + l.rest_bytes() + p.peak.unused_bytes,
        remat_ir::format_bytes(peak as u128)
    );
    out
}

fn short_kind(k: super::BufferKind) -> &'static str {
    match k {
        super::BufferKind::Residual => "residual",
        super::BufferKind::Forward => "forward",
        super::BufferKind::Backward => "backward",
        super::BufferKind::Temporary => "temporary",
        super::BufferKind::OutputCopy => "copy",
    }
}
