//! The ledger's JSON form: the numbers of [`Ledger`], for `remat explain --json` and the
//! Python package.

use serde_json::{json, Value};

use super::{Ledger, ResidualHome};

impl Ledger {
    /// The ledger as one JSON object (`remat explain --json`, the Python package's
    /// `remat.explain`): `residuals` (one object per row), `peak` (position, buffers, the
    /// sum) and `plan` (the buffer planner's numbers).
    pub fn to_json(&self) -> Value {
        let l = self;
        let p = &l.profile;
        let rows: Vec<Value> = l
            .rows
            .iter()
            .map(|r| {
                let home = match &r.home {
                    ResidualHome::Arena { offset } => json!({"arena": offset}),
                    ResidualHome::InOutput(o) => json!({"inside_output": o}),
                    ResidualHome::HostPool => json!("host_pool"),
                    ResidualHome::Caller => json!("caller"),
                    ResidualHome::NoBuffer => json!("no_buffer"),
                };
                json!({
                    "aval": r.residual.aval.to_string(),
                    "bytes": r.residual.bytes,
                    "device_bytes": r.residual.device_bytes,
                    "kind": r.residual.kind.kind_name(),
                    "what": r.residual.kind.what(),
                    "text": r.residual.to_string(),
                    "source": super::source_words(&r.residual.source),
                    "made_by": r.made_by,
                    "home": home,
                    "first_step": r.first,
                    "last_step": r.last,
                    "peak_bytes": r.peak_bytes,
                    "why": r.why,
                    "recompute_eqns": r.recompute_eqns,
                    "recompute_flops": r.recompute_flops,
                    "extra_peak_bytes": r.extra_peak_bytes,
                })
            })
            .collect();
        let rest: Vec<Value> = l
            .rest
            .iter()
            .map(|b| json!({"bytes": b.bytes, "offset": b.offset, "kind": b.kind.name(), "what": b.what}))
            .collect();
        json!({
            "equations": l.program.eqns.len(),
            "forward_equations": l.split.as_ref().map(|s| s.num_fwd_eqns),
            "steps": p.positions,
            "per_device": l.sharded,
            "residuals": rows,
            "peak": {
                "step": p.peak.position,
                "equation": p.step_eqns.get(p.peak.position).copied().flatten(),
                "residual_bytes": l.residual_peak_bytes(),
                "other_buffers": rest,
                "other_bytes": l.rest_bytes(),
                "unused_bytes": p.peak.unused_bytes,
                "peak_bytes": l.peak_bytes(),
            },
            "plan": {
                "peak_bytes": p.plan.peak_bytes,
                "host_bytes": p.plan.host_bytes,
                "io_bytes": p.plan.io_bytes,
                "merged_across_checkpoints": p.plan.cse == remat_jit::CseScope::AcrossCheckpoints,
            },
        })
    }
}
