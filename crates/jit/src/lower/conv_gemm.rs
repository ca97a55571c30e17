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

use remat_ir::{Aval, DType, DotDimensionNumbers};

use super::{Lowering, Val};
use crate::expr::{row_major_strides, DynTerm, Expr, View};
use crate::program::{BufId, Step};
use crate::JitError;

/// An im2col copy of more than this many bytes is made a block of rows at a time
/// ([`Lowering::conv_gemm_product`]).
pub(crate) const PATCH_CHUNK_BYTES: usize = 4 << 20;

/// The fewest rows (M elements) a block of patches keeps.
pub(crate) const PATCH_CHUNK_MIN_ROWS: usize = 64;

/// How the patches are copied: row-major `[group, M..., K...]`, or `[group, K..., M...]`
/// when their contiguous axis is an M axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum PatchLayout {
    MK,
    KM,
}

impl PatchLayout {
    /// The copy's axes in memory order, of patches with `m` M axes and `k` K axes.
    fn axes(self, m: usize, k: usize) -> Vec<usize> {
        match self {
            PatchLayout::MK => (0..1 + m + k).collect(),
            PatchLayout::KM => [vec![0], (1 + m..1 + m + k).collect(), (1..1 + m).collect()].concat(),
        }
    }
}

/// How many leading M axes of patches `shape` (`[group, M..., K...]`, `n` of each, `elem`
/// bytes each) a blockwise copy loops over: `None` for one whole copy (one group only is
/// blocked; a copy within [`PATCH_CHUNK_BYTES`] stays whole). Otherwise the fewest axes
/// that bring a block within the limit, but no more than keep [`PATCH_CHUNK_MIN_ROWS`]
/// rows in a block.
fn chunk_prefix(shape: &[usize], n: usize, elem: usize) -> Option<usize> {
    let k: usize = shape[1 + n..].iter().product();
    let bytes = |p: usize| shape[1 + p..1 + n].iter().product::<usize>() * k * elem;
    if shape[0] != 1 || bytes(0) <= PATCH_CHUNK_BYTES {
        return None;
    }
    let mut best = None;
    for p in 1..n {
        if shape[1 + p..1 + n].iter().product::<usize>() < PATCH_CHUNK_MIN_ROWS {
            break;
        }
        best = Some(p);
        if bytes(p) <= PATCH_CHUNK_BYTES {
            break;
        }
    }
    best
}

/// A convolution's product operands, ready for the GEMM: `patches` `[group, M..., K...]`,
/// `kernel` `[group, K..., O]`, each with its M and K axes in the chosen order, and
/// `m_order[j]`, the M axis (0 = `N`, `1 + s` = spatial axis `s`) at position `1 + j`.
pub(super) struct ConvOperands {
    pub patches: Val,
    pub kernel: Val,
    pub m_order: Vec<usize>,
    /// `Some` when the patches must be copied before the GEMM (in this layout).
    pub patch_layout: Option<PatchLayout>,
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
        let patch_layout = if patches_nest {
            None
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
            Some(if transposed { PatchLayout::KM } else { PatchLayout::MK })
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
            patch_layout,
        }
    }

    /// The convolution's product of `ops` (patches `[group, M..., K...]`, kernel `[group,
    /// K..., O]`, `n` M axes and `n` K axes) into a new row-major `[group, M..., O]` buffer,
    /// copying the patches first when `ops.patch_layout` asks for it.
    ///
    /// A copy of more than [`PATCH_CHUNK_BYTES`] is made a block of rows at a time: a loop
    /// nest over the first M axes copies one block of patches into a buffer of the block's
    /// size and multiplies it into its rows of the result (the destination offset by the
    /// loops' counters), so the im2col buffer is that block, not the whole `M x K` (75 MB
    /// for a 3x3 convolution of a batch of 32 32x32x64 images, more than the rest of a
    /// ResNet block's peak). Blocks keep at least [`PATCH_CHUNK_MIN_ROWS`] rows, so each is
    /// still a GEMM of full panels. Each element of the result is the same dot product over
    /// the same K elements in the same order as in the whole product: the same bits.
    pub(super) fn conv_gemm_product(&mut self, ops: &ConvOperands, n: usize, out: &Aval) -> Result<Val, JitError> {
        let dims = DotDimensionNumbers {
            lhs_contracting: (1 + n..1 + 2 * n).collect(),
            rhs_contracting: (1..1 + n).collect(),
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        let Expr::Load(pv) = &ops.patches.expr else { unreachable!("patches are a view") };
        let (ps, dtype) = (&ops.patches.aval.shape, ops.patches.aval.dtype);
        let Some(layout) = ops.patch_layout else {
            return Ok(self.dot(&ops.patches, &ops.kernel, &dims, out, None));
        };
        let elem = dtype.size_in_bytes();
        let Some(p) = chunk_prefix(ps, n, elem) else {
            let v = self.copied(pv, ps, &layout.axes(n, n), dtype);
            let patches = Val { expr: Expr::Load(v), aval: ops.patches.aval.clone() };
            return Ok(self.dot(&patches, &ops.kernel, &dims, out, None));
        };
        // The block: [group, M_p..., K...], the first `p` M axes fixed by the counters.
        let buf = self.new_buf(out);
        let r_strides = row_major_strides(&out.shape);
        let counters: Vec<BufId> = (0..p).map(|_| self.new_buf(&Aval::scalar(DType::I32))).collect();
        let terms = |strides: &[i64]| -> Vec<DynTerm> {
            counters
                .iter()
                .enumerate()
                .map(|(j, &c)| DynTerm { index: c, max: ps[1 + j] as i64 - 1, stride: strides[1 + j] })
                .collect()
        };
        let drop_prefix = |xs: &[usize]| -> Vec<usize> { [&xs[..1], &xs[1 + p..]].concat() };
        let block_shape = drop_prefix(ps);
        let mut block_strides = vec![pv.strides[0]];
        block_strides.extend(&pv.strides[1 + p..]);
        let mut dynamic = pv.dynamic.clone();
        dynamic.extend(terms(&pv.strides));
        let src = View { strides: block_strides, dynamic, ..pv.clone() };
        let mut block_out = vec![out.shape[0]];
        block_out.extend(&out.shape[1 + p..]);
        let block_out = Aval::new(out.dtype, block_out);
        let block_dims = DotDimensionNumbers {
            lhs_contracting: (1 + n - p..1 + 2 * n - p).collect(),
            rhs_contracting: dims.rhs_contracting.clone(),
            lhs_batch: vec![0],
            rhs_batch: vec![0],
        };
        let dst = View { buf, dtype: out.dtype, offset: 0, strides: Vec::new(), dynamic: terms(&r_strides) };
        let (_, body) = self.scoped(|lw| {
            let v = lw.copied(&src, &block_shape, &layout.axes(n - p, n), dtype);
            let block = Val { expr: Expr::Load(v), aval: Aval::new(dtype, block_shape.clone()) };
            let strides = row_major_strides(&block_out.shape);
            lw.gemm(&block, &ops.kernel, &block_dims, &block_out, &strides, dst.clone());
            Ok(())
        })?;
        let mut steps = body;
        for j in (0..p).rev() {
            steps = vec![Step::Loop { length: ps[1 + j], reverse: false, counter: counters[j], body: steps }];
        }
        steps.into_iter().for_each(|s| self.push_step(s));
        Ok(Val { expr: Expr::Load(View::contiguous(buf, out.dtype, &out.shape)), aval: out.clone() })
    }

    /// `v` (of logical shape `shape`) copied into a new buffer whose row-major axes are
    /// `layout` (a permutation of the logical axes), walked in that order; the copy as a
    /// view with the logical axes.
    fn copied(&mut self, v: &View, shape: &[usize], layout: &[usize], dtype: DType) -> View {
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
