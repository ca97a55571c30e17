//! The only module with `unsafe` code: entering JIT code, the runtime functions JIT code
//! calls (GEMM over raw pointers, libm wrappers, `vmath`'s `exp`/`tanh` over rows,
//! `indexing`'s gathers, scatters, sorts and scans over whole buffers), and the page advice
//! for fresh outputs.
//!
//! The workspace denies `unsafe_code`; this module allows it because calling generated
//! machine code and handing raw buffer pointers to a GEMM cannot be expressed in safe Rust.
//! Each block states the invariant it relies on. The invariants come from two places:
//! the planner (every arena offset plus size fits the arena the runtime allocates) and the
//! entry checks in `Compiled::run` (every argument has its declared dtype and shape, so
//! every table pointer addresses at least the bytes the plan assumes).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use cranelift_jit::JITModule;
use cranelift_module::FuncId;
use remat_ir::{BinaryOp, DType, UnaryOp};
use remat_math::elementary;

use crate::program::DotDesc;

mod contention;
pub(crate) mod indexing;
#[cfg(test)]
mod kernel_tests;
mod pool;
mod random;
#[cfg(target_arch = "x86_64")]
mod sgemm;
pub(crate) mod vmath;

// The fork and join of every split product, loop and pair of steps.
use pool::fork_join;

/// The runtime functions JIT code may call, registered as symbols of the JIT module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Import {
    Dot,
    ParallelFor,
    Pair,
    ExpF64,
    LogF64,
    Log1pF64,
    Expm1F64,
    SinF64,
    CosF64,
    TanF64,
    TanhF64,
    PowF64,
    SinF32,
    CosF32,
    TanF32,
    /// `exp` in place over a contiguous run of f32 (`vmath`).
    ExpF32Slice,
    /// `tanh` in place over a contiguous run of f32 (`vmath`).
    TanhF32Slice,
    /// `exp(x + row)` over contiguous rows of f32 (`vmath::add_row_fn`).
    ExpAddRowF32,
    /// `tanh(x + row)` over contiguous rows of f32 (`vmath::add_row_fn`).
    TanhAddRowF32,
    /// A gather, scatter, sort, ... over whole buffers (`indexing`).
    Native,
    /// `remat-math`'s unary functions: `(op index in UnaryOp::ALL, x)`.
    MathUnaryF32,
    MathUnaryF64,
    /// `remat-math`'s binary functions: `(op index in BinaryOp::ALL, x, y)`.
    MathBinaryF32,
    MathBinaryF64,
}

/// The Cranelift signature shape of an import.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ImportSig {
    F32ToF32,
    F64ToF64,
    F64F64ToF64,
    /// `(desc, lhs, rhs, out)`, all pointers.
    Dot,
    /// `(range function, bases, total, grain)`.
    ParallelFor,
    /// `(site, step function, bases, step function, bases)`.
    Pair,
    /// `(ptr, len)` of a run of f32 changed in place.
    Slice,
    /// `(dst, src, row, len, width)`: rows of f32 plus a broadcast row, mapped.
    AddRow,
    /// `(desc, bases)`, both pointers.
    Native,
    /// `(op, x)` with an `i32` op index.
    OpF32ToF32,
    OpF64ToF64,
    /// `(op, x, y)` with an `i32` op index.
    OpF32F32ToF32,
    OpF64F64ToF64,
}

// The f64 functions as the interpreter computes them (`remat_math::elementary`: XLA's
// treatment of subnormals made explicit).
extern "C" fn exp_f64(x: f64) -> f64 {
    elementary::exp(x)
}
extern "C" fn log_f64(x: f64) -> f64 {
    elementary::log(x)
}
extern "C" fn log1p_f64(x: f64) -> f64 {
    elementary::log1p(x)
}
extern "C" fn expm1_f64(x: f64) -> f64 {
    elementary::expm1(x)
}
extern "C" fn sin_f64(x: f64) -> f64 {
    elementary::sin(x)
}
extern "C" fn cos_f64(x: f64) -> f64 {
    elementary::cos(x)
}
extern "C" fn tan_f64(x: f64) -> f64 {
    elementary::tan(x)
}
extern "C" fn tanh_f64(x: f64) -> f64 {
    elementary::tanh(x)
}
extern "C" fn pow_f64(x: f64, y: f64) -> f64 {
    elementary::pow(x, y)
}
/// The function of `UnaryOp::ALL[op]` from `remat-math`; NaN for an op it does not define
/// (the lowering passes only ops it does).
extern "C" fn math_unary<T: remat_math::MathFloat + From<f32>>(op: i32, x: T) -> T {
    match UnaryOp::ALL.get(op as usize).and_then(|&op| T::unary(op)) {
        Some(f) => f(x),
        None => T::from(f32::NAN),
    }
}

/// The function of `BinaryOp::ALL[op]` from `remat-math`, as [`math_unary`].
extern "C" fn math_binary<T: remat_math::MathFloat + From<f32>>(op: i32, x: T, y: T) -> T {
    match BinaryOp::ALL.get(op as usize).and_then(|&op| T::binary(op)) {
        Some(f) => f(x, y),
        None => T::from(f32::NAN),
    }
}

extern "C" fn sin_f32(x: f32) -> f32 {
    x.sin()
}
extern "C" fn cos_f32(x: f32) -> f32 {
    x.cos()
}
extern "C" fn tan_f32(x: f32) -> f32 {
    x.tan()
}

impl Import {
    pub const ALL: [Import; 24] = [
        Import::Dot,
        Import::ParallelFor,
        Import::Pair,
        Import::ExpF64,
        Import::LogF64,
        Import::Log1pF64,
        Import::Expm1F64,
        Import::SinF64,
        Import::CosF64,
        Import::TanF64,
        Import::TanhF64,
        Import::PowF64,
        Import::SinF32,
        Import::CosF32,
        Import::TanF32,
        Import::ExpF32Slice,
        Import::TanhF32Slice,
        Import::ExpAddRowF32,
        Import::TanhAddRowF32,
        Import::Native,
        Import::MathUnaryF32,
        Import::MathUnaryF64,
        Import::MathBinaryF32,
        Import::MathBinaryF64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Import::Dot => "remat_dot",
            Import::ParallelFor => "remat_parallel_for",
            Import::Pair => "remat_pair",
            Import::ExpF64 => "remat_exp_f64",
            Import::LogF64 => "remat_log_f64",
            Import::Log1pF64 => "remat_log1p_f64",
            Import::Expm1F64 => "remat_expm1_f64",
            Import::SinF64 => "remat_sin_f64",
            Import::CosF64 => "remat_cos_f64",
            Import::TanF64 => "remat_tan_f64",
            Import::TanhF64 => "remat_tanh_f64",
            Import::PowF64 => "remat_pow_f64",
            Import::SinF32 => "remat_sin_f32",
            Import::CosF32 => "remat_cos_f32",
            Import::TanF32 => "remat_tan_f32",
            Import::ExpF32Slice => "remat_exp_f32_slice",
            Import::TanhF32Slice => "remat_tanh_f32_slice",
            Import::ExpAddRowF32 => "remat_exp_add_row_f32",
            Import::TanhAddRowF32 => "remat_tanh_add_row_f32",
            Import::Native => "remat_native",
            Import::MathUnaryF32 => "remat_math_unary_f32",
            Import::MathUnaryF64 => "remat_math_unary_f64",
            Import::MathBinaryF32 => "remat_math_binary_f32",
            Import::MathBinaryF64 => "remat_math_binary_f64",
        }
    }

    pub fn signature(self) -> ImportSig {
        match self {
            Import::Dot => ImportSig::Dot,
            Import::Native => ImportSig::Native,
            Import::ParallelFor => ImportSig::ParallelFor,
            Import::Pair => ImportSig::Pair,
            Import::PowF64 => ImportSig::F64F64ToF64,
            Import::SinF32 | Import::CosF32 | Import::TanF32 => ImportSig::F32ToF32,
            Import::ExpF32Slice | Import::TanhF32Slice => ImportSig::Slice,
            Import::ExpAddRowF32 | Import::TanhAddRowF32 => ImportSig::AddRow,
            Import::MathUnaryF32 => ImportSig::OpF32ToF32,
            Import::MathUnaryF64 => ImportSig::OpF64ToF64,
            Import::MathBinaryF32 => ImportSig::OpF32F32ToF32,
            Import::MathBinaryF64 => ImportSig::OpF64F64ToF64,
            Import::ExpF64
            | Import::LogF64
            | Import::Log1pF64
            | Import::Expm1F64
            | Import::SinF64
            | Import::CosF64
            | Import::TanF64
            | Import::TanhF64 => ImportSig::F64ToF64,
        }
    }

    pub fn address(self) -> *const u8 {
        match self {
            Import::Dot => remat_dot as *const u8,
            Import::ParallelFor => remat_parallel_for as *const u8,
            Import::Pair => remat_pair as *const u8,
            Import::ExpF64 => exp_f64 as *const u8,
            Import::LogF64 => log_f64 as *const u8,
            Import::Log1pF64 => log1p_f64 as *const u8,
            Import::Expm1F64 => expm1_f64 as *const u8,
            Import::SinF64 => sin_f64 as *const u8,
            Import::CosF64 => cos_f64 as *const u8,
            Import::TanF64 => tan_f64 as *const u8,
            Import::TanhF64 => tanh_f64 as *const u8,
            Import::PowF64 => pow_f64 as *const u8,
            Import::SinF32 => sin_f32 as *const u8,
            Import::CosF32 => cos_f32 as *const u8,
            Import::TanF32 => tan_f32 as *const u8,
            Import::ExpF32Slice => vmath::slice_fn(vmath::SliceOp::Exp, vmath::width()) as *const u8,
            Import::TanhF32Slice => vmath::slice_fn(vmath::SliceOp::Tanh, vmath::width()) as *const u8,
            Import::ExpAddRowF32 => vmath::add_row_fn(vmath::SliceOp::Exp, vmath::width()) as *const u8,
            Import::TanhAddRowF32 => vmath::add_row_fn(vmath::SliceOp::Tanh, vmath::width()) as *const u8,
            Import::Native => indexing::remat_native as *const u8,
            Import::MathUnaryF32 => math_unary::<f32> as *const u8,
            Import::MathUnaryF64 => math_unary::<f64> as *const u8,
            Import::MathBinaryF32 => math_binary::<f32> as *const u8,
            Import::MathBinaryF64 => math_binary::<f64> as *const u8,
        }
    }
}

/// A range function of the JIT code: runs its step over `lo..hi` of the split dimension,
/// given the base addresses of the step's buffers.
type RangeFn = extern "C" fn(*const usize, i64, i64);

/// The number of threads parallel work is split over (rayon's pool, which faer's matmul shares).
fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(rayon::current_num_threads)
}

/// Runs `f` over `0..total` in one contiguous range per thread, every bound but `total` a
/// multiple of `grain`: this thread runs the first range, the helper threads the others.
extern "C" fn remat_parallel_for(f: RangeFn, bases: *const usize, total: i64, grain: i64) {
    let units = (total + grain - 1) / grain;
    let parts = (threads() as i64).min(units).max(1);
    let bound = |p: i64| (units * p / parts * grain).min(total);
    // Raw pointers are not `Send`; the addresses are, and every range function only reads
    // the step's inputs and writes its own range of the destination (kernel::split_dim).
    let bases = bases as usize;
    fork_join(parts as usize, move |p| {
        let p = p as i64;
        clear_upper_vector_state();
        f(bases as *const usize, bound(p), bound(p + 1));
    });
    clear_upper_vector_state();
}

/// A step function of JIT code: runs its step given the base addresses of its buffers.
type StepFn = extern "C" fn(*const usize);

/// What one pair of steps that may run at once (`remat_pair`) has measured, and what it
/// chose: running the two on two cores pays only when moving their freshly written operands
/// and results between the cores costs less than the time saved, and on this shared
/// virtual machine that changes with where the host places the two virtual CPUs (a
/// cache line's round trip between them measured 83-170 ns at some times and 360-440 ns
/// at others; mlp_small ran 28 us paired or 33 us not in the first state, 51 us paired in
/// the second). So each pair times itself: its first [`TRIAL_CALLS`] calls alternate
/// between one thread and two, the faster way (by each way's fastest call) runs from then
/// on, and the trial repeats every [`TRIAL_EVERY`] calls.
#[derive(Debug)]
pub(crate) struct PairSite {
    calls: AtomicU64,
    /// The fastest call of the current trial on one thread and on two, in nanoseconds.
    fastest: [AtomicU64; 2],
    /// Whether the pair runs on two threads (the last trial's verdict).
    parallel: AtomicBool,
}

impl Default for PairSite {
    fn default() -> Self {
        PairSite {
            calls: AtomicU64::new(0),
            fastest: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            parallel: AtomicBool::new(false),
        }
    }
}

/// Calls of a pair that time both ways, alternating (the first of them on two threads).
const TRIAL_CALLS: u64 = 8;
/// A pair's trial starts again after this many calls: the host's placement of the virtual
/// CPUs can change within a second (a trial every 4096 calls left mlp_small paired at 51 us
/// after the host moved them apart), and the trial's calls the slower way cost ~2% here.
const TRIAL_EVERY: u64 = 256;

/// Runs two independent steps, at once on two threads (`a` on this one, `b` on a helper)
/// or one after the other on this thread, as `site` has measured to be faster. The
/// lowering pairs only steps that run on one thread each and touch disjoint memory where
/// either writes (`codegen`, `pair_with_next`), so each computes the same bits either way.
extern "C" fn remat_pair(site: *const PairSite, a: StepFn, a_bases: *const usize, b: StepFn, b_bases: *const usize) {
    // SAFETY: `site` points into the `Box<[PairSite]>` the compiled program owns for as long
    // as its code can run (a constant the entry passes).
    let site = unsafe { &*site };
    // Addresses cross to the helper; the base arrays outlive the call (`fork_join` waits).
    let (a_bases, b_bases) = (a_bases as usize, b_bases as usize);
    let run = |two: bool| {
        if two {
            fork_join(2, move |p| {
                clear_upper_vector_state();
                match p {
                    0 => a(a_bases as *const usize),
                    _ => b(b_bases as *const usize),
                }
            });
        } else {
            a(a_bases as *const usize);
            b(b_bases as *const usize);
        }
        clear_upper_vector_state();
    };
    let n = site.calls.fetch_add(1, Ordering::Relaxed) % TRIAL_EVERY;
    if n >= TRIAL_CALLS {
        return run(site.parallel.load(Ordering::Relaxed));
    }
    if n == 0 {
        site.fastest.iter().for_each(|f| f.store(u64::MAX, Ordering::Relaxed));
    }
    let two = n.is_multiple_of(2);
    let start = std::time::Instant::now();
    run(two);
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    site.fastest[two as usize].fetch_min(ns, Ordering::Relaxed);
    if n == TRIAL_CALLS - 1 {
        let [one, two] = [0, 1].map(|i| site.fastest[i].load(Ordering::Relaxed));
        site.parallel.store(two < one, Ordering::Relaxed);
    }
}

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
extern "C" fn remat_dot(desc: *const DotDesc, lhs: *const u8, rhs: *const u8, out: *mut u8) {
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
            DType::BF16 | DType::F16 | DType::Key => {}
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

fn has_avx() -> bool {
    static AVX: OnceLock<bool> = OnceLock::new();
    *AVX.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// `vzeroupper`: Cranelift mixes legacy-SSE and VEX encodings, which run ~250x slower when
/// the upper halves of the vector registers are dirty (see CRANELIFT_NOTES.md), as the
/// GEMM's AVX2 and AVX-512 kernels leave them.
fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if has_avx() {
        // SAFETY: `vzeroupper` only zeroes the upper halves of the vector registers (bits 128
        // and up of ymm0-15/zmm0-15), which no Rust code keeps live across this point; the
        // CPU supports it (AVX was detected).
        unsafe { std::arch::asm!("vzeroupper", options(nomem, nostack, preserves_flags)) };
    }
}

/// Finished machine code and its entry point `fn(arena, table)`.
pub(crate) struct NativeCode {
    module: Option<JITModule>,
    entry: extern "C" fn(*mut u8, *const usize),
}

impl std::fmt::Debug for NativeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeCode")
    }
}

// SAFETY: the module is only touched again to free its memory in `drop`, which takes
// `&mut self`; the finished code is plain machine code that any thread may run.
unsafe impl Sync for NativeCode {}

impl NativeCode {
    pub fn new(module: JITModule, entry: FuncId) -> NativeCode {
        let ptr = module.get_finalized_function(entry);
        // SAFETY: `entry` was defined with the signature `fn(i64, i64)` in the platform's
        // default (System V) calling convention, which is `extern "C" fn(ptr, ptr)`.
        let entry = unsafe { std::mem::transmute::<*const u8, extern "C" fn(*mut u8, *const usize)>(ptr) };
        NativeCode { module: Some(module), entry }
    }

    /// Runs the program.
    ///
    /// The caller guarantees (and `Compiled::run` checks) that `arena` has the planned
    /// size and `table` holds one pointer per argument, constant and output, each to an
    /// array of the dtype and shape the program was compiled for.
    ///
    /// The program runs on this thread; its split products and loops hand parts to the
    /// helper threads (`pool`).
    pub fn call(&self, arena: &mut [u8], table: &[usize]) {
        // XLA's float environment while the program runs on this thread (its helpers have
        // it always): subnormal operands and results are zeros, as in JAX on CPU.
        let _env = remat_math::XlaFloatEnv::enter();
        clear_upper_vector_state();
        (self.entry)(arena.as_mut_ptr(), table.as_ptr());
    }
}

impl Drop for NativeCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the code is unreachable once `self` goes: the entry pointer lives only
            // here, and `call` borrows `self`.
            unsafe { m.free_memory() };
        }
    }
}

/// The page size of Linux's transparent huge pages on x86-64.
const HUGE_PAGE: usize = 2 << 20;

/// A fresh zero-filled output array for `Compiled::run`.
///
/// A large output comes from the allocator as untouched memory (glibc maps or extends fresh
/// pages for it, and gives them back to the kernel when the caller drops the array), so the
/// run that writes it takes a page fault per 4 KiB: 1024 faults on a 1024x1024 gradient, and
/// on this project's benchmark machine (a KVM guest) 8 ms for the 16 MB of `mlp_large`'s
/// gradients. An output of at least half a huge page is therefore allocated with up to 2 MiB
/// of untouched slack in front, starts on a 2 MiB boundary, and its whole huge pages are
/// advised onto transparent huge pages (`madvise(MADV_HUGEPAGE)`, which Linux honours in
/// its default `madvise` mode): a 4 MiB gradient then takes two faults. An output smaller
/// than a huge page gets the whole huge page it starts on (a 1 MiB gradient: one fault
/// that clears 2 MiB instead of 256 faults, 8 x 1 MiB in a loop 3.0 -> 1.0 ms, glibc's
/// thresholds as they come; docs/benchmarks.md, "Fresh outputs"). The slack is never
/// touched by the run (fresh from the kernel, it costs address space, not memory). The
/// array is an ordinary owned, row-major `ndarray` array whose data starts inside its
/// allocation (as after a slice). A smaller output is allocated without zeroing
/// ([`unwritten`]): the run writes every element.
///
/// Every output's size is checked: an allocation the allocator refuses is a
/// [`JitError::OutOfMemory`](crate::JitError) naming the output, not an abort.
pub(crate) fn fresh_output(aval: &remat_ir::Aval) -> Result<Fresh, crate::JitError> {
    use remat_ir::Array;
    let oom = || crate::JitError::OutOfMemory {
        what: format!("an output {aval}"),
        bytes: aval.checked_bytes().unwrap_or(usize::MAX),
    };
    // Zeroed on huge pages from a 2 MiB boundary, or unzeroed.
    let pad =
        (cfg!(target_os = "linux") && aval.checked_bytes().ok_or_else(oom)? >= HUGE_PAGE / 2).then_some(HUGE_PAGE);
    let shape = &aval.shape;
    match aval.dtype {
        DType::F32 => fresh_of(shape, pad, Array::F32),
        DType::F64 => fresh_of(shape, pad, Array::F64),
        DType::I32 => fresh_of(shape, pad, Array::I32),
        DType::BF16 => fresh_of(shape, pad, Array::BF16),
        DType::F16 => fresh_of(shape, pad, Array::F16),
        DType::I8 => fresh_of(shape, pad, Array::I8),
        DType::I16 => fresh_of(shape, pad, Array::I16),
        DType::I64 => fresh_of(shape, pad, Array::I64),
        DType::U8 => fresh_of(shape, pad, Array::U8),
        DType::U32 => fresh_of(shape, pad, Array::U32),
        DType::Key => fresh_of(shape, pad, Array::Key),
        // Not every byte is a `bool`: zeroed, on ordinary pages.
        DType::Bool => huge_page_zeros::<bool>(shape, 0).map(Array::Bool).map(Fresh::ready),
    }
    .ok_or_else(oom)
}

/// A fresh output of `shape`: zeroed from a `pad` boundary (advised onto huge pages), or
/// without `pad` allocated unzeroed ([`unwritten`]).
fn fresh_of<T: ZeroBits + Send + 'static>(
    shape: &[usize],
    pad: Option<usize>,
    wrap: fn(ndarray::ArrayD<T>) -> remat_ir::Array,
) -> Option<Fresh> {
    match pad {
        Some(pad) => huge_page_zeros::<T>(shape, pad).map(wrap).map(Fresh::ready),
        None => unwritten(shape, wrap),
    }
}

/// A fresh output before the run: the address the run writes it at, and how to make the
/// array once it has.
pub(crate) struct Fresh {
    pub ptr: usize,
    finish: Box<dyn FnOnce() -> remat_ir::Array + Send>,
}

impl Fresh {
    /// An output that is an array already (zeroed).
    fn ready(mut array: remat_ir::Array) -> Fresh {
        let ptr = remat_ir::for_each_array!(&mut array, x => x.as_mut_ptr() as usize);
        Fresh { ptr, finish: Box::new(move || array) }
    }

    /// The array, to be called only once a run of the program returned, having written
    /// every element at `ptr` (a compiled program writes all of each output: `run_into`
    /// over garbage-filled outputs gives what `run` gives, which the differential tests
    /// check on every program they run).
    pub fn written(self) -> remat_ir::Array {
        (self.finish)()
    }
}

/// An output of `shape` whose memory the run writes before anyone reads it: allocated
/// without zeroing (a `calloc` of memory glibc reuses clears it first, a pass over every
/// page for nothing), an empty vector with the capacity until then, so that dropping it
/// after a failed run reads nothing.
fn unwritten<T: ZeroBits + Send + 'static>(
    shape: &[usize],
    wrap: fn(ndarray::ArrayD<T>) -> remat_ir::Array,
) -> Option<Fresh> {
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    let mut data: Vec<T> = Vec::new();
    data.try_reserve_exact(n).ok()?;
    let ptr = data.as_mut_ptr() as usize;
    let shape = ndarray::IxDyn(shape);
    let finish = move || {
        // SAFETY: `Fresh::written` is called after a run, which wrote all `n` elements
        // within the capacity reserved above.
        unsafe { data.set_len(n) };
        wrap(ndarray::ArrayD::from_shape_vec(shape, data).expect("n elements make the shape"))
    };
    Some(Fresh { ptr, finish: Box::new(finish) })
}

/// A type whose all-zero bit pattern is a valid value, its zero (`0`, `0.0`, `false`, the
/// all-zero key).
pub(crate) trait ZeroBits: Copy {}
impl ZeroBits for u8 {}
impl ZeroBits for u32 {}
impl ZeroBits for i8 {}
impl ZeroBits for i16 {}
impl ZeroBits for i32 {}
impl ZeroBits for i64 {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}
impl ZeroBits for bool {}
impl ZeroBits for remat_ir::bf16 {}
impl ZeroBits for remat_ir::f16 {}
impl ZeroBits for remat_ir::PrngKey {}

/// `vec![0; n]` without aborting: `None` if the size overflows or the allocator refuses.
/// Like `vec!`, it is `calloc`: fresh pages stay untouched until the run writes them.
pub(crate) fn try_zeroed<T: ZeroBits>(n: usize) -> Option<Vec<T>> {
    if n == 0 || size_of::<T>() == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    // SAFETY: `layout` has a non-zero size; the memory is zeroed, and zero bits are a valid
    // `T` (`ZeroBits`); the vector owns the allocation with the layout it was made with.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        (!ptr.is_null()).then(|| Vec::from_raw_parts(ptr, n, n))
    }
}

/// Zeros of `shape`; with `pad` (a huge page, or 0) starting on a `pad` boundary of a larger
/// zeroed allocation that holds at least one whole `pad` page from there (advised onto huge
/// pages). `None` if the allocator refuses.
fn huge_page_zeros<T: ZeroBits>(shape: &[usize], pad: usize) -> Option<ndarray::ArrayD<T>> {
    let size = size_of::<T>();
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    // The elements from the boundary on: the output, and at least one whole page.
    let room = if pad == 0 { n } else { n.max(pad.div_ceil(size)) };
    let data = try_zeroed::<T>(room.checked_add(pad / size)?)?;
    let skew = if pad == 0 { 0 } else { (data.as_ptr() as usize).wrapping_neg() % pad / size };
    if pad > 0 {
        advise_huge_pages(data.as_ptr() as usize + skew * size, room * size);
    }
    Some(
        ndarray::Array1::from_vec(data)
            .slice_move(ndarray::s![skew..skew + n])
            .into_shape_with_order(ndarray::IxDyn(shape))
            .expect("a contiguous slice takes any shape of its length"),
    )
}

/// Advises the whole 2 MiB pages of `ptr..ptr + len` onto transparent huge pages.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: usize, len: usize) {
    let start = ptr.next_multiple_of(HUGE_PAGE);
    let end = (ptr + len) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: `madvise` changes no memory contents; the range is page-aligned and lies
        // inside a live allocation. A refusal (a kernel without THP) only loses the advice.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: usize, _len: usize) {}

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

#[cfg(test)]
mod pair_tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RUNS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn slow(_: *const usize) {
        std::thread::sleep(std::time::Duration::from_millis(3));
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    extern "C" fn quick(_: *const usize) {
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a pair `calls` times and returns what its site chose.
    fn choice(f: StepFn, calls: u64) -> bool {
        let site = PairSite::default();
        let before = RUNS.load(Ordering::Relaxed);
        for _ in 0..calls {
            remat_pair(&site, f, std::ptr::null(), f, std::ptr::null());
        }
        assert!(RUNS.load(Ordering::Relaxed) - before >= 2 * calls as usize, "both steps ran on every call");
        site.parallel.load(Ordering::Relaxed)
    }

    #[test]
    fn a_pair_runs_on_two_threads_only_where_that_measured_faster() {
        // Two 3 ms steps take 3 ms on two threads and 6 ms on one (with a second core).
        assert_eq!(choice(slow, TRIAL_CALLS), threads() > 1);
        // Two steps that do nothing: a fork costs more than running both here.
        assert!(!choice(quick, TRIAL_CALLS + 100));
    }
}
