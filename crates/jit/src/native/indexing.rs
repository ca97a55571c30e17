//! The runtime of the primitives JIT code does not compute inline: `gather`, the scatters,
//! `sort`, `top_k`, `argmin`, the cumulative reductions, and `cholesky`,
//! `triangular_solve`, `lu`, `lu_pivots_to_permutation`, `qr`, `geqrf`, `householder_product`, `ormqr`, `eigh`, `svd`, `tridiagonal_solve` and `symmetric_product` (`remat_math::linalg`'s kernels, the interpreter's), each over whole
//! row-major buffers (`remat_native`, one call per equation).
//!
//! Semantics are the interpreter's (XLA's): gather clamps starts (or fills, under
//! `FILL_OR_DROP`), scatters clamp (`CLIP`) or drop out-of-bounds windows, sorts put NaN
//! last and are stable and read subnormals as zeros, cumulative reductions run
//! sequentially from the operation's identity; `max`/`min` are XLA's (`remat_math`). The contiguous case of
//! `gather` and `scatter-add` (slices that are whole trailing rows, as embedding lookups
//! and their transposes take) moves whole rows at once.
//!
//! The step's base addresses become ndarray views (`step.rs`); everything after that is
//! safe code over those views.

use std::cmp::Ordering;

use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, Axis, IxDyn};
use remat_ir::{CumulativeOp, DType, GatherScatterMode, Primitive, ScatterOp, TriangularSolve};
use remat_math::complex::ComplexElement;
use remat_math::element::{self, Element, Narrow};
use remat_math::{elementary, linalg, with_dtype};

use super::random;
use super::step::Bases;
use crate::program::NativeDesc;

/// An element type the runtime works on: the element rules both backends share
/// ([`Element`]: identities, XLA's `max`/`min`, compares, conversions) and the arithmetic
/// of the cumulative reductions.
trait El: Element {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `logaddexp` for floats (the shape rule admits `cumlogsumexp` on floats only).
    fn logaddexp(self, o: Self) -> Self;
}

macro_rules! float_el {
    ($t:ty) => {
        impl El for $t {
            fn add(self, o: $t) -> $t {
                self + o
            }
            fn sub(self, o: $t) -> $t {
                self - o
            }
            fn mul(self, o: $t) -> $t {
                self * o
            }
            /// As the interpreter's, with its functions (`remat_math::elementary`).
            fn logaddexp(self, o: $t) -> $t {
                let amax = self.max_nan(o);
                let delta = self - o;
                if delta.is_nan() {
                    self + o
                } else {
                    amax + elementary::log1p(elementary::exp(-delta.abs()))
                }
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
            fn add(self, o: $t) -> $t {
                Narrow::from_f32(Narrow::to_f32(self) + Narrow::to_f32(o))
            }
            fn sub(self, o: $t) -> $t {
                Narrow::from_f32(Narrow::to_f32(self) - Narrow::to_f32(o))
            }
            fn mul(self, o: $t) -> $t {
                Narrow::from_f32(Narrow::to_f32(self) * Narrow::to_f32(o))
            }
            /// Each operation of `logaddexp` rounded to the 16-bit type, as the interpreter
            /// (and the JIT's elementwise code) does: rounding once at the end differs in
            /// the last bits, which a cancellation downstream magnifies.
            fn logaddexp(self, o: $t) -> $t {
                let r = <$t as Narrow>::from_f32;
                let w = <$t as Narrow>::to_f32;
                let delta = r(w(self) - w(o));
                if delta.is_nan() {
                    r(w(self) + w(o))
                } else {
                    let e = r(elementary::exp(-w(delta).abs()));
                    r(w(self.max_nan(o)) + w(r(elementary::log1p(w(e)))))
                }
            }
        }
    };
}
narrow_el!(remat_ir::bf16);
narrow_el!(remat_ir::f16);

/// The integers, wrapping; `logaddexp` is never reached (floats only) and gives `max`.
macro_rules! int_el {
    ($t:ty) => {
        impl El for $t {
            fn add(self, o: $t) -> $t {
                self.wrapping_add(o)
            }
            fn sub(self, o: $t) -> $t {
                self.wrapping_sub(o)
            }
            fn mul(self, o: $t) -> $t {
                self.wrapping_mul(o)
            }
            fn logaddexp(self, o: $t) -> $t {
                self.max_nan(o)
            }
        }
    };
}
int_el!(i8);
int_el!(i16);
int_el!(i32);
int_el!(i64);
int_el!(u8);
int_el!(u32);

impl El for bool {
    fn add(self, o: bool) -> bool {
        self | o
    }
    /// Never reached: the shape rule keeps `scatter-sub` to numbers.
    fn sub(self, o: bool) -> bool {
        self ^ o
    }
    fn mul(self, o: bool) -> bool {
        self & o
    }
    fn logaddexp(self, o: bool) -> bool {
        self | o
    }
}

/// Keys only move (gather, scatter's set, sort's payload); the shape rules keep them out of
/// arithmetic, so the numeric methods are never reached.
impl El for remat_ir::PrngKey {
    fn add(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
    fn sub(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
    fn mul(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
    fn logaddexp(self, _: remat_ir::PrngKey) -> remat_ir::PrngKey {
        self
    }
}

macro_rules! complex_el {
    ($t:ty) => {
        /// Complex gathers, scatters, sorts and cumulative sums run here too, in
        /// `remat_math::complex`'s arithmetic.
        impl El for $t {
            fn add(self, o: $t) -> $t {
                ComplexElement::add(self, o)
            }
            fn sub(self, o: $t) -> $t {
                ComplexElement::sub(self, o)
            }
            fn mul(self, o: $t) -> $t {
                ComplexElement::mul(self, o)
            }
            fn logaddexp(self, _: $t) -> $t {
                self
            }
        }
    };
}

complex_el!(remat_ir::c64);
complex_el!(remat_ir::c128);

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
        DType::I32
        | DType::F32
        | DType::F64
        | DType::BF16
        | DType::F16
        | DType::Bool
        | DType::Key
        | DType::C64
        | DType::C128 => b.view::<i32>(1).to_owned(),
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
        Primitive::Cholesky => match d.in_avals[0].dtype {
            DType::F64 => linear_algebra::<f64>(b, None),
            _ => linear_algebra::<f32>(b, None),
        },
        Primitive::TriangularSolve(t) => match d.in_avals[0].dtype {
            DType::F64 => linear_algebra::<f64>(b, Some(t)),
            _ => linear_algebra::<f32>(b, Some(t)),
        },
        Primitive::RegularizedIncompleteBeta => with_dtype!(d.in_avals[0].dtype, T => betainc::<T>(b)),
        Primitive::Lu => match d.in_avals[0].dtype {
            DType::F64 => lu::<f64>(b),
            _ => lu::<f32>(b),
        },
        Primitive::SymmetricProduct { alpha, beta } => {
            let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
            match d.in_avals[0].dtype {
                DType::F64 => {
                    let out = linalg::symmetric_product(&b.view::<f64>(0), &b.view::<f64>(1), alpha, beta);
                    b.view_mut::<f64>(0).assign(&out);
                }
                _ => {
                    let out = linalg::symmetric_product(&b.view::<f32>(0), &b.view::<f32>(1), alpha, beta);
                    b.view_mut::<f32>(0).assign(&out);
                }
            }
        }
        Primitive::Eigh(params) => {
            let lower = params.lower;
            match d.in_avals[0].dtype {
                DType::F64 => {
                    let (v, w) = linalg::eigh(&b.view::<f64>(0), lower, |x| x, |x| x);
                    b.view_mut::<f64>(0).assign(&v);
                    b.view_mut::<f64>(1).assign(&w);
                }
                _ => {
                    let (v, w) = linalg::eigh(&b.view::<f32>(0), lower, f64::from, |x| x as f32);
                    b.view_mut::<f32>(0).assign(&v);
                    b.view_mut::<f32>(1).assign(&w);
                }
            }
        }
        Primitive::Geqrf => match d.in_avals[0].dtype {
            DType::F64 => {
                let (f, taus) = linalg::geqrf(&b.view::<f64>(0));
                b.view_mut::<f64>(0).assign(&f);
                b.view_mut::<f64>(1).assign(&taus);
            }
            _ => {
                let (f, taus) = linalg::geqrf(&b.view::<f32>(0));
                b.view_mut::<f32>(0).assign(&f);
                b.view_mut::<f32>(1).assign(&taus);
            }
        },
        Primitive::HouseholderProduct => match d.in_avals[0].dtype {
            DType::F64 => {
                let q = linalg::householder_product(&b.view::<f64>(0), &b.view(1));
                b.view_mut::<f64>(0).assign(&q);
            }
            _ => {
                let q = linalg::householder_product(&b.view::<f32>(0), &b.view(1));
                b.view_mut::<f32>(0).assign(&q);
            }
        },
        Primitive::Ormqr { left, transpose } => match d.in_avals[0].dtype {
            DType::F64 => {
                let out = linalg::ormqr(&b.view::<f64>(0), &b.view(1), &b.view(2), *left, *transpose);
                b.view_mut::<f64>(0).assign(&out);
            }
            _ => {
                let out = linalg::ormqr(&b.view::<f32>(0), &b.view(1), &b.view(2), *left, *transpose);
                b.view_mut::<f32>(0).assign(&out);
            }
        },
        Primitive::TridiagonalSolve { .. } => match d.in_avals[3].dtype {
            DType::F64 => {
                let x = linalg::tridiagonal_solve(&b.view(0), &b.view(1), &b.view(2), &b.view::<f64>(3), |x| x);
                b.view_mut::<f64>(0).assign(&x);
            }
            _ => {
                let x = linalg::tridiagonal_solve(&b.view(0), &b.view(1), &b.view(2), &b.view::<f32>(3), f64::from);
                b.view_mut::<f32>(0).assign(&x);
            }
        },
        Primitive::Svd(params) => match d.in_avals[0].dtype {
            DType::F64 => {
                for (i, out) in linalg::svd(&b.view::<f64>(0), params, |x| x).iter().enumerate() {
                    b.view_mut::<f64>(i).assign(out);
                }
            }
            _ => {
                for (i, out) in linalg::svd(&b.view::<f32>(0), params, f64::from).iter().enumerate() {
                    b.view_mut::<f32>(i).assign(out);
                }
            }
        },
        Primitive::Qr(params) => match d.in_avals[0].dtype {
            DType::F64 => qr::<f64>(b, params),
            _ => qr::<f32>(b, params),
        },
        Primitive::LuPivotsToPermutation { permutation_size } => {
            let out = linalg::lu_pivots_to_permutation(&b.view::<i32>(0), *permutation_size);
            b.view_mut::<i32>(0).assign(&out);
        }
        Primitive::RandomSeed => random::seed(b),
        Primitive::RandomWrap => random::wrap(b),
        Primitive::RandomUnwrap => random::unwrap(b),
        Primitive::RandomSplit { shape } => random::split(b, shape),
        Primitive::RandomFoldIn => random::fold_in(b),
        Primitive::RandomBits { shape, .. } => random::bits(b, shape),
        Primitive::Threefry2x32 => random::threefry(b),
        Primitive::Iota2x32Shape { shape } => random::iota_2x32(b, shape),
        Primitive::RngBitGenerator { algorithm, dtype, shape } => {
            random::rng_bit_generator(b, *algorithm, *dtype, shape)
        }
        // Every other native step computes on complex values (`lower::ops`'s
        // `complex_route`): `remat_math::complex` over copies of the buffers.
        other => super::complex::run(other, b),
    }
}

/// `regularized_incomplete_beta a b x` (`remat_math::betainc`, the interpreter's definition
/// too), a scalar operand broadcast to the result's shape.
fn betainc<T: Element>(b: &Bases) {
    let shape = IxDyn(&b.desc.out_avals[0].shape);
    let (a, bb, x) = (b.view::<T>(0), b.view::<T>(1), b.view::<T>(2));
    let wide = |v: &ArrayViewD<'_, T>| v.broadcast(shape.clone()).map(|w| w.to_owned());
    let (Some(a), Some(bb), Some(x)) = (wide(&a), wide(&bb), wide(&x)) else {
        return; // the shape rule admits only scalars and the result's shape
    };
    let out = ndarray::Zip::from(&a).and(&bb).and(&x).map_collect(|&a, &b, &x| remat_math::betainc(a, b, x));
    b.view_mut::<T>(0).assign(&out);
}

/// `cholesky` (`solve` is `None`) or `triangular_solve` on `T` (f32 or f64, as the shape
/// rules admit): the result is computed whole before it is written, since the output may
/// share operand 0's buffer.
fn linear_algebra<T: linalg::LinalgFloat + 'static>(b: &Bases, solve: Option<&TriangularSolve>) {
    let out = match solve {
        Some(t) => linalg::triangular_solve(t, &b.view::<T>(0), &b.view::<T>(1)),
        None => linalg::cholesky(&b.view::<T>(0)),
    };
    b.view_mut::<T>(0).assign(&out);
}

/// `lu` on `T` (f32 or f64): the three results computed whole before any is written.
fn lu<T: linalg::LinalgFloat + 'static>(b: &Bases) {
    let (lu, pivots, perm) = linalg::lu(&b.view::<T>(0));
    b.view_mut::<T>(0).assign(&lu);
    b.view_mut::<i32>(1).assign(&pivots);
    b.view_mut::<i32>(2).assign(&perm);
}

/// `qr` on `T` (f32 or f64): every result computed before any is written.
fn qr<T: linalg::LinalgFloat + 'static>(b: &Bases, params: &remat_ir::Qr) {
    let (q, r, p) = linalg::qr(&b.view::<T>(0), params);
    b.view_mut::<T>(0).assign(&q);
    b.view_mut::<T>(1).assign(&r);
    if let Some(p) = p {
        b.view_mut::<i32>(2).assign(&p);
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

/// The clamped start of the slice or window of the index vector at batch position `g`,
/// and whether it was in bounds (`remat_math::element::clamped_start`).
fn start_of(
    idx: &ArrayViewD<i32>,
    g: &[usize],
    index_map: &[usize],
    batching: (&[usize], &[usize]),
    hi: &[i64],
) -> (Vec<usize>, bool) {
    element::clamped_start(|at| i64::from(idx[IxDyn(at)]), g, index_map, batching, hi)
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
        ScatterOp::Sub => T::sub,
        ScatterOp::Mul => T::mul,
        ScatterOp::Min => T::min_nan,
        ScatterOp::Max => T::max_nan,
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

/// For every lane along `axis`, the dense rank of each element.
fn lane_ranks<T: El>(a: &ArrayViewD<T>, axis: usize) -> Vec<Vec<usize>> {
    a.lanes(Axis(axis)).into_iter().map(element::dense_ranks).collect()
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
        for (j, &p) in element::descending(lane).iter().take(k).enumerate() {
            v[j] = lane[p];
            i[j] = i32::try_from(p).unwrap_or(i32::MAX);
        }
    }
}

fn argmin<T: El>(x: &ArrayViewD<T>, axis: usize, out: &mut ArrayViewMutD<i32>) {
    let found: ArrayD<i32> = x.map_axis(Axis(axis), |lane| i32::try_from(element::first_min(lane)).unwrap_or(i32::MAX));
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
        CumulativeOp::Max => (T::max_nan, T::LOWEST),
        CumulativeOp::Min => (T::min_nan, T::HIGHEST),
        CumulativeOp::LogSumExp => (T::logaddexp, T::LOWEST),
    };
    element::accumulate(out, axis, reverse, identity, f);
}
