//! A native step's buffers (`Step::Native`, described by `program::NativeDesc`), seen as
//! ndarray views ([`Bases`]), for the primitives the runtime computes over whole buffers
//! (`indexing.rs`, `random.rs`).

use std::ptr::NonNull;

use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use remat_ir::Aval;

use crate::program::NativeDesc;

/// The base addresses of a step's operands and results.
pub(super) struct Bases<'a> {
    pub(super) addrs: &'a [usize],
    pub(super) desc: &'a NativeDesc,
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

    /// Operand `i`'s bytes (`aval.size_in_bytes()` of them).
    pub(super) fn bytes(&self, i: usize) -> &[u8] {
        let n = self.desc.in_avals[i].size_in_bytes();
        if n == 0 {
            return &[];
        }
        let addr = self.addrs[self.desc.slots[i]];
        // SAFETY: as for `view`: the operand's buffer holds its aval's bytes for the step.
        unsafe { std::slice::from_raw_parts(addr as *const u8, n) }
    }

    /// Result `j`'s bytes, to write.
    #[allow(clippy::mut_from_ref)]
    pub(super) fn bytes_mut(&self, j: usize) -> &mut [u8] {
        let n = self.desc.out_avals[j].size_in_bytes();
        if n == 0 {
            return &mut [];
        }
        let addr = self.addrs[self.desc.slots[self.desc.in_avals.len() + j]];
        // SAFETY: as for `view_mut`: the result's buffer is this step's alone.
        unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, n) }
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
