//! The tracer: Rust closures over [`Tensor`]s become jaxprs, printed exactly as
//! `jax.make_jaxpr` prints the same Python program.
//!
//! ```
//! use remat_ir::{Aval, DType};
//! use remat_trace::{make_jaxpr, named};
//!
//! let w = Aval::new(DType::F32, vec![5, 4]);
//! let x = Aval::new(DType::F32, vec![4]);
//! let traced = make_jaxpr(|(w, x)| w.dot(&x).sin(), &(named("W", w), named("x", x))).unwrap();
//! assert_eq!(
//!     traced.to_string(),
//!     "{ lambda ; a:f32[5,4] b:f32[4]. let\n    c:f32[5] = dot_general[\n      dimension_numbers=(([1], [0]), ([], []))\n      preferred_element_type=float32\n    ] a b\n    d:f32[5] = sin c\n  in (d,) }"
//! );
//! assert_eq!(traced.arg_names, ["W", "x"]);
//! ```
//!
//! # The surface
//!
//! - [`make_jaxpr`] traces a closure on abstract values. Arguments and results are trees
//!   ([`ArgTree`], [`TensorTree`]): tensors, tuples, `Vec`s, arrays, `BTreeMap<String, _>`,
//!   nested; leaves are named as JAX names them (`params[0][1]`, `p['wq']`, or the name
//!   given with [`named`]). The result, [`Traced`], prints as JAX does and checks concrete
//!   arguments against the traced signature ([`Traced::flatten_args`]).
//! - [`Tensor`] methods and operators: elementwise math (`x.sin()`, `&a + &b`, `x * 2.0`,
//!   `x.powi(2)`), comparisons (`x.gt(0.0)`), reductions (`x.sum_axes(&[1], true)`,
//!   `x.mean()`), products (`w.dot(&x)`, `a.matmul(&b)`), layout (`x.reshape(&[-1, 2])`,
//!   `x.t()`, `x.broadcast_to(..)`), NumPy indexing (`x.index(idx![1..4, NEW_AXIS])`).
//! - [`numpy`]: functions that build or combine tensors, as in `jax.numpy`: `zeros`,
//!   `arange`, `where_`, `einsum`, `concatenate`, ... [`nn`]: `relu`, `sigmoid`,
//!   `softmax`, `log_softmax`, `logsumexp`, `one_hot`, `silu`, `gelu`. [`random`]: keys
//!   (`prng_key`, `key`, `split`, `fold_in`) and samplers (`uniform`, `normal`, ...).
//! - Calls: [`jit`] records `jit[name=...]`, [`checkpoint`] records `remat2` with a
//!   policy, [`checkpoint_name`] records `name`, [`scan`] records `scan`,
//!   [`recursive_checkpoint`] composes a chain of functions with binomial checkpointing;
//!   [`call_jaxpr`] calls a jaxpr made elsewhere (a gradient program) as a `jit`.
//! - Source locations: every operation is `#[track_caller]`, so each equation carries the
//!   user's `file:line:column`; [`function_scope!`] (or [`in_function`]) adds the
//!   function name (`model.rs:12:9 (g)`).
//!
//! Every function says which primitives it records; they are the ones JAX records, checked
//! against JAX 0.10.2 by `tests/numpy_oracle.rs` and the conformance cases.
//!
//! # Semantics
//!
//! - **Promotion** follows JAX's type lattice, `bool < int* < i32 < float* < f32 < f64`,
//!   where `int*`/`float*` are *weakly typed*: Rust scalars, and tensors computed only from
//!   them (`numpy::sqrt(4.0)`). A weak operand takes the other side's dtype, so `x * 2.0`
//!   records `mul x 2.0:f32[]` for an `f32` `x` and stays `f64` for an `f64` one.
//! - **Broadcasting** is NumPy's: lower-rank operands get leading size-1 axes
//!   (`broadcast_in_dim`), and size-1 axes stretch inside the primitive, as in `jax.lax`.
//! - **Errors** never panic and never produce a malformed jaxpr: every equation is recorded
//!   through the IR's shape rule, and the first rejected operation becomes the
//!   [`TraceError`] that [`make_jaxpr`] returns, located at the user's line and naming the
//!   types involved. Later operations are no-ops on placeholders.
//!
//! # Design
//!
//! A thread-local stack of *frames*, one per jaxpr under construction: `make_jaxpr` pushes
//! the root, and each call (`jit`, `checkpoint`, `scan`, the library's named calls) pushes
//! one for its body and pops it into a single equation of the frame below. A tensor used in
//! a frame above the one that made it is *lifted*: each frame in between gains an input
//! for it, passed first by the caller (JAX's closure conversion; a scan's consts). Calls of
//! one function that trace to the same jaxpr share it, as JAX's trace cache does, so the
//! printer hoists it (`let relu = { ... } in`). See `docs/trace.md` for the full account.
//!
//! Architecture invariant: this crate depends only on `remat-ir`. It records equations
//! through the IR's shape rules, so whatever it produces verifies.

#![warn(missing_docs)]

mod call_jaxpr;
mod custom;
mod elementwise;
mod inline;
pub mod lax;
pub mod linalg;
pub mod nn;
pub mod numpy;
pub mod ops;
mod pytree;
pub mod random;
mod scan;
mod tensor;
mod trace;
mod traceable;
mod transforms;
mod tree;

pub use call_jaxpr::call_jaxpr;
pub use custom::{custom_jvp_call, custom_vjp_call, trace_jvp_rule, trace_rule};
pub use elementwise::{binary, compare, unary, Arg};
pub use inline::{
    in_trace, inline_jaxpr, placeholder, rebuild_or_placeholders, record_trace_error, trace_subjaxpr, SubTrace,
};
pub use numpy::{AtIndices, Idx, Ix, ELLIPSIS, NEW_AXIS};
pub use scan::{scan, scan_reverse};
pub use tensor::Tensor;
#[doc(hidden)]
pub use trace::__enclosing_function_name;
pub use trace::{function_scope, in_function, FunctionScope, TraceError};
pub use traceable::{ScanBody, TraceFn};
pub use transforms::{
    checkpoint, checkpoint_name, function_name, jit, make_jaxpr, make_jaxpr_at, recursive_checkpoint, trace_fn_at,
    Checkpoint, Jit, Traced,
};
pub use tree::{named, ArgTree, GradTree, Named, TensorTree};

/// What the exported macros name (`pytree!`); not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use remat_ir::{Array, Aval};
}
