//! GEMM dispatch: `remat_dot`, the runtime of every `dot_general` JIT code calls, and the
//! choice of how a product runs: split by batch, by blocks of rows or columns, or by `k`
//! over the pool's threads, on one thread beside another product (`remat_pair`), through
//! faer's kernels or remat's own AVX2 `sgemm`, or as plain loops for integers and `bool`.

use remat_ir::DType;

use super::cpu::clear_upper_vector_state;
use super::pool::{fork_join, threads};
#[cfg(target_arch = "x86_64")]
use super::{sgemm, vmath};
use crate::program::DotDesc;

/// Whether a product may run beside another one (`remat_pair`): it runs on one thread (no
/// split of its own) and has at least [`PAIR_FLOPS`] multiply-adds, and there is a second
/// core.
pub(crate) fn dot_pairs(d: &DotDesc) -> bool {
    let batch: usize = d.batch.iter().map(|b| b.0).product();
    threads() > 1
        && matches!(d.dtype, DType::F32 | DType::F64)
        && !dot_is_parallel(d)
        && !dot_splits_batch(d)
        && batch.saturating_mul(d.m * d.n * d.k) >= PAIR_FLOPS
}

/// Products below this many multiply-adds (~0.25 us of one core) do not pay a fork.
const PAIR_FLOPS: usize = 1 << 16;

/// Products at least this large (m*n*k, one product or a whole batch) use both cores. A fork
/// costs well under a microsecond when the helpers are spinning (`pool`); 2^19
/// multiply-adds are ~2 us of one core. (It was 2^21 while forks woke rayon's workers:
/// 2^19 made scan_long's per-step `[32, 128] x [128, 128]` products 1.2-1.4x faster.)
const PARALLEL_FLOPS: usize = 1 << 19;

/// Single products at least this large are each cut into blocks for the threads; a batch of
/// smaller ones is split by batch instead (one fork for the whole batch).
const BLOCK_SPLIT_FLOPS: usize = 1 << 21;

/// `out = lhs . rhs` for one `dot_general`, batch by batch: a batched product whose
/// single products are too small for both cores (the attention's `[b, h, t, t]` scores and
/// their gradients) is split by batch instead, one contiguous range of batch elements per
/// thread, each product on one thread as it would be when run alone (so the same bits).
pub(super) extern "C" fn remat_dot(desc: *const DotDesc, lhs: *const u8, rhs: *const u8, out: *mut u8) {
    // SAFETY: `desc` points into the `Box<[DotDesc]>` the compiled program owns for as long
    // as its code can run; the code passes exactly such an address (a constant the entry
    // stores after the step's buffer addresses).
    let d = unsafe { &*desc };
    let batch: usize = d.batch.iter().map(|b| b.0).product();
    let parts = if dot_splits_batch(d) { threads().min(batch) } else { 1 };
    if parts <= 1 {
        dot_batches(d, lhs, rhs, out, 0..batch);
    } else {
        // Addresses cross to the pool threads: each range writes only its own batch
        // elements of `out` (the lowering never gives the output a zero batch stride), and
        // `fork_join` returns only after every range is done.
        let (l, r, o) = (lhs as usize, rhs as usize, out as usize);
        let bound = |p: usize| batch * p / parts;
        fork_join(parts, move |p: usize| {
            clear_upper_vector_state();
            dot_batches(d, l as *const u8, r as *const u8, o as *mut u8, bound(p)..bound(p + 1));
        });
    }
    clear_upper_vector_state();
}

/// The products of batch elements `range` (row-major over `d.batch`) of one `dot_general`.
fn dot_batches(d: &DotDesc, lhs: *const u8, rhs: *const u8, out: *mut u8, range: std::ops::Range<usize>) {
    for flat in range {
        let (mut lo, mut ro, mut oo) = (0isize, 0isize, 0isize);
        let mut rest = flat;
        for &(extent, ls, rs, os) in d.batch.iter().rev() {
            let i = (rest % extent) as isize;
            rest /= extent;
            lo += i * ls;
            ro += i * rs;
            oo += i * os;
        }
        match d.dtype {
            DType::F32 if dot_splits_k(d) => split_k_at::<f32>(d, lhs, rhs, out, (lo, ro, oo)),
            DType::F64 if dot_splits_k(d) => split_k_at::<f64>(d, lhs, rhs, out, (lo, ro, oo)),
            #[cfg(target_arch = "x86_64")]
            DType::F32 if dot_uses_own_sgemm(d) => own_sgemm_at(d, lhs, rhs, out, (lo, ro, oo)),
            DType::F32 => gemm_at::<f32>(d, lhs, rhs, out, (lo, ro, oo)),
            DType::F64 => gemm_at::<f64>(d, lhs, rhs, out, (lo, ro, oo)),
            DType::I8 => loop_at::<i8>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            DType::I16 => loop_at::<i16>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            DType::I32 => loop_at::<i32>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            DType::I64 => loop_at::<i64>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            DType::U8 => loop_at::<u8>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            DType::U32 => loop_at::<u32>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a.wrapping_add(x.wrapping_mul(y))),
            // The lowering converts 16-bit float operands to f32 (and keys have no products).
            DType::BF16 | DType::F16 | DType::Key | DType::C64 | DType::C128 => {}
            DType::Bool => loop_at::<bool>(d, lhs, rhs, out, (lo, ro, oo), |a, x, y| a | (x & y)),
        }
    }
}

/// Whether a product's batch is split over the threads: an f32/f64 product whose single
/// products are below [`BLOCK_SPLIT_FLOPS`] but whose batch together reaches
/// [`PARALLEL_FLOPS`]. Each thread then runs whole products, with no fork inside them.
fn dot_splits_batch(d: &DotDesc) -> bool {
    let batch: usize = d.batch.iter().map(|b| b.0).product();
    matches!(d.dtype, DType::F32 | DType::F64)
        && batch > 1
        && d.m * d.n * d.k < BLOCK_SPLIT_FLOPS
        && batch.saturating_mul(d.m * d.n * d.k) >= PARALLEL_FLOPS
}

/// Whether one product of a `dot_general` runs on more than one thread: it reaches
/// [`PARALLEL_FLOPS`], its batch is not split instead, and either its longer dimension gives
/// every thread a block (blocks are multiples of 32) or its `k` is long enough to split.
fn dot_is_parallel(d: &DotDesc) -> bool {
    matches!(d.dtype, DType::F32 | DType::F64)
        && d.m * d.n * d.k >= PARALLEL_FLOPS
        && !dot_splits_batch(d)
        && (d.m.max(d.n) >= 32 * threads() || long_k(d))
}

/// Whether a product's `k` is long enough, against its output, for the threads to split it.
fn long_k(d: &DotDesc) -> bool {
    d.k >= 2048 && d.k >= 4 * d.m.max(d.n)
}

/// One product through faer's `matmul`, which takes the operands' strides as they are
/// (transposed, broadcast with stride 0, or a transposed destination) and picks its kernels
/// at run time: AVX-512 where the CPU has it, else AVX2 + FMA (private-gemm-x86), small
/// shapes unrolled (nano-gemm), a portable fallback elsewhere.
///
/// A product for both cores is cut into one block of output rows (or columns, whichever
/// dimension is longer) per thread of the pool, each a one-thread faer product. faer's own
/// threading (`Par::rayon`) meets at a spinning barrier several times per product; on this
/// shared host, when another process holds a core, the thread that waits spins through its
/// time slice for a partner that is not running: the transformers ran about 2x slower that
/// way than with the blocks (docs/benchmarks_history.md, "Transformers (issue 26, 2026-11-26)").
fn gemm_at<T: faer::traits::ComplexField + Copy>(
    d: &DotDesc,
    lhs: *const u8,
    rhs: *const u8,
    out: *mut u8,
    (lo, ro, oo): (isize, isize, isize),
) {
    if !dot_is_parallel(d) {
        gemm_block::<T>(d, lhs, rhs, out, (lo, ro, oo), (0..d.m, 0..d.n));
        return;
    }
    let parts = threads();
    let by_rows = d.m >= d.n;
    let len = if by_rows { d.m } else { d.n };
    // Block bounds are multiples of 32 elements (two AVX-512 vectors, eight of the kernels'
    // four-column tiles), the last one ends at `len`.
    let bound = move |p: usize| if p == parts { len } else { len * p / parts / 32 * 32 };
    // Addresses cross to the pool threads: each block writes only its own rows (or
    // columns) of the destination, and `fork_join` returns when every block is done.
    let (l, r, o) = (lhs as usize, rhs as usize, out as usize);
    fork_join(parts, move |p: usize| {
        let block = bound(p)..bound(p + 1);
        let blocks = if by_rows { (block, 0..d.n) } else { (0..d.m, block) };
        gemm_block::<T>(d, l as *const u8, r as *const u8, o as *mut u8, (lo, ro, oo), blocks);
        clear_upper_vector_state();
    });
}

/// Rows `rows` and columns `cols` of one product, on this thread.
fn gemm_block<T: faer::traits::ComplexField + Copy>(
    d: &DotDesc,
    lhs: *const u8,
    rhs: *const u8,
    out: *mut u8,
    (lo, ro, oo): (isize, isize, isize),
    (rows, cols): (std::ops::Range<usize>, std::ops::Range<usize>),
) {
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    let (i, j) = (rows.start as isize, cols.start as isize);
    // SAFETY: the lowering built `d` from the operands' views: every element
    // `base + off + i*stride` for i below the extents lies inside the operand buffers, whose
    // sizes the plan and the argument checks guarantee, and `rows`, `cols` lie within the
    // extents `m`, `n`; `out` is a distinct buffer of `batch*m*n` elements (the planner
    // never overlaps a step's inputs and output).
    unsafe {
        let dst = faer::MatMut::from_raw_parts_mut(
            (out as *mut T).offset(oo + i * d.out_m + j * d.out_n),
            rows.len(),
            cols.len(),
            d.out_m,
            d.out_n,
        );
        let l =
            faer::MatRef::from_raw_parts((lhs as *const T).offset(lo + i * d.lhs_m), rows.len(), d.k, d.lhs_m, d.lhs_k);
        let r =
            faer::MatRef::from_raw_parts((rhs as *const T).offset(ro + j * d.rhs_n), d.k, cols.len(), d.rhs_k, d.rhs_n);
        faer::linalg::matmul::matmul(dst, faer::Accum::Replace, l, r, T::one_impl(), faer::Par::Seq);
    }
}

/// Whether a two-thread product is deep and narrow (the contracted axis at least 2048 and
/// four times the larger of m and n, as a scan's weight gradient summed over all steps at
/// once: 128 x (256 * 32) x 128, 512 x (64 * 32) x 512): each thread then takes a share of
/// `k`, reading half of each operand, where blocks of rows or columns would each read all
/// of the other operand's `k` extent. (Measured against faer's own threading, whose barriers
/// took 20-50% of a scan's samples on the busy machine, not against `gemm_at`'s blocks.)
fn dot_splits_k(d: &DotDesc) -> bool {
    dot_is_parallel(d) && threads() > 1 && long_k(d)
}

/// `out = lhs . rhs` with `k` split over the pool's threads: the first share into `out`,
/// each other into a buffer of its own, added into `out` after the join.
fn split_k_at<T: faer::traits::ComplexField + Copy + std::ops::Add<Output = T>>(
    d: &DotDesc,
    lhs: *const u8,
    rhs: *const u8,
    out: *mut u8,
    (lo, ro, oo): (isize, isize, isize),
) {
    let parts = threads().min(d.k);
    let bound = move |p: usize| d.k * p / parts;
    // Raw pointers are not `Send`; their addresses are.
    let (l, r, o) = (
        (lhs as *const T).wrapping_offset(lo) as usize,
        (rhs as *const T).wrapping_offset(ro) as usize,
        (out as *mut T).wrapping_offset(oo) as usize,
    );
    let share = move |p: usize, dst: *mut T, (dst_m, dst_n): (isize, isize)| {
        let (k0, k1) = (bound(p), bound(p + 1));
        // SAFETY: as in `gemm_at`: `d` describes views inside the operand buffers, and rows
        // `k0..k1` of the contracted axis are inside them; `dst` is `out` (this thread's
        // share is the only one writing it) or a buffer of `m * n` elements of this thread.
        unsafe {
            let dst = faer::MatMut::from_raw_parts_mut(dst, d.m, d.n, dst_m, dst_n);
            let a = faer::MatRef::from_raw_parts(
                (l as *const T).offset(k0 as isize * d.lhs_k),
                d.m,
                k1 - k0,
                d.lhs_m,
                d.lhs_k,
            );
            let b = faer::MatRef::from_raw_parts(
                (r as *const T).offset(k0 as isize * d.rhs_k),
                k1 - k0,
                d.n,
                d.rhs_k,
                d.rhs_n,
            );
            faer::linalg::matmul::matmul(dst, faer::Accum::Replace, a, b, T::one_impl(), faer::Par::Seq);
        }
    };
    // The other threads' shares go to this thread's scratch, kept across calls (as
    // `sgemm`'s packing buffers: no allocation per product once it has grown), each laid
    // out like the destination, so that the sums below walk both in memory order (a
    // transposed destination walked by rows would touch a new line per element: 8% of a
    // wide scan's samples).
    let rows_outer = d.out_m.unsigned_abs() >= d.out_n.unsigned_abs();
    let strides = if rows_outer { (d.n as isize, 1) } else { (1, d.m as isize) };
    let len = d.m * d.n;
    let add_shares = |scratch: &mut Vec<u64>| {
        // `u64` words: aligned for `f32` and `f64`.
        let words = ((parts - 1) * len * size_of::<T>()).div_ceil(size_of::<u64>());
        if scratch.len() < words {
            scratch.resize(words, 0);
        }
        let base = scratch.as_mut_ptr() as usize;
        let share_at = move |p: usize| (base as *mut T).wrapping_add((p - 1) * len);
        fork_join(parts, move |p: usize| match p {
            0 => share(0, o as *mut T, (d.out_m, d.out_n)),
            _ => {
                clear_upper_vector_state();
                share(p, share_at(p), strides);
            }
        });
        let (outer, inner) = if rows_outer { (d.m, d.n) } else { (d.n, d.m) };
        for p in 1..parts {
            let buf = share_at(p);
            for a in 0..outer {
                for b in 0..inner {
                    let (i, j) = if rows_outer { (a, b) } else { (b, a) };
                    // SAFETY: `(i, j)` is below the destination's extents, and the share's
                    // `m * n` elements lie inside the scratch resized above.
                    unsafe {
                        let at = (o as *mut T).offset(i as isize * d.out_m + j as isize * d.out_n);
                        *at = *at + *buf.offset(i as isize * strides.0 + j as isize * strides.1);
                    }
                }
            }
        }
    };
    SPLIT_K_SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => add_shares(&mut scratch),
        // A product inside another's wait on this thread (a rayon thread that stole work,
        // when the helpers were held):
        // a scratch of its own.
        Err(_) => add_shares(&mut Vec::new()),
    });
}

thread_local! {
    /// [`split_k_at`]'s buffers for the other threads' shares.
    static SPLIT_K_SCRATCH: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a product goes to remat's own AVX2 GEMM (`sgemm`) instead of faer's: a
/// two-thread f32 product on an x86-64 CPU with AVX2 + FMA but without AVX-512 (the
/// detection the `exp`/`tanh` rows use). There faer's AVX2 kernels measured 82-147 GFLOP/s
/// against 117-145 for `sgemm` (weakest with a transposed lhs, the weight gradients
/// `x^T . dy`), while faer's unrolled small-shape kernels stay ahead below the two-thread
/// threshold and its AVX-512 kernels everywhere they run (docs/jit.md, "Choosing the GEMM").
#[cfg(target_arch = "x86_64")]
fn dot_uses_own_sgemm(d: &DotDesc) -> bool {
    d.dtype == DType::F32 && dot_is_parallel(d) && vmath::width() == Some(vmath::Width::Avx2)
}

/// One f32 product through [`sgemm::sgemm`] on every thread of the pool.
#[cfg(target_arch = "x86_64")]
fn own_sgemm_at(d: &DotDesc, lhs: *const u8, rhs: *const u8, out: *mut u8, (lo, ro, oo): (isize, isize, isize)) {
    use sgemm::{Dest, Operand};
    // SAFETY: `dot_uses_own_sgemm` checked AVX2 + FMA. As in `gemm_at`: `d` describes views
    // inside the operand buffers and a destination of distinct elements (the lowering never
    // gives an output a zero stride) inside `out`, a buffer distinct from the operands.
    unsafe {
        let a = Operand { ptr: (lhs as *const f32).offset(lo), rs: d.lhs_m, cs: d.lhs_k };
        let b = Operand { ptr: (rhs as *const f32).offset(ro), rs: d.rhs_k, cs: d.rhs_n };
        let c = Dest { ptr: (out as *mut f32).offset(oo), rs: d.out_m, cs: d.out_n };
        sgemm::sgemm(d.m, d.k, d.n, a, b, c, threads());
    }
}

fn loop_at<T: Copy + Default>(
    d: &DotDesc,
    lhs: *const u8,
    rhs: *const u8,
    out: *mut u8,
    (lo, ro, oo): (isize, isize, isize),
    fma: fn(T, T, T) -> T,
) {
    let (l, r, o) = (lhs as *const T, rhs as *const T, out as *mut T);
    for i in 0..d.m as isize {
        for j in 0..d.n as isize {
            let mut acc = T::default();
            for k in 0..d.k as isize {
                // SAFETY: as in `gemm_at`: the indices stay below the extents of `d`, which
                // describe views inside the operand buffers.
                let (x, y) =
                    unsafe { (*l.offset(lo + i * d.lhs_m + k * d.lhs_k), *r.offset(ro + k * d.rhs_k + j * d.rhs_n)) };
                acc = fma(acc, x, y);
            }
            // SAFETY: the output view of `d` lies inside the destination buffer.
            unsafe { *o.offset(oo + i * d.out_m + j * d.out_n) = acc };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batched product whose single products stay on one thread, split by batch over the
    /// pool, gives the bits of the same products run one after the other on one thread:
    /// the attention's `[b, t, h, d]` layout (heads inside the rows), an odd batch of 15
    /// over two or more threads.
    #[test]
    fn a_batch_split_over_threads_gives_the_bits_of_one_thread() {
        let (b, h, t, dh) = (3usize, 5usize, 100usize, 80usize);
        let row = (h * dh) as isize;
        let d = DotDesc {
            dtype: DType::F32,
            batch: vec![
                (b, t as isize * row, t as isize * row, (h * t * t) as isize),
                (h, dh as isize, dh as isize, (t * t) as isize),
            ],
            m: t,
            n: t,
            k: dh,
            lhs_m: row,
            lhs_k: 1,
            rhs_k: 1,
            rhs_n: row,
            out_m: t as isize,
            out_n: 1,
        };
        assert!(dot_splits_batch(&d) && !dot_is_parallel(&d));
        let mut rng = remat_testkit::Rng(3);
        let q: Vec<f32> = (0..b * t * h * dh).map(|_| rng.next_f64() as f32).collect();
        let k: Vec<f32> = (0..b * t * h * dh).map(|_| rng.next_f64() as f32).collect();
        let mut split = vec![f32::NAN; b * h * t * t];
        let mut serial = vec![f32::NAN; b * h * t * t];
        let (lhs, rhs, out) = (q.as_ptr() as usize, k.as_ptr() as usize, split.as_mut_ptr() as usize);
        remat_dot(&d, lhs as *const u8, rhs as *const u8, out as *mut u8);
        dot_batches(&d, lhs as *const u8, rhs as *const u8, serial.as_mut_ptr() as *mut u8, 0..b * h);
        assert!(serial.iter().all(|x| x.is_finite()), "every product written");
        assert!(split.iter().zip(&serial).all(|(x, y)| x.to_bits() == y.to_bits()), "the same bits");
        // And the products are the products: one element against a plain sum.
        let (bi, hi, i, j) = (2, 3, 41, 77);
        let want: f64 = (0..dh)
            .map(|c| {
                let at = |x: &[f32], r: usize| x[bi * t * h * dh + r * h * dh + hi * dh + c] as f64;
                at(&q, i) * at(&k, j)
            })
            .sum();
        let got = split[(bi * h + hi) * t * t + i * t + j] as f64;
        assert!((got - want).abs() < 1e-4 * want.abs().max(1.0), "{got} against {want}");
    }
}
