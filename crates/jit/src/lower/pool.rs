//! Small windowed reductions (the pools of a CNN) as one elementwise kernel.
//!
//! A `Reduce` step over `[out..., window...]` with a 2x2 window reduces its innermost, tiny
//! axes: four gathered scalars per vector, then a horizontal combine (a 2x2 max pool of a
//! 32x32x32x64 batch took 5.5% of `cnn_plain`'s samples). Here the window's offsets are
//! unrolled instead, `op(...op(op(identity, w_0), w_1)..., w_last)` over the output, so the
//! loop runs along the output's contiguous axis (the features) with vector loads. The
//! combination order is the `Reduce` step's (its accumulator starts at the identity and
//! takes the offsets in row-major order), so results are bit for bit the same, `-0.0` and
//! NaN included.

use remat_ir::{Aval, DType, ReduceOp, Window};

use super::Lowering;
use crate::expr::{Expr, View};
use crate::program::{BufId, Step};

/// Windows of at most this many offsets are unrolled (two loads and one operation each,
/// inside the fused-expression limit).
const MAX_UNROLLED_WINDOW: usize = 16;

impl Lowering {
    /// Writes the `op` reduction of the windows of the padded view `pv` into `buf` (of
    /// `out`'s shape) as one kernel, if the window is small and the dtype `f32`; `false`
    /// (nothing written) otherwise.
    pub(super) fn reduce_window_unrolled(
        &mut self,
        op: ReduceOp,
        w: &Window,
        pv: &View,
        out: &Aval,
        buf: BufId,
    ) -> bool {
        let n_win: usize = w.window_dimensions.iter().product();
        if out.dtype != DType::F32 || n_win == 0 || n_win > MAX_UNROLLED_WINDOW {
            return false;
        }
        let bin = super::reduce_binary(op);
        let rank = out.rank();
        let mut acc = Expr::Lit(super::reduce_identity(op, out.dtype));
        for j in 0..n_win {
            // Offset j's multi-index, row-major over the window.
            let (mut flat, mut offset) = (j, pv.offset);
            for d in (0..rank).rev() {
                let k = flat % w.window_dimensions[d];
                flat /= w.window_dimensions[d];
                offset += (k * w.window_dilation[d]) as i64 * pv.strides[d];
            }
            let strides = (0..rank).map(|d| w.window_strides[d] as i64 * pv.strides[d]).collect();
            let load = Expr::Load(View { offset, strides, ..pv.clone() });
            acc = Expr::Binary(bin, out.dtype, Box::new(acc), Box::new(load));
        }
        let dst = View::contiguous(buf, out.dtype, &out.shape);
        self.push_step(Step::Kernel { space: out.shape.clone(), dst, src: acc });
        true
    }
}
