//! The element types as both backends' runtime code reads them: one definition of what
//! the interpreter (`remat-interp`) and the JIT's native helpers (`remat-jit`'s
//! `native/indexing.rs`: gather, scatter, sort, top-k, argmin, cumulative reductions) do
//! with an element, so that the two cannot drift apart unseen (the differential tests
//! compare one backend with the other, and a rule copied into both would be wrong in both).
//!
//! [`Element`] is a dtype's identities and XLA's `max`/`min`, compares and conversions on
//! it; [`with_dtype!`](crate::with_dtype) names the Rust type of a runtime [`DType`]; the
//! lane functions ([`total_cmp`], [`dense_ranks`], [`descending`], [`first_min`],
//! [`accumulate`]) and [`clamped_start`] are the pieces of sorting, `argmin`, the
//! cumulative reductions, `gather` and `scatter` that both backends run on their own
//! array views.

use std::cmp::Ordering;
use std::fmt::Debug;

use ndarray::{ArrayD, ArrayView1, ArrayViewMutD, Axis};
use remat_ir::{bf16, c128, c64, f16, Array, DType, PrngKey};

use crate::flush::{self, Flush};

/// An element of one of remat's dtypes, as XLA's CPU code treats it.
pub trait Element: Copy + PartialOrd + Debug + Send + Sync + 'static {
    const DTYPE: DType;
    /// The elements of `a`, if it holds this type.
    fn get(a: &Array) -> Option<&ArrayD<Self>>;
    /// `a` as an [`Array`] of this type.
    fn wrap(a: ArrayD<Self>) -> Array;
    /// The identity of `max`: `-inf`, `i32::MIN`, `false`.
    const LOWEST: Self;
    /// The identity of `min`: `+inf`, `i32::MAX`, `true`.
    const HIGHEST: Self;

    fn is_nan(self) -> bool;
    /// Exact for every dtype but subnormal floats, which `cvtss2sd` reads as zeros in XLA's
    /// float environment: `from_f64(to_f64(x))` is `convert_element_type`.
    fn to_f64(self) -> f64;
    /// `convert_element_type` from `f64`: floats round to nearest (a subnormal `f32` result
    /// is 0, as `cvtsd2ss` gives it there), integers truncate and saturate (NaN gives 0),
    /// `bool` is `x != 0` (NaN gives `true`).
    fn from_f64(x: f64) -> Self;

    /// The value as an arithmetic instruction reads it in XLA's float environment: a
    /// subnormal float as a zero of its sign (`remat_math::flush`); every other value, and
    /// every integer, unchanged.
    fn daz(self) -> Self {
        self
    }

    /// The value's place in XLA's `TOTALORDER` comparisons (`eq_to`, `le_to`, `lt_to`):
    /// integers and `bool` by value; a float by its bits read as sign and magnitude, so that
    /// `-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN` and subnormals are not zeros.
    fn total_order_key(self) -> i64;

    /// XLA's `max`: NaN if either operand is NaN (the first NaN); floats override it with
    /// XLA's rule for zeros and subnormals ([`flush::maximum`]).
    fn max_nan(self, other: Self) -> Self {
        if self.is_nan() || (!other.is_nan() && self >= other) {
            self
        } else {
            other
        }
    }

    /// XLA's `min`, as [`Element::max_nan`] ([`flush::minimum`] for floats).
    fn min_nan(self, other: Self) -> Self {
        if self.is_nan() || (!other.is_nan() && self <= other) {
            self
        } else {
            other
        }
    }
}

/// [`Element::total_order_key`] of a float's bits `b` of width `$s`'s: a negative value's
/// magnitude bits flipped, so that the signed integers order as the floats do.
macro_rules! array_link {
    ($variant:ident) => {
        fn get(a: &Array) -> Option<&ArrayD<Self>> {
            match a {
                Array::$variant(a) => Some(a),
                _ => None,
            }
        }
        fn wrap(a: ArrayD<Self>) -> Array {
            Array::$variant(a)
        }
    };
}

macro_rules! sign_magnitude_key {
    ($bits:expr, $s:ty) => {{
        let i = $bits as $s;
        (i ^ ((i >> (<$s>::BITS - 1)) & <$s>::MAX)) as i64
    }};
}

macro_rules! float_element {
    ($t:ty, $variant:ident, $s:ty, $to_f64:expr, $from_f64:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            array_link!($variant);
            const LOWEST: $t = <$t>::NEG_INFINITY;
            const HIGHEST: $t = <$t>::INFINITY;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                $to_f64(self)
            }
            fn from_f64(x: f64) -> $t {
                $from_f64(x)
            }
            fn daz(self) -> $t {
                Flush::daz(self)
            }
            fn total_order_key(self) -> i64 {
                sign_magnitude_key!(self.to_bits(), $s)
            }
            fn max_nan(self, other: $t) -> $t {
                flush::maximum(self, other)
            }
            fn min_nan(self, other: $t) -> $t {
                flush::minimum(self, other)
            }
        }
    };
}

float_element!(f32, F32, i32, flush::f32_to_f64, flush::f64_to_f32);
float_element!(f64, F64, i64, |x| x, |x| x);

/// The 16-bit floats' link to `f32`, in which they compute: XLA's conversions, which keep
/// subnormals (integer rounding of the bits for `bf16`, F16C for `f16`).
pub trait Narrow: Element {
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

impl Narrow for bf16 {
    fn to_f32(self) -> f32 {
        flush::bf16_bits_to_f32(self.to_bits())
    }
    fn from_f32(x: f32) -> bf16 {
        bf16::from_bits(flush::f32_to_bf16_bits(x))
    }
}

impl Narrow for f16 {
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
}

macro_rules! narrow_element {
    ($t:ident, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            array_link!($variant);
            const LOWEST: $t = $t::NEG_INFINITY;
            const HIGHEST: $t = $t::INFINITY;
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            /// By way of `f32`, whose subnormals (`bf16`'s) are 0 in `f64`.
            fn to_f64(self) -> f64 {
                flush::f32_to_f64(Narrow::to_f32(self))
            }
            /// By way of `f32` (`x as f32` under FTZ, then to nearest even once more), as XLA
            /// converts `f64` to a 16-bit float; `half`'s own `from_f64` rounds from only the
            /// top 32 bits of the `f64`, and an `f32` through it would lose its last 3 bits.
            fn from_f64(x: f64) -> $t {
                Narrow::from_f32(flush::f64_to_f32(x))
            }
            /// Computed in `f32`, where a `bf16` subnormal is one too and an `f16` one is not.
            fn daz(self) -> $t {
                Narrow::from_f32(Flush::daz(Narrow::to_f32(self)))
            }
            fn total_order_key(self) -> i64 {
                sign_magnitude_key!(self.to_bits(), i16)
            }
            fn max_nan(self, other: $t) -> $t {
                Narrow::from_f32(flush::maximum(Narrow::to_f32(self), Narrow::to_f32(other)))
            }
            fn min_nan(self, other: $t) -> $t {
                Narrow::from_f32(flush::minimum(Narrow::to_f32(self), Narrow::to_f32(other)))
            }
        }
    };
}

narrow_element!(bf16, BF16);
narrow_element!(f16, F16);

macro_rules! int_element {
    ($t:ident, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            array_link!($variant);
            const LOWEST: $t = $t::MIN;
            const HIGHEST: $t = $t::MAX;
            fn is_nan(self) -> bool {
                false
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> $t {
                x as $t
            }
            fn total_order_key(self) -> i64 {
                self as i64
            }
        }
    };
}

int_element!(i8, I8);
int_element!(i16, I16);
int_element!(i32, I32);
int_element!(i64, I64);
int_element!(u8, U8);
int_element!(u32, U32);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    array_link!(Bool);
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
    fn total_order_key(self) -> i64 {
        i64::from(self)
    }
}

/// Keys only move (reshape, slice, select, gather, scatter's set, sort's payload): the
/// shape rules reject every numeric use of them, so the numeric methods are never reached
/// on a verified program; they give the all-zero key.
impl Element for PrngKey {
    const DTYPE: DType = DType::Key;
    array_link!(Key);
    const LOWEST: PrngKey = PrngKey([0, 0]);
    const HIGHEST: PrngKey = PrngKey([u32::MAX, u32::MAX]);
    fn is_nan(self) -> bool {
        false
    }
    fn to_f64(self) -> f64 {
        0.0
    }
    fn from_f64(_: f64) -> PrngKey {
        PrngKey::default()
    }
    fn total_order_key(self) -> i64 {
        0
    }
}

/// Complex elements: they have no NaN-aware `max`/`min` in remat (the shape rules reject
/// them, as JAX's `max` on complex is rarely meant), so the order is the derived
/// lexicographic one; `to_f64`/`from_f64` read and write the real part (`convert_element_type`
/// from complex to real keeps the real part; from real, the imaginary part is 0).
macro_rules! complex_element {
    ($t:ty, $variant:ident, $part:ty) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            array_link!($variant);
            const LOWEST: $t = <$t>::new(<$part>::NEG_INFINITY, <$part>::NEG_INFINITY);
            const HIGHEST: $t = <$t>::new(<$part>::INFINITY, <$part>::INFINITY);
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                self.re as f64
            }
            fn from_f64(x: f64) -> $t {
                <$t>::new(x as $part, 0.0)
            }
            /// The real part's place: the shape rules admit no total-order compare on
            /// complex operands (`eq_to`, `le_to`, `lt_to` are for real numbers), so no
            /// result depends on it.
            fn total_order_key(self) -> i64 {
                self.re.total_order_key()
            }
        }
    };
}

complex_element!(c64, C64, f32);
complex_element!(c128, C128, f64);

/// Runs `$body` with `$T` naming the Rust type of a runtime `$dtype` (every dtype; each
/// implements [`Element`]).
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            ::remat_ir::DType::F32 => {
                type $T = f32;
                $body
            }
            ::remat_ir::DType::F64 => {
                type $T = f64;
                $body
            }
            ::remat_ir::DType::BF16 => {
                type $T = ::remat_ir::bf16;
                $body
            }
            ::remat_ir::DType::F16 => {
                type $T = ::remat_ir::f16;
                $body
            }
            ::remat_ir::DType::I8 => {
                type $T = i8;
                $body
            }
            ::remat_ir::DType::I16 => {
                type $T = i16;
                $body
            }
            ::remat_ir::DType::I32 => {
                type $T = i32;
                $body
            }
            ::remat_ir::DType::I64 => {
                type $T = i64;
                $body
            }
            ::remat_ir::DType::U8 => {
                type $T = u8;
                $body
            }
            ::remat_ir::DType::U32 => {
                type $T = u32;
                $body
            }
            ::remat_ir::DType::Bool => {
                type $T = bool;
                $body
            }
            ::remat_ir::DType::Key => {
                type $T = ::remat_ir::PrngKey;
                $body
            }
            ::remat_ir::DType::C64 => {
                type $T = ::remat_ir::c64;
                $body
            }
            ::remat_ir::DType::C128 => {
                type $T = ::remat_ir::c128;
                $body
            }
        }
    };
}

/// JAX's sort order: NaN last (NaNs equal), `-0.0 == 0.0`, and subnormals read as zeros,
/// as every compare reads them under DAZ.
pub fn total_cmp<T: Element>(a: T, b: T) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.daz().partial_cmp(&b.daz()).unwrap_or(Ordering::Equal),
    }
}

/// The dense rank of each element of a lane in [`total_cmp`]'s order (equal elements share
/// a rank, and ranks have no gaps): a sort key's contribution to a multi-key sort.
pub fn dense_ranks<T: Element>(lane: ArrayView1<T>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lane.len()).collect();
    order.sort_by(|&i, &j| total_cmp(lane[i], lane[j]));
    let mut ranks = vec![0; lane.len()];
    for w in 1..order.len() {
        let tie = total_cmp(lane[order[w - 1]], lane[order[w]]) == Ordering::Equal;
        ranks[order[w]] = ranks[order[w - 1]] + usize::from(!tie);
    }
    ranks
}

/// The positions of a lane from its largest element to its smallest in [`total_cmp`]'s
/// order, ties in position order (NaN first, as `top_k` takes them).
pub fn descending<T: Element>(lane: ArrayView1<T>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lane.len()).collect();
    order.sort_by(|&p, &q| total_cmp(lane[q], lane[p]));
    order
}

/// The position of the first minimum of a non-empty lane, NaN being the smallest value,
/// subnormals read as zeros (`argmin`).
pub fn first_min<T: Element>(lane: ArrayView1<T>) -> usize {
    let mut best = 0;
    for (i, &v) in lane.iter().enumerate() {
        let b = lane[best];
        if !b.is_nan() && (v.is_nan() || v.daz() < b.daz()) {
            best = i;
        }
    }
    best
}

/// A cumulative reduction in place along `axis`, as XLA's windowed reduction computes one:
/// every element, the first too, combined with the running value from `identity` (so the
/// first element is read as an arithmetic instruction reads it: `cumsum` of `[-0.0]` or of
/// a subnormal is `+0.0`).
pub fn accumulate<T: Copy>(out: &mut ArrayViewMutD<T>, axis: usize, reverse: bool, identity: T, f: fn(T, T) -> T) {
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

/// The start of the slice (`gather`) or window (`scatter`) of the index vector at batch
/// position `g`, one entry per operand axis, each clamped to `0..=hi[d]` (`hi[d]` the
/// largest start along operand axis `d`), and whether every start was in bounds before
/// clamping. `index(at)` reads the index array at `at` (`g` and then the index vector's
/// position); `index_map[k]` is the operand axis of the vector's `k`-th entry; an operand
/// batching axis `batching.0[i]` starts at `g[batching.1[i]]`.
pub fn clamped_start(
    index: impl Fn(&[usize]) -> i64,
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
        let s = index(&at);
        let h = hi[od];
        in_bounds &= (0..=h).contains(&s);
        start[od] = s.clamp(0, h.max(0)) as usize;
    }
    for (&od, &id) in batching.0.iter().zip(batching.1) {
        start[od] = g[id];
    }
    (start, in_bounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr1, ArrayD, IxDyn};

    #[test]
    fn sort_order_puts_nan_last_and_reads_subnormals_and_signed_zeros_as_equal() {
        let sub = f32::from_bits(1);
        assert_eq!(total_cmp(f32::NAN, 1.0), Ordering::Greater);
        assert_eq!(total_cmp(-0.0f32, 0.0), Ordering::Equal);
        assert_eq!(total_cmp(sub, 0.0), Ordering::Equal);
        assert_eq!(total_cmp(f32::NAN, f32::NAN), Ordering::Equal);
        assert_eq!(dense_ranks(arr1(&[3.0f32, f32::NAN, 1.0, 3.0, sub, 0.0]).view()), vec![2, 3, 1, 2, 0, 0]);
        assert_eq!(descending(arr1(&[1i32, 5, 5, -2]).view()), vec![1, 2, 0, 3]);
    }

    #[test]
    fn argmin_takes_the_first_nan_or_the_first_minimum() {
        assert_eq!(first_min(arr1(&[2.0f32, 1.0, 1.0]).view()), 1);
        assert_eq!(first_min(arr1(&[2.0f32, f32::NAN, f32::NAN, 1.0]).view()), 1);
        // A subnormal ties with zero, so the first of them wins.
        assert_eq!(first_min(arr1(&[0.0f32, -f32::from_bits(1)]).view()), 0);
    }

    #[test]
    fn cumulative_reductions_combine_the_first_element_with_the_identity() {
        let mut a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![-0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        accumulate(&mut a.view_mut(), 1, false, 0.0, |x, y| x + y);
        assert_eq!(a.as_slice().unwrap(), &[0.0, 1.0, 3.0, 3.0, 7.0, 12.0]);
        assert!(a[[0, 0]].is_sign_positive(), "cumsum of -0.0 is +0.0");
        let mut b = ArrayD::from_shape_vec(IxDyn(&[3]), vec![1i32, 3, 2]).unwrap();
        accumulate(&mut b.view_mut(), 0, true, i32::LOWEST, i32::max_nan);
        assert_eq!(b.as_slice().unwrap(), &[3, 3, 2]);
    }

    #[test]
    fn starts_clamp_into_the_operand_and_say_whether_they_were_in_bounds() {
        let idx = [5i64, -1];
        let read = |at: &[usize]| idx[at[1]];
        // Operand axes 0 and 2 indexed (largest starts 3 and 0), axis 1 a batching axis.
        assert_eq!(clamped_start(read, &[1], &[0, 2], (&[1], &[0]), &[3, 9, 0]), (vec![3, 1, 0], false));
        let fine = [2i64, 0];
        assert_eq!(
            clamped_start(|at: &[usize]| fine[at[1]], &[0], &[0, 2], (&[], &[]), &[3, 9, 0]),
            (vec![2, 0, 0], true)
        );
    }

    #[test]
    fn every_dtype_names_an_element_of_that_dtype() {
        for d in DType::ALL {
            assert_eq!(with_dtype!(d, T => T::DTYPE), d);
        }
    }
}
