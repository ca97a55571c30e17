//! The tracer: Rust closures over [`Tensor`]s become jaxprs.
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
//! Architecture invariant: this crate depends only on `remat-ir`. It records equations
//! through the IR's shape rules, so whatever it produces verifies.

#![warn(missing_docs)]

pub mod nn;
pub mod numpy;
mod scan;
mod tensor;
mod trace;
mod transforms;
mod tree;

pub use numpy::{Idx, ELLIPSIS, NEW_AXIS};
pub use scan::{scan, scan_reverse};
pub use tensor::{binary, compare, unary, Arg, Tensor};
#[doc(hidden)]
pub use trace::__enclosing_function_name;
pub use trace::{function_scope, in_function, FunctionScope, Operand, TraceError};
pub use transforms::{checkpoint, checkpoint_name, jit, make_jaxpr, recursive_checkpoint, Checkpoint, Jit, Traced};
pub use tree::{named, ArgTree, Named, TensorTree};
