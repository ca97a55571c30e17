//! Test helpers shared by every crate's tests: the data under `tests/data` (conformance
//! cases, benchmark programs, extra JAX texts) and the arrays in them, the tolerance rule
//! results are compared by, seeded pseudo-random arrays, the text fuzzer (`fuzz`), and the
//! code blocks of the documentation (`docs`).
//!
//! Architecture invariant: this crate depends only on `remat-ir` and `remat-json`, so that
//! any crate of the pipeline can take it as a dev-dependency without a second copy of
//! itself in its tests. Helpers that need a later stage (the interpreter, autodiff, the JIT,
//! the tracer) stay in that crate's tests.

mod close;
mod data;
pub mod docs;
pub mod fuzz;
mod rng;
mod zoo;

pub use close::{check_close, within};
pub use data::{
    arg_names, arrays, case_jaxpr, conformance_case, conformance_cases, conformance_texts, data_dir, data_files,
    is_model_bench, jaxpr_files, loop_cases, primitive_cases, read_json, reduced_bench_cases, sharded_cases,
    try_arrays, zoo_cases,
};
pub use rng::Rng;
pub use zoo::{check_zoo_values, forward_only, jax_residual_lines, optional_arrays, reduced_precision, zoo_cotangents};
