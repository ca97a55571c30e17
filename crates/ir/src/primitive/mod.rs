//! What each primitive is: its name, its parameters' text form and its shape rule. Every
//! rule over primitives (shape rules, evaluation, jvp, transpose, lowering) is one
//! exhaustive match.
//!
//! Layout: the [`Primitive`] enum itself is declared with the jaxpr that holds it
//! (`jaxpr.rs`: a primitive's parameters may be jaxprs), and the parameter types that hold
//! no jaxpr below both (`param_types.rs`); both are re-exported here. This file holds the
//! list of primitive names ([`PrimitiveKind`]) and the dispatchers over primitives; each
//! family of primitives has a module holding, for each of its variants, the parameters'
//! text form and the shape rule side by side: `elementwise.rs`, `structural.rs` (shapes
//! and indexing), `reduction.rs` (reductions and contractions), `memory.rs` (names and
//! memory), `call.rs` (calls and loops), `control.rs` (`cond`, `while`, custom-vjp
//! calls), `indexing.rs`, `sorting.rs`, `random.rs` and `window.rs`.
//! [`Primitive::params`] gives the `key=value` pairs in printing order (defaults JAX hides
//! are left out), [`Primitive::from_params`] reads them back, and [`shape_rule`] types an
//! equation. The family modules share the shape rules' helpers through `crate::shape`,
//! below this module, and never call this file's dispatchers.
//!
//! Adding a primitive, in the IR: the variant (`jaxpr.rs`); its name in the
//! `primitive_kinds!` list below (or in its op enum's `named_enum!` list in
//! `param_types.rs`); its family module's `*_params`, `parse_*` and `*_shape` functions;
//! and the dispatch arms the compiler then asks for (`subjaxprs`, `try_map_subjaxprs` in
//! `jaxpr.rs`; `kind`, `params`, `from_params`, `hoist_name`, `shape_rule` here).

use std::fmt;

use crate::param::Param;
use crate::shape::ShapeError;
use crate::types::Aval;

pub(crate) mod call;
pub(crate) mod control;
pub(crate) mod elementwise;
pub(crate) mod indexing;
pub(crate) mod linalg;
pub(crate) mod memory;
mod params;
pub(crate) mod random;
pub(crate) mod reduction;
mod refused;
pub(crate) mod sharded;
pub(crate) mod sorting;
pub(crate) mod structural;
pub(crate) mod window;

pub use crate::jaxpr::{ConvParams, JitOptions, Primitive};
pub use crate::param_types::{
    platform_index, AllReduceOp, BinaryOp, BranchesPlatforms, CompareOp, ConvDimensionNumbers, CopySemantics,
    CumulativeOp, DotDimensionNumbers, Eigh, EighAlgorithm, FftType, FillValue, GatherDimensionNumbers,
    GatherScatterMode, Precision, Qr, ReduceOp, RngAlgorithm, RoundingMethod, ScatterDimensionNumbers, ScatterOp, Svd,
    SvdAlgorithm, TriangularSolve, UnaryDomain, UnaryOp, Window, WindowOp,
};
pub use control::cond_branch;
pub use random::random_bits_dtype;
pub use reduction::generic_reduce_as_scans;
pub use refused::{refusal, Refusal};
pub use sharded::{block_aval, global_aval, is_result_sharding, sharding_of, Collective};
pub use sorting::{approx_top_k_as_jaxpr, approx_top_k_axis};
pub use window::generic_reduce_window_as_reduce;
pub use window::{dilated, reduce_window_name, scatter_window, window_out_extent};

use params::ParamReader;

/// Declares [`PrimitiveKind`] from one list: the families whose names come from their op
/// enum's `named_enum!` list, then every other primitive with its name.
macro_rules! primitive_kinds {
    (
        families { $($(#[$fmeta:meta])* $Family:ident($Op:ident),)+ }
        singles { $($Variant:ident = $name:literal,)+ }
    ) => {
        /// A primitive without its parameters: what a primitive's name says. The parser
        /// maps a name to its kind ([`PrimitiveKind::from_name`], `None` for an unknown
        /// name) and [`Primitive::from_params`] reads the kind's parameters.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum PrimitiveKind {
            $($(#[$fmeta])* $Family($Op),)+
            $($Variant,)+
        }

        impl PrimitiveKind {
            /// The name as JAX prints it.
            pub fn name(self) -> &'static str {
                match self {
                    $(PrimitiveKind::$Family(op) => op.name(),)+
                    $(PrimitiveKind::$Variant => $name,)+
                }
            }

            /// Every kind: each family's ops in their list's order, then the others.
            pub fn all() -> Vec<PrimitiveKind> {
                let mut all = Vec::new();
                $(all.extend($Op::ALL.map(PrimitiveKind::$Family));)+
                all.extend([$(PrimitiveKind::$Variant),+]);
                all
            }

            /// The kind JAX prints as `name`, if there is one.
            pub fn from_name(name: &str) -> Option<PrimitiveKind> {
                PrimitiveKind::all().into_iter().find(|k| k.name() == name)
            }
        }
    };
}

/// What the parser says of a name that is not a [`PrimitiveKind`]: why remat refuses it, for a
/// primitive JAX defines ([`refusal`]), or that no primitive has that name.
pub fn not_a_primitive(name: &str) -> String {
    match refusal(name) {
        Some(r) => format!("`{name}` is a JAX primitive that remat refuses: {}", r.reason()),
        None => format!("unknown primitive `{name}`"),
    }
}

primitive_kinds! {
    families {
        /// `neg`, `sin`, ...: `elementwise.rs`.
        Unary(UnaryOp),
        /// `add`, `mul`, ...: `elementwise.rs`.
        Binary(BinaryOp),
        /// `eq`, `lt`, ...: `elementwise.rs`.
        Compare(CompareOp),
        /// `reduce_sum`, `reduce_max`, `reduce_min`: `reduction.rs`.
        Reduce(ReduceOp),
        /// `scatter`, `scatter-add`, ...: `indexing.rs`.
        Scatter(ScatterOp),
        /// `cumsum`, `cumprod`, ...: `sorting.rs`.
        Cumulative(CumulativeOp),
        /// `psum`, `psum_invariant`, `pmax`, `pmin`: `sharded.rs`.
        AllReduce(AllReduceOp),
    }
    singles {
        IntegerPow = "integer_pow",
        SelectN = "select_n",
        Clamp = "clamp",
        RegularizedIncompleteBeta = "regularized_incomplete_beta",
        Complex = "complex",
        Real = "real",
        Imag = "imag",
        Conj = "conj",
        Fft = "fft",
        ConvertElementType = "convert_element_type",
        ReducePrecision = "reduce_precision",
        Round = "round",
        BitcastConvertType = "bitcast_convert_type",
        BroadcastInDim = "broadcast_in_dim",
        Reshape = "reshape",
        Transpose = "transpose",
        Rev = "rev",
        Squeeze = "squeeze",
        ExpandDims = "expand_dims",
        Slice = "slice",
        Pad = "pad",
        Concatenate = "concatenate",
        DynamicSlice = "dynamic_slice",
        DynamicUpdateSlice = "dynamic_update_slice",
        Iota = "iota",
        Argmax = "argmax",
        GenericReduce = "reduce",
        DotGeneral = "dot_general",
        Name = "name",
        DevicePut = "device_put",
        Empty2 = "empty2",
        RandomSeed = "random_seed",
        RandomWrap = "random_wrap",
        RandomUnwrap = "random_unwrap",
        RandomSplit = "random_split",
        RandomFoldIn = "random_fold_in",
        RandomBits = "random_bits",
        RandomClone = "random_clone",
        Threefry2x32 = "threefry2x32",
        Iota2x32Shape = "iota_2x32_shape",
        RngBitGenerator = "rng_bit_generator",
        Jit = "jit",
        ClosedCall = "closed_call",
        Composite = "composite",
        CustomJvpCall = "custom_jvp_call",
        Remat2 = "remat2",
        Scan = "scan",
        Split = "split",
        Stack = "stack",
        Unstack = "unstack",
        Tile = "tile",
        PlatformIndex = "platform_index",
        OptimizationBarrier = "optimization_barrier",
        Gather = "gather",
        Sort = "sort",
        TopK = "top_k",
        ApproxTopK = "approx_top_k",
        Cholesky = "cholesky",
        TriangularSolve = "triangular_solve",
        Lu = "lu",
        LuPivotsToPermutation = "lu_pivots_to_permutation",
        Qr = "qr",
        Eigh = "eigh",
        Svd = "svd",
        Geqrf = "geqrf",
        HouseholderProduct = "householder_product",
        Ormqr = "ormqr",
        TridiagonalSolve = "tridiagonal_solve",
        SymmetricProduct = "symmetric_product",
        Argmin = "argmin",
        ConvGeneralDilated = "conv_general_dilated",
        ReduceWindowSum = "reduce_window_sum",
        ReduceWindowMax = "reduce_window_max",
        ReduceWindowMin = "reduce_window_min",
        GenericReduceWindow = "reduce_window",
        SelectAndScatterAdd = "select_and_scatter_add",
        SelectAndGatherAdd = "select_and_gather_add",
        Cond = "cond",
        While = "while",
        CustomVjpCall = "custom_vjp_call",
        ShardingConstraint = "sharding_constraint",
        Reshard = "reshard",
        ShardMap = "shard_map",
        Pvary = "pvary",
        AllGather = "all_gather",
        ReduceScatter = "reduce_scatter",
        Ppermute = "ppermute",
        AxisIndex = "axis_index",
        Pbroadcast = "pbroadcast",
        AllGatherInvariant = "all_gather_invariant",
        AllToAll = "all_to_all",
        ShardAlike = "shard_alike",
    }
}

/// The primitives that call nested jaxprs, as the passes that walk into sub-programs see
/// them ([`PrimitiveKind::higher_order`]). A pass matches on this, exhaustively, and treats
/// every first-order primitive (`None`) alike, so a new first-order primitive touches no
/// such pass while a new call-like one (`cond`, `while`) does not compile until each
/// handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HigherOrder {
    /// `jit`: a call of a closed jaxpr.
    Jit,
    /// `closed_call`: a call of a closed jaxpr with no other parameter.
    ClosedCall,
    /// `custom_jvp_call`: a call whose derivative JAX takes from its body.
    CustomJvpCall,
    /// `remat2`: a checkpointed call, split under its policy.
    Remat2,
    /// `scan`: a loop over a body.
    Scan,
    /// `cond`: one of several branches, chosen by an index at run time.
    Cond,
    /// `while`: a loop whose trip count is known only at run time.
    While,
    /// `custom_vjp_call`: a call whose derivative JAX takes from its fwd/bwd rules.
    CustomVjpCall,
    /// `composite`: a named call that JAX neither differentiates nor batches; every pass
    /// keeps it whole.
    Composite,
    /// `shard_map`: its body once per device of a mesh, on per-device blocks.
    ShardMap,
}

impl PrimitiveKind {
    /// Whether this primitive calls nested jaxprs, and which kind of call it is.
    pub fn higher_order(self) -> Option<HigherOrder> {
        match self {
            PrimitiveKind::Jit => Some(HigherOrder::Jit),
            PrimitiveKind::ClosedCall => Some(HigherOrder::ClosedCall),
            PrimitiveKind::CustomJvpCall => Some(HigherOrder::CustomJvpCall),
            PrimitiveKind::Remat2 => Some(HigherOrder::Remat2),
            PrimitiveKind::Scan => Some(HigherOrder::Scan),
            PrimitiveKind::Cond => Some(HigherOrder::Cond),
            PrimitiveKind::While => Some(HigherOrder::While),
            PrimitiveKind::CustomVjpCall => Some(HigherOrder::CustomVjpCall),
            PrimitiveKind::Composite => Some(HigherOrder::Composite),
            PrimitiveKind::ShardMap => Some(HigherOrder::ShardMap),
            PrimitiveKind::Unary(_)
            | PrimitiveKind::Binary(_)
            | PrimitiveKind::Compare(_)
            | PrimitiveKind::Reduce(_)
            | PrimitiveKind::IntegerPow
            | PrimitiveKind::SelectN
            | PrimitiveKind::Clamp
            | PrimitiveKind::RegularizedIncompleteBeta
            | PrimitiveKind::Complex
            | PrimitiveKind::Real
            | PrimitiveKind::Imag
            | PrimitiveKind::Conj
            | PrimitiveKind::Fft
            | PrimitiveKind::ConvertElementType
            | PrimitiveKind::ReducePrecision
            | PrimitiveKind::Round
            | PrimitiveKind::BitcastConvertType
            | PrimitiveKind::BroadcastInDim
            | PrimitiveKind::Reshape
            | PrimitiveKind::Transpose
            | PrimitiveKind::Rev
            | PrimitiveKind::Squeeze
            | PrimitiveKind::ExpandDims
            | PrimitiveKind::Slice
            | PrimitiveKind::Pad
            | PrimitiveKind::Concatenate
            | PrimitiveKind::DynamicSlice
            | PrimitiveKind::DynamicUpdateSlice
            | PrimitiveKind::Iota
            | PrimitiveKind::Argmax
            | PrimitiveKind::DotGeneral
            | PrimitiveKind::Name
            | PrimitiveKind::DevicePut
            | PrimitiveKind::Empty2
            | PrimitiveKind::Split
            | PrimitiveKind::Stack
            | PrimitiveKind::Unstack
            | PrimitiveKind::Tile
            | PrimitiveKind::PlatformIndex
            | PrimitiveKind::OptimizationBarrier
            | PrimitiveKind::Gather
            | PrimitiveKind::Scatter(_)
            | PrimitiveKind::Sort
            | PrimitiveKind::TopK
            | PrimitiveKind::ApproxTopK
            | PrimitiveKind::Cholesky
            | PrimitiveKind::TriangularSolve
            | PrimitiveKind::Lu
            | PrimitiveKind::LuPivotsToPermutation
            | PrimitiveKind::Qr
            | PrimitiveKind::Eigh
            | PrimitiveKind::Svd
            | PrimitiveKind::Geqrf
            | PrimitiveKind::HouseholderProduct
            | PrimitiveKind::Ormqr
            | PrimitiveKind::TridiagonalSolve
            | PrimitiveKind::SymmetricProduct
            | PrimitiveKind::Argmin
            | PrimitiveKind::Cumulative(_)
            | PrimitiveKind::GenericReduce
            | PrimitiveKind::GenericReduceWindow
            | PrimitiveKind::ConvGeneralDilated
            | PrimitiveKind::ReduceWindowSum
            | PrimitiveKind::ReduceWindowMax
            | PrimitiveKind::ReduceWindowMin
            | PrimitiveKind::SelectAndScatterAdd
            | PrimitiveKind::SelectAndGatherAdd
            | PrimitiveKind::RandomSeed
            | PrimitiveKind::RandomWrap
            | PrimitiveKind::RandomUnwrap
            | PrimitiveKind::RandomSplit
            | PrimitiveKind::RandomFoldIn
            | PrimitiveKind::RandomBits
            | PrimitiveKind::RandomClone
            | PrimitiveKind::Threefry2x32
            | PrimitiveKind::Iota2x32Shape
            | PrimitiveKind::ShardingConstraint
            | PrimitiveKind::Reshard
            | PrimitiveKind::AllReduce(_)
            | PrimitiveKind::Pvary
            | PrimitiveKind::AllGather
            | PrimitiveKind::ReduceScatter
            | PrimitiveKind::Ppermute
            | PrimitiveKind::AxisIndex
            | PrimitiveKind::Pbroadcast
            | PrimitiveKind::AllGatherInvariant
            | PrimitiveKind::AllToAll
            | PrimitiveKind::ShardAlike
            | PrimitiveKind::RngBitGenerator => None,
        }
    }
}

impl Primitive {
    /// What this primitive is, without its parameters.
    pub fn kind(&self) -> PrimitiveKind {
        match self {
            Primitive::Unary(op) => PrimitiveKind::Unary(*op),
            Primitive::Binary(op) => PrimitiveKind::Binary(*op),
            Primitive::Compare(op) => PrimitiveKind::Compare(*op),
            Primitive::IntegerPow { .. } => PrimitiveKind::IntegerPow,
            Primitive::SelectN => PrimitiveKind::SelectN,
            Primitive::Clamp => PrimitiveKind::Clamp,
            Primitive::RegularizedIncompleteBeta => PrimitiveKind::RegularizedIncompleteBeta,
            Primitive::Complex => PrimitiveKind::Complex,
            Primitive::Real => PrimitiveKind::Real,
            Primitive::Imag => PrimitiveKind::Imag,
            Primitive::Conj { .. } => PrimitiveKind::Conj,
            Primitive::Fft { .. } => PrimitiveKind::Fft,
            Primitive::ConvertElementType { .. } => PrimitiveKind::ConvertElementType,
            Primitive::ReducePrecision { .. } => PrimitiveKind::ReducePrecision,
            Primitive::Round { .. } => PrimitiveKind::Round,
            Primitive::BitcastConvertType { .. } => PrimitiveKind::BitcastConvertType,
            Primitive::BroadcastInDim { .. } => PrimitiveKind::BroadcastInDim,
            Primitive::Reshape { .. } => PrimitiveKind::Reshape,
            Primitive::Transpose { .. } => PrimitiveKind::Transpose,
            Primitive::Rev { .. } => PrimitiveKind::Rev,
            Primitive::Squeeze { .. } => PrimitiveKind::Squeeze,
            Primitive::ExpandDims { .. } => PrimitiveKind::ExpandDims,
            Primitive::Slice { .. } => PrimitiveKind::Slice,
            Primitive::Pad { .. } => PrimitiveKind::Pad,
            Primitive::Concatenate { .. } => PrimitiveKind::Concatenate,
            Primitive::DynamicSlice { .. } => PrimitiveKind::DynamicSlice,
            Primitive::DynamicUpdateSlice => PrimitiveKind::DynamicUpdateSlice,
            Primitive::Iota { .. } => PrimitiveKind::Iota,
            Primitive::Reduce { op, .. } => PrimitiveKind::Reduce(*op),
            Primitive::Argmax { .. } => PrimitiveKind::Argmax,
            Primitive::DotGeneral { .. } => PrimitiveKind::DotGeneral,
            Primitive::Name { .. } => PrimitiveKind::Name,
            Primitive::DevicePut { .. } => PrimitiveKind::DevicePut,
            Primitive::Empty2 { .. } => PrimitiveKind::Empty2,
            Primitive::RandomSeed => PrimitiveKind::RandomSeed,
            Primitive::RandomWrap => PrimitiveKind::RandomWrap,
            Primitive::RandomUnwrap => PrimitiveKind::RandomUnwrap,
            Primitive::RandomSplit { .. } => PrimitiveKind::RandomSplit,
            Primitive::RandomFoldIn => PrimitiveKind::RandomFoldIn,
            Primitive::RandomClone => PrimitiveKind::RandomClone,
            Primitive::Threefry2x32 => PrimitiveKind::Threefry2x32,
            Primitive::Iota2x32Shape { .. } => PrimitiveKind::Iota2x32Shape,
            Primitive::ShardingConstraint(_) => PrimitiveKind::ShardingConstraint,
            Primitive::Reshard => PrimitiveKind::Reshard,
            Primitive::ShardMap(_) => PrimitiveKind::ShardMap,
            Primitive::AllReduce { op, .. } => PrimitiveKind::AllReduce(*op),
            Primitive::Pvary { .. } => PrimitiveKind::Pvary,
            Primitive::AllGather { invariant: false, .. } => PrimitiveKind::AllGather,
            Primitive::AllGather { invariant: true, .. } => PrimitiveKind::AllGatherInvariant,
            Primitive::AllToAll { .. } => PrimitiveKind::AllToAll,
            Primitive::ShardAlike => PrimitiveKind::ShardAlike,
            Primitive::ReduceScatter { .. } => PrimitiveKind::ReduceScatter,
            Primitive::Ppermute { .. } => PrimitiveKind::Ppermute,
            Primitive::AxisIndex { .. } => PrimitiveKind::AxisIndex,
            Primitive::Pbroadcast { .. } => PrimitiveKind::Pbroadcast,
            Primitive::RngBitGenerator { .. } => PrimitiveKind::RngBitGenerator,
            Primitive::RandomBits { .. } => PrimitiveKind::RandomBits,
            Primitive::Jit { .. } => PrimitiveKind::Jit,
            Primitive::ClosedCall { .. } => PrimitiveKind::ClosedCall,
            Primitive::Composite { .. } => PrimitiveKind::Composite,
            Primitive::CustomJvpCall { .. } => PrimitiveKind::CustomJvpCall,
            Primitive::Remat2 { .. } => PrimitiveKind::Remat2,
            Primitive::Scan { .. } => PrimitiveKind::Scan,
            Primitive::Split { .. } => PrimitiveKind::Split,
            Primitive::Stack { .. } => PrimitiveKind::Stack,
            Primitive::Unstack { .. } => PrimitiveKind::Unstack,
            Primitive::Tile { .. } => PrimitiveKind::Tile,
            Primitive::PlatformIndex { .. } => PrimitiveKind::PlatformIndex,
            Primitive::OptimizationBarrier => PrimitiveKind::OptimizationBarrier,
            Primitive::Gather { .. } => PrimitiveKind::Gather,
            Primitive::Scatter { op, .. } => PrimitiveKind::Scatter(*op),
            Primitive::Sort { .. } => PrimitiveKind::Sort,
            Primitive::TopK { .. } => PrimitiveKind::TopK,
            Primitive::ApproxTopK { .. } => PrimitiveKind::ApproxTopK,
            Primitive::Cholesky => PrimitiveKind::Cholesky,
            Primitive::TriangularSolve(_) => PrimitiveKind::TriangularSolve,
            Primitive::Lu => PrimitiveKind::Lu,
            Primitive::LuPivotsToPermutation { .. } => PrimitiveKind::LuPivotsToPermutation,
            Primitive::Qr(_) => PrimitiveKind::Qr,
            Primitive::Eigh(_) => PrimitiveKind::Eigh,
            Primitive::Svd(_) => PrimitiveKind::Svd,
            Primitive::Geqrf => PrimitiveKind::Geqrf,
            Primitive::HouseholderProduct => PrimitiveKind::HouseholderProduct,
            Primitive::Ormqr { .. } => PrimitiveKind::Ormqr,
            Primitive::TridiagonalSolve { .. } => PrimitiveKind::TridiagonalSolve,
            Primitive::SymmetricProduct { .. } => PrimitiveKind::SymmetricProduct,
            Primitive::Argmin { .. } => PrimitiveKind::Argmin,
            Primitive::Cumulative { op, .. } => PrimitiveKind::Cumulative(*op),
            Primitive::GenericReduce { .. } => PrimitiveKind::GenericReduce,
            Primitive::GenericReduceWindow { .. } => PrimitiveKind::GenericReduceWindow,
            Primitive::ConvGeneralDilated(_) => PrimitiveKind::ConvGeneralDilated,
            Primitive::ReduceWindow { op: WindowOp::Sum, .. } => PrimitiveKind::ReduceWindowSum,
            Primitive::ReduceWindow { op: WindowOp::Max, .. } => PrimitiveKind::ReduceWindowMax,
            Primitive::ReduceWindow { op: WindowOp::Min, .. } => PrimitiveKind::ReduceWindowMin,
            Primitive::SelectAndScatterAdd { .. } => PrimitiveKind::SelectAndScatterAdd,
            Primitive::SelectAndGatherAdd { .. } => PrimitiveKind::SelectAndGatherAdd,
            Primitive::Cond { .. } => PrimitiveKind::Cond,
            Primitive::While { .. } => PrimitiveKind::While,
            Primitive::CustomVjpCall { .. } => PrimitiveKind::CustomVjpCall,
        }
    }

    /// The collective this primitive is, if it is one (`psum`, `all_gather`, ...).
    pub fn as_collective(&self) -> Option<Collective<'_>> {
        match self {
            Primitive::AllReduce { op, axes } => Some(Collective::AllReduce { op: *op, axes }),
            Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, .. } => {
                Some(Collective::AllGather {
                    axis_name,
                    all_gather_dimension: *all_gather_dimension,
                    axis_size: *axis_size,
                    tiled: *tiled,
                })
            }
            Primitive::AllToAll { axis_name, split_axis, concat_axis, axis_size, .. } => Some(Collective::AllToAll {
                axis_name,
                split_axis: *split_axis,
                concat_axis: *concat_axis,
                axis_size: *axis_size,
            }),
            Primitive::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled } => {
                Some(Collective::ReduceScatter {
                    axis_name,
                    scatter_dimension: *scatter_dimension,
                    axis_size: *axis_size,
                    tiled: *tiled,
                })
            }
            Primitive::Ppermute { axis_name, perm } => Some(Collective::Ppermute { axis_name, perm }),
            Primitive::AxisIndex { axis_name } => Some(Collective::AxisIndex { axis_name }),
            Primitive::Pbroadcast { axis_name, source } => Some(Collective::Pbroadcast { axis_name, source: *source }),
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::Fft { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::BitcastConvertType { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Rev { .. }
            | Primitive::Squeeze { .. }
            | Primitive::ExpandDims { .. }
            | Primitive::Slice { .. }
            | Primitive::Pad { .. }
            | Primitive::Concatenate { .. }
            | Primitive::DynamicSlice { .. }
            | Primitive::DynamicUpdateSlice
            | Primitive::Iota { .. }
            | Primitive::Reduce { .. }
            | Primitive::Argmax { .. }
            | Primitive::DotGeneral { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. }
            | Primitive::Empty2 { .. }
            | Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomClone
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::ShardingConstraint(_)
            | Primitive::Reshard
            | Primitive::ShardMap(_)
            | Primitive::Pvary { .. }
            | Primitive::RandomBits { .. }
            | Primitive::Jit { .. }
            | Primitive::ClosedCall { .. }
            | Primitive::Composite { .. }
            | Primitive::CustomJvpCall { .. }
            | Primitive::Remat2 { .. }
            | Primitive::Scan { .. }
            | Primitive::Split { .. }
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::OptimizationBarrier
            | Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::SymmetricProduct { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::RngBitGenerator { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::Argmin { .. }
            | Primitive::Cumulative { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { op: WindowOp::Sum, .. }
            | Primitive::ReduceWindow { op: WindowOp::Max, .. }
            | Primitive::ReduceWindow { op: WindowOp::Min, .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::SelectAndGatherAdd { .. }
            | Primitive::Cond { .. }
            | Primitive::While { .. }
            | Primitive::CustomVjpCall { .. }
            | Primitive::ShardAlike => None,
        }
    }

    /// Whether this primitive calls nested jaxprs, and which kind of call it is.
    pub fn higher_order(&self) -> Option<HigherOrder> {
        self.kind().higher_order()
    }

    /// The primitive's name as JAX prints it.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Every primitive name the parser knows, for error messages and docs.
    pub fn all_names() -> Vec<&'static str> {
        PrimitiveKind::all().into_iter().map(PrimitiveKind::name).collect()
    }

    /// The `name` parameter JAX's printer uses to name a hoisted sub-jaxpr (only `jit`'s
    /// raw parameters carry one: `custom_jvp_call`'s and `custom_vjp_call`'s `name` is
    /// added by their printers, so their hoisted jaxprs are named `jaxpr`).
    pub fn hoist_name(&self) -> Option<&str> {
        match self {
            Primitive::Jit { name, .. } | Primitive::Composite { name, .. } => Some(name),
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::IntegerPow { .. }
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::Conj { .. }
            | Primitive::Fft { .. }
            | Primitive::ConvertElementType { .. }
            | Primitive::ReducePrecision { .. }
            | Primitive::Round { .. }
            | Primitive::BitcastConvertType { .. }
            | Primitive::BroadcastInDim { .. }
            | Primitive::Reshape { .. }
            | Primitive::Transpose { .. }
            | Primitive::Rev { .. }
            | Primitive::Squeeze { .. }
            | Primitive::ExpandDims { .. }
            | Primitive::Slice { .. }
            | Primitive::Pad { .. }
            | Primitive::Concatenate { .. }
            | Primitive::DynamicSlice { .. }
            | Primitive::DynamicUpdateSlice
            | Primitive::Iota { .. }
            | Primitive::Reduce { .. }
            | Primitive::Argmax { .. }
            | Primitive::DotGeneral { .. }
            | Primitive::Name { .. }
            | Primitive::DevicePut { .. }
            | Primitive::Empty2 { .. }
            | Primitive::RandomSeed
            | Primitive::RandomWrap
            | Primitive::RandomUnwrap
            | Primitive::RandomSplit { .. }
            | Primitive::RandomFoldIn
            | Primitive::RandomBits { .. }
            | Primitive::RandomClone
            | Primitive::Threefry2x32
            | Primitive::Iota2x32Shape { .. }
            | Primitive::RngBitGenerator { .. }
            | Primitive::ClosedCall { .. }
            | Primitive::CustomJvpCall { .. }
            | Primitive::Remat2 { .. }
            | Primitive::Scan { .. }
            | Primitive::Split { .. }
            | Primitive::Stack { .. }
            | Primitive::Unstack { .. }
            | Primitive::Tile { .. }
            | Primitive::PlatformIndex { .. }
            | Primitive::OptimizationBarrier
            | Primitive::Gather { .. }
            | Primitive::Scatter { .. }
            | Primitive::Sort { .. }
            | Primitive::TopK { .. }
            | Primitive::ApproxTopK { .. }
            | Primitive::Cholesky
            | Primitive::TriangularSolve(_)
            | Primitive::Lu
            | Primitive::LuPivotsToPermutation { .. }
            | Primitive::Qr(_)
            | Primitive::Eigh(_)
            | Primitive::Svd(_)
            | Primitive::Geqrf
            | Primitive::HouseholderProduct
            | Primitive::Ormqr { .. }
            | Primitive::TridiagonalSolve { .. }
            | Primitive::SymmetricProduct { .. }
            | Primitive::Argmin { .. }
            | Primitive::Cumulative { .. }
            | Primitive::GenericReduce { .. }
            | Primitive::GenericReduceWindow { .. }
            | Primitive::ConvGeneralDilated(_)
            | Primitive::ReduceWindow { .. }
            | Primitive::SelectAndScatterAdd { .. }
            | Primitive::SelectAndGatherAdd { .. }
            | Primitive::Cond { .. }
            | Primitive::While { .. }
            | Primitive::CustomVjpCall { .. }
            | Primitive::ShardingConstraint(_)
            | Primitive::Reshard
            | Primitive::ShardMap(_)
            | Primitive::AllReduce { .. }
            | Primitive::Pvary { .. }
            | Primitive::AllGather { .. }
            | Primitive::ReduceScatter { .. }
            | Primitive::Ppermute { .. }
            | Primitive::AxisIndex { .. }
            | Primitive::Pbroadcast { .. }
            | Primitive::AllToAll { .. }
            | Primitive::ShardAlike => None,
        }
    }

    /// The parameters in printing order, leaving out what JAX's printer hides.
    pub fn params(&self) -> Vec<(&'static str, Param)> {
        use self::{
            call::*, control::*, elementwise::*, indexing::*, memory::*, reduction::*, sorting::*, structural::*,
        };
        match self {
            Primitive::Unary(_)
            | Primitive::Binary(_)
            | Primitive::Compare(_)
            | Primitive::SelectN
            | Primitive::Clamp
            | Primitive::RegularizedIncompleteBeta
            | Primitive::Complex
            | Primitive::Real
            | Primitive::Imag
            | Primitive::DynamicUpdateSlice => Vec::new(),
            Primitive::Conj { input_dtype } => conj_params(*input_dtype),
            Primitive::Fft { fft_type, fft_lengths } => fft_params(*fft_type, fft_lengths),
            Primitive::IntegerPow { y } => integer_pow_params(*y),
            Primitive::ConvertElementType { new_dtype, weak_type } => {
                convert_element_type_params(*new_dtype, *weak_type)
            }
            Primitive::ReducePrecision { exponent_bits, mantissa_bits } => {
                reduce_precision_params(*exponent_bits, *mantissa_bits)
            }
            Primitive::Round { rounding_method } => round_params(*rounding_method),
            Primitive::BitcastConvertType { new_dtype } => bitcast_convert_type_params(*new_dtype),
            Primitive::BroadcastInDim { shape: _, broadcast_dimensions } => {
                broadcast_in_dim_params(broadcast_dimensions)
            }
            Primitive::Reshape { new_sizes, dimensions } => reshape_params(new_sizes, dimensions.as_deref()),
            Primitive::Transpose { permutation } => transpose_params(permutation),
            Primitive::Rev { dimensions } => rev_params(dimensions),
            Primitive::Squeeze { dimensions } | Primitive::ExpandDims { dimensions } => dimensions_params(dimensions),
            Primitive::Slice { start_indices, limit_indices, strides } => {
                slice_params(start_indices, limit_indices, strides.as_deref())
            }
            Primitive::Pad { padding_config } => pad_params(padding_config),
            Primitive::Concatenate { dimension } => concatenate_params(*dimension),
            Primitive::DynamicSlice { slice_sizes } => dynamic_slice_params(slice_sizes),
            Primitive::Iota { dtype, shape, dimension } => iota_params(*dtype, shape, *dimension),
            Primitive::Reduce { op, axes } => reduce_params(*op, axes),
            Primitive::Argmax { axes, index_dtype } => argmax_params(axes, *index_dtype),
            Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision } => {
                dot_general_params(dimension_numbers, *preferred_element_type, *precision)
            }
            Primitive::Name { name } => name_params(name),
            Primitive::DevicePut { devices, copy_semantics } => device_put_params(devices, copy_semantics),
            Primitive::Empty2 { dtype, memory_space } => empty2_params(*dtype, *memory_space),
            Primitive::Jit { name, jaxpr, options } => jit_params(name, jaxpr, options),
            Primitive::ClosedCall { call_jaxpr } => closed_call_params(call_jaxpr),
            Primitive::Composite { name, attributes, version, jaxpr } => {
                composite_params(name, attributes, *version, jaxpr)
            }
            Primitive::RandomSeed | Primitive::RandomWrap => random::impl_params(),
            Primitive::RandomUnwrap | Primitive::RandomFoldIn | Primitive::RandomClone | Primitive::Threefry2x32 => {
                Vec::new()
            }
            Primitive::Iota2x32Shape { shape } => random::shape_params(shape),
            Primitive::RngBitGenerator { algorithm, dtype, shape } => {
                random::rng_bit_generator_params(*algorithm, *dtype, shape)
            }
            Primitive::RandomSplit { shape } => random::shape_params(shape),
            Primitive::RandomBits { bit_width, shape } => random::random_bits_params(*bit_width, shape),
            Primitive::CustomJvpCall { name, call_jaxpr, jvp, num_consts, symbolic_zeros } => {
                custom_jvp_call_params(name, call_jaxpr, jvp, *num_consts, *symbolic_zeros)
            }
            Primitive::Remat2 { jaxpr, prevent_cse, differentiated, policy } => {
                remat2_params(jaxpr, *prevent_cse, *differentiated, policy.as_ref())
            }
            Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll } => {
                scan_params(jaxpr, *length, *reverse, *num_consts, *num_carry, *unroll)
            }
            Primitive::Split { axis, sizes } => split_params(*axis, sizes),
            Primitive::Stack { axis } | Primitive::Unstack { axis } => axis_params(*axis),
            Primitive::Tile { reps } => tile_params(reps),
            Primitive::Gather {
                dimension_numbers,
                fill_value,
                indices_are_sorted,
                mode,
                slice_sizes,
                unique_indices,
            } => {
                gather_params(dimension_numbers, *fill_value, *indices_are_sorted, *mode, slice_sizes, *unique_indices)
            }
            Primitive::Scatter { op: _, dimension_numbers, indices_are_sorted, mode, unique_indices, update_jaxpr } => {
                scatter_params(dimension_numbers, *indices_are_sorted, *mode, *unique_indices, update_jaxpr.as_ref())
            }
            Primitive::Sort { dimension, is_stable, num_keys } => sort_params(*dimension, *is_stable, *num_keys),
            Primitive::TopK { axis, k } => top_k_params(*axis, *k),
            Primitive::ApproxTopK { .. } => approx_top_k_params(self),
            Primitive::Cholesky => linalg::cholesky_params(),
            Primitive::TriangularSolve(t) => linalg::triangular_solve_params(t),
            Primitive::Lu => Vec::new(),
            Primitive::LuPivotsToPermutation { permutation_size } => {
                vec![("permutation_size", Param::Int(*permutation_size as i64))]
            }
            Primitive::Qr(q) => linalg::qr_params(q),
            Primitive::Eigh(e) => linalg::eigh_params(e),
            Primitive::Svd(v) => linalg::svd_params(v),
            Primitive::Geqrf | Primitive::HouseholderProduct => Vec::new(),
            Primitive::Ormqr { left, transpose } => {
                vec![("left", Param::Bool(*left)), ("transpose", Param::Bool(*transpose))]
            }
            Primitive::TridiagonalSolve { perturb_singular } => {
                vec![("perturb_singular", Param::Bool(*perturb_singular))]
            }
            Primitive::SymmetricProduct { alpha, beta } => vec![("alpha", alpha.param()), ("beta", beta.param())],
            Primitive::Argmin { axes, index_dtype } => argmin_params(axes, *index_dtype),
            Primitive::Cumulative { op: _, axis, reverse } => cumulative_params(*axis, *reverse),
            Primitive::GenericReduce { computation, dimensions, jaxpr } => {
                generic_reduce_params(computation, dimensions, jaxpr)
            }
            Primitive::ConvGeneralDilated(c) => window::conv_params(c),
            Primitive::ReduceWindow { op: _, window } => window::window_params(window),
            Primitive::GenericReduceWindow { jaxpr, window } => window::generic_reduce_window_params(jaxpr, window),
            Primitive::SelectAndScatterAdd { select_prim, window_dimensions, window_strides, padding } => {
                window::select_and_scatter_add_params(*select_prim, window_dimensions, window_strides, padding)
            }
            Primitive::SelectAndGatherAdd { select_prim, window } => {
                window::select_and_gather_add_params(*select_prim, window)
            }
            Primitive::Cond { branches, branches_platforms } => cond_params(branches, branches_platforms.as_ref()),
            Primitive::PlatformIndex { platforms } => vec![("platforms", platforms_param(platforms))],
            Primitive::OptimizationBarrier => Vec::new(),
            Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } => {
                while_params(cond_jaxpr, body_jaxpr, *cond_nconsts, *body_nconsts)
            }
            Primitive::CustomVjpCall { name, call_jaxpr, fwd, bwd, num_consts, symbolic_zeros } => {
                custom_vjp_call_params(name, call_jaxpr, fwd, bwd, *num_consts, *symbolic_zeros)
            }
            Primitive::ShardingConstraint(c) => sharded::sharding_constraint_params(c),
            Primitive::Reshard => Vec::new(),
            Primitive::ShardMap(sm) => sharded::shard_map_params(sm),
            Primitive::AllReduce { op, axes } => sharded::all_reduce_params(*op, axes),
            Primitive::Pvary { axes } => sharded::pvary_params(axes),
            Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, invariant } => {
                sharded::all_gather_params(axis_name, *all_gather_dimension, *axis_size, *tiled, *invariant)
            }
            Primitive::AllToAll { axis_name, bare_name, split_axis, concat_axis, tiled, .. } => {
                sharded::all_to_all_params(axis_name, *bare_name, *split_axis, *concat_axis, *tiled)
            }
            Primitive::ShardAlike => Vec::new(),
            Primitive::ReduceScatter { axis_name, scatter_dimension, axis_size, tiled } => {
                sharded::reduce_scatter_params(axis_name, *scatter_dimension, *axis_size, *tiled)
            }
            Primitive::Ppermute { axis_name, perm } => sharded::ppermute_params(axis_name, perm),
            Primitive::AxisIndex { axis_name } => sharded::axis_index_params(axis_name),
            Primitive::Pbroadcast { axis_name, source } => sharded::pbroadcast_params(axis_name, *source),
        }
    }

    /// Builds a primitive from its name and the parameters as read. `out_avals` are the
    /// equation's binder types (some parameters JAX does not print, such as
    /// `broadcast_in_dim`'s `shape`, come from them). Errors say which parameter is wrong.
    pub fn from_params(name: &str, params: Vec<(String, Param)>, out_avals: &[Aval]) -> Result<Primitive, String> {
        use self::{
            call::*, control::*, elementwise::*, indexing::*, memory::*, reduction::*, sorting::*, structural::*,
        };
        let kind = PrimitiveKind::from_name(name).ok_or_else(|| not_a_primitive(name))?;
        let mut reader = ParamReader::new(name, params);
        let p = &mut reader;
        let prim = match kind {
            PrimitiveKind::Unary(op) => parse_unary(op, p)?,
            PrimitiveKind::Binary(op) => parse_binary(op, p)?,
            PrimitiveKind::Compare(op) => Primitive::Compare(op),
            PrimitiveKind::IntegerPow => parse_integer_pow(p)?,
            PrimitiveKind::SelectN => Primitive::SelectN,
            PrimitiveKind::Clamp => Primitive::Clamp,
            PrimitiveKind::RegularizedIncompleteBeta => Primitive::RegularizedIncompleteBeta,
            PrimitiveKind::Complex => Primitive::Complex,
            PrimitiveKind::Real => Primitive::Real,
            PrimitiveKind::Imag => Primitive::Imag,
            PrimitiveKind::Conj => Primitive::Conj { input_dtype: p.dtype("input_dtype")? },
            PrimitiveKind::Fft => parse_fft(p)?,
            PrimitiveKind::ConvertElementType => parse_convert_element_type(p)?,
            PrimitiveKind::ReducePrecision => parse_reduce_precision(p)?,
            PrimitiveKind::Round => parse_round(p)?,
            PrimitiveKind::BitcastConvertType => parse_bitcast_convert_type(p)?,
            PrimitiveKind::BroadcastInDim => parse_broadcast_in_dim(p, out_avals)?,
            PrimitiveKind::Reshape => parse_reshape(p)?,
            PrimitiveKind::Transpose => parse_transpose(p)?,
            PrimitiveKind::Rev => parse_rev(p)?,
            PrimitiveKind::Squeeze => parse_squeeze(p)?,
            PrimitiveKind::ExpandDims => parse_expand_dims(p)?,
            PrimitiveKind::Slice => parse_slice(p)?,
            PrimitiveKind::Pad => parse_pad(p)?,
            PrimitiveKind::Concatenate => parse_concatenate(p)?,
            PrimitiveKind::DynamicSlice => parse_dynamic_slice(p)?,
            PrimitiveKind::DynamicUpdateSlice => Primitive::DynamicUpdateSlice,
            PrimitiveKind::Iota => parse_iota(p)?,
            PrimitiveKind::Reduce(op) => parse_reduce(op, p)?,
            PrimitiveKind::Argmax => parse_argmax(p)?,
            PrimitiveKind::DotGeneral => parse_dot_general(p)?,
            PrimitiveKind::Name => parse_name(p)?,
            PrimitiveKind::DevicePut => parse_device_put(p)?,
            PrimitiveKind::Empty2 => parse_empty2(p)?,
            PrimitiveKind::RandomSeed => random::parse_random_seed(p)?,
            PrimitiveKind::RandomWrap => random::parse_random_wrap(p)?,
            PrimitiveKind::RandomUnwrap => Primitive::RandomUnwrap,
            PrimitiveKind::RandomSplit => random::parse_random_split(p)?,
            PrimitiveKind::RandomFoldIn => Primitive::RandomFoldIn,
            PrimitiveKind::RandomClone => Primitive::RandomClone,
            PrimitiveKind::Threefry2x32 => Primitive::Threefry2x32,
            PrimitiveKind::Iota2x32Shape => Primitive::Iota2x32Shape { shape: p.usizes("shape")? },
            PrimitiveKind::RngBitGenerator => random::parse_rng_bit_generator(p)?,
            PrimitiveKind::RandomBits => random::parse_random_bits(p)?,
            PrimitiveKind::Jit => parse_jit(p)?,
            PrimitiveKind::ClosedCall => parse_closed_call(p)?,
            PrimitiveKind::Composite => parse_composite(p)?,
            PrimitiveKind::CustomJvpCall => parse_custom_jvp_call(p)?,
            PrimitiveKind::Remat2 => parse_remat2(p)?,
            PrimitiveKind::Scan => parse_scan(p)?,
            PrimitiveKind::Split => parse_split(p)?,
            PrimitiveKind::Stack => Primitive::Stack { axis: p.usize("axis")? },
            PrimitiveKind::Unstack => Primitive::Unstack { axis: p.usize("axis")? },
            PrimitiveKind::Tile => parse_tile(p)?,
            PrimitiveKind::PlatformIndex => Primitive::PlatformIndex { platforms: parse_platforms(p, "platforms")? },
            PrimitiveKind::OptimizationBarrier => Primitive::OptimizationBarrier,
            PrimitiveKind::Gather => parse_gather(p)?,
            PrimitiveKind::Scatter(op) => parse_scatter(op, p)?,
            PrimitiveKind::Sort => parse_sort(p)?,
            PrimitiveKind::TopK => parse_top_k(p)?,
            PrimitiveKind::ApproxTopK => parse_approx_top_k(p)?,
            PrimitiveKind::Cholesky => Primitive::Cholesky,
            PrimitiveKind::TriangularSolve => linalg::parse_triangular_solve(p)?,
            PrimitiveKind::Lu => Primitive::Lu,
            PrimitiveKind::LuPivotsToPermutation => {
                Primitive::LuPivotsToPermutation { permutation_size: p.usize("permutation_size")? }
            }
            PrimitiveKind::Qr => linalg::parse_qr(p)?,
            PrimitiveKind::Eigh => linalg::parse_eigh(p)?,
            PrimitiveKind::Svd => linalg::parse_svd(p)?,
            PrimitiveKind::Geqrf => Primitive::Geqrf,
            PrimitiveKind::HouseholderProduct => Primitive::HouseholderProduct,
            PrimitiveKind::Ormqr => Primitive::Ormqr { left: p.bool("left")?, transpose: p.bool("transpose")? },
            PrimitiveKind::TridiagonalSolve => {
                Primitive::TridiagonalSolve { perturb_singular: p.bool("perturb_singular")? }
            }
            PrimitiveKind::SymmetricProduct => linalg::parse_symmetric_product(p)?,
            PrimitiveKind::Argmin => parse_argmin(p)?,
            PrimitiveKind::Cumulative(op) => parse_cumulative(op, p)?,
            PrimitiveKind::GenericReduce => parse_generic_reduce(p)?,
            PrimitiveKind::ConvGeneralDilated => window::parse_conv(p)?,
            PrimitiveKind::ReduceWindowSum => window::parse_reduce_window(WindowOp::Sum, p)?,
            PrimitiveKind::ReduceWindowMax => window::parse_reduce_window(WindowOp::Max, p)?,
            PrimitiveKind::ReduceWindowMin => window::parse_reduce_window(WindowOp::Min, p)?,
            PrimitiveKind::GenericReduceWindow => window::parse_generic_reduce_window(p)?,
            PrimitiveKind::SelectAndScatterAdd => window::parse_select_and_scatter_add(p)?,
            PrimitiveKind::SelectAndGatherAdd => window::parse_select_and_gather_add(p)?,
            PrimitiveKind::Cond => parse_cond(p)?,
            PrimitiveKind::While => parse_while(p)?,
            PrimitiveKind::CustomVjpCall => parse_custom_vjp_call(p)?,
            PrimitiveKind::ShardingConstraint => sharded::parse_sharding_constraint(p)?,
            PrimitiveKind::Reshard => Primitive::Reshard,
            PrimitiveKind::ShardMap => sharded::parse_shard_map(p)?,
            PrimitiveKind::AllReduce(op) => sharded::parse_all_reduce(op, p)?,
            PrimitiveKind::Pvary => sharded::parse_pvary(p)?,
            PrimitiveKind::AllGather => sharded::parse_all_gather(p, false)?,
            PrimitiveKind::AllGatherInvariant => sharded::parse_all_gather(p, true)?,
            PrimitiveKind::AllToAll => sharded::parse_all_to_all(p)?,
            PrimitiveKind::ShardAlike => Primitive::ShardAlike,
            PrimitiveKind::ReduceScatter => sharded::parse_reduce_scatter(p)?,
            PrimitiveKind::Ppermute => sharded::parse_ppermute(p)?,
            PrimitiveKind::AxisIndex => sharded::parse_axis_index(p)?,
            PrimitiveKind::Pbroadcast => sharded::parse_pbroadcast(p)?,
        };
        reader.finish()?;
        Ok(prim)
    }
}

/// The output avals of `prim` applied to operands of types `in_avals`, with JAX's typing
/// rules (`jax/_src/lax/lax.py`, `slicing.py`, `control_flow/loops.py`): one exhaustive
/// match that calls each variant's rule in its family module. What the rules keep true:
/// - they never panic, whatever the avals and parameters (a malformed nested jaxpr is an
///   error, not an out-of-bounds index);
/// - every error message starts with the primitive's name: `add: operand shapes f32[3] and
///   f32[4] differ`;
/// - results are in device memory except `device_put`'s, which land in the memory space
///   it names, and a call's, which are its inner jaxpr's output avals. Whether an operand
///   may live in host memory is the verifier's question, not the shape rules'.
pub fn shape_rule(prim: &Primitive, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let out = typed(prim, in_avals)?;
    // How results vary over mesh axes inside `shard_map`.
    match vma_rule(prim.kind()) {
        VmaRule::Own | VmaRule::Body => Ok(out),
        VmaRule::Standard => {
            let vma = sharded::standard_vma(prim.name(), in_avals)?;
            Ok(out.into_iter().map(|a| a.with_vma(vma.clone())).collect())
        }
    }
}

/// Where an equation's varying mesh axes come from (inside `shard_map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VmaRule {
    /// From the operands: JAX's `standard_vma_rule`.
    Standard,
    /// From the primitive's own shape rule (collectives, sharding annotations).
    Own,
    /// From the called jaxpr's outputs.
    Body,
}

fn vma_rule(kind: PrimitiveKind) -> VmaRule {
    match kind {
        PrimitiveKind::Unary(_)
        | PrimitiveKind::Binary(_)
        | PrimitiveKind::Compare(_)
        | PrimitiveKind::Reduce(_)
        | PrimitiveKind::Scatter(_)
        | PrimitiveKind::Cumulative(_)
        | PrimitiveKind::IntegerPow
        | PrimitiveKind::SelectN
        | PrimitiveKind::Clamp
        | PrimitiveKind::RegularizedIncompleteBeta
        | PrimitiveKind::Complex
        | PrimitiveKind::Real
        | PrimitiveKind::Imag
        | PrimitiveKind::Conj
        | PrimitiveKind::Fft
        | PrimitiveKind::ConvertElementType
        | PrimitiveKind::ReducePrecision
        | PrimitiveKind::Round
        | PrimitiveKind::BitcastConvertType
        | PrimitiveKind::BroadcastInDim
        | PrimitiveKind::Reshape
        | PrimitiveKind::Transpose
        | PrimitiveKind::Rev
        | PrimitiveKind::Squeeze
        | PrimitiveKind::ExpandDims
        | PrimitiveKind::Slice
        | PrimitiveKind::Pad
        | PrimitiveKind::Concatenate
        | PrimitiveKind::DynamicSlice
        | PrimitiveKind::DynamicUpdateSlice
        | PrimitiveKind::Iota
        | PrimitiveKind::Argmax
        | PrimitiveKind::DotGeneral
        | PrimitiveKind::Name
        | PrimitiveKind::DevicePut
        | PrimitiveKind::Empty2
        | PrimitiveKind::RandomSeed
        | PrimitiveKind::RandomWrap
        | PrimitiveKind::RandomUnwrap
        | PrimitiveKind::RandomSplit
        | PrimitiveKind::RandomFoldIn
        | PrimitiveKind::RandomBits
        | PrimitiveKind::RandomClone
        | PrimitiveKind::Threefry2x32
        | PrimitiveKind::Iota2x32Shape
        | PrimitiveKind::Split
        | PrimitiveKind::Stack
        | PrimitiveKind::Unstack
        | PrimitiveKind::Tile
        | PrimitiveKind::PlatformIndex
        | PrimitiveKind::OptimizationBarrier
        | PrimitiveKind::Gather
        | PrimitiveKind::Sort
        | PrimitiveKind::TopK
        | PrimitiveKind::Cholesky
        | PrimitiveKind::TriangularSolve
        | PrimitiveKind::Lu
        | PrimitiveKind::LuPivotsToPermutation
        | PrimitiveKind::Qr
        | PrimitiveKind::Eigh
        | PrimitiveKind::SymmetricProduct
        | PrimitiveKind::GenericReduce
        | PrimitiveKind::GenericReduceWindow
        | PrimitiveKind::RngBitGenerator
        | PrimitiveKind::ApproxTopK
        | PrimitiveKind::Svd
        | PrimitiveKind::Geqrf
        | PrimitiveKind::HouseholderProduct
        | PrimitiveKind::Ormqr
        | PrimitiveKind::TridiagonalSolve
        | PrimitiveKind::Argmin
        | PrimitiveKind::ConvGeneralDilated
        | PrimitiveKind::ReduceWindowSum
        | PrimitiveKind::ReduceWindowMax
        | PrimitiveKind::ReduceWindowMin
        | PrimitiveKind::SelectAndScatterAdd
        | PrimitiveKind::SelectAndGatherAdd => VmaRule::Standard,
        PrimitiveKind::AllReduce(_)
        | PrimitiveKind::ShardingConstraint
        | PrimitiveKind::Reshard
        | PrimitiveKind::Pvary
        | PrimitiveKind::AllGather
        | PrimitiveKind::ReduceScatter
        | PrimitiveKind::Ppermute
        | PrimitiveKind::AxisIndex
        | PrimitiveKind::Pbroadcast
        | PrimitiveKind::AllGatherInvariant
        | PrimitiveKind::AllToAll
        | PrimitiveKind::ShardAlike => VmaRule::Own,
        PrimitiveKind::Jit
        | PrimitiveKind::ClosedCall
        | PrimitiveKind::Composite
        | PrimitiveKind::CustomJvpCall
        | PrimitiveKind::Remat2
        | PrimitiveKind::Scan
        | PrimitiveKind::Cond
        | PrimitiveKind::While
        | PrimitiveKind::CustomVjpCall
        | PrimitiveKind::ShardMap => VmaRule::Body,
    }
}

/// [`shape_rule`] without the varying axes of first-order primitives.
fn typed(prim: &Primitive, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    use self::{
        call::*, control::*, elementwise::*, indexing::*, memory::*, random::*, reduction::*, sorting::*, structural::*,
    };
    let ins = in_avals;
    match prim {
        Primitive::Unary(op) => unary_shape(*op, ins),
        Primitive::Binary(op) => binary_shape(*op, ins),
        Primitive::Compare(op) => compare_shape(*op, ins),
        Primitive::IntegerPow { y } => integer_pow_shape(*y, ins),
        Primitive::SelectN => select_n_shape(ins),
        Primitive::Clamp => clamp_shape(ins),
        Primitive::RegularizedIncompleteBeta => regularized_incomplete_beta_shape(ins),
        Primitive::Complex => complex_shape(ins),
        Primitive::Real => real_imag_shape("real", ins),
        Primitive::Imag => real_imag_shape("imag", ins),
        Primitive::Conj { input_dtype } => conj_shape(*input_dtype, ins),
        Primitive::Fft { fft_type, fft_lengths } => fft_shape(*fft_type, fft_lengths, ins),
        Primitive::ConvertElementType { new_dtype, weak_type: _ } => convert_element_type_shape(*new_dtype, ins),
        Primitive::ReducePrecision { exponent_bits, mantissa_bits: _ } => reduce_precision_shape(*exponent_bits, ins),
        Primitive::Round { rounding_method: _ } => round_shape(ins),
        Primitive::BitcastConvertType { new_dtype } => bitcast_convert_type_shape(*new_dtype, ins),
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            broadcast_in_dim_shape(shape, broadcast_dimensions, ins)
        }
        Primitive::Reshape { new_sizes, dimensions } => reshape_shape(new_sizes, dimensions.as_deref(), ins),
        Primitive::Transpose { permutation } => transpose_shape(permutation, ins),
        Primitive::Rev { dimensions } => rev_shape(dimensions, ins),
        Primitive::Squeeze { dimensions } => squeeze_shape(dimensions, ins),
        Primitive::ExpandDims { dimensions } => expand_dims_shape(dimensions, ins),
        Primitive::Slice { start_indices, limit_indices, strides } => {
            slice_shape(start_indices, limit_indices, strides.as_deref(), ins)
        }
        Primitive::Pad { padding_config } => pad_shape(padding_config, ins),
        Primitive::Concatenate { dimension } => concatenate_shape(*dimension, ins),
        Primitive::DynamicSlice { slice_sizes } => dynamic_slice_shape(slice_sizes, ins),
        Primitive::DynamicUpdateSlice => dynamic_update_slice_shape(ins),
        Primitive::Iota { dtype, shape, dimension } => iota_shape(*dtype, shape, *dimension, ins),
        Primitive::Reduce { op, axes } => reduce_shape(*op, axes, ins),
        Primitive::Argmax { axes, index_dtype } => argmax_shape(axes, *index_dtype, ins),
        Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision: _ } => {
            dot_general_shape(dimension_numbers, *preferred_element_type, ins)
        }
        Primitive::Name { name: _ } => name_shape(ins),
        Primitive::DevicePut { devices, copy_semantics: _ } => device_put_shape(devices, ins),
        Primitive::RandomSeed => random_seed_shape(ins),
        Primitive::RandomWrap => random_wrap_shape(ins),
        Primitive::RandomUnwrap => random_unwrap_shape(ins),
        Primitive::RandomSplit { shape } => random_split_shape(shape, ins),
        Primitive::RandomFoldIn => random_fold_in_shape(ins),
        Primitive::RandomClone => random_clone_shape(ins),
        Primitive::Threefry2x32 => threefry2x32_shape(ins),
        Primitive::Iota2x32Shape { shape } => iota_2x32_shape_shape(shape, ins),
        Primitive::RngBitGenerator { algorithm: _, dtype, shape } => rng_bit_generator_shape(*dtype, shape, ins),
        Primitive::RandomBits { bit_width, shape } => random_bits_shape(*bit_width, shape, ins),
        Primitive::Empty2 { dtype, memory_space } => empty2_shape(*dtype, *memory_space, ins),
        Primitive::Jit { name: _, jaxpr, options } => jit_shape(jaxpr, options, ins),
        Primitive::ClosedCall { call_jaxpr } => call("closed_call", ins, call_jaxpr),
        Primitive::Composite { jaxpr, .. } => call("composite", ins, jaxpr),
        Primitive::CustomJvpCall { call_jaxpr, num_consts, .. } => custom_jvp_call_shape(call_jaxpr, *num_consts, ins),
        Primitive::Remat2 { jaxpr, .. } => remat2_shape(jaxpr, ins),
        Primitive::Scan { jaxpr, length, num_consts, num_carry, .. } => {
            scan_shape(jaxpr, *length, *num_consts, *num_carry, ins)
        }
        Primitive::Split { axis, sizes } => split_shape(*axis, sizes, ins),
        Primitive::Stack { axis } => stack_shape(*axis, ins),
        Primitive::Unstack { axis } => unstack_shape(*axis, ins),
        Primitive::Tile { reps } => tile_shape(reps, ins),
        Primitive::Gather { dimension_numbers, slice_sizes, .. } => gather_shape(dimension_numbers, slice_sizes, ins),
        Primitive::Scatter { op, dimension_numbers, .. } => scatter_shape(*op, dimension_numbers, ins),
        Primitive::Sort { dimension, is_stable: _, num_keys } => sort_shape(*dimension, *num_keys, ins),
        Primitive::TopK { axis, k } => top_k_shape(*axis, *k, ins),
        Primitive::ApproxTopK { k, reduction_dimension, aggregate_to_topk, .. } => {
            approx_top_k_shape(*k, *reduction_dimension, *aggregate_to_topk, ins)
        }
        Primitive::Cholesky => linalg::cholesky_shape(ins),
        Primitive::TriangularSolve(t) => linalg::triangular_solve_shape(t, ins),
        Primitive::Lu => linalg::lu_shape(ins),
        Primitive::LuPivotsToPermutation { permutation_size } => {
            linalg::lu_pivots_to_permutation_shape(*permutation_size, ins)
        }
        Primitive::Qr(q) => linalg::qr_shape(q, ins),
        Primitive::Eigh(e) => linalg::eigh_shape(e, ins),
        Primitive::Svd(v) => linalg::svd_shape(v, ins),
        Primitive::Geqrf => linalg::geqrf_shape(ins),
        Primitive::HouseholderProduct => linalg::householder_product_shape(ins),
        Primitive::Ormqr { left, .. } => linalg::ormqr_shape(*left, ins),
        Primitive::TridiagonalSolve { perturb_singular } => linalg::tridiagonal_solve_shape(*perturb_singular, ins),
        Primitive::SymmetricProduct { .. } => linalg::symmetric_product_shape(ins),
        Primitive::Argmin { axes, index_dtype } => argmin_shape(axes, *index_dtype, ins),
        Primitive::Cumulative { op, axis, reverse: _ } => cumulative_shape(*op, *axis, ins),
        Primitive::GenericReduce { dimensions, jaxpr, .. } => generic_reduce_shape(dimensions, jaxpr, ins),
        Primitive::ConvGeneralDilated(c) => window::conv_shape(c, ins),
        Primitive::ReduceWindow { op, window } => window::reduce_window_shape(*op, window, ins),
        Primitive::GenericReduceWindow { jaxpr, window } => window::generic_reduce_window_shape(jaxpr, window, ins),
        Primitive::SelectAndScatterAdd { select_prim: _, window_dimensions, window_strides, padding } => {
            window::select_and_scatter_add_shape(&scatter_window(window_dimensions, window_strides, padding), ins)
        }
        Primitive::SelectAndGatherAdd { select_prim: _, window } => window::select_and_gather_add_shape(window, ins),
        Primitive::Cond { branches, branches_platforms } => cond_shape(branches, branches_platforms.as_ref(), ins),
        Primitive::PlatformIndex { platforms } => platform_index_shape(platforms, ins),
        // The operands' types, each in its own memory space.
        Primitive::OptimizationBarrier => Ok(ins.to_vec()),
        Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } => {
            while_shape(cond_jaxpr, body_jaxpr, *cond_nconsts, *body_nconsts, ins)
        }
        Primitive::CustomVjpCall { call_jaxpr, num_consts, .. } => custom_vjp_call_shape(call_jaxpr, *num_consts, ins),
        Primitive::ShardingConstraint(c) => sharded::sharding_constraint_shape(c, ins),
        Primitive::Reshard => sharded::reshard_shape(ins),
        Primitive::ShardMap(sm) => sharded::shard_map_shape(sm, ins),
        Primitive::AllReduce { op, axes } => sharded::all_reduce_shape(*op, axes, ins),
        Primitive::Pvary { axes } => sharded::pvary_shape(axes, ins),
        Primitive::AllGather { axis_name, all_gather_dimension, axis_size, tiled, invariant } => {
            sharded::all_gather_shape(axis_name, *all_gather_dimension, *axis_size, *tiled, *invariant, ins)
        }
        Primitive::AllToAll { split_axis, concat_axis, axis_size, .. } => {
            sharded::all_to_all_shape(*split_axis, *concat_axis, *axis_size, ins)
        }
        Primitive::ShardAlike => sharded::shard_alike_shape(ins),
        Primitive::ReduceScatter { axis_name: _, scatter_dimension, axis_size, tiled } => {
            sharded::reduce_scatter_shape(*scatter_dimension, *axis_size, *tiled, ins)
        }
        Primitive::Ppermute { .. } => sharded::ppermute_shape(ins),
        Primitive::AxisIndex { axis_name } => sharded::axis_index_shape(axis_name, ins),
        Primitive::Pbroadcast { .. } => sharded::pbroadcast_shape(ins),
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::array::Array;
    use crate::jaxpr::{ClosedJaxpr, Jaxpr};
    use crate::parse::parse_jaxpr;
    use crate::print::pp_jaxpr;
    use crate::types::DType;
    use crate::verify::verify;

    /// One program per call-like primitive with one nested jaxpr (a one-branch `cond`);
    /// each has exactly one `sin`, inside the call.
    const CALLS: [&str; 7] = [
        "{ lambda ; a:f32[3]. let
            b:f32[3] = jit[name=f jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) }] a
          in (b,) }",
        "{ lambda ; a:f32[3]. let
            b:f32[3] = closed_call[call_jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) }] a
          in (b,) }",
        "{ lambda ; a:f32[3]. let
            b:f32[3] = custom_jvp_call[
              name=f call_jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) } jvp=jvp symbolic_zeros=False
            ] a
          in (b,) }",
        "{ lambda ; a:f32[3]. let
            b:f32[3] = remat2[
              differentiated=False jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) } policy=None
              prevent_cse=True
            ] a
          in (b,) }",
        "{ lambda ; a:f32[3] b:f32[2,3]. let
            c:f32[3] d:f32[2,3] = scan[
              jaxpr={ lambda ; e:f32[3] f:f32[3]. let g:f32[3] = add e f; h:f32[3] = sin f in (g, h) }
              length=2 num_carry=1 num_consts=0 reverse=False unroll=1
            ] a b
          in (c, d) }",
        "{ lambda ; i:i32[] a:f32[3]. let
            b:f32[3] = cond[branches=({ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) },)] i a
          in (b,) }",
        "{ lambda ; a:f32[3]. let
            b:f32[3] = custom_vjp_call[
              name=f bwd=f_bwd call_jaxpr={ lambda ; c:f32[3]. let d:f32[3] = sin c in (d,) } fwd=f_fwd
              symbolic_zeros=False
            ] a
          in (b,) }",
    ];

    fn parse(text: &str) -> Jaxpr {
        let j = parse_jaxpr(text, "test").unwrap();
        verify(&j).unwrap();
        j
    }

    /// A primitive is higher-order exactly when it calls nested jaxprs: every call-like
    /// primitive of `CALLS`, and none of the first-order ones in their bodies or around them.
    #[test]
    fn higher_order_is_having_subjaxprs() {
        let expected = [
            HigherOrder::Jit,
            HigherOrder::ClosedCall,
            HigherOrder::CustomJvpCall,
            HigherOrder::Remat2,
            HigherOrder::Scan,
            HigherOrder::Cond,
            HigherOrder::CustomVjpCall,
        ];
        for (text, want) in CALLS.iter().zip(expected) {
            let j = parse(text);
            let call = &j.eqns[0].primitive;
            assert_eq!(call.higher_order(), Some(want), "{text}");
            assert!(!call.subjaxprs().is_empty());
            for eqn in &call.subjaxprs()[0].eqns {
                assert_eq!(eqn.primitive.higher_order(), None, "{}", eqn.primitive);
                assert!(eqn.primitive.subjaxprs().is_empty());
            }
        }
    }

    /// `j` with its `sin`s turned into `cos`s, as a new jaxpr.
    fn sin_to_cos(j: &Arc<Jaxpr>) -> Arc<Jaxpr> {
        let mut j = (**j).clone();
        for eqn in &mut j.eqns {
            if let Primitive::Unary(UnaryOp::Sin) = eqn.primitive {
                eqn.primitive = Primitive::Unary(UnaryOp::Cos);
            }
        }
        Arc::new(j)
    }

    #[test]
    fn mapping_the_identity_prints_the_same() {
        for text in CALLS {
            let before = parse(text);
            let mut after = before.clone();
            after.eqns[0].primitive = before.eqns[0].primitive.map_subjaxprs(Arc::clone);
            assert_eq!(pp_jaxpr(&after), pp_jaxpr(&before));
        }
    }

    #[test]
    fn mapping_replaces_exactly_the_nested_jaxpr() {
        for text in CALLS {
            let before = parse(text);
            let old = &before.eqns[0].primitive;
            let mut new_body = None;
            let new = old.map_subjaxprs(|body| {
                let changed = sin_to_cos(body);
                new_body = Some(changed.clone());
                changed
            });
            let new_body = new_body.expect("f is called once");
            assert_eq!(new.kind(), old.kind());
            assert!(Arc::ptr_eq(new.subjaxprs()[0], &new_body), "{old}: the new jaxpr is held as returned");
            // Every other parameter is unchanged.
            for ((k_old, p_old), (k_new, p_new)) in old.params().into_iter().zip(new.params()) {
                assert_eq!(k_old, k_new);
                match (p_old, p_new) {
                    (Param::Jaxpr(_), Param::Jaxpr(j)) => assert!(Arc::ptr_eq(&j, &new_body)),
                    // `cond`'s one branch.
                    (Param::Tuple(_), Param::Tuple(js)) if matches!(js.as_slice(), [Param::Jaxpr(_)]) => {
                        let [Param::Jaxpr(j)] = js.as_slice() else { unreachable!("matched above") };
                        assert!(Arc::ptr_eq(j, &new_body));
                    }
                    (p_old, p_new) => assert_eq!(format!("{p_old:?}"), format!("{p_new:?}"), "{old}: {k_old}"),
                }
            }
            let mut after = before.clone();
            after.eqns[0].primitive = new;
            verify(&after).unwrap();
            assert_eq!(pp_jaxpr(&after), pp_jaxpr(&before).replace(" sin ", " cos "));
        }
    }

    #[test]
    fn mapping_keeps_a_closed_jaxprs_consts() {
        let body = Arc::new(parse("{ lambda a:f32[3] ; b:f32[3]. let c:f32[3] = mul a b in (c,) }"));
        let consts = vec![Array::F32(ndarray::ArrayD::ones(vec![3]))];
        let jit = Primitive::Jit {
            name: "g".into(),
            jaxpr: ClosedJaxpr { jaxpr: body, consts },
            options: JitOptions::default(),
        };
        let mapped = jit.map_subjaxprs(|j| Arc::new((**j).clone()));
        let Primitive::Jit { jaxpr, .. } = &mapped else { panic!("{mapped} is not a jit") };
        assert_eq!(jaxpr.consts.len(), 1);
        assert_eq!(jaxpr.consts[0].shape(), &[3]);
        let f32_3 = Aval::new(DType::F32, vec![3]);
        assert_eq!(shape_rule(&mapped, std::slice::from_ref(&f32_3)), Ok(vec![f32_3]));
    }

    #[test]
    fn try_map_returns_the_first_error_and_leaves_plain_primitives_alone() {
        let remat = parse(CALLS[3]).eqns[0].primitive.clone();
        assert_eq!(remat.try_map_subjaxprs(|_| Err("no")).err(), Some("no"));
        let sin = Primitive::Unary(UnaryOp::Sin);
        let mapped = sin.try_map_subjaxprs(|_| -> Result<Arc<Jaxpr>, &str> { panic!("sin has no nested jaxpr") });
        assert_eq!(mapped.map(|p| p.kind()), Ok(PrimitiveKind::Unary(UnaryOp::Sin)));
    }

    #[test]
    fn every_name_is_one_kind() {
        let names = Primitive::all_names();
        for name in &names {
            let kind = PrimitiveKind::from_name(name).expect("a known name");
            assert_eq!(kind.name(), *name);
        }
        let distinct: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "a name is listed twice");
        assert_eq!(PrimitiveKind::from_name("sinc"), None);
        assert_eq!(PrimitiveKind::from_name("sinh"), Some(PrimitiveKind::Unary(UnaryOp::Sinh)));
        assert_eq!(UnaryOp::from_name("stop_gradient"), Some(UnaryOp::StopGradient));
        assert_eq!(
            ReduceOp::ALL.map(ReduceOp::name),
            ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor"]
        );
    }
}
