//! `exp` and `tanh` over a contiguous run of f32 in place, compiled by rustc for the
//! widest vectors the CPU has (AVX-512, else AVX2; chosen once at run time).
//!
//! Cranelift emits only 128-bit vectors on x86-64, and its `f32x4` loops for these
//! functions (`codegen/math32.rs`) are bound by their dependency chains: a fused
//! `tanh(x + b)` ran at 1.6 ns per element. The same algorithm written here per element and
//! vectorized by LLVM 16 lanes at a time (several vectors interleaved) runs the element in
//! a fraction of that. A kernel whose result is `exp` or `tanh` of an f32 expression
//! computes the expression into its destination row by row and then calls these on the row
//! while it is in L1 (`codegen/kernel.rs`).
//!
//! Every operation here is the one `math32` emits, in the same order, with the same
//! constants and fused multiply-adds (both paths are only used with FMA), so the two agree
//! bit for bit (`tests/libm_sweep.rs`).

#[cfg(target_arch = "x86_64")]
use std::sync::OnceLock;

/// 1.5 * 2^23: `x + MAGIC` rounds `x` to an integer held in the low mantissa bits.
pub(crate) const MAGIC: f32 = 12_582_912.0;
/// ln 2 in two parts: `C1` = 0.693359375 has 9 significant bits, so `k * C1` is exact.
pub(crate) const C1: f32 = 0.693_359_4;
pub(crate) const C2: f32 = -2.121_944_4e-4;
/// Cephes' `expf` polynomial, highest degree first.
pub(crate) const EXP_P: [f32; 6] = [0.000_198_756_91, 0.001_398_199_9, 0.008_333_452, 0.041_665_796, 0.166_666_66, 0.5];
/// `expm1(r) = r + r^2 (1/2 + r P(r))` on `|r| <= ln 2 / 2`: P's coefficients, lowest
/// first, fitted for this project (weighted least squares on the relative error of `expm1`,
/// iterated towards minimax): 0.24 ulp before rounding.
pub(crate) const EXPM1_P: [f32; 4] = [0.166_665_5, 0.041_666_84, 0.008_365_964, 0.001_389_971_5];
/// `exp`'s input is clamped to `[EXP_LO, EXP_HI]` (0 and infinity beyond).
pub(crate) const EXP_LO: f32 = -104.0;
pub(crate) const EXP_HI: f32 = 89.0;
/// `tanh` computes `expm1(min(2|x|, TANH_CAP))`: tanh has long rounded to 1 there.
pub(crate) const TANH_CAP: f32 = 20.0;
/// Below this magnitude XLA's f32 `tanh` returns its operand (`remat_math::elementary`);
/// the inline f32 code (`codegen/math.rs`) returns it there too.
pub(crate) const TANH_IDENTITY_BELOW: f32 = 0.0004;

/// Cody–Waite reduction `x = k ln 2 + r`: `k + MAGIC` (whose bits are MAGIC's plus k) and `r`.
#[inline(always)]
fn reduce_ln2(x: f32) -> (f32, f32) {
    let kb = x.mul_add(std::f32::consts::LOG2_E, MAGIC);
    let nkf = -(kb - MAGIC);
    let r = nkf.mul_add(C1, x);
    (kb, nkf.mul_add(C2, r))
}

/// `math32::exp4` on one lane.
#[inline(always)]
fn exp(x: f32) -> f32 {
    let c = if x < EXP_LO { EXP_LO } else { x };
    let c = if c > EXP_HI { EXP_HI } else { c };
    let (kb, r) = reduce_ln2(c);
    let (r2, pair) = (r * r, |hi: f32, lo: f32| hi.mul_add(r, lo));
    let r4 = r2 * r2;
    let (a, b, cc) = (pair(EXP_P[0], EXP_P[1]), pair(EXP_P[2], EXP_P[3]), pair(EXP_P[4], EXP_P[5]));
    let p = a.mul_add(r4, b.mul_add(r2, cc));
    let p = p.mul_add(r2, r + 1.0);
    let k = (kb.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let (k1, k2) = (k >> 1, k - (k >> 1));
    let scale = |k: i32| f32::from_bits(((k + 127) << 23) as u32);
    let y = p * scale(k1) * scale(k2);
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// `math32::tanh4` on one lane, then `math_f32`'s select: the operand itself below 4e-4,
/// as XLA's f32 `tanh` (subnormals included).
#[inline(always)]
fn tanh(x: f32) -> f32 {
    let sign = x.to_bits() & 0x8000_0000;
    let ax = x.abs();
    let y = ax + ax;
    let y = if y < TANH_CAP { y } else { TANH_CAP };
    let (kb, r) = reduce_ln2(y);
    let r2 = r * r;
    let p = EXPM1_P[3].mul_add(r, EXPM1_P[2]).mul_add(r2, EXPM1_P[1].mul_add(r, EXPM1_P[0]));
    let em = p.mul_add(r, 0.5).mul_add(r2, r);
    let scale = f32::from_bits((kb.to_bits().wrapping_add(127)) << 23);
    let e = scale.mul_add(em, scale - 1.0);
    let t = f32::from_bits((e / (e + 2.0)).to_bits() | sign);
    if x.is_nan() || ax < TANH_IDENTITY_BELOW {
        x
    } else {
        t
    }
}

/// Which function a slice call computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SliceOp {
    Exp,
    Tanh,
}

/// The vector width the slice functions run at on this CPU, if it has AVX2 and FMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Avx512,
    Avx2,
}

/// The widest vectors this CPU runs the slice functions with; `None` leaves `exp` and
/// `tanh` to the inline `f32x4` code.
pub(crate) fn width() -> Option<Width> {
    #[cfg(target_arch = "x86_64")]
    {
        static WIDTH: OnceLock<Option<Width>> = OnceLock::new();
        *WIDTH.get_or_init(|| {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma");
            if avx2 && has!("avx512f") && has!("avx512vl") {
                Some(Width::Avx512)
            } else if avx2 {
                Some(Width::Avx2)
            } else {
                None
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// A slice function: `op` applied in place to `n` contiguous f32 at `ptr`.
pub(crate) type SliceFn = unsafe extern "C" fn(*mut f32, i64);

/// The function the JIT code calls for `op`, at `width`.
pub(crate) fn slice_fn(op: SliceOp, width: Option<Width>) -> SliceFn {
    match (op, width) {
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Exp, Some(Width::Avx512)) => x86::exp_avx512,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Exp, Some(Width::Avx2)) => x86::exp_avx2,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Tanh, Some(Width::Avx512)) => x86::tanh_avx512,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Tanh, Some(Width::Avx2)) => x86::tanh_avx2,
        (SliceOp::Exp, _) => exp_portable,
        (SliceOp::Tanh, _) => tanh_portable,
    }
}

/// Applies `f` to the `n` f32 at `ptr` in place.
///
/// # Safety
/// `ptr` points at `n` (or fewer than one, if `n <= 0`) initialized f32 that nothing
/// else accesses during the call.
#[inline(always)]
unsafe fn map_in_place(ptr: *mut f32, n: i64, f: impl Fn(f32) -> f32) {
    if n <= 0 {
        return;
    }
    // SAFETY: the caller's contract.
    let xs = unsafe { std::slice::from_raw_parts_mut(ptr, n as usize) };
    for x in xs {
        *x = f(*x);
    }
}

/// `dst[r, j] = f(src[r, j] + row[j])` over `n` f32 (whole rows of `width`) at `dst` and
/// `src`, which are the same memory or do not overlap.
///
/// # Safety
/// `dst` and `src` point at `n` f32 (nothing if `n <= 0`), `row` at `width` f32, `n` is a
/// multiple of `width > 0`, `dst` is either `src` or overlaps neither `src` nor `row`, and
/// nothing else accesses them during the call.
#[inline(always)]
unsafe fn map_add_row(dst: *mut f32, src: *const f32, row: *const f32, n: i64, width: i64, f: impl Fn(f32) -> f32) {
    if n <= 0 || width <= 0 {
        return;
    }
    let (n, width) = (n as usize, width as usize);
    // SAFETY: the caller's contract.
    let row = unsafe { std::slice::from_raw_parts(row, width) };
    if std::ptr::eq(dst, src) {
        // SAFETY: the caller's contract: `dst` holds `n` f32 of its own.
        let xs = unsafe { std::slice::from_raw_parts_mut(dst, n) };
        for xs in xs.chunks_exact_mut(width) {
            for (x, &b) in xs.iter_mut().zip(row) {
                *x = f(*x + b);
            }
        }
    } else {
        // SAFETY: the caller's contract: two distinct runs of `n` f32.
        let (ds, xs) = unsafe { (std::slice::from_raw_parts_mut(dst, n), std::slice::from_raw_parts(src, n)) };
        for (ds, xs) in ds.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
            for ((d, &x), &b) in ds.iter_mut().zip(xs).zip(row) {
                *d = f(x + b);
            }
        }
    }
}

/// A function `f(x + row)` over rows: `(dst, src, row, n, width)`, as [`map_add_row`].
pub(crate) type AddRowFn = unsafe extern "C" fn(*mut f32, *const f32, *const f32, i64, i64);

/// The function the JIT code calls for `op` of a sum with a broadcast row, at `width`.
pub(crate) fn add_row_fn(op: SliceOp, width: Option<Width>) -> AddRowFn {
    match (op, width) {
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Exp, Some(Width::Avx512)) => x86::add_row_exp_avx512,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Exp, Some(Width::Avx2)) => x86::add_row_exp_avx2,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Tanh, Some(Width::Avx512)) => x86::add_row_tanh_avx512,
        #[cfg(target_arch = "x86_64")]
        (SliceOp::Tanh, Some(Width::Avx2)) => x86::add_row_tanh_avx2,
        (SliceOp::Exp, _) => add_row_exp_portable,
        (SliceOp::Tanh, _) => add_row_tanh_portable,
    }
}

/// Add-row functions, one per `name => element function`, as `slice_fns`.
macro_rules! add_row_fns {
    ($($(#[$attr:meta])* $name:ident => $f:ident;)*) => {$(
        /// # Safety
        /// As [`map_add_row`]; a variant compiled for target features only on a CPU that
        /// has them (`width`).
        $(#[$attr])*
        pub(super) unsafe extern "C" fn $name(dst: *mut f32, src: *const f32, row: *const f32, n: i64, width: i64) {
            // SAFETY: the caller's contract.
            unsafe { map_add_row(dst, src, row, n, width, $f) }
        }
    )*};
}

add_row_fns! {
    add_row_exp_portable => exp;
    add_row_tanh_portable => tanh;
}

/// Slice functions, one per `name => element function`, each optionally compiled for
/// target features: the element function over `n` f32 at `ptr`, in place.
macro_rules! slice_fns {
    ($($(#[$attr:meta])* $name:ident => $f:ident;)*) => {$(
        /// # Safety
        /// As [`map_in_place`]; a variant compiled for target features only on a CPU that
        /// has them (`width`).
        $(#[$attr])*
        pub(super) unsafe extern "C" fn $name(ptr: *mut f32, n: i64) {
            // SAFETY: the caller's contract.
            unsafe { map_in_place(ptr, n, $f) }
        }
    )*};
}

slice_fns! {
    exp_portable => exp;
    tanh_portable => tanh;
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{exp, map_add_row, map_in_place, tanh};

    add_row_fns! {
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        add_row_exp_avx512 => exp;
        #[target_feature(enable = "avx2,fma")]
        add_row_exp_avx2 => exp;
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        add_row_tanh_avx512 => tanh;
        #[target_feature(enable = "avx2,fma")]
        add_row_tanh_avx2 => tanh;
    }

    slice_fns! {
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        exp_avx512 => exp;
        #[target_feature(enable = "avx2,fma")]
        exp_avx2 => exp;
        #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
        tanh_avx512 => tanh;
        #[target_feature(enable = "avx2,fma")]
        tanh_avx2 => tanh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs over the whole f32 range (a stride through the bit patterns) and the edges.
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..u32::MAX).step_by(65_521).map(f32::from_bits).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-45,
            -1e-45,
            88.7,
            89.5,
            -104.5,
            9.9,
            10.1,
        ]);
        xs
    }

    #[test]
    fn every_width_gives_the_scalar_bits() {
        let xs = inputs();
        for op in [SliceOp::Exp, SliceOp::Tanh] {
            let scalar: fn(f32) -> f32 = match op {
                SliceOp::Exp => exp,
                SliceOp::Tanh => tanh,
            };
            // The scalar reference through a call mul_add cannot fuse differently: it is
            // always one rounding.
            let want: Vec<u32> = xs.iter().map(|&x| scalar(x).to_bits()).collect();
            for width in [width(), None] {
                // Odd lengths and offsets: vector bodies and remainders both run.
                for (start, len) in [(0, xs.len()), (3, 37), (1, 16), (5, 0)] {
                    let mut got = xs[start..start + len].to_vec();
                    // SAFETY: `got` holds `len` f32 and is not otherwise borrowed; the
                    // function for `width` runs on this CPU (`width()` detected it).
                    unsafe { slice_fn(op, width)(got.as_mut_ptr(), len as i64) };
                    for (i, g) in got.iter().enumerate() {
                        let x = xs[start + i];
                        assert_eq!(g.to_bits(), want[start + i], "{op:?}({x:e}) at {width:?}");
                    }
                }
            }
        }
    }

    /// `f(x + row)` over rows, in place and into another buffer, gives the bits of the
    /// element function applied to the f32 sum, at every width.
    #[test]
    fn add_row_functions_give_the_scalar_bits() {
        let xs = inputs();
        let cols = 37;
        let n = xs.len() / cols * cols;
        let row: Vec<f32> = xs[..cols].iter().map(|x| x * 0.5).collect();
        for op in [SliceOp::Exp, SliceOp::Tanh] {
            let scalar: fn(f32) -> f32 = match op {
                SliceOp::Exp => exp,
                SliceOp::Tanh => tanh,
            };
            let want: Vec<u32> = (0..n).map(|i| scalar(xs[i] + row[i % cols]).to_bits()).collect();
            for w in [width(), None] {
                let f = add_row_fn(op, w);
                let mut into = vec![f32::NAN; n];
                let mut in_place = xs[..n].to_vec();
                // SAFETY: `into` and `xs` hold `n` f32 and do not overlap; `in_place` is
                // both source and destination; `row` holds `cols` f32; `n` is a multiple
                // of `cols`; the function for `w` runs on this CPU.
                unsafe {
                    f(into.as_mut_ptr(), xs.as_ptr(), row.as_ptr(), n as i64, cols as i64);
                    f(in_place.as_mut_ptr(), in_place.as_ptr(), row.as_ptr(), n as i64, cols as i64);
                }
                for (got, what) in [(&into, "into"), (&in_place, "in place")] {
                    let bits: Vec<u32> = got.iter().map(|g| g.to_bits()).collect();
                    assert!(bits == want, "{op:?} {what} at {w:?}");
                }
            }
        }
    }

    #[test]
    fn the_scalar_functions_are_close_to_f64() {
        for x in inputs() {
            let (e, t) = (exp(x), tanh(x));
            let (we, wt) = ((x as f64).exp() as f32, (x as f64).tanh() as f32);
            if x.is_nan() {
                assert!(e.is_nan() && t.is_nan());
                continue;
            }
            let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
            assert!(ulps(e, we) <= 2 || (e == 0.0 && we == 0.0), "exp({x:e}) = {e:e}, want {we:e}");
            assert!(ulps(t, wt) <= 2, "tanh({x:e}) = {t:e}, want {wt:e}");
        }
    }
}
