//! `jax.lax`: convolutions, windowed reductions (pooling), control flow (`cond`,
//! `switch`, `while_loop`, `fori_loop`) and `gather`/`scatter*` with dimension numbers
//! (`lax/indexing.rs`), recorded as JAX 0.10.2 records them.
//!
//! What this module keeps true: a wrong shape, dtype or parameter is a located
//! [`TraceError`](crate::TraceError) (the primitives' shape rules check what is not checked
//! here); branches and loop bodies are traced in frames of their own, and the tensors they
//! capture become the call's leading operands, deduplicated across branches, in the order
//! JAX's `_initial_style_jaxprs_with_common_consts` gives them.

use std::panic::Location;
use std::sync::Arc;

use remat_ir::{
    Aval, BinaryOp, ClosedJaxpr, CompareOp, ConvDimensionNumbers, ConvParams, DType, Jaxpr, LitValue, Param, Primitive,
    Var, Window, WindowOp,
};

mod indexing;

pub use indexing::{
    gather, scatter, scatter_add, scatter_max, scatter_min, scatter_mul, GatherOptions, ScatterOptions,
};
pub use remat_ir::{FillValue, GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers};

use crate::elementwise::{binary_at, compare_at, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, bind_n, record_error, Operand};
use crate::transforms::{placeholders, trace_body};
use crate::tree::TensorTree;

/// Padding of a convolution or window, as JAX takes it: a name, or `(low, high)` per
/// spatial (for windows: every) axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `"VALID"`: no padding.
    Valid,
    /// `"SAME"`: the output has `ceil(n / stride)` elements; an odd padding puts the extra
    /// element at the end.
    Same,
    /// `"SAME_LOWER"`: as `Same`, with the extra element at the start.
    SameLower,
    /// Explicit `(low, high)` pairs (negative values crop).
    Explicit(Vec<(i64, i64)>),
}

/// JAX's `lax.padtype_to_pads`: the `(low, high)` pairs of a padding for inputs of extents
/// `ins`, windows of (dilated) extents `windows` and `strides`.
fn pads(padding: &Padding, ins: &[usize], windows: &[usize], strides: &[usize]) -> Vec<(i64, i64)> {
    let same = |lower: bool| {
        ins.iter()
            .zip(windows)
            .zip(strides)
            .map(|((&n, &w), &s)| {
                let out = n.div_ceil(s.max(1));
                let pad = ((out.max(1) - 1) * s + w).saturating_sub(n) as i64;
                let (small, big) = (pad / 2, pad - pad / 2);
                if lower {
                    (big, small)
                } else {
                    (small, big)
                }
            })
            .collect()
    };
    match padding {
        Padding::Valid => vec![(0, 0); ins.len()],
        Padding::Same => same(false),
        Padding::SameLower => same(true),
        Padding::Explicit(p) => p.clone(),
    }
}

/// The parameters of [`conv_general_dilated`] beyond strides and padding, with JAX's
/// defaults (`ConvOptions::default()`: no dilation, `NCHW`/`OIHW`/`NCHW`, one group).
#[derive(Clone, Debug)]
pub struct ConvOptions {
    /// The input's dilation per spatial axis (a transposed convolution); `None`: all 1.
    pub lhs_dilation: Option<Vec<usize>>,
    /// The kernel's dilation per spatial axis (an atrous convolution); `None`: all 1.
    pub rhs_dilation: Option<Vec<usize>>,
    /// The layouts of input, kernel and output as JAX's strings (`("NHWC", "HWIO",
    /// "NHWC")`); `None`: `NC...`, `OI...`, `NC...`.
    pub dimension_numbers: Option<(String, String, String)>,
    /// Input features split into this many groups (a depthwise convolution: the number of
    /// input features).
    pub feature_group_count: usize,
    /// Batch split into this many groups.
    pub batch_group_count: usize,
}

impl Default for ConvOptions {
    fn default() -> ConvOptions {
        ConvOptions {
            lhs_dilation: None,
            rhs_dilation: None,
            dimension_numbers: None,
            feature_group_count: 1,
            batch_group_count: 1,
        }
    }
}

impl ConvOptions {
    /// These options with the layouts given as JAX's strings.
    pub fn dimension_numbers(mut self, lhs: &str, rhs: &str, out: &str) -> ConvOptions {
        self.dimension_numbers = Some((lhs.into(), rhs.into(), out.into()));
        self
    }
}

/// JAX's `conv_general_permutations`: each spec is (batch or out-feature axis, feature or
/// in-feature axis, spatial axes), the input's and output's spatial axes in the order of
/// the kernel's spatial letters.
fn conv_specs(lhs: &str, rhs: &str, out: &str) -> Result<ConvDimensionNumbers, String> {
    let (l, r, o): (Vec<char>, Vec<char>, Vec<char>) =
        (lhs.chars().collect(), rhs.chars().collect(), out.chars().collect());
    if l.len() != r.len() || l.len() != o.len() {
        return Err(format!("dimension numbers {lhs:?}, {rhs:?}, {out:?} have different lengths"));
    }
    for (spec, pair) in [(&l, ['N', 'C']), (&r, ['O', 'I']), (&o, ['N', 'C'])] {
        let s: String = spec.iter().collect();
        if pair.iter().any(|c| spec.iter().filter(|x| *x == c).count() != 1) {
            return Err(format!("dimension number {s:?} must name {} and {} once each", pair[0], pair[1]));
        }
        let spatial: Vec<&char> = spec.iter().filter(|c| !pair.contains(c)).collect();
        let rhs_spatial: Vec<&char> = r.iter().filter(|c| !['O', 'I'].contains(c)).collect();
        let mut a = spatial.clone();
        let mut b = rhs_spatial.clone();
        a.sort();
        b.sort();
        a.dedup();
        if a.len() != spatial.len() || a != b {
            return Err(format!("dimension number {s:?} must have the kernel's spatial letters, once each"));
        }
    }
    let perm = |spec: &[char], pair: [char; 2], own_order: bool| {
        let at = |c: char| spec.iter().position(|&x| x == c).expect("checked");
        let mut spatial: Vec<usize> = (0..spec.len()).filter(|&i| !pair.contains(&spec[i])).collect();
        if !own_order {
            spatial.sort_by_key(|&i| r.iter().position(|&c| c == spec[i]));
        }
        [vec![at(pair[0]), at(pair[1])], spatial].concat()
    };
    Ok(ConvDimensionNumbers {
        lhs_spec: perm(&l, ['N', 'C'], false),
        rhs_spec: perm(&r, ['O', 'I'], true),
        out_spec: perm(&o, ['N', 'C'], false),
    })
}

/// `lax.conv_general_dilated(lhs, rhs, window_strides, padding, ...)`: records
/// `conv_general_dilated` with JAX's canonical dimension numbers and padding pairs. A named
/// padding with an input dilation is an error, as in JAX (give explicit pairs).
#[track_caller]
pub fn conv_general_dilated(
    lhs: &Tensor,
    rhs: &Tensor,
    window_strides: &[usize],
    padding: Padding,
    options: ConvOptions,
) -> Tensor {
    let loc = Location::caller();
    let fail = || Tensor::placeholder(lhs.aval().clone());
    let n = lhs.ndim();
    let dnums = match &options.dimension_numbers {
        Some((l, r, o)) => conv_specs(l, r, o),
        None => Ok(ConvDimensionNumbers {
            lhs_spec: (0..n).collect(),
            rhs_spec: (0..n).collect(),
            out_spec: (0..n).collect(),
        }),
    };
    let dnums = match dnums {
        Ok(d) if d.lhs_spec.len() == n && n == rhs.ndim() && n >= 2 => d,
        Ok(_) => {
            record_error(
                loc,
                format!("conv_general_dilated: lhs {} and rhs {} must have the same rank (at least 2) as the dimension numbers", lhs.aval(), rhs.aval()),
            );
            return fail();
        }
        Err(e) => {
            record_error(loc, format!("conv_general_dilated: {e}"));
            return fail();
        }
    };
    let spatial = n - 2;
    let ones = vec![1; spatial];
    let lhs_dilation = options.lhs_dilation.clone().unwrap_or_else(|| ones.clone());
    let rhs_dilation = options.rhs_dilation.clone().unwrap_or_else(|| ones.clone());
    for (what, v) in
        [("window_strides", window_strides), ("lhs_dilation", &lhs_dilation), ("rhs_dilation", &rhs_dilation)]
    {
        if v.len() != spatial {
            record_error(
                loc,
                format!("conv_general_dilated: {what} {v:?} must have one entry per spatial axis ({spatial})"),
            );
            return fail();
        }
    }
    let padding = match padding {
        Padding::Explicit(p) => p,
        named => {
            if lhs_dilation.iter().any(|&d| d != 1) {
                record_error(
                    loc,
                    "conv_general_dilated: string padding is not implemented for transposed convolution using this op; \
                     give the padding explicitly"
                        .into(),
                );
                return fail();
            }
            let ins: Vec<usize> = dnums.lhs_spec[2..].iter().map(|&a| lhs.shape()[a]).collect();
            let windows: Vec<usize> = dnums.rhs_spec[2..]
                .iter()
                .zip(&rhs_dilation)
                .map(|(&a, &d)| remat_ir::dilated(rhs.shape()[a], d))
                .collect();
            pads(&named, &ins, &windows, window_strides)
        }
    };
    let params = ConvParams {
        window_strides: window_strides.to_vec(),
        padding,
        lhs_dilation,
        rhs_dilation,
        dimension_numbers: dnums,
        feature_group_count: options.feature_group_count,
        batch_group_count: options.batch_group_count,
        precision: Param::None,
        preferred_element_type: None,
    };
    bind(Primitive::ConvGeneralDilated(Box::new(params)), &[lhs.into(), rhs.into()], false, loc).remove(0)
}

/// The options of [`conv_transpose`] beyond strides and padding, as `jax.lax.conv_transpose`
/// takes them.
#[derive(Clone, Debug, Default)]
pub struct ConvTransposeOptions {
    /// The kernel's dilation per spatial axis; `None`: all 1.
    pub rhs_dilation: Option<Vec<usize>>,
    /// The layouts of input, kernel and output; `None`: JAX's defaults by rank, `("NC",
    /// "IO", "NC")`, `("NHC", "HIO", "NHC")`, `("NHWC", "HWIO", "NHWC")`, `("NHWDC",
    /// "HWDIO", "NHWDC")`.
    pub dimension_numbers: Option<(String, String, String)>,
    /// Flip the kernel's spatial axes and swap its input and output features (the
    /// gradient of a convolution, as in JAX).
    pub transpose_kernel: bool,
    /// Explicit padding is the forward convolution's, converted as `"SAME"`/`"VALID"` are.
    pub use_consistent_padding: bool,
}

/// `jax.lax.conv_transpose(lhs, rhs, strides, padding, ...)`: the convolution whose input
/// is dilated by `strides` (a fractionally strided, "deconvolution" layer), recorded as
/// JAX records it: (with `transpose_kernel`) one `rev` per spatial axis of the kernel and a
/// `transpose` swapping its feature axes, then a `conv_general_dilated` with
/// `lhs_dilation=strides`, unit window strides, and the padding `"SAME"`/`"VALID"` give a
/// transposed convolution (`_conv_transpose_padding`); explicit padding is passed through.
#[track_caller]
pub fn conv_transpose(
    lhs: &Tensor,
    rhs: &Tensor,
    strides: &[usize],
    padding: Padding,
    options: ConvTransposeOptions,
) -> Tensor {
    let loc = Location::caller();
    let fail = |message: String| {
        record_error(loc, format!("conv_transpose: {message}"));
        Tensor::placeholder(lhs.aval().clone())
    };
    let n = lhs.ndim();
    if n != rhs.ndim() || n < 2 {
        return fail(format!("lhs {} and rhs {} must have the same rank, at least 2", lhs.aval(), rhs.aval()));
    }
    let specs = match options.dimension_numbers.clone() {
        Some(d) => d,
        None => {
            let (l, r) = match n {
                2 => ("NC", "IO"),
                3 => ("NHC", "HIO"),
                4 => ("NHWC", "HWIO"),
                5 => ("NHWDC", "HWDIO"),
                _ => return fail(format!("no default dimension numbers for rank {n}; give them")),
            };
            (l.to_string(), r.to_string(), l.to_string())
        }
    };
    let dnums = match conv_specs(&specs.0, &specs.1, &specs.2) {
        Ok(d) if d.lhs_spec.len() == n => d,
        Ok(_) => return fail(format!("dimension numbers {specs:?} do not have rank {n}")),
        Err(e) => return fail(e),
    };
    let spatial = n - 2;
    let rhs_dilation = options.rhs_dilation.clone().unwrap_or_else(|| vec![1; spatial]);
    if strides.len() != spatial || rhs_dilation.len() != spatial {
        return fail(format!(
            "strides {strides:?} and rhs_dilation {rhs_dilation:?} must have one entry per spatial axis ({spatial})"
        ));
    }
    let kernel: Vec<usize> = dnums.rhs_spec[2..].iter().map(|&a| rhs.shape()[a]).collect();
    // `_conv_transpose_padding`: the (before, after) padding of one spatial axis.
    let transposed = |k: usize, s: usize, p: &Padding, i: usize| -> Result<(i64, i64), String> {
        let (k, s) = (k as i64, s as i64);
        let (pad_a, pad_len) = match p {
            Padding::Same => {
                let len = k + s - 2;
                (if s > k - 1 { k - 1 } else { (len + 1).div_euclid(2) }, len)
            }
            Padding::Valid => (k - 1, k + s - 2 + (k - s).max(0)),
            Padding::Explicit(pairs) => {
                let (lo, hi) = pairs[i];
                (k - lo - 1, (k - lo - 1) + (k - hi - 1))
            }
            Padding::SameLower => return Err("SAME_LOWER is not a padding mode of a transposed convolution".into()),
        };
        Ok((pad_a, pad_len - pad_a))
    };
    let consistent = options.use_consistent_padding || matches!(padding, Padding::Same | Padding::Valid);
    let pads = if consistent {
        if let Padding::Explicit(pairs) = &padding {
            if pairs.len() != spatial {
                return fail(format!("padding {pairs:?} must have one pair per spatial axis ({spatial})"));
            }
        }
        let mut out = Vec::with_capacity(spatial);
        for i in 0..spatial {
            match transposed(remat_ir::dilated(kernel[i], rhs_dilation[i]), strides[i], &padding, i) {
                Ok(p) => out.push(p),
                Err(e) => return fail(e),
            }
        }
        Padding::Explicit(out)
    } else {
        padding
    };
    let mut kernel_t = rhs.clone();
    if options.transpose_kernel {
        for &axis in &dnums.rhs_spec[2..] {
            kernel_t = kernel_t.apply_at(Primitive::Rev { dimensions: vec![axis] }, loc);
        }
        let mut permutation: Vec<usize> = (0..n).collect();
        permutation.swap(dnums.rhs_spec[0], dnums.rhs_spec[1]);
        kernel_t = kernel_t.apply_at(Primitive::Transpose { permutation }, loc);
    }
    let conv_options = ConvOptions {
        lhs_dilation: Some(strides.to_vec()),
        rhs_dilation: Some(rhs_dilation),
        dimension_numbers: Some(specs),
        feature_group_count: 1,
        batch_group_count: 1,
    };
    conv_general_dilated(lhs, &kernel_t, &vec![1usize; spatial][..], pads, conv_options)
}

/// `lax.conv(lhs, rhs, window_strides, padding)`: an `NCHW`/`OIHW` convolution without
/// dilation or groups.
#[track_caller]
pub fn conv(lhs: &Tensor, rhs: &Tensor, window_strides: &[usize], padding: Padding) -> Tensor {
    conv_general_dilated(lhs, rhs, window_strides, padding, ConvOptions::default())
}

fn reduce_window_at(
    op: WindowOp,
    x: &Tensor,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: &Padding,
    loc: &'static Location<'static>,
) -> Tensor {
    let n = x.ndim();
    if window_dimensions.len() != n || window_strides.len() != n {
        record_error(
            loc,
            format!(
                "reduce_window: window_dimensions {window_dimensions:?} and window_strides {window_strides:?} must have \
                 one entry per axis of {}",
                x.aval()
            ),
        );
        return Tensor::placeholder(x.aval().clone());
    }
    let window = Window {
        window_dimensions: window_dimensions.to_vec(),
        window_strides: window_strides.to_vec(),
        padding: pads(padding, x.shape(), window_dimensions, window_strides),
        base_dilation: vec![1; n],
        window_dilation: vec![1; n],
    };
    x.apply_at(Primitive::ReduceWindow { op, window }, loc)
}

/// `lax.reduce_window(x, -inf, lax.max, window_dimensions, window_strides, padding)`:
/// `reduce_window_max`.
#[track_caller]
pub fn reduce_window_max(
    x: &Tensor,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: Padding,
) -> Tensor {
    reduce_window_at(WindowOp::Max, x, window_dimensions, window_strides, &padding, Location::caller())
}

/// `lax.reduce_window(x, 0., lax.add, window_dimensions, window_strides, padding)`:
/// `reduce_window_sum`.
#[track_caller]
pub fn reduce_window_sum(
    x: &Tensor,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: Padding,
) -> Tensor {
    reduce_window_at(WindowOp::Sum, x, window_dimensions, window_strides, &padding, Location::caller())
}

/// `lax.reduce_window(x, inf, lax.min, ...)`: `reduce_window_min`.
#[track_caller]
pub fn reduce_window_min(
    x: &Tensor,
    window_dimensions: &[usize],
    window_strides: &[usize],
    padding: Padding,
) -> Tensor {
    reduce_window_at(WindowOp::Min, x, window_dimensions, window_strides, &padding, Location::caller())
}

/// A pooling window over the spatial axes of an `N...C` input: `(1, *window, 1)`.
fn pool_window(window: &[usize], strides: Option<&[usize]>) -> (Vec<usize>, Vec<usize>) {
    let strides = strides.map(<[usize]>::to_vec).unwrap_or_else(|| vec![1; window.len()]);
    ([&[1], window, &[1]].concat(), [&[1], &strides[..], &[1]].concat())
}

/// `flax.linen.max_pool(x, window, strides, padding)` on an `NHWC` input:
/// `reduce_window_max` over `(1, *window, 1)` (strides default to 1).
#[track_caller]
pub fn max_pool(x: &Tensor, window: &[usize], strides: Option<&[usize]>, padding: Padding) -> Tensor {
    let (w, s) = pool_window(window, strides);
    reduce_window_at(WindowOp::Max, x, &w, &s, &padding, Location::caller())
}

/// `flax.linen.sum_pool`: `reduce_window_sum` over `(1, *window, 1)`.
#[track_caller]
pub fn sum_pool(x: &Tensor, window: &[usize], strides: Option<&[usize]>, padding: Padding) -> Tensor {
    let (w, s) = pool_window(window, strides);
    reduce_window_at(WindowOp::Sum, x, &w, &s, &padding, Location::caller())
}

/// `flax.linen.avg_pool` (padding counted in the window, flax's default):
/// `reduce_window_sum` then `div` by the window's size.
#[track_caller]
pub fn avg_pool(x: &Tensor, window: &[usize], strides: Option<&[usize]>, padding: Padding) -> Tensor {
    let loc = Location::caller();
    let (w, s) = pool_window(window, strides);
    let sum = reduce_window_at(WindowOp::Sum, x, &w, &s, &padding, loc);
    let size: usize = window.iter().product();
    binary_at(BinaryOp::Div, sum.into(), (size as f64).into(), loc)
}

/// `lax.sort(operands, dimension, is_stable, num_keys)`: the operands (of one shape)
/// sorted together along `dimension`, ordered lexicographically by the first `num_keys`
/// of them (NaNs last); one result per operand.
#[track_caller]
pub fn sort(operands: &[&Tensor], dimension: isize, is_stable: bool, num_keys: usize) -> Vec<Tensor> {
    let loc = Location::caller();
    let placeholders = || operands.iter().map(|t| Tensor::placeholder(t.aval().clone())).collect::<Vec<_>>();
    let Some(first) = operands.first() else {
        record_error(loc, "sort: no operands".to_string());
        return Vec::new();
    };
    let rank = first.ndim() as isize;
    let d = if dimension < 0 { dimension + rank } else { dimension };
    if d < 0 || d >= rank.max(1) || rank == 0 {
        record_error(loc, format!("sort: dimension {dimension} is out of bounds for {}", first.aval()));
        return placeholders();
    }
    if num_keys == 0 || num_keys > operands.len() {
        record_error(loc, format!("sort: num_keys {num_keys} must be between 1 and the {} operands", operands.len()));
        return placeholders();
    }
    let ins: Vec<Operand> = operands.iter().map(|t| (*t).into()).collect();
    let weak: Vec<bool> = operands.iter().map(|t| t.is_weak()).collect();
    let prim = Primitive::Sort { dimension: d as usize, is_stable, num_keys };
    bind_n(prim, &ins, &weak, loc).unwrap_or_else(placeholders)
}

/// `lax.select_n(which, *cases)`: elementwise, the case `which` picks (`which` a `bool`
/// for two cases, else an `i32` in range; a scalar `which` picks whole cases).
#[track_caller]
pub fn select_n(which: &Tensor, cases: &[&Tensor]) -> Tensor {
    let loc = Location::caller();
    let Some(first) = cases.first() else {
        record_error(loc, "select_n: no cases".to_string());
        return Tensor::placeholder(which.aval().clone());
    };
    let mut ins: Vec<Operand> = vec![which.into()];
    ins.extend(cases.iter().map(|t| Operand::from(*t)));
    bind(Primitive::SelectN, &ins, first.is_weak(), loc).remove(0)
}

/// `lax.stop_gradient(x)`: `x`, with no gradient flowing back.
#[track_caller]
pub fn stop_gradient(x: &Tensor) -> Tensor {
    x.apply_at(Primitive::Unary(remat_ir::UnaryOp::StopGradient), Location::caller())
}

/// `lax.optimization_barrier(xs)`: the operands unchanged, as one
/// `optimization_barrier` (XLA moves no computation across it).
#[track_caller]
pub fn optimization_barrier(xs: &[&Tensor]) -> Vec<Tensor> {
    let ops: Vec<Operand> = xs.iter().map(|&x| x.into()).collect();
    bind(Primitive::OptimizationBarrier, &ops, xs.iter().all(|x| x.is_weak()), Location::caller())
}

/// `lax.population_count(x)`: the number of set bits of each integer (`population_count`).
#[track_caller]
pub fn population_count(x: &Tensor) -> Tensor {
    x.apply_at(Primitive::Unary(remat_ir::UnaryOp::PopulationCount), Location::caller())
}

/// `lax.clz(x)`: the number of leading zero bits of each integer (`clz`).
#[track_caller]
pub fn clz(x: &Tensor) -> Tensor {
    x.apply_at(Primitive::Unary(remat_ir::UnaryOp::Clz), Location::caller())
}

/// `lax.mulhi(x, y)`: the high half of each double-width integer product (`mulhi`).
#[track_caller]
pub fn mulhi(x: impl Into<Arg>, y: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Mulhi, x.into(), y.into(), Location::caller())
}

/// `lax.bessel_i0e(x)`: `exp(-|x|) I0(x)`, the exponentially scaled modified Bessel function
/// of order 0 (`bessel_i0e`; `jax.scipy.special.i0e`).
#[track_caller]
pub fn bessel_i0e(x: impl Into<Arg>) -> Tensor {
    crate::elementwise::unary_at(remat_ir::UnaryOp::BesselI0e, x.into(), Location::caller())
}

/// `lax.bessel_i1e(x)`: `exp(-|x|) I1(x)` (`bessel_i1e`; `jax.scipy.special.i1e`).
#[track_caller]
pub fn bessel_i1e(x: impl Into<Arg>) -> Tensor {
    crate::elementwise::unary_at(remat_ir::UnaryOp::BesselI1e, x.into(), Location::caller())
}

/// `lax.igamma(a, x)`: the regularized lower incomplete gamma function P(a, x) (`igamma`;
/// `jax.scipy.special.gammainc`). Its derivative in `a` is `igamma_grad_a`.
#[track_caller]
pub fn igamma(a: impl Into<Arg>, x: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Igamma, a.into(), x.into(), Location::caller())
}

/// `lax.igammac(a, x)`: the regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)
/// (`igammac`; `jax.scipy.special.gammaincc`).
#[track_caller]
pub fn igammac(a: impl Into<Arg>, x: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Igammac, a.into(), x.into(), Location::caller())
}

/// `lax.igamma_grad_a(a, x)`: ∂P(a, x)/∂a (`igamma_grad_a`; JAX defines no derivative of it).
#[track_caller]
pub fn igamma_grad_a(a: impl Into<Arg>, x: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::IgammaGradA, a.into(), x.into(), Location::caller())
}

/// `lax.zeta(s, q)`: the Hurwitz zeta function ζ(s, q) (`zeta`; `jax.scipy.special.zeta`
/// with `q`). JAX's `zeta` primitive has no derivative.
#[track_caller]
pub fn zeta(s: impl Into<Arg>, q: impl Into<Arg>) -> Tensor {
    binary_at(BinaryOp::Zeta, s.into(), q.into(), Location::caller())
}

/// `lax.betainc(a, b, x)`: the regularized incomplete beta function I_x(a, b)
/// (`regularized_incomplete_beta`; `jax.scipy.special.betainc`). Operands of one float dtype,
/// each a scalar or of one shape; JAX differentiates it in `x` only.
#[track_caller]
pub fn betainc(a: &Tensor, b: &Tensor, x: &Tensor) -> Tensor {
    let weak = a.is_weak() && b.is_weak() && x.is_weak();
    bind(Primitive::RegularizedIncompleteBeta, &[a.into(), b.into(), x.into()], weak, Location::caller()).remove(0)
}

/// `lax.complex(x, y)`: `x + i y` (`complex`; two `f32` give `c64`, two `f64` `c128`).
#[track_caller]
pub fn complex(x: &Tensor, y: &Tensor) -> Tensor {
    bind(Primitive::Complex, &[x.into(), y.into()], false, Location::caller()).remove(0)
}

/// `lax.real(z)`: the real part of a complex tensor (`real`).
#[track_caller]
pub fn real(z: &Tensor) -> Tensor {
    z.apply_at(Primitive::Real, Location::caller())
}

/// `lax.imag(z)`: the imaginary part of a complex tensor (`imag`).
#[track_caller]
pub fn imag(z: &Tensor) -> Tensor {
    z.apply_at(Primitive::Imag, Location::caller())
}

/// `lax.conj(z)`: the complex conjugate (`conj[input_dtype=...]`; a real tensor becomes
/// complex with imaginary part 0, as in JAX).
#[track_caller]
pub fn conj(z: &Tensor) -> Tensor {
    z.apply_at(Primitive::Conj { input_dtype: z.dtype() }, Location::caller())
}

/// `lax.reduce_prod(x, axes)`: the product over `axes` (`reduce_prod`).
#[track_caller]
pub fn reduce_prod(x: &Tensor, axes: &[usize]) -> Tensor {
    x.apply_at(Primitive::Reduce { op: remat_ir::ReduceOp::Prod, axes: axes.to_vec() }, Location::caller())
}

/// `lax.rng_bit_generator(key, shape, dtype, algorithm)`: XLA's bit generator on a `u32[4]`
/// key, `(new_key, bits)` of `dtype` (`uint8` or `uint32`) and `shape`; `algorithm` is
/// `RngAlgorithm::Default` (Philox on CPU), `ThreeFry` or `Philox`.
#[track_caller]
pub fn rng_bit_generator(
    key: &Tensor,
    shape: &[usize],
    dtype: DType,
    algorithm: remat_ir::RngAlgorithm,
) -> (Tensor, Tensor) {
    let loc = Location::caller();
    let prim = Primitive::RngBitGenerator { algorithm, dtype, shape: shape.to_vec() };
    match bind_n(prim, &[key.into()], &[false, false], loc) {
        Some(mut outs) if outs.len() == 2 => {
            let bits = outs.pop().expect("two results");
            (outs.pop().expect("two results"), bits)
        }
        _ => {
            (Tensor::placeholder(Aval::new(DType::U32, vec![4])), Tensor::placeholder(Aval::new(dtype, shape.to_vec())))
        }
    }
}

/// `lax.approx_max_k(x, k, reduction_dimension, recall_target)` (`aggregate_to_topk=True`,
/// no size override): the `k` largest along the axis and their `i32` indices. On CPU it is
/// exact (XLA's fallback: `top_k`, NaN first, ties by index).
#[track_caller]
pub fn approx_max_k(x: &Tensor, k: usize, reduction_dimension: i64, recall_target: f64) -> (Tensor, Tensor) {
    approx_top_k(x, k, reduction_dimension, recall_target, true, Location::caller())
}

/// `lax.approx_min_k(x, k, reduction_dimension, recall_target)`: the `k` smallest (exact on
/// CPU: an ascending stable sort, NaN last) and their `i32` indices.
#[track_caller]
pub fn approx_min_k(x: &Tensor, k: usize, reduction_dimension: i64, recall_target: f64) -> (Tensor, Tensor) {
    approx_top_k(x, k, reduction_dimension, recall_target, false, Location::caller())
}

fn approx_top_k(
    x: &Tensor,
    k: usize,
    reduction_dimension: i64,
    recall_target: f64,
    is_max_k: bool,
    loc: &'static Location<'static>,
) -> (Tensor, Tensor) {
    let prim = Primitive::ApproxTopK {
        k,
        reduction_dimension,
        recall_target: Param::Float(recall_target),
        is_max_k,
        reduction_input_size_override: -1,
        aggregate_to_topk: true,
    };
    match bind_n(prim, &[x.into()], &[x.is_weak(), false], loc) {
        Some(mut outs) if outs.len() == 2 => {
            let indices = outs.pop().expect("two results");
            (outs.pop().expect("two results"), indices)
        }
        _ => {
            let mut shape = x.shape().to_vec();
            if let Some(axis) = remat_ir::approx_top_k_axis(reduction_dimension, shape.len()) {
                shape[axis] = k;
            }
            (
                Tensor::placeholder(Aval::new(x.dtype(), shape.clone())),
                Tensor::placeholder(Aval::new(DType::I32, shape)),
            )
        }
    }
}

/// `lax.reduce(operands, init_values, computation, dimensions)` with a combiner that JAX
/// does not recognise as a monoid (a closure never is): the generic `reduce`, the operands
/// (of one shape) reduced over `dimensions` by `computation(accumulators, elements)` over
/// scalars of their dtypes, from `init_values` (one per operand, of its dtype, recorded as
/// literals as a NumPy scalar is). `computation` is printed as JAX prints a Python
/// function, named after the Rust function (`<function odot at 0x...>`; a closure is
/// `<function f.<locals>.<lambda> at 0x...>` of its enclosing function). It must not
/// capture traced values (JAX's combiner jaxpr has none).
#[track_caller]
pub fn reduce(
    operands: &[&Tensor],
    init_values: &[f64],
    computation: impl Fn(&[Tensor], &[Tensor]) -> Vec<Tensor>,
    dimensions: &[usize],
) -> Vec<Tensor> {
    let loc = Location::caller();
    let placeholders = || {
        operands
            .iter()
            .map(|t| {
                let shape = t.shape().iter().enumerate().filter(|(d, _)| !dimensions.contains(d)).map(|(_, &n)| n);
                Tensor::placeholder(Aval::new(t.dtype(), shape.collect::<Vec<usize>>()))
            })
            .collect::<Vec<_>>()
    };
    let n = operands.len();
    if n == 0 || init_values.len() != n {
        record_error(loc, format!("reduce: {n} operands need as many init values, found {}", init_values.len()));
        return placeholders();
    }
    let types: Vec<(Aval, bool)> = operands.iter().map(|t| (Aval::scalar(t.dtype()), false)).collect();
    let types: Vec<(Aval, bool)> = types.iter().chain(&types).cloned().collect();
    let name = std::any::type_name_of_val(&computation);
    let body = match trace_body(&types, |inner| computation(&inner[..n], &inner[n..]), ("the combiner", name), loc) {
        Ok(body) => body,
        Err(_) => return placeholders(),
    };
    if !body.captured.is_empty() {
        record_error(loc, "reduce: the combiner captures traced values; pass them as operands".to_string());
        return placeholders();
    }
    let mut ops: Vec<Operand> = operands.iter().map(|&t| t.into()).collect();
    ops.extend(operands.iter().zip(init_values).map(|(t, &v)| Operand::Literal(LitValue::from_f64(t.dtype(), v))));
    let prim = Primitive::GenericReduce {
        computation: Param::Opaque(format!("<function {} at 0xXXXXXXXXXXXX>", python_function_name(name))),
        dimensions: dimensions.to_vec(),
        jaxpr: combiner_jaxpr(name, body.jaxpr),
    };
    bind_n(prim, &ops, &vec![false; n], loc).unwrap_or_else(placeholders)
}

/// The combiner's jaxpr, one object for one Rust function and one traced text, as JAX's
/// `_reduction_jaxpr` cache gives one jaxpr per Python function and operand types (which
/// the printer then hoists when two equations share it). The cache keeps the last 64.
fn combiner_jaxpr(type_name: &str, jaxpr: Jaxpr) -> Arc<Jaxpr> {
    thread_local! {
        static CACHE: std::cell::RefCell<Vec<(String, String, Arc<Jaxpr>)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let text = jaxpr.to_string();
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((_, _, j)) = cache.iter().find(|(n, t, _)| n == type_name && *t == text) {
            return j.clone();
        }
        let j = Arc::new(jaxpr);
        if cache.len() == 64 {
            cache.remove(0);
        }
        cache.push((type_name.to_string(), text, j.clone()));
        j
    })
}

/// How JAX names a Python function for a Rust function's type name: its last path segment
/// (`my_crate::odot` is `odot`); a closure is a lambda local to its enclosing function
/// (`my_crate::f::{{closure}}` is `f.<locals>.<lambda>`).
fn python_function_name(type_name: &str) -> String {
    let segments: Vec<&str> = type_name.split("::").collect();
    match segments.as_slice() {
        [.., f, "{{closure}}"] => format!("{f}.<locals>.<lambda>"),
        [.., f] => (*f).to_string(),
        [] => "<lambda>".to_string(),
    }
}

/// `lax.reduce_and(x, axes)`: bitwise (on `bool`, logical) and over `axes` (`reduce_and`).
#[track_caller]
pub fn reduce_and(x: &Tensor, axes: &[usize]) -> Tensor {
    x.apply_at(Primitive::Reduce { op: remat_ir::ReduceOp::And, axes: axes.to_vec() }, Location::caller())
}

/// `lax.reduce_or(x, axes)`: bitwise (on `bool`, logical) or over `axes` (`reduce_or`).
#[track_caller]
pub fn reduce_or(x: &Tensor, axes: &[usize]) -> Tensor {
    x.apply_at(Primitive::Reduce { op: remat_ir::ReduceOp::Or, axes: axes.to_vec() }, Location::caller())
}

/// `lax.reduce_xor(x, axes)`: bitwise (on `bool`, logical) xor over `axes` (`reduce_xor`).
#[track_caller]
pub fn reduce_xor(x: &Tensor, axes: &[usize]) -> Tensor {
    x.apply_at(Primitive::Reduce { op: remat_ir::ReduceOp::Xor, axes: axes.to_vec() }, Location::caller())
}

/// `lax.rem(x, y)`: the remainder of `x / y` with the sign of `x` (C's `fmod`), `rem`. A
/// Rust float operand prints as the Python float JAX binds unrounded (`rem a 1.3:f32[]`).
#[track_caller]
pub fn rem(x: impl Into<Arg>, y: impl Into<Arg>) -> Tensor {
    let args = [x.into(), y.into()];
    let floats = crate::elementwise::python_floats(&args, 0);
    let [x, y] = args;
    let out = binary_at(BinaryOp::Rem, x, y, Location::caller());
    crate::trace::spell_last_literals(&floats);
    out
}

/// `lax.dynamic_slice(x, starts, sizes)`: see [`Tensor::dynamic_slice`].
#[track_caller]
pub fn dynamic_slice(x: &Tensor, starts: &[Arg], sizes: &[usize]) -> Tensor {
    x.dynamic_slice(starts, sizes)
}

// ---------------------------------------------------------------------------------------
// Control flow

/// Traced branches or loop functions joined over one list of captured tensors.
struct Joined {
    jaxprs: Vec<Jaxpr>,
    consts: Vec<Tensor>,
}

/// Gives every body the same leading inputs: the tensors any of them captured, without
/// repeats, in order of first capture (JAX's common consts; a body that does not use one
/// gets an unused input).
fn join_consts(bodies: Vec<(Jaxpr, Vec<Tensor>)>) -> Joined {
    let mut consts: Vec<Tensor> = Vec::new();
    for (_, captured) in &bodies {
        for t in captured {
            if !consts.iter().any(|c| c.frame == t.frame && c.var == t.var) {
                consts.push(t.clone());
            }
        }
    }
    let jaxprs = bodies
        .into_iter()
        .map(|(mut jaxpr, captured)| {
            let explicit = jaxpr.invars.split_off(captured.len());
            let own = std::mem::take(&mut jaxpr.invars);
            let mut invars: Vec<Var> = consts
                .iter()
                .map(|c| match captured.iter().position(|t| t.frame == c.frame && t.var == c.var) {
                    Some(i) => own[i],
                    None => jaxpr.new_var(c.aval().clone()),
                })
                .collect();
            invars.extend(explicit);
            jaxpr.invars = invars;
            jaxpr
        })
        .collect();
    Joined { jaxprs, consts }
}

fn types_of(ts: &[Tensor]) -> Vec<(Aval, bool)> {
    ts.iter().map(|t| (t.aval().clone(), t.is_weak())).collect()
}

fn bind_results<R: TensorTree>(
    prim: Primitive,
    operands: &[Operand],
    template: &R,
    loc: &'static Location<'static>,
) -> R {
    let leaves = template.leaves();
    let weak: Vec<bool> = leaves.iter().map(Tensor::is_weak).collect();
    match bind_n(prim, operands, &weak, loc) {
        Some(results) if results.len() == leaves.len() => template.rebuild(&mut results.into_iter()),
        _ => placeholders(template),
    }
}

/// `lax.switch(index, branches, operands)`: the branch `clamp(0, index, n - 1)` applied
/// to `operands`, recorded as `cond[branches=...]` (one branch: a plain call, as JAX).
/// Every branch must return the same types; an empty list does not compile.
#[track_caller]
pub fn switch<A: TensorTree, R: TensorTree, const N: usize>(
    index: &Tensor,
    branches: [&dyn Fn(A) -> R; N],
    operands: A,
) -> R {
    const { assert!(N > 0, "switch needs at least one branch") };
    let loc = Location::caller();
    if N == 1 {
        return branches[0](operands);
    }
    if index.ndim() != 0 || !index.dtype().is_integer() {
        record_error(loc, format!("switch: the index must be an integer scalar, found {}", index.aval()));
        return placeholders(&branches[0](operands));
    }
    let idx = index.to_type(DType::I32, false, loc);
    let hi = LitValue::I32(N as i32 - 1);
    let idx =
        bind(Primitive::Clamp, &[Operand::Literal(LitValue::I32(0)), idx.into(), Operand::Literal(hi)], false, loc)
            .remove(0);
    let order: Vec<usize> = (0..N).collect();
    cond_at_order(&idx, &branches, &order, operands, loc)
}

/// `lax.cond(pred, true_fn, false_fn, operands)`: `true_fn(operands)` if the `bool`
/// scalar `pred` holds, else `false_fn(operands)`, recorded as
/// `convert_element_type[new_dtype=int32] pred` and `cond[branches=(false, true)]`.
#[track_caller]
pub fn cond<A: TensorTree, R: TensorTree>(
    pred: &Tensor,
    true_fn: impl Fn(A) -> R,
    false_fn: impl Fn(A) -> R,
    operands: A,
) -> R {
    let loc = Location::caller();
    if pred.ndim() != 0 || pred.dtype() != DType::Bool {
        record_error(loc, format!("cond: the predicate must be a bool scalar, found {}", pred.aval()));
        return placeholders(&true_fn(operands));
    }
    let idx = pred.to_type(DType::I32, false, loc);
    // JAX traces the true branch first (its consts lead) and lists it second.
    let branches: [&dyn Fn(A) -> R; 2] = [&true_fn, &false_fn];
    cond_at_order(&idx, &branches, &[1, 0], operands, loc)
}

/// Traces `branches` in their order and records `cond` with them listed in `order`.
fn cond_at_order<A: TensorTree, R: TensorTree>(
    index: &Tensor,
    branches: &[&dyn Fn(A) -> R],
    order: &[usize],
    operands: A,
    loc: &'static Location<'static>,
) -> R {
    let leaves = operands.leaves();
    let mut traced = Vec::new();
    let mut outs = Vec::new();
    for branch in branches {
        let callee = ("the branch", std::any::type_name_of_val(branch));
        match trace_body(&types_of(&leaves), |inner| branch(operands.rebuild(&mut inner.into_iter())), callee, loc) {
            Ok(body) => {
                outs.push(body.out);
                traced.push((body.jaxpr, body.captured));
            }
            Err(out) => return placeholders(&out),
        }
    }
    let first = outs[0].leaves();
    for (i, out) in outs.iter().enumerate().skip(1) {
        let o = out.leaves();
        let same = o.len() == first.len() && o.iter().zip(&first).all(|(a, b)| a.aval().same_type(b.aval()));
        if !same {
            let show = |ts: &[Tensor]| ts.iter().map(|t| t.aval().to_string()).collect::<Vec<_>>().join(", ");
            record_error(
                loc,
                format!(
                    "cond: branch {i} returns ({}) but branch 0 returns ({}); every branch must return the same types",
                    show(&o),
                    show(&first)
                ),
            );
            return placeholders(&outs[0]);
        }
    }
    let joined = join_consts(traced);
    let mut jaxprs: Vec<Option<Jaxpr>> = joined.jaxprs.into_iter().map(Some).collect();
    let branches: Vec<ClosedJaxpr> =
        order.iter().map(|&i| ClosedJaxpr::new(Arc::new(jaxprs[i].take().expect("each branch once")))).collect();
    let mut ops: Vec<Operand> = vec![index.into()];
    ops.extend(joined.consts.into_iter().map(Operand::Tensor));
    ops.extend(leaves.into_iter().map(Operand::Tensor));
    bind_results(Primitive::Cond { branches, branches_platforms: None }, &ops, &outs[0], loc)
}

/// `lax.while_loop(cond_fn, body_fn, init)`: applies `body_fn` while `cond_fn` (a `bool`
/// scalar) holds, recorded as `while[cond_jaxpr body_jaxpr ...]`. The body must return the
/// carry's types. Forward-only, as in JAX: reverse-mode differentiation of it is an error.
#[track_caller]
pub fn while_loop<C: TensorTree>(cond_fn: impl Fn(C) -> Tensor, body_fn: impl Fn(C) -> C, init: C) -> C {
    let loc = Location::caller();
    let leaves = init.leaves();
    let ops: Vec<Operand> = leaves.iter().cloned().map(Operand::Tensor).collect();
    let types = types_of(&leaves);
    match while_at(
        "while_loop",
        &|c: Vec<Tensor>| cond_fn(init.rebuild(&mut c.into_iter())),
        &|c: Vec<Tensor>| body_fn(init.rebuild(&mut c.into_iter())).leaves(),
        &ops,
        &types,
        loc,
    ) {
        Some(out) => init.rebuild(&mut out.into_iter()),
        None => placeholders(&init),
    }
}

/// The `while` equation over carries given as operands with their types (literal carries
/// are how JAX passes a Python number, such as `fori_loop`'s counter).
fn while_at(
    what: &str,
    cond_fn: &dyn Fn(Vec<Tensor>) -> Tensor,
    body_fn: &dyn Fn(Vec<Tensor>) -> Vec<Tensor>,
    init: &[Operand],
    types: &[(Aval, bool)],
    loc: &'static Location<'static>,
) -> Option<Vec<Tensor>> {
    let cond = trace_body(types, cond_fn, ("the loop condition", std::any::type_name_of_val(cond_fn)), loc).ok()?;
    if cond.out.ndim() != 0 || cond.out.dtype() != DType::Bool {
        record_error(loc, format!("{what}: the condition must return a bool scalar, found {}", cond.out.aval()));
        return None;
    }
    let body = trace_body(types, body_fn, ("the loop body", std::any::type_name_of_val(body_fn)), loc).ok()?;
    if let Err(message) = check_carry(what, types, &body.out) {
        record_error(loc, message);
        return None;
    }
    let (cond_nconsts, body_nconsts) = (cond.captured.len(), body.captured.len());
    let mut ops: Vec<Operand> = cond.captured.into_iter().map(Operand::Tensor).collect();
    ops.extend(body.captured.into_iter().map(Operand::Tensor));
    ops.extend(init.iter().cloned());
    let prim = Primitive::While {
        cond_jaxpr: ClosedJaxpr::new(Arc::new(cond.jaxpr)),
        body_jaxpr: ClosedJaxpr::new(Arc::new(body.jaxpr)),
        cond_nconsts,
        body_nconsts,
    };
    let weak: Vec<bool> = types.iter().map(|(_, w)| *w).collect();
    bind_n(prim, &ops, &weak, loc)
}

/// `lax.fori_loop(lower, upper, body, init)`: `init` updated by `body(i, carry)` for `i`
/// from `lower` up to `upper` (`i32`). With both bounds Rust integers it is a `scan` of
/// `upper - lower` steps, as JAX lowers it; with a traced bound, a `while` loop (then,
/// as in JAX, forward-only).
#[track_caller]
pub fn fori_loop<C: TensorTree>(
    lower: impl Into<Arg>,
    upper: impl Into<Arg>,
    body: impl Fn(&Tensor, C) -> C,
    init: C,
) -> C {
    let loc = Location::caller();
    let (lower, upper) = (lower.into(), upper.into());
    for b in [&lower, &upper] {
        let (dtype, _) = b.typ();
        let scalar = match b {
            Arg::Tensor(t) => t.ndim() == 0,
            Arg::Scalar(..) => true,
        };
        if !scalar || !dtype.is_integer() {
            let found = match b {
                Arg::Tensor(t) => t.aval().to_string(),
                Arg::Scalar(v, d) => format!("the {d} scalar {v}"),
            };
            record_error(loc, format!("fori_loop: the bounds must be integer scalars, found {found}"));
            return placeholders(&init);
        }
    }
    let leaves = init.leaves();
    let i32_type = (Aval::scalar(DType::I32), false);
    let bound = |b: &Arg| match b {
        Arg::Scalar(v, _) => Operand::Literal(LitValue::I32(*v as i32)),
        Arg::Tensor(t) => Operand::Tensor(t.to_type(DType::I32, false, loc)),
    };
    let step = |i: &Tensor| binary_at(BinaryOp::Add, i.into(), Arg::Scalar(1.0, DType::I32), loc);
    if let (Arg::Scalar(lo, _), Arg::Scalar(hi, _)) = (&lower, &upper) {
        let length = (*hi - *lo).max(0.0) as usize;
        let mut types = vec![i32_type];
        types.extend(types_of(&leaves));
        let traced = trace_body(
            &types,
            |inner| {
                let mut it = inner.into_iter();
                let i = it.next().expect("the counter");
                let next = step(&i);
                let c = body(&i, init.rebuild(&mut it));
                let mut out = vec![next];
                out.extend(c.leaves());
                out
            },
            ("the fori_loop body", std::any::type_name_of_val(&body)),
            loc,
        );
        let Ok(traced) = traced else { return placeholders(&init) };
        if let Err(message) = check_carry("fori_loop", &types, &traced.out) {
            record_error(loc, message);
            return placeholders(&init);
        }
        let num_consts = traced.captured.len();
        let mut ops: Vec<Operand> = traced.captured.into_iter().map(Operand::Tensor).collect();
        ops.push(bound(&lower));
        ops.extend(leaves.iter().cloned().map(Operand::Tensor));
        let prim = Primitive::Scan {
            jaxpr: ClosedJaxpr::new(Arc::new(traced.jaxpr)),
            length,
            reverse: false,
            num_consts,
            num_carry: types.len(),
            unroll: 1,
        };
        let weak: Vec<bool> = types.iter().map(|(_, w)| *w).collect();
        return match bind_n(prim, &ops, &weak, loc) {
            Some(mut out) => init.rebuild(&mut out.drain(1..)),
            None => placeholders(&init),
        };
    }
    let mut types = vec![i32_type.clone(), i32_type];
    types.extend(types_of(&leaves));
    let mut ops = vec![bound(&lower), bound(&upper)];
    ops.extend(leaves.iter().cloned().map(Operand::Tensor));
    let cond_fn = |c: Vec<Tensor>| compare_at(CompareOp::Lt, c[0].clone().into(), c[1].clone().into(), loc);
    let body_fn = |c: Vec<Tensor>| {
        let mut it = c.into_iter();
        let i = it.next().expect("the counter");
        let hi = it.next().expect("the bound");
        let next = step(&i);
        let out = body(&i, init.rebuild(&mut it));
        [vec![next, hi], out.leaves()].concat()
    };
    match while_at("fori_loop", &cond_fn, &body_fn, &ops, &types, loc) {
        Some(mut out) => init.rebuild(&mut out.drain(2..)),
        None => placeholders(&init),
    }
}

fn check_carry(what: &str, types: &[(Aval, bool)], out: &[Tensor]) -> Result<(), String> {
    let same = out.len() == types.len() && out.iter().zip(types).all(|(o, (a, _))| o.aval().same_type(a));
    if same {
        return Ok(());
    }
    let show = |ts: Vec<String>| ts.join(", ");
    Err(format!(
        "{what}: the body receives a carry ({}) but returns ({}); a carry must keep its types",
        show(types.iter().map(|(a, _)| a.to_string()).collect()),
        show(out.iter().map(|t| t.aval().to_string()).collect())
    ))
}

/// `lax.cumsum(x, axis, reverse)`: the `cumsum` primitive itself (no call around it).
#[track_caller]
pub fn cumsum(x: &Tensor, axis: isize, reverse: bool) -> Tensor {
    cumulative(remat_ir::CumulativeOp::Sum, "cumsum", x, axis, reverse, Location::caller())
}

/// `lax.cumprod(x, axis, reverse)`: the `cumprod` primitive itself.
#[track_caller]
pub fn cumprod(x: &Tensor, axis: isize, reverse: bool) -> Tensor {
    cumulative(remat_ir::CumulativeOp::Prod, "cumprod", x, axis, reverse, Location::caller())
}

/// `lax.cummax(x, axis, reverse)`: the running maximum along `axis` (the `cummax`
/// primitive itself, as JAX records it).
#[track_caller]
pub fn cummax(x: &Tensor, axis: isize, reverse: bool) -> Tensor {
    cumulative(remat_ir::CumulativeOp::Max, "cummax", x, axis, reverse, Location::caller())
}

/// `lax.cummin(x, axis, reverse)`: the running minimum along `axis` (`cummin`).
#[track_caller]
pub fn cummin(x: &Tensor, axis: isize, reverse: bool) -> Tensor {
    cumulative(remat_ir::CumulativeOp::Min, "cummin", x, axis, reverse, Location::caller())
}

/// `lax.cumlogsumexp(x, axis, reverse)`: the running `log(sum(exp(x)))` along `axis`
/// (`cumlogsumexp`); floats only.
#[track_caller]
pub fn cumlogsumexp(x: &Tensor, axis: isize, reverse: bool) -> Tensor {
    cumulative(remat_ir::CumulativeOp::LogSumExp, "cumlogsumexp", x, axis, reverse, Location::caller())
}

/// `lax.map(f, xs)`: `f` applied to each slice of `xs` along its leading axis, the
/// results stacked along a new leading axis. Recorded as JAX records it: a `scan` with no
/// carry (`num_carry=0`) whose body is `f`; tensors `f` captures are the scan's consts.
/// (`batch_size`, which vmaps `f` over batches, is not supported.)
#[track_caller]
pub fn map<X: TensorTree, Y: TensorTree>(f: impl Fn(X) -> Y, xs: X) -> Y {
    let body = |_: (), x: X| ((), f(x));
    crate::scan::scan_at(body, (), xs, false, Location::caller()).1
}

fn cumulative(
    op: remat_ir::CumulativeOp,
    name: &str,
    x: &Tensor,
    axis: isize,
    reverse: bool,
    loc: &'static Location<'static>,
) -> Tensor {
    match crate::numpy::normalize_axes(name, x, &[axis], loc) {
        Some(a) => x.apply_at(Primitive::Cumulative { op, axis: a[0], reverse }, loc),
        None => Tensor::placeholder(x.aval().clone()),
    }
}
