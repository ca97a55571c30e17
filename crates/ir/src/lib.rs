//! remat's IR: jaxprs in JAX's form, with JAX's exact text format.
//!
//! Architecture invariant: this crate knows nothing of tracing, autodiff or Cranelift. It
//! holds the data (types, primitives, jaxprs, values), the printer and parser of JAX's text
//! form, the shape rules and the verifier.

pub mod array;
pub mod identity;
pub mod jaxpr;
pub mod layout;
pub mod param;
pub mod param_types;
pub mod parse;
pub mod policy;
pub mod pp;
pub mod primitive;
pub mod print;
pub mod shape;
pub mod sharding;
mod syntax;
pub mod types;
pub mod verify;

pub use array::{c128, c64, Array, PrngKey};
pub use half::{bf16, f16};
pub use identity::{identities, Identity};
pub use jaxpr::ShardMap;
pub use jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitOrigin, LitValue, Literal, SourceInfo, Spelling, Var, VarDecl};
pub use num_complex::{Complex32, Complex64};
pub use param::Param;
pub use parse::{parse_jaxpr, ParseError};
pub use policy::Policy;
pub use primitive::{
    approx_top_k_as_jaxpr, approx_top_k_axis, dilated, generic_reduce_as_scans, generic_reduce_window_as_reduce,
    reduce_window_name, refusal, scatter_window, shape_rule, window_out_extent, ConvDimensionNumbers, ConvParams,
    Refusal, Window, WindowOp,
};
pub use primitive::{block_aval, global_aval, Collective};
pub use primitive::{
    cond_branch, platform_index, random_bits_dtype, AllReduceOp, BinaryOp, BranchesPlatforms, CompareOp, CopySemantics,
    CumulativeOp, DotDimensionNumbers, Eigh, EighAlgorithm, FftType, FillValue, GatherDimensionNumbers,
    GatherScatterMode, HigherOrder, JitOptions, Precision, Primitive, PrimitiveKind, Qr, ReduceOp, RngAlgorithm,
    RoundingMethod, ScatterDimensionNumbers, ScatterOp, Svd, SvdAlgorithm, TriangularSolve, UnaryDomain, UnaryOp,
};
pub use print::{pp_jaxpr, pp_literal};
pub use shape::ShapeError;
pub use sharding::{AxisType, Mesh, MeshAxis, PartitionSpec, Sharding, ShardingConstraint, SpecEntry};
pub use types::{
    format_bytes, max_value_bytes, Aval, DType, MemorySpace, Shape, Vma, DEFAULT_MAX_VALUE_BYTES, MAX_VALUE_BYTES_VAR,
};
pub use verify::{check_split, verify, verify_closed, Problem, VerifyError};
