//! The GEMM operands of a convolution lowered as im2col: the order of the product's M and K
//! axes, and the layout its patches are copied in.
//!
//! `conv` (in `window.rs`) describes the product as views: patches `[group, M..., K...]`
//! with `M = (N, out spatial...)` and `K = (window..., I)`, and the kernel `[group, K...,
//! O]`. Which of those axes are walked contiguously depends on the dimension numbers. In a
//! forward NHWC/HWIO convolution the features `I` are innermost in memory, and a row-major
//! `[M, K]` copy of the patches reads runs of `I` features. In the weight gradient JAX emits
//! (`lhs_spec=(3, 0, 1, 2)`: the batch contracted, the input features as `N`, the
//! cotangent's whole image as the window), the contiguous axis is `N`, an M axis: the same
//! copy read one element per 64 KiB (a 3x3x64x128 weight gradient of a 32x16x16 batch took
//! 4.7 M such reads). So:
//!
//! - the K axes are ordered by the kernel's strides, largest first, and the M axes by the
//!   patches' (the result's axes follow, through a view), so that each operand's axes nest
//!   where its memory allows and the copies walk memory forwards;
//! - when the patches need a copy and their contiguous axis is an M axis, they are copied
//!   as `[group, K..., M...]` (runs along M, as a forward im2col does), and the GEMM reads
//!   them column-major;
//! - an operand that needs a copy is copied here, each one on its own: the GEMM path would
//!   otherwise copy both whenever one does not nest, including an unpadded cotangent that
//!   already does.
//!
//! What it keeps true: the returned views hold the same elements at the same logical
//! positions as the permuted input views; only memory layout and axis order change.

use remat_ir::Aval;

use super::{Lowering, Val};
use crate::expr::{row_major_strides, Expr, View};
use crate::program::Step;

/// A convolution's product operands, ready for the GEMM: `patches` `[group, M..., K...]`,
/// `kernel` `[group, K..., O]`, each with its M and K axes in the chosen order, and
/// `m_order[j]`, the M axis (0 = `N`, `1 + s` = spatial axis `s`) at position `1 + j`.
pub(super) struct ConvOperands {
    pub patches: Val,
    pub kernel: Val,
    pub m_order: Vec<usize>,
}

/// Whether the axes `shape`/`strides` nest into one stride (row-major within the group,
/// unit axes ignored) and walk forwards.
fn nests(shape: &[usize], strides: &[i64]) -> bool {
    let mut inner: Option<(usize, i64)> = None;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n == 1 {
            continue;
        }
        if s < 0 {
            return false;
        }
        if let Some((m, t)) = inner {
            if s != t * m as i64 {
                return false;
            }
        }
        inner = Some((n, s));
    }
    true
}

/// `0..n` ordered by `key` largest first (stable; unit axes keep their place relative to
/// each other and sort as if their stride were 0).
fn by_stride(shape: &[usize], strides: &[i64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by_key(|&a| std::cmp::Reverse(if shape[a] == 1 { 0 } else { strides[a].unsigned_abs() }));
    order
}

fn pick<T: Copy>(xs: &[T], order: &[usize]) -> Vec<T> {
    order.iter().map(|&a| xs[a]).collect()
}

impl Lowering {
    /// The product's operands for `conv`: `patches` `[group, M..., K...]` and `kernel`
    /// `[group, K..., O]` (views), with `ns` spatial axes, reordered and copied as the
    /// module's comment says.
    pub(super) fn conv_gemm_operands(&mut self, patches: &Val, kernel: &Val, ns: usize) -> ConvOperands {
        let (Expr::Load(pv), Expr::Load(kv)) = (&patches.expr, &kernel.expr) else {
            unreachable!("patches and kernel are views")
        };
        let (ps, ks) = (&patches.aval.shape, &kernel.aval.shape);
        let n = 1 + ns; // M axes, and K axes
        let k_order = by_stride(&ks[1..1 + n], &kv.strides[1..1 + n]);
        let m_order = by_stride(&ps[1..1 + n], &pv.strides[1..1 + n]);
        // Logical axis lists after the reordering.
        let mut p_axes = vec![0];
        p_axes.extend(m_order.iter().map(|&a| 1 + a));
        p_axes.extend(k_order.iter().map(|&a| 1 + n + a));
        let mut k_axes = vec![0];
        k_axes.extend(k_order.iter().map(|&a| 1 + a));
        k_axes.push(1 + n);
        let p_shape = pick(ps, &p_axes);
        let p_view = View { strides: pick(&pv.strides, &p_axes), ..pv.clone() };
        let k_shape = pick(ks, &k_axes);
        let k_view = View { strides: pick(&kv.strides, &k_axes), ..kv.clone() };

        let (m_shape, k_shape_p) = (&p_shape[1..1 + n], &p_shape[1 + n..]);
        let (m_strides, k_strides_p) = (&p_view.strides[1..1 + n], &p_view.strides[1 + n..]);
        let patches_nest = nests(m_shape, m_strides) && nests(k_shape_p, k_strides_p) && p_view.strides[0] >= 0;
        let p_view = if patches_nest {
            p_view
        } else {
            // Copy along the axis that is contiguous in the source: M's when an M axis has
            // the smallest stride.
            let smallest = |shape: &[usize], strides: &[i64]| {
                shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(_, s)| s.unsigned_abs()).min()
            };
            let transposed = match (smallest(m_shape, m_strides), smallest(k_shape_p, k_strides_p)) {
                (Some(m), Some(k)) => m < k,
                _ => false,
            };
            let layout: Vec<usize> = if transposed {
                [vec![0], (1 + n..1 + 2 * n).collect(), (1..1 + n).collect()].concat()
            } else {
                (0..1 + 2 * n).collect()
            };
            self.copied(&p_view, &p_shape, &layout, patches.aval.dtype)
        };
        let k_view = if nests(&k_shape[1..1 + n], &k_view.strides[1..1 + n]) && k_view.strides.iter().all(|&s| s >= 0) {
            k_view
        } else {
            self.copied(&k_view, &k_shape, &(0..k_shape.len()).collect::<Vec<_>>(), kernel.aval.dtype)
        };
        ConvOperands {
            patches: Val { expr: Expr::Load(p_view), aval: Aval::new(patches.aval.dtype, p_shape) },
            kernel: Val { expr: Expr::Load(k_view), aval: Aval::new(kernel.aval.dtype, k_shape) },
            m_order,
        }
    }

    /// `v` (of logical shape `shape`) copied into a new buffer whose row-major axes are
    /// `layout` (a permutation of the logical axes), walked in that order; the copy as a
    /// view with the logical axes.
    fn copied(&mut self, v: &View, shape: &[usize], layout: &[usize], dtype: remat_ir::DType) -> View {
        let space = pick(shape, layout);
        let buf = self.new_buf(&Aval::new(dtype, space.clone()));
        let src = Expr::Load(View { strides: pick(&v.strides, layout), ..v.clone() });
        self.push_step(Step::Kernel { space: space.clone(), dst: View::contiguous(buf, dtype, &space), src });
        let rm = row_major_strides(&space);
        let mut strides = vec![0i64; shape.len()];
        for (j, &a) in layout.iter().enumerate() {
            strides[a] = rm[j];
        }
        View { buf, dtype, offset: 0, strides, dynamic: Vec::new() }
    }
}
