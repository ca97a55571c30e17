//! remat's own f32 GEMM for x86-64 CPUs with AVX2 + FMA (and without AVX-512, where faer's
//! kernels are faster): a 6x16 register-blocked microkernel in the layered blocking of
//! Goto and van de Geijn (BLIS's loop order), with both operands packed so that any strides
//! work, transposed and broadcast ones included.
//!
//! ```text
//! for each kc-deep slice of k:       pack b[pc.., jc..] into 16-column panels (L3)
//!   for each mc-row block of m:      pack a[ic.., pc..] into 6-row panels     (L2)
//!     for each 16-column panel:      (stays in L1)
//!       for each 6-row panel:        kernel: c[6x16] (+)= a panel . b panel
//! ```
//!
//! The first k slice overwrites `c` (it is never read, so garbage in it is harmless), later
//! slices add to it. A destination stored column by column is computed as the transposed
//! product `c^T = b^T . a^T`, so the microkernel's rows are always the contiguous axis. Two
//! threads split `n` (or `m`, when `n` is narrow) in whole panels; each packs its own
//! operands into thread-local buffers that are reused from call to call.
//!
//! Blocking ([`Blocking`]), chosen once at run time from the CPU's cache sizes: on Zen 3
//! (32 KiB L1d, 512 KiB L2, 32 MiB L3) `kc = 256` (a 16 KiB b panel and a 6 KiB a panel
//! fit the L1), `mc = 144` (a 144 KiB a block in the L2), `nc = 4080` (a 4 MiB b block in
//! L3): BLIS's Zen blocking, which the model reproduces at those sizes. Calibration is in
//! docs/jit.md, "Choosing the GEMM".

use std::arch::x86_64::*;
use std::cell::RefCell;

const MR: usize = 6;
const NR: usize = 16;

/// The cache blocking: `kc`-deep slices of `k`, `mc` rows of `a` per L2 block, `nc` columns
/// of `b` per L3 block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocking {
    kc: usize,
    mc: usize,
    nc: usize,
}

/// BLIS's blocking for Zen's AVX2 kernels, calibrated on Zen 3: what [`Blocking::for_caches`]
/// gives at Zen 3's sizes, and what the GEMM uses where the sizes cannot be read.
const ZEN3: Blocking = Blocking { kc: 256, mc: 144, nc: 4080 };

impl Blocking {
    /// The blocking for data caches of `l1`, `l2` and `l3` bytes (per core, per core, whole):
    /// a `kc`-deep b panel and a panel of `a` fill about 70% of the L1 (`kc` a multiple of
    /// 32), an `mc x kc` block of `a` 9/32 of the L2 (`mc` whole panels), a `kc x nc` block
    /// of `b` an eighth of the L3 (`nc` whole panels, one short of a power of two as BLIS
    /// has it).
    fn for_caches(l1: usize, l2: usize, l3: usize) -> Blocking {
        let kc = (l1 * 7 / 10 / ((NR + MR) * 4) / 32 * 32).clamp(64, 1024);
        let mc = (l2 * 9 / 32 / (kc * 4) / MR * MR).clamp(4 * MR, 170 * MR);
        let nc = (l3 / 8 / (kc * 4) / NR * NR).saturating_sub(NR).clamp(16 * NR, 1024 * NR);
        Blocking { kc, mc, nc }
    }

    /// This CPU's blocking, from its caches' sizes as Linux lists them for the first CPU
    /// (`/sys/devices/system/cpu/cpu0/cache`), or [`ZEN3`]'s without them.
    fn of_this_cpu() -> Blocking {
        static BLOCKING: std::sync::OnceLock<Blocking> = std::sync::OnceLock::new();
        *BLOCKING.get_or_init(|| {
            let [l1, l2, l3] = cache_sizes(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"));
            match (l1, l2, l3) {
                (Some(l1), Some(l2), Some(l3)) => Blocking::for_caches(l1, l2, l3),
                _ => ZEN3,
            }
        })
    }
}

/// The sizes in bytes of the level 1, 2 and 3 data (or unified) caches listed under `dir`
/// (`index*/level`, `type`, `size`, as Linux's sysfs has them).
fn cache_sizes(dir: &std::path::Path) -> [Option<usize>; 3] {
    let mut sizes = [None; 3];
    let Ok(entries) = std::fs::read_dir(dir) else { return sizes };
    for entry in entries.flatten() {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok().map(|s| s.trim().to_string());
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { continue };
        if kind == "Instruction" {
            continue;
        }
        let bytes = match size.strip_suffix('K') {
            Some(k) => k.parse::<usize>().ok().map(|k| k << 10),
            None => match size.strip_suffix('M') {
                Some(m) => m.parse::<usize>().ok().map(|m| m << 20),
                None => size.parse::<usize>().ok(),
            },
        };
        if let (Ok(level @ 1..=3), Some(bytes)) = (level.parse::<usize>(), bytes) {
            sizes[level - 1] = Some(bytes);
        }
    }
    sizes
}
/// Panels of a column-major `a` packed together, step by step (`pack_a`).
const A_GROUP: usize = 12;
/// Padding after each packed b panel, so that panels start in different cache sets.
const B_PAD: usize = 16;
/// Elements past the packed a block that `pack_a`'s eight-lane stores of six-value steps
/// may write.
const SLACK: usize = 8;

/// An operand: element `(i, j)` at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Operand {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

/// The destination: element `(i, j)` at `ptr + i*rs + j*cs`, distinct for distinct `(i, j)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dest {
    pub ptr: *mut f32,
    pub rs: isize,
    pub cs: isize,
}

impl Operand {
    /// # Safety
    /// The element must lie inside the operand's allocation.
    unsafe fn at(self, i: usize, j: usize) -> *const f32 {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

impl Dest {
    /// # Safety
    /// The element must lie inside the destination's allocation.
    unsafe fn at(self, i: usize, j: usize) -> *mut f32 {
        // SAFETY: the caller's contract.
        unsafe { self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

/// The three matrices of one call, moved to the helper thread as a whole.
#[derive(Clone, Copy)]
struct Operands(Operand, Operand, Dest);

// SAFETY: the pointers are only dereferenced for the duration of `sgemm`, which does not
// return before every thread it started has finished; threads write disjoint parts of `c`.
unsafe impl Send for Operands {}
// SAFETY: as for `Send`: the threads share the addresses, and each writes its own part.
unsafe impl Sync for Operands {}

thread_local! {
    /// The packed a block and b block of this thread, as 32-byte aligned vectors.
    static PACKED: RefCell<(Vec<__m256>, Vec<__m256>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `c (m x n) = a (m x k) . b (k x n)`, overwriting `c`, split over `parts` threads (this one
/// and `parts - 1` helpers, `pool::fork_join`).
///
/// # Safety
/// The CPU has AVX2 and FMA. Every element `(i, j)` below the extents of `a`, `b` and `c`
/// lies inside its allocation; distinct elements of `c` are distinct memory, not read or
/// written by anything else during the call (`a` and `b` may alias each other, never `c`).
pub(super) unsafe fn sgemm(m: usize, k: usize, n: usize, a: Operand, b: Operand, c: Dest, parts: usize) {
    if c.cs.unsigned_abs() != 1 && c.rs.unsigned_abs() == 1 {
        let at = Operand { ptr: b.ptr, rs: b.cs, cs: b.rs };
        let bt = Operand { ptr: a.ptr, rs: a.cs, cs: a.rs };
        let ct = Dest { ptr: c.ptr, rs: c.cs, cs: c.rs };
        // SAFETY: the same elements, named by transposed indices.
        return unsafe { sgemm(n, k, m, at, bt, ct, parts) };
    }
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                // SAFETY: `(i, j)` is below the destination's extents.
                unsafe { *c.at(i, j) = 0.0 };
            }
        }
        return;
    }
    // Split n in whole panels when it has at least four per thread (or is the wider
    // side), else m in whole row panels.
    let split_n = n.div_ceil(NR) >= 4 * parts || n >= m;
    let (len, unit) = if split_n { (n, NR) } else { (m, MR) };
    let units = len.div_ceil(unit);
    let parts = parts.clamp(1, units);
    if parts == 1 {
        // SAFETY: the caller's contract.
        return unsafe { serial(m, k, n, a, b, c) };
    }
    let bound = move |p: usize| (units * p / parts * unit).min(len);
    let operands = Operands(a, b, c);
    let run = move |p: usize| {
        // Bound as a whole (a pattern would capture the raw pointer fields one by one).
        let Operands(a, b, c) = { operands };
        let (lo, hi) = (bound(p), bound(p + 1));
        // SAFETY: rows or columns `lo..hi` are inside the extents; the threads' parts of
        // `c` are disjoint.
        unsafe {
            if split_n {
                let b = Operand { ptr: b.at(0, lo), ..b };
                let c = Dest { ptr: c.at(0, lo), ..c };
                serial(m, k, hi - lo, a, b, c);
            } else {
                let a = Operand { ptr: a.at(lo, 0), ..a };
                let c = Dest { ptr: c.at(lo, 0), ..c };
                serial(hi - lo, k, n, a, b, c);
            }
        }
    };
    super::pool::fork_join(parts, run);
}

/// One thread's product.
///
/// # Safety
/// As [`sgemm`], with `m, n, k > 0`.
unsafe fn serial(m: usize, k: usize, n: usize, a: Operand, b: Operand, c: Dest) {
    PACKED.with(|packed| {
        let mut packed = packed.borrow_mut();
        let (pa, pb) = &mut *packed;
        let blocks = Blocking::of_this_cpu();
        let lanes = size_of::<__m256>() / size_of::<f32>();
        let need_a = (blocks.mc.min(m.next_multiple_of(MR)) * blocks.kc.min(k) + SLACK).div_ceil(lanes);
        let need_b = (blocks.nc.min(n.next_multiple_of(NR)) / NR * b_panel_len(blocks.kc.min(k))).div_ceil(lanes);
        // SAFETY: an all-zero __m256 is a valid value.
        let zero = unsafe { _mm256_setzero_ps() };
        if pa.len() < need_a {
            pa.resize(need_a, zero);
        }
        if pb.len() < need_b {
            pb.resize(need_b, zero);
        }
        let (pa, pb) = (pa.as_mut_ptr() as *mut f32, pb.as_mut_ptr() as *mut f32);
        for jc in (0..n).step_by(blocks.nc) {
            let nc = blocks.nc.min(n - jc);
            for pc in (0..k).step_by(blocks.kc) {
                let kc = blocks.kc.min(k - pc);
                // SAFETY: the blocks are inside the operands; the packed buffers hold
                // `mc` rounded up to whole panels times `kc` elements (plus `SLACK`) and
                // `nc` rounded up to whole panels of `b_panel_len(kc)`.
                unsafe {
                    pack_b(kc, nc, Operand { ptr: b.at(pc, jc), ..b }, pb);
                    for ic in (0..m).step_by(blocks.mc) {
                        let mc = blocks.mc.min(m - ic);
                        pack_a(mc, kc, m - ic, Operand { ptr: a.at(ic, pc), ..a }, pa);
                        for jr in (0..nc).step_by(NR) {
                            for ir in (0..mc).step_by(MR) {
                                let tile = Tile { rows: MR.min(mc - ir), cols: NR.min(nc - jr), overwrite: pc == 0 };
                                let dst = Dest { ptr: c.at(ic + ir, jc + jr), ..c };
                                kernel(kc, pa.add(ir * kc), pb.add(jr / NR * b_panel_len(kc)), dst, tile);
                            }
                        }
                    }
                }
            }
        }
    });
}

/// Packs the `mc x kc` block of `a` into panels of `MR` rows, `panel[p][i]`, zero-padding
/// the last panel. `a` has `rows_below >= mc` rows from the block's first.
///
/// # Safety
/// AVX2 is available; `rows_below x kc` elements from the block's first are inside `a`;
/// `dst` has room for `mc` rounded up to `MR`, times `kc`, plus `SLACK` elements.
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_a(mc: usize, kc: usize, rows_below: usize, a: Operand, dst: *mut f32) {
    // Columns stored contiguously (a transposed lhs, as in a weight gradient `x^T . dy`):
    // each step's six values of a panel are adjacent, but the steps are a whole column
    // apart. Panel by panel, the walk down the steps would touch a new line per step, lines
    // a power of two apart that crowd into a few cache sets and are evicted before the
    // next panel reads the rest of them. So the steps go outermost: each step reads the
    // block's column once, for every panel whose eight-lane load stays inside `a`.
    let mut first = 0;
    if a.rs == 1 && a.cs != 1 {
        first = (mc / MR).min(rows_below.saturating_sub(2) / MR);
        // Twelve panels at a time (half of Zen 3's `mc` block): more write streams, a panel apart,
        // crowd the few cache sets they share; fewer leave each step's read too short for
        // the prefetcher (`perf`: `pack_a` 6.4-7.9% of a tn product's samples -> 4.1-5.6%
        // at 512x256x512 and 1024^3; 8 and 24 panels did less).
        for g0 in (0..first).step_by(A_GROUP) {
            for p in 0..kc {
                // SAFETY: rows `g * MR .. g * MR + 8` of column `p` are inside `a` for every
                // `g < first`; the stores stay inside the first `first` panels of `dst`.
                unsafe {
                    let col = a.at(0, p);
                    for g in g0..first.min(g0 + A_GROUP) {
                        let v = _mm256_loadu_ps(col.add(g * MR));
                        let d = dst.add(g * MR * kc + p * MR);
                        if p + 1 < kc {
                            // Two lanes run into the next step, written after this one.
                            _mm256_storeu_ps(d, v);
                        } else {
                            _mm_storeu_ps(d, _mm256_castps256_ps128(v));
                            _mm_storeu_si64(d.add(4) as *mut u8, _mm_castps_si128(_mm256_extractf128_ps::<1>(v)));
                        }
                    }
                }
            }
        }
    }
    // SAFETY: inside `dst`'s room.
    let mut d = unsafe { dst.add(first * MR * kc) };
    for i0 in (first * MR..mc).step_by(MR) {
        let rows = MR.min(mc - i0);
        // SAFETY: every element read is inside the block; every write is below `dst`'s
        // room (an eight-lane store of six values runs into the slack at most).
        unsafe {
            let row: [*const f32; MR] = std::array::from_fn(|i| a.at(i0 + i.min(rows - 1), 0));
            let mut p = 0;
            if rows == MR && a.cs == 1 {
                // Rows stored contiguously: transpose 8 columns of the 6 rows at a time.
                while p + 8 <= kc {
                    let r =
                        std::array::from_fn(
                            |i| if i < MR { _mm256_loadu_ps(row[i].add(p)) } else { _mm256_setzero_ps() },
                        );
                    for (q, col) in transpose8(r).iter().enumerate() {
                        _mm256_storeu_ps(d.add(q * MR), *col);
                    }
                    d = d.add(8 * MR);
                    p += 8;
                }
            }
            for p in p..kc {
                let o = p as isize * a.cs;
                for (i, r) in row.iter().enumerate() {
                    *d.add(i) = if i < rows { *r.offset(o) } else { 0.0 };
                }
                d = d.add(MR);
            }
        }
    }
}

/// The elements from one packed b panel of `kc` steps to the next.
fn b_panel_len(kc: usize) -> usize {
    kc * NR + B_PAD
}

/// Packs the `kc x nc` block of `b` into panels of `NR` columns, `panel[p][j]`, each
/// followed by `B_PAD` unused elements, zero-padding the last panel.
///
/// A row-major `b` is copied a step at a time across every whole panel: each step reads one
/// stretch of its row, and the padding puts the panels' write streams (a power of two
/// apart without it) in different cache sets (`perf` on nn 256x512x512 and 1024^3: `pack_b`
/// 3.2-4.5% of the samples -> 1.9-4.2%; without the padding, the same order made it worse).
///
/// # Safety
/// AVX2 is available; the block is inside `b`; `dst` has room for `nc` rounded up to `NR`
/// panels of `b_panel_len(kc)` elements.
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_b(kc: usize, nc: usize, b: Operand, dst: *mut f32) {
    let stride = b_panel_len(kc);
    let mut first = 0;
    if b.cs == 1 {
        first = nc / NR;
        for p in 0..kc {
            // SAFETY: columns below `first * NR` of step `p` are inside the block.
            unsafe {
                let s = b.at(p, 0);
                for j in 0..first {
                    let d = dst.add(j * stride + p * NR);
                    _mm256_storeu_ps(d, _mm256_loadu_ps(s.add(j * NR)));
                    _mm256_storeu_ps(d.add(8), _mm256_loadu_ps(s.add(j * NR + 8)));
                }
            }
        }
    }
    for j0 in (first * NR..nc).step_by(NR) {
        // SAFETY: inside `dst`'s room.
        let mut d = unsafe { dst.add(j0 / NR * stride) };
        let cols = NR.min(nc - j0);
        // SAFETY: every element read is inside the block and every write below `dst`'s
        // room.
        unsafe {
            let mut p = 0;
            if cols == NR && b.rs == 1 {
                // Columns stored contiguously: transpose 8 steps of 8 columns at a time.
                let col: [*const f32; NR] = std::array::from_fn(|j| b.at(0, j0 + j));
                while p + 8 <= kc {
                    for half in 0..2 {
                        let c: [__m256; 8] = std::array::from_fn(|j| _mm256_loadu_ps(col[8 * half + j].add(p)));
                        for (q, v) in transpose8(c).iter().enumerate() {
                            _mm256_storeu_ps(d.add(q * NR + 8 * half), *v);
                        }
                    }
                    d = d.add(8 * NR);
                    p += 8;
                }
            }
            for p in p..kc {
                for j in 0..NR {
                    *d.add(j) = if j < cols { *b.at(p, j0 + j) } else { 0.0 };
                }
                d = d.add(NR);
            }
        }
    }
}

/// The transpose of an 8x8 block given as 8 rows: its 8 columns.
#[target_feature(enable = "avx2,fma")]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let s = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    [
        _mm256_permute2f128_ps::<0x20>(s[0], s[4]),
        _mm256_permute2f128_ps::<0x20>(s[1], s[5]),
        _mm256_permute2f128_ps::<0x20>(s[2], s[6]),
        _mm256_permute2f128_ps::<0x20>(s[3], s[7]),
        _mm256_permute2f128_ps::<0x31>(s[0], s[4]),
        _mm256_permute2f128_ps::<0x31>(s[1], s[5]),
        _mm256_permute2f128_ps::<0x31>(s[2], s[6]),
        _mm256_permute2f128_ps::<0x31>(s[3], s[7]),
    ]
}

/// The part of a 6x16 tile that lies inside `c`, and whether the tile overwrites it.
#[derive(Clone, Copy)]
struct Tile {
    rows: usize,
    cols: usize,
    overwrite: bool,
}

/// `c[tile] (+)= a panel . b panel` over `kc` steps, twelve 8-lane accumulators.
///
/// # Safety
/// AVX2 and FMA are available; `a` holds `kc * MR` and `b` `kc * NR` packed elements; the
/// tile's rows and columns of `c` are inside the destination.
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel(kc: usize, mut a: *const f32, mut b: *const f32, c: Dest, tile: Tile) {
    // SAFETY: the caller's contract bounds every pointer below; prefetches never fault.
    unsafe {
        // The tile's rows are far apart in memory; fetch them while the products run.
        for i in 0..tile.rows {
            let row = c.at(i, 0);
            _mm_prefetch::<_MM_HINT_T0>(row as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_offset((NR as isize - 1) * c.cs) as *const i8);
        }
        let z = _mm256_setzero_ps();
        let mut acc = [[z; 2]; MR];
        let mut step = |a: *const f32, b: *const f32| {
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            for (i, row) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*a.add(i));
                row[0] = _mm256_fmadd_ps(x, b0, row[0]);
                row[1] = _mm256_fmadd_ps(x, b1, row[1]);
            }
        };
        let mut p = kc;
        while p >= 4 {
            step(a, b);
            step(a.add(MR), b.add(NR));
            step(a.add(2 * MR), b.add(2 * NR));
            step(a.add(3 * MR), b.add(3 * NR));
            a = a.add(4 * MR);
            b = b.add(4 * NR);
            p -= 4;
        }
        while p > 0 {
            step(a, b);
            a = a.add(MR);
            b = b.add(NR);
            p -= 1;
        }
        if tile.cols == NR && c.cs == 1 {
            for (i, row) in acc.iter().enumerate().take(tile.rows) {
                let d = c.at(i, 0);
                if tile.overwrite {
                    _mm256_storeu_ps(d, row[0]);
                    _mm256_storeu_ps(d.add(8), row[1]);
                } else {
                    _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(d), row[0]));
                    _mm256_storeu_ps(d.add(8), _mm256_add_ps(_mm256_loadu_ps(d.add(8)), row[1]));
                }
            }
        } else {
            let mut t = [0f32; MR * NR];
            for (i, row) in acc.iter().enumerate() {
                _mm256_storeu_ps(t.as_mut_ptr().add(i * NR), row[0]);
                _mm256_storeu_ps(t.as_mut_ptr().add(i * NR + 8), row[1]);
            }
            for i in 0..tile.rows {
                for j in 0..tile.cols {
                    let d = c.at(i, j);
                    let v = t[i * NR + j];
                    *d = if tile.overwrite { v } else { *d + v };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator of values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Strides of an `r x c` matrix stored row-major (`false`) or column-major (`true`).
    fn strides(r: usize, c: usize, transposed: bool) -> (isize, isize) {
        if transposed {
            (1, r as isize)
        } else {
            (c as isize, 1)
        }
    }

    /// Runs `sgemm` on one shape and layout into a NaN-filled destination with `parts`
    /// threads and compares every element with a plain f64 triple loop.
    fn check(m: usize, k: usize, n: usize, (ta, tb, tc): (bool, bool, bool), parts: usize) {
        let (av, bv) = (values(m * k, 1 + m as u64), values(k * n, 2 + n as u64));
        let ((ars, acs), (brs, bcs)) = (strides(m, k, ta), strides(k, n, tb));
        let (crs, ccs) = strides(m, n, tc);
        let mut c = vec![f32::NAN; m * n];
        let a = Operand { ptr: av.as_ptr(), rs: ars, cs: acs };
        let b = Operand { ptr: bv.as_ptr(), rs: brs, cs: bcs };
        let dst = Dest { ptr: c.as_mut_ptr(), rs: crs, cs: ccs };
        // SAFETY: AVX2 + FMA were checked by the caller; the strides describe exactly the
        // vectors' elements; `c` is distinct from the operands.
        unsafe { sgemm(m, k, n, a, b, dst, parts) };
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| {
                        let x = av[(i as isize * ars + p as isize * acs) as usize] as f64;
                        x * bv[(p as isize * brs + j as isize * bcs) as usize] as f64
                    })
                    .sum();
                let got = c[(i as isize * crs + j as isize * ccs) as usize] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (k as f64).sqrt() * 4.0,
                    "{m}x{k}x{n} layout {:?} parts {parts}: c[{i},{j}] = {got}, want {want}",
                    (ta, tb, tc)
                );
            }
        }
    }

    fn have_avx2() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    /// Every layout of every operand, each blocking boundary crossed (k past `kc`, m past
    /// `mc`, partial row and column panels, a column-major `a` packed in groups of panels and
    /// one whose last whole panel ends at its last row), both ways of splitting between
    /// threads, one thread, more threads than panels, and the empty cases.
    #[test]
    fn products_match_a_plain_loop_in_every_layout_and_split() {
        if !have_avx2() {
            return;
        }
        let layouts = [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (true, true, false),
            (false, false, true),
            (true, false, true),
        ];
        // This CPU's blocks, and the shapes around them.
        let Blocking { kc, mc, .. } = Blocking::of_this_cpu();
        for layout in layouts {
            for (m, k, n) in [
                (1, 1, 1),
                (7, 3, 17),
                (13, kc + 44, 35),
                (mc, 40, 20),
                (mc + 6, kc + 1, 40),
                (40, 20, mc + 6),
                (2 * mc + 12, 9, 5),
            ] {
                for parts in [1, 2, 3] {
                    check(m, k, n, layout, parts);
                }
            }
        }
        for parts in [1, 2] {
            check(0, 5, 4, (false, false, false), parts);
            check(4, 5, 0, (false, false, false), parts);
            check(3, 0, 4, (false, false, true), parts);
        }
    }

    /// A row wider than `nc` columns crosses the outermost block boundary.
    #[test]
    fn rows_wider_than_one_b_block() {
        if !have_avx2() {
            return;
        }
        let nc = Blocking::of_this_cpu().nc;
        check(7, 5, nc + 37, (false, false, false), 1);
        check(7, 5, nc + 37, (false, true, false), 2);
    }

    /// Destinations with no unit stride (every other element of a wider buffer) and
    /// operands broadcast with a zero stride.
    #[test]
    fn strided_destinations_and_broadcast_operands() {
        if !have_avx2() {
            return;
        }
        let (m, k, n) = (20, 30, 40);
        let av = values(k, 3);
        let bv = values(k * n, 4);
        let mut c = vec![f32::NAN; 2 * m * n];
        let a = Operand { ptr: av.as_ptr(), rs: 0, cs: 1 };
        let b = Operand { ptr: bv.as_ptr(), rs: n as isize, cs: 1 };
        let dst = Dest { ptr: c.as_mut_ptr(), rs: 2 * n as isize, cs: 2 };
        // SAFETY: AVX2 + FMA are present; every index below the extents is inside the
        // vectors; `c` is distinct from the operands.
        unsafe { sgemm(m, k, n, a, b, dst, 2) };
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|p| av[p] * bv[p * n + j]).sum();
                let got = c[i * 2 * n + 2 * j];
                assert!((got - want).abs() < 1e-4, "c[{i},{j}] = {got}, want {want}");
                assert!(c[i * 2 * n + 2 * j + 1].is_nan(), "wrote between the destination's elements");
            }
        }
    }

    /// The model gives BLIS's Zen blocking at Zen 3's sizes, scales with the caches
    /// elsewhere, and stays within its bounds for any sizes.
    #[test]
    fn the_blocking_follows_the_caches() {
        assert_eq!(Blocking::for_caches(32 << 10, 512 << 10, 32 << 20), ZEN3);
        // Zen 5 (48 KiB L1d, 1 MiB L2, 32 MiB L3).
        assert_eq!(Blocking::for_caches(48 << 10, 1 << 20, 32 << 20), Blocking { kc: 384, mc: 192, nc: 2704 });
        // A Skylake-SP core (32 KiB, 1 MiB, 22 MiB shared).
        assert_eq!(Blocking::for_caches(32 << 10, 1 << 20, 22 << 20), Blocking { kc: 256, mc: 288, nc: 2800 });
        for (l1, l2, l3) in [(0, 0, 0), (1, 1, 1), (1 << 30, 1 << 30, 1 << 40)] {
            let b = Blocking::for_caches(l1, l2, l3);
            assert!(b.kc.is_multiple_of(32) && b.mc.is_multiple_of(MR) && b.nc.is_multiple_of(NR), "{b:?}");
            assert!((64..=1024).contains(&b.kc) && b.mc >= 4 * MR && b.nc >= 16 * NR, "{b:?}");
        }
    }

    /// Cache sizes are read as Linux lists them: instruction caches skipped, `K` and `M`
    /// suffixes, anything unreadable left out.
    #[test]
    fn cache_sizes_are_read_from_sysfs_listings() {
        let dir = tempfile::tempdir().unwrap();
        for (index, level, kind, size) in [
            (0, "1", "Data", "48K"),
            (1, "1", "Instruction", "32K"),
            (2, "2", "Unified", "1024K"),
            (3, "3", "Unified", "32M"),
        ] {
            let d = dir.path().join(format!("index{index}"));
            std::fs::create_dir(&d).unwrap();
            for (name, text) in [("level", level), ("type", kind), ("size", size)] {
                std::fs::write(d.join(name), format!("{text}\n")).unwrap();
            }
        }
        assert_eq!(cache_sizes(dir.path()), [Some(48 << 10), Some(1 << 20), Some(32 << 20)]);
        std::fs::write(dir.path().join("index3/size"), "lots\n").unwrap();
        assert_eq!(cache_sizes(dir.path()), [Some(48 << 10), Some(1 << 20), None]);
        assert_eq!(cache_sizes(&dir.path().join("missing")), [None, None, None]);
    }
}
