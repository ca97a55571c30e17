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
//!
//! One idea per file:
//!
//! - `imports`: the import table of the runtime functions JIT code calls, and the libm
//!   wrappers among them;
//! - `parallel`: the fork-join entry points (`remat_parallel_for`, `remat_pair`), over the
//!   helper threads of `pool` (which `contention` shrinks when other processes take the
//!   cores);
//! - `gemm`: `remat_dot` and the choice of how each product runs (faer, `sgemm`, loops);
//! - `vmath`: `exp` and `tanh` over rows of f32;
//! - `step`: the views of a native step's buffers, which `indexing` (gathers, scatters,
//!   sorts, scans, and the dispatch `remat_native`) and `random` (the PRNG) compute on;
//! - `code`: the compiled code's memory and entry; `fresh`: the output arrays a run writes;
//! - `cpu`: the vector state between Rust and JIT code.
#![allow(unsafe_code)]

mod code;
mod complex;
mod contention;
mod cpu;
mod fresh;
mod gemm;
mod imports;
mod indexing;
#[cfg(test)]
mod kernel_tests;
mod parallel;
mod pool;
mod random;
#[cfg(target_arch = "x86_64")]
mod sgemm;
mod step;
pub(crate) mod vmath;

pub(crate) use code::NativeCode;
pub(crate) use fresh::{fresh_output, try_zeroed, Fresh};
pub(crate) use gemm::dot_pairs;
pub(crate) use imports::{Import, ImportSig};
pub(crate) use parallel::PairSite;
