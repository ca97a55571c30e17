//! The runtime of the primitives JIT code does not compute inline: `gather`, the scatters,
//! `sort`, `top_k`, `argmin` and the cumulative reductions, each over whole row-major
//! buffers (`remat_native`, one call per equation).
//!
//! Semantics are the interpreter's (XLA's): gather clamps starts (or fills, under
//! `FILL_OR_DROP`), scatters clamp (`CLIP`) or drop out-of-bounds windows, sorts put NaN
//! last and are stable and read subnormals as zeros, cumulative reductions run
//! sequentially from the operation's identity; `max`/`min` are XLA's (`remat_math`). The contiguous case of
//! `gather` and `scatter-add` (slices that are whole trailing rows, as embedding lookups
//! and their transposes take) moves whole rows at once.
//!
//! The one `unsafe` block turns the step's base addresses into ndarray views; everything
//! after it is safe code over those views.

use std::cmp::Ordering;
use std::ptr::NonNull;

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn};
use remat_ir::{Aval, CumulativeOp, DType, GatherScatterMode, Primitive, ScatterOp};
use remat_math::{elementary, Flush};

/// What one `Step::Native` computes: the primitive, its operand and result types, and
/// where each operand and result sits in the step's base-address array (operands first).
#[derive(Clone, Debug)]
pub struct NativeDesc {
    pub prim: Primitive,
    pub in_avals: Vec<Aval>,
    pub out_avals: Vec<Aval>,
    pub slots: Vec<usize>,
}

/// An element type the runtime works on.
trait El: Copy + PartialOrd + std::fmt::Debug + 'static {
    const LOWEST: Self;
    const HIGHEST: Self;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(x: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `logaddexp` for floats (the shape rule admits `cumlogsumexp` on floats only).
    fn logaddexp(self, o: Self) -> Self;
    /// The value as a compare reads it in XLA's float environment: a subnormal float as a
    /// zero of its sign (`remat_math::flush`), anything else unchanged.
    fn daz(self) -> Self {
        self
    }
    /// XLA's `max`: NaN if either operand is NaN (floats: `remat_math::maximum`, with its
    /// rule for zeros and subnormals).
    fn maximum(self, o: Self) -> Self {
        if self.is_nan() || (!o.is_nan() && self >= o) {
            self
        } else {
            o
        }
    }
    /// XLA's `min`, as [`El::maximum`].
    fn minimum(self, o: Self) -> Self {
        if self.is_nan() || (!o.is_nan() && self <= o) {
            self
        } else {
            o
        }
    }
}

macro_rules! float_el {
    ($t:ty) => {
        impl El for $t {
            const LOWEST: $t = <$t>::NEG_INFINITY;
            const HIGHEST: $t = <$t>::INFINITY;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> $t {
                x as $t
            }
            fn add(self, o: $t) -> $t {
                self + o
            }
            fn mul(self, o: $t) -> $t {
                self * o
            }
            /// As the interpreter's, with its functions (`remat_math::elementary`).
            fn logaddexp(self, o: $t) -> $t {
                let amax = max_nan(self, o);
                let delta = self - o;
                if delta.is_nan() {
                    self + o
                } else {
                    amax + elementary::log1p(elementary::exp(-delta.abs()))
                }
            }
            fn daz(self) -> $t {
                Flush::daz(self)
            }
            fn maximum(self, o: $t) -> $t {
                remat_math::maximum(self, o)
            }
            fn minimum(self, o: $t) -> $t {
                remat_math::minimum(self, o)
            }
        }
    };
}
float_el!(f32);
float_el!(f64);

/// The 16-bit floats: each operation in `f32`, rounded once (as the interpreter).
macro_rules! narrow_el {
    ($t:ty) => {
        impl El for $t {
            const LOWEST: $t = <$t>::NEG_INFINITY;
            const HIGHEST: $t = <$t>::INFINITY;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn from_f64(x: f64) -> $t {
                <$t>::from_f32(x as f32)
            }
            fn add(self, o: $t) -> $t {
                <$t>::from_f32(self.to_f32() + o.to_f32())
            }
            fn mul(self, o: $t) -> $t {
                <$t>::from_f32(self.to_f32() * o.to_f32())
            }
            /// Each operation of `logaddexp` rounded to the 16-bit type, as the interpreter
            /// (and the JIT's elementwise code) does: rounding once at the end differs in
            /// the last bits, which a cancellation downstream magnifies.
            fn logaddexp(self, o: $t) -> $t {
                let r = <$t>::from_f32;
                let delta = r(self.to_f32() - o.to_f32());
                if delta.is_nan() {
                    r(self.to_f32() + o.to_f32())
                } else {
                    let e = r(elementary::exp(-delta.to_f32().abs()));
                    r(max_nan(self, o).to_f32() + r(elementary::log1p(e.to_f32())).to_f32())
                }
            }
            /// In `f32`, where a `bf16` subnormal is one too and an `f16` one is not.
            fn daz(self) -> $t {
                <$t>::from_f32(Flush::daz(self.to_f32()))
            }
            fn maximum(self, o: $t) -> $t {
                <$t>::from_f32(remat_math::maximum(self.to_f32(), o.to_f32()))
            }
            fn minimum(self, o: $t) -> $t {
                <$t>::from_f32(remat_math::minimum(self.to_f32(), o.to_f32()))
            }
        }
    };
}
narrow_el!(remat_ir::bf16);
narrow_el!(remat_ir::f16);

/// The other integer widths, wrapping as `i32`.
macro_rules! int_el {
    ($t:ty) => {
        impl El for $t {
            const LOWEST: $t = <$t>::MIN;
            const HIGHEST: $t = <$t>::MAX;
            fn is_nan(self) -> bool {
                false
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> $t {
                x as $t
            }
            fn add(self, o: $t) -> $t {
                self.wrapping_add(o)
            }
            fn mul(self, o: $t) -> $t {
                self.wrapping_mul(o)
            }
            fn logaddexp(self, o: $t) -> $t {
                max_nan(self, o)
            }
        }
    };
}
int_el!(i8);
int_el!(i16);
int_el!(i64);
int_el!(u8);
int_el!(u32);

/// Keys only move (gather, scatter's set, sort's payload); the shape rules keep them out of
/// arithmetic, so the numeric methods are never reached.
impl El for remat_ir::PrngKey {
    const LOWEST: remat_ir::PrngKey = remat_ir::PrngKey([0, 0]);
    const HIGHEST: remat_ir::PrngKey = remat_ir::PrngKey([u32::MAX, u32::MAX]);
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        0.0
    }
    fn from_f64(_: f64) -> remat_ir::PrngKey {
        remat_ir::PrngKey::default()
    }
    fn add(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
    fn mul(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
    fn logaddexp(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
}

impl El for i32 {
    const LOWEST: i32 = i32::MIN;
    const HIGHEST: i32 = i32::MAX;
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> i32 {
        x as i32
    }
    fn add(self, o: i32) -> i32 {
        self.wrapping_add(o)
    }
    fn mul(self, o: i32) -> i32 {
        self.wrapping_mul(o)
    }
    fn logaddexp(self, o: i32) -> i32 {
        max_nan(self, o)
    }
}

impl El for bool {
    const LOWEST: bool = false;
    const HIGHEST: bool = true;
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn from_f64(x: f64) -> bool {
        x != 0.0
    }
    fn add(self, o: bool) -> bool {
        self | o
    }
    fn mul(self, o: bool) -> bool {
        self & o
    }
    fn logaddexp(self, o: bool) -> bool {
        self | o
    }
}

/// XLA's `max` ([`El::maximum`]).
fn max_nan<T: El>(a: T, b: T) -> T {
    a.maximum(b)
}

/// XLA's `min` ([`El::minimum`]).
fn min_nan<T: El>(a: T, b: T) -> T {
    a.minimum(b)
}

/// Runs `$body` with `$T` the Rust type of `$dtype`.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I32 => {
                type $T = i32;
                $body
            }
            DType::Bool => {
                type $T = bool;
                $body
            }
            DType::BF16 => {
                type $T = remat_ir::bf16;
                $body
            }
            DType::F16 => {
                type $T = remat_ir::f16;
                $body
            }
            DType::I8 => {
                type $T = i8;
                $body
            }
            DType::I16 => {
                type $T = i16;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            DType::U8 => {
                type $T = u8;
                $body
            }
            DType::U32 => {
                type $T = u32;
                $body
            }
            DType::Key => {
                type $T = remat_ir::PrngKey;
                $body
            }
        }
    };
}

/// The base addresses of a step's operands and results.
pub(super) struct Bases<'a> {
    addrs: &'a [usize],
    desc: &'a NativeDesc,
}

impl Bases<'_> {
    /// Operand `i`'s aval.
    pub(super) fn in_aval(&self, i: usize) -> &Aval {
        &self.desc.in_avals[i]
    }

    /// Result `j`'s aval.
    pub(super) fn out_aval(&self, j: usize) -> &Aval {
        &self.desc.out_avals[j]
    }

    pub(super) fn view<T>(&self, i: usize) -> ArrayViewD<'_, T> {
        let aval = &self.desc.in_avals[i];
        let addr = self.addrs[self.desc.slots[i]];
        let ptr = if aval.size() == 0 { NonNull::<T>::dangling().as_ptr() } else { addr as *mut T };
        // SAFETY: the lowering gives every operand a row-major buffer of its aval (a
        // materialized load at offset 0), planned to hold `aval.size()` elements of `T`
        // (the aval's dtype) and live for the whole step; `addrs` holds the step's base
        // addresses in `canonical_buffers` order, which `slots` indexes. An empty array
        // reads nothing, so a dangling aligned pointer stands in for it.
        unsafe { ArrayViewD::from_shape_ptr(IxDyn(&aval.shape), ptr as *const T) }
    }

    pub(super) fn view_mut<T>(&self, j: usize) -> ArrayViewMutD<'_, T> {
        let aval = &self.desc.out_avals[j];
        let addr = self.addrs[self.desc.slots[self.desc.in_avals.len() + j]];
        let ptr = if aval.size() == 0 { NonNull::<T>::dangling().as_ptr() } else { addr as *mut T };
        // SAFETY: as for `view`; a result's buffer is written by this step alone and is
        // never an operand's (the planner gives buffers live in the same step distinct
        // memory, and only kernels write in place), so the view is unique.
        unsafe { ArrayViewMutD::from_shape_ptr(IxDyn(&aval.shape), ptr) }
    }
}

/// `remat_native(desc, bases)`: runs the step `desc` describes.
pub(crate) extern "C" fn remat_native(desc: *const NativeDesc, bases: *const usize) {
    // SAFETY: `desc` points into the `Box<[NativeDesc]>` the compiled program owns for as
    // long as its code can run, and `bases` to the step's base-address array of
    // `desc.slots`'s length (both stored by the step's caller, `step_bases`).
    let (desc, addrs) = unsafe {
        let desc = &*desc;
        let n = desc.slots.iter().max().map_or(0, |&m| m + 1);
        (desc, std::slice::from_raw_parts(bases, n))
    };
    run(&Bases { addrs, desc });
}

/// Operand 1's indices as `i32`, whatever their integer dtype: values beyond `i32`'s range
/// saturate, so an index out of bounds stays out of bounds.
fn indices_i32(b: &Bases) -> ArrayD<i32> {
    let sat = |x: i64| x.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    match b.desc.in_avals[1].dtype {
        DType::I8 => b.view::<i8>(1).mapv(i32::from),
        DType::I16 => b.view::<i16>(1).mapv(i32::from),
        DType::I64 => b.view::<i64>(1).mapv(sat),
        DType::U8 => b.view::<u8>(1).mapv(i32::from),
        DType::U32 => b.view::<u32>(1).mapv(|x| sat(i64::from(x))),
        DType::I32 | DType::F32 | DType::F64 | DType::BF16 | DType::F16 | DType::Bool | DType::Key => {
            b.view::<i32>(1).to_owned()
        }
    }
}

fn run(b: &Bases) {
    let d = b.desc;
    match &d.prim {
        Primitive::Gather { .. } => {
            let idx = indices_i32(b);
            let idx = idx.view();
            with_dtype!(d.in_avals[0].dtype, T => gather::<T>(&d.prim, &b.view(0), &idx, &mut b.view_mut(0)))
        }
        Primitive::Scatter { .. } => {
            let idx = indices_i32(b);
            let idx = idx.view();
            with_dtype!(d.in_avals[0].dtype, T => scatter::<T>(&d.prim, &b.view(0), &idx, &b.view(2), &mut b.view_mut(0)))
        }
        Primitive::Sort { dimension, num_keys, .. } => sort(b, *dimension, *num_keys),
        Primitive::TopK { axis, k } => {
            let mut indices = b.view_mut::<i32>(1);
            with_dtype!(d.in_avals[0].dtype, T => top_k::<T>(&b.view(0), *axis, *k, &mut b.view_mut(0), &mut indices))
        }
        Primitive::Argmin { axes, .. } => {
            let mut out = b.view_mut::<i32>(0);
            with_dtype!(d.in_avals[0].dtype, T => argmin::<T>(&b.view(0), axes[0], &mut out))
        }
        Primitive::Cumulative { op, axis, reverse } => {
            with_dtype!(d.in_avals[0].dtype, T => cumulative::<T>(*op, &b.view(0), *axis, *reverse, &mut b.view_mut(0)))
        }
        Primitive::RandomSeed => super::random::seed(b),
        Primitive::RandomWrap => super::random::wrap(b),
        Primitive::RandomUnwrap => super::random::unwrap(b),
        Primitive::RandomSplit { shape } => super::random::split(b, shape),
        Primitive::RandomFoldIn => super::random::fold_in(b),
        Primitive::RandomBits { shape, .. } => super::random::bits(b, shape),
        // The lowering makes native steps of the primitives above only: any other is a
        // bug in the lowering, stopped here rather than leaving its result unwritten.
        other => unreachable!("{} is not a native step", other.name()),
    }
}

/// JAX's default `fill_value`: NaN for floats, the lowest signed integer, `true`.
fn default_fill<T: El>() -> T {
    let nan = T::from_f64(f64::NAN);
    if nan.is_nan() {
        nan
    } else if T::LOWEST.to_f64() < 0.0 {
        T::LOWEST
    } else {
        T::HIGHEST
    }
}

/// The start of the slice or window of the index vector at batch position `g`, clamped
/// to `0..=hi`, and whether it was in bounds.
fn start_of(
    idx: &ArrayViewD<i32>,
    g: &[usize],
    index_map: &[usize],
    batching: (&[usize], &[usize]),
    hi: &[i64],
) -> (Vec<usize>, bool) {
    let mut start = vec![0usize; hi.len()];
    let mut in_bounds = true;
    let mut at = g.to_vec();
    at.push(0);
    for (k, &od) in index_map.iter().enumerate() {
        at[g.len()] = k;
        let s = i64::from(idx[IxDyn(&at)]);
        let h = hi[od];
        in_bounds &= (0..=h).contains(&s);
        start[od] = s.clamp(0, h.max(0)) as usize;
    }
    for (&od, &id) in batching.0.iter().zip(batching.1) {
        start[od] = g[id];
    }
    (start, in_bounds)
}

/// The number of trailing axes of `operand` that a slice takes whole, that the result
/// keeps as its trailing axes (`ends` are the result's axes for the kept operand axes):
/// those axes move as one contiguous row.
fn whole_rows(operand: &[usize], sizes: &[usize], kept: &[usize], ends: &[usize], out_rank: usize) -> usize {
    let mut r = 0;
    for (&od, &ud) in kept.iter().zip(ends).rev() {
        let trailing = od + r + 1 == operand.len() && ud + r + 1 == out_rank;
        if !trailing || sizes[od] != operand[od] {
            break;
        }
        r += 1;
    }
    r
}

fn gather<T: El>(prim: &Primitive, x: &ArrayViewD<T>, idx: &ArrayViewD<i32>, out: &mut ArrayViewMutD<T>) {
    let Primitive::Gather { dimension_numbers: dn, fill_value, mode, slice_sizes, .. } = prim else { return };
    let rank = x.ndim();
    let hi: Vec<i64> = x.shape().iter().zip(slice_sizes).map(|(&n, &s)| n as i64 - s as i64).collect();
    let out_rank = out.ndim();
    let batch_dims: Vec<usize> = (0..out_rank).filter(|d| !dn.offset_dims.contains(d)).collect();
    let kept: Vec<usize> =
        (0..rank).filter(|d| !dn.collapsed_slice_dims.contains(d) && !dn.operand_batching_dims.contains(d)).collect();
    let batching = (dn.operand_batching_dims.as_slice(), dn.start_indices_batching_dims.as_slice());
    let fill = fill_value.map_or_else(default_fill::<T>, |f| T::from_f64(f.to_f64()));
    let r = whole_rows(x.shape(), slice_sizes, &kept, &dn.offset_dims, out_rank);
    let (Some(xs), row) = (x.as_slice(), x.shape()[rank - r..].iter().product::<usize>()) else { return };
    let x_strides: Vec<usize> = x.strides().iter().map(|&s| s as usize).collect();
    let lead = &out.shape()[..out_rank - r].to_vec();
    let Some(os) = out.as_slice_mut() else { return };
    // One row of `row` elements per position of the leading output axes.
    for (n, chunk) in os.chunks_mut(row.max(1)).enumerate().take(lead.iter().product()) {
        let o = unravel(n, lead);
        let g: Vec<usize> = batch_dims.iter().map(|&d| o[d]).collect();
        let (mut pos, in_bounds) = start_of(idx, &g, &dn.start_index_map, batching, &hi);
        if *mode == GatherScatterMode::FillOrDrop && !in_bounds {
            chunk.fill(fill);
            continue;
        }
        for (&od, &d) in kept.iter().zip(&dn.offset_dims).take(kept.len() - r) {
            pos[od] += o[d];
        }
        let at: usize = pos.iter().zip(&x_strides).map(|(p, s)| p * s).sum();
        chunk.copy_from_slice(&xs[at..at + chunk.len()]);
    }
}

/// The row-major multi-index of flat position `n` in `shape`.
fn unravel(mut n: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &s) in shape.iter().enumerate().rev() {
        if s > 0 {
            idx[i] = n % s;
            n /= s;
        }
    }
    idx
}

fn scatter<T: El>(
    prim: &Primitive,
    x: &ArrayViewD<T>,
    idx: &ArrayViewD<i32>,
    upd: &ArrayViewD<T>,
    out: &mut ArrayViewMutD<T>,
) {
    let Primitive::Scatter { op, dimension_numbers: dn, mode, .. } = prim else { return };
    out.assign(x);
    let rank = x.ndim();
    let window_operand_dims: Vec<usize> =
        (0..rank).filter(|d| !dn.inserted_window_dims.contains(d) && !dn.operand_batching_dims.contains(d)).collect();
    let mut size = vec![1usize; rank];
    for (&od, &ud) in window_operand_dims.iter().zip(&dn.update_window_dims) {
        size[od] = upd.shape()[ud];
    }
    // Negative when no window fits (an empty inserted axis): every update is dropped.
    let hi: Vec<i64> = x.shape().iter().zip(&size).map(|(&n, &s)| n as i64 - s as i64).collect();
    if hi.iter().any(|&h| h < 0) {
        return;
    }
    let scatter_dims: Vec<usize> = (0..upd.ndim()).filter(|d| !dn.update_window_dims.contains(d)).collect();
    let batching = (dn.operand_batching_dims.as_slice(), dn.scatter_indices_batching_dims.as_slice());
    let combine: fn(T, T) -> T = match op {
        ScatterOp::Set => |_, u| u,
        ScatterOp::Add => T::add,
        ScatterOp::Mul => T::mul,
        ScatterOp::Min => min_nan,
        ScatterOp::Max => max_nan,
    };
    let r = whole_rows(x.shape(), &size, &window_operand_dims, &dn.update_window_dims, upd.ndim());
    let row: usize = upd.shape()[upd.ndim() - r..].iter().product();
    let out_strides: Vec<usize> = out.strides().iter().map(|&s| s as usize).collect();
    let lead = upd.shape()[..upd.ndim() - r].to_vec();
    let (Some(us), Some(os)) = (upd.as_slice(), out.as_slice_mut()) else { return };
    for (n, chunk) in us.chunks(row.max(1)).enumerate().take(lead.iter().product()) {
        let ui = unravel(n, &lead);
        let g: Vec<usize> = scatter_dims.iter().map(|&d| ui[d]).collect();
        let (mut pos, in_bounds) = start_of(idx, &g, &dn.scatter_dims_to_operand_dims, batching, &hi);
        if !in_bounds && *mode != GatherScatterMode::Clip {
            continue;
        }
        let windows = window_operand_dims.len() - r;
        for (&od, &ud) in window_operand_dims.iter().zip(&dn.update_window_dims).take(windows) {
            pos[od] += ui[ud];
        }
        let at: usize = pos.iter().zip(&out_strides).map(|(p, s)| p * s).sum();
        for (o, &u) in os[at..at + chunk.len()].iter_mut().zip(chunk) {
            *o = combine(*o, u);
        }
    }
}

/// JAX's sort order: NaN last, `-0.0 == 0.0`.
fn total_cmp<T: El>(a: T, b: T) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // JAX's comparator reads subnormals as zeros, as every compare does under DAZ.
        (false, false) => a.daz().partial_cmp(&b.daz()).unwrap_or(Ordering::Equal),
    }
}

/// For every lane along `axis`, the dense rank of each element.
fn lane_ranks<T: El>(a: &ArrayViewD<T>, axis: usize) -> Vec<Vec<usize>> {
    a.lanes(Axis(axis))
        .into_iter()
        .map(|lane| {
            let mut order: Vec<usize> = (0..lane.len()).collect();
            order.sort_by(|&i, &j| total_cmp(lane[i], lane[j]));
            let mut ranks = vec![0; lane.len()];
            for w in 1..order.len() {
                let tie = total_cmp(lane[order[w - 1]], lane[order[w]]) == Ordering::Equal;
                ranks[order[w]] = ranks[order[w - 1]] + usize::from(!tie);
            }
            ranks
        })
        .collect()
}

fn permute<T: El>(a: &ArrayViewD<T>, out: &mut ArrayViewMutD<T>, axis: usize, perms: &[Vec<usize>]) {
    for ((mut o, i), perm) in out.lanes_mut(Axis(axis)).into_iter().zip(a.lanes(Axis(axis))).zip(perms) {
        for (j, &p) in perm.iter().enumerate() {
            o[j] = i[p];
        }
    }
}

fn sort(b: &Bases, dimension: usize, num_keys: usize) {
    let d = b.desc;
    let keys: Vec<Vec<Vec<usize>>> =
        (0..num_keys).map(|i| with_dtype!(d.in_avals[i].dtype, T => lane_ranks::<T>(&b.view(i), dimension))).collect();
    let n = d.in_avals[0].shape[dimension];
    let perms: Vec<Vec<usize>> = (0..keys.first().map_or(0, Vec::len))
        .map(|lane| {
            let mut perm: Vec<usize> = (0..n).collect();
            perm.sort_by(|&i, &j| {
                keys.iter().map(|k| k[lane][i].cmp(&k[lane][j])).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
            });
            perm
        })
        .collect();
    for (i, aval) in d.in_avals.iter().enumerate() {
        with_dtype!(aval.dtype, T => permute::<T>(&b.view(i), &mut b.view_mut(i), dimension, &perms));
    }
}

fn top_k<T: El>(
    x: &ArrayViewD<T>,
    axis: usize,
    k: usize,
    values: &mut ArrayViewMutD<T>,
    indices: &mut ArrayViewMutD<i32>,
) {
    let outs = values.lanes_mut(Axis(axis)).into_iter().zip(indices.lanes_mut(Axis(axis)));
    for (lane, (mut v, mut i)) in x.lanes(Axis(axis)).into_iter().zip(outs) {
        let mut order: Vec<usize> = (0..lane.len()).collect();
        order.sort_by(|&p, &q| total_cmp(lane[q], lane[p]));
        for (j, &p) in order.iter().take(k).enumerate() {
            v[j] = lane[p];
            i[j] = i32::try_from(p).unwrap_or(i32::MAX);
        }
    }
}

fn argmin<T: El>(x: &ArrayViewD<T>, axis: usize, out: &mut ArrayViewMutD<i32>) {
    let found: ArrayD<i32> = x.map_axis(Axis(axis), |lane| {
        let mut best = 0;
        for (i, &v) in lane.iter().enumerate() {
            let b = lane[best];
            if !b.is_nan() && (v.is_nan() || v.daz() < b.daz()) {
                best = i;
            }
        }
        i32::try_from(best).unwrap_or(i32::MAX)
    });
    out.assign(&found);
}

/// The cumulative reductions as XLA's windowed reduction computes them: every element,
/// the first too, combined with the running value starting from the operation's identity
/// (so the first element is read as an arithmetic instruction reads it: `cumsum` of
/// `[-0.0]` or of a subnormal is `+0.0`), as the interpreter's.
fn cumulative<T: El>(op: CumulativeOp, x: &ArrayViewD<T>, axis: usize, reverse: bool, out: &mut ArrayViewMutD<T>) {
    out.assign(x);
    let (f, identity): (fn(T, T) -> T, T) = match op {
        CumulativeOp::Sum => (T::add, T::from_f64(0.0)),
        CumulativeOp::Prod => (T::mul, T::from_f64(1.0)),
        CumulativeOp::Max => (max_nan, T::LOWEST),
        CumulativeOp::Min => (min_nan, T::HIGHEST),
        CumulativeOp::LogSumExp => (T::logaddexp, T::LOWEST),
    };
    for mut lane in out.lanes_mut(Axis(axis)) {
        let n = lane.len();
        let mut acc = identity;
        for s in 0..n {
            let cur = if reverse { n - 1 - s } else { s };
            acc = f(acc, lane[cur]);
            lane[cur] = acc;
        }
    }
}
