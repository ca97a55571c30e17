//! The lowering of the primitives the runtime computes over whole buffers (`gather`, the
//! scatters, `sort`, `top_k`, `argmin`, the cumulative reductions): one `Step::Native`
//! each, its operands materialized row-major.

use remat_ir::{Aval, Primitive};

use super::{Lowering, Val};
use crate::expr::{Expr, View};
use crate::program::{BufId, NativeDesc, Step};

impl Lowering {
    /// A call of the runtime (`native::indexing`) over whole row-major buffers: each
    /// operand materialized (a load at offset 0 as it is), each result in its own buffer.
    pub(crate) fn native(
        &mut self,
        prim: &Primitive,
        ins: Vec<Val>,
        out_avals: &[Aval],
        targets: &[Option<BufId>],
    ) -> Vec<Val> {
        let mut bufs = Vec::with_capacity(ins.len() + out_avals.len());
        let in_avals: Vec<Aval> = ins.iter().map(|v| v.aval.clone()).collect();
        for v in ins {
            let whole = self.materialize(v, None);
            let (view, _) = self.as_view(whole);
            bufs.push(view.buf);
        }
        let mut outs = Vec::with_capacity(out_avals.len());
        for (i, aval) in out_avals.iter().enumerate() {
            let buf = targets.get(i).copied().flatten().unwrap_or_else(|| self.new_buf(aval));
            bufs.push(buf);
            outs.push(Val { expr: Expr::Load(View::contiguous(buf, aval.dtype, &aval.shape)), aval: aval.clone() });
        }
        let num_ins = in_avals.len();
        let step = Step::Native { desc: self.prog.natives.len(), bufs, num_ins };
        let canon = step.canonical_buffers();
        let slots = step_slots(&step, &canon);
        self.prog.natives.push(NativeDesc { prim: prim.clone(), in_avals, out_avals: out_avals.to_vec(), slots });
        self.push_step(step);
        outs
    }
}

/// Each operand's and result's position in the step's base-address array.
fn step_slots(step: &Step, canon: &[BufId]) -> Vec<usize> {
    let Step::Native { bufs, .. } = step else { return Vec::new() };
    bufs.iter().map(|b| canon.iter().position(|c| c == b).unwrap_or(0)).collect()
}
