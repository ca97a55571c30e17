//! Fresh outputs: the arrays a run writes its results into, allocated so that writing
//! them costs few page faults (huge pages for large ones, no zeroing for small ones), and
//! zeroed allocations that fail as errors, not aborts.

use remat_ir::DType;

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
        DType::C64 => fresh_of(shape, pad, Array::C64),
        DType::C128 => fresh_of(shape, pad, Array::C128),
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
impl ZeroBits for remat_ir::c64 {}
impl ZeroBits for remat_ir::c128 {}

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
